"""From trace files to one table per config label."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from embprof.errors import TraceError
from embprof.results.busy import BusyTime, TopKernel
from embprof.results.opcalls import COLUMNS
from embprof.results.samples import samples_of_rows

from .attribute import CHUNK_ROWS, Attributed, attribute
from .calls import CollidingCalls
from .categories import Categories, load_categories
from .invariants import checked, colliding_calls_error
from .model import KIND_KERNEL
from .range_layout import LAYOUTS
from .readers import open_trace

TOP_KERNELS = 10  # per config and backend, in the busy sidecar

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class LabelBreakdown:
    """One config: its rows (the per-op CSV's columns), their samples per iteration, and its sidecar."""

    label: str
    columns: dict[str, np.ndarray]
    samples_ns: np.ndarray  # whole ns, rows (in the columns' order) x profiled iterations
    busy: BusyTime

    @property
    def n_rows(self) -> int:
        return len(self.columns["op"])

    @property
    def rows(self) -> pd.DataFrame:
        """The rows as a DataFrame (the library's interface; the command writes the columns as they are)."""
        import pandas as pd

        return pd.DataFrame({c: self.columns[c] for c in COLUMNS})

    @property
    def samples(self) -> pd.DataFrame:
        """The samples as the samples file holds them (long: a row's key, iteration, ms)."""
        return samples_of_rows(self.rows, self.samples_ns / 1e6)

    # The sidecar's fields, for the command's summary and the library's users.
    num_iters = property(lambda self: self.busy.num_iters)
    busy_ms_per_iter = property(lambda self: self.busy.ms_per_iter)
    range_ms_per_iter = property(lambda self: self.busy.range_ms_per_iter)
    idle_ms_per_iter = property(lambda self: self.busy.idle_ms_per_iter)
    top_kernels = property(lambda self: self.busy.top_kernels)
    time_source = property(lambda self: self.busy.time_source)
    traces = property(lambda self: self.busy.traces)
    dropped_unlaunched = property(lambda self: self.busy.dropped_unlaunched)
    dropped_ambiguous = property(lambda self: self.busy.dropped_ambiguous)


@dataclass
class _Trace:
    path: str
    time_source: str
    attributed: Attributed


def merge_traces(traces: list[_Trace], cats: Categories) -> dict[str, LabelBreakdown]:
    """Merge the attributed traces by label: rows of one label add up, in order of first appearance."""
    out: dict[str, LabelBreakdown] = {}
    labels = sorted({lab for t in traces for lab in t.attributed.groups.labels()})
    for label in labels:
        contributing = [t for t in traces if label in t.attributed.iterations and label in t.attributed.groups.labels()]
        num_iters = sum(t.attributed.iterations[label] for t in contributing)
        # A label's iterations in its second trace follow those of its first, and so on.
        before = np.cumsum([0] + [t.attributed.iterations[label] for t in contributing])[:-1]
        busy = _per_backend(label, [t.attributed.busy_ns for t in contributing])
        wall = _per_backend(label, [t.attributed.range_ns for t in contributing])
        idle = _per_backend(label, [t.attributed.idle_ns for t in contributing])
        groups = _LabelGroups(label, contributing, before.tolist())
        columns, samples = _rows(groups, num_iters, cats.of)
        out[label] = LabelBreakdown(
            label=label,
            columns=columns,
            samples_ns=samples,
            busy=BusyTime(
                label=label,
                num_iters=num_iters,
                ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(busy.items())},
                range_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(wall.items())},
                range_until_device_done=True,
                time_source="+".join(sorted({t.time_source for t in contributing})),
                traces=[t.path for t in contributing],
                dropped_unlaunched=sum(t.attributed.dropped_unlaunched for t in contributing),
                dropped_ambiguous=sum(t.attributed.dropped_ambiguous for t in contributing),
                idle_ms_per_iter={b: ns / 1e6 / num_iters for b, ns in sorted(idle.items())},
                top_kernels=_top_kernels(groups, num_iters),
            ),
        )
    return out


class _LabelGroups:
    """The groups of one label over the traces that hold it, as one set of arrays: each group's row
    an index into ``keys`` (the label's distinct row keys, in order of first sight over the
    traces), its kernel name one into ``kernel_names``, its memory kinds one into ``memory_kinds``;
    ``iteration`` counts on over the traces. Only the distinct keys and names meet Python."""

    def __init__(self, label: str, traces: list[_Trace], before: list[int]) -> None:
        keys: dict[tuple, int] = {}
        kernels: dict[str, int] = {}
        kinds: dict[str, int] = {}
        parts: dict[str, list[np.ndarray]] = {}
        for trace_no, (t, offset) in enumerate(zip(traces, before, strict=True)):
            g = t.attributed.groups
            local = np.array([keys.setdefault(k[1:], len(keys)) if k.label == label else -1 for k in g.rows], np.int64)
            row = local[g.row] if len(g.row) else np.zeros(0, np.int64)
            mine = np.flatnonzero(row >= 0)
            kernel = np.array([kernels.setdefault(n, len(kernels)) for n in g.kernel_names], np.int64)
            kind = np.array([kinds.setdefault(n, len(kinds)) for n in g.memory_kinds], np.int64)
            sample_row = row[g.sample_group] if len(g.sample_group) else np.zeros(0, np.int64)
            sampled = np.flatnonzero(sample_row >= 0)
            for name, values in (
                ("row", row[mine]), ("kernel", kernel[g.kernel[mine]]), ("kind", kind[g.memory_kind[mine]]),
                ("calls", g.calls[mine]), ("ns", g.total_ns[mine]), ("nbytes", g.nbytes[mine]),
                ("cpu_ns", g.cpu_ns[mine]),
                # first sight: the trace, then the row of its work tables
                ("first", (np.int64(trace_no) << _TRACE_SHIFT) + g.first_seen[mine]),
                # the samples: a label's iterations in its second trace follow those of its first
                ("sample_row", sample_row[sampled]), ("sample_iteration", offset + g.sample_iteration[sampled]),
                ("sample_ns", g.sample_ns[sampled]),
            ):
                parts.setdefault(name, []).append(values)
        self.keys = list(keys)  # (backend, phase, parent_stages, op, is_op_range, kind)
        self.kernel_names, self.memory_kinds = list(kernels), list(kinds)
        # One trace (the usual case): its arrays as they are (each a fresh copy already), not copied again.
        joined = {name: arrays[0] if len(arrays) == 1 else np.concatenate(arrays) for name, arrays in parts.items()}
        self.row, self.kernel, self.kind = joined["row"], joined["kernel"], joined["kind"]
        self.calls, self.ns = joined["calls"], joined["ns"]
        self.nbytes, self.cpu_ns, self.first = joined["nbytes"], joined["cpu_ns"], joined["first"]
        self.sample_row, self.sample_iteration = joined["sample_row"], joined["sample_iteration"]
        self.sample_ns = joined["sample_ns"]

    def per_row(self, values: np.ndarray) -> np.ndarray:
        """``values`` summed per row (exact for integers)."""
        out = np.zeros(len(self.keys), values.dtype)
        np.add.at(out, self.row, values)
        return out

    def names_per_row(self, codes: np.ndarray, names: list[str], skip: frozenset[str] = frozenset()) -> list[str]:
        """Per row, the distinct names of its groups (``codes`` into ``names``) but ``skip``, sorted,
        ``;``-joined."""
        pairs = np.unique(self.row * max(len(names), 1) + codes)
        found: list[set[str]] = [set() for _ in self.keys]
        for row, code in zip(*(np.divmod(pairs, max(len(names), 1))), strict=True):
            found[row].add(names[code])
        return [";".join(sorted(n - skip)) for n in found]


# First sight across traces: the trace's number above a work table's first-seen order (< 2^44).
_TRACE_SHIFT = 48


def _top_kernels(groups: _LabelGroups, num_iters: int, top: int = TOP_KERNELS) -> dict[str, list[TopKernel]]:
    """Per backend, its costliest kernels (copies, memsets) by name over every op they ran in:
    ms and calls per iteration and the mean duration (summed in arrays; only the distinct
    backend and kernel pairs meet Python)."""
    backends = sorted({k[0] for k in groups.keys})
    backend_of_row = np.array([backends.index(k[0]) for k in groups.keys], np.int64)
    width = max(len(groups.kernel_names), 1)
    pair = backend_of_row[groups.row] * width + groups.kernel if len(groups.keys) else groups.kernel
    uniq, inverse = np.unique(pair, return_inverse=True)
    calls = np.zeros(len(uniq), np.int64)
    ns = np.zeros(len(uniq), np.int64)
    np.add.at(calls, inverse, groups.calls)
    np.add.at(ns, inverse, groups.ns)
    totals = sorted(
        ((-n, backends[b], groups.kernel_names[k], c)
         for (b, k), n, c in zip(zip(*np.divmod(uniq, width), strict=True), ns.tolist(), calls.tolist(), strict=True)),
    )
    out: dict[str, list[TopKernel]] = {}
    for minus_ns, backend, name, c in totals:
        rows = out.setdefault(backend, [])
        if len(rows) < top:
            rows.append(TopKernel(kernel=name, ms_per_iter=-minus_ns / 1e6 / num_iters, calls_per_iter=c / num_iters,
                                  mean_us=-minus_ns / c / 1e3 if c else 0.0))
    return dict(sorted(out.items()))


def _per_backend(label: str, per_trace: list[dict[tuple[str, str], int]]) -> dict[str, float]:
    """One label's nanoseconds per backend, summed over the traces that hold it."""
    total: dict[str, float] = {}
    for mapping in per_trace:
        for (lab, backend), ns in mapping.items():
            if lab == label:
                total[backend] = total.get(backend, 0.0) + ns
    return total


def _rows(groups: _LabelGroups, num_iters: int, category_of) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One row per (backend, phase, stage path, op, kind) of the label, costliest first within a
    phase, and each row's ms in every profiled iteration (0 where it ran nothing: the samples a
    comparison of two runs tests per op)."""
    keys = groups.keys
    n = len(keys)
    calls = groups.per_row(groups.calls)
    total_ns = groups.per_row(groups.ns)
    nbytes = groups.per_row(groups.nbytes.astype(np.float64))
    cpu_ns = groups.per_row(groups.cpu_ns)
    first = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, groups.row, groups.first)
    per_iter = np.zeros(n * num_iters, np.int64)
    np.add.at(per_iter, groups.sample_row * num_iters + groups.sample_iteration, groups.sample_ns)
    timed_ops = bool(cpu_ns.any())
    backend = np.array([k[0] for k in keys], dtype=object)
    phase = np.array([k[1] for k in keys], dtype=object)
    is_op_range = np.array([k[4] for k in keys], bool)
    avg = total_ns / 1e6 / num_iters
    rank = np.empty(n, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n)
    order = np.lexsort((rank, -avg, _ordinal(phase), _ordinal(backend)))
    cols = {
        "backend": backend,
        "phase": phase,
        "parent_stages": np.array([k[2] for k in keys], dtype=object),
        "op": np.array([k[3] for k in keys], dtype=object),
        "calls_per_iter": calls / num_iters,
        "avg_ms_per_iter": avg,
        "total_ms": total_ns / 1e6,
        "num_iters": np.full(n, num_iters, dtype=np.int64),
        "kernel_names": np.array(groups.names_per_row(groups.kernel, groups.kernel_names), dtype=object),
        "fallback_category": np.array(["" if k[4] else category_of(k[3]) for k in keys], dtype=object),
        # what copies and memsets moved (the trace's byte counts and memory kinds); none for kernels
        "copy_bytes_per_iter": np.where(np.array([k[5] for k in keys], np.int64) != KIND_KERNEL,
                                        nbytes / num_iters, np.nan),
        "memory_kinds": np.array(groups.names_per_row(groups.kind, groups.memory_kinds, frozenset({""})), dtype=object),
        # an op's own host time per iteration (its ranges' durations); none for work under no op
        # (layout any counts no op ranges' time: none at all)
        "cpu_ms_per_iter": np.where(is_op_range & timed_ops, cpu_ns / 1e6 / num_iters, np.nan),
    }
    return {c: cols[c][order] for c in COLUMNS}, per_iter.reshape(n, num_iters)[order]


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
        for label in sorted(set(t.attributed.iterations) & t.attributed.groups.labels()):
            if label in owner:
                raise TraceError(t.path, f"config {label} is also in {owner[label]}: one trace per config "
                                         "(pass --merge to add up traces of one config on purpose)")
            owner[label] = t.path
