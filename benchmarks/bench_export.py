"""What static export's deadline costs: export_pngs (a render worker with a deadline, killed with its
browser past it) against the same kaleido session run in this process, side by side, one run.

    python benchmarks/bench_export.py [--figures 1 6] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import plotly.graph_objects as go

from embprof.plots.export import PngJob, export_pngs, find_browser
from embprof.plots.render_worker import render_into


def seconds(run, *args) -> float:
    start = time.perf_counter()
    run(*args)
    return time.perf_counter() - start


def in_process(jobs: list[PngJob], browser: str, result: Path) -> None:
    asyncio.run(render_into(jobs, browser, result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=int, nargs="+", default=[1, 6])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    browser = find_browser()
    print(f"{'figures':>7} {'in process s (min / median)':>28} {'worker s (min / median)':>24} {'ratio (median)':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.figures:
            jobs = [PngJob(go.Figure(go.Bar(x=["a", "b"], y=[1, i])), Path(tmp, f"{i}.png")) for i in range(n)]
            here, worker = [], []
            for _ in range(args.repeats):  # interleaved, so both see the same machine
                here.append(seconds(in_process, jobs, browser, Path(tmp, "result.pickle")))
                worker.append(seconds(export_pngs, jobs))
            print(f"{n:>7} {min(here):>13.2f} / {statistics.median(here):<12.2f} {min(worker):>10.2f} / {statistics.median(worker):<11.2f} "
                  f"{statistics.median(worker) / statistics.median(here):>14.2f}x")


if __name__ == "__main__":
    main()
