"""One run of the EmbeddingCollection family's launcher: a timing record, or every rank's trace.

    embprof ec-run --launcher suite/benchmark_embedding_collection.sh --out OUT
        [--profile] [--nproc N] -- USE_INDEX_DEDUP USE_DYNAMIC_EMBEDDING BATCH_SIZE [FLAG...]

Without --profile, OUT is the run's record (the JSON list the launcher appends to);
with it, OUT is a folder of one torch trace per rank, or the run's skip note where it
cannot be profiled here. OUT is replaced only once the launcher has succeeded; the
launcher's output goes to this command's. The workflow's ec_timing and ec_profile
rules run it (docs/embedding_collection.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "run the EmbeddingCollection launcher once: a timing record, or every rank's trace"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--launcher", type=Path, required=True, help="suite/benchmark_embedding_collection.sh")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", action="store_true", help="profile with the torch profiler: OUT is a folder")
    parser.add_argument("--nproc", type=int, default=None, help="processes (default: the launcher's, one per GPU)")
    parser.add_argument("launcher_args", nargs="*", metavar="ARG",
                        help="the launcher's arguments, after --: use_index_dedup use_dynamic_embedding batch_size flags")


def run(args: argparse.Namespace) -> None:
    from embprof.workflow.ec import launch

    launch(args.launcher.resolve(), args.launcher_args, args.out, profile=args.profile, nproc=args.nproc)
