"""One config's sunburst (a ring per phase, stage and op, per backend): a PNG and an HTML page.

    embprof sunburst --opcalls results/opcalls/opcalls__LABEL.csv \
        --png results/sunburst/LABEL.png --html results/sunburst/LABEL.html \
        [--plotly-js results/plotly.min.js]

The busy-time sidecar beside the CSV (opcalls__LABEL.busy.json), when there
is one, adds each backend's busy time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "draw one config's sunburst (PNG and HTML)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opcalls", type=Path, required=True, help="opcalls__<label>.csv")
    parser.add_argument("--label", help="the config's label (default: from the CSV's file name)")
    parser.add_argument("--png", type=Path, required=True, help="static image to write")
    parser.add_argument("--html", type=Path, required=True, help="interactive page to write")
    parser.add_argument("--plotly-js", type=Path, default=None,
                        help="a shared plotly.js file for the page to load (default: the page holds its own copy)")


def run(args: argparse.Namespace) -> None:
    from embprof.pages.figure_pages import write_sunburst
    from embprof.results.paths import label_from_file
    from embprof.results.run import Run

    label = args.label or label_from_file(args.opcalls)
    print(write_sunburst(Run.from_opcalls(args.opcalls, label), label, args.png, args.html, args.plotly_js))
