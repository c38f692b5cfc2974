"""plotly.js, once per results folder, for the figure steps' pages to load.

    embprof plotly-js --out results/plotly.min.js

The version plotly.py ships (the one that drew the figures). The sunburst,
latency and bandwidth pages load it from there, so that each page is small;
the report holds its own copy and opens anywhere on its own.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write plotly.js for the figure pages to share"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="the file to write (results/plotly.min.js)")


def run(args: argparse.Namespace) -> None:
    from embprof.pages.figure_pages import write_plotly_js

    print(write_plotly_js(args.out))
