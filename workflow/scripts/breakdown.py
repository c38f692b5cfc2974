"""Per-op GPU time of each profiled config: trace(s) in, opcalls__<label>.csv out.

    python workflow/scripts/breakdown.py TRACE... [--out-dir DIR] [--layout default|any]
        [--categories config/kernel_categories.yaml] [--nsys PATH]

TRACE: Nsight Systems .sqlite export, .nsys-rep (exported with nsys), or a
PyTorch profiler trace (.json / .json.gz). Traces of the same config label
merge. Writes opcalls__<label>.csv and opcalls__<label>.busy.json per label.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import sys
from pathlib import Path

from embprof.trace import LAYOUTS, TraceError, run_breakdown, write_outputs


def _return_freed_memory_to_os() -> None:
    """Fix glibc's mmap threshold at 1 MiB so freed large arrays leave the process at once.

    glibc raises the threshold as big blocks are freed, after which arrays of
    a few MB land on the heap and stay in RSS after ``del``; on a 1M-kernel
    trace that is ~100 MB of peak memory.
    """
    libc = ctypes.util.find_library("c")
    if libc and sys.platform.startswith("linux"):
        ctypes.CDLL(libc).mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path, metavar="TRACE")
    ap.add_argument("--out-dir", type=Path, default=Path("results/opcalls"))
    ap.add_argument("--layout", choices=LAYOUTS, default="default",
                    help="'any': innermost range of any name is the op, for traces not made by our benchmark")
    ap.add_argument("--categories", type=Path, default=None, help="kernel categories YAML (default: config/kernel_categories.yaml)")
    ap.add_argument("--nsys", default=None, help="nsys binary for .nsys-rep input (default: $NSYS, then PATH)")
    args = ap.parse_args(argv)
    _return_freed_memory_to_os()
    try:
        results = run_breakdown(args.traces, args.layout, args.categories, args.nsys)
        written = write_outputs(results, args.out_dir)
    except TraceError as exc:
        print(f"breakdown: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"breakdown: cannot write to {args.out_dir}: {exc.strerror}", file=sys.stderr)
        return 1
    for lb in results.values():
        if lb.dropped_unlaunched:
            print(f"breakdown: {lb.label}: dropped {lb.dropped_unlaunched} kernel/copy record(s) with no runtime "
                  "call (launched outside the capture window)", file=sys.stderr)
    for path, lb in zip(written, results.values(), strict=True):
        busy = ", ".join(f"{b} {ms:.3f}" for b, ms in lb.busy_ms_per_iter.items())
        print(f"{path}: {len(lb.rows)} rows, {lb.num_iters} iteration(s), busy ms/iter: {busy} ({lb.time_source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
