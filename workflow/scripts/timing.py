"""Time one benchmark config the normal way (no profiler): one JSON record in a list.

    python workflow/scripts/timing.py --test-id ID --label LABEL --preset smoke \
        --out results/timing/LABEL.json --record results/steps/timing/LABEL.json \
        [--log LOG] [--num-iterations N] [--no-torchrec] [--extra-arg=ARG ...]

A benchmark crash is data: the output is an empty list and the record says
failed, with the log tail.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from embprof.atomic import write_json  # noqa: E402
from embprof.workflow.benchcli import timing_command  # noqa: E402
from embprof.workflow.runner import StepContext, run_and_publish, scratch_dir  # noqa: E402


def publish_record(produced: Path, label: str, out: str) -> None:
    """Check the benchmark's file holds exactly one record of this config, then write it."""
    try:
        records = json.loads(produced.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{produced.name} is not JSON: {exc}") from None
    if not (isinstance(records, list) and len(records) == 1 and isinstance(records[0], dict)):
        raise ValueError(f"{produced.name} must hold a list with one record")
    if records[0].get("label") != label:
        raise ValueError(f"record label {records[0].get('label')!r} is not {label!r}")
    write_json(out, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-id", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--preset", required=True)
    parser.add_argument("--num-iterations", type=int, default=None)
    parser.add_argument("--no-torchrec", action="store_true")
    parser.add_argument("--extra-arg", action="append", default=[], help="passed to the benchmark")
    parser.add_argument("--out", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--log", default=None, help="the log this step writes to (for the record)")
    args = parser.parse_args(argv)

    ctx = StepContext("timing", args.label, args.test_id, args.log)
    with scratch_dir(args.out, "timing", args.label) as scratch:
        produced = scratch / f"{args.label}.json"
        command = timing_command(
            args.test_id, args.preset, str(produced), num_iterations=args.num_iterations,
            torchrec=not args.no_torchrec, extra_args=args.extra_arg,
        )
        record = run_and_publish(
            ctx, command, produced,
            publish=lambda path: publish_record(path, args.label, args.out),
            write_failed=lambda: write_json(args.out, []),
        )
    record.write(args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
