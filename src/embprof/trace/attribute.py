"""The one attribution code path (DESIGN.md, "Attribution rule").

Every work item goes to the innermost range enclosing the CPU start of its
launch on the launching thread. Each range's context (config, iteration,
backend, phase, innermost op, the path of stage names above it) is
propagated down the range forest one depth level at a time, so the cost is
vectorized work per level, never per event.

Layout ``default``: names classify as config (``^T\\d+_totalB``), iteration
(``nsys_iter_<i>``), backend (``dyn``/``trc``), phase (``forward``/
``backward``), op (``op:*``, innermost wins); every other range above the op
is a stage. Layout ``any``: the innermost range of any name is the op, the
ranges around it are stages, and the whole trace is one iteration of one
config named after the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from embprof.labels import is_config_range

from .errors import TraceError
from .model import KIND_KERNEL, Ranges, Trace
from .nesting import Forest, build_forest, innermost

BACKENDS = ("dyn", "trc")
PHASES = ("forward", "backward")
ANY_BACKEND = ANY_PHASE = "all"
_ITER = re.compile(r"^nsys_iter_(\d+)$")
OTHER, CONFIG, ITERATION, BACKEND, PHASE, OP = range(6)


@dataclass
class Attributed:
    """One trace's attributed work, grouped finely enough to merge across traces.

    ``groups`` columns: label, backend, phase, parent_stages, op, is_op_range,
    kind, kernel_name, iteration (the config's profiled iteration in this trace, 0-based,
    in start order), calls, total_ns. ``busy_ns`` maps (label, backend) to the
    union of device time; ``range_ns`` maps (label, backend) to the summed time
    from each backend range's start until both the range and the device work
    launched in it are done (what the profiled iterations took, measured as the
    unprofiled timing measures them); ``iterations`` maps label to its iteration count.
    """

    groups: pd.DataFrame
    busy_ns: dict[tuple[str, str], int]
    iterations: dict[str, int]
    range_ns: dict[tuple[str, str], int]


def classify(names: list[str], layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Per name: its class, and for backends/phases the value's index."""
    cls = np.full(len(names), OTHER if layout == "default" else OP, dtype=np.int8)
    val = np.full(len(names), -1, dtype=np.int64)
    if layout != "default":
        return cls, val
    for i, name in enumerate(names):
        if is_config_range(name):
            cls[i] = CONFIG
        elif _ITER.match(name):
            cls[i] = ITERATION
        elif name in BACKENDS:
            cls[i], val[i] = BACKEND, BACKENDS.index(name)
        elif name in PHASES:
            cls[i], val[i] = PHASE, PHASES.index(name)
        elif name.startswith("op:"):
            cls[i] = OP
    return cls, val


def _group_ids(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Dense group id per row over several non-negative integer key columns, and each group's first row.

    The columns are folded into one mixed-radix int64 key (re-densified by
    hashing only if the radix product would overflow), then hashed once.
    ``pd.factorize`` numbers groups in order of first appearance, so the first
    row of group k is where the running maximum of the ids first reaches k.
    """
    key = np.zeros(len(columns[0]), dtype=np.int64)
    bound = 1
    for col in columns:
        radix = int(col.max()) + 1 if len(col) else 1
        if bound * radix >= (1 << 62):
            key, uniq = pd.factorize(key)
            key, bound = key.astype(np.int64), len(uniq)
        key *= radix
        key += col
        bound *= radix
    group, _ = pd.factorize(key)
    del key
    running = np.maximum.accumulate(group)
    new = np.ones(len(group), dtype=bool)
    new[1:] = group[1:] > running[:-1]
    return group, np.flatnonzero(new)


def _union_ns(start: np.ndarray, end: np.ndarray, presorted: bool = False) -> int:
    """Length of the union of [start, end) intervals."""
    if len(start) == 0:
        return 0
    o = np.arange(len(start)) if presorted else np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    seg = np.flatnonzero(new)
    seg_end = np.append(seg[1:], len(s)) - 1
    return int((reach[seg_end] - s[seg]).sum())


def _path_strings(parent_path: list[np.ndarray], path_name: list[np.ndarray], names: list[str], wanted: np.ndarray) -> dict[int, str]:
    """'/'-joined names (outer to inner) for the wanted path ids; path 0 is the empty path."""
    par = np.concatenate([np.array([-1], np.int64), *parent_path])
    nm = np.concatenate([np.array([-1], np.int64), *path_name])
    memo: dict[int, str] = {0: ""}

    def resolve(pid: int) -> str:
        chain = []
        while pid not in memo:
            chain.append(pid)
            pid = int(par[pid])
        text = memo[pid]
        for c in reversed(chain):
            text = f"{text}/{names[nm[c]]}" if text else names[nm[c]]
            memo[c] = text
        return text

    return {int(p): resolve(int(p)) for p in wanted}


@dataclass
class RangeContext:
    """Everything the attribution needs from the ranges alone (one trace, one layout).

    Per sorted range position, plus a sentinel at position n for "no range":
    the innermost config/iteration/op range above it (positions), backend and
    phase (indices), and the id of the path of stage names down to it.
    """

    forest: Forest
    layout: str
    names: list[str]
    name: np.ndarray
    parent: np.ndarray
    config_of: np.ndarray
    iter_of: np.ndarray
    backend_of: np.ndarray
    phase_of: np.ndarray
    op_of: np.ndarray
    path_of: np.ndarray
    parent_path: list[np.ndarray]
    path_name: list[np.ndarray]
    iterations: dict[str, int]
    has_config_names: bool
    backend_spans: BackendSpans
    backend_range_of: np.ndarray
    iter_ordinal: np.ndarray  # per iteration range: its rank among its config's, in start order; else -1


@dataclass
class BackendSpans:
    """The ``dyn``/``trc`` ranges inside an iteration of their own config: position, label, backend, extent."""

    position: np.ndarray
    label: list[str]
    backend: list[str]
    start: np.ndarray
    end: np.ndarray

    def wall_ns(self, work_end: np.ndarray) -> dict[tuple[str, str], int]:
        """Summed time per (label, backend) from each range's start until both it and the work launched
        in it (``work_end``: latest device end per span, -1 if none) are done."""
        end = np.maximum(self.end, work_end)
        totals: dict[tuple[str, str], int] = {}
        for key, ns in zip(zip(self.label, self.backend, strict=True), (end - self.start).tolist(), strict=True):
            totals[key] = totals.get(key, 0) + int(ns)
        return totals


def range_context(ranges: Ranges, layout: str = "default") -> RangeContext:
    """Propagate each range's context down the forest, one depth level at a time."""
    forest = build_forest(ranges.thread, ranges.start, ranges.end)
    n = len(forest)
    name_cls, name_val = classify(ranges.names, layout)
    name = np.append(ranges.name[forest.order], -1).astype(np.int32)
    cls, val = name_cls[name[:n]], name_val[name[:n]]
    parent = forest.parent = np.append(forest.parent, -1).astype(np.int32)  # sentinel parent too
    config_of = np.full(n + 1, -1, np.int32)
    iter_of = np.full(n + 1, -1, np.int32)
    backend_range_of = np.full(n + 1, -1, np.int32)
    backend_of = np.full(n + 1, -1, np.int8)
    phase_of = np.full(n + 1, -1, np.int8)
    op_of = np.full(n + 1, -1, np.int32)
    path_of = np.zeros(n + 1, np.int32)
    parent_path: list[np.ndarray] = []
    path_name: list[np.ndarray] = []
    n_paths, n_names = 1, len(ranges.names) + 1
    for idx in forest.levels:
        p = parent[idx]
        p[p < 0] = n
        for arr in (config_of, iter_of, backend_of, backend_range_of, phase_of, op_of, path_of):
            arr[idx] = arr[p]
        c = cls[idx]
        for kind, arr, value in ((CONFIG, config_of, idx), (ITERATION, iter_of, idx), (OP, op_of, idx), (BACKEND, backend_range_of, idx),
                                 (BACKEND, backend_of, val[idx]), (PHASE, phase_of, val[idx])):
            hit = c == kind
            if hit.any():
                arr[idx[hit]] = value[hit]
        grow = idx[(c == OTHER) | (c == OP)]
        if len(grow):
            inv, uniq = pd.factorize(path_of[grow].astype(np.int64) * n_names + name[grow])
            parent_path.append(uniq // n_names)
            path_name.append(uniq % n_names)
            path_of[grow] = n_paths + inv
            n_paths += len(uniq)

    iterations: dict[str, int] = {}
    iter_cfg = config_of[np.flatnonzero(cls == ITERATION)]
    if layout == "default" and len(iter_cfg):
        counts = pd.Series(name[iter_cfg[iter_cfg >= 0]]).value_counts()
        iterations = {ranges.names[int(k)]: int(v) for k, v in counts.items()}
    spans = _backend_spans(ranges, forest, cls, val, name, config_of, iter_of, layout)
    iter_ordinal = _iteration_ordinals(ranges, forest, cls, name, config_of, n)
    forest.levels, forest.order = [], forest.order[:0]  # only needed above
    return RangeContext(
        forest=forest, layout=layout, names=ranges.names, name=name, parent=parent, config_of=config_of,
        iter_of=iter_of, backend_of=backend_of, phase_of=phase_of, op_of=op_of, path_of=path_of,
        parent_path=parent_path, path_name=path_name, iterations=iterations,
        has_config_names=bool((name_cls == CONFIG).any()),
        backend_spans=spans, backend_range_of=backend_range_of, iter_ordinal=iter_ordinal,
    )


def _iteration_ordinals(
    ranges: Ranges, forest: Forest, cls: np.ndarray, name: np.ndarray, config_of: np.ndarray, n: int
) -> np.ndarray:
    """Each iteration range's rank among the iteration ranges of its config's name, by start
    (then sorted position); -1 for every other range and the sentinel."""
    ordinal = np.full(n + 1, -1, np.int32)
    pos = np.flatnonzero(cls == ITERATION)
    if len(pos) == 0:
        return ordinal
    config_name = name[config_of[pos]]  # the sentinel's -1 where no config holds it
    order = np.lexsort((pos, ranges.start[forest.order[pos]], config_name))
    grouped = config_name[order]
    ordinal[pos[order]] = np.arange(len(order)) - np.searchsorted(grouped, grouped, side="left")
    return ordinal


def _backend_spans(
    ranges: Ranges, forest: Forest, cls: np.ndarray, val: np.ndarray, name: np.ndarray,
    config_of: np.ndarray, iter_of: np.ndarray, layout: str,
) -> BackendSpans:
    """The ``dyn``/``trc`` ranges that sit in an iteration of their own config."""
    idx = np.flatnonzero(cls == BACKEND) if layout == "default" else np.zeros(0, np.int64)
    cfg, it = config_of[idx], iter_of[idx]
    ok = (cfg >= 0) & (it >= 0)
    ok[ok] = config_of[it[ok]] == cfg[ok]
    idx, cfg = idx[ok], cfg[ok]
    original = forest.order[idx]
    return BackendSpans(
        position=idx, label=[ranges.names[int(c)] for c in name[cfg]], backend=[BACKENDS[int(b)] for b in val[idx]],
        start=ranges.start[original].astype(np.int64), end=ranges.end[original].astype(np.int64),
    )


def attribute(trace: Trace, layout: str = "default", context: RangeContext | None = None) -> Attributed:
    """Attribute a trace's work; ``context`` may come precomputed (the nsys reader builds it in parallel)."""
    try:
        ctx = context if context is not None else range_context(trace.ranges, layout)
    except OverflowError as exc:
        raise TraceError(trace.path, f"its ranges' times cannot be nested ({exc})") from None
    if ctx.layout != layout:
        raise ValueError(f"range context built for layout {ctx.layout!r}, asked for {layout!r}")
    wk = trace.work
    n = len(ctx.forest)
    r = innermost(ctx.forest, wk.thread, wk.launch)
    r[r < 0] = n

    op = ctx.op_of[r]
    kernel = wk.kind == KIND_KERNEL
    has_op = op >= 0
    op_pos = np.where(has_op, op, n)
    # Kernels under an op: stages are the path above the op. Copies and memsets are their
    # own rows, with the op they ran in as their innermost stage. Outside any op: all of it.
    anchor = np.where(has_op, np.where(kernel, ctx.parent[op_pos], op_pos), r)
    anchor[anchor < 0] = n
    stage = ctx.path_of[anchor]
    del anchor
    op_is_range = has_op & kernel
    op_code = np.where(op_is_range, ctx.name[op_pos], wk.name)
    del op_pos, op

    # Each backend range's latest device end: a profiled iteration lasts until its GPU work is done.
    span_of = np.full(n + 1, -1, np.int64)
    span_of[ctx.backend_spans.position] = np.arange(len(ctx.backend_spans.position))
    work_span = span_of[ctx.backend_range_of[r]]
    span_end = np.full(len(ctx.backend_spans.position), -1, np.int64)
    inside = work_span >= 0
    np.maximum.at(span_end, work_span[inside], wk.end[inside].astype(np.int64))
    del span_of, work_span, inside

    if layout == "default":
        config, iteration = ctx.config_of[r], ctx.iter_of[r]
        backend, phase = ctx.backend_of[r], ctx.phase_of[r]
        # An iteration counts inside its own config range only.
        iter_config = ctx.config_of[np.where(iteration >= 0, iteration, n)]
        counted = (config >= 0) & (iteration >= 0) & (iter_config == config) & (backend >= 0) & (phase >= 0)
        label_code = ctx.name[np.where(counted, config, n)]
        iter_no = np.maximum(ctx.iter_ordinal[np.where(counted, iteration, n)], 0)
        del config, iteration, iter_config
        label_names = {int(c): ctx.names[int(c)] for c in np.unique(label_code[counted])}
        iterations = ctx.iterations
        backend_names, phase_names = BACKENDS, PHASES
    else:
        counted = np.ones(len(r), dtype=bool)
        label_code = np.zeros(len(r), np.int32)
        iter_no = np.zeros(len(r), np.int32)
        backend = phase = np.zeros(len(r), np.int8)
        stem = trace_stem(trace.path)
        label_names = {0: stem}
        iterations = {stem: 1}
        backend_names, phase_names = (ANY_BACKEND,), (ANY_PHASE,)
    del r

    if not counted.any():
        if layout == "default" and not ctx.has_config_names:
            raise TraceError(
                trace.path,
                "no config ranges (names like T<tables>_totalB...): not a trace of our benchmark; use --layout any",
            )
        raise TraceError(trace.path, "no work launched inside config/nsys_iter_<i>/dyn|trc/forward|backward ranges")

    every = bool(counted.all())
    keys = (label_code, backend, phase, stage, op_code, op_is_range, wk.kind, wk.name, iter_no)
    group, first = _group_ids([k if every else k[counted] for k in keys])  # all >= 0 where counted
    dur = wk.end - wk.start if every else (wk.end - wk.start)[counted]
    sel = first if every else np.flatnonzero(counted)[first]
    groups = pd.DataFrame({
        "label": label_code[sel], "backend": backend[sel], "phase": phase[sel], "stage": stage[sel],
        "op_code": op_code[sel], "is_op_range": op_is_range[sel], "kind": wk.kind[sel], "kernel": wk.name[sel],
        "iteration": iter_no[sel],
        "calls": np.bincount(group, minlength=len(first)),
        "total_ns": np.bincount(group, weights=dur, minlength=len(first)).round().astype(np.int64),
    })
    del group, dur

    paths = _path_strings(ctx.parent_path, ctx.path_name, ctx.names, groups["stage"].unique())
    op_names = [
        _op_name(ctx.names[c], layout) if ir else wk.names[c]
        for c, ir in zip(groups["op_code"], groups["is_op_range"], strict=True)
    ]
    out = pd.DataFrame({
        "label": groups["label"].map(label_names),
        "backend": groups["backend"].map(dict(enumerate(backend_names))),
        "phase": groups["phase"].map(dict(enumerate(phase_names))),
        "parent_stages": groups["stage"].map(paths),
        "op": op_names,
        "is_op_range": groups["is_op_range"],
        "kind": groups["kind"],
        "kernel_name": groups["kernel"].map(dict(enumerate(wk.names))),
        "iteration": groups["iteration"].astype(np.int64),
        "calls": groups["calls"].astype(np.int64),
        "total_ns": groups["total_ns"].astype(np.int64),
    })

    busy: dict[tuple[str, str], int] = {}
    lb = label_code.astype(np.int64) * len(backend_names) + backend
    if not every:
        lb = lb[counted]
    lb_code, lb_keys = pd.factorize(lb)
    s, e = (wk.start, wk.end) if every else (wk.start[counted], wk.end[counted])
    by_start = np.argsort(s, kind="stable")  # work tables are nearly in start order: cheap
    o = by_start[np.argsort(lb_code[by_start].astype(np.int16 if len(lb_keys) < 2**15 else np.int64), kind="stable")]
    cuts = np.searchsorted(lb_code[o], np.arange(len(lb_keys) + 1))
    for k, key in enumerate(lb_keys):
        part = o[cuts[k] : cuts[k + 1]]
        lab = label_names[int(key) // len(backend_names)]
        busy[(lab, backend_names[int(key) % len(backend_names)])] = _union_ns(s[part], e[part], presorted=True)
    return Attributed(groups=out, busy_ns=busy, iterations=iterations, range_ns=ctx.backend_spans.wall_ns(span_end))


def trace_stem(path) -> str:
    """The file name without its trace suffixes: ``run.kineto.json.gz`` -> ``run``."""
    name = path.name
    for suffix in (".gz", ".json", ".kineto", ".sqlite", ".nsys-rep"):
        name = name.removesuffix(suffix)
    return name


def _op_name(range_name: str, layout: str) -> str:
    """``op:cache_lookup`` -> ``cache_lookup`` in the default layout; any name as is otherwise."""
    return range_name[3:] if layout == "default" and range_name.startswith("op:") else range_name
