"""The chart of achieved memory bandwidth, % of peak per config and op: a PNG and an HTML page.

    embprof bandwidth-plot [--results-dir results] \
        --png results/plots/bandwidth.png --html results/plots/bandwidth.html \
        [--plotly-js results/plotly.min.js]

Reads the folder's run (embprof.results.Run): the configs it shows, their bandwidth/ CSVs and
peak_bandwidth.json.
Drawn once per change of the bandwidth CSVs, not on every report run: the report
copies the PNG.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "draw the chart of %% of peak memory bandwidth per config and op (PNG and HTML)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="the results folder")
    parser.add_argument("--png", type=Path, required=True, help="static image to write")
    parser.add_argument("--html", type=Path, required=True, help="interactive page to write")
    parser.add_argument("--plotly-js", type=Path, default=None,
                        help="a shared plotly.js file for the page to load (default: the page holds its own copy)")


def run(args: argparse.Namespace) -> None:
    from embprof.pages.figure_pages import write_bandwidth_plot
    from embprof.results.run import Run

    print(write_bandwidth_plot(Run.from_folder(args.results_dir), args.png, args.html, args.plotly_js))
