"""From trace files to one table per config label."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from embprof.results.busy import RANGE_RULE
from embprof.results.opcalls import COLUMNS, format_iteration_ms

from .attribute import Attributed, attribute
from .categories import load_categories
from .errors import TraceError
from .model import Trace
from .readers import read_trace

LAYOUTS = ("default", "any")


@dataclass
class LabelBreakdown:
    """One config: its rows, and what the report needs to check them against."""

    label: str
    rows: pd.DataFrame
    num_iters: int
    busy_ms_per_iter: dict[str, float]
    time_source: str
    range_ms_per_iter: dict[str, float] = field(default_factory=dict)
    traces: list[str] = field(default_factory=list)
    dropped_unlaunched: int = 0

    def busy_info(self) -> dict:
        return {
            "label": self.label,
            "time_source": self.time_source,
            "num_iters": self.num_iters,
            "busy_ms_per_iter": self.busy_ms_per_iter,
            "range_ms_per_iter": self.range_ms_per_iter,
            "range_rule": RANGE_RULE,
            "dropped_unlaunched": self.dropped_unlaunched,
            "traces": self.traces,
        }


def attribute_traces(traces: list[Trace], layout: str, categories: Path | None = None) -> dict[str, LabelBreakdown]:
    """Attribute every trace, then merge the ones of the same label."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    cats = load_categories(categories)
    parts: list[tuple[Trace, Attributed]] = [(t, attribute(t, layout, t.context)) for t in traces]
    _number_iterations_across_traces([a for _, a in parts])
    groups = pd.concat([a.groups for _, a in parts], ignore_index=True)
    out: dict[str, LabelBreakdown] = {}
    for label, g in groups.groupby("label", sort=True):
        contributing = [(t, a) for t, a in parts if label in a.iterations and (a.groups["label"] == label).any()]
        num_iters = sum(a.iterations[label] for _, a in contributing)
        busy = _per_backend(label, [a.busy_ns for _, a in contributing])
        wall = _per_backend(label, [a.range_ns for _, a in contributing])
        out[label] = LabelBreakdown(
            label=label,
            rows=_rows(g, num_iters, cats.of),
            num_iters=num_iters,
            busy_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(busy.items())},
            range_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(wall.items())},
            time_source="+".join(sorted({t.time_source for t, _ in contributing})),
            traces=[str(t.path) for t, _ in contributing],
            dropped_unlaunched=sum(t.dropped_unlaunched for t, _ in contributing),
        )
    return out


def _number_iterations_across_traces(parts: list[Attributed]) -> None:
    """A label's iterations in the second trace of it follow those of the first, and so on, in
    the order the traces were given (the traces that hold work of the label, as ``num_iters`` counts)."""
    seen: dict[str, int] = {}
    for a in parts:
        offsets = {}
        for label in a.groups["label"].unique():
            if label in a.iterations:
                offsets[label] = seen.get(label, 0)
                seen[label] = offsets[label] + a.iterations[label]
        if any(offsets.values()):
            a.groups["iteration"] += a.groups["label"].map(offsets).fillna(0).astype(np.int64)


def _per_backend(label: str, per_trace: list[dict[tuple[str, str], int]]) -> dict[str, float]:
    """One label's nanoseconds per backend, summed over the traces that hold it."""
    total: dict[str, float] = {}
    for mapping in per_trace:
        for (lab, backend), ns in mapping.items():
            if lab == label:
                total[backend] = total.get(backend, 0.0) + ns
    return total


def _rows(g: pd.DataFrame, num_iters: int, category_of) -> pd.DataFrame:
    keys = ["backend", "phase", "parent_stages", "op", "is_op_range", "kind"]
    grouped = g.groupby(keys, sort=False)
    agg = grouped.agg(
        calls=("calls", "sum"),
        total_ns=("total_ns", "sum"),
        kernel_names=("kernel_name", lambda s: ";".join(sorted(set(s)))),
    ).reset_index()
    # Each row's time in every profiled iteration (0 where it ran nothing): the samples a
    # comparison of two runs tests per op. ngroup numbers groups as agg orders them.
    per_iter = np.zeros((len(agg), num_iters))
    np.add.at(per_iter, (grouped.ngroup().to_numpy(), g["iteration"].to_numpy()), g["total_ns"].to_numpy())
    is_range = agg["is_op_range"].to_numpy(bool)
    rows = pd.DataFrame({
        "backend": agg["backend"],
        "phase": agg["phase"],
        "parent_stages": agg["parent_stages"],
        "op": agg["op"],
        "calls_per_iter": agg["calls"] / num_iters,
        "avg_ms_per_iter": agg["total_ns"] / 1e6 / num_iters,
        "total_ms": agg["total_ns"] / 1e6,
        "num_iters": np.full(len(agg), num_iters, dtype=np.int64),
        "kernel_names": agg["kernel_names"],
        "fallback_category": ["" if r else category_of(op) for r, op in zip(is_range, agg["op"], strict=True)],
        "ms_by_iter": format_iteration_ms(per_iter / 1e6),
    })
    rows = rows.sort_values(["backend", "phase", "avg_ms_per_iter"], ascending=[True, True, False], kind="stable")
    return rows[list(COLUMNS)].reset_index(drop=True)


def run_breakdown(
    paths: list[Path], layout: str = "default", categories: Path | None = None, nsys: str | None = None
) -> dict[str, LabelBreakdown]:
    """Read and attribute every trace; a bad one raises :class:`TraceError` before anything is written."""
    if not paths:
        raise TraceError("-", "no trace files given")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return attribute_traces([read_trace(Path(p), nsys=nsys, layout=layout) for p in paths], layout, categories)
