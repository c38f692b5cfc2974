"""Static export: one browser for a batch of figures, sizes kept, clear errors without a browser."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path

import plotly.graph_objects as go
import pytest
from report_inputs import opcalls_frame

from embprof.errors import ExportError
from embprof.plots import export
from embprof.plots.export import PngJob, export_pngs, find_browser

ROOT = Path(__file__).resolve().parents[1]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_a_batch_of_figures_is_written_in_one_session_at_their_layout_size(tmp_path):
    figs = [
        go.Figure(go.Bar(x=["a", "b"], y=[1, i]), layout=dict(width=400 + 100 * i, height=300))
        for i in range(3)
    ]
    jobs = [PngJob(fig, tmp_path / "sub" / f"f{i}.png") for i, fig in enumerate(figs)]
    jobs.append(PngJob(figs[0], tmp_path / "scaled.png", scale=2.0))
    export_pngs(jobs)
    assert [png_size(j.path) for j in jobs] == [(400, 300), (500, 300), (600, 300), (800, 600)]
    assert [p.name for p in (tmp_path / "sub").iterdir() if p.name.startswith(".")] == []


def test_nothing_to_export_needs_no_browser(monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    export_pngs([])


def test_a_wrong_browser_path_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "chromium"))
    with pytest.raises(ExportError, match="BROWSER_PATH=.* is not an executable file"):
        find_browser()
    monkeypatch.delenv("BROWSER_PATH")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ExportError, match="no Chromium found"):
        find_browser()


def test_sunburst_script_without_a_browser_fails_cleanly_and_writes_nothing(tmp_path):
    csv = tmp_path / "opcalls__T2_totalB512_D16_sgd_gpu_pool=none_cap=4K.csv"
    opcalls_frame().to_csv(csv, index=False)
    png, html = tmp_path / "s.png", tmp_path / "s.html"
    proc = subprocess.run(
        [sys.executable, "-m", "embprof", "sunburst",
         "--opcalls", str(csv), "--png", str(png), "--html", str(html)],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "BROWSER_PATH": str(tmp_path / "no-chromium")},
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"embprof sunburst: error: BROWSER_PATH='{tmp_path / 'no-chromium'}' is not an executable file"
    assert not png.exists() and not html.exists()


@pytest.mark.slow
def test_a_browser_that_never_answers_is_one_clear_error_and_leaves_no_process(monkeypatch, tmp_path):
    """Once, Chromium died under kaleido in a SLURM job and the step waited for ever: now it has a deadline."""
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\nexec sleep 600\n")
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER_PATH", str(browser))
    monkeypatch.setattr(export, "STARTUP_S", 3.0)
    monkeypatch.setattr(export, "RENDER_TIMEOUT_S", 1.0)
    png = tmp_path / "f.png"
    start = time.monotonic()
    with pytest.raises(ExportError, match=r"^static export failed 2 times: the browser \(.*chromium\) gave no figure within 4 s$"):
        export_pngs([PngJob(go.Figure(), png)])
    assert time.monotonic() - start < 60
    assert not png.exists()
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert left == [], left
