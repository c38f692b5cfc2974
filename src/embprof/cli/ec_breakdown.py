"""Every rank's trace of one profiled EmbeddingCollection run into one per-op CSV, or its skip note.

    embprof ec-breakdown TRACES_DIR --out-dir OUT_DIR

TRACES_DIR is what `embprof ec-run --profile` left: one `*.kineto.json.gz` per rank,
attributed as `embprof breakdown --merge` does (the ranks of one run add up), or a
`*.skipped.txt` note, which is kept. OUT_DIR is replaced whole once all is written.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

HELP = "the per-op CSV of one profiled EmbeddingCollection run (every rank merged), or its skip note"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", type=Path, metavar="TRACES_DIR")
    parser.add_argument("--out-dir", type=Path, required=True)


def run(args: argparse.Namespace) -> None:
    from embprof.cli import breakdown, parser
    from embprof.workflow.ec import atomic_folder, run_traces

    traces, notes = run_traces(args.traces)
    with atomic_folder(args.out_dir) as part:
        if traces:  # the breakdown command itself, parsed by the one `embprof` parser as `embprof breakdown --merge`
            breakdown.run(parser().parse_args(["breakdown", *map(str, traces), "--merge", "--out-dir", str(part)]))
        for note in notes:
            shutil.copy(note, part / note.name)
            print(f"{args.out_dir / note.name}: the run's skip note, kept")
