"""Profile one benchmark config in its own profiler process (nsys or the torch profiler).

    python workflow/scripts/profile.py --test-id ID --label LABEL --preset smoke \
        --profiler torch --trace results/traces/LABEL.kineto.json.gz \
        --record results/steps/profile/LABEL.json [--log LOG] [--nsys PATH] \
        [--num-iterations N] [--no-torchrec] [--extra-arg=ARG ...]

A benchmark crash is data: the trace is left empty and the record says
failed, with the log tail, so the other configs and the report go on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from embprof.workflow.benchcli import nsys_profile_command, torch_profile_command  # noqa: E402
from embprof.workflow.profiler import TRACE_SUFFIX  # noqa: E402
from embprof.workflow.runner import StepContext, run_and_publish, scratch_dir  # noqa: E402
from embprof.workflow.steps import mark_failed_output  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-id", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--preset", required=True)
    parser.add_argument("--profiler", required=True, choices=sorted(TRACE_SUFFIX))
    parser.add_argument("--nsys", default=None, help="nsys binary (profiler nsys)")
    parser.add_argument("--num-iterations", type=int, default=None)
    parser.add_argument("--no-torchrec", action="store_true")
    parser.add_argument("--extra-arg", action="append", default=[], help="passed to the benchmark")
    parser.add_argument("--trace", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--log", default=None, help="the log this step writes to (for the record)")
    args = parser.parse_args(argv)

    suffix = TRACE_SUFFIX[args.profiler]
    if not args.trace.endswith(suffix):
        parser.error(f"--trace must end in {suffix} for profiler {args.profiler}")
    if args.profiler == "nsys" and not args.nsys:
        parser.error("--profiler nsys needs --nsys PATH")

    ctx = StepContext("profile", args.label, args.test_id, args.log)
    options = dict(
        preset=args.preset, num_iterations=args.num_iterations,
        torchrec=not args.no_torchrec, extra_args=args.extra_arg,
    )
    with scratch_dir(args.trace, "profile", args.label) as scratch:
        produced = scratch / f"{args.label}{suffix}"
        if args.profiler == "nsys":
            command = nsys_profile_command(
                args.nsys, str(scratch / args.label), args.test_id, **options
            )
        else:
            command = torch_profile_command(args.test_id, trace_dir=str(scratch), **options)
        record = run_and_publish(
            ctx, command, produced,
            publish=lambda path: os.replace(path, args.trace),
            write_failed=lambda: mark_failed_output(args.trace),
        )
    record.write(args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
