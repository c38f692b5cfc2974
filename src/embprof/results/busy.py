"""The breakdown's sidecar (``opcalls__<label>.busy.json``): busy and range time per backend.

:class:`BusyTime` is the sidecar as one typed record: the breakdown makes one and
:func:`write_busy` writes it, :func:`read_busy` gives it back (fields older sidecars lack
read as empty).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embprof.atomic import write_text
from embprof.errors import ContractError
from embprof.results.jsonfile import is_non_negative, read_object

TIME_SOURCES = ("gpu-kernels", "cpu-leaf-ops")
# How range_ms_per_iter is measured: from each backend range's start until both the range and the
# device work launched in it are done. Sidecars without the field hold the range's host time only.
RANGE_RULE = "until-device-done"


@dataclass(frozen=True)
class TopKernel:
    """One kernel name's device time in one backend, over every op it ran in."""

    kernel: str
    ms_per_iter: float
    calls_per_iter: float
    mean_us: float


TOP_KERNEL_FIELDS = ("kernel", "ms_per_iter", "calls_per_iter", "mean_us")


@dataclass(frozen=True)
class BusyTime:
    """Busy ms per iteration per backend, and what was timed (``busy_ms_per_iter`` and
    ``time_source`` of the sidecar, and its other fields under their own names)."""

    ms_per_iter: dict[str, float]
    time_source: str
    # Time per profiled iteration of each backend; empty in older sidecars.
    range_ms_per_iter: dict[str, float] = field(default_factory=dict)
    # True: until its device work is done (RANGE_RULE); False: the range's host time only (older sidecars).
    range_until_device_done: bool = False
    # Per iteration, the time between the backend's first and last device work when none of it ran
    # (the GPU waiting within the range); empty in sidecars written before issue 19.
    idle_ms_per_iter: dict[str, float] = field(default_factory=dict)
    # Per backend, its costliest kernels (and copies, memsets): TopKernel rows, costliest first;
    # empty in sidecars written before issue 19.
    top_kernels: dict[str, list[TopKernel]] = field(default_factory=dict)
    label: str = ""
    num_iters: int = 0
    # Work whose launch the trace lacks (outside the capture window): dropped, counted here.
    dropped_unlaunched: int = 0
    # Work launched on a thread without a context of its own while the process's other threads held
    # different ones (DESIGN.md, "Attribution rule"): dropped, counted here; 0 in older sidecars.
    dropped_ambiguous: int = 0
    traces: list[str] = field(default_factory=list)

    @property
    def cpu_leaf_ops(self) -> bool:
        """True when any merged trace timed CPU leaf operators instead of GPU kernels."""
        return "cpu-leaf-ops" in self.time_source.split("+")


def busy_fields(busy: BusyTime) -> dict[str, Any]:
    """The sidecar's fields (docs/DESIGN.md) of ``busy``, as JSON values."""
    fields = {
        "label": busy.label,
        "time_source": busy.time_source,
        "num_iters": busy.num_iters,
        "busy_ms_per_iter": busy.ms_per_iter,
        "range_ms_per_iter": busy.range_ms_per_iter,
        "idle_ms_per_iter": busy.idle_ms_per_iter,
        "top_kernels": {b: [asdict(row) for row in rows] for b, rows in busy.top_kernels.items()},
        "dropped_unlaunched": busy.dropped_unlaunched,
        "dropped_ambiguous": busy.dropped_ambiguous,
        "traces": list(busy.traces),
    }
    return fields | ({"range_rule": RANGE_RULE} if busy.range_until_device_done else {})


def write_busy(busy: BusyTime, path: str | os.PathLike[str]) -> None:
    """The sidecar of ``busy``, with sorted keys."""
    write_text(path, json.dumps(busy_fields(busy), indent=2, sort_keys=True) + "\n")


def read_busy(path: str | os.PathLike[str]) -> BusyTime | None:
    """The sidecar, or ``None`` when the breakdown wrote none."""
    if not Path(path).exists():
        return None
    data = read_object(path, "a busy-time sidecar")
    source = data.get("time_source")
    # Traces of one label merge; their sources join with "+" (e.g. "cpu-leaf-ops+gpu-kernels").
    if not isinstance(source, str) or not set(source.split("+")) <= set(TIME_SOURCES):
        raise ContractError(f"{path}: time_source must be made of {TIME_SOURCES}, got {source!r}")
    busy = _ms_per_backend(path, data, "busy_ms_per_iter")
    walls = _ms_per_backend(path, data, "range_ms_per_iter") if "range_ms_per_iter" in data else {}
    idle = _ms_per_backend(path, data, "idle_ms_per_iter") if "idle_ms_per_iter" in data else {}
    top = _top_kernels(path, data.get("top_kernels", {}))
    label, traces = data.get("label", ""), data.get("traces", [])
    counts = {k: data.get(k, 0) for k in ("num_iters", "dropped_unlaunched", "dropped_ambiguous")}
    if not isinstance(label, str) or not isinstance(traces, list) or not all(isinstance(t, str) for t in traces):
        raise ContractError(f"{path}: label must be text and traces a list of paths")
    bad = next((k for k, v in counts.items() if not isinstance(v, int) or isinstance(v, bool) or v < 0), None)
    if bad:
        raise ContractError(f"{path}: {bad} must be a whole number >= 0, got {counts[bad]!r}")
    return BusyTime(
        ms_per_iter=busy,
        time_source=source,
        range_ms_per_iter=walls,
        range_until_device_done=data.get("range_rule") == RANGE_RULE,
        idle_ms_per_iter=idle,
        top_kernels=top,
        label=label,
        traces=traces,
        **counts,
    )


def _top_kernels(path: str | os.PathLike[str], raw: Any) -> dict[str, list[TopKernel]]:
    """``top_kernels``: backend -> rows of ``kernel`` (text) and numbers >= 0."""
    bad = ContractError(
        f"{path}: top_kernels must map a backend to rows of {', '.join(TOP_KERNEL_FIELDS)} (numbers >= 0)"
    )
    if not isinstance(raw, dict):
        raise bad
    out = {}
    for backend, rows in raw.items():
        if not isinstance(rows, list) or not all(
            isinstance(r, dict) and set(r) == set(TOP_KERNEL_FIELDS) and isinstance(r["kernel"], str)
            and all(is_non_negative(r[k]) for k in TOP_KERNEL_FIELDS[1:])
            for r in rows
        ):
            raise bad
        out[str(backend)] = [TopKernel(r["kernel"], *(float(r[k]) for k in TOP_KERNEL_FIELDS[1:])) for r in rows]
    return out


def _ms_per_backend(path: str | os.PathLike[str], data: dict, key: str) -> dict[str, float]:
    per_backend = data.get(key)
    if not isinstance(per_backend, dict):
        raise ContractError(f"{path}: {key} must be an object backend -> ms")
    out = {}
    for backend, value in per_backend.items():
        if not is_non_negative(value):
            raise ContractError(f"{path}: {key} of {backend!r} must be a number >= 0, got {value!r}")
        out[str(backend)] = float(value)
    return out
