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
    allt = np.concatenate(threads)
    _, codes = np.unique(allt, return_inverse=True)
    out, pos = [], 0
    for t in threads:
        out.append(codes[pos : pos + len(t)].astype(np.int64))
        pos += len(t)
    return out


def build_forest(r_thread, r_start, r_end, p_thread, p_time) -> tuple[Forest, np.ndarray]:
    """The range forest and the dense thread codes of the points (same code space)."""
    keep = np.flatnonzero(r_end > r_start)  # empty ranges hold nothing
    r_tc, p_tc = _dense_threads(r_thread[keep], p_thread)
    times = [a for a in (r_start[keep], r_end[keep], p_time) if len(a)]
    t0 = int(min(a.min() for a in times)) if times else 0
    span = (int(max(a.max() for a in times)) - t0 + 2) if times else 2
    n_threads = int(max(r_tc.max(initial=0), p_tc.max(initial=0))) + 1
    if n_threads * span >= (1 << 62):
        raise OverflowError("trace spans too long a time across too many threads")

    s, e = r_start[keep], r_end[keep]
    srt = np.lexsort((-e, s, r_tc))
    tc, s, e = r_tc[srt], s[srt], e[srt]
    base = tc * span - t0
    sk, ek = base + s, base + e
    n = len(s)
    pos = np.arange(n, dtype=np.int64)
    first = np.searchsorted(tc, tc, side="left")
    ek_sorted = np.sort(ek)
    ended = np.searchsorted(ek_sorted, sk, side="right") - np.searchsorted(ek_sorted, tc * span, side="left")
    depth = (pos - first) - ended

    parent = np.full(n, -1, dtype=np.int64)
    if n:
        level_key = np.sort(depth * n + pos)
        child = np.flatnonzero(depth > 0)
        q = np.searchsorted(level_key, (depth[child] - 1) * n + child) - 1
        parent[child] = level_key[q] - (depth[child] - 1) * n
    forest = Forest(order=keep[srt], thread=tc, start=s, end=e, depth=depth, parent=parent, start_key=sk, span=span, t0=t0)
    return forest, p_tc


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


def levels(depth: np.ndarray) -> list[np.ndarray]:
    """Sorted positions grouped by depth, shallowest first."""
    if len(depth) == 0:
        return []
    by = np.argsort(depth, kind="stable")
    cuts = np.searchsorted(depth[by], np.arange(1, int(depth.max()) + 1))
    return np.split(by, cuts)
