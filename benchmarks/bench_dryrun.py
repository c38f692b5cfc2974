"""How long Snakemake takes to decide that a 40-config results/ folder is up to date.

Builds a copy of the workflow beside a complete results/ of N configs (every
per-config output present; the files' contents are stand-ins, as a dry run
reads only the configs table and the profile records), brings the mtimes into
DAG order with ``snakemake --touch``, then times ``snakemake -n report``.

    python benchmarks/bench_dryrun.py [--configs 40] [--repeats 3] [--target 5]
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
from embprof.results.steps import StepRecord, merge_status

REPO = Path(__file__).resolve().parents[1]
PARTS = ("Snakefile", "rules", "report", "config", "envs", "profiles", "benchmark", "src")
SUITE = "benchmark/benchmark_batched_dynamicemb_tables.py"


def labels(n: int) -> list[str]:
    modes = ("gpu", "caching", "no_caching", "no_hbm")
    out = []
    for i in range(n):
        mode = modes[i % 4]
        out.append(make_label(2 + i // 4, 512, 16, ("adam", "sgd")[i % 2], mode, "none",
                              [4096] * (2 + i // 4), 1.0 if mode == "caching" else None))
    return out


def fill_results(root: Path, names: list[str]) -> None:
    results = root / "results"
    configs = [BenchConfig(f"{SUITE}::TestX::test_x[{name}]", name) for name in names]
    write_configs(results / "configs.tsv", configs)
    files = {"benchmark_results.json": "[]",
             "environment.json": "{}", "peak_bandwidth.json": "{}",
             "plots/latency.png": "", "plots/latency.html": "",
             "report/index.html": "", "report/summary.md": "", "benchmarks/report.tsv": ""}
    for c in configs:
        records = [StepRecord(step, c.label, c.test_id, True, 0, f"results/logs/{step}/{c.label}.log")
                   for step in ("profile", "timing")]
        for record in records:
            record.write(results / "steps" / record.step / f"{c.label}.json")
        files[f"status/{c.label}.json"] = json.dumps(merge_status(c.label, c.test_id, records))
        for name in (f"traces/{c.label}.kineto.json.gz", f"timing/{c.label}.json",
                     f"bandwidth/bandwidth__{c.label}.csv", f"opcalls/opcalls__{c.label}.csv",
                     f"opcalls/opcalls__{c.label}.busy.json", f"sunburst/{c.label}.png",
                     f"sunburst/{c.label}.html"):
            files[name] = ""
    for name, text in files.items():
        path = results / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", *args, "--config", "profiler=torch"],
                          cwd=workdir, capture_output=True, text=True, check=False)


def _children_cpu() -> float:
    """CPU seconds of finished child processes: what a dry run costs, whatever the machine's load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=float, default=5.0, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_dryrun_") as tmp:
        workdir = Path(tmp)
        for part in PARTS:
            src = REPO / part
            if src.is_dir():
                shutil.copytree(src, workdir / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(src, workdir / part)
        fill_results(workdir, labels(args.configs))
        touched = snakemake(workdir, "--touch", "--cores", "1", "report")
        if touched.returncode != 0:
            print(f"bench_dryrun: snakemake --touch failed:\n{touched.stderr[-2000:]}", file=sys.stderr)
            return 1
        times, cpu = [], []
        for _ in range(args.repeats):
            start, start_cpu = time.perf_counter(), _children_cpu()
            done = snakemake(workdir, "-n", "report")
            times.append(time.perf_counter() - start)
            cpu.append(_children_cpu() - start_cpu)
            if "Nothing to be done" not in done.stdout + done.stderr:
                print(f"bench_dryrun: the dry run planned jobs:\n{done.stdout[-2000:]}", file=sys.stderr)
                return 1
    print(json.dumps({"configs": args.configs, "wall_s": [round(t, 2) for t in times],
                      "cpu_s": [round(t, 2) for t in cpu], "load_avg_1min": os.getloadavg()[0]}))
    print(f"{'':34}{'measured':>10}{'target':>10}{'ratio':>8}")
    for name, values in (("wall", times), ("cpu (user+sys)", cpu)):
        for stat, value in (("best", min(values)), ("median", statistics.median(values))):
            row = f"dry run {name}, {stat} (s)"
            print(f"{row:34}{value:10.2f}{args.target:10.2f}{value / args.target:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
