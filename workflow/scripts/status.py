"""Merge one config's step records into results/status/LABEL.json (ok, or the failed step).

    python workflow/scripts/status.py --label LABEL --test-id ID \
        results/steps/profile/LABEL.json results/steps/timing/LABEL.json \
        --out results/status/LABEL.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from embprof.atomic import write_json  # noqa: E402
from embprof.workflow.steps import StepRecord, merge_status  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="step records of this config")
    parser.add_argument("--label", required=True)
    parser.add_argument("--test-id", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        records = [StepRecord.read(path) for path in args.records]
    except (OSError, ValueError) as exc:
        print(f"status: error: {exc}", file=sys.stderr)
        return 1
    wrong = [r.label for r in records if r.label != args.label]
    if wrong:
        print(f"status: error: records of other configs given: {wrong}", file=sys.stderr)
        return 1
    write_json(args.out, merge_status(args.label, args.test_id, records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
