"""Merge the per-config timing files into ``benchmark_results.json``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from embprof.atomic import write_text
from embprof.report.load import InputError, check_results, read_json


def merge_timings(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """All records of all files (each a JSON list of records), sorted by label.

    Failed records (``status`` other than ``"ok"``) are kept: the report lists them.
    """
    merged: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    for path in map(Path, paths):
        data = read_json(path)
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError(f"{path}: expected a JSON list of record objects")
        for record in data:
            label = record.get("label")
            if not isinstance(label, str):
                raise InputError(f"{path}: a record has no string 'label'")
            if label in merged:
                raise InputError(f"{path}: label {label!r} already came from {origin[label]}")
            merged[label], origin[label] = record, path
    return [merged[label] for label in sorted(merged)]


def write_results(records: list[dict[str, Any]], out: Path) -> Path:
    """Write the merged list once it passes the checks the report will make when reading it."""
    check_results(records, Path(out))
    text = json.dumps(_finite_or_null(records), indent=2, allow_nan=False) + "\n"
    return write_text(out, text)


def _finite_or_null(value: Any) -> Any:
    """NaN and infinities become null: strict JSON, as browsers and jq read it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite_or_null(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    return value
