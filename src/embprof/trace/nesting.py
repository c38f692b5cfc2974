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
    thread: np.ndarray  # dense thread code (int32)
    end: np.ndarray
    parent: np.ndarray  # sorted position of the parent, -1 at a root (int32)
    start_key: np.ndarray  # thread * span + (start - t0), ascending
    levels: list[np.ndarray]  # sorted positions by depth, shallowest first
    threads: pd.Index  # original thread id per dense code
    span: int
    t0: int

    def __len__(self) -> int:
        return len(self.end)


def levels(depth: np.ndarray) -> list[np.ndarray]:
    """Sorted positions grouped by depth, shallowest first, ascending within a level."""
    if len(depth) == 0:
        return []
    small = depth.astype(np.int16 if depth.max() < np.iinfo(np.int16).max else np.int64)
    by = np.argsort(small, kind="stable").astype(np.int32)  # a radix sort for 16-bit keys
    cuts = np.searchsorted(small[by], np.arange(1, int(depth.max()) + 1))
    return np.split(by, cuts)


def build_forest(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> Forest:
    # Written to keep few full-length temporaries alive at once: this runs on the largest table.
    nonempty = end > start  # empty ranges hold nothing
    if nonempty.all():
        keep, s, e, th = None, start, end, thread
    else:
        keep = np.flatnonzero(nonempty)
        s, e, th = start[keep], end[keep], thread[keep]
    del nonempty
    codes, threads = pd.factorize(th)
    t0 = int(s.min()) if len(s) else 0
    span = (int(e.max()) - t0 + 2) if len(s) else 2
    if (len(threads) + 1) * span >= (1 << 62):
        raise OverflowError("trace spans too long a time across too many threads")

    sk = codes.astype(np.int64, copy=False)
    sk *= span
    sk += s
    sk -= t0
    del codes
    srt = np.argsort(sk, kind="stable")  # exports list ranges nearly in order: cheap
    sks = sk[srt]
    if len(sks) > 1 and (sks[1:] == sks[:-1]).any():
        srt = np.lexsort((-e, sk))  # equal starts: the longer range is the outer one
        sks = sk[srt]
    del sk
    tc = (sks // span).astype(np.int32)
    e = e[srt]
    order = (srt if keep is None else keep[srt]).astype(np.int32)
    del srt, keep
    n = len(e)
    # Per thread: ranges started before each one, minus those already ended at its start.
    ek = e - t0
    ek += tc.astype(np.int64) * span
    ek.sort(kind="stable")
    thread_first = np.flatnonzero(np.r_[True, tc[1:] != tc[:-1]]) if n else np.empty(0, np.int64)
    first_start = np.zeros(len(threads), dtype=np.int64)
    first_start[tc[thread_first]] = thread_first
    first_end = np.zeros(len(threads), dtype=np.int64)
    first_end[tc[thread_first]] = np.searchsorted(ek, tc[thread_first].astype(np.int64) * span, side="left")
    depth = np.searchsorted(ek, sks, side="right")
    del ek
    depth -= first_end[tc]
    np.subtract(np.arange(n, dtype=np.int64) - first_start[tc], depth, out=depth)

    by_level = levels(depth)
    del depth
    parent = np.full(n, -1, dtype=np.int32)
    for upper, lower in zip(by_level, by_level[1:], strict=False):
        # The parent is the last range one level up that starts before the child.
        parent[lower] = upper[np.searchsorted(upper, lower) - 1]
    return Forest(
        order=order, thread=tc, end=e, parent=parent, start_key=sks,
        levels=by_level, threads=pd.Index(threads), span=span, t0=t0,
    )


def innermost(forest: Forest, p_thread: np.ndarray, p_time: np.ndarray) -> np.ndarray:
    """Sorted position of the innermost range with start <= t < end on the point's thread, else -1."""
    r = np.full(len(p_time), -1, dtype=np.int64)
    if len(forest) == 0:
        return r
    tc = forest.threads.get_indexer(p_thread)
    rel = p_time - forest.t0
    cand = np.flatnonzero((tc >= 0) & (rel >= 0) & (rel < forest.span))
    key = tc[cand] * forest.span + rel[cand]
    pos = np.searchsorted(forest.start_key, key, side="right") - 1
    ok = (pos >= 0) & (forest.thread[np.maximum(pos, 0)] == tc[cand])
    r[cand[ok]] = pos[ok]
    todo = cand[ok]
    while len(todo):
        rr = r[todo]
        out = forest.end[rr] <= p_time[todo]
        todo = todo[out]
        r[todo] = forest.parent[rr[out]]
        todo = todo[r[todo] >= 0]
    return r
