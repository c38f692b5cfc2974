"""Issue 3's speed check: DynamicEmb tables against FBGEMM TBE, forward and backward ms per iteration.

Configs (all pooling NONE, one pow-law id per sample and table, as the reference
system's benchmark):

- ``sgd-gpu`` / ``adam-gpu``: every row in device memory; TBE with EmbeddingLocation.DEVICE.
- ``sgd-caching`` / ``adam-caching``: a device cache of ``footprint x ratio`` rows per
  table (footprint = distinct ids of the whole run) over host storage; TBE with
  MANAGED_CACHING and the same share of rows cached.
- ``sgd-hybrid`` / ``adam-hybrid``: 10% of each table's rows in device memory, the
  rest in host memory (the suite's no_caching); ``sgd-host`` / ``adam-host``: every
  row in host memory (no_hbm). TBE with MANAGED (unified memory), as the suite.
  For these the script also prints the host-row bytes a step moves, over the
  step's time, beside the measured pinned host-to-device and device-to-host copy
  peaks: how far the step is from the link's limit.

Both libraries run in the same process on the same pre-generated batches; each
config prints dyn and TBE ms side by side and their ratio (dyn / TBE). Each module
first trains one pass over every batch (``1st``: the dynamic tables insert every id
of the run there, TBE's rows exist from the start), then ``--warmup`` more
iterations, then the timed ones (``fwd``, ``bwd``, ``train``): the steady state of
training, where ids seen before dominate, as in the benchmark suite. ``host`` is the
wall ms per timed step the host took to hand the step to the GPU: where it reaches
``fwd + bwd`` the step is host-bound (it waits for the GPU, or launches slower than
the GPU runs); ``--host-profile`` shows where dyn's host time per step goes, and
``--kernel-profile`` its GPU time per kernel, over a first pass and over steady steps;
``--cuda-graphs`` replays dyn's steps from CUDA graphs (``dynemb.graphs``). The seed size
(default) is for a GPU; ``--small`` is a CPU-sized run that checks the script works
(there TBE runs EmbeddingLocation.HOST, and ADAM, which TBE's CPU kernels lack,
shows no baseline).

    python benchmarks/bench_tables.py               # seed size, needs CUDA
    python benchmarks/bench_tables.py --small       # a minute on a laptop CPU
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from dynemb.graphs import wanted as graphs_wanted
from embprof.atomic import write_json

ROW_FLOATS = {EmbOptimType.EXACT_SGD: 1, EmbOptimType.ADAM: 3}
HYBRID_DEVICE_SHARE = 0.1  # as the benchmark suite's no_caching
CONFIGS = {
    f"{name}-{storage}": (optimizer, storage)
    for storage in ("gpu", "caching", "hybrid", "host")
    for name, optimizer in (("sgd", EmbOptimType.EXACT_SGD), ("adam", EmbOptimType.ADAM))
}
OFF_DEVICE = ("caching", "hybrid", "host")  # storage modes whose steps move rows over the link
COPY_BYTES = 1 << 30


@dataclass(frozen=True)
class Workload:
    tables: int
    rows: int
    batch: int
    dim: int
    alpha: float
    iterations: int
    warmup: int
    cache_ratio: float
    device: torch.device
    cuda_graphs: bool = False


def power_law_ids(count: int, low: int, high: int, alpha: float, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """Ids in [low, high) with P(x) ~ x^-alpha, by inverting the truncated power-law CDF."""
    u = torch.rand(count, dtype=torch.float64, generator=generator).to(device)
    exponent = 1.0 - alpha
    lo, hi = float(low) ** exponent, float(high) ** exponent
    ids = ((hi - lo) * u + lo) ** (1.0 / exponent)
    return ids.to(torch.int64).clamp_(low, high - 1)


def make_batches(work: Workload, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``iterations`` TBE batches: table-major ids, one id per bag."""
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(work.tables * work.batch + 1, dtype=torch.int64, device=work.device)
    return [
        (power_law_ids(work.tables * work.batch, 1, work.rows, work.alpha, work.device, generator), offsets)
        for _ in range(work.iterations)
    ]


def footprint(work: Workload, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> list[int]:
    """Distinct ids per table over the whole run (the reference's cache sizing rule)."""
    per_table = [torch.cat([ids[t * work.batch : (t + 1) * work.batch] for ids, _ in batches]) for t in range(work.tables)]
    return [int(torch.unique(ids).numel()) for ids in per_table]


def device_rows(work: Workload, storage: str, unique: list[int]) -> list[int | None]:
    """Rows of each table in device memory (None: all)."""
    return {
        "gpu": [None] * work.tables,
        "caching": [int(u * work.cache_ratio) for u in unique],
        "hybrid": [int(work.rows * HYBRID_DEVICE_SHARE)] * work.tables,
        "host": [0] * work.tables,
    }[storage]


def build_dyn(work: Workload, optimizer: EmbOptimType, storage: str, unique: list[int]) -> BatchedDynamicEmbeddingTables:
    row_bytes = work.dim * ROW_FLOATS[optimizer] * 4
    options = [
        DynamicEmbTableOptions(
            dim=work.dim, max_capacity=work.rows, local_hbm_for_values=None if rows is None else rows * row_bytes, caching=storage == "caching",
        )
        for rows in device_rows(work, storage, unique)
    ]
    return BatchedDynamicEmbeddingTables(
        options, optimizer, PoolingMode.NONE, device=work.device, learning_rate=0.01, cuda_graphs=work.cuda_graphs,
    )


def build_tbe(work: Workload, optimizer: EmbOptimType, storage: str, unique: list[int]) -> torch.nn.Module | None:
    """FBGEMM's TBE on the same shapes, or None where it cannot run here."""
    try:
        from fbgemm_gpu.split_embedding_configs import EmbOptimType as TbeOptim
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
            CacheAlgorithm,
            EmbeddingLocation,
        )
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode as TbePooling
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )
    except ImportError:
        return None
    on_gpu = work.device.type == "cuda"
    if not on_gpu and optimizer is EmbOptimType.ADAM:
        return None  # TBE's CPU kernels have no ADAM
    if on_gpu:
        location = {"gpu": EmbeddingLocation.DEVICE, "caching": EmbeddingLocation.MANAGED_CACHING}.get(storage, EmbeddingLocation.MANAGED)
        compute = ComputeDevice.CUDA
    else:
        location, compute = EmbeddingLocation.HOST, ComputeDevice.CPU
    cache_load_factor = min(1.0, sum(int(u * work.cache_ratio) for u in unique) / (work.rows * work.tables))
    return SplitTableBatchedEmbeddingBagsCodegen(
        [(work.rows, work.dim, location, compute)] * work.tables,
        optimizer=TbeOptim.ADAM if optimizer is EmbOptimType.ADAM else TbeOptim.EXACT_SGD,
        pooling_mode=TbePooling.NONE,
        learning_rate=0.01,
        cache_load_factor=cache_load_factor,
        cache_algorithm=CacheAlgorithm.LRU,
        device=work.device,
    )


class PhaseTimer:
    """Per-phase elapsed ms: CUDA events on a GPU (no sync inside the loop), wall clock on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.spans: dict[str, list] = {"forward": [], "backward": [], "first_pass": []}

    def run(self, phase: str, work: Callable[[], torch.Tensor | None]) -> torch.Tensor | None:
        if self.cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = work()
            stop.record()
            self.spans[phase].append((start, stop))
        else:
            began = time.perf_counter()
            result = work()
            self.spans[phase].append((time.perf_counter() - began) * 1e3)
        return result

    def mean_ms(self, phase: str) -> float:
        spans = self.spans[phase]
        if self.cuda:
            torch.cuda.synchronize()
            spans = [start.elapsed_time(stop) for start, stop in spans]
        return sum(spans) / len(spans)


def prime(build: Callable[[], torch.nn.Module | None], work: Workload, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Train a throwaway module for a few steps, so kernel compilation and lazy loading stay out of every timing."""
    module = build()
    if module is None:
        return
    grad = torch.full((work.tables * work.batch, work.dim), 1e-3, device=work.device)
    with torch.autograd.set_multithreading_enabled(False):
        for ids, offsets in batches[:3]:
            module(ids, offsets).backward(grad)
    del module
    if work.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def measure(module: torch.nn.Module, work: Workload, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, float, float, float]:
    """Mean train ms of a first pass over every batch, then mean forward and backward ms over the timed
    iterations that follow ``warmup`` untimed ones, and the host's ms per timed step: the wall time the loop
    took to hand its work to the GPU. A step whose host ms reaches its forward + backward is host-bound (it
    waits for the GPU, or Python launches slower than the GPU runs)."""
    grad = torch.full((work.tables * work.batch, work.dim), 1e-3, device=work.device)
    timer = PhaseTimer(work.device)
    with torch.autograd.set_multithreading_enabled(False):
        for ids, offsets in batches:
            timer.run("first_pass", lambda ids=ids, offsets=offsets: module(ids, offsets).backward(grad))
        first_pass = timer.mean_ms("first_pass")
        for step in range(work.warmup + work.iterations):
            ids, offsets = batches[step % len(batches)]
            if step == work.warmup:
                timer = PhaseTimer(work.device)
                began = time.perf_counter()
            out = timer.run("forward", lambda ids=ids, offsets=offsets: module(ids, offsets))
            timer.run("backward", lambda out=out: out.backward(grad))
        host_ms = (time.perf_counter() - began) * 1e3 / work.iterations
    return first_pass, timer.mean_ms("forward"), timer.mean_ms("backward"), host_ms


def profiled(module: torch.nn.Module, work: Workload, steps: list[tuple[torch.Tensor, torch.Tensor]], cuda: bool) -> str:
    """The torch profiler's table of ``steps`` training steps: the host's view (op ranges, torch operators,
    kernel launches, by self CPU time), or with ``cuda`` the GPU's (kernels, by self GPU time)."""
    from torch.profiler import ProfilerActivity, profile

    grad = torch.full((work.tables * work.batch, work.dim), 1e-3, device=work.device)
    activity, order = (ProfilerActivity.CUDA, "self_cuda_time_total") if cuda else (ProfilerActivity.CPU, "self_cpu_time_total")
    with torch.autograd.set_multithreading_enabled(False), profile(activities=[activity]) as prof:
        for ids, offsets in steps:
            module(ids, offsets).backward(grad)
        if cuda:
            torch.cuda.synchronize()
    return prof.key_averages().table(sort_by=order, row_limit=25, max_name_column_width=48)


def steady_steps(batches: list[tuple[torch.Tensor, torch.Tensor]], steps: int = 10) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [batches[step % len(batches)] for step in range(steps)]


def copy_peaks(device: torch.device) -> dict[str, float] | None:
    """Best of five pinned copies of ``COPY_BYTES`` each way, in GB/s (10^9 bytes), or None off CUDA."""
    if device.type != "cuda":
        return None
    host = torch.empty(COPY_BYTES, dtype=torch.uint8).pin_memory()
    on_device = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
    peaks = {}
    for name, (target, source) in {"h2d_gbps": (on_device, host), "d2h_gbps": (host, on_device)}.items():
        best = float("inf")
        for _ in range(5):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            target.copy_(source, non_blocking=True)
            stop.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(stop))
        peaks[name] = COPY_BYTES / (best * 1e6)
    return peaks


def host_traffic(module: BatchedDynamicEmbeddingTables, work: Workload, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, float]:
    """Mean (read, written) host-row bytes per step of the timed iterations' batches, counted on the device
    (``count_host_traffic``) over an untimed replay of those steps after the timed ones (counting adds launches
    the timed steps must not pay): every move a step makes, a cache's misses and write-backs included."""
    steps = [batches[step % len(batches)] for step in range(work.warmup, work.warmup + work.iterations)]
    grad = torch.full((work.tables * work.batch, work.dim), 1e-3, device=work.device)
    module.count_host_traffic()
    module.reset_host_stats()
    with torch.autograd.set_multithreading_enabled(False):
        for ids, offsets in steps:
            module(ids, offsets).backward(grad)
    stats = module.host_stats()
    module.count_host_traffic(False)
    return stats["bytes_in"] / len(steps), stats["bytes_out"] / len(steps)


def run(work: Workload, names: list[str], profile_host: bool = False, profile_kernels: bool = False) -> list[dict]:
    batches = make_batches(work)
    unique = footprint(work, batches)
    print(f"device {work.device}, {work.tables} tables x {work.rows} rows, dim {work.dim}, batch {work.batch}/table, "
          f"alpha {work.alpha}, {work.iterations} timed iterations; distinct ids/table {sum(unique) // len(unique)}")
    header = (f"{'config':<14}{'dyn fwd':>10}{'dyn bwd':>10}{'tbe fwd':>10}{'tbe bwd':>10}{'fwd x':>8}{'bwd x':>8}{'train x':>9}"
              f"{'dyn 1st':>10}{'tbe 1st':>10}{'1st x':>8}{'dyn host':>10}{'tbe host':>10}")
    print(header)
    records = []
    for name in names:
        optimizer, storage = CONFIGS[name]
        prime(functools.partial(build_dyn, work, optimizer, storage, unique), work, batches)
        dyn = build_dyn(work, optimizer, storage, unique)
        dyn_first, dyn_fwd, dyn_bwd, dyn_host = measure(dyn, work, batches)
        mode = dyn.storage_mode(0).value
        traffic = host_traffic(dyn, work, batches) if storage in OFF_DEVICE else None
        if profile_host:
            print(f"{name}: dyn's host time per op over 10 steps\n{profiled(dyn, work, steady_steps(batches), cuda=False)}")
        del dyn
        prime(functools.partial(build_tbe, work, optimizer, storage, unique), work, batches)
        tbe = build_tbe(work, optimizer, storage, unique)
        tbe_first = tbe_fwd = tbe_bwd = tbe_host = None
        if tbe is not None:
            tbe_first, tbe_fwd, tbe_bwd, tbe_host = measure(tbe, work, batches)
            del tbe
        if work.device.type == "cuda":
            torch.cuda.empty_cache()
        record = dict(config=name, storage_mode=mode, dyn_forward_ms=dyn_fwd, dyn_backward_ms=dyn_bwd,
                      tbe_forward_ms=tbe_fwd, tbe_backward_ms=tbe_bwd, dyn_first_pass_ms=dyn_first, tbe_first_pass_ms=tbe_first,
                      dyn_host_ms=dyn_host, tbe_host_ms=tbe_host)
        if traffic is not None:
            record.update(host_read_bytes_per_iter=traffic[0], host_written_bytes_per_iter=traffic[1])
        records.append(record)
        print(format_row(record))
    # After every timing, so that no timing runs in a process a profiler has already attached to.
    for name in names if profile_kernels else []:
        optimizer, storage = CONFIGS[name]
        fresh = build_dyn(work, optimizer, storage, unique)
        print(f"{name}: dyn's GPU time per kernel over a first pass of {len(batches)} steps\n{profiled(fresh, work, batches, cuda=True)}")
        print(f"{name}: dyn's GPU time per kernel over 10 steady steps\n{profiled(fresh, work, steady_steps(batches), cuda=True)}")
        del fresh
    return records


def print_link(records: list[dict], peaks: dict[str, float] | None) -> None:
    """Host-row bytes per step over the step's time, beside the link's measured copy peaks."""
    rows = [r for r in records if "host_read_bytes_per_iter" in r]
    if not rows:
        return
    peak = "n/a" if peaks is None else f"pinned copy peaks: host-to-device {peaks['h2d_gbps']:.1f} GB/s, device-to-host {peaks['d2h_gbps']:.1f} GB/s"
    print(f"\nhost rows moved per training step ({peak})")
    print(f"{'config':<14}{'read MB':>10}{'write MB':>10}{'train ms':>10}{'read GB/s':>11}{'write GB/s':>11}{'of h2d':>8}")
    for r in rows:
        train = r["dyn_forward_ms"] + r["dyn_backward_ms"]
        read, written = r["host_read_bytes_per_iter"] / (train * 1e6), r["host_written_bytes_per_iter"] / (train * 1e6)
        share = f"{read / peaks['h2d_gbps']:8.0%}" if peaks else f"{'n/a':>8}"
        print(f"{r['config']:<14}{r['host_read_bytes_per_iter'] / 1e6:10.1f}{r['host_written_bytes_per_iter'] / 1e6:10.1f}{train:10.3f}"
              f"{read:11.1f}{written:11.1f}{share}")


def format_row(record: dict) -> str:
    def ms(value: float | None) -> str:
        return f"{value:10.3f}" if value is not None else f"{'n/a':>10}"

    def ratio(dyn: float, tbe: float | None, width: int) -> str:
        return f"{dyn / tbe:{width}.2f}" if tbe else f"{'n/a':>{width}}"

    dyn_train = record["dyn_forward_ms"] + record["dyn_backward_ms"]
    tbe_train = None if record["tbe_forward_ms"] is None else record["tbe_forward_ms"] + record["tbe_backward_ms"]
    return (f"{record['config']:<14}{ms(record['dyn_forward_ms'])}{ms(record['dyn_backward_ms'])}"
            f"{ms(record['tbe_forward_ms'])}{ms(record['tbe_backward_ms'])}"
            f"{ratio(record['dyn_forward_ms'], record['tbe_forward_ms'], 8)}"
            f"{ratio(record['dyn_backward_ms'], record['tbe_backward_ms'], 8)}{ratio(dyn_train, tbe_train, 9)}"
            f"{ms(record['dyn_first_pass_ms'])}{ms(record['tbe_first_pass_ms'])}"
            f"{ratio(record['dyn_first_pass_ms'], record['tbe_first_pass_ms'], 8)}"
            f"{ms(record['dyn_host_ms'])}{ms(record['tbe_host_ms'])}")


def write_results(path: str, work: Workload, records: list[dict], peaks: dict[str, float] | None) -> None:
    payload = {"workload": {k: (str(v) if isinstance(v, torch.device) else v) for k, v in work.__dict__.items()},
               "gpu": torch.cuda.get_device_name() if work.device.type == "cuda" else None, "copy_peaks": peaks, "results": records}
    write_json(path, payload)


SEED_SIZE = dict(tables=10, rows=16 * 2**20 // 10, batch=104_857, iterations=100, warmup=10)
SMALL_SIZE = dict(tables=2, rows=50_000, batch=4096, iterations=5, warmup=2)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help=f"CPU-sized defaults {SMALL_SIZE} instead of {SEED_SIZE}")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available, cpu with --small)")
    parser.add_argument("--tables", type=int, help="number of tables")
    parser.add_argument("--rows", type=int, help="rows per table (ids are drawn from [1, rows))")
    parser.add_argument("--batch", type=int, help="samples per table per iteration")
    parser.add_argument("--iterations", type=int, help="timed iterations")
    parser.add_argument("--warmup", type=int, help="untimed iterations before them")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--alpha", type=float, default=1.05)
    parser.add_argument("--cache-ratio", type=float, default=1.0, help="cache rows = distinct ids of the run x this")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {','.join(CONFIGS)}")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--host-profile", action="store_true", help="also print where dyn's host time per step goes (torch profiler, CPU)")
    parser.add_argument("--kernel-profile", action="store_true",
                        help="also print dyn's GPU time per kernel over a first pass (a module of its own) and over steady steps (CUDA)")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="dyn's training steps replayed from CUDA graphs (cuda_graphs=True; the default is DYNEMB_CUDA_GRAPHS)")
    args = parser.parse_args(argv)
    for name, value in (SMALL_SIZE if args.small else SEED_SIZE).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    names = [name for name in args.configs.split(",") if name]
    unknown = [name for name in names if name not in CONFIGS]
    if unknown:
        print(f"error: unknown config(s) {', '.join(unknown)}; choose from {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.small else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but CUDA is not available (use --small for a CPU run)", file=sys.stderr)
        return 2
    if args.kernel_profile and device.type != "cuda":
        print("error: --kernel-profile needs CUDA", file=sys.stderr)
        return 2
    if min(args.tables, args.rows - 1, args.batch, args.dim, args.iterations) <= 0 or args.warmup < 0 or args.cache_ratio <= 0:
        print("error: sizes, iterations and --cache-ratio must be positive", file=sys.stderr)
        return 2
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        print(f"error: the folder of --json {args.json} does not exist", file=sys.stderr)
        return 2
    work = Workload(
        args.tables, args.rows, args.batch, args.dim, args.alpha, args.iterations, args.warmup, args.cache_ratio, device,
        args.cuda_graphs or graphs_wanted(None),
    )
    records = run(work, names, args.host_profile, args.kernel_profile)
    peaks = copy_peaks(device) if any(CONFIGS[name][1] in OFF_DEVICE for name in names) else None
    print_link(records, peaks)
    if args.json:
        write_results(args.json, work, records, peaks)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
