"""The regression gate: which config metrics got slower by more than a percentage and the noise,
and which were timed before and have no time now.

A gate that only looked at the rows timed in both runs would pass a run whose configs
crashed (their rows are merely "removed") or that timed nothing at all. So a metric
timed in the old run must be timed in the new one: missing, failed or null now fails
the gate, each named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from embprof.compare.deltas import CHANGE, UNTESTED, Comparison

LOST_COLUMNS = ["label", "metric", "why"]


def gate_failures(comparison: Comparison, pct: float) -> pd.DataFrame:
    """Config rows (train and eval medians of both backends) marked a change and slower by more
    than ``pct`` percent; a change is already larger than the noise."""
    rows = comparison.configs
    return rows[(rows["verdict"] == CHANGE) & (rows["delta_pct"] > pct)].reset_index(drop=True)


def gate_untested(comparison: Comparison, pct: float) -> pd.DataFrame:
    """Config rows slower by more than ``pct`` percent that the test could not judge (one repeat)."""
    rows = comparison.configs
    return rows[(rows["verdict"] == UNTESTED) & (rows["delta_pct"] > pct)].reset_index(drop=True)


def gate_lost(comparison: Comparison, new_records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """(label, metric, why) of every config metric the old run timed that the new one has no time
    for: ``no record`` (the config is missing, or its timing run crashed), ``status <s>`` (its
    record says it failed) or ``no number`` (null where it was timed before)."""
    rows = comparison.configs
    timed_before = rows["before_ms"].map(_is_number)
    timed_now = rows["after_ms"].map(_is_number)
    lost = rows.loc[timed_before & ~timed_now, ["label", "metric"]].reset_index(drop=True)
    status = {str(r.get("label")): str(r.get("status", "ok")) for r in new_records}
    lost["why"] = [
        "no record" if label not in status else "no number" if status[label] == "ok" else f"status {status[label]}"
        for label in lost["label"]
    ]
    return lost[LOST_COLUMNS]


def nothing_timed(comparison: Comparison) -> bool:
    """Whether the new run timed no config metric at all (then the gate has nothing to pass)."""
    return not comparison.configs["after_ms"].map(_is_number).any()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
