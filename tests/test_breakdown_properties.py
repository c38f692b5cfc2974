"""Property tests: random traces in the real export schema against the brute-force reference.

Random nesting on several threads of two processes (whose correlation ids
overlap: the join must stay within a process), threads that open no context
of their own (as PyTorch's autograd thread: their work takes the context the
process's other threads hold, or none where those disagree), CUDA graphs (several kernels
under one launch), orphan kernels with no runtime row, copies and memsets,
ranges of another NVTX domain and start/end ranges that must be ignored,
equal timestamps everywhere.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_breakdown_reference import assert_matches, expected, nested, raw_from_sqlite

from embprof.trace import TraceError, run_breakdown
from embprof.trace.categories import load_categories
from embprof.trace.kineto import leaf_mask
from embprof.trace.synth import write_export

PIDS = (281487442182144, 281487458959360)
LABELS = ("T2_totalB8_D4_sgd_gpu_pool=none_cap=1K", "T4_totalB16_D8_adam_caching_pool=sum_cap=2K")
STAGES = ("DynamicEmbeddingFunction.forward", "dynamicemb_prefetch", "helper")
OPS = ("op:cache_lookup", "op:storage_find", "op:reduce_grads")
KERNELS = ("gather_kernel", "DeviceRadixSortOnesweepKernel", "my_unwrapped_kernel", "vectorized_elementwise_kernel")
CATS = load_categories()


def _layout_name(rng: np.random.Generator, depth: int, follow: float, bare: bool) -> str:
    if bare:  # a thread that opens no context: stages and ops only
        return str(rng.choice([*STAGES, *OPS, "internal"]))
    pool = [*LABELS, "nsys_iter_0", "nsys_iter_1", "dyn", "trc", "nv", "forward", "backward", *STAGES, *OPS, "internal"]
    if rng.random() > follow:
        return str(rng.choice(pool))
    by_depth = [LABELS, ("nsys_iter_0", "nsys_iter_1", "nsys_iter_2"), ("dyn", "trc", "nv"), ("forward", "backward")]
    if depth < len(by_depth):
        return str(rng.choice(by_depth[depth]))
    return str(rng.choice([*STAGES, *OPS, *OPS, "internal"]))


def build(path: Path, seed: int, n_threads: int, steps: int, follow: float, in_start_order: bool = False) -> None:
    """A random export; ``in_start_order``: every table's rows sorted by start, as Nsight Systems
    writes them (else thread after thread)."""
    rng = np.random.default_rng(seed)
    strings = {i + 1: k for i, k in enumerate(KERNELS)}
    nvtx, runtime, kernels, copies, sets = [], [], [], [], []
    corr = {pid: 0 for pid in PIDS}
    for th in range(n_threads):
        pid = PIDS[th % 2]
        gtid = pid + 100 + th
        bare = th >= 2 and rng.random() < 0.5
        t = int(rng.integers(0, 20))
        stack: list[int] = []
        for _ in range(steps):
            t += int(rng.choice([0, 0, 1, 2, 7]))
            action = rng.choice(["push", "pop", "launch"], p=[0.35, 0.25, 0.4])
            if action == "push":
                stack.append(len(nvtx))
                nvtx.append([t, None, 59, _layout_name(rng, len(stack) - 1, follow, bare), gtid, 0])
                if rng.random() < 0.1:  # CCCL's domain and a start/end range: both ignored
                    nvtx.append([t, t + 5, 59, "cub::DeviceRadixSort", gtid, 1])
                    nvtx.append([t, t + 50, 60, "op:not_a_stack_range", gtid, 0])
            elif action == "pop" and stack:
                nvtx[stack.pop()][1] = t
            else:
                corr[pid] += 1
                c = corr[pid]
                if rng.random() > 0.1:  # else an orphan: its launch fell outside the capture
                    runtime.append((t, t + 3, gtid, c))
                what = rng.choice(["kernel", "graph", "memcpy", "memset"], p=[0.6, 0.15, 0.15, 0.1])
                n = int(rng.integers(2, 5)) if what == "graph" else 1
                # A graph's kernels never start at the same time on one stream: no record repeats another.
                for start in rng.choice(40, size=n, replace=False).tolist():
                    s = t + start
                    row = (s, s + int(rng.integers(0, 30)), c, pid)
                    if what in ("kernel", "graph"):
                        kernels.append((*row, int(rng.integers(1, len(KERNELS) + 1)), 1 if what == "graph" else None))
                    elif what == "memcpy":
                        copies.append((*row, int(rng.choice([1, 2, 8]))))
                    else:
                        sets.append(row)
        while stack:
            t += 1
            nvtx[stack.pop()][1] = t

    if in_start_order:
        for rows in (nvtx, runtime, kernels, copies, sets):
            rows.sort(key=lambda r: r[0])

    def cols(rows, names):
        return {n: [r[i] for r in rows] for i, n in enumerate(names)}

    tables = {
        "CUPTI_ACTIVITY_KIND_RUNTIME": {**cols(runtime, ("start", "end", "globalTid", "correlationId")), "nameId": [1] * len(runtime)},
        "CUPTI_ACTIVITY_KIND_KERNEL": {
            **cols(kernels, ("start", "end", "correlationId", "globalPid", "nameId", "graphNodeId")),
            "streamId": [7] * len(kernels), "gridId": list(range(len(kernels))),
        },
        "NVTX_EVENTS": cols(nvtx, ("start", "end", "eventType", "text", "globalTid", "domainId")),
    }
    if copies:
        tables["CUPTI_ACTIVITY_KIND_MEMCPY"] = {**cols(copies, ("start", "end", "correlationId", "globalPid", "copyKind")), "streamId": [7] * len(copies)}
    if sets:
        tables["CUPTI_ACTIVITY_KIND_MEMSET"] = {**cols(sets, ("start", "end", "correlationId", "globalPid")), "streamId": [7] * len(sets)}
    write_export(path, strings, tables)


# What `build` is asked for: the random traces of every test that breaks exports down.
TRACES = {
    "seed": st.integers(0, 2**32 - 1),
    "n_threads": st.integers(1, 5),
    "steps": st.integers(1, 80),
    "follow": st.sampled_from([0.7, 0.95, 1.0]),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**TRACES)
def test_random_traces_match_reference(tmp_path, seed, n_threads, steps, follow):
    path = tmp_path / f"rand{seed}.sqlite"
    build(path, seed, n_threads, steps, follow)
    raw = raw_from_sqlite(path)
    for layout in ("default", "any"):
        ambiguous: list[int] = []
        want = expected([raw], layout, CATS.of, ambiguous)
        if not want or all(not e.rows for e in want.values()):
            with pytest.raises(TraceError):
                run_breakdown([path], layout=layout)
            continue
        got = run_breakdown([path], layout=layout)
        assert_matches(got, {k: v for k, v in want.items() if v.rows})
        for lb in got.values():
            assert lb.dropped_unlaunched == raw.dropped
            assert lb.dropped_ambiguous == ambiguous[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=40))
def test_leaf_mask_matches_pairwise_nesting(intervals):
    """Nested intervals built by a stack per thread; a leaf has nothing inside it."""
    rows, stacks = [], {}
    for thread, start, length in sorted(intervals, key=lambda x: (x[1], -x[2])):
        stack = stacks.setdefault(thread, [])
        while stack and stack[-1] <= start:
            stack.pop()
        if stack and start + length > stack[-1]:
            continue  # would cross an open interval
        rows.append((thread, start, length))
        stack.append(start + length)
    rows.reverse()  # any input order
    th = np.array([r[0] for r in rows])
    st_ = np.array([r[1] for r in rows])
    en = st_ + np.array([r[2] for r in rows])
    got = leaf_mask(th, st_, en)
    for i in range(len(rows)):
        inside = [
            j for j in range(len(rows))
            if j != i and th[j] == th[i] and nested(st_[i], en[i], i, st_[j], en[j], j)
        ]
        assert got[i] == (not inside), (i, rows)
