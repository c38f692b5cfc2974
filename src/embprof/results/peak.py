"""The device's peak memory bandwidth (``peak_bandwidth.json``)."""

from __future__ import annotations

import os
import math
from dataclasses import asdict, dataclass, field
from typing import Literal

from embprof.atomic import write_json
from embprof.errors import ContractError
from embprof.results.jsonfile import read_object

Source = Literal["measured", "datasheet"]
FIELDS = ("device", "name", "peak_gbps", "source", "method", "date")
# Kinds of copy, source -> destination memory, named as the per-op CSV's memory_kinds names them.
COPY_KINDS = ("pinned->device", "pageable->device", "device->pinned", "device->pageable", "device->device")


@dataclass(frozen=True)
class Peak:
    """``peak_gbps``: bytes read + written per second by a large copy (the STREAM convention).
    ``copy_gbps``: per kind of copy (``COPY_KINDS``), bytes copied per second by a large copy of
    that kind, as a trace's copies are rated (measured on CUDA; empty on the CPU, from a datasheet,
    and in files written before issue 19)."""

    device: str
    name: str
    peak_gbps: float
    source: Source
    method: str
    date: str
    copy_gbps: dict[str, float] = field(default_factory=dict)


def write_peak(peak: Peak, path: str | os.PathLike[str]) -> None:
    write_json(path, asdict(peak))


def read_peak(path: str | os.PathLike[str]) -> Peak:
    raw = read_object(path, "a peak bandwidth file")
    if set(FIELDS) - raw.keys():
        raise ContractError(f"{path}: a peak file needs the fields {', '.join(FIELDS)}")
    gbps = raw["peak_gbps"]
    if isinstance(gbps, bool) or not isinstance(gbps, int | float) or gbps <= 0:
        raise ContractError(f"{path}: peak_gbps must be a positive number, got {gbps!r}")
    if raw["source"] not in ("measured", "datasheet"):
        raise ContractError(f"{path}: source must be measured or datasheet, got {raw['source']!r}")
    copies = raw.get("copy_gbps", {})
    if not isinstance(copies, dict) or not all(
        kind in COPY_KINDS and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        for kind, v in copies.items()
    ):
        raise ContractError(f"{path}: copy_gbps must map kinds of {COPY_KINDS} to positive numbers, got {copies!r}")
    return Peak(**{k: raw[k] for k in FIELDS} | {"peak_gbps": float(gbps)},
                copy_gbps={k: float(v) for k, v in copies.items()})
