"""The report opened in headless Chromium: every figure drawn, no console errors, offline."""

from __future__ import annotations

import asyncio
import json
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


def test_figure_step_pages_load_one_shared_plotly_js_and_draw_offline(tmp_path):
    """The pages the workflow's figure steps write load results/plotly.min.js: each is small, the
    folder copied elsewhere still draws, and the bandwidth chart is drawn by its own step."""
    from embprof.bandwidth.peak import measure_peak
    from embprof.cli import main
    from embprof.results.layout import ResultsLayout
    from embprof.results.peak import write_peak

    find_browser()
    root = write_results(tmp_path / "run" / "results")
    layout = ResultsLayout(root)
    label = LABELS[0]
    (root / "timing" / f"{label}.json").write_text(json.dumps([record(label)]))
    write_peak(measure_peak("cpu", nbytes=16 << 20, repeats=2), layout.peak)
    js = str(layout.plotly_js)
    steps = [
        ["plotly-js", "--out", js],
        ["sunburst", "--opcalls", str(layout.opcalls(label)), "--png", str(layout.sunburst_png(label)),
         "--html", str(layout.sunburst_html(label)), "--plotly-js", js],
        ["latency-plot", "--results", str(layout.benchmark_results), "--png", str(layout.latency_png),
         "--html", str(layout.latency_html), "--plotly-js", js],
        ["bandwidth", str(layout.opcalls(label)), "--record", str(layout.timing(label)), "--peak", str(layout.peak),
         "--out", str(layout.bandwidth(label))],
        ["bandwidth-plot", "--results-dir", str(root), "--png", str(layout.bandwidth_png),
         "--html", str(layout.bandwidth_html), "--plotly-js", js],
    ]
    for argv in steps:
        assert main(argv) == 0, argv
    copied = tmp_path / "elsewhere" / "results"
    shutil.copytree(root, copied)
    shutil.rmtree(root)
    for page in (copied / "sunburst" / f"{label}.html", copied / "plots" / "latency.html",
                 copied / "plots" / "bandwidth.html"):
        html = page.read_text()
        assert 'src="../plotly.min.js"' in html and len(html) < 300_000, page
        check = asyncio.run(open_page(page, tmp_path / f"{page.stem}.png"))
        assert check.errors == [], page
        assert [url for url in check.requests if url.startswith(("http:", "https:"))] == []
        (figure,) = check.figures
        assert figure[1] >= 1 and figure[2] == 1, (page, figure)
        png = page.with_suffix(".png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
