"""Issue 6's per-op view: where a training iteration of the dynamic tables spends GPU time, torch path vs Triton kernels.

Runs the ``sgd-gpu`` / ``adam-gpu`` workload of ``bench_tables.py`` (same sizes,
same batches) once per kernel setting (``DYNEMB_KERNELS=torch``, then the fused
Triton kernels), profiles the timed iterations with the torch profiler inside the
project's range layout (config label > nsys_iter_<i> > dyn > forward/backward),
attributes every kernel to its ``op:*`` range with the workflow's own breakdown
(``embprof.trace``), and prints ms per iteration per op side by side, with the
ratio and the totals. On the CPU (``--small``) the torch profiler's leaf
operators stand in for kernels and both settings run the torch path: that only
shows the script works.

    python benchmarks/bench_table_ops.py --optimizer sgd            # seed size, needs CUDA
    python benchmarks/bench_table_ops.py --optimizer adam --iterations 10
    python benchmarks/bench_table_ops.py --small                     # CPU smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch
from bench_tables import SEED_SIZE, SMALL_SIZE, Workload, build_dyn, make_batches
from torch.profiler import ProfilerActivity, profile

from dynemb import EmbOptimType
from dynemb.ranges import emit_range
from embprof.labels import make_label
from embprof.trace import TraceError, run_breakdown

OPTIMIZERS = {"sgd": EmbOptimType.EXACT_SGD, "adam": EmbOptimType.ADAM}
SETTINGS = ("torch", "triton")


def profile_setting(setting: str, work: Workload, optimizer: EmbOptimType, batches: list, trace_dir: Path) -> pd.DataFrame:
    """Per-op ms per iteration of the dyn backend with ``DYNEMB_KERNELS=setting``."""
    os.environ["DYNEMB_KERNELS"] = setting
    module = build_dyn(work, optimizer, caching=False, unique=[0] * work.tables)
    grad = torch.full((work.tables * work.batch, work.dim), 1e-3, device=work.device)
    label = make_label(work.tables, work.batch, work.dim, optimizer.value, "gpu", "none", [module.capacity(0)] * work.tables)
    cuda = work.device.type == "cuda"
    with torch.autograd.set_multithreading_enabled(False):
        for step in range(work.warmup):
            ids, offsets = batches[step % len(batches)]
            module(ids, offsets).backward(grad)
        if cuda:
            torch.cuda.synchronize()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof, emit_range(label):
            for i in range(work.iterations):
                ids, offsets = batches[(work.warmup + i) % len(batches)]
                with emit_range(f"nsys_iter_{i}"), emit_range("dyn"):
                    with emit_range("forward"):
                        out = module(ids, offsets)
                    with emit_range("backward"):
                        out.backward(grad)
            if cuda:
                torch.cuda.synchronize()
    trace = trace_dir / f"{setting}.json"
    prof.export_chrome_trace(str(trace))
    del module
    breakdown = run_breakdown([trace])[label]
    rows = breakdown.rows
    rows = rows[rows["backend"] == "dyn"]
    return rows.groupby(["phase", "op"], as_index=False)["avg_ms_per_iter"].sum()


def side_by_side(per_setting: dict[str, pd.DataFrame]) -> pd.DataFrame:
    merged = None
    for setting, rows in per_setting.items():
        rows = rows.rename(columns={"avg_ms_per_iter": setting})
        merged = rows if merged is None else merged.merge(rows, on=["phase", "op"], how="outer")
    merged = merged.fillna(0.0).sort_values(["phase", "torch"], ascending=[False, False])
    totals = merged[list(per_setting)].sum()
    merged = pd.concat([merged, pd.DataFrame([{"phase": "all", "op": "TOTAL", **totals.to_dict()}])], ignore_index=True)
    merged["triton / torch"] = merged["triton"] / merged["torch"].where(merged["torch"] > 0)
    return merged


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help=f"CPU-sized {SMALL_SIZE} instead of {SEED_SIZE}")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="sgd")
    parser.add_argument("--iterations", type=int, default=10, help="profiled iterations")
    parser.add_argument("--warmup", type=int, default=5, help="unprofiled iterations before them (Triton compiles here)")
    parser.add_argument("--trace-dir", default=None, help="keep the two Kineto traces here (default: a temporary folder)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.iterations <= 0 or args.warmup < 0:
        print("error: --iterations must be positive and --warmup >= 0", file=sys.stderr)
        return 2
    if not args.small and not torch.cuda.is_available():
        print("error: the seed size needs CUDA (use --small for a CPU run)", file=sys.stderr)
        return 2
    if args.trace_dir and not os.path.isdir(args.trace_dir):
        print(f"error: --trace-dir {args.trace_dir} is not a folder", file=sys.stderr)
        return 2
    size = dict(SMALL_SIZE if args.small else SEED_SIZE, iterations=args.iterations, warmup=args.warmup)
    device = torch.device("cpu" if args.small else "cuda")
    work = Workload(size["tables"], size["rows"], size["batch"], 128, 1.05, size["iterations"], size["warmup"], 1.0, device)
    batches = make_batches(Workload(**{**work.__dict__, "iterations": work.iterations + work.warmup}))
    optimizer = OPTIMIZERS[args.optimizer]
    with tempfile.TemporaryDirectory() as scratch:
        trace_dir = Path(args.trace_dir or scratch)
        try:
            per_setting = {setting: profile_setting(setting, work, optimizer, batches, trace_dir) for setting in SETTINGS}
        except TraceError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    table = side_by_side(per_setting)
    print(f"device {device}, {work.tables} tables x {work.rows} rows, dim {work.dim}, batch {work.batch}/table, "
          f"{args.optimizer}, {work.iterations} profiled iterations; GPU ms per iteration by op (dyn backend)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
