"""Record the machine and software versions of this run: results/environment.json.

    python workflow/scripts/environment.py --preset smoke --profiler torch [--nsys PATH] \
        --out results/environment.json [results/timing/LABEL.json ...]

Timing files (benchmark records) give the device the benchmark ran on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from embprof.atomic import write_json  # noqa: E402
from embprof.workflow.environment import describe_environment  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--profiler", required=True, choices=["nsys", "torch"])
    parser.add_argument("--nsys", default=None)
    parser.add_argument("--out", required=True)
    parser.add_argument("timing", nargs="*", help="timing files: JSON lists of benchmark records")
    args = parser.parse_args(argv)
    records = []
    for path in args.timing:
        try:
            with open(path, encoding="utf-8") as handle:
                records += json.load(handle)
        except (OSError, ValueError, TypeError) as exc:
            print(f"environment: error: {path}: {exc}", file=sys.stderr)
            return 1
    env = describe_environment(args.preset, args.profiler, args.nsys, records)
    write_json(args.out, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
