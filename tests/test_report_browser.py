"""The report opened in headless Chromium: every figure drawn, no console errors, offline."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from browser_check import open_page
from report_inputs import LABELS, opcalls_frame, record, report_inputs, write_results

from embprof.pages.html import figure_page, legend_items
from embprof.pages.legend import config_legends
from embprof.plots.export import find_browser
from embprof.plots.figures import figure_div
from embprof.plots.latency import latency_figure
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure
from embprof.report.build import build_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    find_browser()
    root = write_results(tmp_path_factory.mktemp("browser") / "results")
    index = build_report(report_inputs(root))
    # A colleague gets a copy of the folder: nothing may point back into results/.
    copied = tmp_path_factory.mktemp("copied") / "report"
    shutil.copytree(index.parent, copied)
    shutil.rmtree(root)
    return copied / "index.html"


def test_report_draws_every_figure_offline_without_console_errors(report, tmp_path):
    screenshot = tmp_path / "report.png"
    check = asyncio.run(open_page(report, screenshot))

    assert check.errors == []
    assert [
        url for url in check.requests if url.startswith(("http:", "https:", "ws:", "wss:"))
    ] == []
    names = [name for name, _, _ in check.figures]
    # the latency plot and a sunburst per backend of each config with a breakdown: dyn and trc,
    # dyn alone where TBE cannot run (adam), none for the failed config
    assert len(names) == 1 + 2 * (len(LABELS) - 2) + 1 == len(set(names))
    assert all(svgs >= 1 and plots == 1 for _, svgs, plots in check.figures), check.figures
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 50_000


def test_standalone_sunburst_and_latency_pages_draw(tmp_path):
    """The pages the sunburst and latency steps write beside their PNGs, built the same way."""
    find_browser()
    frame = opcalls_frame()
    legends = config_legends(frame)
    sunburst = sunburst_figure(frame, assign_letter_codes(frame), "one config")
    pages = {
        "sunburst.html": figure_page(
            "one config",
            "sunburst-x",
            figure_div(sunburst, "sunburst-x"),
            legend_items(legends, {}, {}),
        ),
        "latency.html": figure_page(
            "latency",
            "latency-plot",
            figure_div(latency_figure([record(lab) for lab in LABELS]), "latency-plot"),
            [],
        ),
    }
    for name, html in pages.items():
        (tmp_path / name).write_text(html)
        check = asyncio.run(open_page(tmp_path / name, tmp_path / f"{name}.png"))
        assert check.errors == [], name
        (figure,) = check.figures
        assert figure[1] >= 1 and figure[2] == 1, (name, figure)
