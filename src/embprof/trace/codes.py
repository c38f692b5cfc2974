"""Dense integer codes for keys and names, numbered the same way across the chunks of a trace.

Vectorized: a chunk's keys are deduplicated in numpy (a counting pass where
the key space is small, else a sort); only the distinct keys, usually a few
hundred, go through a Python dict that keeps the codes stable from chunk to chunk.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrow import dictionary_encode

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


class KeyCodes:
    """Codes 0, 1, 2, ... for non-negative int64 keys, in order of first sight across calls."""

    def __init__(self) -> None:
        self._code: dict[int, int] = {}
        self.keys: list[int] = []

    def __len__(self) -> int:
        return len(self.keys)

    def codes(self, keys: np.ndarray, bound: int | None = None) -> np.ndarray:
        """The code of every key; ``bound`` (all keys below it) lets small key spaces skip a sort."""
        uniq, inverse = dedupe(keys, int(bound) if bound is not None else 1 << 63)
        return self.codes_of_distinct(uniq)[inverse]

    def known(self, uniq: np.ndarray) -> np.ndarray:
        """Codes of distinct keys seen before, -1 for the others (nothing is added)."""
        return np.array([self._code.get(key, -1) for key in uniq.tolist()], np.int64)

    def codes_of_distinct(self, uniq: np.ndarray) -> np.ndarray:
        code, keys = self._code, self.keys
        out = np.empty(len(uniq), np.int64)
        for i, key in enumerate(uniq.tolist()):
            c = code.get(key)
            if c is None:
                c = code[key] = len(keys)
                keys.append(key)
            out[i] = c
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
