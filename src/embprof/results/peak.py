"""The device's peak memory bandwidth (``peak_bandwidth.json``)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

from embprof.atomic import write_json
from embprof.errors import ContractError
from embprof.results.jsonfile import read_object

Source = Literal["measured", "datasheet"]
FIELDS = ("device", "name", "peak_gbps", "source", "method", "date")


@dataclass(frozen=True)
class Peak:
    device: str
    name: str
    peak_gbps: float
    source: Source
    method: str
    date: str


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
    return Peak(**{k: raw[k] for k in FIELDS} | {"peak_gbps": float(gbps)})
