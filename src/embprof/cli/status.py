"""Merge every config's step records into its status (ok, or the failed step and its log tail).

    embprof status [--results-dir results]

Reads ``configs.tsv`` and each config's ``steps/profile/<label>.json`` and
``steps/timing/<label>.json``, writes ``status/<label>.json`` per config and
removes the statuses of configs no longer in the table. One job for all
configs: the workflow's only checkpoint after collection.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "merge every config's step records into its status"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="the results folder")


def run(args: argparse.Namespace) -> None:
    from embprof.results.paths import ResultsPaths
    from embprof.results.steps import write_statuses

    paths = ResultsPaths(args.results_dir)
    written = write_statuses(paths)
    print(f"{paths.status_dir}: {len(written)} config status(es)")
