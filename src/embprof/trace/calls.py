"""What the sweep learned of every runtime call, looked up by the work it launched.

Each call's context id and slot id (:mod:`.sweep`: its iteration and span) are packed into one int64
and kept under its key, process code * 2**33 + correlation id (CUPTI's ids
are 32-bit). Correlation ids count up from one per process, so the calls of
a trace in start order fill a table indexed by key with few holes: 8 bytes
per call, no keys kept, one step per lookup (the table grows a block at a
time, so it is never copied). Where the ids are not dense or
not in order, the keys are kept and sorted, and a binary search finds them.
Calls of one process never share a correlation id: where several do, which one
launched a kernel cannot be told, and :meth:`CallStore.finish` raises
:class:`CollidingCalls`. Calls without a correlation id (-1) launch nothing that
can be joined to them and are not kept.
"""

from __future__ import annotations

import numpy as np

from .codes import KeyCodes, dense_codes
from .model import CallRows

_SLOT_BITS = 32
_PROCESS_SHIFT = 33


def pack(ctx: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """Context and slot id (each -1 or more) in one int64 whose lowest bit is set (0: no call)."""
    return ((ctx.astype(np.int64) + 1) << (_SLOT_BITS + 1)) | ((slot.astype(np.int64) + 1) << 1) | 1


def _unpack(value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return value != 0, (value >> (_SLOT_BITS + 1)) - 1, ((value >> 1) & ((1 << _SLOT_BITS) - 1)) - 1


class _Blocks:
    """A table of int64 slots (0: empty) in blocks of 2**20, allocated as slots are first written:
    it grows without copies and holds at most one block it does not use."""

    BITS = 20

    def __init__(self) -> None:
        self.blocks: list[np.ndarray | None] = []
        self.size = 0  # slots in use

    def _each_block(self, at: np.ndarray):
        """(block number, positions in ``at`` that fall in it), for ``at`` ascending."""
        block = at >> self.BITS
        first, last = int(block[0]), int(block[-1])
        if first == last:
            yield first, slice(None)
            return
        cuts = np.searchsorted(block, np.arange(first, last + 2))
        for b in range(first, last + 1):
            if cuts[b - first + 1] > cuts[b - first]:
                yield b, slice(cuts[b - first], cuts[b - first + 1])

    def any_set(self, at: np.ndarray) -> bool:
        at = at[at < self.size]
        for b, part in self._each_block(at) if len(at) else ():
            if b < len(self.blocks) and self.blocks[b] is not None and (self.blocks[b][at[part] & _MASK] != 0).any():
                return True
        return False

    def write(self, at: np.ndarray, values: np.ndarray) -> None:
        for b, part in self._each_block(at):
            while len(self.blocks) <= b:
                self.blocks.append(None)
            if self.blocks[b] is None:
                self.blocks[b] = np.zeros(1 << self.BITS, np.int64)
            self.blocks[b][at[part] & _MASK] = values[part]
        self.size = max(self.size, int(at[-1]) + 1)

    def read(self, at: np.ndarray) -> np.ndarray:
        """The slots at ``at`` (0 outside the table); ``at`` in any order."""
        inside = (at >= 0) & (at < self.size)
        block = np.where(inside, at >> self.BITS, 0)
        first, last = (int(block.min()), int(block.max())) if len(block) else (0, -1)
        if first == last and first < len(self.blocks) and self.blocks[first] is not None:
            return np.where(inside, self.blocks[first][at & _MASK], 0)  # the usual case: one block
        out = np.zeros(len(at), np.int64)
        for b in range(first, last + 1):  # work comes nearly in key order: few blocks
            if b >= len(self.blocks) or self.blocks[b] is None:
                continue
            hit = np.flatnonzero(inside & (block == b))
            out[hit] = self.blocks[b][at[hit] & _MASK]
        return out

    def nonzero(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions and values of the slots in use."""
        at, values = [], []
        for b, block in enumerate(self.blocks):
            if block is not None:
                hit = np.flatnonzero(block)
                at.append(hit + (b << self.BITS))
                values.append(block[hit])
        if not at:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(at), np.concatenate(values)


_MASK = (1 << _Blocks.BITS) - 1


class CollidingCalls(ValueError):
    """Runtime calls of one process share a correlation id (``count`` calls repeat an earlier one's;
    ``example``: one such id)."""

    def __init__(self, count: int, example: int) -> None:
        super().__init__(f"{count} runtime call(s) repeat the correlation id of another (e.g. {example})")
        self.count = count
        self.example = example


class CallStore:
    """Context and slot id of every runtime call, by (process, correlation id)."""

    def __init__(self) -> None:
        self._processes = KeyCodes()
        self._first: int | None = None  # dense: the key of table slot 0
        self._table = _Blocks()
        self._count = 0
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []  # sparse: keys, values
        self._keys = self._values = None

    def __len__(self) -> int:
        return self._count

    def _process_codes(self, process: np.ndarray, add: bool) -> np.ndarray:
        codes, uniq = dense_codes(process)
        known = self._processes.codes_of_distinct(uniq) if add else self._processes.known(uniq)
        return known[codes]

    def add(self, calls: CallRows, ctx: np.ndarray, slot: np.ndarray) -> None:
        joinable = calls.corr >= 0
        if not joinable.all():
            calls = CallRows(*(getattr(calls, f)[joinable] for f in ("process", "corr", "thread", "start")))
            ctx, slot = ctx[joinable], slot[joinable]
        if len(calls) == 0:
            return
        keys = (self._process_codes(calls.process, add=True) << _PROCESS_SHIFT) + calls.corr
        values = pack(ctx, slot)
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
            if self._table.size > lo and self._table.any_set(at):
                return self._to_parts()  # a key seen before: the first one must win
            self._table.write(at, values)
            return True
        return self._to_parts()

    def _to_parts(self) -> bool:
        if self._table.size:
            at, values = self._table.nonzero()
            self._parts.append((at + self._first, values))
        self._first, self._table = None, _Blocks()
        return False

    def finish(self) -> None:
        """Sort the sparse parts, if any, by key (calls arrive nearly in key order); :class:`CollidingCalls`
        where two calls share a key (the dense table holds none: a key seen twice moves it here)."""
        if not self._parts:
            return
        keys, values = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        self._parts.clear()
        if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
            order = np.argsort(keys, kind="stable")
            keys, values = keys[order], values[order]
        repeated = np.flatnonzero(keys[1:] == keys[:-1])
        if len(repeated):
            raise CollidingCalls(len(repeated), int(keys[repeated[0]] & ((1 << _PROCESS_SHIFT) - 1)))
        self._keys, self._values = keys, values

    def lookup(self, process: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per work item: whether its call is known, and the call's context id and slot id (-1: none)."""
        pc = self._process_codes(process, add=False)
        key = (pc << _PROCESS_SHIFT) + corr
        valid = (corr >= 0) & (pc >= 0)
        if self._keys is not None:
            pos = np.searchsorted(self._keys, key)
            np.minimum(pos, len(self._keys) - 1, out=pos)
            hit = valid & (self._keys[pos] == key)
            value = np.where(hit, self._values[pos], 0)
        elif self._first is not None:
            value = np.where(valid, self._table.read(np.where(valid, key - self._first, -1)), 0)
        else:
            value = np.zeros(len(key), np.int64)
        return _unpack(value)
