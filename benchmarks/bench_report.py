"""The report's build time and size on the H200 example, this checkout beside another one.

    python benchmarks/bench_report.py [--baseline-src DIR] [--repeats 5] [--results examples/h200]

Copies the results folder to a temporary one, renders the figure steps' PNGs
there once (so that every build copies them, as in the workflow) and writes an
ok status for every config (the H200 example predates statuses), then builds
the report alternately with this checkout's ``src/`` and the baseline's, each
build in a process of its own, and prints each side's CPU time (user + system
of the process, min and median) and wall time, the size of index.html and
the page's height with every section closed and open (headless Chromium, 1400 px).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = (
    "import sys; from pathlib import Path; from embprof.report.build import ReportInputs, build_report; "
    "from embprof.results.paths import ResultsPaths; "
    "build_report(ReportInputs(ResultsPaths(Path(sys.argv[1])), Path(sys.argv[2])))"
)


def _prepare(results: Path, into: Path) -> Path:
    """The folder copied, with the sunburst and latency PNGs its figure steps would have drawn."""
    from embprof.plots.export import PngJob, export_pngs
    from embprof.plots.latency import latency_figure
    from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
    from embprof.results.paths import ResultsPaths
    from embprof.results.run import Run

    shutil.copytree(results, into, ignore=shutil.ignore_patterns("report", "measurements*"))
    paths, run = ResultsPaths(into), Run.from_folder(into)
    jobs = [PngJob(latency_figure(run.records), paths.latency_png)]
    for label, frame in run.opcalls.items():
        jobs.append(PngJob(sunburst_figure(frame, assign_letter_codes(frame), sunburst_title(label)),
                           paths.sunburst_png(label)))
    export_pngs(jobs)
    # Every config ok, as the workflow's status step writes it (a report before issue 19 needs them).
    from embprof.results.configs import read_configs
    from embprof.results.steps import write_status

    for config in read_configs(paths.configs):
        write_status(paths.status(config.label), {"label": config.label, "test_id": config.test_id, "ok": True,
                                                   "failed_step": None, "returncode": 0, "log": "", "log_tail": ""})
    return into


def _build(src: Path, results: Path, out: Path) -> tuple[float, float]:
    """CPU seconds (user + system of the child) and wall seconds of one build."""
    env = dict(os.environ, PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", BUILD, str(results), str(out)], env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def _heights(index: Path) -> tuple[int, int]:
    from embprof.pages.browser import open_page

    closed = asyncio.run(open_page(index, index.with_name("closed.png"), open_all=False))
    opened = asyncio.run(open_page(index, index.with_name("open.png")))
    return closed.height, opened.height


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "examples" / "h200")
    parser.add_argument("--baseline-src", type=Path, help="the src/ of another checkout")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sides = {"this checkout": ROOT / "src"} | ({"baseline": args.baseline_src} if args.baseline_src else {})
    with tempfile.TemporaryDirectory() as tmp:
        results = _prepare(args.results, Path(tmp) / "results")
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for _ in range(args.repeats):  # interleaved: the machine's noise falls on both sides alike
            for name, src in sides.items():
                times[name].append(_build(src, results, Path(tmp) / name.replace(" ", "_")))
        print(f"report of {args.results} ({args.repeats} builds each, interleaved)")
        print(f"{'side':<15} {'CPU s min':>9} {'median':>7} {'wall s med':>10} {'index.html MB':>13} "
              f"{'px closed':>9} {'px open':>8}")
        for name in sides:
            cpu = [c for c, _ in times[name]]
            wall = [w for _, w in times[name]]
            index = Path(tmp) / name.replace(" ", "_") / "index.html"
            closed, opened = _heights(index)
            print(f"{name:<15} {min(cpu):>9.2f} {statistics.median(cpu):>7.2f} {statistics.median(wall):>10.2f} "
                  f"{index.stat().st_size / 1e6:>13.2f} {closed:>9} {opened:>8}")


if __name__ == "__main__":
    main()
