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
    return run_guarded("aggregate.py", lambda: write_results(merge_timings(args.timings), args.out))


if __name__ == "__main__":
    sys.exit(main())
