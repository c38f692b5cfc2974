"""The report shows bandwidth: GB/s and % of peak in every legend table, and the % of peak chart.

The bandwidth CSVs come from the real `embprof bandwidth` run on each config's
per-op CSV and record (tests/report_inputs.py), the peak from a real CPU copy.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_inputs import LABELS, report_inputs, write_results

from embprof.bandwidth.peak import measure_peak
from embprof.cli import main
from embprof.report.build import build_report
from embprof.results.peak import write_peak

FAILED = LABELS[3]
pytestmark = pytest.mark.slow  # builds a whole report (kaleido PNGs)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_results(tmp_path_factory.mktemp("run") / "results", failed=FAILED)
    write_peak(measure_peak("cpu", nbytes=16 << 20, repeats=2), root / "peak_bandwidth.json")
    for label in LABELS:
        if label == FAILED:
            continue
        (root / "timing" / f"{label}.json").write_text(
            (root / "benchmark_results.json").read_text()
        )
        assert (
            main(
                [
                    "bandwidth",
                    str(root / "opcalls" / f"opcalls__{label}.csv"),
                    "--record",
                    str(root / "timing" / f"{label}.json"),
                    "--peak",
                    str(root / "peak_bandwidth.json"),
                    "--out",
                    str(root / "bandwidth" / f"bandwidth__{label}.csv"),
                ]
            )
            == 0
        )
    return build_report(report_inputs(root))


def _tables(html: str, section_id: str) -> list[str]:
    """The legend tables of a config's section."""
    section = re.search(rf'<details class="config" id="{section_id}">(.*?)</details>', html, re.S)
    assert section, section_id
    return re.findall(r'<table class="legend">.*?</table>', section.group(1), re.S)


def test_every_legend_table_has_gbps_and_pct_of_peak(report: Path) -> None:
    html = report.read_text()
    seen_formula = False
    for label in LABELS:
        if label == FAILED:
            continue
        tables = _tables(html, "config-" + re.sub(r"[^A-Za-z0-9_-]", "-", label))
        assert tables, label
        for table in tables:
            headers = [h.strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
            assert "GB/s" in headers and "% of peak" in headers, headers
            gbps_at, pct_at, op_at = (
                headers.index("GB/s"),
                headers.index("% of peak"),
                headers.index("op"),
            )
            rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
            cells = [  # the text of each cell, without its line-break opportunities
                [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
                for row in rows
            ]
            by_op = {c[op_at]: (c[gbps_at], c[pct_at]) for c in cells}
            if "gather_embedding" in by_op:  # a formula: numbers
                gbps, pct = by_op["gather_embedding"]
                assert float(gbps.replace(",", "")) > 0 and pct.endswith("%")
                seen_formula = True
            if "storage_find" in by_op:  # no formula: a dash, never a guess
                assert by_op["storage_find"] == ("—", "—")
    assert seen_formula


def test_chart_of_pct_of_peak_across_configs(report: Path) -> None:
    html = report.read_text()
    section = re.search(r'<section id="bandwidth">(.*?)</section>', html, re.S)
    assert section, "no bandwidth section"
    assert 'data-figure="bandwidth-plot"' in section.group(1)
    assert "measured" in section.group(1) and "GB/s" in section.group(1)
    assert (report.parent / "figures" / "bandwidth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'href="#bandwidth"' in html
