"""The breakdown on real profiler output, compared with the brute-force reference."""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_breakdown_reference import assert_matches, expected, raw_from_kineto, raw_from_sqlite

from embprof.cli import main as embprof
from embprof.report.crosscheck import (
    TOLERANCE,
    crosscheck,
    crosscheck_markdown,
    ours_per_op,
    read_nsys_breakdown,
    read_nvtx_kern_sum,
)
from embprof.results.opcalls import COLUMNS as CSV_COLUMNS
from embprof.results.opcalls import read_opcalls as read_opcalls_csv
from embprof.results.samples import read_samples
from embprof.trace import TraceError, breakdown, run_breakdown, write_outputs
from embprof.trace.categories import load_categories
from embprof.trace.names import short_kernel_name

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
H200 = DATA / "nsys" / "h200_torch_nvtx_nsys2025.3.sqlite"
H200_REP = DATA / "nsys" / "h200_torch_nvtx_nsys2025.3.nsys-rep"
H100X2 = DATA / "nsys" / "nsysai_h100_2gpu_nsys2026.2.sqlite"
RTX = DATA / "nsys" / "nsysai_rtx3080_nsys2026.1.sqlite"
HTA = DATA / "kineto" / "hta_torchrec_dlrm_a100_rank3.json.gz"
LABEL = "T3_totalB12_D8_sgd_caching_pool=none_cap=1K"
CATS = load_categories()


def run_cli(*args: str | Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`embprof breakdown` in a process of its own, as the rule runs it."""
    command = [sys.executable, "-m", "embprof", "breakdown", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def main(argv: list[str]) -> int:
    """`embprof breakdown` in this process, where a fresh interpreter adds nothing."""
    return embprof(["breakdown", *argv])


# ---- real traces against the reference ----

@pytest.mark.parametrize("path", [H200, H100X2], ids=["h200-nsys2025.3", "h100x2-nsys2026.2"])
def test_nsys_fixtures_layout_any(path):
    raw = raw_from_sqlite(path)
    results = run_breakdown([path], layout="any")
    assert_matches(results, expected([raw], "any", CATS.of))
    assert results[raw.stem].dropped_unlaunched == raw.dropped


def test_two_gpu_fixture_reports_dropped_kernels(tmp_path):
    raw = raw_from_sqlite(H100X2)
    assert 0.3 < raw.dropped / (raw.dropped + len(raw.work)) < 0.7  # about half lost their launch
    proc = run_cli(H100X2, "--layout", "any", "--out-dir", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"dropped {raw.dropped} kernel/copy record(s)" in proc.stderr
    info = json.loads((tmp_path / "opcalls__nsysai_h100_2gpu_nsys2026.2.busy.json").read_text())
    assert info["dropped_unlaunched"] == raw.dropped


@pytest.mark.slow
def test_kineto_fixture_layout_any():
    raw = raw_from_kineto(HTA)
    assert_matches(run_breakdown([HTA], layout="any"), expected([raw], "any", CATS.of))


def test_short_names_match_nsys_on_every_fixture_kernel():
    pairs = set()
    for path in (H200, H100X2, RTX):
        with sqlite3.connect(path) as conn:
            pairs |= set(conn.execute(
                "SELECT s.value, d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                "JOIN StringIds d ON d.id = k.demangledName"
            ))
    assert len(pairs) > 40
    assert [(s, d) for s, d in pairs if short_kernel_name(d) != s] == []


def benchmark_layout_variant(tmp_path: Path, name: str = "ours.sqlite") -> Path:
    """The H200 export with our range layout around its iterations (built, never edited in place)."""
    path = tmp_path / name
    shutil.copy(H200, path)
    path.chmod(0o644)
    with sqlite3.connect(path) as conn:
        tid, first, last = conn.execute(
            "SELECT globalTid, min(start), max(end) FROM NVTX_EVENTS WHERE domainId = 0 AND text LIKE 'iter_%'"
        ).fetchone()
        conn.execute("UPDATE NVTX_EVENTS SET text = 'nsys_' || text WHERE text LIKE 'iter_%'")
        rows = conn.execute("SELECT start, end, text FROM NVTX_EVENTS WHERE text LIKE 'nsys_iter_%'").fetchall()
        add = [(first - 10, last + 10, LABEL)]
        for s, e, text in rows:
            backend = "dyn" if text != "nsys_iter_2" else "trc"
            add += [(s + 1, e - 1, backend), (s + 2, e - 2, "forward" if text != "nsys_iter_1" else "backward")]
        conn.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
            [(s, e, t, tid) for s, e, t in add],
        )
    return path


def test_default_layout_on_real_kernels(tmp_path):
    path = benchmark_layout_variant(tmp_path)
    results = run_breakdown([path])
    assert_matches(results, expected([raw_from_sqlite(path)], "default", CATS.of))
    rows = results[LABEL].rows
    assert results[LABEL].num_iters == 3
    assert set(rows["backend"]) == {"dyn", "trc"}
    ops = rows[rows["fallback_category"] == ""]
    assert set(ops["op"]) == {"matmul", "unique"}  # the CCCL domain's ranges inside unique are ignored
    assert not rows["parent_stages"].str.contains("cub::").any()


def test_traces_of_one_label_merge(tmp_path):
    one = benchmark_layout_variant(tmp_path, "a.sqlite")
    two = benchmark_layout_variant(tmp_path, "b.sqlite")
    single = run_breakdown([one])[LABEL]
    merged = run_breakdown([one, two], merge=True)[LABEL]
    assert merged.num_iters == 2 * single.num_iters
    assert_matches({LABEL: merged}, expected([raw_from_sqlite(one), raw_from_sqlite(two)], "default", CATS.of))
    pd.testing.assert_series_equal(merged.rows["avg_ms_per_iter"], single.rows["avg_ms_per_iter"])
    assert merged.busy_ms_per_iter == pytest.approx(single.busy_ms_per_iter)
    # Not on purpose (issue 34, case 4): a second trace of a config, or one file twice, is refused.
    with pytest.raises(TraceError, match=f"{two}: config {LABEL} is also in {one}: one trace per config"):
        run_breakdown([one, two])
    with pytest.raises(TraceError, match=r"is given twice \(also as "):
        run_breakdown([one, tmp_path / ".." / tmp_path.name / "a.sqlite"], merge=True)


@pytest.mark.slow
def test_cpu_only_torch_profiler_trace(tmp_path):
    """A real CPU profile of our range layout: leaf operators stand in for kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from dynemb.ranges import emit_range, op_range

    a = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof, emit_range(LABEL):
        for i in range(3):
            with emit_range(f"nsys_iter_{i}"):
                for backend in ("dyn", "trc"):
                    with emit_range(backend), emit_range("forward"):
                        with emit_range("DynamicEmbeddingFunction.forward"), op_range("cache_lookup"):
                            torch.unique(a @ a)
                        (a + 1).sum()
    trace = tmp_path / f"{LABEL}.kineto.json.gz"
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    subprocess.run(["gzip", "-c", str(tmp_path / "t.json")], stdout=trace.open("wb"), check=True)

    results = run_breakdown([trace])
    assert_matches(results, expected([raw_from_kineto(trace)], "default", CATS.of))
    lb = results[LABEL]
    assert lb.time_source == "cpu-leaf-ops"
    assert "cache_lookup" in set(lb.rows["op"])
    assert (lb.rows["parent_stages"] == "DynamicEmbeddingFunction.forward").any()


# ---- the CSV and the command line ----

def test_cli_writes_csv_samples_and_sidecar(tmp_path):
    path = benchmark_layout_variant(tmp_path)
    out = tmp_path / "out"
    proc = run_cli(path, "--out-dir", out)
    assert proc.returncode == 0, proc.stderr
    csv = out / f"opcalls__{LABEL}.csv"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [csv.name, f"opcalls__{LABEL}.busy.json", f"opcalls__{LABEL}.samples.csv"])
    assert csv.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)
    # One number per cell; each row's samples, one line per iteration, average to its ms per iteration.
    samples = read_samples(out / f"opcalls__{LABEL}.samples.csv")
    per_row = samples.groupby(["backend", "phase", "parent_stages", "op"], sort=False)["ms"]
    assert (per_row.size() == 3).all() and set(samples["iteration"]) == {0, 1, 2}
    rows = read_opcalls_csv(csv).set_index(["backend", "phase", "parent_stages", "op"])["avg_ms_per_iter"]
    assert per_row.mean().to_numpy() == pytest.approx(rows.loc[per_row.mean().index].to_numpy(), rel=1e-5)
    df = read_opcalls_csv(csv)
    want = breakdown([path])[LABEL]
    pd.testing.assert_frame_equal(df, want, check_dtype=False, rtol=1e-8)
    key = df[["backend", "phase"]].apply(tuple, axis=1).tolist()
    assert key == sorted(key)
    for _, g in df.groupby(["backend", "phase"]):
        assert g["avg_ms_per_iter"].is_monotonic_decreasing
    for names in df["kernel_names"]:
        assert names.split(";") == sorted(set(names.split(";")))
    info = json.loads((out / f"opcalls__{LABEL}.busy.json").read_text())
    assert info["time_source"] == "gpu-kernels" and info["num_iters"] == 3
    for backend, g in df.groupby("backend"):
        # Kernels of one stream never overlap, so rows add up to the busy time exactly.
        assert g["avg_ms_per_iter"].sum() == pytest.approx(info["busy_ms_per_iter"][backend], rel=1e-6)


def test_label_is_sanitized_in_the_file_name(tmp_path):
    path = tmp_path / "odd name (1).sqlite"
    shutil.copy(H200, path)
    assert main([str(path), "--layout", "any", "--out-dir", str(tmp_path / "o")]) == 0
    assert sorted(p.name for p in (tmp_path / "o").glob("*.csv")) == ["opcalls__odd_name__1_.csv", "opcalls__odd_name__1_.samples.csv"]


def fake_nsys(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "nsys"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return exe


def test_nsys_rep_is_exported_with_the_given_nsys(tmp_path):
    # Stand-in for `nsys export`: checks the arguments it is given, writes the matching export.
    exe = fake_nsys(tmp_path, (
        'out=""; while [ $# -gt 0 ]; do case "$1" in --output) out="$2"; shift;; esac; shift; done\n'
        f'[ -n "$out" ] || exit 3\ncp "{H200}" "$out"'
    ))
    assert main([str(H200_REP), "--layout", "any", "--nsys", str(exe), "--out-dir", str(tmp_path / "o")]) == 0
    got = read_opcalls_csv(tmp_path / "o" / "opcalls__h200_torch_nvtx_nsys2025.3.csv")
    pd.testing.assert_frame_equal(got, breakdown([H200], layout="any")["h200_torch_nvtx_nsys2025.3"], check_dtype=False, rtol=1e-8)


# ---- bad input: one line naming the file, exit 1, nothing written ----

def _copy(tmp_path: Path, src: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copy(src, dst)
    dst.chmod(0o644)
    return dst


def _edit(path: Path, *sql: str) -> Path:
    with sqlite3.connect(path) as conn:
        for s in sql:
            conn.execute(s)
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _truncate(tmp_path: Path, src: Path, name: str) -> Path:
    dst = tmp_path / name
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


@functools.lru_cache(maxsize=1)
def _hta_events() -> str:
    """The real Kineto fixture's profiler window and its first events of each category (the reader
    stops at the first bad value, so a small copy is as good as the whole)."""
    events = json.loads(gzip.decompress(HTA.read_bytes()))["traceEvents"]
    kept: dict[str, list] = {}
    for event in events:
        if event.get("ph") == "X" and len(kept.setdefault(event.get("cat"), [])) < 500:
            kept[event.get("cat")].append(event)
    return json.dumps([e for cat in kept.values() for e in cat])


def _kineto(path: Path, cat: str, **changes: object) -> Path:
    """The fixture's events with the first complete event of ``cat`` changed."""
    events = json.loads(_hta_events())
    next(e for e in events if e.get("cat") == cat).update(changes)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _far_end(cat: str) -> float:
    """A duration that ends the first ``cat`` event a second after the profiler stopped."""
    events = json.loads(_hta_events())
    window, first = (next(e for e in events if e.get("cat") == c) for c in ("Trace", cat))
    return window["ts"] + window["dur"] - first["ts"] + 1e6


_FIRST = "rowid = (SELECT min(rowid) FROM {})"
_FIRST_DYN = "text = 'dyn' AND start = (SELECT min(start) FROM NVTX_EVENTS WHERE text = 'dyn')"
BAD = {
    "directory": (lambda t: t, "not a file"),
    "missing": (lambda t: t / "nope.sqlite", "no such file"),
    "empty": (lambda t: _write(t / "e.json", b""), "empty file"),
    "not a trace": (lambda t: _write(t / "x.bin", b"\x00\x01binary"), "not an Nsight Systems SQLite export"),
    "truncated sqlite": (lambda t: _truncate(t, H100X2, "t.sqlite"), "unreadable SQLite export"),
    "truncated json.gz": (lambda t: _truncate(t, HTA, "t.json.gz"), "truncated or corrupt gzip"),
    "truncated json": (lambda t: _write(t / "t.json", b'{"traceEvents": [{"ph": "X",'), "not valid JSON"),
    "json without events": (lambda t: _write(t / "o.json", b'{"a": 1}'), "without a traceEvents list"),
    "no kernel table": (lambda t: _edit(_copy(t, H200, "k.sqlite"), "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL"), "no CUPTI_ACTIVITY_KIND_KERNEL table"),
    "no runtime table": (lambda t: _edit(_copy(t, H200, "r.sqlite"), "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"), "no CUPTI_ACTIVITY_KIND_RUNTIME table"),
    "no NVTX table": (lambda t: RTX, "no NVTX_EVENTS table"),
    "no runtime rows": (lambda t: _edit(_copy(t, H200, "n.sqlite"), "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME"), "has a runtime call"),
    "range never closed": (
        lambda t: _edit(_copy(t, H200, "u.sqlite"), "UPDATE NVTX_EVENTS SET end = NULL WHERE text = 'op:unique' AND start = (SELECT min(start) FROM NVTX_EVENTS WHERE text = 'op:unique')"),
        "1 NVTX range(s) never closed",
    ),
    "no config ranges": (lambda t: H200, "no config ranges"),
    # Malformed values: SQLite keeps whatever a row was given, JSON any number or none.
    "text kernel time": (
        lambda t: _edit(benchmark_layout_variant(t, "k.sqlite"), "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE " + _FIRST.format("CUPTI_ACTIVITY_KIND_KERNEL")),
        "table CUPTI_ACTIVITY_KIND_KERNEL: column start holds 'soon', not an integer",
    ),
    "real runtime time": (
        lambda t: _edit(benchmark_layout_variant(t, "r.sqlite"), "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 1.5e300 WHERE rowid = 6"),
        "table CUPTI_ACTIVITY_KIND_RUNTIME: column start holds 1.5e+300, not an integer",
    ),
    "text range end": (
        lambda t: _edit(benchmark_layout_variant(t, "e.sqlite"), f"UPDATE NVTX_EVENTS SET end = 'x' WHERE {_FIRST_DYN}"),
        "table NVTX_EVENTS: column end holds 'x', not an integer",
    ),
    "range of negative duration": (
        lambda t: _edit(benchmark_layout_variant(t, "n.sqlite"), f"UPDATE NVTX_EVENTS SET end = start - 5 WHERE {_FIRST_DYN}"),
        "1 NVTX range(s) end before they start (a negative duration)",
    ),
    "range that never ends": (
        lambda t: _edit(benchmark_layout_variant(t, "f.sqlite"), f"UPDATE NVTX_EVENTS SET end = 9223372036854775807 WHERE {_FIRST_DYN}"),
        "1 NVTX range(s) end after the capture did (130995061 ns): they never ended",
    ),
    "kernel of negative duration": (
        lambda t: _edit(benchmark_layout_variant(t, "g.sqlite"), "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE " + _FIRST.format("CUPTI_ACTIVITY_KIND_KERNEL")),
        "1 kernel/copy record(s) end before they start (a negative duration)",
    ),
    "text kineto time": (lambda t: _kineto(t / "ts.json", "kernel", ts="soon"),
                         "1 event(s) without a finite, numeric ts and dur (first: kernel ts='soon'"),
    "infinite kineto range": (lambda t: _kineto(t / "inf.json", "user_annotation", dur=float("inf")),
                              "without a finite, numeric ts and dur (first: user_annotation"),
    "negative kineto duration": (lambda t: _kineto(t / "neg.json", "cpu_op", dur=-3), "1 event(s) with a negative duration"),
    "kineto range that never ends": (
        lambda t: _kineto(t / "late.json", "user_annotation", dur=_far_end("user_annotation")),
        "1 user_annotation range(s) end after the profiler stopped: they never ended",
    ),
    "deeply nested json": (lambda t: _write(t / "deep.json", b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
                           "JSON nested too deeply"),
    # Well-formed, and yet wrong numbers without a word before issue 34 (case 4) or a traceback (case 6).
    "every kernel record twice": (
        lambda t: _edit(benchmark_layout_variant(t, "d.sqlite"), "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"),
        "kernel/copy record(s) repeat another exactly (same process, correlation id, name, start and end)",
    ),
    "one copy record twice": (
        lambda t: _edit(benchmark_layout_variant(t, "c.sqlite"), "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE " + _FIRST.format("CUPTI_ACTIVITY_KIND_MEMCPY")),
        "1 kernel/copy record(s) repeat another exactly",
    ),
    "colliding correlation ids": (
        lambda t: _edit(benchmark_layout_variant(t, "x.sqlite"), "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = (SELECT min(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME) WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME)"),
        "1 runtime call(s) share their correlation id with another call of their process",
    ),
    "op range without a name": (
        lambda t: _edit(benchmark_layout_variant(t, "o.sqlite"), "UPDATE NVTX_EVENTS SET text = 'op:' WHERE text = 'op:unique'"),
        "op: range(s) have no name after 'op:'",
    ),
    "the same trace under another name": (lambda t: benchmark_layout_variant(t, "again.sqlite"), f"config {LABEL} is also in "),
    "no StringIds table": (lambda t: _edit(benchmark_layout_variant(t, "s.sqlite"), "DROP TABLE StringIds"), "no StringIds table"),
    "range name not UTF-8": (
        lambda t: _edit(benchmark_layout_variant(t, "u8.sqlite"), "UPDATE NVTX_EVENTS SET text = CAST(X'6f703a75ff6e' AS TEXT) WHERE text = 'op:unique'"),
        "table NVTX_EVENTS: a range name is not UTF-8 text",
    ),
    "kernel name not UTF-8": (
        lambda t: _edit(benchmark_layout_variant(t, "k8.sqlite"), "UPDATE StringIds SET value = CAST(X'6bff' AS TEXT) WHERE id = (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)"),
        "holds b'k\\xff', not UTF-8 text",
    ),
    "kineto name with a lone surrogate": (lambda t: _kineto(t / "sur.json", "kernel", name="gemm\ud800"),
                                          "event name 'gemm\\ud800' is not text (surrogates not allowed)"),
    "no nsys for .nsys-rep": (lambda t: H200_REP, "needs nsys to export it"),
    "nsys export fails": (lambda t: H200_REP, "nsys export failed (exit 2): boom"),
}


@pytest.fixture(scope="module")
def good_trace(tmp_path_factory) -> Path:
    return benchmark_layout_variant(tmp_path_factory.mktemp("good"))


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(tmp_path, case, good_trace, monkeypatch, capsys):
    make, message = BAD[case]
    src = tmp_path / "src"
    src.mkdir()
    path = make(src)
    out = tmp_path / "out"
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    extra: list = []
    if case == "nsys export fails":
        extra = ["--nsys", str(fake_nsys(tmp_path, "echo boom >&2; exit 2"))]
    # A good trace beside the bad one: still nothing is written.
    assert main([str(good_trace), str(path), "--out-dir", str(out), *extra]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"embprof breakdown: error: {path}: ")
    assert message in lines[0]
    assert not out.exists() or list(out.iterdir()) == []


def test_bad_input_exits_1_without_traceback(tmp_path):
    proc = run_cli(_truncate(tmp_path, H100X2, "t.sqlite"), "--out-dir", tmp_path / "out")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "unreadable SQLite export" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_range_name_that_is_not_utf8_is_one_line_through_sqlite3_too(tmp_path):
    from embprof.trace.attribute import attribute
    from embprof.trace.nsys import NsysSource

    path = _edit(benchmark_layout_variant(tmp_path, "u8.sqlite"),
                 "UPDATE NVTX_EVENTS SET text = CAST(X'6f703a75ff6e' AS TEXT) WHERE text = 'op:unique'")
    slow = NsysSource(path, use_adbc=False)
    with pytest.raises(TraceError, match="table NVTX_EVENTS: a range name is not UTF-8 text"):
        attribute(slow)
    slow.close()


def test_a_csv_and_its_sidecar_are_replaced_together_or_not_at_all(tmp_path, good_trace, capsys):
    """Issue 34, case 4: a sidecar that cannot be written left the CSV replaced, the pair disagreeing."""
    out = tmp_path / "out"
    assert main([str(good_trace), "--out-dir", str(out)]) == 0
    csv, busy = out / f"opcalls__{LABEL}.csv", out / f"opcalls__{LABEL}.busy.json"
    samples = out / f"opcalls__{LABEL}.samples.csv"
    before = {p: p.read_bytes() for p in (csv, busy, samples)}
    busy.unlink()
    busy.mkdir()  # the sidecar's place is taken: it cannot be replaced
    (csv.parent / "other.csv").write_text("kept\n")
    short = benchmark_layout_variant(tmp_path, "short.sqlite")
    _edit(short, "DELETE FROM NVTX_EVENTS WHERE text = 'nsys_iter_2'")  # other numbers than the CSV's
    assert main([str(short), "--out-dir", str(out)]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert csv.read_bytes() == before[csv] and samples.read_bytes() == before[samples] and busy.is_dir()
    assert sorted(p.name for p in out.iterdir()) == sorted([csv.name, samples.name, busy.name, "other.csv"])  # no temporaries
    busy.rmdir()
    assert main([str(short), "--out-dir", str(out)]) == 0
    assert csv.read_bytes() != before[csv] and busy.is_file()


@pytest.mark.parametrize("path", [H200, H100X2], ids=["h200", "h100x2"])
def test_sqlite3_fallback_reads_what_adbc_reads(path):
    """Without the ADBC driver the same queries run through sqlite3, with the same result."""
    from dataclasses import astuple

    from embprof.trace.attribute import attribute
    from embprof.trace.nsys import NsysSource

    fast, slow = NsysSource(path), NsysSource(path, use_adbc=False)
    streams = [(fast.ranges(), slow.ranges()), (fast.calls(), slow.calls()), *zip(fast.work(), slow.work(), strict=True)]
    for a, b in streams:
        for x, y in zip(list(a), list(b), strict=True):
            for u, v in zip(astuple(x), astuple(y), strict=True):
                assert list(u.tolist() if hasattr(u, "tolist") else u.to_pylist()) == list(
                    v.tolist() if hasattr(v, "tolist") else v.to_pylist())
    assert attribute(fast, "any") == attribute(slow, "any")
    fast.close()
    slow.close()


def test_bad_categories_file(tmp_path, good_trace, capsys):
    cats = tmp_path / "cats.yaml"
    cats.write_text("categories:\n  - name: x\n    patterns: ['(unclosed']\n")
    out = tmp_path / "out"
    assert main([str(good_trace), "--categories", str(cats), "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"embprof breakdown: error: {cats}: bad kernel categories file")
    assert not out.exists()


def test_binary_categories_file(tmp_path, good_trace, capsys):
    cats = _write(tmp_path / "cats.yaml", b"\xff\xfe\x00\x01categories\x80")
    assert main([str(good_trace), "--categories", str(cats), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"embprof breakdown: error: {cats}: not a text (UTF-8) file; expected kernel categories in YAML"]
    assert not (tmp_path / "out").exists()


def test_labels_that_share_a_file_name_or_overflow_it_write_nothing(tmp_path, good_trace, capsys):
    """Layout any names a trace's config after its file: two names that sanitize alike, and a name
    the file system takes for the trace but not with the CSV's prefix and suffixes."""
    one, two = _copy(tmp_path, H200, "a b.sqlite"), _copy(tmp_path, H200, "a_b.sqlite")
    out = tmp_path / "out"
    assert main([str(one), str(two), "--layout", "any", "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"embprof breakdown: error: {two}: labels 'a b' and 'a_b' both become the file name opcalls__a_b.csv"]
    long = _copy(tmp_path, H200, "x" * 245 + ".sqlite")
    assert main([str(one), str(long), "--layout", "any", "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"embprof breakdown: error: {long}: config label 'xxxx")
    assert "is too long for a file name (266 bytes; this file system takes 255)" in err[0]
    assert not out.exists() or list(out.iterdir()) == []


def test_categories_pick_the_first_matching_pattern(tmp_path):
    cats = tmp_path / "cats.yaml"
    cats.write_text("unmatched: other\ncategories:\n  - name: sorting\n    patterns: ['Radix']\n"
                    "  - name: everything\n    patterns: ['.']\n")
    rows = breakdown([H200], layout="any", categories=cats)["h200_torch_nvtx_nsys2025.3"]
    fallback = rows[rows["fallback_category"] != ""]
    assert set(fallback["fallback_category"]) == {"everything"}  # memcpy/memset rows; kernels sit in ranges
    assert load_categories(cats).of("DeviceRadixSortOnesweepKernel") == "sorting"
    assert load_categories(cats).of("") == "other"


TBE_THREADS = DATA / "nsys" / "h200_tbe_autograd_threads_nsys2025.3.sqlite"
TBE_LABEL = "T2_totalB32_D16_sgd_gpu_pool=none_cap=1000"


def _sql(path: Path, query: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


_ENCLOSING = """
    SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
    WHERE EXISTS (
        SELECT 1 FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE n.eventType = 59 AND coalesce(n.domainId, 0) = 0 AND n.globalTid = r.globalTid
          AND coalesce(s.value, n.text) = '{phase}' AND n.start <= r.start AND r.start < n.end)
"""


def test_backward_counts_only_kernels_launched_in_a_whole_context():
    """Real H200 trace: `backward` ran with autograd multithreading off, `backward_mt` with it on.
    `backward_mt` is no phase, so no thread holds a whole context there: its worker's kernels are not counted."""
    (result,) = run_breakdown([TBE_THREADS]).values()
    rows = result.rows
    backward_kernels = _sql(TBE_THREADS, _ENCLOSING.format(phase="backward"))[0][0]
    worker_launched = _sql(TBE_THREADS, """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        WHERE r.globalTid NOT IN (SELECT globalTid FROM NVTX_EVENTS WHERE eventType = 59)""")[0][0]
    assert worker_launched > 0  # the default engine did move CUDA backward to another thread
    counted = rows.loc[(rows["phase"] == "backward") & (rows["op"] != "memset"), "calls_per_iter"].sum()
    assert counted * result.num_iters == backward_kernels
    assert set(rows["phase"]) == {"forward", "backward"}


def test_autograd_worker_kernels_take_the_main_threads_context(tmp_path):
    """The same real trace with `backward_mt` named `backward`: the CUDA backward that PyTorch's engine
    launched from its worker thread (no ranges of its own) takes the context the main thread holds."""
    trace = _edit(_copy(tmp_path, TBE_THREADS, "mt.sqlite"),
                  "UPDATE StringIds SET value = 'backward' WHERE value = 'backward_mt'",
                  "UPDATE NVTX_EVENTS SET text = 'backward' WHERE text = 'backward_mt'")
    (result,) = run_breakdown([trace]).values()
    assert_matches({TBE_LABEL: result}, expected([raw_from_sqlite(trace)], "default", CATS.of))
    rows = result.rows
    # every kernel launched, on any thread of the process, while a main-thread `backward` was open
    in_backward = _sql(trace, """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        WHERE EXISTS (
            SELECT 1 FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
            WHERE n.eventType = 59 AND coalesce(n.domainId, 0) = 0
              AND n.globalTid / 16777216 = r.globalTid / 16777216
              AND coalesce(s.value, n.text) = 'backward' AND n.start <= r.start AND r.start < n.end)""")[0][0]
    worker_launched = _sql(trace, """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        WHERE r.globalTid NOT IN (SELECT globalTid FROM NVTX_EVENTS WHERE eventType = 59)""")[0][0]
    counted = rows.loc[(rows["phase"] == "backward") & (rows["op"] != "memset"), "calls_per_iter"].sum()
    assert worker_launched > 0
    assert counted * result.num_iters == in_backward
    assert result.dropped_ambiguous == 0


NVIDIA = DATA / "nsys" / "h200_nvidia_testgpu_sgd_nsys2025.3.sqlite"
NVIDIA_LABEL = "T10_totalB1048570_D128_sgd_gpu_pool=none_cap=1677721"
CROSSCHECK = DATA / "crosscheck"


def test_nvidias_backward_on_the_autograd_thread_is_counted_as_its_own_tools_count_it():
    """A real trace of NVIDIA's suite (TestGpu sgd, 3 iterations, H200): its backward's op ranges sit on
    PyTorch's autograd thread, which holds no context of its own; per op the breakdown equals Nsight
    Systems' nvtx_kern_sum and NVIDIA's nsys_breakdown.py, both run on this export on the GPU host."""
    (result,) = run_breakdown([NVIDIA]).values()
    assert result.label == NVIDIA_LABEL and result.num_iters == 3
    assert_matches({NVIDIA_LABEL: result}, expected([raw_from_sqlite(NVIDIA)], "default", CATS.of))
    on_bare_thread = {name for (name,) in _sql(NVIDIA, """
        SELECT DISTINCT coalesce(s.value, n.text) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE n.eventType = 59 AND n.globalTid NOT IN (
            SELECT globalTid FROM NVTX_EVENTS m LEFT JOIN StringIds t ON t.id = m.textId
            WHERE coalesce(t.value, m.text) LIKE 'T10_totalB%')""")}
    assert {"op:reduce_grads", "op:optimizer_update_fused"} <= on_bare_thread
    rows = result.rows
    backward = set(rows.loc[(rows["backend"] == "dyn") & (rows["phase"] == "backward"), "op"])
    assert {"reduce_grads", "optimizer_update_fused"} <= backward
    inclusive, innermost = ours_per_op(rows)
    by_range = read_nvtx_kern_sum(CROSSCHECK / "h200_nvidia_testgpu_sgd_nvtx_kern_sum.csv")
    by_script = read_nsys_breakdown(CROSSCHECK / "h200_nvidia_testgpu_sgd_nsys_breakdown.csv")
    assert set(by_range) == set(inclusive) and set(by_script) == set(innermost)
    for op, ms in by_range.items():
        assert inclusive[op] == pytest.approx(ms, rel=TOLERANCE), op
    for op, ms in by_script.items():
        assert innermost[op] == pytest.approx(ms, rel=TOLERANCE, abs=1e-4), op  # it writes 4 decimals
    assert result.dropped_ambiguous == 0


def test_the_crosscheck_names_an_op_that_disagrees(tmp_path):
    """The check can fail: a copy of NVIDIA's script's output with one op's time 1% off."""
    results = tmp_path / "results"
    (results / "crosscheck").mkdir(parents=True)
    (results / "opcalls").mkdir()
    write_outputs(run_breakdown([NVIDIA]), results / "opcalls")
    shutil.copy(CROSSCHECK / "h200_nvidia_testgpu_sgd_nvtx_kern_sum.csv",
                results / "crosscheck" / f"nvtx_kern_sum__{NVIDIA_LABEL}.csv")
    script = pd.read_csv(CROSSCHECK / "h200_nvidia_testgpu_sgd_nsys_breakdown.csv", keep_default_na=False)
    script.loc[script["op"] == "reduce_grads", "total_ms"] *= 1.01
    script.to_csv(results / "crosscheck" / f"nsys_breakdown__{NVIDIA_LABEL}.csv", index=False)
    table = crosscheck(results, {NVIDIA_LABEL: read_opcalls_csv(results / "opcalls" / f"opcalls__{NVIDIA_LABEL}.csv")})
    assert list(table.loc[~table["agrees"], "op"]) == ["reduce_grads"]
    assert "| reduce_grads |" in crosscheck_markdown(table) and "**no**" in crosscheck_markdown(table)


def test_kineto_ranges_split_across_threads(tmp_path):
    """A torch profiler trace keeps each thread's annotations apart too: the autograd thread's op takes
    the main thread's context, and where a second thread holds another context nothing is counted."""
    main, grad, rival = 11, 12, 13

    def span(tid: int, name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}

    def launch(tid: int, ts: float, corr: int, kernel: str, at: float) -> list[dict]:
        return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": tid, "ts": ts,
                 "dur": 1, "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": at, "dur": 5,
                 "args": {"correlation": corr}}]

    events = [
        span(main, LABEL, 0, 200), span(main, "nsys_iter_0", 1, 190), span(main, "dyn", 2, 180),
        span(main, "forward", 3, 20), span(main, "backward", 30, 150),
        span(grad, "DynamicEmbeddingFunction.backward", 40, 100), span(grad, "op:reduce_grads", 41, 30),
        span(rival, "T4_totalB16_D8_adam_caching_pool=sum_cap=2K", 100, 20), span(rival, "nsys_iter_0", 100, 20),
        span(rival, "trc", 100, 20),
        span(rival, "forward", 100, 20),
        *launch(main, 5, 1, "gather_kernel", 300), *launch(grad, 42, 2, "reduce_kernel", 310),
        *launch(grad, 80, 3, "update_kernel", 320), *launch(grad, 105, 4, "clashing_kernel", 330),
    ]
    trace = tmp_path / "split.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    ambiguous: list[int] = []
    want = expected([raw_from_kineto(trace)], "default", CATS.of, ambiguous)
    (result,) = run_breakdown([trace]).values()
    assert_matches({LABEL: result}, {k: v for k, v in want.items() if v.rows})
    rows = result.rows.set_index(["phase", "parent_stages", "op"])
    assert rows.loc[("backward", "DynamicEmbeddingFunction.backward", "reduce_grads"), "calls_per_iter"] == 1
    assert rows.loc[("backward", "DynamicEmbeddingFunction.backward", "update_kernel"), "calls_per_iter"] == 1
    assert "clashing_kernel" not in set(result.rows["op"])
    assert result.dropped_ambiguous == ambiguous[0] == 1


@pytest.mark.parametrize("device_lag_ns", [0, 50_000_000])
def test_sidecar_has_backend_time_until_its_device_work_is_done(tmp_path, device_lag_ns):
    """A backend range's time per iteration runs until its launched work ends, as an unprofiled timing does.

    The real trace syncs inside its ranges; a copy with every kernel 50 ms later shows work
    launched in a range and finishing after it (an asynchronous backend).
    """
    trace = _edit(_copy(tmp_path, TBE_THREADS, "lagged.sqlite"),
                  f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + {device_lag_ns}, end = end + {device_lag_ns}")
    (result,) = run_breakdown([trace]).values()
    span = """
        SELECT sum(max(n.end, coalesce((
            SELECT max(w.end) FROM (SELECT correlationId, end FROM CUPTI_ACTIVITY_KIND_KERNEL
                                    UNION ALL SELECT correlationId, end FROM CUPTI_ACTIVITY_KIND_MEMSET) w
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = w.correlationId
            WHERE r.globalTid = n.globalTid AND n.start <= r.start AND r.start < n.end), 0)) - n.start),
            sum(n.end - n.start)
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE n.eventType = 59 AND coalesce(s.value, n.text) = 'trc'"""
    until_done_ns, host_ns = _sql(trace, span)[0]
    assert result.label == TBE_LABEL and result.num_iters == 2
    assert result.busy.range_ms_per_iter == pytest.approx({"trc": until_done_ns / 1e6 / 2})
    assert result.busy.range_until_device_done
    assert (until_done_ns > host_ns + device_lag_ns) if device_lag_ns else (until_done_ns >= host_ns)
    assert result.range_ms_per_iter["trc"] > result.busy_ms_per_iter["trc"]


MEMORY_KINDS_SQL = ("pageable", "pinned", "device", "array", "managed", "device static", "managed static", "unknown")


@pytest.mark.parametrize("path", [H200, H100X2], ids=["h200-nsys2025.3", "h100x2-nsys2026.2"])
def test_copy_bytes_and_memory_kinds_are_the_exports(path: Path) -> None:
    """Per memory kind, the bytes the per-op rows of copies and memsets hold are those of the
    export's memcpy and memset tables whose calls the trace has (a work item without its runtime
    call is counted nowhere)."""
    (result,) = run_breakdown([path], layout="any").values()
    rows = result.rows
    conn = sqlite3.connect(path)
    launched = """JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = w.correlationId
                  AND r.globalTid / 16777216 = w.globalPid / 16777216"""
    want: dict[str, float] = {}
    for src, dst, nbytes in conn.execute(
        f"SELECT w.srcKind, w.dstKind, sum(w.bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY w {launched} GROUP BY 1, 2"
    ):
        want[f"{MEMORY_KINDS_SQL[src]}->{MEMORY_KINDS_SQL[dst]}"] = float(nbytes)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for kind, nbytes in conn.execute(
            f"SELECT w.memKind, sum(w.bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET w {launched} GROUP BY 1"
        ):
            want[MEMORY_KINDS_SQL[kind]] = want.get(MEMORY_KINDS_SQL[kind], 0.0) + float(nbytes)
    copies = rows[rows["copy_bytes_per_iter"].notna()]
    got = (copies["copy_bytes_per_iter"] * result.num_iters).groupby(copies["memory_kinds"]).sum().to_dict()
    assert got == pytest.approx(want)
    kernels = rows[~rows["op"].str.startswith(("memcpy", "memset"))]
    assert kernels["copy_bytes_per_iter"].isna().all() and (kernels["memory_kinds"] == "").all()
    # the sidecar's top kernels: the costliest names first, a name's time never more than the rows'
    (top,) = result.top_kernels.values()
    assert 0 < len(top) <= 10
    assert [t.ms_per_iter for t in top] == sorted((t.ms_per_iter for t in top), reverse=True)
    assert sum(t.ms_per_iter for t in top) <= rows["avg_ms_per_iter"].sum() * (1 + 1e-9)
    for t in top:
        holding = rows[rows["kernel_names"].str.split(";").map(lambda names, n=t.kernel: n in names)]
        assert t.ms_per_iter <= holding["avg_ms_per_iter"].sum() * (1 + 1e-9)
        assert t.mean_us == pytest.approx(t.ms_per_iter * 1e3 / t.calls_per_iter)


def test_kineto_copies_carry_their_bytes_and_kinds() -> None:
    (result,) = run_breakdown([HTA], layout="any").values()
    rows = result.rows
    events = [e for e in json.loads(gzip.open(HTA).read())["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    copies = rows[rows["copy_bytes_per_iter"].notna()]
    got = (copies["copy_bytes_per_iter"] * result.num_iters).groupby(copies["memory_kinds"]).sum()
    assert set(got.index) == {"pinned->device", "device->pageable", "device->device", "device"}
    assert got.sum() <= sum(e["args"]["bytes"] for e in events)  # all but copies whose launch the trace lacks
    assert got["pinned->device"] > 0
