"""Checks that make a GPU run's numbers trustworthy, as Markdown: per-op rows against busy time,
profiled iterations against the unprofiled timing, DynamicEmb against TBE beside the reference.

    embprof checks results/ [--out examples/h200/CHECKS.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "a results folder's consistency and overhead checks (Markdown)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="a results/ folder (benchmark_results.json, opcalls/)")
    parser.add_argument("--out", type=Path, help="write the Markdown here (default: stdout)")


def run(args: argparse.Namespace) -> None:
    from embprof.atomic import write_text
    from embprof.report.checks import checks_markdown
    from embprof.results.run import Run

    text = checks_markdown(Run.from_folder(args.results))
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_text(args.out, text)
