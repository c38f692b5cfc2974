"""What the breakdown requires of a trace beyond its format, checked as the trace streams by.

A damaged trace can be well-formed and still give wrong numbers without a word: every
kernel record written twice doubles every op's time (the busy time, a union, stays the
same); two runtime calls of one process with the same correlation id put one's kernels
under the other's op (TBE's under dyn); an ``op:`` range with nothing after the colon makes
an op named "". So the breakdown refuses, in one line naming the trace:

- a work record (kernel, copy, memset) that repeats another exactly: same process,
  correlation id, kind, name, start and end (kernels of one graph launch share a
  correlation id, never a start and an end);
- runtime calls of one process that share a correlation id (found where they are
  stored: :class:`~embprof.trace.calls.CallStore`, which raises :class:`CollidingCalls`);
- an ``op:`` range without a name (layout ``default``).

:func:`checked` wraps a :class:`~embprof.trace.model.TraceSource` so that its streams
check themselves; the check of a work stream keeps one 8-byte hash per record (and its
start), compares those of records that share a start (found as the stream goes by in a
stream in start order; else by a stable sort of the starts, which merges the runs of
an export written nearly in order, such as one stream per queue, many times faster than
sorting the hashes), and confirms a hash that repeats on the records themselves, so no
two different records are ever taken for one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from embprof.arrow import first_bytes, last_bytes, matches, take
from embprof.errors import TraceError

from .calls import CollidingCalls
from .model import RangeRows, TraceSource, WorkRows

__all__ = ["CollidingCalls", "checked", "colliding_calls_error"]

_EMPTY_OP = r"^op:\s*$"
_EMPTY_OP_LAST = np.zeros(256, bool)  # by last byte: could the name match _EMPTY_OP (a superset)
_EMPTY_OP_LAST[np.frombuffer(b":\t\n\v\f\r ", np.uint8)] = True
_EMPTY_OP_LAST[0x80:] = True
_MIX = np.uint64(0x9E3779B97F4A7C15)


def colliding_calls_error(path: object, exc: CollidingCalls) -> TraceError:
    return TraceError(
        path,
        f"{exc.count} runtime call(s) share their correlation id with another call of their process "
        f"(first: {exc.example}): which launch a kernel came from cannot be told",
    )


class _Checked:
    """A trace source whose streams refuse what :mod:`this module <embprof.trace.invariants>` names."""

    def __init__(self, source: TraceSource, layout: str) -> None:
        self._source = source
        self._layout = layout
        self.path = source.path
        self.time_source = source.time_source

    def ranges(self) -> Iterator[RangeRows]:
        for rows in self._source.ranges():
            if self._layout == "default" and len(rows):
                # The only names that can be an empty "op:": "o" first, and ":" or a space (or a byte of
                # a non-ASCII character) last; most op names end otherwise, so the regex rarely runs.
                ops = np.flatnonzero((first_bytes(rows.names) == ord("o")) & _EMPTY_OP_LAST[last_bytes(rows.names)])
                empty = ops[matches(take(rows.names, ops), _EMPTY_OP)] if len(ops) else ops
                if len(empty):
                    first = int(rows.start[empty[0]])
                    raise TraceError(self.path, f"{len(empty)} op: range(s) have no name after 'op:' "
                                                f"(the first starts at {first} ns): every op needs one")
            yield rows

    def calls(self):
        return self._source.calls()

    def work(self) -> Sequence[Iterator[WorkRows]]:
        return [self._unique(n, stream) for n, stream in enumerate(self._source.work())]

    def _unique(self, table: int, stream: Iterator[WorkRows]) -> Iterator[WorkRows]:
        """The stream as it is; at its end, :meth:`_confirm` of any hash that repeats among records
        of one start (a repeated record has its original's start): in a stream in start order those
        are found as it goes by; any other has its starts sorted at the end."""
        hashes: list[np.ndarray] = []
        starts: list[np.ndarray] = []
        tied: list[tuple[np.ndarray, np.ndarray]] = []  # (start, hash) of records that share a start
        in_order, last, last_tied = True, None, False
        for rows in stream:
            h = _row_hash(rows)
            hashes.append(h)
            s = rows.start
            starts.append(s.copy())  # a view would keep the reader's batch in memory (+22 MB peak)
            if in_order and len(s):
                if (last is not None and s[0] < last[0]) or (s[1:] < s[:-1]).any():
                    in_order = False
                else:
                    same = s[1:] == s[:-1]
                    mask = np.zeros(len(s), bool)
                    mask[1:] |= same
                    mask[:-1] |= same
                    if last is not None and s[0] == last[0]:
                        mask[0] = True
                        if not last_tied:
                            tied.append((np.array([last[0]]), np.array([last[1]], np.uint64)))
                    tied.append((s[mask], h[mask]))
                    last, last_tied = (int(s[-1]), h[-1]), bool(mask[-1])
            yield rows
        if not hashes:
            return
        if in_order:
            if not tied:
                return
            start, key = (np.concatenate(c) for c in zip(*tied, strict=True))
        else:
            start, key = np.concatenate(starts), np.concatenate(hashes)
            order = np.argsort(start, kind="stable")  # timsort: nearly in order, a merge of its runs
            start, key = start[order], key[order]
            same = start[1:] == start[:-1]
            ties = np.zeros(len(start), bool)
            ties[1:] |= same
            ties[:-1] |= same
            start, key = start[ties], key[ties]
        order = np.lexsort((key, start))
        start, key = start[order], key[order]
        repeated = key[1:][(key[1:] == key[:-1]) & (start[1:] == start[:-1])]
        if len(repeated):
            self._confirm(table, np.unique(repeated))

    def _confirm(self, table: int, suspects: np.ndarray) -> None:
        """Read the stream again for the records whose hash repeats; refuse if any repeat exactly."""
        kept = []
        for rows in self._source.work()[table]:
            hit = np.isin(_row_hash(rows), suspects)
            if hit.any():
                kept.append(np.stack([getattr(rows, f)[hit].astype(np.int64) for f in _FIELDS], axis=1))
        records = np.concatenate(kept)
        _, counts = np.unique(records, axis=0, return_counts=True)
        extra = int((counts - 1).sum())
        if extra:
            raise TraceError(self.path, f"{extra} kernel/copy record(s) repeat another exactly (same process, "
                                        "correlation id, name, start and end): the trace holds them twice")

    def work_names(self, kind: int, ids: np.ndarray) -> list[str]:
        return self._source.work_names(kind, ids)

    def close(self) -> None:
        self._source.close()


_FIELDS = ("process", "corr", "kind", "name", "start", "end")
_HASHED = ("corr", "start", "end")  # what tells records apart; the rest is compared on a repeat


def _row_hash(rows: WorkRows) -> np.ndarray:
    """One 64-bit hash per record (vectorized; wraps around)."""
    h = np.zeros(len(rows), np.uint64)
    with np.errstate(over="ignore"):
        for field in _HASHED:
            h ^= getattr(rows, field).astype(np.int64).view(np.uint64)
            h *= _MIX
            h ^= h >> np.uint64(31)
    return h


def checked(source: TraceSource, layout: str) -> TraceSource:
    """``source`` with its streams checked (see the module's docstring)."""
    return _Checked(source, layout)
