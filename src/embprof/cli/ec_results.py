"""Merge EmbeddingCollection benchmark records (one JSON list per run) into one list.

    embprof ec-results RUN.json... --out results/embedding_collection/results.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "merge the EmbeddingCollection runs' records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN.json")
    parser.add_argument("--out", type=Path, required=True)


def run(args: argparse.Namespace) -> None:
    from embprof.atomic import write_json
    from embprof.errors import ContractError
    from embprof.results.records import EC_RESULT_FIELDS, check_record, read_records

    merged = []
    for path in args.runs:
        for record in read_records(path):
            try:
                check_record(record, EC_RESULT_FIELDS)
            except ContractError as exc:
                raise ContractError(f"{path}: {exc}") from None
            merged.append(record)
    write_json(args.out, merged, indent=1)
    print(f"{args.out}: {len(merged)} record(s)")
