"""List the benchmark configs to run: ``pytest --collect-only -q`` -> configs.tsv.

    embprof collect --preset smoke [--select EXPR] [--label SUBSTR ...] \
        [--extra-arg=--total-cap=N] [SUITE OPTIONS] --out results/configs.tsv

Suite options (every step that runs the suite): ``--suite-root CHECKOUT`` (this
project's suite, in that checkout) or ``--suite FILE`` (another suite's pytest
file), ``--suite-arg=ARG ...``, ``--suite-env NAME=VALUE ...``, ``--launcher CMD``
(docs/workflow.md, "Another suite").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embprof.cli.options import add_suite, suite_of

HELP = "list the configs of the benchmark suite (configs.tsv)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True, help="smoke or seed")
    parser.add_argument("--select", default=None, help="pytest -k expression")
    parser.add_argument("--label", action="append", default=[],
                        help="keep configs whose label contains this (any of them; repeatable)")
    parser.add_argument("--extra-arg", action="append", default=[],
                        help="passed to the benchmark (size options that shape labels, e.g. --total-cap=N)")
    add_suite(parser)
    parser.add_argument("--out", type=Path, required=True, help="configs.tsv to write")


def run(args: argparse.Namespace) -> None:
    from embprof.results.configs import write_configs
    from embprof.workflow.collect import collect_configs

    configs = collect_configs(suite_of(args), args.preset, args.select, args.label, args.extra_arg)
    write_configs(args.out, configs)
    print(f"{len(configs)} configs -> {args.out}")
