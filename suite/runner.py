"""Running one config: warm-up, the timed loop, correctness checks and the profile modes.

Timing replays the warm-up's batches with the backends (dyn, trc, nv) interleaved per
iteration, timed with CUDA events (the process's CPU time on the CPU, which a
busy machine does not stretch) and read back once at the end of each pass, so timing adds no host sync inside the loop. The timed
passes are repeated (``--repeats``) and the record keeps every repeat. Profile
modes wrap the same steps in DESIGN.md's range layout and never time anything.

Every backward runs with autograd's multithreading off, so its CUDA kernels
launch on the thread that holds the ranges (the breakdown attributes kernels
by launching thread only).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dynemb import StorageMode
from dynemb.kernels import kernel_path
from dynemb.ranges import emit_range
from embprof.atomic import atomic_path
from embprof.labels import sanitize_label
from embprof.results.records import HOST_TRAFFIC_FIELDS
from embprof.results.timings import BACKENDS, PHASES, timing_entry

from .backends import Baseline, build_baseline, build_dynamic_tables, load_dyn_rows, reference_rows
from .configs import BenchmarkConfig, RunOptions
from .datagen import Batches, generate_batches
from .errors import BaselineRequired
from .nvidia import build_nvidia_tables, load_nvidia_rows
from .records import library_versions, run_provenance

CORRECTNESS_ATOL = 1e-4  # fp32, as the reference system's correctness mode
CORRECTNESS_RTOL = 1e-3
PROGRESS_MIN_ITERATIONS = 20


# Correctness mode: how each backend that does not give the starting rows receives them.
ROW_LOADERS = {"dyn": load_dyn_rows, "nv": load_nvidia_rows}


@dataclass
class Backend:
    """One side of the comparison; ``prefetch``: dyn's caching mode brings a batch's rows in first
    (NVIDIA's module prefetches inside its own forward)."""

    name: str  # "dyn" | "trc" | "nv": the range name and the record's field prefix
    module: torch.nn.Module
    prefetch: bool = False

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        if self.prefetch and self.module.training:
            self.module.prefetch(indices, offsets)
        return self.module(indices, offsets)


@dataclass(frozen=True)
class PhaseTimes:
    forward_ms: float
    backward_ms: float
    eval_ms: float

    @property
    def train_ms(self) -> float:
        return self.forward_ms + self.backward_ms


def pick_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


class Stopwatch:
    """Marks points in the stream of work: CUDA events on a GPU, the process's CPU time on the CPU.

    CPU time, not the wall clock: on a shared machine the wall clock also counts the time other
    processes held the cores, which made two runs of the same code differ by 2x and more
    (docs/COMPARE.md); with one torch thread (--cpu-threads 1) it is the work's own time.
    """

    TIMERS = {"cuda": "cuda_events", "cpu": "cpu_time"}  # the record's ``timer``

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.timer = self.TIMERS["cuda" if self.cuda else "cpu"]

    def mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.process_time()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Valid after :meth:`settle`."""
        if self.cuda:
            return start.elapsed_time(end)
        return (end - start) * 1e3

    def settle(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


class GradSource:
    """One fixed, seeded gradient per output shape: deterministic, and no allocation per step."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._cache: dict[tuple[Any, ...], torch.Tensor] = {}

    def like(self, out: torch.Tensor) -> torch.Tensor:
        key = (tuple(out.shape), out.dtype, out.device)
        grad = self._cache.get(key)
        if grad is None:
            gen = torch.Generator(device=out.device).manual_seed(self.seed)
            grad = torch.randn(out.shape, generator=gen, device=out.device, dtype=out.dtype)
            self._cache[key] = grad.mul_(0.1)
        return grad


def backward(out: torch.Tensor, grad: torch.Tensor) -> None:
    with torch.autograd.set_multithreading_enabled(False):
        out.backward(grad)


def check_outputs(outs: dict[str, torch.Tensor], what: str) -> None:
    """Every backend's forward output equals dyn's (fp32 tolerances)."""
    for name, out in outs.items():
        if name != "dyn":
            torch.testing.assert_close(
                outs["dyn"],
                out,
                atol=CORRECTNESS_ATOL,
                rtol=CORRECTNESS_RTOL,
                msg=lambda m, name=name: f"dyn and {name} forward outputs differ ({what}): {m}",
            )


@dataclass
class Workload:
    """A config's inputs and its backends, ready to run."""

    cfg: BenchmarkConfig
    device: torch.device
    batches: Batches
    backends: list[Backend]
    skip_reasons: dict[str, str]  # each backend that does not run: why
    grads: GradSource
    check: bool

    def train_step(self, i: int, watch: Stopwatch | None = None) -> dict[str, tuple[Any, ...]]:
        """Forward and backward of every backend on batch ``i``; the marks around each phase."""
        indices, offsets = self.batches.indices[i], self.batches.offsets[i]
        marks: dict[str, tuple[Any, ...]] = {}
        outs: dict[str, torch.Tensor] = {}
        for b in self.backends:
            t0 = watch.mark() if watch else None
            out = b.forward(indices, offsets)
            t1 = watch.mark() if watch else None
            backward(out, self.grads.like(out))
            t2 = watch.mark() if watch else None
            marks[b.name] = (t0, t1, t2)
            if self.check:
                outs[b.name] = out.detach()
        if self.check:
            check_outputs(outs, f"train iteration {i}")
        return marks

    @torch.no_grad()
    def eval_step(self, i: int, watch: Stopwatch | None = None) -> dict[str, tuple[Any, ...]]:
        indices, offsets = self.batches.indices[i], self.batches.offsets[i]
        marks: dict[str, tuple[Any, ...]] = {}
        outs: dict[str, torch.Tensor] = {}
        for b in self.backends:
            t0 = watch.mark() if watch else None
            out = b.forward(indices, offsets)
            t1 = watch.mark() if watch else None
            marks[b.name] = (t0, t1)
            if self.check:
                outs[b.name] = out
        if self.check:
            check_outputs(outs, f"eval iteration {i}")
        return marks

    def set_training(self, training: bool) -> None:
        for b in self.backends:
            b.module.train(training)

    def settle(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()


def prepare(cfg: BenchmarkConfig, opts: RunOptions) -> Workload:
    """Generate every batch first (the cache is sized from them), then build the backends.

    On the CPU torch runs ``opts.cpu_threads`` threads, set before any work. The backends of a
    config run before in this process are collected first: one held in a reference cycle would
    otherwise keep its GPU and host memory while this config's are built.
    """
    device = pick_device()
    gc.collect()
    if device.type == "cpu":
        torch.set_num_threads(opts.cpu_threads)
    else:
        torch.cuda.empty_cache()
    caps = [c // 2 for c in cfg.caps] if opts.correctness else list(cfg.caps)
    batches = generate_batches(
        num_iterations=cfg.num_iterations,
        batch_size=cfg.batch_size,
        caps=caps,
        distribution=cfg.distribution,
        alpha=cfg.alpha,
        pooled=cfg.pooling != "none",
        max_hotness=cfg.max_hotness,
        seed=cfg.seed,
        device=device,
    )
    hbm_rows = cfg.hbm_rows_per_table(batches.distinct_per_table)
    dyn = build_dynamic_tables(cfg, cfg.hbm_bytes_per_table(batches.distinct_per_table), device)
    backends = [Backend("dyn", dyn, prefetch=cfg.caching)]
    skip_reasons = dict(opts.left_out)
    builders = {"trc": build_baseline, "nv": build_nvidia_tables}
    for name in opts.backends[1:]:
        built: Baseline = builders[name](cfg, hbm_rows, device)
        if built.module is None:
            skip_reasons[name] = built.skip_reason or "not built"
        else:
            backends.append(Backend(name, built.module))
    if opts.correctness:
        if len(backends) < 2:
            reasons = "; ".join(f"{b}: {why}" for b, why in skip_reasons.items())
            raise BaselineRequired(f"correctness mode needs a backend beside dyn: {reasons}")
        mirror_rows(cfg, backends, device)
    return Workload(
        cfg=cfg,
        device=device,
        batches=batches,
        backends=backends,
        skip_reasons=skip_reasons,
        grads=GradSource(cfg.seed + 1),
        check=opts.correctness,
    )


def mirror_rows(cfg: BenchmarkConfig, backends: list[Backend], device: torch.device) -> None:
    """Correctness mode: every backend starts from the same rows of ids [0, cap/2) (TBE's where
    it runs, else drawn from the config's seed)."""
    tbe = next((b.module for b in backends if b.name == "trc"), None)
    receivers = [b for b in backends if b.name != "trc"]
    for t, rows in enumerate(reference_rows(cfg, cfg.seed, device, tbe)):
        for b in receivers:
            ROW_LOADERS[b.name](b.module, t, rows)


def warm_up(work: Workload) -> None:
    """One untimed training pass over every batch (the cache state it leaves is kept), then one eval pass.

    The eval pass compiles eval's own kernels: JIT (Triton) kernels are specialized
    per lookup kind and per batch length (divisible by 16 or not), so a timed loop
    meeting a new variant pays for its compile. Eval stores nothing, so the tables
    are left as training left them.
    """
    work.set_training(True)
    for i in range(len(work.batches)):
        work.train_step(i)
    work.set_training(False)
    for i in range(len(work.batches)):
        work.eval_step(i)
    work.set_training(True)
    work.settle()


def _progress(n: int, desc: str) -> Iterator[int]:
    from tqdm import tqdm

    return iter(tqdm(range(n), desc=desc, disable=None if n >= PROGRESS_MIN_ITERATIONS else True, leave=False))


def time_phases(work: Workload, repeat: str = "") -> dict[str, PhaseTimes]:
    """The timed train loop, then the timed eval loop; ms per iteration per backend."""
    watch = Stopwatch(work.device)
    n = len(work.batches)
    work.set_training(True)
    train_marks = [work.train_step(i, watch) for i in _progress(n, f"{work.cfg.label} train{repeat}")]
    work.set_training(False)
    eval_marks = [work.eval_step(i, watch) for i in _progress(n, f"{work.cfg.label} eval{repeat}")]
    work.set_training(True)
    watch.settle()
    times = {}
    for b in work.backends:
        fwd = sum(watch.elapsed_ms(m[b.name][0], m[b.name][1]) for m in train_marks)
        bwd = sum(watch.elapsed_ms(m[b.name][1], m[b.name][2]) for m in train_marks)
        evl = sum(watch.elapsed_ms(m[b.name][0], m[b.name][1]) for m in eval_marks)
        times[b.name] = PhaseTimes(fwd / n, bwd / n, evl / n)
    return times


def host_traffic(work: Workload) -> dict[str, float]:
    """dyn's host rows and bytes each way per train iteration (the record's ``HOST_TRAFFIC_FIELDS``), counted
    on the device (``dynemb``'s ``count_host_traffic``) over one more training pass of the batches, untimed and
    dyn's alone, after the timed ones: counting launches a few kernels per step, which the timed steps must
    not pay, and the cache then holds what the timed passes left, as their own steady state did. None for a
    config whose dyn tables keep every row on the device."""
    dyn = work.backends[0]
    module = dyn.module
    if all(module.storage_mode(t) is StorageMode.GPU for t in range(module.num_tables)):
        return {}
    module.count_host_traffic()
    module.reset_host_stats()
    for i in range(len(work.batches)):
        out = dyn.forward(work.batches.indices[i], work.batches.offsets[i])
        backward(out, work.grads.like(out))
    stats = module.host_stats()
    module.count_host_traffic(False)
    names = ("rows_in", "rows_out", "bytes_in", "bytes_out")
    return {field: stats[name] / len(work.batches) for field, name in zip(HOST_TRAFFIC_FIELDS, names, strict=True)}


def make_record(
    work: Workload, repeats: list[dict[str, PhaseTimes]], provenance: dict[str, Any], traffic: dict[str, float] | None = None,
) -> dict[str, Any]:
    """DESIGN.md's record: each flat ``<backend>_<phase>_ms`` is the median of its repeats,
    which ``timings`` keeps with their summary; a backend that did not run has nulls and its
    ``<backend>_skip_reason``; ``traffic`` (``host_traffic``) last, where the config has host rows."""
    cfg, batches = work.cfg, work.batches
    record: dict[str, Any] = {
        "label": cfg.label,
        "gpu_name": torch.cuda.get_device_name(work.device) if work.device.type == "cuda" else None,
        "device": str(work.device),
        "num_tables": cfg.num_tables,
        "batch_size": cfg.batch_size,
        "embedding_dim": cfg.dim,
        "optimizer_type": cfg.optimizer,
        "caching": cfg.caching,
        "cache_footprint_ratio": cfg.cache_footprint_ratio,
        "pooling_mode": cfg.pooling,
        "num_embeddings_per_feature": list(cfg.caps),
        "feature_distribution": cfg.distribution,
        "alpha": cfg.alpha,
        "max_hotness": cfg.max_hotness,
        "avg_n_unique": batches.avg_n_unique,
        "avg_n_total": batches.avg_n_total,
        "num_iterations": cfg.num_iterations,
    }
    timings: dict[str, Any] = {}
    for name in BACKENDS:
        for phase in PHASES:
            metric = f"{name}_{phase}_ms"
            values = [getattr(r[name], f"{phase}_ms") for r in repeats if name in r]
            bad = [v for v in values if not math.isfinite(v)]
            if bad:
                raise ValueError(f"{cfg.label}: {metric} is {bad[0]}")
            timings[metric] = timing_entry(values) if values else None
            record[metric] = timings[metric]["median"] if values else None
    record.update(library_versions())
    for name in BACKENDS[1:]:
        record[f"{name}_skip_reason"] = work.skip_reasons.get(name)
    record["status"] = "ok"
    record["repeats"] = len(repeats)
    record["timer"] = Stopwatch(work.device).timer
    record["timings"] = timings
    record["provenance"] = provenance
    record.update(traffic or {})
    for key, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{cfg.label}: {key} is {value}")
    return record


def run_timing(cfg: BenchmarkConfig, opts: RunOptions) -> dict[str, Any]:
    """Warm up once, then ``opts.repeats`` timed passes; provenance is taken before anything runs."""
    provenance = run_provenance(opts.checkout, pick_device())
    work = prepare(cfg, opts)
    warm_up(work)
    repeats = [
        time_phases(work, f" {r + 1}/{opts.repeats}" if opts.repeats > 1 else "") for r in range(opts.repeats)
    ]
    traffic = host_traffic(work)
    # What the run used: a kernel that failed to compile shows now, and so do --cpu-threads.
    provenance["kernel_path"] = kernel_path(work.device)
    provenance["torch_threads"] = torch.get_num_threads()
    return make_record(work, repeats, provenance, traffic)


# ---- profile modes -------------------------------------------------------------------------


def _profiled_train_step(work: Workload, i: int, iteration_range: str) -> None:
    """One iteration in DESIGN.md's layout: <iteration> > dyn|trc|nv > forward|backward."""
    indices, offsets = work.batches.indices[i], work.batches.offsets[i]
    with emit_range(iteration_range):
        for b in work.backends:
            with emit_range(b.name):
                with emit_range("forward"):
                    out = b.forward(indices, offsets)
                with emit_range("backward"):
                    backward(out, work.grads.like(out))


def profiled_iterations(work: Workload) -> None:
    """<label> > nsys_iter_<i> > ...: the tree torch and nsys profiles carry."""
    work.set_training(True)
    with emit_range(work.cfg.label):
        for i in range(len(work.batches)):
            _profiled_train_step(work, i, f"nsys_iter_{i}")
    work.settle()


@contextmanager
def cuda_profiler_window() -> Iterator[None]:
    """The one cudaProfilerStart/Stop window nsys (--capture-range=cudaProfilerApi) and ncu capture."""
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    try:
        yield
        torch.cuda.synchronize()
    finally:
        torch.cuda.cudart().cudaProfilerStop()


def torch_trace_path(trace_dir: Path, label: str) -> Path:
    return trace_dir / f"{sanitize_label(label)}.kineto.json.gz"


def run_torch_profile(cfg: BenchmarkConfig, opts: RunOptions) -> Path:
    """A torch.profiler Chrome trace of the sampled iterations (CPU always, CUDA when present)."""
    from torch.profiler import ProfilerActivity, profile

    assert opts.trace_dir is not None
    work = prepare(cfg, opts)
    warm_up(work)
    activities = [ProfilerActivity.CPU]
    if work.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        profiled_iterations(work)
    target = torch_trace_path(opts.trace_dir, cfg.label)
    with atomic_path(target, suffix=".json.gz") as tmp:
        prof.export_chrome_trace(str(tmp))  # torch gzips by the suffix
    return target


def run_nsys_profile(cfg: BenchmarkConfig, opts: RunOptions) -> None:
    """Untimed warm-up, then the sampled iterations inside one cudaProfilerStart/Stop window."""
    work = prepare(cfg, opts)
    warm_up(work)
    with cuda_profiler_window():
        profiled_iterations(work)


def run_ncu_profile(cfg: BenchmarkConfig, opts: RunOptions) -> None:
    """<label> > ncu_iter > iter_<i> > ...: ncu-gen's --nvtx-include picks the iterations."""
    work = prepare(cfg, opts)
    warm_up(work)
    work.set_training(True)
    with cuda_profiler_window(), emit_range(cfg.label), emit_range("ncu_iter"):
        for i in range(len(work.batches)):
            _profiled_train_step(work, i, f"iter_{i}")
