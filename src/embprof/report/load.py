"""Readers for the files the workflow hands to the report (formats: docs/DESIGN.md).

Every reader checks what it relies on and raises :class:`InputError` with one
line naming the file and what is wrong, so scripts can exit cleanly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from embprof.labels import parse_label
from embprof.trace.output import CSV_COLUMNS, busy_path, opcalls_path
from embprof.trace.pipeline import RANGE_RULE

# The breakdown's CSV contract and file names (DESIGN.md), defined once where they are written.
OPCALLS_COLUMNS = tuple(CSV_COLUMNS)
opcalls_csv = opcalls_path
busy_json = busy_path
TEXT_COLUMNS = ("backend", "phase", "parent_stages", "op", "kernel_names", "fallback_category")
NUMBER_COLUMNS = ("calls_per_iter", "avg_ms_per_iter", "total_ms", "num_iters")
TIME_SOURCES = ("gpu-kernels", "cpu-leaf-ops")
STATUS_KEYS = ("label", "ok", "failed_step", "returncode", "log", "log_tail")


class InputError(ValueError):
    """An input file is missing or does not follow its contract."""


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None


def read_opcalls(path: Path) -> pd.DataFrame:
    """The per-op CSV of one config, text columns as str ('' for empty), numbers as float."""
    path = Path(path)
    try:
        frame = pd.read_csv(
            path, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=False, na_values={}
        )
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV ({exc})") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file, expected a header row") from None
    missing = [c for c in OPCALLS_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = frame[list(OPCALLS_COLUMNS)].copy()
    for column in NUMBER_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise InputError(
                f"{path}: line {line}: {column} must be a finite number >= 0, "
                f"got {frame[column].iloc[line - 2]!r}"
            )
        frame[column] = values
    empty_key = (frame["backend"] == "") | (frame["phase"] == "") | (frame["op"] == "")
    if empty_key.any():
        line = int(np.flatnonzero(empty_key.to_numpy())[0]) + 2
        raise InputError(f"{path}: line {line}: backend, phase and op must not be empty")
    return frame


@dataclass(frozen=True)
class BusyTime:
    """The breakdown's sidecar: busy ms per iteration per backend, and what was timed."""

    ms_per_iter: dict[str, float]
    time_source: str
    # Time per profiled iteration of each backend; empty in older sidecars.
    range_ms_per_iter: dict[str, float] = field(default_factory=dict)
    # True: until its device work is done (RANGE_RULE); False: the range's host time only (older sidecars).
    range_until_device_done: bool = False

    @property
    def cpu_leaf_ops(self) -> bool:
        """True when any merged trace timed CPU leaf operators instead of GPU kernels."""
        return "cpu-leaf-ops" in self.time_source.split("+")


def read_busy(path: Path) -> BusyTime | None:
    """The ``.busy.json`` sidecar, or ``None`` when the breakdown wrote none."""
    path = Path(path)
    if not path.exists():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    source = data.get("time_source")
    # Traces of one label merge; their sources join with "+" (e.g. "cpu-leaf-ops+gpu-kernels").
    if not isinstance(source, str) or not set(source.split("+")) <= set(TIME_SOURCES):
        raise InputError(f"{path}: time_source must be made of {TIME_SOURCES}, got {source!r}")
    busy = _ms_per_backend(path, data, "busy_ms_per_iter")
    walls = _ms_per_backend(path, data, "range_ms_per_iter") if "range_ms_per_iter" in data else {}
    return BusyTime(
        ms_per_iter=busy, time_source=source, range_ms_per_iter=walls, range_until_device_done=data.get("range_rule") == RANGE_RULE,
    )


def _ms_per_backend(path: Path, data: dict, key: str) -> dict[str, float]:
    per_backend = data.get(key)
    if not isinstance(per_backend, dict):
        raise InputError(f"{path}: {key} must be an object backend -> ms")
    out = {}
    for backend, value in per_backend.items():
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
        ):
            raise InputError(f"{path}: {key} of {backend!r} must be a number >= 0, got {value!r}")
        out[str(backend)] = float(value)
    return out


def _check_label(path: Path, label: Any, where: str) -> str:
    if not isinstance(label, str):
        raise InputError(f"{path}: {where}: label must be a string, got {label!r}")
    try:
        parse_label(label)
    except ValueError as exc:
        raise InputError(f"{path}: {where}: {exc}") from None
    return label


def read_results(path: Path) -> list[dict[str, Any]]:
    """``benchmark_results.json``: a list of per-config records, each with a valid label."""
    return check_results(read_json(Path(path)), Path(path))


def check_results(data: Any, path: Path) -> list[dict[str, Any]]:
    """``data`` is a list of record objects with valid, unique labels (``path`` names it in errors)."""
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    for i, record in enumerate(data):
        if not isinstance(record, dict):
            raise InputError(f"{path}: record {i} is not an object")
        _check_label(path, record.get("label"), f"record {i}")
    labels = [r["label"] for r in data]
    if len(set(labels)) != len(labels):
        dup = next(lab for lab in labels if labels.count(lab) > 1)
        raise InputError(f"{path}: label {dup!r} appears more than once")
    return data


def read_configs(path: Path) -> pd.DataFrame:
    """``configs.tsv``: header ``test_id<TAB>label``, one row per config."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: not a readable TSV ({exc})") from None
    if list(frame.columns[:2]) != ["test_id", "label"]:
        raise InputError(f"{path}: header must be 'test_id<TAB>label', got {list(frame.columns)}")
    for i, label in enumerate(frame["label"]):
        _check_label(path, label, f"row {i + 2}")
    return frame[["test_id", "label"]]


def read_statuses(status_dir: Path) -> dict[str, dict[str, Any]]:
    """``status/<label>.json`` of every config, by label."""
    status_dir = Path(status_dir)
    if not status_dir.is_dir():
        raise InputError(f"{status_dir}: no such directory")
    statuses = {}
    for path in sorted(status_dir.glob("*.json")):
        data = read_json(path)
        if not isinstance(data, dict) or any(k not in data for k in STATUS_KEYS):
            raise InputError(f"{path}: expected an object with keys {', '.join(STATUS_KEYS)}")
        statuses[_check_label(path, data["label"], "status")] = data
    return statuses


def read_environment(path: Path) -> dict[str, Any]:
    data = read_json(Path(path))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data
