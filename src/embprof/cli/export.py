"""Export one nsys report to SQLite (``nsys export --type sqlite``), atomically.

    embprof export [--nsys PATH] results/traces/LABEL.nsys-rep --out results/sqlite/LABEL.sqlite
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "export one nsys report to SQLite"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", type=Path, help=".nsys-rep file")
    parser.add_argument("--nsys", default="nsys", help="nsys binary")
    parser.add_argument("--out", type=Path, required=True, help=".sqlite file to write")


def run(args: argparse.Namespace) -> None:
    from embprof.trace.nsys import export_sqlite

    export_sqlite(args.report, args.out, args.nsys)
