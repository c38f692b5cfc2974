"""What changed against a previous results folder: per-config latency and per-op time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from embprof.pages.cells import Column, fmt_ms, fmt_signed_ms, fmt_signed_pct

METRICS = ("dyn_train_ms", "dyn_eval_ms", "trc_train_ms", "trc_eval_ms")
OP_KEYS = ["label", "backend", "phase", "op"]


def _delta_columns(frame: pd.DataFrame) -> pd.DataFrame:
    frame["delta_ms"] = frame["after_ms"] - frame["before_ms"]
    before = frame["before_ms"].where(frame["before_ms"] != 0)
    frame["delta_pct"] = 100.0 * frame["delta_ms"] / before
    return frame


def config_deltas(
    current: Sequence[Mapping[str, Any]], previous: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """One row per (config, metric) timed in either run; ``change`` says new / removed / both."""

    def long(records: Sequence[Mapping[str, Any]], side: str) -> pd.DataFrame:
        rows = [
            {"label": r["label"], "metric": m, side: pd.to_numeric(r.get(m), errors="coerce")}
            for r in records
            if r.get("status", "ok") == "ok"
            for m in METRICS
        ]
        return pd.DataFrame(rows, columns=["label", "metric", side]).astype({side: float})

    merged = long(current, "after_ms").merge(
        long(previous, "before_ms"), on=["label", "metric"], how="outer", indicator=True
    )
    merged = merged.dropna(subset=["before_ms", "after_ms"], how="all")
    merged["change"] = (
        merged.pop("_merge")
        .map({"both": "", "left_only": "new", "right_only": "removed"})
        .astype(str)
    )
    merged["metric"] = pd.Categorical(merged["metric"], categories=METRICS, ordered=True)
    merged = merged.sort_values(["label", "metric"]).reset_index(drop=True)
    merged["metric"] = merged["metric"].astype(str)
    return _delta_columns(merged)[
        ["label", "metric", "before_ms", "after_ms", "delta_ms", "delta_pct", "change"]
    ]


def op_deltas(
    current: Mapping[str, pd.DataFrame], previous: Mapping[str, pd.DataFrame], limit: int = 25
) -> pd.DataFrame:
    """The ops whose ms per iteration moved most (by absolute ms), over configs in both runs.

    Ops are keyed by (config, backend, phase, op), summed over stages; an op
    present on one side only counts as 0 ms on the other.
    """
    shared = sorted(set(current) & set(previous))

    def stacked(frames: Mapping[str, pd.DataFrame], side: str) -> pd.DataFrame:
        parts = [frames[label].assign(label=label) for label in shared]
        if not parts:
            return pd.DataFrame(columns=[*OP_KEYS, side])
        every = pd.concat(parts, ignore_index=True)
        return (
            every.groupby(OP_KEYS, as_index=False)["avg_ms_per_iter"]
            .sum()
            .rename(columns={"avg_ms_per_iter": side})
        )

    merged = stacked(current, "after_ms").merge(
        stacked(previous, "before_ms"), on=OP_KEYS, how="outer"
    )
    merged[["after_ms", "before_ms"]] = merged[["after_ms", "before_ms"]].astype(float).fillna(0.0)
    merged = _delta_columns(merged)
    merged = merged[merged["delta_ms"] != 0]
    order = np.lexsort((merged["op"], merged["label"], -merged["delta_ms"].abs().to_numpy()))
    merged = merged.iloc[order].head(limit).reset_index(drop=True)
    return merged[[*OP_KEYS, "before_ms", "after_ms", "delta_ms", "delta_pct"]]


CONFIG_DELTA_VIEW = (
    Column("label", "config"),
    Column("metric", "metric"),
    Column("before_ms", "before ms", fmt_ms, True),
    Column("after_ms", "now ms", fmt_ms, True),
    Column("delta_ms", "Δ ms", fmt_signed_ms, True),
    Column("delta_pct", "Δ %", fmt_signed_pct, True),
    Column("change", "note", str),
)
OP_DELTA_VIEW = (
    Column("label", "config"),
    Column("backend", "backend"),
    Column("phase", "phase"),
    Column("op", "op"),
    Column("before_ms", "before ms/iter", fmt_ms, True),
    Column("after_ms", "now ms/iter", fmt_ms, True),
    Column("delta_ms", "Δ ms/iter", fmt_signed_ms, True),
    Column("delta_pct", "Δ %", fmt_signed_pct, True),
)
