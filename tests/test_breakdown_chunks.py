"""The breakdown read in chunks gives what it gives reading whole tables, and what the reference gives.

Random exports in start order (as Nsight Systems writes them) exercise the
sweep that carries open ranges from chunk to chunk; exports out of order
exercise its fallback to whole tables. The data structures under it (range
parents, innermost ranges of a class, the table of calls) are checked
against brute force on their own.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_breakdown_properties import CATS, TRACES, build
from test_breakdown_reference import assert_matches, expected, raw_from_sqlite

from embprof.trace import TraceError, run_breakdown
from embprof.trace import sweep as sweep_module
from embprof.trace.calls import CallStore, CollidingCalls
from embprof.trace.model import CallRows
from embprof.trace.nesting import enclosing, innermost_of

CHUNKS = (1, 2, 5, 16, None)


def _same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for label, x in a.items():
        y = b[label]
        for column, values in x.columns.items():
            # NaN (a kernel's copy bytes) equals NaN here
            assert pd.Series(list(values)).equals(pd.Series(list(y.columns[column]))), (label, column)
        assert np.array_equal(x.samples_ns, y.samples_ns), label
        assert x.busy == y.busy


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**TRACES, in_start_order=st.booleans())
def test_chunked_reads_match_whole_tables_and_reference(tmp_path, seed, n_threads, steps, follow, in_start_order):
    path = tmp_path / f"rand{seed}.sqlite"
    build(path, seed, n_threads, steps, follow, in_start_order)
    raw = raw_from_sqlite(path)
    for layout in ("default", "any"):
        want = {k: v for k, v in expected([raw], layout, CATS.of).items() if v.rows}
        if not want:
            for chunk in CHUNKS:
                with pytest.raises(TraceError):
                    run_breakdown([path], layout=layout, chunk_rows=chunk)
            continue
        whole = run_breakdown([path], layout=layout, chunk_rows=None)
        assert_matches(whole, want)
        for chunk in CHUNKS[:-1]:
            _same(run_breakdown([path], layout=layout, chunk_rows=chunk), whole)


def test_a_trace_in_start_order_is_swept_once_and_one_out_of_order_twice(tmp_path, monkeypatch):
    """In order, chunks are swept as they come; out of order, the sweep notices and reads whole tables."""
    calls = []
    real = sweep_module.sweep

    def counting(*args, **kwargs):
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr("embprof.trace.attribute.sweep", counting)
    threads = threading.active_count()
    for in_order, swept in ((True, [2]), (False, [2, None])):
        path = tmp_path / f"t{in_order}.sqlite"
        build(path, 7, n_threads=3, steps=200, follow=1.0, in_start_order=in_order)
        calls.clear()
        run_breakdown([path], layout="any", chunk_rows=2)
        assert calls == swept
        assert threading.active_count() == threads  # the streams abandoned half-way stopped their readers


def _nested(rng: np.random.Generator, n_threads: int, n: int) -> tuple[np.ndarray, ...]:
    """Strictly nested ranges per thread, sorted by (thread, start, -end) as the forest sorts them."""
    rows = []
    for th in range(n_threads):
        t, stack = 0, []
        for _ in range(n):
            t += int(rng.integers(0, 3))
            if stack and rng.random() < 0.45:
                s = stack.pop()
                rows.append((th, s, max(t, s + 1)))
                t = max(t, s + 1)
            else:
                stack.append(t)
        while stack:
            t += 1
            s = stack.pop()
            rows.append((th, s, max(t, s + 1)))
            t = max(t, s + 1)
    rows.sort(key=lambda r: (r[0], r[1], -r[2]))
    th, s, e = (np.array(c, np.int64) for c in zip(*rows, strict=True)) if rows else (np.zeros(0, np.int64),) * 3
    return th, s, e


def _brute_parent(th, s, e) -> list[int]:
    out = []
    for i in range(len(s)):
        holders = [j for j in range(i) if th[j] == th[i] and s[j] <= s[i] and e[i] <= e[j]]
        out.append(max(holders) if holders else -1)
    return out


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_threads=st.integers(1, 3), n=st.integers(0, 60), p=st.floats(0.0, 1.0))
def test_parents_and_innermost_of_a_class_match_brute_force(seed, n_threads, n, p):
    rng = np.random.default_rng(seed)
    th, s, e = _nested(rng, n_threads, n)
    parent = _brute_parent(th, s, e)
    assert enclosing(th, s, e).tolist() == parent
    member = rng.random(len(s)) < p
    want = []
    for i in range(len(s)):
        j = i
        while j >= 0 and not member[j]:
            j = parent[j]
        want.append(j)
    assert innermost_of(th, s, e, member).tolist() == want


def test_parents_of_deep_chains_and_long_sibling_runs():
    """The two shapes each method is slow on: a chain 2,000 deep, and 2,000 siblings under one range."""
    n = 2000
    chain = (np.zeros(n, np.int64), np.arange(n, dtype=np.int64), 2 * n - np.arange(n, dtype=np.int64))
    assert enclosing(*chain).tolist() == list(range(-1, n - 1))
    s = np.r_[0, 1 + 2 * np.arange(n)]
    e = np.r_[2 * n + 2, 2 + 2 * np.arange(n)]
    assert enclosing(np.zeros(n + 1, np.int64), s, e).tolist() == [-1] + [0] * n


@settings(max_examples=80, deadline=None)
@given(
    parts=st.lists(
        st.lists(st.tuples(st.integers(0, 1), st.integers(0, 300)), min_size=1, max_size=30),
        min_size=1, max_size=6,
    ),
    probe=st.lists(st.tuples(st.integers(0, 2), st.integers(-1, 310)), max_size=40),
)
def test_call_store_finds_every_call_and_refuses_shared_keys(parts, probe):
    """Dense or sparse, in order or not: every call is found by its key, and two calls of one
    process with one correlation id are refused (which launched a kernel cannot be told)."""
    pids = np.array([10 << 24, 20 << 24, 30 << 24], np.int64)
    store, seen = CallStore(), {}
    n, shared = 0, 0
    for part in parts:
        proc = pids[[p for p, _ in part]]
        corr = np.array([c for _, c in part], np.int64)
        ctx = np.arange(n, n + len(part), dtype=np.int64) % 7 - 1
        span = np.arange(n, n + len(part), dtype=np.int64) % 5 - 1
        store.add(CallRows(process=proc, corr=corr, thread=proc + 1, start=corr), ctx, span)
        for key, c, sp in zip(zip(proc.tolist(), corr.tolist(), strict=True), ctx.tolist(), span.tolist(), strict=True):
            shared += key in seen
            seen.setdefault(key, (c, sp))
        n += len(part)
    if shared:
        with pytest.raises(CollidingCalls) as refused:
            store.finish()
        assert refused.value.count == shared
        return
    store.finish()
    proc = pids[[p for p, _ in probe]] if probe else np.zeros(0, np.int64)
    corr = np.array([c for _, c in probe], np.int64)
    found, ctx, span = store.lookup(proc, corr)
    for i, key in enumerate(zip(proc.tolist(), corr.tolist(), strict=True)):
        if key in seen:
            assert found[i] and (ctx[i], span[i]) == seen[key]
        else:
            assert not found[i]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3000), max_size=200), max_size=40))
def test_key_codes_number_keys_in_order_of_first_sight(batches):
    """KeyCodes (appended, merged into its tail, the tail into the rest) against a dict."""
    from embprof.trace.codes import KeyCodes

    codes, want = KeyCodes(), {}
    for i, batch in enumerate(batches):
        uniq = np.unique(np.array(batch, np.int64) + 100 * i)  # later batches reach past the keys seen
        got = codes.codes_of_distinct(uniq).tolist()
        assert got == [want.setdefault(k, len(want)) for k in uniq.tolist()]
        probe = np.array([-1, *uniq.tolist()], np.int64)
        assert codes.known(probe).tolist() == [-1, *got]
    assert codes.keys.tolist() == list(want) and len(codes) == len(want)
