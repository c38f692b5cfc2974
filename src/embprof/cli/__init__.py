"""The ``embprof`` command: one subcommand per workflow step, each what its rule runs.

Every subcommand module holds ``HELP``, ``add_arguments(parser)`` and
``run(args)``; it imports its heavy dependencies inside ``run``, so ``embprof
--help`` stays fast. A failure of the input or the machine
(:class:`embprof.errors.EmbprofError`, or an OS error) ends in one line on
stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from embprof import __version__
from embprof.errors import EmbprofError

# In the order the workflow runs them; then the recovery from a killed run.
COMMANDS = (
    "collect", "profile", "export", "breakdown", "timing", "status", "aggregate", "plotly-js", "sunburst",
    "latency-plot", "peak-bandwidth", "bandwidth", "bandwidth-plot", "environment", "report", "checks", "diff",
    "db", "ec-run", "ec-breakdown", "ec-results", "unlock",
)


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``embprof`` parser; given ``command`` (one of :data:`COMMANDS`), with that subcommand
    alone, so that a run imports one subcommand module, not all of them (start-up counts in a
    short step's time: the breakdown's against its read floor, issue 33)."""
    top = argparse.ArgumentParser(
        prog="embprof",
        description="Per-op GPU time of embedding tables: the steps of the embprof workflow.",
        epilog="`embprof COMMAND --help` for each; the workflow's rules run exactly these.",
    )
    top.add_argument("--version", action="version", version=f"embprof {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if command is None else (command,):
        module = importlib.import_module(f"embprof.cli.{name.replace('-', '_')}")
        sub = commands.add_parser(
            name, help=module.HELP, description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        sub.add_argument(
            "--record-settings", metavar="PLAN",
            help="once the command has succeeded, record the settings plan PLAN as what made its outputs "
                 "(the workflow's rules pass it: docs/DESIGN.md, results/settings/)",
        )
        sub.set_defaults(run=module.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None  # else every one: help, errors
    args = parser(command).parse_args(argv)
    try:
        code = args.run(args) or 0
        if code == 0 and args.record_settings:
            from embprof.workflow.settings import record_from_plan

            record_from_plan(args.record_settings)
        return code
    except (EmbprofError, OSError) as exc:
        text = str(exc).strip()
        message = text.splitlines()[0] if text else type(exc).__name__
        print(f"embprof {args.command}: error: {message}", file=sys.stderr)
        return 1
