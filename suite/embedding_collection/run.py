"""One rank of the EmbeddingCollection benchmark: build, warm up, time or profile, record.

Every rank draws its own batches, builds the same sharded collection and runs the
same steps (the all-to-alls keep them in lock step). Each training step is
wrapped in DESIGN.md's range layout, adapted to one backend per run::

    <label> > nsys_iter_<i> > dyn|trc > forward|backward > (the library's stages and ops)

Timing marks forward and backward of every iteration (CUDA events on a GPU, a
monotonic clock on the CPU), read back once at the end; rank 0 gathers every
rank's means and appends one record. ``--profile torch`` writes one Kineto trace
per rank and no record; ``--profile nsys`` opens a cudaProfilerApi capture
range around the timed iterations for an ``nsys --capture-range=cudaProfilerApi``
wrapper.
"""

from __future__ import annotations

import gzip
import os
import platform
import shutil
import sys
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from dynemb.ranges import emit_range
from embprof.atomic import write_text
from embprof.labels import sanitize_label
from suite.records import library_versions
from suite.runner import Stopwatch

from ..errors import ECConfigError
from .backends import (
    Backend,
    build_dynamic,
    build_torchrec,
    table_bytes_per_rank,
    torchrec_skip_reason,
)
from .config import ECConfig, check_world, parse_config
from .data import make_batches
from .records import append_record

MEMORY_HEADROOM = 0.85  # share of a GPU the tables may take; batches and workspace need the rest
GRAD_SEED = 4321


@dataclass(frozen=True)
class Rank:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device

    @property
    def comm_backend(self) -> str:
        return "nccl" if self.device.type == "cuda" else "gloo"


def rank_from_env() -> Rank:
    """Where torchrun placed this process; ECConfigError when not launched by torchrun."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK") if v not in os.environ]
    if missing:
        raise ECConfigError(
            f"run under torchrun (suite/benchmark_embedding_collection.sh); {', '.join(missing)} not set"
        )
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise ECConfigError(
                f"local rank {local_rank} has no GPU ({torch.cuda.device_count()} visible)"
            )
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    world = int(os.environ["WORLD_SIZE"])
    return Rank(
        int(os.environ["RANK"]),
        world,
        local_rank,
        int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        device,
    )


def check_memory(cfg: ECConfig, where: Rank) -> None:
    """Fail before allocating when one rank's shard cannot fit its GPU."""
    if where.device.type != "cuda":
        return
    need = table_bytes_per_rank(cfg, where.world_size)
    have = torch.cuda.get_device_properties(where.device).total_memory
    if need > MEMORY_HEADROOM * have:
        raise ECConfigError(
            f"one rank's tables need {need / 2**30:.1f} GiB, over {MEMORY_HEADROOM:.0%} of the GPU's "
            f"{have / 2**30:.1f} GiB; use more GPUs, --rows-scale, or a lighter --optimizer"
        )


class TrainLoop:
    """Forward and backward of one backend over pre-built inputs, under the range layout."""

    def __init__(
        self, cfg: ECConfig, backend: Backend, inputs: list[Any], device: torch.device
    ) -> None:
        self.cfg = cfg
        self.backend = backend
        self.inputs = inputs
        self.grads: list[torch.Tensor] | None = None
        self.device = device

    def _grads_like(self, outs: list[torch.Tensor]) -> list[torch.Tensor]:
        """One fixed seeded gradient, split like the outputs: deterministic, no allocation per step."""
        if self.grads is None:
            gen = torch.Generator(device=self.device).manual_seed(GRAD_SEED)
            rows = sum(o.shape[0] for o in outs)
            full = torch.randn((rows, outs[0].shape[1]), generator=gen, device=self.device).mul_(
                0.01
            )
            self.grads = list(torch.split(full, [o.shape[0] for o in outs]))
        return self.grads

    def step(
        self, batch: int, iteration: int | None = None, watch: Stopwatch | None = None
    ) -> tuple[Any, Any, Any]:
        """Train on batch ``batch``; ``iteration`` names its ``nsys_iter_`` range (None: warm-up, no range)."""
        t0 = watch.mark() if watch else None
        with emit_range(f"nsys_iter_{iteration}") if iteration is not None else nullcontext():
            with emit_range(self.backend.name):
                with emit_range("forward"):
                    outs = self.backend.forward(self.inputs[batch])
                t1 = watch.mark() if watch else None
                with emit_range("backward"), torch.autograd.set_multithreading_enabled(False):
                    torch.autograd.backward(outs, self._grads_like(outs))
        t2 = watch.mark() if watch else None
        return t0, t1, t2


def timed_means(
    loop: TrainLoop, first: int, count: int, label: str, nsys: bool
) -> tuple[float, float]:
    """Mean forward and backward ms of iterations ``first .. first+count-1`` on this rank."""
    watch = Stopwatch(loop.device)
    if nsys:
        torch.cuda.profiler.start()
    with emit_range(label):
        marks = [loop.step(first + i, i, watch) for i in range(count)]
    watch.settle()
    if nsys:
        torch.cuda.profiler.stop()
    fwd = sum(watch.elapsed_ms(t0, t1) for t0, t1, _ in marks) / count
    bwd = sum(watch.elapsed_ms(t1, t2) for _, t1, t2 in marks) / count
    return fwd, bwd


def write_torch_trace(
    loop: TrainLoop, first: int, label: str, where: Rank, trace_dir: Path
) -> Path:
    """Profile ``profile_iterations`` steps; write ``<label>.rank<R>.kineto.json.gz`` atomically."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if where.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        with emit_range(label):
            for i in range(loop.cfg.profile_iterations):
                loop.step(first + i, i)
        if where.device.type == "cuda":
            torch.cuda.synchronize()
    trace_dir.mkdir(parents=True, exist_ok=True)
    target = trace_dir / f"{sanitize_label(label)}.rank{where.rank}.kineto.json.gz"
    with tempfile.TemporaryDirectory(dir=trace_dir, prefix=".trace.") as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        packed = Path(tmp) / "trace.json.gz"
        with raw.open("rb") as src, gzip.open(packed, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(packed, target)
    return target


def write_skip_note(trace_dir: Path, label: str, reason: str) -> Path:
    """In place of traces: ``<label>.skipped.txt`` holding why the run could not be profiled."""
    return write_text(trace_dir / f"{sanitize_label(label)}.skipped.txt", reason + "\n")


def gather(values: list[float], device: torch.device, world_size: int) -> list[list[float]]:
    """Every rank's ``values``, indexed by rank."""
    mine = torch.tensor(values, dtype=torch.float64, device=device)
    parts = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(parts, mine)
    return [p.tolist() for p in parts]


def base_record(cfg: ECConfig, where: Rank) -> dict[str, Any]:
    cuda = where.device.type == "cuda"
    return {
        "label": cfg.label(where.world_size),
        "benchmark": "embedding_collection",
        "status": "ok",
        "skip_reason": None,
        "use_index_dedup": cfg.use_index_dedup,
        "use_dynamic_embedding": cfg.use_dynamic_embedding,
        "table_backend": cfg.backend_name,
        "batch_size": cfg.batch_size,
        "local_batch_size": cfg.local_batch_size(where.world_size),
        "world_size": where.world_size,
        "device": where.device.type,
        "gpu_name": torch.cuda.get_device_name(where.device) if cuda else None,
        "backend": where.comm_backend,
        "num_features": cfg.num_features,
        "num_tables": 1 if cfg.use_dynamic_embedding else cfg.num_features,
        "num_embeddings_per_feature": list(cfg.rows_per_feature),
        "total_rows": sum(cfg.rows_per_feature),
        "rows_scale": cfg.rows_scale,
        "multi_hot_sizes": list(cfg.multi_hot_sizes),
        "embedding_dim": cfg.embedding_dim,
        "optimizer_type": cfg.optimizer,
        "owner_policy": cfg.owner_policy if cfg.use_dynamic_embedding else None,
        "iterations": cfg.iterations,
        "warmup_iterations": cfg.warmup,
        "forward_ms": None,
        "backward_ms": None,
        "total_ms": None,
        "forward_ms_per_rank": None,
        "backward_ms_per_rank": None,
        "total_ms_per_rank": None,
        "ids_sent_per_rank_per_iter": None,
        "timer": "cuda_events" if cuda else "wall_clock",
        **library_versions(),
    }


def run(cfg: ECConfig, where: Rank) -> dict[str, Any] | None:
    """The run on this rank; the record (on every rank), or None after a profile (or its skip note)."""
    record = base_record(cfg, where)
    label = record["label"]
    if not cfg.use_dynamic_embedding:
        reason = torchrec_skip_reason(cfg, where.device)
        if reason is not None:
            if cfg.profile == "torch":
                if where.rank == 0:
                    note = write_skip_note(cfg.trace_dir, label, reason)
                    print(f"rank 0: baseline skipped, wrote {note}", flush=True)
                return None
            record.update(status="skipped", skip_reason=reason)
            return record
    if cfg.use_dynamic_embedding:
        backend = build_dynamic(cfg, where.device)
    else:
        backend = build_torchrec(cfg, where.device, where.world_size, where.local_world_size)
    profiled = cfg.profile_iterations if cfg.profile == "torch" else 0
    count = cfg.warmup + (profiled or cfg.iterations)
    batches = make_batches(cfg, where.rank, where.world_size, count, where.device)
    loop = TrainLoop(cfg, backend, [backend.prepare(b) for b in batches], where.device)
    for i in range(cfg.warmup):
        loop.step(i)
    if cfg.profile == "torch":
        path = write_torch_trace(loop, cfg.warmup, label, where, cfg.trace_dir)
        print(f"rank {where.rank}: wrote {path}", flush=True)
        return None
    count_sent = backend.ids_sent or (lambda: 0)
    sent_before = count_sent()
    fwd, bwd = timed_means(loop, cfg.warmup, cfg.iterations, label, nsys=cfg.profile == "nsys")
    sent = (count_sent() - sent_before) / cfg.iterations
    per_rank = gather([fwd, bwd, sent], where.device, where.world_size)
    fwds, bwds, sents = ([r[k] for r in per_rank] for k in range(3))
    totals = [f + b for f, b in zip(fwds, bwds, strict=True)]
    record.update(
        forward_ms=max(fwds),
        backward_ms=max(bwds),
        total_ms=max(totals),
        forward_ms_per_rank=fwds,
        backward_ms_per_rank=bwds,
        total_ms_per_rank=totals,
        ids_sent_per_rank_per_iter=sents if backend.ids_sent else None,
    )
    return record


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_config(argv)
        where = rank_from_env()
        check_world(cfg, where.world_size)
        check_memory(cfg, where)
    except ECConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    init: dict[str, Any] = {
        "backend": where.comm_backend,
        "timeout": timedelta(seconds=cfg.timeout_s),
    }
    if where.device.type == "cuda":
        init["device_id"] = where.device
    dist.init_process_group(**init)
    try:
        record = run(cfg, where)
        if record is not None and where.rank == 0:
            append_record(cfg.results_file, record)
            times = (
                "skipped: " + record["skip_reason"]
                if record["status"] == "skipped"
                else (
                    f"forward {record['forward_ms']:.3f} ms, backward {record['backward_ms']:.3f} ms, "
                    f"total {record['total_ms']:.3f} ms per iteration (slowest rank)"
                )
            )
            print(
                f"{record['label']} on {where.world_size} x {platform.node()} {where.device.type}: {times}",
                flush=True,
            )
    finally:
        dist.destroy_process_group()
    return 0
