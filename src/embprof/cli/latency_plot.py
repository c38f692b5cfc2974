"""The latency plot of every timed config: a PNG and a self-contained HTML page.

    embprof latency-plot --results results/benchmark_results.json \
        --png results/plots/latency.png --html results/plots/latency.html \
        [--plotly-js results/plotly.min.js]
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "draw the latency plot of every timed config (PNG and HTML)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, required=True, help="benchmark_results.json")
    parser.add_argument("--png", type=Path, required=True, help="static image to write")
    parser.add_argument("--html", type=Path, required=True, help="interactive page to write")
    parser.add_argument("--plotly-js", type=Path, default=None,
                        help="a shared plotly.js file for the page to load (default: the page holds its own copy)")


def run(args: argparse.Namespace) -> None:
    from embprof.pages.figure_pages import write_latency_plot
    from embprof.results.records import read_results
    from embprof.results.run import Run

    run = Run(str(args.results), read_results(args.results))  # the run's records: all the plot shows
    print(write_latency_plot(run, args.png, args.html, args.plotly_js))
