"""The regression gate: which config metrics got slower by more than a percentage and the noise."""

from __future__ import annotations

import pandas as pd

from embprof.compare.deltas import CHANGE, UNTESTED, Comparison


def gate_failures(comparison: Comparison, pct: float) -> pd.DataFrame:
    """Config rows (train and eval medians of both backends) marked a change and slower by more
    than ``pct`` percent; a change is already larger than the noise."""
    rows = comparison.configs
    return rows[(rows["verdict"] == CHANGE) & (rows["delta_pct"] > pct)].reset_index(drop=True)


def gate_untested(comparison: Comparison, pct: float) -> pd.DataFrame:
    """Config rows slower by more than ``pct`` percent that the test could not judge (one repeat)."""
    rows = comparison.configs
    return rows[(rows["verdict"] == UNTESTED) & (rows["delta_pct"] > pct)].reset_index(drop=True)
