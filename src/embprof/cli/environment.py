"""Record the machine and software versions of this run: environment.json.

    embprof environment --preset smoke --profiler torch [--nsys PATH] [SUITE OPTIONS] \
        --out results/environment.json [results/timing/LABEL.json ...]

Timing files (benchmark records) give the device the benchmark ran on and the
provenance of its numbers (commit, kernel path, versions, clocks, host load).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embprof.cli.options import add_suite, suite_of

HELP = "record the machine and versions of this run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True)
    parser.add_argument("--profiler", required=True, choices=["nsys", "torch"])
    parser.add_argument("--nsys", default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("timing", nargs="*", type=Path, help="timing files: JSON lists of benchmark records")
    add_suite(parser)


def run(args: argparse.Namespace) -> None:
    from embprof.results.environment import write_environment
    from embprof.results.records import read_records
    from embprof.workflow.environment import describe_environment

    records = [record for path in args.timing for record in read_records(path)]
    env = describe_environment(args.preset, args.profiler, args.nsys, records, suite_of(args, check=False).root)
    write_environment(args.out, env)
