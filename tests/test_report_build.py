"""Report assembly: every section, failed configs with their log tail, deltas, figures, summary."""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import pytest
from report_inputs import FAILED_TAIL, LABELS, report_inputs, write_results

from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import plotly_js
from embprof.plots.latency import latency_figure
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
from embprof.report.build import build_report
from embprof.results.opcalls import read_opcalls
from embprof.results.records import read_results

# Builds real reports and renders PNGs through kaleido (a few seconds each).
pytestmark = pytest.mark.slow

FAILED = LABELS[3]
STALE = "T1_totalB64_D8_sgd_gpu_pool=none_cap=1K"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"



@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder after the sunburst and latency steps; one sunburst PNG is missing."""
    root = write_results(tmp_path_factory.mktemp("run") / "results")
    jobs = [
        PngJob(
            latency_figure(read_results(root / "benchmark_results.json")),
            root / "plots" / "latency.png",
        )
    ]
    for label in LABELS[:3]:
        frame = read_opcalls(root / "opcalls" / f"opcalls__{label}.csv")
        fig = sunburst_figure(frame, assign_letter_codes(frame), sunburst_title(label))
        jobs.append(PngJob(fig, root / "sunburst" / f"{label}.png"))
    export_pngs(jobs)
    return root


@pytest.fixture(scope="module")
def report(results) -> Path:
    out = results / "report"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "sunburst__T1_gone.png").write_bytes(PNG_MAGIC)  # from an older run
    stale = dict(json.loads((results / "status" / f"{FAILED}.json").read_text()), label=STALE)
    (results / "status" / f"{STALE}.json").write_text(
        json.dumps(stale)
    )  # a config no longer selected
    return build_report(report_inputs(results, out))


def section(html: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', html, re.S)
    assert match, f"no section {section_id}"
    return match.group(1)


def test_every_section_is_present_and_plotly_js_is_inlined_once(report):
    html = report.read_text()
    for section_id in ("summary", "latency", "top-ops", "breakdowns", "failed", "environment"):
        section(html, section_id)
    assert 'id="changes"' not in html  # no --compare-to
    assert html.count(plotly_js()) == 1
    ours = html.replace(plotly_js(), "")
    assert "<script src" not in ours and "https://" not in ours
    # Relative links inside the folder only, but for each config's own files of the results folder
    # (trace, per-op CSV, logs): relative too, and only to files that are there.
    files = "".join(re.findall(r'<p class="links">(.*?)</p>', ours, re.S))
    assert not re.search(r'(href|src)="(/|https?:|\.\./)', re.sub(r'<p class="links">.*?</p>', "", ours, flags=re.S))
    hrefs = re.findall(r'href="([^"]+)"', files)
    assert hrefs and all((report.parent / unquote(unescape(h))).is_file() for h in hrefs)
    assert all(not h.startswith(("/", "http")) for h in hrefs)


def test_headline_has_every_config_and_dyn_over_trc_ratios(report, results):
    head = section(report.read_text(), "summary")
    rows = re.findall(r"<tr>(.*?)</tr>", head, re.S)[1:]
    assert len(rows) == len(LABELS)
    records = {r["label"]: r for r in read_results(results / "benchmark_results.json")}
    gpu = records[LABELS[0]]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", next(r for r in rows if LABELS[0] in r))
    assert cells[2] == f"{gpu['dyn_train_ms']:.3f}"
    assert cells[3] == f"{gpu['timings']['dyn_train_ms']['spread_pct']:.1f}%" == "7.0%"  # 0.97..1.04
    assert cells[6] == f"{gpu['dyn_train_ms'] / gpu['trc_train_ms']:.2f}×"
    assert cells[12] == "5"  # repeats
    assert cells[13] == f"{gpu['avg_n_unique']:,.0f}"
    failed_row = next(r for r in rows if FAILED in r)
    assert "failed: profile" in failed_row
    assert "ADAM is not supported by TBE on the CPU" in head


def test_failed_config_is_listed_with_step_and_log_tail(report):
    failed = unescape(section(report.read_text(), "failed"))
    assert FAILED in failed and STALE not in failed
    assert "Step profile failed with exit code 1" in " ".join(failed.split()).replace(
        "<strong>", ""
    ).replace("</strong>", "")
    assert FAILED_TAIL in failed
    breakdowns = unescape(section(report.read_text(), "breakdowns"))
    assert "No breakdown: the profile step failed" in breakdowns


def test_each_profiled_config_has_its_sunburst_and_legend_tables(report):
    breakdowns = section(report.read_text(), "breakdowns")
    figures = re.findall(r'data-figure="(sunburst-[^"]+)"', breakdowns)
    # a sunburst and a legend table per backend: dyn and trc per config, dyn alone for the adam
    # config (TBE cannot run ADAM on the CPU), nothing for the failed one
    per_backend = 2 * (len(LABELS) - 2) + 1
    assert len(figures) == len(set(figures)) == per_backend
    assert breakdowns.count('<table class="legend">') == per_backend
    assert sum(f.startswith("sunburst-trc-") for f in figures) == len(LABELS) - 2
    assert "CPU busy (leaf operators)" in breakdowns
    assert f"pytest id: <code>suite/test_bench.py::test_step[{LABELS[0]}]</code>" in breakdowns
    assert 'class="code">A</td>' in breakdowns


def test_environment_and_cpu_stand_in_note(report):
    html = report.read_text()
    env = section(html, "environment")
    for text in (
        "AMD EPYC 7B13",
        "2.13.0",
        "1.8.0",
        "9.27.1",
        "torch",
        "smoke",
        "2026-11-30T15:00:00Z",
    ):
        assert text in env
    assert "CPU leaf operators stand in for kernels" in html


def test_figures_are_copied_or_exported_and_stale_ones_dropped(report, results):
    figures = report.parent / "figures"
    names = sorted(p.name for p in figures.glob("*.png"))
    assert names == sorted(
        ["latency.png"] + [f"sunburst__{lab}.png" for lab in LABELS if lab != FAILED]
    )
    assert (figures / "latency.png").read_bytes() == (
        results / "plots" / "latency.png"
    ).read_bytes()
    copied = figures / f"sunburst__{LABELS[0]}.png"
    assert copied.read_bytes() == (results / "sunburst" / f"{LABELS[0]}.png").read_bytes()
    exported = (
        figures / f"sunburst__{LABELS[5]}.png"
    )  # no PNG from the sunburst step: rendered here
    assert exported.read_bytes()[:8] == PNG_MAGIC and exported.stat().st_size > 20_000


def test_markdown_summary_for_pull_requests(report):
    summary = (report.parent / "summary.md").read_text()
    assert summary.startswith("# DynamicEmb vs TorchRec TBE: latency report\n")  # no record times NVIDIA's
    assert "ratios are dyn / trc." in summary
    for heading in ("## Configs", "## Failed configs", "## Ops that cost most across configs"):
        assert heading in summary
    assert f"| {LABELS[0]} | ok |" in summary
    assert "RuntimeError: CUDA out of memory while profiling" in summary
    assert "> CPU leaf operators stand in for kernels" in summary


def test_compare_to_a_previous_results_folder(results, tmp_path):
    previous = write_results(tmp_path / "previous", scale=0.5, failed=None, busy=False)
    # the previous run knew a config that is gone now
    old = json.loads((previous / "benchmark_results.json").read_text())
    gone = dict(old[0], label="T1_totalB64_D8_sgd_gpu_pool=none_cap=1K")
    (previous / "benchmark_results.json").write_text(json.dumps([*old, gone]))
    out = build_report(report_inputs(results, tmp_path / "report", compare_to=previous))

    changes = unescape(section(out.read_text(), "changes"))
    now = {r["label"]: r for r in read_results(results / "benchmark_results.json")}
    before = {r["label"]: r for r in old}
    label = LABELS[1]
    expected = 100.0 * (now[label]["dyn_train_ms"] / before[label]["dyn_train_ms"] - 1.0)
    assert f"{expected:+.1f}%" in changes
    assert "removed" in changes  # the gone config
    summary = (out.parent / "summary.md").read_text()
    assert f"## Changes against `{previous}`" in summary


def test_bandwidth_view_adds_legend_columns_and_a_chart(results, tmp_path):
    """Bandwidth CSVs made by the bandwidth code from the same per-op rows and records."""
    from embprof.bandwidth.achieved import achieved_bandwidth
    from embprof.bandwidth.table import load_table
    from embprof.results.peak import Peak, write_peak

    table = load_table()
    results = Path(shutil.copytree(results, tmp_path / "results"))
    records = {r["label"]: r for r in read_results(results / "benchmark_results.json")}
    bandwidth = results / "bandwidth"
    bandwidth.mkdir()
    for label in LABELS[:2]:
        frame = read_opcalls(results / "opcalls" / f"opcalls__{label}.csv")
        rows, _ = achieved_bandwidth(frame, records[label], table, peak_gbps=8.0)
        rows.to_csv(bandwidth / f"bandwidth__{label}.csv", index=False)
    peak = results / "peak_bandwidth.json"
    write_peak(Peak("cpu", "AMD EPYC 7B13", 8.0, "measured", "copy of 512 MiB", "2026-11-30"), peak)
    out = build_report(report_inputs(results, tmp_path / "report"))

    html = out.read_text()
    chart = unescape(section(html, "bandwidth"))
    assert "AMD EPYC 7B13's 8.0 GB/s" in chart and 'data-figure="bandwidth-plot"' in chart
    assert (out.parent / "figures" / "bandwidth.png").read_bytes()[:8] == PNG_MAGIC
    legends = section(html, "breakdowns")
    assert legends.count('<th class="num">GB/s</th>') == legends.count('<table class="legend">')
    # % of iter, then GB/s and % of peak, for the ops the bandwidth table has a formula for
    cell = r'<td class="num">{}</td>'
    pattern = cell.format(r"[0-9.]+%") + cell.format(r"([0-9][0-9,.]*)") + cell.format(r"[0-9.]+%")
    with_rates = re.findall(pattern, legends)
    assert with_rates, "no legend row shows a GB/s value"
