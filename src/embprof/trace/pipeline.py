"""From trace files to one table per config label."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from embprof.results.busy import RANGE_RULE
from embprof.results.opcalls import COLUMNS, format_iteration_ms

from .attribute import CHUNK_ROWS, Attributed, attribute
from .calls import CollidingCalls
from .categories import Categories, load_categories
from .errors import TraceError
from .invariants import checked, colliding_calls_error
from .layouts import LAYOUTS
from .model import KIND_KERNEL
from .readers import open_trace

TOP_KERNELS = 10  # per config and backend, in the busy sidecar

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class LabelBreakdown:
    """One config: its rows (the per-op CSV's columns), and what the report needs to check them against."""

    label: str
    columns: dict[str, np.ndarray]
    num_iters: int
    busy_ms_per_iter: dict[str, float]
    time_source: str
    range_ms_per_iter: dict[str, float] = field(default_factory=dict)
    traces: list[str] = field(default_factory=list)
    dropped_unlaunched: int = 0
    dropped_ambiguous: int = 0
    idle_ms_per_iter: dict[str, float] = field(default_factory=dict)
    top_kernels: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return len(self.columns["op"])

    @property
    def rows(self) -> pd.DataFrame:
        """The rows as a DataFrame (the library's interface; the command writes the columns as they are)."""
        import pandas as pd

        return pd.DataFrame({c: self.columns[c] for c in COLUMNS})

    def busy_info(self) -> dict:
        return {
            "label": self.label,
            "time_source": self.time_source,
            "num_iters": self.num_iters,
            "busy_ms_per_iter": self.busy_ms_per_iter,
            "range_ms_per_iter": self.range_ms_per_iter,
            "range_rule": RANGE_RULE,
            "idle_ms_per_iter": self.idle_ms_per_iter,
            "top_kernels": self.top_kernels,
            "dropped_unlaunched": self.dropped_unlaunched,
            "dropped_ambiguous": self.dropped_ambiguous,
            "traces": self.traces,
        }


@dataclass
class _Trace:
    path: str
    time_source: str
    attributed: Attributed


def merge_traces(traces: list[_Trace], cats: Categories) -> dict[str, LabelBreakdown]:
    """Merge the attributed traces by label: rows of one label add up, in order of first appearance."""
    out: dict[str, LabelBreakdown] = {}
    labels = sorted({lab for t in traces for lab in t.attributed.groups.label})
    for label in labels:
        contributing = [t for t in traces if label in t.attributed.iterations and label in t.attributed.groups.label]
        num_iters = sum(t.attributed.iterations[label] for t in contributing)
        # A label's iterations in its second trace follow those of its first, and so on.
        before = np.cumsum([0] + [t.attributed.iterations[label] for t in contributing])[:-1]
        busy = _per_backend(label, [t.attributed.busy_ns for t in contributing])
        wall = _per_backend(label, [t.attributed.range_ns for t in contributing])
        idle = _per_backend(label, [t.attributed.idle_ns for t in contributing])
        out[label] = LabelBreakdown(
            label=label,
            columns=_rows(label, contributing, before.tolist(), num_iters, cats.of),
            num_iters=num_iters,
            busy_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(busy.items())},
            range_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(wall.items())},
            time_source="+".join(sorted({t.time_source for t in contributing})),
            traces=[t.path for t in contributing],
            dropped_unlaunched=sum(t.attributed.dropped_unlaunched for t in contributing),
            dropped_ambiguous=sum(t.attributed.dropped_ambiguous for t in contributing),
            idle_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(idle.items())},
            top_kernels=_top_kernels(label, contributing, num_iters),
        )
    return out


def _top_kernels(label: str, traces: list[_Trace], num_iters: int, top: int = TOP_KERNELS) -> dict[str, list[dict]]:
    """Per backend, its costliest kernels (copies, memsets) by name over every op they ran in:
    ms and calls per iteration and the mean duration (few groups: no per-event work)."""
    totals: dict[tuple[str, str], list[int]] = {}
    for t in traces:
        g = t.attributed.groups
        for i, lab in enumerate(g.label):
            if lab == label:
                entry = totals.setdefault((g.backend[i], g.kernel_name[i]), [0, 0])
                entry[0] += g.calls[i]
                entry[1] += g.total_ns[i]
    out: dict[str, list[dict]] = {}
    for (backend, name), (calls, ns) in sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0])):
        rows = out.setdefault(backend, [])
        if len(rows) < top:
            rows.append({"kernel": name, "ms_per_iter": ns / 1e6 / num_iters, "calls_per_iter": calls / num_iters,
                         "mean_us": ns / calls / 1e3 if calls else 0.0})
    return dict(sorted(out.items()))


def _per_backend(label: str, per_trace: list[dict[tuple[str, str], int]]) -> dict[str, float]:
    """One label's nanoseconds per backend, summed over the traces that hold it."""
    total: dict[str, float] = {}
    for mapping in per_trace:
        for (lab, backend), ns in mapping.items():
            if lab == label:
                total[backend] = total.get(backend, 0.0) + ns
    return total


def _rows(label: str, traces: list[_Trace], before: list[int], num_iters: int, category_of) -> dict[str, np.ndarray]:
    """One row per (backend, phase, stage path, op, kind) over the groups of the label in the traces
    that hold its work (few: one per op, kernel name and iteration, never one per event),
    costliest first within a phase; ``before``: the label's iterations in the traces before each."""
    rows: dict[tuple, list] = {}
    row_of, iteration, ns = [], [], []  # per group: its row, iteration of the label, time
    for trace_no, (t, offset) in enumerate(zip(traces, before, strict=True)):
        g = t.attributed.groups
        for i, lab in enumerate(g.label):
            if lab != label:
                continue
            key = (g.backend[i], g.phase[i], g.parent_stages[i], g.op[i], g.is_op_range[i], g.kind[i])
            row = rows.get(key)
            if row is None:
                row = rows[key] = [0, 0, set(), (trace_no, g.first_seen[i]), len(rows), 0.0, set(), 0]
            row[0] += g.calls[i]
            row[1] += g.total_ns[i]
            row[2].add(g.kernel_name[i])
            row[5] += g.nbytes[i]
            row[6].add(g.memory_kind[i])
            row[7] += g.cpu_ns[i]
            row[3] = min(row[3], (trace_no, g.first_seen[i]))
            row_of.append(row[4])
            iteration.append(offset + g.iteration[i])
            ns.append(g.total_ns[i])
    keys = list(rows)
    timed_ops = any(row[7] for row in rows.values())
    # Each row's time in every profiled iteration (0 where it ran nothing): the samples a
    # comparison of two runs tests per op.
    per_iter = np.zeros((len(keys), num_iters))
    np.add.at(per_iter, (np.array(row_of, np.int64), np.array(iteration, np.int64)), np.array(ns, np.float64))
    calls = np.array([rows[k][0] for k in keys], np.int64)
    total_ns = np.array([rows[k][1] for k in keys], np.int64)
    backend = np.array([k[0] for k in keys], dtype=object)
    phase = np.array([k[1] for k in keys], dtype=object)
    avg = total_ns / 1e6 / num_iters
    seen = sorted(range(len(keys)), key=lambda i: rows[keys[i]][3])
    rank = np.empty(len(keys), np.int64)
    rank[seen] = np.arange(len(keys))
    order = np.lexsort((rank, -avg, _ordinal(phase), _ordinal(backend)))
    cols = {
        "backend": backend,
        "phase": phase,
        "parent_stages": np.array([k[2] for k in keys], dtype=object),
        "op": np.array([k[3] for k in keys], dtype=object),
        "calls_per_iter": calls / num_iters,
        "avg_ms_per_iter": avg,
        "total_ms": total_ns / 1e6,
        "num_iters": np.full(len(keys), num_iters, dtype=np.int64),
        "kernel_names": np.array([";".join(sorted(rows[k][2])) for k in keys], dtype=object),
        "fallback_category": np.array(["" if k[4] else category_of(k[3]) for k in keys], dtype=object),
        "ms_by_iter": np.array(format_iteration_ms(per_iter / 1e6), dtype=object),
        # what copies and memsets moved (the trace's byte counts and memory kinds); none for kernels
        "copy_bytes_per_iter": np.array([rows[k][5] / num_iters if k[5] != KIND_KERNEL else np.nan for k in keys]),
        "memory_kinds": np.array([";".join(sorted(rows[k][6] - {""})) for k in keys], dtype=object),
        # an op's own host time per iteration (its ranges' durations); none for work under no op
        # (layout any counts no op ranges' time: none at all)
        "cpu_ms_per_iter": np.array([rows[k][7] / 1e6 / num_iters if k[4] and timed_ops else np.nan for k in keys]),
    }
    return {c: cols[c][order] for c in COLUMNS}


def _ordinal(values: np.ndarray) -> np.ndarray:
    """Each string's rank among the distinct values (sorts as the strings do)."""
    uniq = sorted(set(values.tolist()))
    rank = {v: i for i, v in enumerate(uniq)}
    return np.array([rank[v] for v in values.tolist()], np.int64)


def run_breakdown(
    paths: list[Path], layout: str = "default", categories: Path | None = None, nsys: str | None = None,
    chunk_rows: int | None = CHUNK_ROWS, merge: bool = False,
) -> dict[str, LabelBreakdown]:
    """Read and attribute every trace; a bad one raises :class:`TraceError` before anything is written.

    ``chunk_rows``: rows each stream is read in (None: whole tables at once). ``merge``: the
    traces of one config label add up (the ranks of one run); without it a label in two
    traces is refused, as the same trace given twice would count its iterations twice.
    A file given twice is refused either way; so is a trace that breaks the invariants
    of :mod:`~embprof.trace.invariants`.
    """
    if not paths:
        raise TraceError("-", "no trace files given")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    _once_each(paths)
    cats = load_categories(categories)
    traces = []
    for p in paths:
        with open_trace(Path(p), nsys=nsys) as source:
            try:
                attributed = attribute(checked(source, layout), layout, chunk_rows)
            except CollidingCalls as exc:
                raise colliding_calls_error(source.path, exc) from None
            traces.append(_Trace(str(source.path), source.time_source, attributed))
    if not merge:
        _one_trace_per_label(traces)
    return merge_traces(traces, cats)


def _once_each(paths: list[Path]) -> None:
    """No file among ``paths`` twice (by any name: links and relative paths too)."""
    seen: dict[tuple[int, int], Path] = {}
    for p in map(Path, paths):
        try:
            st = p.stat()
        except OSError:
            continue  # the reader says what is wrong with it
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise TraceError(p, f"is given twice (also as {seen[key]}): its iterations would count twice")
        seen[key] = p


def _one_trace_per_label(traces: list[_Trace]) -> None:
    """Each config label in one trace only (unless merged on purpose)."""
    owner: dict[str, str] = {}
    for t in traces:
        for label in sorted(set(t.attributed.iterations) & set(t.attributed.groups.label)):
            if label in owner:
                raise TraceError(t.path, f"config {label} is also in {owner[label]}: one trace per config "
                                         "(pass --merge to add up traces of one config on purpose)")
            owner[label] = t.path
