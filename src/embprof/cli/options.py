"""Options several subcommands share: where the suite is, and how a config's benchmark runs."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_suite_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite-root", type=Path, default=Path("."),
        help="the checkout that holds benchmark/ (default: the working directory); the benchmark runs there",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The config's run settings (docs/workflow.md, "Configuration"), as the rules pass them."""
    parser.add_argument("--preset", required=True, help="smoke or seed")
    parser.add_argument("--num-iterations", type=int, default=None)
    parser.add_argument("--no-torchrec", action="store_true", help="skip the TorchRec/FBGEMM baseline")
    parser.add_argument("--extra-arg", action="append", default=[], help="passed to the benchmark (repeatable)")


def add_step(parser: argparse.ArgumentParser) -> None:
    """A per-config step that runs the benchmark: which config, and where its record goes."""
    parser.add_argument("--test-id", required=True, help="the config's pytest node id (configs.tsv)")
    parser.add_argument("--label", required=True)
    parser.add_argument("--record", type=Path, required=True, help="the step record to write")
    parser.add_argument("--log", default=None, help="the log this step writes to (for the record)")
