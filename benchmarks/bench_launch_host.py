"""The host's time per training step on the CUDA code path, kernels stubbed out: what Python spends around the launches.

A GPU step of the dynamic tables is launched by the host, and at the seed size the host
bounds it; the part of its time that is this library's own Python (the tables, the
group, the dispatch in ``dynemb.kernels``, each Triton launcher building its
arguments) can be measured without a GPU. On CPU tensors this script sends every step
down the CUDA path (Triton launchers, batch checks deferred to the device record, as
``tests/cuda_path.py`` does) with every kernel launch replaced by nothing (the batch
checks' safe offsets are the batch's own), so what it times is everything a step does on
the host but the launches themselves: the CPU ops between them run on small tensors.
It prints the min and median over runs of wall and thread CPU time per step (on a
loaded machine the min is the figure to compare: medians follow the load).

    python benchmarks/bench_launch_host.py                 # 10 tables x 32 ids, dim 128, SGD NONE and ADAM SUM
    python benchmarks/bench_launch_host.py --runs 8 --steps 500
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

CASES = ((EmbOptimType.EXACT_SGD, PoolingMode.NONE), (EmbOptimType.ADAM, PoolingMode.SUM))
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


def step_times(optimizer: EmbOptimType, pooling: PoolingMode, args: argparse.Namespace) -> list[tuple[float, float]]:
    """(wall, thread CPU) seconds of each timed step of a fresh module."""
    options = [DynamicEmbTableOptions(dim=args.dim, max_capacity=args.rows, seed=t) for t in range(args.tables)]
    tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device="cpu", learning_rate=0.1)
    generator = torch.Generator().manual_seed(0)
    indices = args.tables * args.batch
    offsets = torch.arange(0, indices + 1)
    batches = [torch.randint(0, 1 << 20, (indices,), generator=generator) for _ in range(8)]
    grad = torch.ones(args.batch, args.tables * args.dim) if pooling is PoolingMode.SUM else torch.ones(indices, args.dim)
    times = []
    with torch.autograd.set_multithreading_enabled(False):
        for step in range(WARMUP + args.steps):
            began, cpu = time.perf_counter(), time.thread_time()
            tables(batches[step % len(batches)], offsets).backward(grad)
            times.append((time.perf_counter() - began, time.thread_time() - cpu))
    return times[WARMUP:]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh modules per case")
    parser.add_argument("--steps", type=int, default=300, help=f"timed steps per run (after {WARMUP} untimed)")
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="ids per table per step")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rows", type=int, default=8192, help="max_capacity per table")
    args = parser.parse_args(argv)
    stub_launches()
    torch.set_num_threads(1)
    print(f"{args.tables} tables x {args.batch} ids, dim {args.dim}; us per step over {args.runs} runs x {args.steps} steps, launches stubbed")
    for optimizer, pooling in CASES:
        runs = [step_times(optimizer, pooling, args) for _ in range(args.runs)]
        wall = [[w * 1e6 for w, _ in run] for run in runs]
        cpu = [[c * 1e6 for _, c in run] for run in runs]
        print(f"{optimizer.value:<10}{pooling.name.lower():<6}"
              f"wall min {min(map(min, wall)):7.1f}  median {statistics.median(map(statistics.median, wall)):7.1f}   "
              f"cpu min {min(map(min, cpu)):7.1f}  median {statistics.median(map(statistics.median, cpu)):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
