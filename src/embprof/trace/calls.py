"""What the sweep learned of every runtime call, looked up by the work it launched.

Each call's context id and span id (:mod:`.sweep`) are packed into one int64
and kept under its key, process code * 2**33 + correlation id (CUPTI's ids
are 32-bit). Correlation ids count up from one per process, so the calls of
a trace in start order fill a table indexed by key with few holes: 8 bytes
per call, no keys kept, one step per lookup. Where the ids are not dense or
not in order, the keys are kept and sorted, and a binary search finds them.
Where several calls share a key, the first one read wins.
"""

from __future__ import annotations

import numpy as np

from .codes import KeyCodes, dense_codes
from .model import CallRows

_SPAN_BITS = 32
_PROCESS_SHIFT = 33


def pack(ctx: np.ndarray, span: np.ndarray) -> np.ndarray:
    """Context and span id (each -1 or more) in one int64 whose lowest bit is set (0: no call)."""
    return ((ctx.astype(np.int64) + 1) << (_SPAN_BITS + 1)) | ((span.astype(np.int64) + 1) << 1) | 1


def _unpack(value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return value != 0, (value >> (_SPAN_BITS + 1)) - 1, ((value >> 1) & ((1 << _SPAN_BITS) - 1)) - 1


class CallStore:
    """Context and span id of every runtime call, by (process, correlation id)."""

    def __init__(self) -> None:
        self._processes = KeyCodes()
        self._first: int | None = None  # dense: the key of table slot 0
        self._table = np.zeros(0, np.int64)
        self._size = 0  # slots in use
        self._count = 0
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []  # sparse: keys, values
        self._keys = self._values = None

    def __len__(self) -> int:
        return self._count

    def _process_codes(self, process: np.ndarray, add: bool) -> np.ndarray:
        codes, uniq = dense_codes(process)
        known = self._processes.codes_of_distinct(uniq) if add else self._processes.known(uniq)
        return known[codes]

    def add(self, calls: CallRows, ctx: np.ndarray, span: np.ndarray) -> None:
        if len(calls) == 0:
            return
        keys = (self._process_codes(calls.process, add=True) << _PROCESS_SHIFT) + calls.corr
        values = pack(ctx, span)
        self._count += len(keys)
        if self._parts or not self._into_table(keys, values):
            self._parts.append((keys, values))

    def _into_table(self, keys: np.ndarray, values: np.ndarray) -> bool:
        """Write into the dense table; False (and the table moved to the sparse parts) where it cannot."""
        if self._first is None:
            self._first = int(keys.min())
        lo, hi = int(keys.min()) - self._first, int(keys.max()) - self._first + 1
        ordered = (keys[1:] > keys[:-1]).all()  # in order and no key twice within the part
        if lo >= 0 and ordered and hi <= 2 * self._count + (1 << 16):
            at = keys - self._first
            if self._size > lo and (self._table[at[at < self._size]] != 0).any():
                return self._to_parts()  # a key seen before: the first one must win
            if hi > len(self._table):
                grown = np.zeros(max(hi, 2 * len(self._table)), np.int64)
                grown[: self._size] = self._table[: self._size]
                self._table = grown
            self._table[at] = values
            self._size = max(self._size, hi)
            return True
        return self._to_parts()

    def _to_parts(self) -> bool:
        if self._size:
            at = np.flatnonzero(self._table[: self._size])
            self._parts.append((at + self._first, self._table[at]))
        self._first, self._table, self._size = None, np.zeros(0, np.int64), 0
        return False

    def finish(self) -> None:
        """Sort the sparse parts, if any, by key (calls arrive nearly in key order)."""
        if not self._parts:
            return
        keys, values = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        self._parts.clear()
        if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
            order = np.argsort(keys, kind="stable")
            keys, values = keys[order], values[order]
        self._keys, self._values = keys, values

    def lookup(self, process: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per work item: whether its call is known, and the call's context id and span id (-1: none)."""
        pc = self._process_codes(process, add=False)
        key = (pc << _PROCESS_SHIFT) + corr
        valid = (corr >= 0) & (pc >= 0)
        if self._keys is not None:
            pos = np.searchsorted(self._keys, key)
            np.minimum(pos, len(self._keys) - 1, out=pos)
            hit = valid & (self._keys[pos] == key)
            value = np.where(hit, self._values[pos], 0)
        elif self._first is not None:
            at = key - self._first
            inside = valid & (at >= 0) & (at < self._size)
            value = np.where(inside, self._table[np.where(inside, at, 0)], 0)
        else:
            value = np.zeros(len(key), np.int64)
        return _unpack(value)
