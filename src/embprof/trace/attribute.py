"""The one attribution code path (DESIGN.md, "Attribution rule"), for every kind of trace.

Every work item goes to the innermost range enclosing the CPU start of its
launch on the launching thread. Two passes over a trace's streams: the sweep
gives every runtime call its context (:mod:`.sweep`), then the work is joined
to its call and summed (:mod:`.workpass`). Both read a chunk at a time, and
fall back to one chunk per stream for a trace that is not in start order.

Layout ``default``: names classify as config, iteration, backend, phase and op
(:mod:`.classify`); every other range above the op is a stage. Layout ``any``:
the innermost range of any name is the op, the ranges around it are stages,
and the whole trace is one iteration of one config named after the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from embprof.errors import TraceError

from .calls import CallStore
from .codes import combined_codes, dedupe
from .model import KIND_KERNEL, TraceSource
from .names import memory_kind_name
from .range_layout import ANY_BACKEND, ANY_PHASE, BACKENDS, PHASES
from .sweep import BACKEND_SLOTS, Contexts, OutOfOrder, sweep
from .workpass import WorkTotals, sum_work

# Rows per chunk of a stream: memory is a few chunks, whatever the trace's length.
CHUNK_ROWS = 1 << 16


class RowKey(NamedTuple):
    """What makes a row of a per-op table: the same key in every trace of a label merges."""

    label: str
    backend: str
    phase: str
    parent_stages: str
    op: str
    is_op_range: bool
    kind: int


@dataclass(eq=False)
class Groups:
    """One trace's attributed work, one entry per group (context but for the iteration, and work
    name), as arrays: its row an index into ``rows`` (the distinct row keys, few), its work name one
    into ``kernel_names`` and its memory kinds one into ``memory_kinds``; and each group's time per
    iteration as (group, iteration, ns) samples. Nothing here is per group in Python."""

    rows: list[RowKey]
    row: np.ndarray
    kernel_names: list[str]
    kernel: np.ndarray
    memory_kinds: list[str]  # of copies or memsets (names.memory_kind_name; '' for kernels)
    memory_kind: np.ndarray
    calls: np.ndarray
    total_ns: np.ndarray
    first_seen: np.ndarray  # order of first appearance in the trace's work tables
    nbytes: np.ndarray  # bytes its copies or memsets moved (0 for kernels)
    cpu_ns: np.ndarray  # the host time of its op ranges, on the first op-range group of each base (else 0)
    sample_group: np.ndarray  # per sample: its group
    sample_iteration: np.ndarray  # the config's profiled iteration in this trace, 0-based in start order
    sample_ns: np.ndarray  # the group's device ns in that iteration

    def labels(self) -> set[str]:
        return {r.label for r in self.rows}

    def __eq__(self, other: object) -> bool:
        """The same groups: equal tables and equal arrays (what two readers of one trace must give)."""
        if not isinstance(other, Groups):
            return NotImplemented
        mine, theirs = vars(self), vars(other)
        return all(
            np.array_equal(v, theirs[k]) if isinstance(v, np.ndarray) else v == theirs[k] for k, v in mine.items()
        )


@dataclass
class Attributed:
    """One trace's groups; ``busy_ns`` maps (label, backend) to the union of device time;
    ``range_ns`` maps (label, backend) to the summed time from each backend range's start
    until both the range and the device work launched in it are done (what the profiled
    iterations took, measured as the unprofiled timing measures them); ``iterations``
    maps label to its iteration count."""

    groups: Groups
    busy_ns: dict[tuple[str, str], int]
    iterations: dict[str, int]
    range_ns: dict[tuple[str, str], int]
    dropped_unlaunched: int
    # (label, backend) -> within its spans, the time between its first and last counted device work
    # when none of it ran (each span's window of counted work, summed, less the busy time)
    idle_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    # work launched on a thread without a context of its own while its process's other threads
    # held different ones: not counted (DESIGN.md, "Attribution rule")
    dropped_ambiguous: int = 0


def attribute(source: TraceSource, layout: str = "default", chunk_rows: int | None = CHUNK_ROWS) -> Attributed:
    """Attribute one trace's work; ``chunk_rows`` None reads every stream as one chunk."""
    try:
        ctx, store = _sweep(source, layout, chunk_rows)
    except OverflowError as exc:
        raise TraceError(source.path, f"its ranges' times cannot be nested ({exc})") from None
    store.finish()
    try:
        work = sum_work(source.work(), store, ctx, chunk_rows)
    except OutOfOrder:
        work = sum_work(source.work(), store, ctx, None)
    if work.found == 0:
        raise TraceError(source.path, f"none of the {work.dropped} kernels/copies has a runtime call with its correlationId")
    if len(work.calls) == 0:
        if layout == "default" and not ctx.has_config_names:
            raise TraceError(
                source.path,
                "no config ranges (names like T<tables>_totalB...): not a trace of our benchmark; use --layout any",
            )
        raise TraceError(source.path, "no work launched inside config/nsys_iter_<i>/dyn|trc/forward|backward ranges")
    labels = list(ctx.labels.strings) if layout == "default" else [trace_stem(source.path)] * len(ctx.labels)
    backends, phases = (BACKENDS, PHASES) if layout == "default" else ((ANY_BACKEND,), (ANY_PHASE,))
    busy = {(labels[key // BACKEND_SLOTS], backends[key % BACKEND_SLOTS]): ns for key, ns in work.busy_ns.items()}
    iterations = ({labels[i]: n for i, n in ctx.iterations.items()} if layout == "default"
                  else {trace_stem(source.path): 1})
    return Attributed(
        groups=_groups(source, ctx, work, labels, backends, phases),
        busy_ns=busy, iterations=iterations, range_ns=_range_ns(ctx, work, labels),
        dropped_unlaunched=work.dropped, idle_ns=_idle_ns(ctx, work, labels, busy),
        dropped_ambiguous=work.ambiguous,
    )


def _sweep(source: TraceSource, layout: str, chunk_rows: int | None) -> tuple[Contexts, CallStore]:
    """Every runtime call's context, in chunks; a trace out of start order swept again as one chunk."""
    store = CallStore()
    try:
        return sweep(source.ranges(), source.calls(), layout, chunk_rows, store), store
    except OutOfOrder:
        store = CallStore()
        return sweep(source.ranges(), source.calls(), layout, None, store), store


def _groups(source: TraceSource, ctx: Contexts, work: WorkTotals, labels: list[str],
            backends: tuple[str, ...], phases: tuple[str, ...]) -> Groups:
    """Every group's row, work name and memory kinds as codes; strings only for the distinct ones."""
    base = {name: values[work.group_base] for name, values in work.bases.items()}
    names = np.array(work.names, np.int64).reshape(-1, 3)  # (kind, name id, memory kind code)
    kind = names[work.group_name, 0]
    path = base["path"]
    is_op_range = base["has_op"].astype(bool) & (kind == KIND_KERNEL)
    stage = np.where(is_op_range, np.array(ctx.path_parent, np.int64)[path], path)
    # The op: an op range's own name (the last of its path), else the work's name.
    op = np.where(is_op_range, np.array(ctx.path_name, np.int64)[path], work.group_name)
    label, backend, phase = base["label"], base["backend"], base["phase"]
    head = ((label * len(backends) + backend) * len(phases) + phase) * 6 + is_op_range * 3 + kind
    row, first = combined_codes(head, stage, op)
    at = first.tolist()
    paths = _path_strings(ctx, np.unique(stage[first]))
    kernels, kernel = _distinct_codes(work.group_name, len(work.names))  # every op that is a work name too
    work_names = _work_names(source, work.names, kernels)
    strip = ctx.layout == "default"
    rows = [
        RowKey(labels[lab], backends[b], phases[ph], paths[st],
               _op_name(ctx.names.strings[o], strip) if ir else work_names[o], bool(ir), int(k))
        for lab, b, ph, st, o, ir, k in zip(
            label[at].tolist(), backend[at].tolist(), phase[at].tolist(), stage[at].tolist(), op[at].tolist(),
            is_op_range[at].tolist(), kind[at].tolist(), strict=True)
    ]
    kinds, memory_kind = _distinct_codes(names[work.group_name, 2], int(names[:, 2].max(initial=0)) + 1)
    return Groups(
        rows=rows, row=row,
        kernel_names=[work_names[c] for c in kernels.tolist()], kernel=kernel,
        memory_kinds=[memory_kind_name(c) for c in kinds.tolist()], memory_kind=memory_kind,
        calls=work.calls, total_ns=work.total_ns, first_seen=work.first_seen, nbytes=work.nbytes,
        cpu_ns=_cpu_ns(ctx, work, is_op_range),
        sample_group=work.sample_group, sample_iteration=work.sample_iteration, sample_ns=work.sample_ns,
    )


def _distinct_codes(values: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values (ints in [0, bound)) and each value's index among them."""
    return dedupe(np.asarray(values, np.int64), max(bound, 1))


def _cpu_ns(ctx: Contexts, work: WorkTotals, is_op_range: np.ndarray) -> np.ndarray:
    """The op-range host time of each base (its contexts' over every iteration) on the first of its
    op-range groups, so that it is counted once however many kernel names the op launched."""
    out = np.zeros(len(work.group_base), np.int64)
    if not ctx.ctx_cpu_parts:
        return out
    per_base = np.zeros(int(work.base_of_ctx.max(initial=-1)) + 1, np.int64)
    np.add.at(per_base, work.base_of_ctx, ctx.cpu_ns())
    candidates = np.flatnonzero(is_op_range)
    _, first = np.unique(work.group_base[candidates], return_index=True)
    firsts = candidates[first]
    out[firsts] = per_base[work.group_base[firsts]]
    return out


def _path_strings(ctx: Contexts, wanted: np.ndarray) -> dict[int, str]:
    """'/'-joined names (outer to inner) for the wanted path ids; path 0 is the empty path."""
    memo: dict[int, str] = {0: ""}
    names = ctx.names.strings

    def resolve(pid: int) -> str:
        chain = []
        while pid not in memo:
            chain.append(pid)
            pid = ctx.path_parent[pid]
        text = memo[pid]
        for c in reversed(chain):
            name = names[ctx.path_name[c]]
            text = memo[c] = f"{text}/{name}" if text else name
        return text

    return {int(p): resolve(int(p)) for p in wanted}


def _work_names(source: TraceSource, names: list[tuple[int, int]], wanted: np.ndarray) -> dict[int, str]:
    """Name of every wanted work name code, asked of the source one kind at a time."""
    out: dict[int, str] = {}
    by_kind: dict[int, list[int]] = {}
    for code in wanted.tolist():
        by_kind.setdefault(names[code][0], []).append(code)
    for kind, codes in by_kind.items():
        ids = np.array([names[c][1] for c in codes], np.int64)
        out.update(zip(codes, source.work_names(kind, ids), strict=True))
    return out


def _range_ns(ctx: Contexts, work: WorkTotals, labels: list[str]) -> dict[tuple[str, str], int]:
    """Summed time per (label, backend) from each span's start until it and the work launched in it are done."""
    if not ctx.span_label:
        return {}
    end = np.maximum(np.array(ctx.span_end, np.int64), work.span_end)
    return _per_label_backend(np.array(ctx.span_label, np.int64), np.array(ctx.span_backend, np.int64),
                              end - np.array(ctx.span_start, np.int64), labels)


def _idle_ns(ctx: Contexts, work: WorkTotals, labels: list[str],
             busy: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """Per (label, backend): the windows of its spans' counted work (first start to last end),
    summed, less its busy time: the device idle between its work within the ranges."""
    if not ctx.span_label or ctx.layout != "default":
        return {}
    has = work.counted_end >= 0
    lengths = (work.counted_end - np.where(has, work.counted_start, 0))[has]
    window = _per_label_backend(np.array(ctx.span_label, np.int64)[has], np.array(ctx.span_backend, np.int64)[has],
                                lengths, labels)
    return {key: max(ns - busy.get(key, 0), 0) for key, ns in window.items()}


def _per_label_backend(label: np.ndarray, backend: np.ndarray, ns: np.ndarray,
                       labels: list[str]) -> dict[tuple[str, str], int]:
    """``ns`` summed per (label, backend), keyed in order of first appearance: summed in numpy (a
    trace has a span per iteration and backend, tens of thousands), only the sums meet Python."""
    uniq, first, inverse = np.unique(label * len(BACKENDS) + backend, return_index=True, return_inverse=True)
    sums = np.zeros(len(uniq), np.int64)
    np.add.at(sums, inverse.reshape(-1), ns)
    totals: dict[tuple[str, str], int] = {}
    for at in np.argsort(first, kind="stable").tolist():
        lab, b = divmod(int(uniq[at]), len(BACKENDS))
        key = (labels[lab], BACKENDS[b])
        totals[key] = totals.get(key, 0) + int(sums[at])
    return totals


def trace_stem(path) -> str:
    """The file name without its trace suffixes: ``run.kineto.json.gz`` -> ``run``."""
    name = path.name
    for suffix in (".gz", ".json", ".kineto", ".sqlite", ".nsys-rep"):
        name = name.removesuffix(suffix)
    return name


def _op_name(range_name: str, strip: bool) -> str:
    """``op:cache_lookup`` -> ``cache_lookup`` in the default layout; any name as is otherwise."""
    return range_name[3:] if strip and range_name.startswith("op:") else range_name
