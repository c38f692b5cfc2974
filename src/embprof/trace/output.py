"""Writing the per-config CSV and its busy-time sidecar, atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from embprof.atomic import write_csv, write_text
from embprof.labels import sanitize_label

CSV_COLUMNS = [
    "backend", "phase", "parent_stages", "op", "calls_per_iter", "avg_ms_per_iter",
    "total_ms", "num_iters", "kernel_names", "fallback_category",
]


def opcalls_path(out_dir: Path, label: str) -> Path:
    return Path(out_dir) / f"opcalls__{sanitize_label(label)}.csv"


def busy_path(out_dir: Path, label: str) -> Path:
    return Path(out_dir) / f"opcalls__{sanitize_label(label)}.busy.json"


def write_opcalls_csv(df: pd.DataFrame, path: Path) -> None:
    """The DESIGN.md columns, in order, nothing else."""
    write_csv(df[CSV_COLUMNS], path, float_format="%.9g")


def write_busy_json(info: dict, path: Path) -> None:
    write_text(path, json.dumps(info, indent=2, sort_keys=True) + "\n")


def read_opcalls_csv(path: Path) -> pd.DataFrame:
    """Read a CSV written by :func:`write_opcalls_csv` (empty strings stay empty)."""
    return pd.read_csv(path, keep_default_na=False, dtype={"parent_stages": str, "kernel_names": str, "fallback_category": str})
