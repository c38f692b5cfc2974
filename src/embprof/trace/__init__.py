"""Per-op GPU time from nsys and PyTorch profiler traces (the breakdown).

``breakdown(paths)`` -> ``{label: rows}`` with the DESIGN.md CSV columns;
``run_breakdown`` also gives each label's GPU-busy time per iteration, which
``write_outputs`` stores next to the CSV as ``opcalls__<label>.busy.json``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import TraceError
from .output import (
    CSV_COLUMNS,
    busy_path,
    opcalls_path,
    read_opcalls_csv,
    write_busy_json,
    write_opcalls_csv,
)
from .pipeline import LAYOUTS, LabelBreakdown, run_breakdown


def breakdown(paths: list[Path], layout: str = "default", categories: Path | None = None) -> dict[str, pd.DataFrame]:
    """Label -> per-op rows (DESIGN.md CSV columns), traces of one label merged."""
    return {label: lb.rows for label, lb in run_breakdown(paths, layout, categories).items()}


def write_outputs(results: dict[str, LabelBreakdown], out_dir: Path) -> list[Path]:
    """Write ``opcalls__<label>.csv`` and its ``.busy.json`` per label; returns the CSV paths."""
    written = []
    for label, lb in results.items():
        csv = opcalls_path(out_dir, label)
        write_busy_json(lb.busy_info(), busy_path(out_dir, label))
        write_opcalls_csv(lb.rows, csv)
        written.append(csv)
    return written


__all__ = [
    "CSV_COLUMNS", "LAYOUTS", "LabelBreakdown", "TraceError", "breakdown", "busy_path", "opcalls_path",
    "read_opcalls_csv", "run_breakdown", "write_busy_json", "write_opcalls_csv", "write_outputs",
]
