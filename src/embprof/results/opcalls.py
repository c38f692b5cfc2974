"""The per-op CSV (``opcalls__<label>.csv``): the breakdown writes it, plots, bandwidth and report read it.

One number (or one text) per cell. A row's ms in each profiled iteration lies in a
file of its own beside it (:mod:`embprof.results.samples`, since issue 33); CSVs
written between issues 20 and 33 hold them in an ``ms_by_iter`` column,
``;``-joined, which :func:`read_opcalls` leaves out and :func:`read_legacy_samples`
reads. ``copy_bytes_per_iter`` and ``memory_kinds`` (since issue 19) hold what a row
of copies or memsets moved, from the trace; empty for kernels; ``cpu_ms_per_iter``
an op's own host time (its ranges' durations), empty for work under no op; all
three empty in older CSVs (read so: unknown).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from embprof.atomic import write_csv
from embprof.errors import ContractError
from embprof.results.csvfile import read_table

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (
    "backend", "phase", "parent_stages", "op", "calls_per_iter", "avg_ms_per_iter",
    "total_ms", "num_iters", "kernel_names", "fallback_category",
    "copy_bytes_per_iter", "memory_kinds", "cpu_ms_per_iter",
)
# The samples of CSVs written between issues 20 and 33 (now a file of their own).
LEGACY_SAMPLES = "ms_by_iter"
TEXT_COLUMNS = (
    "backend", "phase", "parent_stages", "op", "kernel_names", "fallback_category", LEGACY_SAMPLES,
    "memory_kinds",
)
# Numbers that may be empty (NaN): a kernel's row moves no bytes the trace counts.
OPTIONAL_NUMBER_COLUMNS = ("copy_bytes_per_iter", "cpu_ms_per_iter")
NUMBER_COLUMNS = ("calls_per_iter", "avg_ms_per_iter", "total_ms", "num_iters")
SAMPLE_SEPARATOR = ";"


def _legacy_matrix(text: pd.Series) -> np.ndarray:
    """``ms_by_iter`` cells as rows x iterations of floats, NaN-padded; a row without samples is all NaN.

    Raises ValueError on a value that is not a number.
    """
    text = text.fillna("").astype(str)
    if len(text) == 0 or not text.str.len().any():
        return np.full((len(text), 0), np.nan)
    cells = text.str.split(SAMPLE_SEPARATOR, expand=True).replace("", np.nan)
    return cells.astype(float).to_numpy()


def write_opcalls(table: pd.DataFrame | Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """The contract's columns, in order, nothing else (``table``: a DataFrame or columns by name)."""
    write_csv(table, path, COLUMNS, float_format="%.9g")


def read_opcalls(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One config's rows: text columns as str ('' for empty), numbers as finite floats >= 0 (an older
    CSV's ``ms_by_iter`` left out: :func:`read_legacy_samples`)."""
    return _read(path)[list(COLUMNS)]


def read_legacy_samples(path: str | os.PathLike[str]) -> pd.DataFrame | None:
    """The samples an older CSV holds in its ``ms_by_iter`` column, long as
    :mod:`embprof.results.samples` gives them (a row with the cell empty has none); None where the
    CSV has no such column."""
    from embprof.results.samples import samples_of_rows

    frame = _read(path)
    if LEGACY_SAMPLES not in frame.columns:
        return None
    return samples_of_rows(frame, _legacy_matrix(frame[LEGACY_SAMPLES]))


def _read(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The CSV's rows, checked; with an older CSV's ``ms_by_iter`` (checked too) where it has one."""
    frame = read_table(path, TEXT_COLUMNS)
    if "memory_kinds" not in frame.columns:  # written before the trace's copy bytes (issue 19)
        frame = frame.assign(copy_bytes_per_iter=np.nan, memory_kinds="", cpu_ms_per_iter=np.nan)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ContractError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = frame[[*COLUMNS, *([LEGACY_SAMPLES] if LEGACY_SAMPLES in frame.columns else [])]].copy()
    for column in (*NUMBER_COLUMNS, *OPTIONAL_NUMBER_COLUMNS):
        frame[column] = _numbers(path, frame[column], optional=column in OPTIONAL_NUMBER_COLUMNS)
    empty_key = (frame["backend"] == "") | (frame["phase"] == "") | (frame["op"] == "")
    if empty_key.any():
        line = int(np.flatnonzero(empty_key.to_numpy())[0]) + 2
        raise ContractError(f"{path}: line {line}: backend, phase and op must not be empty")
    if LEGACY_SAMPLES in frame.columns:
        _check_samples(path, frame)
    return frame


def _numbers(path: str | os.PathLike[str], column: pd.Series, optional: bool) -> pd.Series:
    """A column as finite floats >= 0; ``optional``: an empty cell is NaN (unknown), not an error."""
    import pandas as pd

    text = column.astype(object).where(column.notna(), "").astype(str).str.strip()
    values = pd.to_numeric(text.where(text != "", np.nan), errors="coerce").astype(float)
    bad = (~np.isfinite(values) | (values < 0)) & ((text != "") if optional else True)
    if bad.any():
        line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
        what = "empty or a finite number >= 0" if optional else "a finite number >= 0"
        raise ContractError(f"{path}: line {line}: {column.name} must be {what}, got {column.iloc[line - 2]!r}")
    return values


def _check_samples(path: str | os.PathLike[str], frame: pd.DataFrame) -> None:
    """A row's ``ms_by_iter``: empty, or ``num_iters`` finite numbers >= 0."""
    try:
        samples = _legacy_matrix(frame[LEGACY_SAMPLES])
    except ValueError:
        samples = None
    given = frame[LEGACY_SAMPLES].str.len().to_numpy() > 0
    if samples is not None:
        counts = np.sum(~np.isnan(samples), axis=1)
        good = (counts == frame["num_iters"].to_numpy()) & ~np.any(samples < 0, axis=1)
        bad = given & ~good
    else:
        bad = given
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 2
        raise ContractError(
            f"{path}: line {line}: ms_by_iter must hold num_iters numbers >= 0 joined by "
            f"'{SAMPLE_SEPARATOR}', got {frame[LEGACY_SAMPLES].iloc[line - 2]!r}"
        )
