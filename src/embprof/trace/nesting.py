"""Range trees and point stabbing, vectorized over all threads at once.

Push/pop ranges of one thread nest strictly. Sorted by (thread, start,
-end), a range's depth is the number of ranges of its thread started
before it and not yet ended at its start, and its parent is the last range
before it one level up. The innermost range holding a time ``t`` is found
from the last range started at or before ``t``: if that one has already
ended, the answer is among its ancestors, so a few vectorized hops up the
parent array settle every point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class Forest:
    """Ranges in (thread, start, -end) order with their tree structure."""

    order: np.ndarray  # index into the reader's arrays, per sorted position
    thread: np.ndarray  # dense thread code
    start: np.ndarray
    end: np.ndarray
    depth: np.ndarray
    parent: np.ndarray  # sorted position of the parent, -1 at a root
    start_key: np.ndarray
    span: int
    t0: int


def _dense_threads(*threads: np.ndarray) -> list[np.ndarray]:
    """One small int per distinct thread id, shared by all arrays (hash-based, O(n))."""
    codes, _ = pd.factorize(np.concatenate(threads))
    out, pos = [], 0
    for t in threads:
        out.append(codes[pos : pos + len(t)].astype(np.int64))
        pos += len(t)
    return out


def levels(depth: np.ndarray) -> list[np.ndarray]:
    """Sorted positions grouped by depth, shallowest first, ascending within a level."""
    if len(depth) == 0:
        return []
    small = depth.astype(np.int16 if depth.max() < np.iinfo(np.int16).max else np.int64)
    by = np.argsort(small, kind="stable")  # a radix sort for 16-bit keys
    cuts = np.searchsorted(small[by], np.arange(1, int(depth.max()) + 1))
    return np.split(by, cuts)


def build_forest(r_thread, r_start, r_end, p_thread, p_time) -> tuple[Forest, np.ndarray, list[np.ndarray]]:
    """The range forest, the points' dense thread codes, and the forest's depth levels."""
    keep = np.flatnonzero(r_end > r_start)  # empty ranges hold nothing
    r_tc, p_tc = _dense_threads(r_thread[keep], p_thread)
    times = [a for a in (r_start[keep], r_end[keep], p_time) if len(a)]
    t0 = int(min(a.min() for a in times)) if times else 0
    span = (int(max(a.max() for a in times)) - t0 + 2) if times else 2
    n_threads = int(max(r_tc.max(initial=0), p_tc.max(initial=0))) + 1
    if n_threads * span >= (1 << 62):
        raise OverflowError("trace spans too long a time across too many threads")

    s, e = r_start[keep], r_end[keep]
    sk = r_tc * span + (s - t0)
    srt = np.argsort(sk, kind="stable")  # exports list ranges nearly in order: cheap
    sks = sk[srt]
    if len(sks) > 1 and (sks[1:] == sks[:-1]).any():
        srt = np.lexsort((-e, sk))  # equal starts: the longer range is the outer one
        sks = sk[srt]
    tc, s, e = r_tc[srt], s[srt], e[srt]
    ek = tc * span + (e - t0)
    n = len(s)
    pos = np.arange(n, dtype=np.int64)
    # Per thread: ranges started before each one, minus those already ended at its start.
    thread_first = np.flatnonzero(np.r_[True, tc[1:] != tc[:-1]]) if n else np.empty(0, np.int64)
    ek_sorted = np.sort(ek, kind="stable")
    thread_codes = tc[thread_first]
    first_end = np.zeros(n_threads, dtype=np.int64)
    first_end[thread_codes] = np.searchsorted(ek_sorted, thread_codes * span, side="left")
    first_start = np.zeros(n_threads, dtype=np.int64)
    first_start[thread_codes] = thread_first
    ended = np.searchsorted(ek_sorted, sks, side="right") - first_end[tc]
    depth = (pos - first_start[tc]) - ended

    by_level = levels(depth)
    parent = np.full(n, -1, dtype=np.int64)
    for upper, lower in zip(by_level, by_level[1:], strict=False):
        # The parent is the last range one level up that starts before the child.
        parent[lower] = upper[np.searchsorted(upper, lower) - 1]
    forest = Forest(order=keep[srt], thread=tc, start=s, end=e, depth=depth, parent=parent, start_key=sks, span=span, t0=t0)
    return forest, p_tc, by_level


def innermost(forest: Forest, p_tc: np.ndarray, p_time: np.ndarray) -> np.ndarray:
    """Sorted position of the innermost range with start <= t < end on the point's thread, else -1."""
    if len(forest.start) == 0:
        return np.full(len(p_time), -1, dtype=np.int64)
    key = p_tc * forest.span + (p_time - forest.t0)
    r = np.searchsorted(forest.start_key, key, side="right") - 1
    r[(r >= 0) & (forest.thread[np.maximum(r, 0)] != p_tc)] = -1
    todo = np.flatnonzero(r >= 0)
    while len(todo):
        rr = r[todo]
        out = forest.end[rr] <= p_time[todo]
        todo = todo[out]
        r[todo] = forest.parent[rr[out]]
        todo = todo[r[todo] >= 0]
    return r

