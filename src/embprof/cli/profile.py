"""Profile one benchmark config in its own profiler process (nsys or the torch profiler).

    embprof profile --test-id ID --label LABEL --preset smoke --profiler torch \
        --trace results/traces/LABEL.kineto.json.gz --record results/steps/profile/LABEL.json \
        [--log LOG] [--nsys PATH] [--num-iterations N] [--no-torchrec] [--extra-arg=ARG ...] \
        [SUITE OPTIONS: see embprof collect]

A benchmark crash is data: the trace is left empty and the record says
failed, with the log tail, so the other configs and the report go on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embprof.cli.options import add_run_options, add_step, add_suite, suite_of

HELP = "profile one config (one profiler process)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_step(parser)
    add_run_options(parser)
    parser.add_argument("--profiler", required=True, choices=["nsys", "torch"])
    parser.add_argument("--nsys", default=None, help="nsys binary (profiler nsys)")
    parser.add_argument("--trace", type=Path, required=True, help="the trace to write")
    add_suite(parser)


def run(args: argparse.Namespace) -> None:
    from embprof.workflow.runner import RunOptions, StepContext, profile_config

    ctx = StepContext("profile", args.label, args.test_id, args.log, suite_of(args))
    options = RunOptions(args.preset, args.num_iterations, not args.no_torchrec, tuple(args.extra_arg))
    record = profile_config(ctx, options, args.profiler, args.trace.resolve(), args.nsys)
    record.write(args.record)
