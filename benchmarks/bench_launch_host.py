"""The host's side of a training step on the CUDA code path, kernels stubbed out: its time, its launches, its waits.

A GPU step of the dynamic tables is launched by the host, and at the seed size the host
bounds it; the part of its time that is this library's own Python (the tables, the
group, the dispatch in ``dynemb.kernels``, each Triton launcher building its
arguments) can be measured without a GPU. On CPU tensors this script sends every step
down the CUDA path (Triton launchers, batch checks deferred to the device record, as
``tests/cuda_path.py`` does) with every kernel launch replaced by nothing (the batch
checks' safe offsets are the batch's own), so what it times is everything a step does on
the host but the launches themselves: the CPU ops between them run on small tensors.
It prints the min and median over runs of wall and thread CPU time per step (on a
loaded machine the min is the figure to compare: medians follow the load), and what one
steady step launches (``dynemb.kernels.launches``): Triton kernels, torch ops that launch
device work (on a GPU a sort is about a dozen kernels, most others one), and the ops that
would make the host wait for the GPU (a sync-free step has none). Caching tables prefetch
each batch first, as the benchmark suite does.

    python benchmarks/bench_launch_host.py                 # 10 tables x 32 ids, dim 128, SGD NONE and ADAM SUM, every row on the device
    python benchmarks/bench_launch_host.py --storage gpu,caching,hybrid,host --runs 8 --steps 500
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import dynemb.kernels as kernels
import dynemb.validation as validation
from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from dynemb.kernels.launches import Launches, counting
from dynemb.optimizers import state_width

CASES = ((EmbOptimType.EXACT_SGD, PoolingMode.NONE), (EmbOptimType.ADAM, PoolingMode.SUM))
STORAGE = ("gpu", "caching", "hybrid", "host")
WARMUP = 20


def stub_launches() -> None:
    """Every step on the Triton path, and every launch a no-op (safe offsets: the batch's own)."""
    kernels._triton_for = lambda is_cuda: kernels.triton_importable()
    validation.DEFERRED_DEVICE_TYPES = frozenset({"cuda", "cpu"})
    from dynemb.kernels import triton_ops

    def launch(kernel: object, grid: tuple, *args: object, **meta: object) -> None:
        if kernel is triton_ops._safe_offsets_kernel:
            args[5].copy_(args[0])

    triton_ops._launch = launch


def build(optimizer: EmbOptimType, pooling: PoolingMode, storage: str, args: argparse.Namespace) -> BatchedDynamicEmbeddingTables:
    """Tables of ``args.rows`` rows per table: every row on the device, a cache of a quarter of them over host
    storage, a tenth of them on the device and the rest in host memory, or all in host memory."""
    row_bytes = (args.dim + state_width(optimizer, args.dim)) * 4
    budget = {"gpu": None, "caching": args.rows // 4, "hybrid": args.rows // 10, "host": 0}[storage]
    options = [
        DynamicEmbTableOptions(
            dim=args.dim, max_capacity=args.rows, seed=t, caching=storage == "caching", local_hbm_for_values=None if budget is None else budget * row_bytes,
        )
        for t in range(args.tables)
    ]
    tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device="cpu", learning_rate=0.1)
    if tables.storage_mode(0).value != storage:
        raise SystemExit(f"error: {storage} tables came out {tables.storage_mode(0).value}")
    return tables


def steps(optimizer: EmbOptimType, pooling: PoolingMode, storage: str, args: argparse.Namespace) -> tuple[list[tuple[float, float]], Launches]:
    """(wall, thread CPU) seconds of each timed step of a fresh module, and what one steady step launched."""
    tables = build(optimizer, pooling, storage, args)
    generator = torch.Generator().manual_seed(0)
    indices = args.tables * args.batch
    offsets = torch.arange(0, indices + 1)
    batches = [torch.randint(0, 1 << 20, (indices,), generator=generator) for _ in range(8)]
    grad = torch.ones(args.batch, args.tables * args.dim) if pooling is PoolingMode.SUM else torch.ones(indices, args.dim)

    def step(ids: torch.Tensor) -> None:
        if storage == "caching":
            tables.prefetch(ids, offsets)
        tables(ids, offsets).backward(grad)

    times = []
    with torch.autograd.set_multithreading_enabled(False):
        for n in range(WARMUP + args.steps):
            began, cpu = time.perf_counter(), time.thread_time()
            step(batches[n % len(batches)])
            times.append((time.perf_counter() - began, time.thread_time() - cpu))
        with counting() as launches:
            step(batches[0])
    return times[WARMUP:], launches


def launch_summary(launches: Launches) -> str:
    """``triton N + torch M ops (syncs K)``, then each kernel and op with its count."""
    parts = [f"{name} {count}" for name, count in sorted({**launches.triton, **launches.torch}.items())]
    head = f"triton {sum(launches.triton.values())} + torch {sum(launches.torch.values())} ops, syncs {len(launches.syncs)}"
    return head + (f" ({', '.join(launches.syncs)})" if launches.syncs else "") + "\n      " + ", ".join(parts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh modules per case")
    parser.add_argument("--steps", type=int, default=300, help=f"timed steps per run (after {WARMUP} untimed)")
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="ids per table per step")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rows", type=int, default=8192, help="max_capacity per table")
    parser.add_argument("--storage", default="gpu", help=f"comma-separated storage modes of {','.join(STORAGE)}")
    args = parser.parse_args(argv)
    chosen = args.storage.split(",")
    unknown = sorted(set(chosen) - set(STORAGE))
    if unknown:
        print(f"error: unknown storage mode {', '.join(unknown)}; choose from {','.join(STORAGE)}", file=sys.stderr)
        return 2
    stub_launches()
    torch.set_num_threads(1)
    print(f"{args.tables} tables x {args.batch} ids, dim {args.dim}; us per step over {args.runs} runs x {args.steps} steps, launches stubbed")
    for storage in chosen:
        for optimizer, pooling in CASES:
            runs, launches = zip(*(steps(optimizer, pooling, storage, args) for _ in range(args.runs)), strict=True)
            wall = [[w * 1e6 for w, _ in run] for run in runs]
            cpu = [[c * 1e6 for _, c in run] for run in runs]
            print(f"{storage:<8}{optimizer.value:<10}{pooling.name.lower():<6}"
                  f"wall min {min(map(min, wall)):7.1f}  median {statistics.median(map(statistics.median, wall)):7.1f}   "
                  f"cpu min {min(map(min, cpu)):7.1f}  median {statistics.median(map(statistics.median, cpu)):7.1f}")
            print(f"      launches per step: {launch_summary(launches[-1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
