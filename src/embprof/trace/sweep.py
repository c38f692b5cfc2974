"""Ranges and runtime calls, swept together in time: every call gets the context it was made in.

A call belongs to the innermost range that holds its CPU start on its thread
(DESIGN.md, "Attribution rule"). Where that thread has no config, iteration,
backend and phase of its own at the call (PyTorch's autograd thread, which
runs the backward while the main thread holds them), the context is the one
the process's other threads hold at that time; the op and stages stay the
launching thread's (:meth:`_Round.borrow`). Exports list ranges and calls in start order,
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

A call's context id names (label, backend, phase, op or not, stage path): what
its work is summed under, the same in every iteration, so their number does not
grow with the iterations. Its slot id names (iteration, span): the config's
iteration it ran in (the per-op CSV's samples per iteration) and the backend
range it ran in (its span, whose end the report checks). A range's slot is
found once per range with a context of its own, as its context is; most
ranges' iteration is their span's, so a trace has about as many slots as
spans. An iteration range is numbered when it is counted: by start among its
config's iteration ranges in the trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from embprof.arrow import string_array, take

from .calls import CallStore
from .classify import BACKEND, CONFIG, ITERATION, OP, OTHER, PATH_CLASSES, PHASE, classify
from .codes import KeyCodes, StringCodes, dedupe
from .model import CallRows, RangeRows
from .nesting import Forest, build_forest, innermost, innermost_of, thread_first

# The per-range context: per class, the innermost range of it at or above (positions in the
# round's forest); UP_BACKEND and UP_PHASE hold the backend's and the phase's value index.
_CLASS_COLUMNS = (CONFIG, ITERATION, BACKEND, PHASE, OP)
UP_BACKEND, UP_PHASE = -1, -2
_PATH_SHIFT = 32
_SLOT_SHIFT = 33  # a slot's key: iteration << _SLOT_SHIFT | (span + 1)
# A context's head packs its label, backend (BACKEND_BITS), phase and op-or-not (:func:`pack_head`).
BACKEND_BITS = 2
BACKEND_SLOTS = 1 << BACKEND_BITS
_HEAD_BITS = BACKEND_BITS + 2
INF = np.iinfo(np.int64).max
ANY_LABEL = ""  # layout any: one config, named after the file by the attribution
# The context id of a call whose thread had no context and whose process's other threads held
# contexts that disagree: not counted, and counted apart (the breakdown's ``dropped_ambiguous``).
AMBIGUOUS = -2


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
    inside an iteration of its own config. A slot ``s`` is
    ``slot_iteration[s]`` (the config's iteration in this trace, 0-based in
    start order; 0 in layout any) and ``slot_span[s]`` (-1: none).
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
    # (context ids, host durations) of op ranges, each range once: summed per context by cpu_ns()
    ctx_cpu_parts: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    span_label: list[int] = field(default_factory=list)
    span_backend: list[int] = field(default_factory=list)
    span_start: list[int] = field(default_factory=list)
    span_end: list[int] = field(default_factory=list)
    slot_iteration: list[int] = field(default_factory=list)
    slot_span: list[int] = field(default_factory=list)
    iterations: dict[int, int] = field(default_factory=dict)
    has_config_names: bool = False
    _paths: KeyCodes = field(default_factory=KeyCodes)
    _ctx: KeyCodes = field(default_factory=KeyCodes)
    _slots: KeyCodes = field(default_factory=KeyCodes)

    def slot_ids(self, iteration: np.ndarray, span: np.ndarray) -> np.ndarray:
        """Slot ids of (iteration, span) pairs, new ones added."""
        uniq, inverse = dedupe((iteration << _SLOT_SHIFT) | (span + 1), INF)
        before = len(self._slots)
        ids = self._slots.codes_of_distinct(uniq)
        if len(self._slots) > before:
            new = self._slots.keys[before:]
            self.slot_iteration += (new >> _SLOT_SHIFT).tolist()
            self.slot_span += ((new & ((1 << _SLOT_SHIFT) - 1)) - 1).tolist()
        return ids[inverse]

    def path_ids(self, parent: np.ndarray, name: np.ndarray) -> np.ndarray:
        """Ids of the paths (parent path, then name), new ones added."""
        n_names = len(self.names)
        uniq, inverse = dedupe(parent * n_names + name, len(self.path_parent) * n_names)
        u_parent, u_name = np.divmod(uniq, n_names)
        before = len(self._paths)
        ids = self._paths.codes_of_distinct((u_parent << _PATH_SHIFT) | u_name) + 1
        for key in self._paths.keys[before:]:
            self.path_parent.append(key >> _PATH_SHIFT)
            self.path_name.append(key & ((1 << _PATH_SHIFT) - 1))
        return ids[inverse]

    def context_ids(self, head: np.ndarray, path: np.ndarray) -> np.ndarray:
        """Context ids of (head, path) pairs, new ones added; ``head`` packs the label, backend,
        phase and whether there is an op (:func:`pack_head`)."""
        n_paths = len(self.path_parent)
        uniq, inverse = dedupe(head * n_paths + path, max(len(self.labels), 1) * (1 << _HEAD_BITS) * n_paths)
        u_head, u_path = np.divmod(uniq, n_paths)
        before = len(self._ctx)
        ids = self._ctx.codes_of_distinct((u_head << _PATH_SHIFT) | u_path)
        if len(self._ctx) > before:  # the new contexts' parts, unpacked at once
            new = np.array(self._ctx.keys[before:], np.int64)
            head, path = new >> _PATH_SHIFT, new & ((1 << _PATH_SHIFT) - 1)
            self.ctx_label += (head >> _HEAD_BITS).tolist()
            self.ctx_backend += ((head >> 2) & (BACKEND_SLOTS - 1)).tolist()
            self.ctx_phase += ((head >> 1) & 1).tolist()
            self.ctx_has_op += (head & 1).astype(bool).tolist()
            self.ctx_path += path.tolist()
        return ids[inverse]

    def cpu_ns(self) -> np.ndarray:
        """Per context, the summed host duration of its op ranges (each counted once)."""
        if not self.ctx_cpu_parts:
            return np.zeros(len(self.ctx_label), np.int64)
        ctx, ns = (np.concatenate(part) for part in zip(*self.ctx_cpu_parts, strict=True))
        out = np.zeros(len(self.ctx_label), np.int64)
        np.add.at(out, ctx, ns)
        return out

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
    process: np.ndarray
    start: np.ndarray
    end: np.ndarray
    names: list[pa.Array]  # the carried names, then the new chunk's (never copied into one)
    cls: np.ndarray
    val: np.ndarray
    path: np.ndarray  # -1: not resolved yet
    span: np.ndarray  # -1: not a span (or not final yet)
    ordinal: np.ndarray  # an iteration's number among its config's (-1: none, or not final yet)
    final: np.ndarray  # counted already (an iteration or a span; other ranges stay False)

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> _Carry:
        i64, i8 = np.zeros(0, np.int64), np.zeros(0, np.int8)
        return cls(i64, i64, i64, i64, [string_array([])], i8, i8, i64, i64, i64, np.zeros(0, bool))

    def extend(self, rows: RangeRows, layout: str, ctx: Contexts) -> _Carry:
        cls_, val = classify(rows.names, layout)
        ctx.has_config_names |= bool((cls_ == CONFIG).any())
        n = len(rows)
        return _Carry(
            thread=np.concatenate([self.thread, rows.thread]), process=np.concatenate([self.process, rows.process]),
            start=np.concatenate([self.start, rows.start]),
            end=np.concatenate([self.end, rows.end]), names=[*self.names, rows.names],
            cls=np.concatenate([self.cls, cls_]), val=np.concatenate([self.val, val]),
            path=np.concatenate([self.path, np.full(n, -1, np.int64)]),
            span=np.concatenate([self.span, np.full(n, -1, np.int64)]),
            ordinal=np.concatenate([self.ordinal, np.full(n, -1, np.int64)]),
            final=np.concatenate([self.final, np.zeros(n, bool)]),
        )

    def take_names(self, idx: np.ndarray) -> pa.Array:
        """The names of rows ``idx`` (ascending), from the parts they lie in."""
        parts, first = [], 0
        for names in self.names:
            lo, hi = np.searchsorted(idx, [first, first + len(names)])
            if hi > lo:
                parts.append(take(names, idx[lo:hi] - first))
            first += len(names)
        if len(parts) == 1:
            return parts[0]
        return pa.concat_arrays(parts) if parts else string_array([])

    def name_codes(self, idx: np.ndarray, codes: StringCodes) -> np.ndarray:
        """The codes of the names of rows ``idx`` (any order) in ``codes``."""
        order = np.argsort(idx, kind="stable")  # a few ascending runs (one per thread): cheap
        out = np.empty(len(idx), np.int64)
        out[order] = codes.codes(self.take_names(idx[order]))
        return out

    def take(self, idx: np.ndarray) -> _Carry:
        return _Carry(self.thread[idx], self.process[idx], self.start[idx], self.end[idx], [self.take_names(idx)],
                      self.cls[idx], self.val[idx], self.path[idx], self.span[idx], self.ordinal[idx], self.final[idx])


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
        self.ordinal = np.append(rows.ordinal[order], -1)
        self.label = np.full(n + 1, -1, np.int64)
        self.up = self._propagate(rows.val[order])
        self._finalize(frontier)
        self._heads()
        self._context_threads()
        self._count_ops(frontier)

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
        first = thread_first(thread)
        up: dict[int, np.ndarray] = {}
        for kind in _CLASS_COLUMNS:
            col = np.full(n + 1, -1, np.int64)
            if len(inner) and (inner_cls == kind).any():
                found = innermost_of(thread, start, end, inner_cls == kind, first)
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
        """Count and number the iterations and number the spans of ranges that no later range can
        enclose (every range still to come starts at or after ``frontier``)."""
        if self.ctx.layout != "default":
            return
        order, up, cls = self.forest.order, self.up, self.cls[:-1]
        counted = np.flatnonzero((cls == ITERATION) | (cls == BACKEND))  # the only ranges counted here
        counted = counted[~self.rows.final[order[counted]] & (self.rows.start[order[counted]] < frontier)]
        self.rows.final[order[counted]] = True
        iters = counted[(cls[counted] == ITERATION) & (up[CONFIG][counted] >= 0)]
        if len(iters):
            self._number_iterations(iters, self.labels_of(up[CONFIG][iters]))
        spans = counted[cls[counted] == BACKEND]
        cfg, it = up[CONFIG][spans], up[ITERATION][spans]
        ok = (cfg >= 0) & (it >= 0)
        ok[ok] = up[CONFIG][it[ok]] == cfg[ok]
        spans, cfg = spans[ok], cfg[ok]
        if len(spans):
            original = order[spans]
            self.span[spans] = self.ctx.add_spans(self.labels_of(cfg), up[UP_BACKEND][spans],
                                                  self.rows.start[original], self.rows.end[original])
            self.rows.span[original] = self.span[spans]

    def _number_iterations(self, iters: np.ndarray, labels: np.ndarray) -> None:
        """Number newly counted iteration ranges (sorted positions) per label, by start (then
        position): after the label's iterations of earlier rounds, which all started before."""
        original = self.forest.order[iters]
        by = np.lexsort((iters, self.rows.start[original], labels))
        iters, original, labels = iters[by], original[by], labels[by]
        uniq, first, count = np.unique(labels, return_index=True, return_counts=True)
        before = np.array([self.ctx.iterations.get(lab, 0) for lab in uniq.tolist()], np.int64)
        group = np.repeat(np.arange(len(uniq)), count)
        ordinal = before[group] + np.arange(len(iters)) - first[group]
        self.ordinal[iters] = ordinal
        self.rows.ordinal[original] = ordinal
        for lab, n in zip(uniq.tolist(), (before + count).tolist(), strict=True):
            self.ctx.iterations[lab] = n

    def labels_of(self, config: np.ndarray) -> np.ndarray:
        """Label index of config ranges (sorted positions), from their names."""
        todo = self._distinct(config[self.label[config] < 0])
        if len(todo):
            self.label[todo] = self.rows.name_codes(self.forest.order[todo], self.ctx.labels)
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
                names = self.rows.name_codes(self.forest.order[g], self.ctx.names)
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

    def _heads(self) -> None:
        """Per range that has a context of its own (not a stage leaf; and n, no range): its packed
        head (-1 when its work is not counted), its op (-1: none) and its slot (-1: none).

        A counted range's slot is its iteration and its span; an uncounted one's is its span's
        (that span's end still takes its work's), with the span's iteration. Nearly every range
        lies in its iteration's span: its slot is the span's, found once per span."""
        n, up = self.n, self.up
        own = np.append(np.flatnonzero(self.ctx_of[:n] == np.arange(n)), n)
        self.head = np.full(n + 1, -1, np.int64)
        self.slot_of = np.full(n + 1, -1, np.int64)
        self.iteration_of = np.full(n + 1, -1, np.int64)  # of a counted range (what borrow compares)
        self.op = up[OP]
        if self.ctx.layout != "default":
            label = np.full(len(own), self.ctx.labels.code(ANY_LABEL), np.int64)  # the trace's one label
            backend = phase = np.zeros(len(own), np.int64)
            self.slot_of[own] = self.ctx.slot_ids(np.zeros(1, np.int64), np.full(1, -1, np.int64))  # its one iteration
            self.head[own] = pack_head(label, backend, phase, (up[OP][own] >= 0).astype(np.int64))
            return
        cfg, it, brange = up[CONFIG][own], up[ITERATION][own], up[BACKEND][own]
        backend, phase = up[UP_BACKEND][own], up[UP_PHASE][own]
        counted = (cfg >= 0) & (it >= 0) & (backend >= 0) & (phase >= 0)
        counted[counted] = up[CONFIG][it[counted]] == cfg[counted]
        # An iteration not numbered yet starts at or after the frontier: no call of this round lies in it.
        counted[counted] = self.ordinal[it[counted]] >= 0
        in_span = (brange >= 0) & (self.span[brange] >= 0)
        spans = in_span & (~counted | (up[ITERATION][brange] == it))  # their slot: their span's
        if spans.any():
            b = self._distinct(brange[spans])
            self.slot_of[b] = self.ctx.slot_ids(self.ordinal[up[ITERATION][b]], self.span[b])
            self.slot_of[own[spans]] = self.slot_of[brange[spans]]
        own, cfg, backend, phase, it, in_span = (
            own[counted], cfg[counted], backend[counted], phase[counted], it[counted], in_span[counted])
        self.iteration_of[own] = iteration = self.ordinal[it]
        odd = np.flatnonzero(self.slot_of[own] < 0)  # counted outside a span of their iteration
        if len(odd):
            self.slot_of[own[odd]] = self.ctx.slot_ids(
                iteration[odd], np.where(in_span[odd], self.span[up[BACKEND][own[odd]]], -1))
        self.head[own] = pack_head(self.labels_of(cfg), backend, phase, (up[OP][own] >= 0).astype(np.int64))

    def _context_threads(self) -> None:
        """The threads (dense codes) that hold a whole context somewhere this round, each with its
        process: the only threads a call on a thread without one can take its context from."""
        f = self.forest
        last = np.searchsorted(f.thread, np.arange(len(f.threads)), side="right") - 1  # sorted by thread
        self.thread_process = self.rows.process[f.order[last]]
        self.context_threads = np.zeros(0, np.int64)
        if self.ctx.layout == "default" and self.n:
            held = np.bincount(f.thread[self.head[:-1] >= 0], minlength=len(f.threads))
            self.context_threads = np.flatnonzero(held).astype(np.int64)

    def borrow(self, process: np.ndarray, thread: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For points on threads that hold no whole context of their own: the context the other
        threads of their process hold at ``time`` (a head without the op bit, -1: none), its slot,
        and whether two of those threads hold different contexts or iterations (then none is taken).

        A thread's context at a time is the one its own ranges give there (:meth:`attribute`'s
        rule); the threads that hold any are few (the main thread), so they are looped over.
        """
        head = np.full(len(time), -1, np.int64)
        slot = np.full(len(time), -1, np.int64)
        iteration = np.full(len(time), -1, np.int64)
        clash = np.zeros(len(time), bool)
        for code in self.context_threads.tolist():
            key = self.forest.threads[code]
            at = np.flatnonzero((process == self.thread_process[code]) & (thread != key))
            if len(at) == 0:
                continue
            r = innermost(self.forest, np.full(len(at), key, np.int64), time[at])
            r[r < 0] = self.n
            rx = self.ctx_of[r]
            theirs = self.head[rx]
            held = theirs >= 0
            rx = rx[held]
            at, theirs, their_slot, their_iteration = at[held], theirs[held] & ~1, self.slot_of[rx], self.iteration_of[rx]
            first = head[at] < 0
            clash[at[~first & ((head[at] != theirs) | (iteration[at] != their_iteration))]] = True
            head[at[first]], slot[at[first]] = theirs[first], their_slot[first]
            iteration[at[first]] = their_iteration[first]
        head[clash], slot[clash] = -1, -1
        return head, slot, clash

    def _count_ops(self, frontier: int) -> None:
        """Add the host duration of each op range to its context (what its calls' work is counted
        under), once: in the round where it starts before the frontier (its ancestors, which hold
        its context, and the ranges of other threads open at its start all started before it).
        An op on a thread without a context of its own takes the one its process holds at its start."""
        if self.ctx.layout != "default":
            return
        order, rows = self.forest.order, self.rows
        ops = np.flatnonzero(self.cls[:-1] == OP)
        ops = ops[~rows.final[order[ops]] & (rows.start[order[ops]] < frontier)]
        rows.final[order[ops]] = True
        head = self.head[ops]
        lost = np.flatnonzero(head < 0)
        if len(lost) and len(self.context_threads):
            original = order[ops[lost]]
            borrowed = self.borrow(rows.process[original], rows.thread[original], rows.start[original])[0]
            head[lost] = np.where(borrowed >= 0, borrowed | 1, -1)
        ops, head = ops[head >= 0], head[head >= 0]
        if len(ops) == 0:
            return
        ctx = self.ctx.context_ids(head, self.resolve_paths(ops))
        self.ctx.ctx_cpu_parts.append((ctx, rows.end[order[ops]] - rows.start[order[ops]]))

    def attribute(self, calls: CallRows) -> tuple[np.ndarray, np.ndarray]:
        """Per call: its context id (-1 when not counted, AMBIGUOUS when its process's threads
        disagreed on it) and slot id (-1 when none)."""
        r = innermost(self.forest, calls.thread, calls.start)
        r[r < 0] = self.n
        rx = self.ctx_of[r]  # a stage leaf has its parent's context
        head = self.head[rx]
        slot = self.slot_of[rx]
        ctx = np.full(len(r), -1, np.int64)
        lost = np.flatnonzero(head < 0)
        if len(lost) and len(self.context_threads):
            # The op and stages stay the launching thread's; the context comes from the others.
            borrowed, their_slot, clash = self.borrow(calls.process[lost], calls.thread[lost], calls.start[lost])
            got = borrowed >= 0
            head[lost[got]] = borrowed[got] | (self.op[rx[lost[got]]] >= 0)
            slot[lost[got]] = their_slot[got]
            ctx[lost[clash]] = AMBIGUOUS
        counted = np.flatnonzero(head >= 0)
        head = head[counted]
        rxc = rx[counted]
        has_op = (head & 1).astype(bool)
        path = self.resolve_paths(np.where(has_op, self.op[rxc], r[counted]))
        ctx[counted] = self.ctx.context_ids(head, path)
        return ctx, slot


def pack_head(label_iteration: np.ndarray, backend: np.ndarray, phase: np.ndarray, has_op: np.ndarray) -> np.ndarray:
    """Label and iteration, backend (below BACKEND_SLOTS), phase and op-or-not (0 or 1) of a context in one int."""
    return ((label_iteration * BACKEND_SLOTS + backend) * 2 + phase) * 2 + has_op


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
        if len(chunk) and int(chunk.start.min()) < last_start:
            raise OutOfOrder
        last_start = max(last_start, int(chunk.start.max()) if len(chunk) else last_start)
        rnd = _Round(carry.extend(chunk, layout, ctx), ctx, frontier)
        for part in pending.before(frontier, swept):
            store.add(part, *rnd.attribute(part))
        carry = _still_open(rnd.rows, frontier)
        swept = frontier
    rnd = _Round(carry, ctx, INF)
    for part in pending.before(INF, swept):
        store.add(part, *rnd.attribute(part))
    return ctx


def _still_open(rows: _Carry, frontier: int) -> _Carry:
    """The ranges that may hold a call or a range yet to come."""
    return rows.take(np.flatnonzero((rows.end > frontier) & (rows.end > rows.start)))


def rechunk(batches: Iterable, rows: int | None) -> Iterator:
    """Batches cut and joined into chunks of ``rows`` rows, the last one shorter (None: one chunk
    of everything). A batch of exactly ``rows`` rows passes through without a copy."""
    buf: list = []
    have = 0
    for batch in batches:
        at = 0
        while at < len(batch):
            take = len(batch) - at if rows is None else min(len(batch) - at, rows - have)
            buf.append(batch if take == len(batch) else _slice(batch, at, at + take))
            have += take
            at += take
            if rows is not None and have == rows:
                yield _concat(buf)
                buf, have = [], 0
    if buf:
        yield _concat(buf)


def _slice(rows, lo: int, hi: int):
    return type(rows)(**{
        name: (value.slice(lo, hi - lo) if isinstance(value, pa.Array) else value[lo:hi])
        for name, value in ((n, getattr(rows, n)) for n in rows.__dataclass_fields__)
    })


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
