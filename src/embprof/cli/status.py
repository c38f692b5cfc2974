"""Merge one config's step records into its status (ok, or the failed step and its log tail).

    embprof status --label LABEL --test-id ID \
        results/steps/profile/LABEL.json results/steps/timing/LABEL.json \
        --out results/status/LABEL.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "merge a config's step records into its status"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("records", nargs="+", type=Path, help="step records of this config")
    parser.add_argument("--label", required=True)
    parser.add_argument("--test-id", required=True)
    parser.add_argument("--out", type=Path, required=True)


def run(args: argparse.Namespace) -> None:
    from embprof.results.steps import StepRecord, merge_status, write_status

    records = [StepRecord.read(path) for path in args.records]
    write_status(args.out, merge_status(args.label, args.test_id, records))
