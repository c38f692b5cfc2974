"""The latency plot of every timed config: a PNG and a self-contained HTML page.

    python workflow/scripts/latency_plot.py --results results/benchmark_results.json \
        --png results/plots/latency.png --html results/plots/latency.html
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embprof.atomic import write_text
from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import figure_div
from embprof.plots.latency import latency_figure, timed_configs
from embprof.report.cli import run_guarded
from embprof.report.html import figure_page
from embprof.report.load import read_results


def write_latency_plot(results: Path, png: Path, html: Path) -> None:
    records = read_results(results)
    fig = latency_figure(records)
    page = figure_page("Latency per iteration", "latency-plot", figure_div(fig, "latency-plot"), [])
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    print(f"{png}, {html}: {len(timed_configs(records))} of {len(records)} configs timed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="benchmark_results.json")
    parser.add_argument("--png", type=Path, required=True, help="static image to write")
    parser.add_argument("--html", type=Path, required=True, help="interactive page to write")
    args = parser.parse_args(argv)
    return run_guarded(
        "latency_plot.py", lambda: write_latency_plot(args.results, args.png, args.html)
    )


if __name__ == "__main__":
    sys.exit(main())
