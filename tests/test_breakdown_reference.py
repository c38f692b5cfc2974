"""Brute-force reference for the breakdown, written apart from the library.

It reads raw rows its own way (SQL joins in SQLite; plain ``json`` for
Kineto) and applies the attribution rule literally, one work item at a time:
collect every range on the launching thread that holds the launch time,
order them outer to inner, classify; where they lack a whole context (config,
iteration, backend, phase), ask every other thread of the process the same
question and take the one context they give, none where two differ. The tests compare the library against
it; the tests in this file check the reference itself on cases small enough
to work out by hand.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
CONFIG_RE = re.compile(r"^T\d+_totalB")
ITER_RE = re.compile(r"^nsys_iter_(\d+)$")
MEMCPY_FALLBACK = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}


@dataclass
class Raw:
    """Ranges: (thread, start, end, name). Work: (thread, launch, start, end, short name, is_kernel)."""

    ranges: list[tuple]
    work: list[tuple]
    dropped: int = 0
    stem: str = ""


@dataclass
class Expected:
    iters: int = 0
    rows: dict = field(default_factory=lambda: defaultdict(lambda: [0, 0, set()]))
    busy: dict = field(default_factory=lambda: defaultdict(list))
    # row key -> {iteration of the label, counted over its traces in order: ns}
    per_iter: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))


def _kind(name: str) -> str:
    if CONFIG_RE.match(name):
        return "config"
    if ITER_RE.match(name):
        return "iter"
    if name in ("dyn", "trc", "nv"):
        return "backend"
    if name in ("forward", "backward"):
        return "phase"
    if name.startswith("op:"):
        return "op"
    return "other"


def process_of(thread) -> object:
    """The process of a thread key: an export's globalTid holds its pid above bit 24; a Kineto key is 'pid/tid'."""
    return thread.split("/")[0] if isinstance(thread, str) else thread // 16777216


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".kineto", ".sqlite", ".nsys-rep"):
        name = name.removesuffix(suffix)
    return name


def raw_from_sqlite(path: Path) -> Raw:
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    copy_kinds = dict(MEMCPY_FALLBACK)
    if "ENUM_CUDA_MEMCPY_OPER" in tables:
        for i, name in conn.execute("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"):
            copy_kinds[i] = name.removeprefix("CUDA_MEMCPY_KIND_").replace("TO", "to").replace("UVM_", "UVM ")
    launched = """JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = w.correlationId
                  AND r.globalTid / 16777216 = w.globalPid / 16777216"""
    work = [
        (tid, ls, s, e, name, True)
        for tid, ls, s, e, name in conn.execute(
            f"SELECT r.globalTid, r.start, w.start, w.end, st.value FROM CUPTI_ACTIVITY_KIND_KERNEL w {launched} "
            "JOIN StringIds st ON st.id = w.shortName"
        )
    ]
    total = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        work += [
            (tid, ls, s, e, f"memcpy {copy_kinds.get(k, k)}", False)
            for tid, ls, s, e, k in conn.execute(
                f"SELECT r.globalTid, r.start, w.start, w.end, w.copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY w {launched}"
            )
        ]
        total += conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        work += [
            (tid, ls, s, e, "memset", False)
            for tid, ls, s, e in conn.execute(
                f"SELECT r.globalTid, r.start, w.start, w.end FROM CUPTI_ACTIVITY_KIND_MEMSET w {launched}"
            )
        ]
        total += conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone()[0]
    ranges = list(conn.execute(
        "SELECT n.globalTid, n.start, n.end, coalesce(s.value, n.text) FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59 AND coalesce(n.domainId, 0) = 0 ORDER BY n.rowid"
    ))
    conn.close()
    return Raw(ranges=ranges, work=work, dropped=total - len(work), stem=_stem(path))


def raw_from_kineto(path: Path) -> Raw:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    cats = {"user_annotation", "cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"}
    xs = [e for e in events if e.get("ph") == "X" and e.get("cat") in cats]
    t0 = min(e["ts"] for e in xs)

    def ns(us: float) -> int:
        return int(np.rint((us - t0) * 1000.0))

    def thread(e: dict) -> str:
        return f"{e['pid']}/{e['tid']}"

    def end(e: dict) -> int:
        return ns(e["ts"]) + int(np.rint(e["dur"] * 1000.0))

    ranges = [(thread(e), ns(e["ts"]), end(e), e["name"]) for e in xs if e["cat"] == "user_annotation"]
    launches = {e["args"]["correlation"]: e for e in xs if e["cat"] in ("cuda_runtime", "cuda_driver")}
    gpu = [e for e in xs if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    if gpu:
        work = []
        for e in gpu:
            launch = launches.get(e["args"].get("correlation"))
            if launch is None:
                continue
            if e["cat"] == "kernel":
                name = demangled_to_short(e["name"])
            elif e["cat"] == "gpu_memset":
                name = "memset"
            else:
                name = "memcpy " + e["name"].split()[1]
            work.append((thread(launch), ns(launch["ts"]), ns(e["ts"]), end(e), name, e["cat"] == "kernel"))
        return Raw(ranges=ranges, work=work, dropped=len(gpu) - len(work), stem=_stem(path))
    ops = [(thread(e), ns(e["ts"]), end(e), e["name"], i) for i, e in enumerate(xs) if e["cat"] == "cpu_op"]
    work = []
    for t, s, en, name, i in ops:
        has_inner = any(
            t2 == t and i2 != i and nested(s, en, i, s2, en2, i2)
            for t2, s2, en2, _, i2 in ops
        )
        if not has_inner:
            work.append((t, s, s, en, name, True))
    return Raw(ranges=ranges, work=work, stem=_stem(path))


def nested(s: int, e: int, i: int, s2: int, e2: int, i2: int) -> bool:
    """Interval 2 lies inside interval 1: starts in [s, e) and ends by e, or is identical and listed later."""
    if s2 == s and e2 == e:
        return i2 > i
    return s <= s2 < e and e2 <= e


def demangled_to_short(name: str) -> str:
    """An independent short form: drop the last balanced (...) and <...> at the end, then scope and return type."""
    def drop_tail(text: str, open_c: str, close_c: str) -> str:
        text = text.strip()
        if not text.endswith(close_c):
            return text
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += text[i] == close_c
            depth -= text[i] == open_c
            if depth == 0:
                return text[:i]
        return text

    base = drop_tail(drop_tail(name, "(", ")"), "<", ">")
    depth, cut = 0, 0
    for i, c in enumerate(base):
        depth += c in "(<["
        depth -= c in ")>]"
        if depth == 0 and (base.startswith("::", i) or c == " "):
            cut = i + (2 if base.startswith("::", i) else 1)
    return base[cut:].replace(":", "") or name


def expected(raws: list[Raw], layout: str, category_of, ambiguous: list[int] | None = None) -> dict[str, Expected]:
    """Per label, what the breakdown must give; ``ambiguous`` (when given) receives, per trace, the work
    dropped because the other threads of its process disagreed on its context."""
    out: dict[str, Expected] = defaultdict(Expected)
    ambiguous = ambiguous if ambiguous is not None else []
    ambiguous[:] = [0] * len(raws)
    before: dict[str, int] = defaultdict(int)  # a label's iterations in earlier traces with its work
    for trace_no, raw in enumerate(raws):
        by_thread = defaultdict(list)
        for order, (t, s, e, name) in enumerate(raw.ranges):
            if e > s:
                by_thread[t].append((s, e, order, name))
        arrays = {
            t: (np.array([r[0] for r in rs]), np.array([r[1] for r in rs]), np.array([r[2] for r in rs]), [r[3] for r in rs])
            for t, rs in by_thread.items()
        }

        def held_at(thread, time, arrays=arrays) -> list[int]:
            if thread not in arrays:
                return []
            starts, ends, order = arrays[thread][:3]
            hold = np.flatnonzero((starts <= time) & (time < ends))
            return hold[np.lexsort((order[hold], -ends[hold], starts[hold]))].tolist()

        # Each iteration range's number among its config's in this trace, by start time.
        iteration_of: dict[tuple, int] = {}
        starts_of: dict[str, list] = defaultdict(list)
        if layout == "any":
            out[raw.stem].iters += 1
        else:
            for t, _rs in by_thread.items():
                s, e, order, names = arrays[t]
                for i, name in enumerate(names):
                    if _kind(name) != "iter":
                        continue
                    outer = [j for j in range(len(names)) if j != i and s[j] <= s[i] and e[i] <= e[j]
                             and (s[j], -e[j], order[j]) < (s[i], -e[i], order[i])]
                    outer.sort(key=lambda j: (s[j], -e[j], order[j]))
                    configs = [names[j] for j in outer if _kind(names[j]) == "config"]
                    if configs:
                        out[configs[-1]].iters += 1
                        starts_of[configs[-1]].append((s[i], t, i))
        here = {label: len(starts) for label, starts in starts_of.items()}
        for starts in starts_of.values():
            iteration_of.update({(t, i): k for k, (_, t, i) in enumerate(sorted(starts, key=lambda x: x[0]))})
        worked = set()

        def context_at(thread, time, held_at=held_at, arrays=arrays, iteration_of=iteration_of):
            """(label, iteration, backend, phase) that the thread's own ranges give at ``time``, or None."""
            held = held_at(thread, time)
            chain = [arrays[thread][3][i] for i in held]
            kinds = [_kind(n) for n in chain]
            found = {k: [n for n, kk in zip(chain, kinds, strict=False) if kk == k] for k in ("config", "iter", "backend", "phase")}
            if not all(found.values()):
                return None
            last = {k: max(i for i, kk in enumerate(kinds) if kk == k) for k in ("config", "iter")}
            if last["config"] > last["iter"]:  # an iteration counts inside its own config only
                return None
            return found["config"][-1], iteration_of[(thread, held[last["iter"]])], found["backend"][-1], found["phase"][-1]

        for thread, launch, start, end, short, is_kernel in raw.work:
            held = held_at(thread, launch)
            chain = [arrays[thread][3][i] for i in held]
            if layout == "any":
                label, backend, phase = raw.stem, "all", "all"
                kinds = ["op"] * len(chain)
                iteration = 0
            else:
                kinds = [_kind(n) for n in chain]
                context = context_at(thread, launch)
                if context is None:  # the process's other threads say, if they agree
                    theirs = {context_at(u, launch) for u in arrays if u != thread and process_of(u) == process_of(thread)}
                    theirs.discard(None)
                    if len(theirs) > 1:
                        ambiguous[trace_no] += 1
                    if len(theirs) != 1:
                        continue
                    context = theirs.pop()
                label, iteration, backend, phase = context
            kept = [(i, n) for i, (n, k) in enumerate(zip(chain, kinds, strict=False)) if k in ("other", "op")]
            ops = [i for i, k in enumerate(kinds) if k == "op"]
            if is_kernel and ops:
                op_name = chain[ops[-1]]
                op = op_name[3:] if layout == "default" else op_name
                stages = [n for i, n in kept if i < ops[-1]]
                category = ""
            else:
                op = short
                stages = [n for i, n in kept if not ops or i <= ops[-1]]
                category = category_of(short)
            key = (backend, phase, "/".join(stages), op, category)
            row = out[label].rows[key]
            row[0] += 1
            row[1] += end - start
            row[2].add(short)
            out[label].per_iter[key][before[label] + iteration] += end - start
            out[label].busy[(backend, trace_no)].append((start, end))  # clocks differ per trace
            worked.add(label)
        for label in worked:
            before[label] += here.get(label, 1 if layout == "any" else 0)
    return out


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


def assert_matches(results: dict, want: dict[str, Expected]) -> None:
    """Library output (label -> LabelBreakdown) equals the reference, row by row."""
    assert sorted(results) == sorted(want)
    for label, exp in want.items():
        lb = results[label]
        assert lb.num_iters == exp.iters, label
        got = {
            (r.backend, r.phase, r.parent_stages, r.op, r.fallback_category): r
            for r in lb.rows.itertuples(index=False)
        }
        assert len(got) == len(lb.rows), "duplicate rows"
        assert set(got) == set(exp.rows), set(got) ^ set(exp.rows)
        for key, (calls, ns, kernels) in exp.rows.items():
            r = got[key]
            assert r.calls_per_iter == pytest.approx(calls / exp.iters, rel=1e-12), key
            assert r.avg_ms_per_iter == pytest.approx(ns / 1e6 / exp.iters, rel=1e-9, abs=1e-12), key
            assert r.total_ms == pytest.approx(ns / 1e6, rel=1e-9, abs=1e-12), key
            assert r.num_iters == exp.iters
            assert r.kernel_names == ";".join(sorted(kernels)), key
        # Per-iteration ms: the same iterations, each with every row's time in it (columns may be
        # numbered in another order where iterations of two threads start at once).
        keys = list(exp.rows)
        at = {k: i for i, k in enumerate(lb.rows[["backend", "phase", "parent_stages", "op", "fallback_category"]]
                                         .itertuples(index=False, name=None))}
        got_iters = [[int(v) for v in lb.samples_ns[at[k]]] for k in keys]
        want_iters = [[int(exp.per_iter[k].get(i, 0)) for i in range(exp.iters)] for k in keys]
        assert sorted(zip(*got_iters, strict=True)) == sorted(zip(*want_iters, strict=True)), label
        busy = defaultdict(int)
        for (backend, _), intervals in exp.busy.items():
            busy[backend] += union_ns(intervals)
        assert set(lb.busy_ms_per_iter) == set(busy)
        for backend, ns in busy.items():
            assert lb.busy_ms_per_iter[backend] == pytest.approx(ns / 1e6 / exp.iters, rel=1e-9)


# ---- the reference checked on hand-sized cases ----

def test_reference_rule_by_hand():
    label = "T1_totalB2_D4_sgd_gpu_pool=none_cap=1K"
    ranges = [
        (1, 0, 100, label), (1, 0, 50, "nsys_iter_0"), (1, 1, 49, "dyn"), (1, 2, 48, "forward"),
        (1, 3, 30, "stageA"), (1, 4, 29, "op:outer"), (1, 5, 20, "op:inner"), (1, 6, 10, "internal"),
        (2, 0, 100, "other-thread"),
    ]
    work = [
        (1, 7, 1000, 1010, "k1", True),     # inside internal -> op inner, stages stageA/op:outer
        (1, 25, 1010, 1030, "k2", True),    # op:outer only -> op outer, stages stageA
        (1, 35, 1020, 1025, "k3", True),    # no op -> fallback under forward
        (1, 8, 1040, 1041, "memset", False),  # own row, op as innermost stage
        (2, 7, 1100, 1200, "k4", True),     # other thread, no context: thread 1's, stages its own
        (1, 60, 1300, 1400, "k5", True),    # outside the iteration
    ]
    got = expected([Raw(ranges, work, stem="x")], "default", lambda n: "cat")[label]
    assert got.iters == 1
    assert dict(got.rows) == {
        ("dyn", "forward", "stageA/op:outer", "inner", ""): [1, 10, {"k1"}],
        ("dyn", "forward", "stageA", "outer", ""): [1, 20, {"k2"}],
        ("dyn", "forward", "", "k3", "cat"): [1, 5, {"k3"}],
        ("dyn", "forward", "stageA/op:outer/op:inner", "memset", "cat"): [1, 1, {"memset"}],
        ("dyn", "forward", "other-thread", "k4", "cat"): [1, 100, {"k4"}],
    }
    assert got.per_iter[("dyn", "forward", "stageA", "outer", "")] == {0: 20}
    assert union_ns(got.busy[("dyn", 0)]) == 10 + 20 + 1 + 100  # k3 [1020,1025) lies inside k2 [1010,1030)


def test_reference_short_names_agree_with_nsys():
    conn = sqlite3.connect(DATA / "nsys" / "h200_torch_nvtx_nsys2025.3.sqlite")
    pairs = conn.execute(
        "SELECT DISTINCT s.value, d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "JOIN StringIds d ON d.id = k.demangledName"
    ).fetchall()
    assert pairs and all(demangled_to_short(d) == s for s, d in pairs)


def test_reference_cross_thread_rule_by_hand():
    """The autograd thread's ops take the main thread's context; two threads that disagree give none;
    a thread of another process lends nothing."""
    label = "T1_totalB2_D4_sgd_gpu_pool=none_cap=1K"
    main, grad, rival, other_process = 1, 2, 3, 1 + 16777216
    ranges = [
        (main, 0, 100, label), (main, 0, 50, "nsys_iter_0"), (main, 1, 49, "dyn"), (main, 20, 48, "backward"),
        (grad, 21, 40, "DynamicEmbeddingFunction.backward"), (grad, 22, 30, "op:reduce_grads"),
        (rival, 35, 45, label), (rival, 35, 45, "nsys_iter_1"), (rival, 35, 45, "trc"), (rival, 35, 45, "forward"),
        (other_process, 0, 100, "op:elsewhere"),
    ]
    work = [
        (grad, 23, 1000, 1010, "k1", True),   # op reduce_grads in dyn/backward of iteration 0
        (grad, 32, 1010, 1015, "k2", True),   # no op: its kernel name, stage from its own thread
        (grad, 36, 1020, 1030, "k3", True),   # main says dyn/backward, rival says trc/forward: dropped
        (grad, 46, 1030, 1031, "k4", True),   # only main holds a context (rival's has ended)
        (other_process, 23, 1040, 1050, "k5", True),  # another process: no context to take
    ]
    ambiguous: list[int] = []
    want = expected([Raw(ranges, work, stem="x")], "default", lambda n: "cat", ambiguous)
    assert dict(want[label].rows) == {
        ("dyn", "backward", "DynamicEmbeddingFunction.backward", "reduce_grads", ""): [1, 10, {"k1"}],
        ("dyn", "backward", "DynamicEmbeddingFunction.backward", "k2", "cat"): [1, 5, {"k2"}],
        ("dyn", "backward", "", "k4", "cat"): [1, 1, {"k4"}],
    }
    assert ambiguous == [1]
