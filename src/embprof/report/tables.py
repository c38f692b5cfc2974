"""The report's tables as DataFrames, and one way to turn them into cells of text.

Tables stay numeric until :func:`to_cells`, so HTML and Markdown show the same
numbers with the same rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from embprof.plots.sunburst import assign_letter_codes, backends_present, legend_table
from embprof.report.load import BusyTime

MISSING = "—"


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN where either is missing or the denominator is 0."""
    if math.isnan(numerator) or math.isnan(denominator) or denominator == 0:
        return math.nan
    return numerator / denominator


def headline(
    labels: Sequence[str],
    records: Mapping[str, Mapping[str, Any]],
    failed: Mapping[str, str],
) -> pd.DataFrame:
    """One row per config: dyn and trc train and eval ms, dyn/trc ratios, unique ids per iteration.

    ``failed`` maps a label to the step that failed; such rows keep their label
    and show the failure instead of numbers.
    """
    rows = []
    for label in labels:
        record = records.get(label, {})
        if record.get("status", "ok") != "ok":
            record = {"status": record["status"]}  # a failed run's numbers are not latencies
        ms = {
            k: _number(record.get(k))
            for k in ("dyn_train_ms", "trc_train_ms", "dyn_eval_ms", "trc_eval_ms")
        }
        status = record.get("status", "ok" if record else "missing")
        if label in failed:
            status = f"failed: {failed[label]}"
        rows.append(
            {
                "label": label,
                "status": status,
                "dyn_train_ms": ms["dyn_train_ms"],
                "trc_train_ms": ms["trc_train_ms"],
                "train_ratio": ratio(ms["dyn_train_ms"], ms["trc_train_ms"]),
                "dyn_eval_ms": ms["dyn_eval_ms"],
                "trc_eval_ms": ms["trc_eval_ms"],
                "eval_ratio": ratio(ms["dyn_eval_ms"], ms["trc_eval_ms"]),
                "unique_ids": _number(record.get("avg_n_unique")),
                "total_ids": _number(record.get("avg_n_total")),
                "trc_note": record.get("trc_skip_reason") or "",
            }
        )
    return pd.DataFrame(rows, columns=HEADLINE_COLUMNS)


HEADLINE_COLUMNS = [
    "label",
    "status",
    "dyn_train_ms",
    "trc_train_ms",
    "train_ratio",
    "dyn_eval_ms",
    "trc_eval_ms",
    "eval_ratio",
    "unique_ids",
    "total_ids",
    "trc_note",
]


def config_legends(opcalls: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Backend -> legend table of one config, with the codes its sunburst uses."""
    codes = assign_letter_codes(opcalls)
    return {b: legend_table(opcalls, codes, b) for b in backends_present(opcalls)}


def top_ops(opcalls_by_label: Mapping[str, pd.DataFrame], limit: int = 15) -> pd.DataFrame:
    """Ops that cost most summed over every config, with their mean share of an iteration."""
    frames = []
    for label, frame in opcalls_by_label.items():
        if frame.empty:
            continue
        per_op = frame.groupby(["backend", "op"], as_index=False)["avg_ms_per_iter"].sum()
        per_op["share"] = per_op["avg_ms_per_iter"] / per_op.groupby("backend")[
            "avg_ms_per_iter"
        ].transform("sum").replace(0.0, np.nan)
        per_op["label"] = label
        frames.append(per_op)
    columns = [
        "backend",
        "op",
        "configs",
        "total_ms_per_iter",
        "mean_ms_per_iter",
        "mean_pct_of_iter",
        "max_pct_of_iter",
        "costliest_config",
    ]
    if not frames:
        return pd.DataFrame(columns=columns)
    every = pd.concat(frames, ignore_index=True)
    every = every.sort_values(["avg_ms_per_iter", "label"], ascending=[False, True])
    table = every.groupby(["backend", "op"], as_index=False).agg(
        configs=("label", "nunique"),
        total_ms_per_iter=("avg_ms_per_iter", "sum"),
        mean_ms_per_iter=("avg_ms_per_iter", "mean"),
        mean_pct_of_iter=("share", "mean"),
        max_pct_of_iter=("share", "max"),
        costliest_config=("label", "first"),
    )
    table[["mean_pct_of_iter", "max_pct_of_iter"]] *= 100.0
    table = table.sort_values(["total_ms_per_iter", "backend", "op"], ascending=[False, True, True])
    return table.head(limit).reset_index(drop=True)[columns]


def busy_note(busy: BusyTime | None, backend: str) -> str:
    """A line under a sunburst: the backend's busy time when the breakdown measured it."""
    if busy is None or backend not in busy.ms_per_iter:
        return ""
    what = "CPU busy (leaf operators)" if busy.cpu_leaf_ops else "GPU busy"
    return f"{what}: {busy.ms_per_iter[backend]:.3f} ms per iteration"


# ---- formatting ---------------------------------------------------------------------------

Formatter = Callable[[Any], str]


def fmt_ms(value: Any) -> str:
    number = _number(value)
    if math.isnan(number):
        return MISSING
    return f"{number:.3f}" if abs(number) >= 0.001 or number == 0 else f"{number:.2e}"


def _formatter(template: str) -> Formatter:
    """A cell formatter: ``template`` for numbers, the missing mark for anything else."""

    def fmt(value: Any) -> str:
        number = _number(value)
        return MISSING if math.isnan(number) else template.format(number)

    return fmt


fmt_ratio = _formatter("{:.2f}×")
fmt_pct = _formatter("{:.1f}%")
fmt_signed_pct = _formatter("{:+.1f}%")
fmt_signed_ms = _formatter("{:+.3f}")
fmt_gbps = _formatter("{:,.1f}")
fmt_count = _formatter("{:,.0f}")


def fmt_calls(value: Any) -> str:
    number = _number(value)
    if math.isnan(number):
        return MISSING
    return f"{number:,.0f}" if number == round(number) else f"{number:,.2f}"


def fmt_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return str(value) if str(value) else MISSING


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    fmt: Formatter = fmt_text
    numeric: bool = False


@dataclass(frozen=True)
class Cells:
    """A table ready to print: titles, per-column alignment, rows of strings."""

    titles: list[str]
    numeric: list[bool]
    rows: list[list[str]]


def to_cells(frame: pd.DataFrame, columns: Sequence[Column]) -> Cells:
    rows = [
        [col.fmt(value) for col, value in zip(columns, values, strict=True)]
        for values in frame[[c.key for c in columns]].itertuples(index=False, name=None)
    ]
    return Cells([c.title for c in columns], [c.numeric for c in columns], rows)


HEADLINE_VIEW = (
    Column("label", "config"),
    Column("status", "status"),
    Column("dyn_train_ms", "dyn train ms", fmt_ms, True),
    Column("trc_train_ms", "trc train ms", fmt_ms, True),
    Column("train_ratio", "train dyn/trc", fmt_ratio, True),
    Column("dyn_eval_ms", "dyn eval ms", fmt_ms, True),
    Column("trc_eval_ms", "trc eval ms", fmt_ms, True),
    Column("eval_ratio", "eval dyn/trc", fmt_ratio, True),
    Column("unique_ids", "unique ids/iter", fmt_count, True),
)
# Numbers right after the op so they stay in view beside a sunburst; long stage paths go last.
LEGEND_VIEW = (
    Column("code", "code"),
    Column("op", "op"),
    Column("ms_per_iter", "ms/iter", fmt_ms, True),
    Column("pct_of_iter", "% of iter", fmt_pct, True),
    Column("calls_per_iter", "calls/iter", fmt_calls, True),
    Column("phase", "phase"),
    Column("stage", "stage"),
)
# With a bandwidth view: GB/s and % of peak beside the op's time (a dash: no bytes formula).
LEGEND_BANDWIDTH_VIEW = (
    *LEGEND_VIEW[:4],
    Column("achieved_gbps", "GB/s", fmt_gbps, True),
    Column("pct_of_peak", "% of peak", fmt_pct, True),
    *LEGEND_VIEW[4:],
)
TOP_OPS_VIEW = (
    Column("backend", "backend"),
    Column("op", "op"),
    Column("configs", "configs", fmt_count, True),
    Column("total_ms_per_iter", "Σ ms/iter", fmt_ms, True),
    Column("mean_ms_per_iter", "mean ms/iter", fmt_ms, True),
    Column("mean_pct_of_iter", "mean % of iter", fmt_pct, True),
    Column("max_pct_of_iter", "max % of iter", fmt_pct, True),
    Column("costliest_config", "costliest in"),
)
