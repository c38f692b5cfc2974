"""Achieved bandwidth per op (``bandwidth__<label>.csv``), one row per row of the per-op CSV."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from embprof.atomic import write_csv
from embprof.errors import ContractError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (
    "backend", "phase", "parent_stages", "op", "bytes_per_iter", "avg_ms_per_iter",
    "achieved_gbps", "pct_of_peak", "formula",
)
_MAYBE_EMPTY = ("bytes_per_iter", "achieved_gbps", "pct_of_peak")


def write_bandwidth(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    write_csv(frame, path, COLUMNS)


def read_bandwidth(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One config's bandwidth CSV, its columns checked; empty bytes, GB/s and % are NaN."""
    import pandas as pd

    try:
        frame = pd.read_csv(
            path,
            dtype={"parent_stages": str, "op": str, "formula": str},
            keep_default_na=False,
            na_values={c: [""] for c in _MAYBE_EMPTY},
        )
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ContractError(f"{path}: not a bandwidth CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ContractError(f"{path}: lacks column(s): {', '.join(missing)}")
    return frame
