"""Merge per-config timing JSON files into one benchmark_results.json, sorted by label.

python workflow/scripts/aggregate.py --out results/benchmark_results.json results/timing/*.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embprof.report.aggregate import merge_timings, write_results
from embprof.report.cli import run_guarded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="merged JSON list to write")
    parser.add_argument("timings", nargs="+", type=Path, help="per-config timing JSON files")
    args = parser.parse_args(argv)

    def aggregate() -> None:
        records = merge_timings(args.timings)
        write_results(records, args.out)
        failed = sum(r.get("status", "ok") != "ok" for r in records)
        print(f"{args.out}: {len(records)} records, {failed} failed")

    return run_guarded("aggregate.py", aggregate)


if __name__ == "__main__":
    sys.exit(main())
