"""Merge per-config timing files into one benchmark_results.json, sorted by label.

    embprof aggregate --out results/benchmark_results.json results/timing/*.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "merge the timing files into benchmark_results.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="merged JSON list to write")
    parser.add_argument("timings", nargs="+", type=Path, help="per-config timing JSON files")


def run(args: argparse.Namespace) -> None:
    from embprof.results.records import merge_results, write_results

    records = merge_results(args.timings)
    write_results(args.out, records)
    failed = sum(r.get("status", "ok") != "ok" for r in records)
    print(f"{args.out}: {len(records)} records, {failed} failed")
