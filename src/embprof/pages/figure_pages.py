"""The figure steps' outputs: a config's sunburst, the latency plot and the bandwidth chart, each as
a PNG and an HTML page, drawn from a run (:class:`~embprof.results.run.Run`); and the one
plotly.js those pages load."""

from __future__ import annotations

import os
from pathlib import Path

import plotly.graph_objects as go

from embprof.atomic import write_text
from embprof.pages.html import figure_page, legend_items
from embprof.pages.legend import CPU_STAND_IN_NOTE, busy_note, config_legends
from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import (
    BACKEND_NAMES,
    base_layout,
    dom_id,
    figure_div,
    new_figure,
    plotly_js,
)
from embprof.plots.latency import latency_figure, timed_configs
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
from embprof.results.run import Run

BANDWIDTH_TITLE = "Achieved memory bandwidth per op"


def write_plotly_js(path: Path) -> str:
    """plotly.js as shipped with plotly.py, for the figure steps' pages to share."""
    write_text(path, plotly_js())
    return f"{path}: plotly.js for the figure pages"


def _src(html: Path, shared: Path | None) -> str | None:
    """The shared plotly.js as the page at ``html`` reaches it (None: inline it)."""
    return None if shared is None else Path(os.path.relpath(shared, Path(html).parent)).as_posix()


def write_sunburst(run: Run, label: str, png: Path, html: Path, shared_js: Path | None = None) -> str:
    """One config's sunburst (a ring per phase, stage and op, per backend); returns a summary."""
    frame = run.opcalls[label]
    busy_time = run.busy.get(label)
    fig = sunburst_figure(frame, assign_letter_codes(frame), sunburst_title(label))
    legends = config_legends(frame)
    items = legend_items(
        legends,
        {b: busy_note(busy_time, b) for b in legends},
        {b: f"{BACKEND_NAMES.get(b, b)} ({b})" for b in legends},
    )
    figure_id = dom_id("sunburst", label)
    note = CPU_STAND_IN_NOTE if busy_time is not None and busy_time.cpu_leaf_ops else ""
    page = figure_page(sunburst_title(label), figure_id, figure_div(fig, figure_id), items, note,
                       _src(html, shared_js))
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    return f"{png}, {html}: {len(frame)} op rows, backends {', '.join(legends) or 'none'}"


def write_latency_plot(run: Run, png: Path, html: Path, shared_js: Path | None = None) -> str:
    """The latency plot of every timed config; returns a summary."""
    records = run.records
    fig = latency_figure(records)
    page = figure_page("Latency per iteration", "latency-plot", figure_div(fig, "latency-plot"), [],
                       plotly_src=_src(html, shared_js))
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    return f"{png}, {html}: {len(timed_configs(records))} of {len(records)} configs timed"


def write_bandwidth_plot(run: Run, png: Path, html: Path, shared_js: Path | None = None) -> str:
    """The % of peak chart of every config the run shows; returns a summary.

    Where no op has a bytes formula (or the run has no bandwidth CSVs) the chart
    says so, and the report shows no bandwidth chart.
    """
    from embprof.bandwidth.view import bandwidth_figure  # pandas: this step only

    bandwidth = None if run.bandwidth is None else dict(run.bandwidth)
    fig = bandwidth_figure(bandwidth, run.peak)
    rows = sum(len(frame) for frame in (bandwidth or {}).values())
    summary = f"{png}, {html}: {len(bandwidth or {})} configs, {rows} op rows"
    if fig is None:
        fig = _no_bandwidth_figure()
        summary += ", no op with a bytes formula"
    page = figure_page(BANDWIDTH_TITLE, "bandwidth-plot", figure_div(fig, "bandwidth-plot"), [],
                       plotly_src=_src(html, shared_js))
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    return summary


def _no_bandwidth_figure() -> go.Figure:
    fig = new_figure(**base_layout(title=BANDWIDTH_TITLE, width=700, height=320))
    fig.add_annotation(text="No op of these configs has a bytes formula (or a time): nothing to chart.",
                       showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig
