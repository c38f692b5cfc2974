"""Remove the lock a killed snakemake run left on a working directory.

    embprof unlock [--directory DIR]

What ``snakemake --unlock`` does, but only when no snakemake process runs in DIR
(it refuses, in one line, while one does). ``make report`` runs it first, so a run
after a hard kill (SIGKILL, out of memory, a lost terminal) just starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "remove the lock a killed snakemake run left (refused while one runs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--directory", "-d", type=Path, default=Path("."),
                        help="the workflow's working directory (default: this one)")


def run(args: argparse.Namespace) -> None:
    from embprof.workflow.lock import release_stale_lock

    unlocked = release_stale_lock(args.directory)
    if unlocked.removed:
        print(f"embprof unlock: removed the lock a killed run left in {args.directory / '.snakemake'}")
