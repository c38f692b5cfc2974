"""Time one benchmark config the normal way (no profiler): one JSON record in a list.

    embprof timing --test-id ID --label LABEL --preset smoke \
        --out results/timing/LABEL.json --record results/steps/timing/LABEL.json \
        [--log LOG] [--num-iterations N] [--repeats R] [--no-torchrec] [--extra-arg=ARG ...] \
        [SUITE OPTIONS: see embprof collect]

A benchmark crash is data: the output is an empty list and the record says
failed, with the log tail.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embprof.cli.options import add_run_options, add_step, add_suite, suite_of
from embprof.errors import ConfigError

HELP = "time one config, unprofiled (its benchmark record)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_step(parser)
    add_run_options(parser)
    parser.add_argument(
        "--repeats", type=int, default=None,
        help="timed passes over the batches (the benchmark's --repeats; default: its own)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the timing file to write")
    add_suite(parser)


def run(args: argparse.Namespace) -> None:
    from embprof.workflow.runner import RunOptions, StepContext, time_config

    ctx = StepContext("timing", args.label, args.test_id, args.log, suite_of(args))
    if args.repeats is not None and args.repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {args.repeats}")
    options = RunOptions(args.preset, args.num_iterations, not args.no_torchrec, tuple(args.extra_arg))
    record = time_config(ctx, options, args.out.resolve(), repeats=args.repeats)
    record.write(args.record)
