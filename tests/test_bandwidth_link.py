"""Host traffic against the link's pinned copy peaks: the arithmetic (``embprof.bandwidth.link``) and the report's
table, on the H200 example's real records and peak file with traffic fields of known values set here."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from embprof.bandwidth.link import LINK_COLUMNS, link_table
from embprof.report.build import render_html, render_markdown, report_page
from embprof.results.peak import Peak, read_peak
from embprof.results.records import HOST_TRAFFIC_FIELDS
from embprof.results.run import Run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "h200"
PEAK = Peak("cuda:0", "GPU", 100.0, "measured", "copy", "2026-12-01", {"pinned->device": 40.0, "device->pinned": 50.0})


def _record(label: str, train_ms: float | None, traffic: tuple | None) -> dict:
    record = {"label": label, "status": "ok", "dyn_train_ms": train_ms}
    return record | dict(zip(HOST_TRAFFIC_FIELDS, traffic, strict=True)) if traffic else record


def test_link_ms_is_the_longer_direction_at_its_pinned_peak() -> None:
    records = [
        _record("a", 20.0, (1000, 500, 400e6, 100e6)),  # in: 400 MB at 40 GB/s = 10 ms; out: 100 MB at 50 GB/s = 2 ms
        _record("b", 1.0, (10, 20, 1e6, 5e6)),  # out is the longer: 0.1 ms, 10% of the step
    ]
    table = link_table(records, PEAK)
    assert list(table.columns) == list(LINK_COLUMNS) and list(table["label"]) == ["a", "b"]
    a, b = table.to_dict("records")
    assert (a["mb_in"], a["mb_out"], a["link_in_ms"], a["link_out_ms"], a["link_ms"]) == pytest.approx((400, 100, 10, 2, 10))
    assert a["link_share_pct"] == pytest.approx(50) and a["rows_in"] == 1000 and a["in_gbps"] == 40
    assert b["link_ms"] == pytest.approx(0.1) and b["link_share_pct"] == pytest.approx(10)


def test_records_without_the_fields_peaks_or_times_give_what_they_can() -> None:
    records = [
        _record("old", 5.0, None),  # before issue 32, or a config of GPU rows
        _record("no_time", None, (1, 1, 1e6, 1e6)),
        _record("bad", 5.0, (1, 1, "many", 1e6)),  # not a number: not counted
        _record("failed", 5.0, (1, 1, 1e6, 1e6)) | {"status": "error"},
    ]
    table = link_table(records, PEAK)
    assert list(table["label"]) == ["no_time"]
    assert table["link_ms"][0] == pytest.approx(0.025) and math.isnan(table["link_share_pct"][0])
    assert link_table([records[0]], PEAK).empty and link_table([], None).empty
    without_peak = link_table([_record("a", 2.0, (1, 1, 1e6, 1e6))], None)
    assert without_peak["mb_in"][0] == 1 and without_peak[["in_gbps", "link_ms", "link_share_pct"]].isna().all(axis=None)
    one_way = Peak(**{**PEAK.__dict__, "copy_gbps": {"pinned->device": 40.0}})
    assert math.isnan(link_table([_record("a", 2.0, (1, 1, 1e6, 1e6))], one_way)["link_ms"][0])


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The example's records, peak and configs, its host-storage configs' records given traffic fields of
    known values (200,000 rows of 1,536 bytes in, 150,000 out) and its GPU configs' taken away."""
    root = tmp_path / "results"
    root.mkdir()
    for name in ("peak_bandwidth.json", "configs.tsv", "environment.json"):
        shutil.copy(EXAMPLE / name, root / name)
    records = json.loads((EXAMPLE / "benchmark_results.json").read_text())
    for r in records:
        for name in HOST_TRAFFIC_FIELDS:
            r.pop(name, None)
        if "_gpu_" not in r["label"]:
            r |= dict(zip(HOST_TRAFFIC_FIELDS, (2.0e5, 1.5e5, 2.0e5 * 1536, 1.5e5 * 1536), strict=True))
    (root / "benchmark_results.json").write_text(json.dumps(records))
    return root


def test_the_report_shows_the_table_for_the_configs_that_count_traffic(example: Path) -> None:
    run = Run.from_folder(example)
    page = report_page(run)
    html, summary = render_html(page), render_markdown(page)
    section = html.split('<section id="link">')[1].split("</section>")[0]
    assert section.count("<tr>") == 1 + 8  # the header and the eight configs with host rows (not the two GPU ones)
    peak = read_peak(example / "peak_bandwidth.json")
    h2d = peak.copy_gbps["pinned->device"]
    assert f"NVIDIA H200&#39;s measured pinned copy peaks, {h2d:.1f} GB/s host to device" in section
    # sgd caching cfr 1.0: 307.2 MB in at the pinned host-to-device peak, the longer direction, over its train ms
    expected = link_table(run.records, peak)
    row = expected[expected["label"].str.contains("sgd_caching_pool=none_cap=1638K_cfr=1.0")].iloc[0]
    train_ms = next(r["dyn_train_ms"] for r in run.records if r["label"] == row["label"])
    assert row["link_ms"] == pytest.approx(307.2 / h2d)
    assert row["link_share_pct"] == pytest.approx(100 * 307.2 / h2d / train_ms)
    assert "307.200" in section and f"{307.2 / h2d:.3f}" in section and f"{row['link_share_pct']:.1f}%" in section
    assert "## Host traffic against the link" in summary and "| T10_totalB1048570_D128_sgd_caching_pool=none_cap=1638K_cfr=1.0 | 307.200 |" in summary


def test_without_a_peak_file_the_table_has_mb_only_and_old_records_none(example: Path) -> None:
    (example / "peak_bandwidth.json").unlink()
    html = render_html(report_page(Run.from_folder(example)))
    section = html.split('<section id="link">')[1].split("</section>")[0]
    assert "no pinned copy peak was measured" in section and "307.200" in section
    records = json.loads((EXAMPLE / "benchmark_results.json").read_text())
    old = [{k: v for k, v in r.items() if k not in HOST_TRAFFIC_FIELDS} for r in records]  # written before the fields
    (example / "benchmark_results.json").write_text(json.dumps(old))
    page = report_page(Run.from_folder(example))
    assert page.link is None and 'id="link"' not in render_html(page) and "Host traffic" not in render_markdown(page)
