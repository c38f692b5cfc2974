"""Work items joined to their calls' contexts and summed, a chunk at a time.

Each kernel, copy or memset takes the context and slot (iteration and span)
of the runtime call with its correlation id
(:class:`~embprof.trace.calls.CallStore`); counted work is summed per group:
its context (label, backend, phase, op and path, the same in every iteration)
and its kind and name, so a run of many short iterations has as few groups as
one of few long ones; each group's time per iteration is summed beside, as
(group, iteration) pairs. The device
intervals of each (label, backend) are merged into their union as they arrive. The work tables
are read side by side, the next chunk always from the table that is furthest
behind in time, so a merged interval that ends before every table's next
chunk begins is final and dropped: memory is a chunk per table plus the open
intervals. Tables out of start order are read again as one chunk each
(:class:`~embprof.trace.sweep.OutOfOrder`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .calls import CallStore
from .codes import KeyCodes, combined_codes, dedupe, dense_codes
from .model import WorkRows
from .sweep import AMBIGUOUS, BACKEND_SLOTS, INF, Contexts, OutOfOrder, rechunk

ROW_BITS = 40  # first-seen order: table rank, then row within the table
_KINDS = 3
_MEMS = 1 + 17 * 32  # memory kind codes (names.memory_kind_code), 0 for kernels
# What a context is (Contexts.ctx_<name>): its base, numbered by value.
BASE = ("label", "backend", "phase", "has_op", "path")


@dataclass
class _Busy:
    """Union length of device intervals per key, final up to a watermark, open intervals kept."""

    total: dict[int, int] = field(default_factory=dict)
    open: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def add(self, key: np.ndarray, start: np.ndarray, end: np.ndarray, watermark: int) -> None:
        if len(key) == 0:
            return
        codes, keys = dense_codes(key)
        for k, value in enumerate(keys.tolist()):  # a few: labels x backends
            part = np.flatnonzero(codes == k) if len(keys) > 1 else slice(None)
            self._merge(value, start[part], end[part], watermark)

    def _merge(self, key: int, start: np.ndarray, end: np.ndarray, watermark: int) -> None:
        held = self.open.get(key)
        if held is not None:
            start, end = np.concatenate([held[0], start]), np.concatenate([held[1], end])
        if len(start) == 0:
            return
        if len(start) > 1 and not (start[1:] >= start[:-1]).all():
            order = np.argsort(start, kind="stable")  # nearly in start order already: cheap
            start, end = start[order], end[order]
        s, e = start, end
        reach = np.maximum.accumulate(e)
        new = np.ones(len(s), dtype=bool)
        new[1:] = s[1:] > reach[:-1]
        first = np.flatnonzero(new)
        seg_s, seg_e = s[first], reach[np.append(first[1:], len(s)) - 1]
        done = seg_e <= watermark
        self.total[key] = self.total.get(key, 0) + int((seg_e[done] - seg_s[done]).sum())
        self.open[key] = (seg_s[~done], seg_e[~done])

    def finish(self) -> dict[int, int]:
        for key in list(self.open):
            self._merge(key, *self.open.pop(key), INF)
        self.open.clear()
        return self.total


@dataclass
class WorkTotals:
    """Per group (context base, work name and memory kinds): calls, device ns, bytes moved, and where
    it was first seen; per (group, iteration) its device ns; per (label, backend) the union of
    device time; per span the latest device end, and the first start and last end of its counted work."""

    group_base: np.ndarray  # the group's base: index into ``bases``
    bases: dict[str, np.ndarray]  # per base: its label, backend, phase, has_op and path (the contexts')
    base_of_ctx: np.ndarray  # per context, its base (its rank among the contexts by value)
    group_name: np.ndarray  # index into ``names``: (kind, name id, memory kind code) triples
    calls: np.ndarray
    total_ns: np.ndarray
    first_seen: np.ndarray
    names: list[tuple[int, int, int]]
    busy_ns: dict[int, int]  # key: label index * BACKEND_SLOTS + backend
    span_end: np.ndarray
    nbytes: np.ndarray
    counted_start: np.ndarray  # per span; INF where none of its work was counted
    counted_end: np.ndarray
    found: int
    dropped: int
    ambiguous: int  # work whose call's thread had no context and whose process's threads disagreed
    # Each group's device ns per iteration of its config in the trace, as (group, iteration, ns).
    sample_group: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sample_iteration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sample_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


class _Sums:
    def __init__(self, ctx: Contexts, n_spans: int) -> None:
        parts = {name: np.array(getattr(ctx, f"ctx_{name}"), np.int64) for name in BASE}
        self.ctx_lb = parts["label"] * BACKEND_SLOTS + parts["backend"]
        # Groups are of bases, numbered by value (not by when the sweep met them); time per iteration apart.
        self.base_of_ctx, first = combined_codes(*parts.values()) if self.ctx_lb.size else (
            np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.bases = {name: values[first] for name, values in parts.items()}
        self.n_bases = len(first)
        self.slot_iteration = np.array(ctx.slot_iteration, np.int64)
        self.slot_span = np.append(np.array(ctx.slot_span, np.int64), -1)  # slot -1: no span
        self.n_iter = int(self.slot_iteration.max(initial=0)) + 1
        self.names, self.groups = KeyCodes(), KeyCodes()
        self.calls = np.zeros(0, np.int64)
        self.total = np.zeros(0, np.float64)
        self.first = np.zeros(0, np.int64)
        self.busy = _Busy()
        self.span_end = np.full(n_spans, -1, np.int64)
        self.counted_start = np.full(n_spans, INF, np.int64)
        self.counted_end = np.full(n_spans, -1, np.int64)
        self.nbytes = np.zeros(0, np.float64)
        self.found = self.dropped = self.ambiguous = 0
        self.samples: list[tuple[np.ndarray, np.ndarray]] = []  # per chunk: (group * n_iter + iteration, ns)

    def add(self, w: WorkRows, store: CallStore, first_row: int, watermark: int) -> None:
        known, ctx, slot = store.lookup(w.process, w.corr)
        found = np.flatnonzero(known)
        self.dropped += len(known) - len(found)
        self.found += len(found)
        ctx, slot = ctx[found], slot[found]
        span = self.slot_span[slot]
        end = w.end[found]
        spanned = span >= 0
        if spanned.any():
            np.maximum.at(self.span_end, span[spanned], end[spanned])
        self.ambiguous += int(np.count_nonzero(ctx == AMBIGUOUS))
        counted = ctx >= 0
        rows, ctx, in_span, slot = found[counted], ctx[counted], span[counted], slot[counted]
        if len(rows) == 0:
            return
        start, end = w.start[rows], end[counted]
        spanned = in_span >= 0
        if spanned.any():  # the window of each span's counted work: its idle time is the rest of it
            np.minimum.at(self.counted_start, in_span[spanned], start[spanned])
            np.maximum.at(self.counted_end, in_span[spanned], end[spanned])
        raw = ((w.name[rows] + 1) * _MEMS + w.mem[rows]) * _KINDS + w.kind[rows]
        name = self.names.codes(raw, bound=int(raw.max()) + 1)
        width = len(self.names)
        uniq, inverse = dedupe(self.base_of_ctx[ctx] * width + name, self.n_bases * width)
        g_base, g_name = np.divmod(uniq, width)
        gids = self.groups.codes_of_distinct((g_base << 32) | g_name)
        self._grow(len(self.groups))
        self.calls[gids] += np.bincount(inverse, minlength=len(uniq))
        dur = end - start
        self.total[gids] += np.bincount(inverse, weights=dur, minlength=len(uniq))
        # (group, iteration) pairs: a chunk spans few iterations, so they are coded within its window
        iteration = self.slot_iteration[slot]
        low, groups = int(iteration.min()), len(self.groups)
        window, at = dedupe((iteration - low) * groups + gids[inverse], (int(iteration.max()) - low + 1) * groups)
        it, gid = np.divmod(window, groups)
        pair = gid * self.n_iter + it + low
        order = _by_group(gid, groups)  # the chunk's run, sorted by pair
        self.samples.append((pair[order], np.bincount(at, weights=dur, minlength=len(window))[order]))
        moved = w.nbytes[rows]
        if moved.any():  # kernels move none: no sum of zeros per chunk of them
            self.nbytes[gids] += np.bincount(inverse, weights=moved, minlength=len(uniq))
        if (self.first[gids] > first_row).any():  # a group not yet seen before this chunk's rows
            first = np.full(len(uniq), INF, np.int64)
            np.minimum.at(first, inverse, rows + first_row)
            self.first[gids] = np.minimum(self.first[gids], first)
        self.busy.add(self.ctx_lb[ctx], start, end, watermark)

    def _grow(self, n: int) -> None:
        """Room for ``n`` groups; the arrays at least double, so each group is copied O(1) times."""
        have = len(self.calls)
        if n > have:
            more = max(n, 2 * have) - have
            self.calls = np.concatenate([self.calls, np.zeros(more, np.int64)])
            self.total = np.concatenate([self.total, np.zeros(more, np.float64)])
            self.first = np.concatenate([self.first, np.full(more, INF, np.int64)])
            self.nbytes = np.concatenate([self.nbytes, np.zeros(more, np.float64)])

    def result(self) -> WorkTotals:
        keys = np.array(self.groups.keys, np.int64)
        raw = np.array(self.names.keys, np.int64)
        n = len(keys)
        pair, ns = _sum_runs(self.samples)
        return WorkTotals(
            group_base=keys >> 32, bases=self.bases, base_of_ctx=self.base_of_ctx,
            group_name=keys & 0xFFFFFFFF, calls=self.calls[:n],
            total_ns=np.rint(self.total[:n]).astype(np.int64), first_seen=self.first[:n],
            names=[(int(r % _KINDS), int(r // _KINDS // _MEMS) - 1, int(r // _KINDS % _MEMS)) for r in raw.tolist()],
            busy_ns=self.busy.finish(), span_end=self.span_end, found=self.found, dropped=self.dropped,
            ambiguous=self.ambiguous,
            nbytes=self.nbytes[:n], counted_start=self.counted_start, counted_end=self.counted_end,
            sample_group=pair // self.n_iter, sample_iteration=pair % self.n_iter,
            sample_ns=np.rint(ns).astype(np.int64),
        )


def _by_group(gid: np.ndarray, groups: int) -> np.ndarray:
    """The stable order of ``gid`` (ints below ``groups``): pairs listed by iteration, then group,
    come out by group, then iteration. Where the groups fit 16 bits, numpy sorts them by radix
    (linear), several times faster than a comparison sort of the pairs."""
    if groups <= 1 << 16:
        return np.argsort(gid.astype(np.uint16), kind="stable")
    return np.argsort(gid, kind="stable")


def _sum_runs(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and their summed values, of runs of sorted distinct keys (one per chunk:
    a (group, iteration) pair cut by a chunk's edge is in two). A stable sort merges the runs."""
    if not runs:
        return np.zeros(0, np.int64), np.zeros(0)
    keys, values = (np.concatenate(part) for part in zip(*runs, strict=True))
    order = np.argsort(keys, kind="stable")  # timsort: a merge of the sorted runs
    keys, values = keys[order], values[order]
    first = np.ones(len(keys), bool)
    first[1:] = keys[1:] != keys[:-1]
    return keys[first], np.add.reduceat(values, np.flatnonzero(first)) if len(keys) else values


def sum_work(streams: Sequence[Iterable[WorkRows]], store: CallStore, ctx: Contexts,
             chunk_rows: int | None) -> WorkTotals:
    """Join and sum every work table; ``chunk_rows`` None reads each table as one chunk."""
    sums = _Sums(ctx, len(ctx.span_label))
    for rows, first_row, watermark in _in_time_order(streams, chunk_rows):
        sums.add(rows, store, first_row, watermark)
    return sums.result()


def _in_time_order(streams: Sequence[Iterable[WorkRows]], chunk_rows: int | None) -> Iterator[tuple[WorkRows, int, int]]:
    """Chunks of all tables, the next from the table furthest behind, with each chunk's first row
    number (table rank, row) and the watermark: no chunk still to come starts before it."""
    tables = [iter(rechunk(s, chunk_rows)) for s in streams]
    heads = [next(t, None) for t in tables]
    read = [0] * len(tables)
    swept = -INF
    while any(h is not None for h in heads):
        starts = [int(h.start.min()) if h is not None else INF for h in heads]
        k = int(np.argmin(starts))
        chunk = heads[k]
        heads[k] = next(tables[k], None)
        watermark = min(int(h.start.min()) if h is not None else INF for h in heads)
        if watermark < swept:  # a chunk starts before intervals already counted as final
            raise OutOfOrder
        yield chunk, (k << ROW_BITS) + read[k], watermark
        read[k] += len(chunk)
        swept = watermark
