"""The per-op CSV (``opcalls__<label>.csv``): the breakdown writes it, plots, bandwidth and report read it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from embprof.atomic import write_csv
from embprof.errors import ContractError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (
    "backend", "phase", "parent_stages", "op", "calls_per_iter", "avg_ms_per_iter",
    "total_ms", "num_iters", "kernel_names", "fallback_category",
)
TEXT_COLUMNS = ("backend", "phase", "parent_stages", "op", "kernel_names", "fallback_category")
NUMBER_COLUMNS = ("calls_per_iter", "avg_ms_per_iter", "total_ms", "num_iters")


def write_opcalls(table: pd.DataFrame | Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """The contract's columns, in order, nothing else (``table``: a DataFrame or columns by name)."""
    write_csv(table, path, COLUMNS, float_format="%.9g")


def read_opcalls(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One config's rows: text columns as str ('' for empty), numbers as finite floats >= 0."""
    import numpy as np
    import pandas as pd

    try:
        frame = pd.read_csv(
            path, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=False, na_values={}
        )
    except FileNotFoundError:
        raise ContractError(f"{path}: no such file") from None
    except pd.errors.EmptyDataError:
        raise ContractError(f"{path}: empty file, expected a header row") from None
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ContractError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ContractError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = frame[list(COLUMNS)].copy()
    for column in NUMBER_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise ContractError(
                f"{path}: line {line}: {column} must be a finite number >= 0, "
                f"got {frame[column].iloc[line - 2]!r}"
            )
        frame[column] = values
    empty_key = (frame["backend"] == "") | (frame["phase"] == "") | (frame["op"] == "")
    if empty_key.any():
        line = int(np.flatnonzero(empty_key.to_numpy())[0]) + 2
        raise ContractError(f"{path}: line {line}: backend, phase and op must not be empty")
    return frame
