"""Merge EmbeddingCollection benchmark records (one JSON list per run) into one list.

python workflow/scripts/embedding_collection_results.py RUN.json... --out results/embedding_collection/results.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmark/

from benchmark.embedding_collection.records import check_record  # noqa: E402
from benchmark.results import ResultsFileError, read_records  # noqa: E402
from embprof.atomic import write_json  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, metavar="RUN.json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    merged = []
    try:
        for path in args.runs:
            for record in read_records(path):
                check_record(record)
                merged.append(record)
    except (OSError, ResultsFileError, ValueError) as exc:
        print(f"embedding_collection_results: {path}: {exc}", file=sys.stderr)
        return 1
    write_json(args.out, merged, indent=1)
    print(f"{args.out}: {len(merged)} record(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
