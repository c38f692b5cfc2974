"""Options several subcommands share: where the suite is, and how a config's benchmark runs."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_suite(parser: argparse.ArgumentParser) -> None:
    """Which suite runs, and with what (docs/workflow.md, "Another suite")."""
    parser.add_argument(
        "--suite-root", type=Path, default=Path("."),
        help="the checkout that holds this project's suite/ (default: the working directory); it runs there",
    )
    parser.add_argument(
        "--suite", type=Path, default=None,
        help="another suite's pytest file, which keeps the reference system's contract; it runs in its folder",
    )
    parser.add_argument("--suite-arg", action="append", default=[], help="passed to every pytest run of the suite")
    parser.add_argument("--suite-env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the environment of the suite's processes (repeatable)")
    parser.add_argument("--launcher", default=None,
                        help="a command that runs a Python module, '-m pytest ...' appended, for the suite's runs; "
                             "one that starts with -m is run by this interpreter (e.g. "
                             "'-m torch.distributed.run --nproc_per_node 1'); default: this interpreter")


def suite_of(args: argparse.Namespace, check: bool = True):
    """The :class:`~embprof.workflow.suite.Suite` the options name (``check``: it must exist)."""
    from embprof.errors import ConfigError
    from embprof.workflow.suite import make_suite

    env = {}
    for pair in args.suite_env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--suite-env must be NAME=VALUE, got {pair!r}")
        env[name] = value
    return make_suite(args.suite_root, args.suite, args.suite_arg, env, args.launcher, check=check)


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
