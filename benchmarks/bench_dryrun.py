"""How long Snakemake takes to decide that a finished results/ folder of N configs is up to date.

Builds a copy of the workflow beside a complete results/ of N configs for every
N asked for (every per-config output present; the files' contents are
stand-ins, as a dry run reads only the configs table and the statuses), with
mtimes in the DAG's order, then times whole ``snakemake -n report`` processes,
the sizes interleaved round by round so that all see the same load. Prints wall
and CPU seconds (user + sys of the Snakemake process and its children), min and
median, per size, against the targets, and how the time grows with the configs.

    python benchmarks/bench_dryrun.py [--configs 10,40,80,160,1000] [--repeats 3] [--json OUT]

The folder holds the files of this workflow and of the one before issue 18 (a
status checkpoint per config), so the script also times an older checkout: copy
it there and run it with that checkout's venv.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from embprof.labels import make_label
from embprof.results.configs import BenchConfig, write_configs
from embprof.results.paths import ResultsPaths
from embprof.results.steps import StepRecord, merge_status

REPO = Path(__file__).resolve().parents[1]
PARTS = ("Snakefile", "rules", "report", "config", "envs", "profiles", "suite", "src")
SUITE = "suite/benchmark_batched_dynamicemb_tables.py"
TARGETS = {160: 2.0, 1000: 8.0}  # seconds, issue 18


def labels(n: int) -> list[str]:
    modes = ("gpu", "caching", "no_caching", "no_hbm")
    out = []
    for i in range(n):
        mode = modes[i % 4]
        out.append(make_label(2 + i // 4, 512, 16, ("adam", "sgd")[i % 2], mode, "none",
                              [4096] * (2 + i // 4), 1.0 if mode == "caching" else None))
    return out


def fill_results(root: Path, names: list[str]) -> None:
    """Every file a finished run leaves (named by the results contract), each layer of the DAG a
    second newer than the one before."""
    L = ResultsPaths(root / "results")
    configs = [BenchConfig(f"{SUITE}::TestX::test_x[{name}]", name) for name in names]
    layers: list[dict[Path, str]] = [{L.benchmark("collect"): ""}, {}, {}, {}, {}, {}]
    for c in configs:
        records = [StepRecord(step, c.label, c.test_id, True, 0, str(L.log(step, c.label)))
                   for step in ("profile", "timing")]
        for record in records:
            layers[1][L.step(record.step, c.label)] = json.dumps(record.__dict__)
        layers[1] |= {L.trace(c.label, "torch"): "", L.timing(c.label): "[]",
                      L.benchmark("profile", c.label): "", L.benchmark("timing", c.label): ""}
        layers[2] |= {L.status(c.label): json.dumps(merge_status(c.label, c.test_id, records)),
                      L.benchmark("status", c.label): "",  # where status was a checkpoint per config
                      L.opcalls(c.label): "", L.busy(c.label): "", L.benchmark("breakdown", c.label): ""}
        layers[4] |= {L.sunburst_png(c.label): "", L.sunburst_html(c.label): "", L.bandwidth(c.label): "",
                      L.benchmark("sunburst", c.label): "", L.benchmark("bandwidth", c.label): ""}
    # The status checkpoint's output is the folder: Snakemake dates it by a timestamp file in it.
    layers[2] |= {L.benchmark_results: "[]", L.benchmark("aggregate"): "",
                  L.status_dir / ".snakemake_timestamp": "", L.benchmark("status"): ""}
    layers[3] |= {L.environment: "{}", L.peak: "{}",
                  L.benchmark("environment"): "", L.benchmark("peak_bandwidth"): ""}
    # Files of steps added in issue 18, named as ResultsPaths names them (an older version lacks them).
    plots = L.latency_png.parent
    layers[3] |= {L.root / "plotly.min.js": "", L.benchmark("plotly_js"): ""}
    layers[4] |= {L.latency_png: "", L.latency_html: "", L.benchmark("latency_plot"): "",
                  plots / "bandwidth.png": "", plots / "bandwidth.html": "", L.benchmark("bandwidth_plot"): ""}
    layers[5] |= {L.report_html: "", L.report_summary: "", L.benchmark("report"): ""}
    write_configs(L.configs, configs)
    stamp = time.time() - 100
    os.utime(L.configs, (stamp, stamp))
    for depth, files in enumerate(layers):
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            os.utime(path, (stamp + depth + 1, stamp + depth + 1))


def workflow_copy(root: Path, n: int) -> Path:
    workdir = root / f"n{n}"
    workdir.mkdir(parents=True)
    for part in PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, workdir / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, workdir / part)
    fill_results(workdir, labels(n))
    return workdir


def dry_run(workdir: Path) -> dict:
    """One whole ``snakemake -n report``: wall and CPU seconds; fails loudly if it planned a job."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "report", "--config", "profiler=torch"],
                          cwd=workdir, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if "Nothing to be done" not in done.stdout + done.stderr:
        raise SystemExit(f"bench_dryrun: {workdir.name}: the dry run planned jobs:\n{(done.stdout + done.stderr)[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="10,40,80,160,1000", help="config counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    sizes = [int(n) for n in args.configs.split(",") if n]
    with tempfile.TemporaryDirectory(prefix="bench_dryrun_") as tmp:
        dirs = {n: workflow_copy(Path(tmp), n) for n in sizes}
        runs: dict[int, list[dict]] = {n: [] for n in sizes}
        loads = []
        for _ in range(args.repeats):
            loads.append(os.getloadavg()[0])
            for n in sizes:
                runs[n].append(dry_run(dirs[n]))
    got = {n: {f"{k}_{stat}": fn(r[k] for r in rs) for k in ("wall", "cpu")
               for stat, fn in (("min", min), ("median", statistics.median))} for n, rs in runs.items()}
    print(f"load average (1 min) at each round: {', '.join(f'{x:.1f}' for x in loads)} on {os.cpu_count()} CPUs; "
          f"{args.repeats} rounds, min / median")
    print(f"{'configs':>8}{'wall s':>16}{'CPU s':>16}{'target':>9}{'wall / config':>15}")
    for n in sizes:
        g = got[n]
        target = f"{TARGETS[n]:.0f} s" if n in TARGETS else ""
        print(f"{n:>8}{g['wall_min']:>8.2f} /{g['wall_median']:>6.2f}{g['cpu_min']:>8.2f} /{g['cpu_median']:>6.2f}"
              f"{target:>9}{1000 * g['wall_min'] / n:>12.1f} ms")
    lo, hi = min(sizes), max(sizes)
    if lo != hi:
        print(f"from {lo} to {hi} configs ({hi / lo:.0f}x) the dry run takes {got[hi]['wall_min'] / got[lo]['wall_min']:.1f}x"
              f" the wall time, {got[hi]['cpu_min'] / got[lo]['cpu_min']:.1f}x the CPU time")
    for n, target in TARGETS.items():
        if n in got:
            met = "met" if got[n]["wall_min"] <= target else "NOT met"
            print(f"{n} configs: {got[n]['wall_min']:.2f} s wall (target <= {target:.0f} s): {met}")
    if args.json:
        args.json.write_text(json.dumps({str(n): g for n, g in got.items()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
