"""Dense integer codes for keys and names, numbered the same way across the chunks of a trace.

Vectorized: a chunk's keys are deduplicated in numpy (a counting pass where
the key space is small, else a sort); only the distinct keys, usually a few
hundred, go through a Python dict that keeps the codes stable from chunk to chunk.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from embprof.arrow import dictionary_encode

_SAMPLE = 1024


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the sorted distinct values, for columns with few of them (threads, processes).

    The distinct values of a sample are checked against the whole column with
    one binary search per value; only when the sample missed one is the column sorted.
    """
    if len(values) == 0:
        return np.zeros(0, np.int64), values[:0]
    if (values == values[0]).all():
        return np.zeros(len(values), np.int64), values[:1]
    uniq = np.unique(values[:: max(1, len(values) // _SAMPLE)])
    if len(uniq) <= 4:  # a compare per value beats a binary search
        codes = np.full(len(values), -1, np.int64)
        for i, u in enumerate(uniq.tolist()):
            codes[values == u] = i
        if (codes >= 0).all():
            return codes, uniq
    pos = np.searchsorted(uniq, values)
    np.minimum(pos, len(uniq) - 1, out=pos)
    if (uniq[pos] == values).all():
        return pos, uniq
    uniq, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64), uniq


def dedupe(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and each key's index among them; keys are ints in [0, bound)."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if bound <= max(8 * len(keys), 1 << 16):
        present = np.bincount(keys, minlength=bound) > 0
        uniq = np.flatnonzero(present)
        lut = np.zeros(bound, np.int64)
        lut[uniq] = np.arange(len(uniq))
        return uniq, lut[keys]
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, inverse.astype(np.int64)


def combined_codes(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per position, a dense code of its tuple of ``columns`` (non-negative ints), and the first
    position of each code: columns combined one at a time, so no key outgrows an int64."""
    code = np.zeros(len(columns[0]), np.int64)
    width = 1
    for column in columns:
        column = np.asarray(column, np.int64)
        values, inverse = dedupe(column, max(int(column.max(initial=0)) + 1, 1))
        code = dedupe(code * len(values) + inverse, width * max(len(values), 1))[1]
        width = int(code.max(initial=-1)) + 1
    first = np.full(width, len(code), np.int64)
    np.minimum.at(first, code, np.arange(len(code), dtype=np.int64))
    return code, first


class KeyCodes:
    """Codes 0, 1, 2, ... for non-negative int64 keys, in order of first sight across calls.

    The keys seen are kept sorted beside their codes, so a chunk's distinct keys are looked up
    and added with a binary search each, never one by one in Python: a trace of many short
    iterations has a slot per iteration and backend, tens of thousands of keys. Keys after
    every key seen (a new iteration's) are appended in place; others go to a short sorted tail,
    merged into the rest when it has grown to an eighth of it, so a key is moved O(1) times.
    """

    def __init__(self) -> None:
        self._n = 0
        self._keys = np.zeros(16, np.int64)  # by code (the first len(self) are held)
        self._main = _Sorted()  # most keys seen, ascending, with their codes
        self._tail = _Sorted()  # the rest (few): keys that came before the main ones' last

    def __len__(self) -> int:
        return self._n

    @property
    def keys(self) -> np.ndarray:
        """The keys by code (a view: copy before adding more)."""
        return self._keys[: self._n]

    def codes(self, keys: np.ndarray, bound: int | None = None) -> np.ndarray:
        """The code of every key; ``bound`` (all keys below it) lets small key spaces skip a sort."""
        uniq, inverse = dedupe(keys, int(bound) if bound is not None else 1 << 63)
        return self.codes_of_distinct(uniq)[inverse]

    def known(self, uniq: np.ndarray) -> np.ndarray:
        """Codes of distinct keys seen before, -1 for the others (nothing is added)."""
        uniq = np.asarray(uniq, np.int64)
        code = self._main.find(uniq)
        missing = code < 0
        if missing.any() and len(self._tail):
            code[missing] = self._tail.find(uniq[missing])
        return code

    def codes_of_distinct(self, uniq: np.ndarray) -> np.ndarray:
        """Codes of distinct keys; the new ones numbered on, in the order given."""
        uniq = np.asarray(uniq, np.int64)
        code = self.known(uniq)
        new = np.flatnonzero(code < 0)
        if len(new) == 0:
            return code
        n, k = self._n, len(new)
        fresh = np.arange(n, n + k, dtype=np.int64)
        code[new] = fresh
        if n + k > len(self._keys):  # room for twice as many: each key is copied O(1) times
            self._keys = np.concatenate([self._keys[:n], np.zeros(max(len(self._keys), k), np.int64)])
        added = uniq[new]
        self._keys[n: n + k] = added
        order = np.argsort(added, kind="stable")
        added, fresh = added[order], fresh[order]
        self._n = n + k
        if not len(self._tail) and (not len(self._main) or added[0] > self._main.last):
            self._main.append(added, fresh)
        else:
            self._tail.merge(added, fresh)
            if len(self._tail) > max(1024, len(self._main) // 8):
                self._main.merge(*self._tail.take())
        return code


class _Sorted:
    """Keys ascending with a code each, in buffers that grow by doubling."""

    def __init__(self) -> None:
        self._m = 0
        self._keys = np.zeros(16, np.int64)
        self._codes = np.zeros(16, np.int64)

    def __len__(self) -> int:
        return self._m

    @property
    def last(self) -> int:
        return int(self._keys[self._m - 1])

    def find(self, uniq: np.ndarray) -> np.ndarray:
        """The code of each key, -1 where it is not held."""
        held = self._keys[: self._m]
        pos = np.searchsorted(held, uniq)
        pos[pos >= self._m] = 0
        hit = held[pos] == uniq if self._m else np.zeros(len(uniq), bool)
        return np.where(hit, self._codes[pos] if self._m else -1, -1)

    def _room(self, k: int) -> None:
        if self._m + k > len(self._keys):
            size = max(2 * len(self._keys), self._m + k)
            self._keys, self._codes = (np.concatenate([a[: self._m], np.zeros(size - self._m, np.int64)])
                                       for a in (self._keys, self._codes))

    def append(self, keys: np.ndarray, codes: np.ndarray) -> None:
        """Keys (ascending) that all come after the last held."""
        self._room(len(keys))
        self._keys[self._m: self._m + len(keys)], self._codes[self._m: self._m + len(keys)] = keys, codes
        self._m += len(keys)

    def merge(self, keys: np.ndarray, codes: np.ndarray) -> None:
        """Keys (ascending, none held) merged in."""
        at = np.searchsorted(self._keys[: self._m], keys)
        merged_keys = np.insert(self._keys[: self._m], at, keys)
        merged_codes = np.insert(self._codes[: self._m], at, codes)
        self._m = 0
        self._room(len(merged_keys))
        self.append(merged_keys, merged_codes)

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """Every key and code held, emptied."""
        out = self._keys[: self._m].copy(), self._codes[: self._m].copy()
        self._m = 0
        return out


class StringCodes:
    """Codes for strings, the same for equal strings across chunks; ``strings[code]`` is the string."""

    def __init__(self, initial: tuple[str, ...] = ()) -> None:
        self._code: dict[str, int] = {}
        self.strings: list[str] = []
        for s in initial:
            self.code(s)

    def __len__(self) -> int:
        return len(self.strings)

    def code(self, text: str) -> int:
        c = self._code.get(text)
        if c is None:
            c = self._code[text] = len(self.strings)
            self.strings.append(text)
        return c

    def codes(self, texts: pa.Array) -> np.ndarray:
        """The code of every string of an Arrow string array (hashed in Arrow; distinct ones here)."""
        if len(texts) == 0:
            return np.zeros(0, np.int64)
        indices, dictionary = dictionary_encode(texts)
        lut = np.fromiter((self.code(s) for s in dictionary.to_pylist()), np.int64, count=len(dictionary))
        return lut[indices]
