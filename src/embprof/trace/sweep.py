"""Ranges and runtime calls, swept together in time: every call gets the context it was made in.

A call belongs to the innermost range that holds its CPU start on its thread
(DESIGN.md, "Attribution rule"). Exports list ranges and calls in start order,
so the sweep reads both a chunk at a time: after a chunk of ranges, every call
that starts before the next chunk's first range can be attributed, and only
the ranges still open there are carried on. Memory is a chunk plus what is open,
whatever the length of the trace. A trace out of start order is swept again as
one chunk (:class:`OutOfOrder`), with the same result.

Per range, its context is found for all ranges at once (:func:`.nesting.innermost_of`):
the innermost config, iteration, backend, phase, op and backend range above
it. Stage paths (the names of the ranges above an op) are resolved lazily,
only for the ranges that launched counted work, and interned once: the
per-launch ranges nested inside ops, often hundreds of thousands of distinct
names, are classified and then never touched again.

A call's context id names (label, backend, phase, op or not, stage path); its
span id names the backend range it ran in, whose end the report checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .arrow import int_array, string_array
from .classify import BACKEND, CONFIG, ITERATION, OP, OTHER, PATH_CLASSES, PHASE, classify
from .codes import KeyCodes, StringCodes, dedupe, dense_codes
from .model import CallRows, RangeRows
from .nesting import Forest, build_forest, innermost, innermost_of

# The per-range context: per class, the innermost range of it at or above (positions in the
# round's forest); UP_BACKEND and UP_PHASE hold the backend's and the phase's value index.
_CLASS_COLUMNS = (CONFIG, ITERATION, BACKEND, PHASE, OP)
UP_BACKEND, UP_PHASE = -1, -2
_PATH_SHIFT = 32
INF = np.iinfo(np.int64).max
ANY_LABEL = ""  # layout any: one config, named after the file by the attribution


class OutOfOrder(Exception):
    """A chunk started before what was already swept: the trace is not in start order."""


@dataclass
class Contexts:
    """What the ranges of one trace tell the attribution, shared by all its chunks.

    Paths: id 0 is the empty path; path ``p > 0`` is ``path_parent[p]`` then
    the name ``names.strings[path_name[p]]``. A context ``c`` is
    ``ctx_label[c]`` (an index into ``labels``), ``ctx_backend[c]``,
    ``ctx_phase[c]``, ``ctx_has_op[c]`` and ``ctx_path[c]`` (the op's own path
    when it has an op, else the innermost range's). A span is a backend range
    inside an iteration of its own config.
    """

    layout: str
    labels: StringCodes = field(default_factory=StringCodes)
    names: StringCodes = field(default_factory=StringCodes)
    path_parent: list[int] = field(default_factory=lambda: [-1])
    path_name: list[int] = field(default_factory=lambda: [-1])
    ctx_label: list[int] = field(default_factory=list)
    ctx_backend: list[int] = field(default_factory=list)
    ctx_phase: list[int] = field(default_factory=list)
    ctx_has_op: list[bool] = field(default_factory=list)
    ctx_path: list[int] = field(default_factory=list)
    span_label: list[int] = field(default_factory=list)
    span_backend: list[int] = field(default_factory=list)
    span_start: list[int] = field(default_factory=list)
    span_end: list[int] = field(default_factory=list)
    iterations: dict[int, int] = field(default_factory=dict)
    has_config_names: bool = False
    unclosed: int = 0
    _paths: KeyCodes = field(default_factory=KeyCodes)
    _ctx: KeyCodes = field(default_factory=KeyCodes)

    def path_ids(self, parent: np.ndarray, name: np.ndarray) -> np.ndarray:
        keys = (parent.astype(np.int64) << _PATH_SHIFT) | name
        before = len(self._paths)
        ids = self._paths.codes(keys) + 1
        for key in self._paths.keys[before:]:
            self.path_parent.append(key >> _PATH_SHIFT)
            self.path_name.append(key & ((1 << _PATH_SHIFT) - 1))
        return ids

    def context_ids(self, label: np.ndarray, backend: np.ndarray, phase: np.ndarray,
                    has_op: np.ndarray, path: np.ndarray) -> np.ndarray:
        """Context ids of these tuples (backend and phase >= 0), new ones added."""
        n_paths = len(self.path_parent)
        small = (((label * 2 + backend) * 2 + phase) * 2 + has_op) * n_paths + path
        uniq, inverse = dedupe(small, max(len(self.labels), 1) * 8 * n_paths)
        rest, u_path = np.divmod(uniq, n_paths)
        rest, u_has_op = np.divmod(rest, 2)
        rest, u_phase = np.divmod(rest, 2)
        u_label, u_backend = np.divmod(rest, 2)
        stable = ((((u_label * 2 + u_backend) * 2 + u_phase) * 2 + u_has_op) << _PATH_SHIFT) | u_path
        before = len(self._ctx)
        ids = self._ctx.codes_of_distinct(stable)
        for key in self._ctx.keys[before:]:
            rest, p = divmod(key, 1 << _PATH_SHIFT)
            rest, h = divmod(rest, 2)
            rest, ph = divmod(rest, 2)
            lab, b = divmod(rest, 2)
            self.ctx_label.append(lab)
            self.ctx_backend.append(b)
            self.ctx_phase.append(ph)
            self.ctx_has_op.append(bool(h))
            self.ctx_path.append(p)
        return ids[inverse]

    def add_spans(self, label: np.ndarray, backend: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        first = len(self.span_label)
        self.span_label += label.tolist()
        self.span_backend += backend.tolist()
        self.span_start += start.tolist()
        self.span_end += end.tolist()
        return np.arange(first, len(self.span_label))


@dataclass
class _Carry:
    """Ranges still open at the frontier, in the order they were read, with what was learned of them."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    names: pa.Array
    cls: np.ndarray
    val: np.ndarray
    path: np.ndarray  # -1: not resolved yet
    span: np.ndarray  # -1: not a span (or not final yet)
    final: np.ndarray  # counted already (iterations, spans)

    @classmethod
    def empty(cls) -> _Carry:
        i64, i8 = np.zeros(0, np.int64), np.zeros(0, np.int8)
        return cls(i64, i64, i64, string_array([]), i8, i8, i64, i64, np.zeros(0, bool))

    def extend(self, rows: RangeRows, layout: str, ctx: Contexts) -> _Carry:
        cls_, val = classify(rows.names, layout)
        ctx.has_config_names |= bool((cls_ == CONFIG).any())
        n = len(rows)
        return _Carry(
            thread=np.concatenate([self.thread, rows.thread]), start=np.concatenate([self.start, rows.start]),
            end=np.concatenate([self.end, rows.end]), names=pa.concat_arrays([self.names, rows.names]),
            cls=np.concatenate([self.cls, cls_]), val=np.concatenate([self.val, val]),
            path=np.concatenate([self.path, np.full(n, -1, np.int64)]),
            span=np.concatenate([self.span, np.full(n, -1, np.int64)]),
            final=np.concatenate([self.final, np.zeros(n, bool)]),
        )

    def take(self, idx: np.ndarray) -> _Carry:
        return _Carry(self.thread[idx], self.start[idx], self.end[idx], self.names.take(int_array(idx)),
                      self.cls[idx], self.val[idx], self.path[idx], self.span[idx], self.final[idx])


class _Round:
    """The forest of the carried and the new ranges, and each range's context (sorted positions; n = none)."""

    def __init__(self, rows: _Carry, ctx: Contexts, frontier: int) -> None:
        self.rows, self.ctx = rows, ctx
        self.forest: Forest = build_forest(rows.thread, rows.start, rows.end)
        n = self.n = len(self.forest)
        order = self.forest.order
        self.cls = np.append(rows.cls[order], -1).astype(np.int8)
        self.parent = np.append(self.forest.parent, n).astype(np.int64)
        self.parent[self.parent < 0] = n
        self.path = np.append(rows.path[order], 0)
        self.span = np.append(rows.span[order], -1)
        self.label = np.full(n + 1, -1, np.int64)
        self.up = self._propagate(rows.val[order])
        self._finalize(frontier)

    def _propagate(self, val: np.ndarray) -> dict[int, np.ndarray]:
        """Per range (and n: no range), the innermost config, iteration, op, backend and phase range
        at or above it, and the backend and phase it runs in (-1: none).

        Found for the ranges that hold others, then for the leaves of a class from their parents;
        a leaf of no class (a stage, most often a range around one launch) is its parent's
        (``self.ctx_of``), so its entries are never filled.
        """
        f, n, cls = self.forest, self.n, self.cls[:-1]
        inner = f.inner
        leaf = np.ones(n, bool)
        leaf[inner] = False
        classed = np.flatnonzero(leaf & (cls != OTHER))
        plain = np.flatnonzero(leaf & (cls == OTHER))
        self.ctx_of = np.arange(n + 1, dtype=np.int64)
        self.ctx_of[plain] = np.where(f.parent[plain] >= 0, f.parent[plain], n)
        up_classed = self.ctx_of[np.where(f.parent[classed] >= 0, f.parent[classed], n)]
        thread, start, end, inner_cls = f.thread[inner], f.start[inner], f.end[inner], cls[inner]
        up: dict[int, np.ndarray] = {}
        for kind in _CLASS_COLUMNS:
            col = np.full(n + 1, -1, np.int64)
            if len(inner) and (inner_cls == kind).any():
                found = innermost_of(thread, start, end, inner_cls == kind)
                col[inner] = np.where(found >= 0, inner[np.maximum(found, 0)], -1)
            if len(classed):
                col[classed] = col[up_classed]
                own = classed[cls[classed] == kind]
                col[own] = own
            up[kind] = col
        vals = np.append(val, -1)
        up[UP_BACKEND] = vals[up[BACKEND]]
        up[UP_PHASE] = vals[up[PHASE]]
        return up

    def _finalize(self, frontier: int) -> None:
        """Count the iterations and number the spans of ranges that no later range can enclose."""
        if self.ctx.layout != "default":
            return
        order, up = self.forest.order, self.up
        fresh = ~self.rows.final[order] & (self.rows.start[order] < frontier)
        self.rows.final[order[fresh]] = True
        iters = np.flatnonzero(fresh & (self.cls[:-1] == ITERATION) & (up[CONFIG][:-1] >= 0))
        if len(iters):
            labels = self.labels_of(up[CONFIG][iters])
            for lab, count in zip(*np.unique(labels, return_counts=True), strict=True):
                self.ctx.iterations[int(lab)] = self.ctx.iterations.get(int(lab), 0) + int(count)
        spans = np.flatnonzero(fresh & (self.cls[:-1] == BACKEND))
        cfg, it = up[CONFIG][spans], up[ITERATION][spans]
        ok = (cfg >= 0) & (it >= 0)
        ok[ok] = up[CONFIG][it[ok]] == cfg[ok]
        spans, cfg = spans[ok], cfg[ok]
        if len(spans):
            original = order[spans]
            self.span[spans] = self.ctx.add_spans(self.labels_of(cfg), up[UP_BACKEND][spans],
                                                  self.rows.start[original], self.rows.end[original])
            self.rows.span[original] = self.span[spans]

    def labels_of(self, config: np.ndarray) -> np.ndarray:
        """Label index of config ranges (sorted positions), from their names."""
        todo = self._distinct(config[self.label[config] < 0])
        if len(todo):
            self.label[todo] = self.ctx.labels.codes(self.rows.names.take(int_array(self.forest.order[todo])))
        return self.label[config]

    def resolve_paths(self, positions: np.ndarray) -> np.ndarray:
        """Stage path ids of ranges (sorted positions, n = none), resolving the missing ones top-down."""
        path, parent = self.path, self.parent
        chain = []
        todo = self._distinct(positions[path[positions] < 0])
        while len(todo):
            chain.append(todo)
            up = parent[todo]
            todo = self._distinct(up[path[up] < 0])
        for level in reversed(chain):
            above = path[parent[level]]
            c = self.cls[level]
            grows = (c == PATH_CLASSES[0]) | (c == PATH_CLASSES[1])
            path[level[~grows]] = above[~grows]
            g = level[grows]
            if len(g):
                names = self.ctx.names.codes(self.rows.names.take(int_array(self.forest.order[g])))
                path[g] = self.ctx.path_ids(above[grows], names)
        if chain:  # remembered for the rounds that carry these ranges on
            done = np.concatenate(chain)
            self.rows.path[self.forest.order[done]] = path[done]
        return path[positions]

    def _distinct(self, positions: np.ndarray) -> np.ndarray:
        """Distinct positions, ascending (a mark per range: no sort)."""
        if len(positions) < 64:
            return np.unique(positions)
        mark = np.zeros(self.n + 1, bool)
        mark[positions] = True
        return np.flatnonzero(mark)

    def attribute(self, calls: CallRows) -> tuple[np.ndarray, np.ndarray]:
        """Per call: its context id (-1 when not counted) and span id (-1 when none)."""
        n, up = self.n, self.up
        r = innermost(self.forest, calls.thread, calls.start)
        r[r < 0] = n
        rx = self.ctx_of[r]  # a stage leaf has its parent's context
        ctx = np.full(len(r), -1, np.int64)
        if self.ctx.layout == "default":
            cfg, it = up[CONFIG][rx], up[ITERATION][rx]
            backend, phase = up[UP_BACKEND][rx], up[UP_PHASE][rx]
            counted = (cfg >= 0) & (it >= 0) & (backend >= 0) & (phase >= 0)
            counted[counted] = up[CONFIG][it[counted]] == cfg[counted]
            rc, rxc = r[counted], rx[counted]
            label = self.labels_of(cfg[counted])
            backend, phase = backend[counted], phase[counted]
        else:
            counted = np.ones(len(r), bool)
            rc, rxc = r, rx
            label = np.full(len(r), self.ctx.labels.code(ANY_LABEL), np.int64)  # the trace's one label
            backend = phase = np.zeros(len(r), np.int64)
        op = up[OP][rxc]
        has_op = op >= 0
        path = self.resolve_paths(np.where(has_op, op, rc))
        ctx[counted] = self.ctx.context_ids(label, backend, phase, has_op.astype(np.int64), path)
        brange = up[BACKEND][rx]
        span = np.where(brange >= 0, self.span[brange], -1)
        return ctx, span


def sweep(ranges: Iterable[RangeRows], calls: Iterable[CallRows], layout: str,
          chunk_rows: int | None, store: CallStore) -> Contexts:
    """Attribute every call (into ``store``) against the ranges, a chunk of each at a time.

    ``chunk_rows`` None reads each stream as one chunk. Raises :class:`OutOfOrder`
    when a chunk starts before the frontier already swept (then sweep again with None).
    """
    ctx = Contexts(layout)
    carry = _Carry.empty()
    pending = _Calls(iter(rechunk(calls, chunk_rows)))
    swept = -INF
    last_start = -INF
    for chunk, frontier in _with_frontier(rechunk(ranges, chunk_rows)):
        ctx.unclosed += int(np.count_nonzero(chunk.end < 0))
        if len(chunk) and int(chunk.start.min()) < last_start:
            raise OutOfOrder
        last_start = max(last_start, int(chunk.start.max()) if len(chunk) else last_start)
        rnd = _Round(carry.extend(chunk, layout, ctx), ctx, frontier)
        for part in pending.before(frontier, swept):
            store.add(part, *rnd.attribute(part))
        keep = np.flatnonzero((rnd.rows.end > frontier) & (rnd.rows.end > rnd.rows.start))
        carry = rnd.rows.take(keep)
        swept = frontier
    rnd = _Round(carry, ctx, INF)
    for part in pending.before(INF, swept):
        store.add(part, *rnd.attribute(part))
    return ctx


def rechunk(batches: Iterable, rows: int | None) -> Iterator:
    """Batches joined into chunks of at least ``rows`` rows (None: one chunk of everything)."""
    buf: list = []
    have = 0
    for batch in batches:
        if len(batch) == 0:
            continue
        buf.append(batch)
        have += len(batch)
        if rows is not None and have >= rows:
            yield _concat(buf)
            buf, have = [], 0
    if buf:
        yield _concat(buf)


def _concat(parts: list):
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return type(first)(**{
        name: (pa.concat_arrays([getattr(p, name) for p in parts]) if isinstance(getattr(first, name), pa.Array)
               else np.concatenate([getattr(p, name) for p in parts]))
        for name in first.__dataclass_fields__
    })


def _with_frontier(chunks: Iterator[RangeRows]) -> Iterator[tuple[RangeRows, int]]:
    """Each chunk with the first start of the next (INF after the last): no later range starts before it."""
    current = next(chunks, None)
    while current is not None:
        nxt = next(chunks, None)
        yield current, (int(nxt.start.min()) if nxt is not None else INF)
        current = nxt


class _Calls:
    """Runtime calls handed out by start time: those before a frontier, the rest kept back."""

    def __init__(self, chunks: Iterator[CallRows]) -> None:
        self._chunks = chunks
        self._held: CallRows | None = None

    def before(self, frontier: int, swept: int) -> Iterator[CallRows]:
        while True:
            chunk = self._held if self._held is not None else next(self._chunks, None)
            self._held = None
            if chunk is None:
                return
            if len(chunk) and int(chunk.start.min()) < swept:
                raise OutOfOrder
            early = chunk.start < frontier
            if early.all():
                yield chunk
                continue
            if early.any():
                yield _take(chunk, np.flatnonzero(early))
            self._held = _take(chunk, np.flatnonzero(~early))
            return


def _take(rows: CallRows, idx: np.ndarray) -> CallRows:
    return CallRows(rows.process[idx], rows.corr[idx], rows.thread[idx], rows.start[idx])


class CallStore:
    """Context and span id of every runtime call, looked up by (process, correlation id).

    Keys are packed as process code * 2**33 + correlation id (CUPTI's ids are
    32-bit); where several calls share a key the first one read wins. Ids count
    up from one per process, so where they are dense a table indexed by key
    finds each call in one step; else a binary search does.
    """

    def __init__(self) -> None:
        self._processes = KeyCodes()
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.keys = np.zeros(0, np.int64)
        self.ctx = np.zeros(0, np.int32)
        self.span = np.zeros(0, np.int32)
        self._slot: np.ndarray | None = None  # dense: index of the call with key first + i
        self._first = 0

    def __len__(self) -> int:
        return len(self.keys)

    def _process_codes(self, process: np.ndarray, add: bool) -> np.ndarray:
        codes, uniq = dense_codes(process)
        if add:
            return self._processes.codes_of_distinct(uniq)[codes]
        return self._processes.known(uniq)[codes]

    def add(self, calls: CallRows, ctx: np.ndarray, span: np.ndarray) -> None:
        key = (self._process_codes(calls.process, add=True) << 33) + calls.corr
        self._parts.append((key, ctx.astype(np.int32), span.astype(np.int32)))

    def finish(self) -> None:
        """Join what was added into one table sorted by key (calls arrive nearly in key order)."""
        if not self._parts:
            return
        keys, ctx, span = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        self._parts.clear()
        if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
            order = np.argsort(keys, kind="stable")
            keys, ctx, span = keys[order], ctx[order], span[order]
        self.keys, self.ctx, self.span = keys, ctx, span
        width = int(keys[-1] - keys[0]) + 1
        if width <= 2 * len(keys) and not (keys[1:] == keys[:-1]).any():
            self._first = int(keys[0])
            self._slot = np.full(width, -1, np.int64)
            self._slot[keys - self._first] = np.arange(len(keys))

    def lookup(self, process: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Index of each work item's call, -1 when none (launched outside the capture, or no id)."""
        if len(self.keys) == 0:
            return np.full(len(corr), -1, np.int64)
        pc = self._process_codes(process, add=False)
        key = (pc << 33) + corr
        if self._slot is not None:
            at = key - self._first
            inside = (at >= 0) & (at < len(self._slot)) & (corr >= 0) & (pc >= 0)
            return np.where(inside, self._slot[np.where(inside, at, 0)], -1)
        pos = np.searchsorted(self.keys, key)
        np.minimum(pos, len(self.keys) - 1, out=pos)
        hit = (self.keys[pos] == key) & (corr >= 0) & (pc >= 0)
        return np.where(hit, pos, -1)
