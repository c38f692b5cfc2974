"""The report opened in headless Chromium: every figure drawn, no console errors, offline."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
from report_inputs import LABELS, opcalls_frame, record, report_inputs, write_results

from embprof.pages.browser import PageCheck, open_page
from embprof.pages.html import figure_page, legend_items
from embprof.pages.legend import config_legends
from embprof.plots.export import find_browser
from embprof.plots.figures import dom_id, figure_div
from embprof.plots.latency import latency_figure
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure
from embprof.report.build import ReportInputs, build_report
from embprof.results.busy import read_busy
from embprof.results.paths import ResultsPaths
from embprof.results.records import read_results

pytestmark = [pytest.mark.browser, pytest.mark.slow]
H200 = Path(__file__).resolve().parents[1] / "examples" / "h200"


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


def assert_layout_holds(check: PageCheck) -> None:
    """At a 1400 px window with every section open: no table wider than its box, no figure
    drawn wider than its box, no column squeezed to a few characters."""
    assert check.wide_tables == [], check.wide_tables
    assert check.wide_figures == [], check.wide_figures
    assert check.squeezed == [], check.squeezed


def test_report_draws_every_figure_offline_without_console_errors(report, tmp_path):
    screenshot = tmp_path / "report.png"
    check = asyncio.run(open_page(report, screenshot))

    assert check.errors == []
    assert [
        url for url in check.requests if url.startswith(("http:", "https:", "ws:", "wss:"))
    ] == []
    names = [name for name, _, _ in check.figures]
    # the latency plot, the step budget, and per config with a breakdown a sunburst per backend
    # (dyn and trc; dyn alone where TBE cannot run: adam) and the paired dyn-against-TBE chart where
    # both ran; none for the failed config
    with_trc = len(LABELS) - 2
    assert len(names) == 2 + 2 * with_trc + 1 + with_trc == len(set(names))
    assert {"latency-plot", "budget-plot"} <= set(names)
    assert all(svgs >= 1 and plots == 1 for _, svgs, plots in check.figures), check.figures
    assert_layout_holds(check)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 50_000


def test_the_h200_examples_report_holds_its_layout_at_1400_px(tmp_path):
    """The H200 example's committed files as they are (no status/): every figure drawn offline, the
    step budget's figures on the page as the record and the sidecar hold them, no table too wide."""
    find_browser()
    index = build_report(ReportInputs(ResultsPaths(H200), tmp_path / "report"))
    html = index.read_text()
    cfr1 = "T10_totalB1048570_D128_adam_caching_pool=none_cap=1638K_cfr=1.0"
    budget = html[html.index('<section id="budget">'):]
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", budget[: budget.index("</section>")], re.S)
               if cfr1 in r and ">dyn<" in r)
    record = next(r for r in read_results(H200 / "benchmark_results.json") if r["label"] == cfr1)
    sidecar = read_busy(H200 / "opcalls" / f"opcalls__{cfr1}.busy.json")
    for value in (record["dyn_train_ms"], sidecar.ms_per_iter["dyn"], sidecar.range_ms_per_iter["dyn"]):
        assert f">{value:.3f}<" in row
    assert "lru_cache_insert_kernel" in html and "[embedding]" in html

    # docs/img/report_h200.png is tools/publish_example.py's, from the report the workflow drew
    check = asyncio.run(open_page(index, shot := tmp_path / "report_h200.png", max_height=2400))
    assert check.errors == []
    assert [url for url in check.requests if url.startswith(("http:", "https:"))] == []
    names = {name for name, _, _ in check.figures}
    configs, backends = 10, len(sidecar.ms_per_iter)  # a sunburst per backend and a phases chart per config
    assert backends == 3  # dyn, TBE and NVIDIA's dynamicemb
    assert len(check.figures) == 3 + backends * configs + configs == len(names)  # latency, budget, bandwidth
    assert {"latency-plot", "budget-plot", "bandwidth-plot"} <= names
    assert all(svgs >= 1 and plots == 1 for _, svgs, plots in check.figures), check.figures
    assert_layout_holds(check)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sections_start_closed_and_a_link_to_one_opens_it(report, tmp_path):
    """Collapsed, the page is short; the contents' link to a config opens its section."""
    find_browser()
    closed = asyncio.run(open_page(report, tmp_path / "closed.png", open_all=False))
    opened = asyncio.run(open_page(report, tmp_path / "open.png"))
    assert closed.errors == [] and closed.height < opened.height / 2
    anchor = "#" + dom_id("config", LABELS[0])
    assert f'href="{anchor}"' in report.read_text()
    linked = asyncio.run(open_page(report, tmp_path / "linked.png", open_all=False, fragment=anchor))
    assert linked.open_sections == [dom_id("config", LABELS[0])]


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
    from embprof.results.paths import ResultsPaths
    from embprof.results.peak import write_peak

    find_browser()
    root = write_results(tmp_path / "run" / "results")
    paths = ResultsPaths(root)
    label = LABELS[0]
    (root / "timing" / f"{label}.json").write_text(json.dumps([record(label)]))
    write_peak(measure_peak("cpu", nbytes=16 << 20, repeats=2), paths.peak)
    js = str(paths.plotly_js)
    steps = [
        ["plotly-js", "--out", js],
        ["sunburst", "--opcalls", str(paths.opcalls(label)), "--png", str(paths.sunburst_png(label)),
         "--html", str(paths.sunburst_html(label)), "--plotly-js", js],
        ["latency-plot", "--results", str(paths.benchmark_results), "--png", str(paths.latency_png),
         "--html", str(paths.latency_html), "--plotly-js", js],
        ["bandwidth", str(paths.opcalls(label)), "--record", str(paths.timing(label)), "--peak", str(paths.peak),
         "--out", str(paths.bandwidth(label))],
        ["bandwidth-plot", "--results-dir", str(root), "--png", str(paths.bandwidth_png),
         "--html", str(paths.bandwidth_html), "--plotly-js", js],
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
