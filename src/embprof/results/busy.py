"""The breakdown's sidecar (``opcalls__<label>.busy.json``): busy and range time per backend."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embprof.atomic import write_text
from embprof.errors import ContractError
from embprof.results.jsonfile import read_object

TIME_SOURCES = ("gpu-kernels", "cpu-leaf-ops")
# How range_ms_per_iter is measured: from each backend range's start until both the range and the
# device work launched in it are done. Sidecars without the field hold the range's host time only.
RANGE_RULE = "until-device-done"


@dataclass(frozen=True)
class BusyTime:
    """Busy ms per iteration per backend, and what was timed."""

    ms_per_iter: dict[str, float]
    time_source: str
    # Time per profiled iteration of each backend; empty in older sidecars.
    range_ms_per_iter: dict[str, float] = field(default_factory=dict)
    # True: until its device work is done (RANGE_RULE); False: the range's host time only (older sidecars).
    range_until_device_done: bool = False
    # Per iteration, the time between the backend's first and last device work when none of it ran
    # (the GPU waiting within the range); empty in sidecars written before issue 19.
    idle_ms_per_iter: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_leaf_ops(self) -> bool:
        """True when any merged trace timed CPU leaf operators instead of GPU kernels."""
        return "cpu-leaf-ops" in self.time_source.split("+")


def write_busy(info: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """``info``: the sidecar's fields (docs/DESIGN.md), written with sorted keys."""
    write_text(path, json.dumps(info, indent=2, sort_keys=True) + "\n")


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
    return BusyTime(
        ms_per_iter=busy,
        time_source=source,
        range_ms_per_iter=walls,
        range_until_device_done=data.get("range_rule") == RANGE_RULE,
        idle_ms_per_iter=idle,
    )


def _ms_per_backend(path: str | os.PathLike[str], data: dict, key: str) -> dict[str, float]:
    per_backend = data.get(key)
    if not isinstance(per_backend, dict):
        raise ContractError(f"{path}: {key} must be an object backend -> ms")
    out = {}
    for backend, value in per_backend.items():
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ContractError(f"{path}: {key} of {backend!r} must be a number >= 0, got {value!r}")
        out[str(backend)] = float(value)
    return out
