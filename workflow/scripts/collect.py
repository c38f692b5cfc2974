"""List the benchmark configs to run: ``pytest --collect-only -q`` -> results/configs.tsv.

    python workflow/scripts/collect.py --preset smoke [--select EXPR] [--label SUBSTR ...] \
        [--extra-arg=--total-cap=N] --out results/configs.tsv
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from embprof.atomic import write_text  # noqa: E402
from embprof.workflow.benchcli import SUITE, collect_command  # noqa: E402
from embprof.workflow.configs import format_table, parse_collected, select_by_labels  # noqa: E402

NO_TESTS_COLLECTED = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--select", default=None, help="pytest -k expression")
    parser.add_argument("--label", action="append", default=[],
                        help="keep configs whose label contains this (any of them; repeatable)")
    parser.add_argument("--extra-arg", action="append", default=[],
                        help="passed to the benchmark (size options that shape labels, e.g. --total-cap=N)")
    parser.add_argument("--suite", default=SUITE)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    command = collect_command(args.preset, args.select, args.suite, extra_args=args.extra_arg)
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout + done.stderr)
    if done.returncode == NO_TESTS_COLLECTED:
        return _fail(f"no benchmark configs match select={args.select!r}")
    if done.returncode != 0:
        return _fail(f"pytest --collect-only exited with {done.returncode} (see above)")
    try:
        configs = select_by_labels(parse_collected(done.stdout), args.label)
    except ValueError as exc:
        return _fail(str(exc))
    if not configs:
        return _fail(f"no benchmark configs match select={args.select!r} labels={args.label}")
    write_text(args.out, format_table(configs))
    print(f"{len(configs)} configs -> {args.out}")
    return 0


def _fail(message: str) -> int:
    print(f"collect: error: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
