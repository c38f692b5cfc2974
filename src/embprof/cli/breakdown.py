"""Per-op GPU time of each profiled config: trace(s) in, opcalls__<label>.csv out.

    embprof breakdown TRACE... [--out-dir results/opcalls] [--layout default|any]
        [--merge] [--categories kernel_categories.yaml] [--nsys PATH]

TRACE: Nsight Systems .sqlite export, .nsys-rep (exported with nsys), or a
PyTorch profiler trace (.json / .json.gz). One trace per config label: traces
of one label (the ranks of one run) add up only with --merge. Writes
opcalls__<label>.csv and opcalls__<label>.busy.json per label, both or neither.
Kernel categories default to config/kernel_categories.yaml where the working
directory has one, else the packaged default.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HELP = "attribute every kernel to its op range: per-op CSV per config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from embprof.trace.range_layout import LAYOUTS

    parser.add_argument("traces", nargs="+", type=Path, metavar="TRACE")
    parser.add_argument("--out-dir", type=Path, default=Path("results/opcalls"))
    parser.add_argument("--layout", choices=LAYOUTS, default="default",
                        help="'any': innermost range of any name is the op, for traces not made by our benchmark")
    parser.add_argument("--merge", action="store_true",
                        help="add up the traces of one config label (e.g. every rank's); without it a label in two traces is refused")
    parser.add_argument("--categories", type=Path, default=None,
                        help="kernel categories YAML (default: config/kernel_categories.yaml, else the packaged one)")
    parser.add_argument("--nsys", default=None, help="nsys binary for .nsys-rep input (default: $NSYS, then PATH)")


def _one_blas_thread() -> None:
    """The breakdown does no linear algebra: one BLAS thread keeps numpy's import from starting a
    pool of them, whose start costs more CPU than attributing 100,000 kernels."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def run(args: argparse.Namespace) -> None:
    _one_blas_thread()
    from embprof.defaults import KERNEL_CATEGORIES, config_file
    from embprof.trace import run_breakdown, write_outputs

    categories = args.categories or config_file(KERNEL_CATEGORIES)
    results = run_breakdown(args.traces, args.layout, categories, args.nsys, merge=args.merge)
    written = write_outputs(results, args.out_dir)
    for lb in results.values():
        if lb.dropped_unlaunched:
            print(f"breakdown: {lb.label}: dropped {lb.dropped_unlaunched} kernel/copy record(s) with no "
                  "runtime call (launched outside the capture window)", file=sys.stderr)
        if lb.dropped_ambiguous:
            print(f"breakdown: {lb.label}: dropped {lb.dropped_ambiguous} kernel/copy record(s) launched on a "
                  "thread without a context of its own while other threads of its process held different "
                  "ones (docs/DESIGN.md, \"Attribution rule\")", file=sys.stderr)
    for path, lb in zip(written, results.values(), strict=True):
        busy = ", ".join(f"{b} {ms:.3f}" for b, ms in lb.busy_ms_per_iter.items())
        print(f"{path}: {lb.n_rows} rows, {lb.num_iters} iteration(s), busy ms/iter: {busy} ({lb.time_source})")
