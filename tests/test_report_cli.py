"""The `embprof` subcommands as the rules call them: outputs written, bad input one line and exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_inputs import LABELS, opcalls_frame, record, write_results

ROOT = Path(__file__).resolve().parents[1]


def run(command: str, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embprof", command, *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess[str], command: str, *words: str) -> None:
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"embprof {command}: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0]


def test_aggregate_merges_sorted_keeps_failed_and_nulls_nan(tmp_path):
    first = tmp_path / "b.json"
    second = tmp_path / "a.json"
    failed = record(LABELS[3], status="failed")
    nan_trc = record(LABELS[0]) | {"trc_eval_ms": float("nan")}
    first.write_text(json.dumps([record(LABELS[2]), failed]))
    second.write_text(json.dumps([nan_trc]))  # Python writes NaN, which strict JSON lacks
    out = tmp_path / "results" / "benchmark_results.json"
    proc = run("aggregate", "--out", out, first, second)
    assert proc.returncode == 0, proc.stderr
    merged = json.loads(out.read_text())
    assert [r["label"] for r in merged] == sorted([LABELS[0], LABELS[2], LABELS[3]])
    assert next(r for r in merged if r["label"] == LABELS[3])["status"] == "failed"
    assert next(r for r in merged if r["label"] == LABELS[0])["trc_eval_ms"] is None


def test_aggregate_refuses_a_label_twice_and_writes_nothing(tmp_path):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_text(json.dumps([record(LABELS[0])]))
    two.write_text(json.dumps([record(LABELS[0])]))
    out = tmp_path / "out.json"
    assert_clean_failure(run("aggregate", "--out", out, one, two), "aggregate", LABELS[0])
    assert sorted(tmp_path.iterdir()) == [one, two]  # no output, no temp file left behind


def test_report_with_a_broken_opcalls_csv_fails_cleanly_and_writes_no_page(tmp_path):
    root = write_results(tmp_path / "results")
    bad = root / "opcalls" / f"opcalls__{LABELS[0]}.csv"
    bad.write_text(bad.read_text().replace("0.41,", "-0.41,", 1))
    out = root / "report"
    proc = run("report", "--results-dir", root)
    assert_clean_failure(proc, "report", "avg_ms_per_iter", "line 2")
    assert not (out / "index.html").exists()


def test_report_without_results_file_fails_cleanly(tmp_path):
    root = write_results(tmp_path / "results")
    (root / "benchmark_results.json").unlink()
    proc = run("report", "--results-dir", root)
    assert_clean_failure(proc, "report", "benchmark_results.json", "no such file")


def test_sunburst_with_a_csv_missing_columns_fails_cleanly(tmp_path):
    csv = tmp_path / f"opcalls__{LABELS[0]}.csv"
    opcalls_frame().drop(columns=["parent_stages"]).to_csv(csv, index=False)
    png, html = tmp_path / "s.png", tmp_path / "s.html"
    assert_clean_failure(run("sunburst", "--opcalls", csv, "--png", png, "--html", html),
                         "sunburst", "parent_stages")
    assert not png.exists() and not html.exists()


@pytest.mark.slow
def test_sunburst_and_latency_scripts_write_png_and_self_contained_html(tmp_path):
    root = write_results(tmp_path / "results")
    label = LABELS[0]
    png, html = root / "sunburst" / f"{label}.png", root / "sunburst" / f"{label}.html"
    proc = run("sunburst", "--opcalls", root / "opcalls" / f"opcalls__{label}.csv", "--png", png, "--html", html)
    assert proc.returncode == 0, proc.stderr
    page = html.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<script src" not in page and page.count('class="legend"') == 2
    assert "CPU leaf operators stand in for kernels" in page

    png, html = root / "plots" / "latency.png", root / "plots" / "latency.html"
    proc = run("latency-plot", "--results", root / "benchmark_results.json", "--png", png, "--html", html)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'data-figure="latency-plot"' in html.read_text()
