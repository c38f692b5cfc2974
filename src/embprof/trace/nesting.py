"""Range trees and point stabbing, vectorized over all threads at once.

Push/pop ranges of one thread nest strictly. Sorted by (thread, start,
-end), the ranges of a thread are in depth-first order, so a range's parent
is the nearest range before it that is still open at its start
(:func:`enclosing`, a few vectorized passes for all ranges at once).

The innermost range of a class (config, op, ...) above each range comes from
a running maximum over the depth-first order, the last range of that class
started so far, corrected where that one had already closed. The innermost
range holding a time ``t`` is found from the last range started at or before
``t``, hopping up parents while it has ended.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .codes import dense_codes


@dataclass
class Forest:
    """Ranges in (thread, start, -end) order with their tree structure."""

    order: np.ndarray  # index into the reader's arrays, per sorted position
    thread: np.ndarray  # dense thread code (int32)
    start: np.ndarray
    end: np.ndarray
    parent: np.ndarray  # sorted position of the parent, -1 at a root
    inner: np.ndarray  # positions of the ranges that hold another (the others are leaves)
    start_key: np.ndarray  # thread * span + (start - t0), ascending
    threads: np.ndarray  # original thread id per dense code, ascending
    span: int
    t0: int

    def __len__(self) -> int:
        return len(self.end)


def enclosing(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range of a depth-first sequence (sorted by thread, start, -end): the nearest earlier range
    of its thread still open at its start, -1 where none.

    A leaf (the next range does not start inside it) is no one's parent, so the
    parents of the other ranges come from the same question asked of them alone,
    and a leaf's parent is the last of them started before it, or one of its
    ancestors where that one has closed. Each round drops the leaves; where few
    are left to drop (deep chains), pointer jumping settles the rest.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, np.int64)
    one_thread = thread[0] == thread[-1]  # sorted by thread: all of one
    new_thread = np.zeros(n, bool) if one_thread else _run_starts(thread)
    new_thread[0] = True
    leaf = np.ones(n, bool)
    leaf[:-1] = start[1:] >= end[:-1]
    if not one_thread:
        leaf[:-1] |= new_thread[1:]
    inner = np.flatnonzero(~leaf)
    if len(inner) > 0.75 * n:
        return _pointer_jumping(new_thread, start, end)
    parent = np.full(n, -1, np.int64)
    if len(inner) == 0:
        return parent
    up = enclosing(thread[inner], start[inner], end[inner])
    parent[inner] = np.where(up >= 0, inner[np.maximum(up, 0)], -1)
    before = np.where(leaf, -1, np.arange(n, dtype=np.int64))
    np.maximum.accumulate(before, out=before)
    leaves = np.flatnonzero(leaf)
    cand = before[leaves - 1]  # the last inner range started before each leaf
    if leaves[0] == 0:
        cand[0] = -1
    if not one_thread:
        cand[cand < _thread_first(new_thread)[leaves]] = -1
    closed = np.flatnonzero((cand >= 0) & (end[np.maximum(cand, 0)] <= start[leaves]))
    while len(closed):
        cand[closed] = parent[cand[closed]]
        c = cand[closed]
        closed = closed[(c >= 0) & (end[np.maximum(c, 0)] <= start[leaves[closed]])]
    parent[leaves] = cand
    return parent


def thread_first(thread: np.ndarray) -> np.ndarray:
    """Per position of a sequence sorted by thread: the first position of its thread's block."""
    return _thread_first(_run_starts(thread)) if len(thread) else np.zeros(0, np.int64)


def _thread_first(new_thread: np.ndarray) -> np.ndarray:
    first = np.flatnonzero(new_thread)
    length = np.empty_like(first)
    length[:-1] = first[1:] - first[:-1]
    length[-1:] = len(new_thread) - first[-1:]
    return np.repeat(first, length)


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins (``values`` not empty). Not ``np.r_``: its index
    tricks cost more than the comparison on a chunk, and these run hundreds of times a trace."""
    out = np.empty(len(values), bool)
    out[0] = True
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out


def _pointer_jumping(new_thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each range guesses the range before it; while the guess has closed, it takes the guess's own
    current guess (whatever that skips closed before the guesser started, so before this range too)."""
    n = len(start)
    guess = np.arange(-1, n - 1, dtype=np.int64)
    guess[new_thread] = -1
    todo = np.flatnonzero(guess >= 0)
    while len(todo):
        todo = todo[end[guess[todo]] <= start[todo]]
        guess[todo] = guess[guess[todo]]
        todo = todo[guess[todo] >= 0]
    return guess


def build_forest(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> Forest:
    nonempty = end > start  # empty ranges hold nothing
    if nonempty.all():
        keep, s, e, th = None, start, end, thread
    else:
        keep = np.flatnonzero(nonempty)
        s, e, th = start[keep], end[keep], thread[keep]
    codes, threads = dense_codes(th)
    t0 = int(s.min()) if len(s) else 0
    span = (int(e.max()) - t0 + 2) if len(s) else 2
    if (len(threads) + 1) * span >= (1 << 62):
        raise OverflowError("trace spans too long a time across too many threads")
    sk = codes * span
    sk += s
    sk -= t0
    srt = np.argsort(sk, kind="stable")  # exports list ranges nearly in order: cheap
    sks = sk[srt]
    if len(sks) > 1 and (sks[1:] == sks[:-1]).any():
        srt = np.lexsort((-e, sk))  # equal starts: the longer range is the outer one
        sks = sk[srt]
    tc = codes[srt].astype(np.int32)
    s, e = s[srt], e[srt]
    order = srt if keep is None else keep[srt]
    parent = enclosing(tc, s, e)
    holds = np.zeros(len(s) + 1, bool)
    holds[parent + 1] = True  # parent -1 marks slot 0
    return Forest(order=order, thread=tc, start=s, end=e, parent=parent, inner=np.flatnonzero(holds[1:]),
                  start_key=sks, threads=threads, span=span, t0=t0)


def innermost_of(thread: np.ndarray, start: np.ndarray, end: np.ndarray, member: np.ndarray,
                 thread_first: np.ndarray | None = None) -> np.ndarray:
    """Per range of a depth-first sequence: the innermost range at or above it (itself included) with
    ``member`` true, else -1. ``thread_first``: :func:`thread_first` of the sequence, where known."""
    n = len(start)
    idx = np.arange(n, dtype=np.int64)
    last = np.where(member, idx, -1)
    np.maximum.accumulate(last, out=last)
    if n and thread[0] != thread[-1]:  # sorted by thread: more than one
        if thread_first is None:
            thread_first = _thread_first(_run_starts(thread))
        last[last < thread_first] = -1  # another thread's
    closed = np.flatnonzero((last >= 0) & (end[np.maximum(last, 0)] <= start))
    if len(closed):
        # The last one started has closed: the answer is among its ancestors of the class.
        members = np.flatnonzero(member)
        up = enclosing(thread[members], start[members], end[members])
        class_parent = np.full(n, -1, np.int64)
        class_parent[members] = np.where(up >= 0, members[np.maximum(up, 0)], -1)
        while len(closed):
            last[closed] = class_parent[last[closed]]
            c = last[closed]
            closed = closed[(c >= 0) & (end[np.maximum(c, 0)] <= start[closed])]
    return last


def innermost(forest: Forest, p_thread: np.ndarray, p_time: np.ndarray) -> np.ndarray:
    """Sorted position of the innermost range with start <= t < end on the point's thread, else -1."""
    r = np.full(len(p_time), -1, dtype=np.int64)
    if len(forest) == 0:
        return r
    tc = _thread_codes(forest.threads, p_thread)
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


def _thread_codes(threads: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each value's index among ``threads`` (sorted, distinct), -1 where it is none of them. A trace
    has a few threads: a comparison per thread beats coding the values first (once per call chunk)."""
    if len(threads) <= 4:
        out = np.full(len(values), -1, np.int64)
        for k, t in enumerate(threads.tolist()):
            out[values == t] = k
        return out
    pos = np.searchsorted(threads, values)
    np.minimum(pos, len(threads) - 1, out=pos)
    return np.where(threads[pos] == values, pos, -1)
