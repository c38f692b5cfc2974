"""The report's own tables as DataFrames (numeric until :func:`embprof.pages.cells.to_cells`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from embprof.pages.cells import Column, as_number, fmt_count, fmt_ms, fmt_pct, fmt_ratio
from embprof.pages.legend import NAME_CHARS
from embprof.results.timings import repeat_values, timing_summary

SPREAD_METRICS = ("dyn_train_ms", "trc_train_ms", "nv_train_ms", "dyn_eval_ms", "trc_eval_ms", "nv_eval_ms")
# Columns of NVIDIA's dynamicemb (issue 31), shown only where a record times it.
NV_COLUMNS = ("nv_train_ms", "nv_train_ms_spread", "nv_ratio", "nv_eval_ms", "nv_eval_ms_spread", "nv_eval_ratio")


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
    """One row per config: dyn, trc and nv train and eval ms (medians of the repeats) with their
    spreads, dyn/trc and dyn/nv ratios, unique ids per iteration.

    ``failed`` maps a label to the step that failed; such rows keep their label
    and show the failure instead of numbers.
    """
    rows = []
    for label in labels:
        record = records.get(label, {})
        if record.get("status", "ok") != "ok":
            record = {"status": record["status"]}  # a failed run's numbers are not latencies
        ms = {k: as_number(record.get(k)) for k in SPREAD_METRICS}
        status = record.get("status", "ok" if record else "missing")
        if label in failed:
            status = f"failed: {failed[label]}"
        summaries = {m: timing_summary(record, m) for m in SPREAD_METRICS}
        spreads = {
            f"{m}_spread": as_number(s["spread_pct"]) if s else math.nan for m, s in summaries.items()
        }
        rows.append(
            {
                "label": label,
                "status": status,
                **spreads,
                "repeats": len(repeat_values(record, "dyn_train_ms")) or math.nan,
                "dyn_train_ms": ms["dyn_train_ms"],
                "trc_train_ms": ms["trc_train_ms"],
                "train_ratio": ratio(ms["dyn_train_ms"], ms["trc_train_ms"]),
                "dyn_eval_ms": ms["dyn_eval_ms"],
                "trc_eval_ms": ms["trc_eval_ms"],
                "eval_ratio": ratio(ms["dyn_eval_ms"], ms["trc_eval_ms"]),
                "nv_train_ms": ms["nv_train_ms"],
                "nv_ratio": ratio(ms["dyn_train_ms"], ms["nv_train_ms"]),
                "nv_eval_ms": ms["nv_eval_ms"],
                "nv_eval_ratio": ratio(ms["dyn_eval_ms"], ms["nv_eval_ms"]),
                "unique_ids": as_number(record.get("avg_n_unique")),
                "total_ids": as_number(record.get("avg_n_total")),
                "trc_note": record.get("trc_skip_reason") or "",
            }
        )
    return pd.DataFrame(rows, columns=HEADLINE_COLUMNS)


HEADLINE_COLUMNS = [
    "label",
    "status",
    "dyn_train_ms",
    "dyn_train_ms_spread",
    "trc_train_ms",
    "trc_train_ms_spread",
    "train_ratio",
    "dyn_eval_ms",
    "dyn_eval_ms_spread",
    "trc_eval_ms",
    "trc_eval_ms_spread",
    "eval_ratio",
    "nv_train_ms",
    "nv_train_ms_spread",
    "nv_ratio",
    "nv_eval_ms",
    "nv_eval_ms_spread",
    "nv_eval_ratio",
    "repeats",
    "unique_ids",
    "total_ids",
    "trc_note",
]


def top_ops(
    opcalls_by_label: Mapping[str, pd.DataFrame],
    limit: int = 15,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Ops that cost most summed over every config, with their mean share of an iteration;
    ``names``: short names of the configs (``costliest_name``; the label where none)."""
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
        "costliest_name",
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
    table["costliest_name"] = [(names or {}).get(c, c) for c in table["costliest_config"]]
    table = table.sort_values(["total_ms_per_iter", "backend", "op"], ascending=[False, True, True])
    return table.head(limit).reset_index(drop=True)[columns]


# On the page a config is named by what sets it apart (``name``, added by the report), its label on hover.
HEADLINE_VIEW = (
    Column("name", "config", hover="label"),
    Column("status", "status"),
    Column("dyn_train_ms", "dyn train ms", fmt_ms, True),
    Column("dyn_train_ms_spread", "± %", fmt_pct, True),
    Column("trc_train_ms", "trc train ms", fmt_ms, True),
    Column("trc_train_ms_spread", "± %", fmt_pct, True),
    Column("train_ratio", "train dyn/trc", fmt_ratio, True),
    Column("dyn_eval_ms", "dyn eval ms", fmt_ms, True),
    Column("dyn_eval_ms_spread", "± %", fmt_pct, True),
    Column("trc_eval_ms", "trc eval ms", fmt_ms, True),
    Column("trc_eval_ms_spread", "± %", fmt_pct, True),
    Column("eval_ratio", "eval dyn/trc", fmt_ratio, True),
    Column("nv_train_ms", "nv train ms", fmt_ms, True),
    Column("nv_train_ms_spread", "± %", fmt_pct, True),
    Column("nv_ratio", "train dyn/nv", fmt_ratio, True),
    Column("nv_eval_ms", "nv eval ms", fmt_ms, True),
    Column("nv_eval_ms_spread", "± %", fmt_pct, True),
    Column("nv_eval_ratio", "eval dyn/nv", fmt_ratio, True),
    Column("repeats", "repeats", fmt_count, True),
    Column("unique_ids", "unique ids/iter", fmt_count, True),
)
TOP_OPS_VIEW = (
    Column("backend", "backend"),
    Column("op", "op", shorten=NAME_CHARS),
    Column("configs", "configs", fmt_count, True),
    Column("total_ms_per_iter", "Σ ms/iter", fmt_ms, True),
    Column("mean_ms_per_iter", "mean ms/iter", fmt_ms, True),
    Column("mean_pct_of_iter", "mean % of iter", fmt_pct, True),
    Column("max_pct_of_iter", "max % of iter", fmt_pct, True),
    Column("costliest_name", "costliest in", hover="costliest_config"),
)
TOP_OPS_MD_VIEW = (*TOP_OPS_VIEW[:-1], Column("costliest_config", "costliest in"))
# Markdown names each config by its full label (a pull request has no hover).
HEADLINE_MD_VIEW = (Column("label", "config"), *HEADLINE_VIEW[1:])


def uniform_repeats(table: pd.DataFrame) -> int | None:
    """The repeats every config ran, where they all ran the same number (the summary's note says it
    once instead of a column of one value); None where they differ or none is known."""
    counts = set(table["repeats"].dropna()) if "repeats" in table else set()
    return int(counts.pop()) if len(counts) == 1 and table["repeats"].notna().all() else None


def nv_timed(table: pd.DataFrame) -> bool:
    """Whether any config of the headline timed NVIDIA's dynamicemb (a run of three backends)."""
    return "nv_train_ms" in table and bool(table["nv_train_ms"].notna().any())


def headline_view(table: pd.DataFrame, view: Sequence[Column]) -> tuple[Column, ...]:
    """``view`` without NVIDIA's dynamicemb's columns where no config timed it (:func:`nv_timed`),
    and without the repeats where every config ran the same number (:func:`uniform_repeats`)."""
    dropped = (set() if nv_timed(table) else set(NV_COLUMNS)) | ({"repeats"} if uniform_repeats(table) else set())
    return tuple(c for c in view if c.key not in dropped)


def ops_across_backends(frame: pd.DataFrame) -> pd.DataFrame:
    """Ops of the same name side by side across backends, per phase: each backend's ms per
    iteration of its ``op:*`` rows of that name (summed over stages; kernels under no op, such as
    TBE's, are no op of a name), and ours against NVIDIA's. Empty unless two backends name ops."""
    ops = frame[frame["fallback_category"].astype(str) == ""]
    backends = [b for b in ("dyn", "nv", "trc") if b in set(ops["backend"])]
    backends += sorted(set(ops["backend"]) - set(backends))
    if len(backends) < 2:
        return pd.DataFrame(columns=["phase", "op", *(f"{b}_ms" for b in backends), "dyn_over_nv"])
    table = (ops.groupby(["phase", "op", "backend"])["avg_ms_per_iter"].sum()
             .unstack("backend").reindex(columns=backends))
    table.columns = [f"{b}_ms" for b in backends]
    table = table.reset_index()
    if {"dyn_ms", "nv_ms"} <= set(table.columns):
        table["dyn_over_nv"] = [ratio(d, n) for d, n in zip(table["dyn_ms"], table["nv_ms"], strict=True)]
    else:
        table["dyn_over_nv"] = math.nan
    table["_total"] = table[[f"{b}_ms" for b in backends]].sum(axis=1)
    order = table.sort_values(["phase", "_total", "op"], ascending=[False, False, True]).index
    return table.loc[order].drop(columns="_total").reset_index(drop=True)


def across_view(table: pd.DataFrame) -> tuple[Column, ...]:
    """The columns of :func:`ops_across_backends`' table that it has."""
    backends = [c.removesuffix("_ms") for c in table.columns if c.endswith("_ms")]
    columns = [Column("phase", "phase"), Column("op", "op", shorten=NAME_CHARS)]
    columns += [Column(f"{b}_ms", f"{b} ms/iter", fmt_ms, True) for b in backends]
    if {"dyn", "nv"} <= set(backends):
        columns.append(Column("dyn_over_nv", "dyn/nv", fmt_ratio, True))
    return tuple(columns)
