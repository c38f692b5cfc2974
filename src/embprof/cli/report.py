"""Assemble the shareable report of a results folder: index.html, summary.md and figures/*.png.

    embprof report [--results-dir results] [--compare-to PREVIOUS_RESULTS_DIR] [--out-dir DIR]

Reads the folder's configs.tsv, benchmark_results.json, status/, opcalls/,
environment.json, the figure steps' PNGs where they exist (sunburst/,
plots/), and bandwidth/ and peak_bandwidth.json where the folder has them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "assemble the latency report of a results folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="the results folder")
    parser.add_argument("--compare-to", type=Path, help="a previous results/ folder")
    parser.add_argument("--out-dir", type=Path, help="where to write (default: RESULTS_DIR/report)")


def run(args: argparse.Namespace) -> None:
    from embprof.report.build import ReportInputs, build_report
    from embprof.results.paths import ResultsPaths

    paths = ResultsPaths(args.results_dir)
    inputs = ReportInputs(paths, args.out_dir or paths.report_dir, args.compare_to)
    print(f"{build_report(inputs)}: written")
