"""The figure steps' outputs: a config's sunburst, and the latency plot, each as a PNG and a
self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

from embprof.atomic import write_text
from embprof.pages.html import figure_page, legend_items
from embprof.pages.legend import CPU_STAND_IN_NOTE, busy_note, config_legends
from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import BACKEND_NAMES, dom_id, figure_div
from embprof.plots.latency import latency_figure, timed_configs
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
from embprof.results.busy import read_busy
from embprof.results.opcalls import read_opcalls
from embprof.results.records import read_results


def write_sunburst(opcalls: Path, busy: Path, label: str, png: Path, html: Path) -> str:
    """One config's sunburst (a ring per phase, stage and op, per backend); returns a summary."""
    frame = read_opcalls(opcalls)
    busy_time = read_busy(busy)
    fig = sunburst_figure(frame, assign_letter_codes(frame), sunburst_title(label))
    legends = config_legends(frame)
    items = legend_items(
        legends,
        {b: busy_note(busy_time, b) for b in legends},
        {b: f"{BACKEND_NAMES.get(b, b)} ({b})" for b in legends},
    )
    figure_id = dom_id("sunburst", label)
    note = CPU_STAND_IN_NOTE if busy_time is not None and busy_time.cpu_leaf_ops else ""
    page = figure_page(sunburst_title(label), figure_id, figure_div(fig, figure_id), items, note)
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    return f"{png}, {html}: {len(frame)} op rows, backends {', '.join(legends) or 'none'}"


def write_latency_plot(results: Path, png: Path, html: Path) -> str:
    """The latency plot of every timed config; returns a summary."""
    records = read_results(results)
    fig = latency_figure(records)
    page = figure_page("Latency per iteration", "latency-plot", figure_div(fig, "latency-plot"), [])
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    return f"{png}, {html}: {len(timed_configs(records))} of {len(records)} configs timed"
