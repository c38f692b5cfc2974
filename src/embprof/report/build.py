"""The report of a run: index.html, summary.md and figures/*.png.

:func:`build_report` reads the run (:class:`~embprof.results.run.Run`, and the one to
compare with), makes the page from it (:func:`report_page`, which reads nothing else),
exports the figures (:func:`export_figures`) and writes the two renderings
(:func:`render_html`, :func:`render_markdown`). The figures are rebuilt from the same
data and builders that the sunburst and latency steps used, then embedded as JSON with
plotly.js inline once, so the page opens offline from a copied folder. PNGs the earlier
steps already rendered are copied; only missing ones go through kaleido, all in one browser.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from markupsafe import Markup

from embprof.atomic import atomic_path, write_text
from embprof.bandwidth.link import link_table
from embprof.bandwidth.view import bandwidth_figure, with_bandwidth
from embprof.compare import compare_runs
from embprof.compare.render import TEST_NOTE, config_cells, op_cells
from embprof.pages.cells import Cells, Column, fmt_count, fmt_ms, fmt_pct, to_cells
from embprof.pages.html import LegendItem, legend_items, render
from embprof.pages.legend import busy_note, config_legends
from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import BACKEND_NAMES, dom_id, figure_div
from embprof.plots.latency import latency_figure
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
from embprof.report import environment, markdown
from embprof.report.budget import (
    TOP_KERNELS_VIEW,
    budget_figure,
    budget_view,
    step_budget,
    top_kernels,
)
from embprof.report.links import Link, config_links
from embprof.report.names import distinct_names
from embprof.report.phases import (
    PAIRED_VIEW,
    PHASE_TIMES_VIEW,
    paired_groups,
    phase_figure,
    phase_times,
    work_groups,
)
from embprof.report.tables import (
    HEADLINE_MD_VIEW,
    HEADLINE_VIEW,
    TOP_OPS_MD_VIEW,
    TOP_OPS_VIEW,
    across_view,
    headline,
    headline_view,
    nv_timed,
    ops_across_backends,
    top_ops,
    uniform_repeats,
)
from embprof.results.busy import BusyTime
from embprof.results.paths import SUNBURST_PNG_PREFIX, ResultsPaths
from embprof.results.peak import Peak
from embprof.results.run import Run

FIGURES = "figures"
LATENCY_PNG = "latency.png"
BANDWIDTH_PNG = "bandwidth.png"
BACKEND_SUNBURST_PX = 460
OP_DELTA_ROWS = 25


@dataclass(frozen=True)
class ReportInputs:
    """A results folder, where to write its report, and an optional earlier folder to compare with.

    The bandwidth view is shown when the folder has bandwidth CSVs, % of peak when it
    also has the peak file.
    """

    results: ResultsPaths
    out_dir: Path
    compare_to: Path | None = None


@dataclass(frozen=True)
class _Section:
    label: str
    test_id: str
    anchor: str
    png: str
    legends: list[LegendItem]
    message: str
    name: str = ""
    status: str = "ok"
    links: list[Link] = field(default_factory=list)
    budget: Cells | None = None
    phases: _Phases | None = None
    kernels: list[tuple[str, Cells]] = field(default_factory=list)
    across: Cells | None = None  # ops of the same name side by side across backends (dyn, nv)


@dataclass(frozen=True)
class _Phases:
    """dyn against TBE per phase: times, the groups side by side and their paired chart."""

    times: Cells
    groups: Cells
    figure_id: str
    figure_div: str


@dataclass(frozen=True)
class _Failed:
    label: str
    anchor: str
    step: str
    returncode: str
    log: str
    log_tail: str


@dataclass(frozen=True)
class _Comparison:
    name: str
    configs: Cells
    ops: Cells
    warnings: list[str]
    note: str
    tally: str


def sunburst_png_name(label: str) -> str:
    return f"{SUNBURST_PNG_PREFIX}{label}.png"


# A figure the report shows as a PNG: how to make it, and where an earlier step rendered it.
Figure = tuple[Callable[[], go.Figure], Path | None]


@dataclass(frozen=True)
class ReportPage:
    """Everything the report shows of a run, made once; the HTML and the Markdown render it."""

    title: str
    ratios: str  # what the summary's ratios divide: "dyn / trc", and "dyn / nv" where NVIDIA's ran
    repeats: int | None  # the repeats every config ran, where the same (then not a column)
    subtitle: str
    cpu_note: str
    headline: Cells
    headline_md: Cells
    trc_notes: list[tuple[str, str]]
    latency: dict[str, Any]
    top_ops: Cells
    top_ops_md: Cells
    budget: dict[str, Any]
    budget_md: Cells
    bandwidth: dict[str, Any] | None
    link: dict[str, Any] | None  # host traffic against the link's pinned copy peaks, where records count it
    comparison: _Comparison | None
    sections: list[_Section]
    failed: list[_Failed]
    environment: list[tuple[str, str]]
    figures: dict[str, Figure]  # PNG name -> figure


def build_report(inputs: ReportInputs) -> Path:
    """Write the report folder of the results folder ``inputs.results`` and return its index.html."""
    run = Run.from_folder(inputs.results.root)
    previous = Run.from_folder(inputs.compare_to) if inputs.compare_to else None
    out = Path(inputs.out_dir)
    page = report_page(run, previous, out)  # every file read and checked before anything is written
    export_figures(page.figures, out / FIGURES)
    write_text(out / "summary.md", render_markdown(page))
    return write_text(out / "index.html", render_html(page))


def report_page(run: Run, previous: Run | None = None, out_dir: Path | None = None) -> ReportPage:
    """The report of ``run`` (against ``previous``); ``out_dir``: where it is written, which the links
    to a folder's files are relative to (none without it, or for a run not read from a folder)."""
    labels, shown, by_label, failed_steps = run.labels, run.shown, run.by_label, run.failed_steps
    opcalls, busy, bandwidth, env, paths = dict(run.opcalls), dict(run.busy), run.bandwidth, run.environment, run.paths
    bandwidth = None if bandwidth is None else dict(bandwidth)
    bandwidth_fig = bandwidth_figure(bandwidth, run.peak)
    latency = latency_figure(run.records)
    figures: dict[str, Figure] = {LATENCY_PNG: (lambda: latency, paths.latency_png if paths else None)}
    if bandwidth_fig is not None:
        figures[BANDWIDTH_PNG] = (lambda: bandwidth_fig, paths.bandwidth_png if paths else None)
    figures |= {
        sunburst_png_name(label): (partial(_config_sunburst, label, frame), paths.sunburst_png(label) if paths else None)
        for label, frame in opcalls.items()
    }

    names = distinct_names(labels)
    cpu_stand_in = environment.cpu_stand_in(env, busy.values())
    budget = step_budget(labels, by_label, busy, names)
    budget_fig = budget_figure(budget, cpu_stand_in)
    head_table = headline(labels, by_label, failed_steps)
    head_table["name"] = [names[label] for label in head_table["label"]]
    sections = [
        _section(
            label,
            run.configs.get(label, ""),
            opcalls.get(label),
            busy.get(label),
            failed_steps,
            None if bandwidth is None else bandwidth.get(label, pd.DataFrame()),
            context=_SectionContext(
                name=names[label],
                record=by_label.get(label),
                links=config_links(paths, label, out_dir, with_per_op=label in shown)
                if paths is not None and out_dir is not None else [],
                budget=to_cells(budget[budget["label"] == label], budget_view(budget, cpu_stand_in)),
            ),
        )
        for label in labels
    ]
    with_nv = nv_timed(head_table)
    return ReportPage(
        title=report_title(with_nv),
        ratios="dyn / trc and dyn / nv" if with_nv else "dyn / trc",
        repeats=uniform_repeats(head_table),
        subtitle=environment.one_line(env),
        cpu_note=environment.CPU_STAND_IN_NOTE if cpu_stand_in else "",
        headline=to_cells(head_table, headline_view(head_table, HEADLINE_VIEW)),
        headline_md=to_cells(head_table, headline_view(head_table, HEADLINE_MD_VIEW)),
        trc_notes=[(r["label"], r["trc_skip_reason"]) for r in run.records if r.get("trc_skip_reason")],
        latency={
            "id": "latency-plot",
            "div": Markup(figure_div(latency, "latency-plot")),
            "png": f"{FIGURES}/{LATENCY_PNG}",
        },
        top_ops=to_cells(top_ops(opcalls, names=names), TOP_OPS_VIEW),
        top_ops_md=to_cells(top_ops(opcalls, limit=10), TOP_OPS_MD_VIEW),
        budget={
            "cells": to_cells(budget, budget_view(budget, cpu_stand_in)),
            "id": "budget-plot",
            "div": Markup(figure_div(budget_fig, "budget-plot")) if budget_fig is not None else "",
            "split": bool(budget["idle_ms"].notna().any()),
        },
        budget_md=to_cells(budget, budget_view(budget, cpu_stand_in, config="label")),
        bandwidth=_bandwidth_context(bandwidth, bandwidth_fig, run.peak),
        link=_link_context(run.records, run.peak, names),
        comparison=_comparison(run, previous),
        sections=sections,
        failed=[_failed(run.statuses[label]) for label in sorted(failed_steps)],
        environment=environment.environment_rows(env),
        figures=figures,
    )


def report_title(with_nv: bool) -> str:
    """The backends the report holds against each other, NVIDIA's dynamicemb where it ran."""
    others = [BACKEND_NAMES["trc"], *([BACKEND_NAMES["nv"]] if with_nv else [])]
    return f"{BACKEND_NAMES['dyn']} vs {' and '.join(others)}: latency report"


def render_markdown(page: ReportPage) -> str:
    """``summary.md``: the report's tables in Markdown, for a pull request."""
    comparison = page.comparison
    return markdown.summary(
        title=page.title,
        ratios=page.ratios,
        repeats=page.repeats,
        environment_line=page.subtitle,
        cpu_note=page.cpu_note,
        headline=page.headline_md,
        budget=page.budget_md,
        failed=[markdown.FailedSummary(f.label, f.step, f.returncode, f.log_tail) for f in page.failed],
        top_ops=page.top_ops_md,
        link=page.link["cells_md"] if page.link else None,
        link_note=page.link["note"] if page.link else "",
        comparison_name=comparison.name if comparison else None,
        config_deltas=comparison.configs if comparison else None,
        op_deltas=comparison.ops if comparison else None,
        comparison_notes=(
            [f"**{markdown.md_text(comparison.tally)}**", *map(markdown.md_text, comparison.warnings),
             markdown.md_text(comparison.note)] if comparison else ()
        ),
    )


def render_html(page: ReportPage) -> str:
    """``index.html``: one self-contained page (plotly.js inline)."""
    return render(
        "report.html.j2",
        packages=("embprof.report",),
        title=page.title,
        ratios=page.ratios,
        repeats=page.repeats,
        subtitle=page.subtitle,
        cpu_note=page.cpu_note,
        headline=page.headline,
        trc_notes=page.trc_notes,
        latency=page.latency,
        top_ops=page.top_ops,
        budget=page.budget,
        bandwidth=page.bandwidth,
        link=page.link,
        comparison=page.comparison,
        sections=page.sections,
        failed=page.failed,
        environment=page.environment,
    )


def _config_sunburst(label: str, frame: pd.DataFrame) -> go.Figure:
    """The figure the sunburst step renders for a config (both backends side by side)."""
    return sunburst_figure(frame, assign_letter_codes(frame), sunburst_title(label))


def _bandwidth_context(
    bandwidth: dict[str, pd.DataFrame] | None, fig: go.Figure | None, peak: Peak | None
) -> dict[str, Any] | None:
    if bandwidth is None:
        return None
    against = (
        f"% of peak is against {peak.name}'s {peak.peak_gbps:,.1f} GB/s ({peak.source}: {peak.method})."
        if peak
        else "No peak was given: GB/s only."
    )
    if peak and peak.copy_gbps:
        kinds = ", ".join(f"{kind} {gbps:,.1f} GB/s" for kind, gbps in sorted(peak.copy_gbps.items()))
        against += (f" Copies, whose bytes the trace counted, are rated against the peak of their kind"
                    f" (bytes copied per second: {kinds}); memsets against the device's.")
    return {
        "id": "bandwidth-plot",
        "div": Markup(figure_div(fig, "bandwidth-plot")) if fig is not None else "",
        "png": f"{FIGURES}/{BANDWIDTH_PNG}",
        "note": (
            "Achieved GB/s: the bytes each op must move per iteration (config/bandwidth.yaml)"
            f" over its time per iteration. {against} Ops without a bytes formula show none."
        ),
    }


LINK_VIEW = (
    Column("name", "config", hover="label"),
    Column("mb_in", "host MB in/iter", fmt_ms, True),  # three decimals, as ms
    Column("mb_out", "host MB out/iter", fmt_ms, True),
    Column("link_in_ms", "in ms at peak", fmt_ms, True),
    Column("link_out_ms", "out ms at peak", fmt_ms, True),
    Column("link_ms", "link ms", fmt_ms, True),
    Column("train_ms", "dyn train ms", fmt_ms, True),
    Column("link_share_pct", "link % of step", fmt_pct, True),
    Column("rows_in", "rows in/iter", fmt_count, True),
    Column("rows_out", "rows out/iter", fmt_count, True),
)
LINK_MD_VIEW = (Column("label", "config"), *LINK_VIEW[1:])


def _link_context(records: list[dict[str, Any]], peak: Peak | None, names: Mapping[str, str]) -> dict[str, Any] | None:
    """dyn's host rows per train iteration against the link's pinned copy peaks (``link_table``); None where no
    record counts them."""
    table = link_table(records, peak)
    if table.empty:
        return None
    table["name"] = [names.get(label, label) for label in table["label"]]
    copies = peak.copy_gbps if peak else {}
    if "pinned->device" in copies and "device->pinned" in copies:
        against = (f"and the ms that takes at {peak.name}'s measured pinned copy peaks, {copies['pinned->device']:,.1f} GB/s"
                   f" host to device and {copies['device->pinned']:,.1f} GB/s device to host")
    else:
        against = "MB only: no pinned copy peak was measured for this run (no peak_bandwidth.json with copy_gbps)"
    note = (
        "Host rows dyn's train iterations move each way, per iteration, counted over an untimed pass after the timed"
        " ones (MB: 10^6 bytes; a cache's misses and write-backs, host rows read and stepped in place), " + against + ". The link ms is"
        " the longer direction (the link carries both at once): the least time the step needs for its host rows;"
        " link % of step is it over dyn's train ms, the distance to the link's limit (100%: the link alone fills the step)."
    )
    return {"cells": to_cells(table, LINK_VIEW), "cells_md": to_cells(table, LINK_MD_VIEW), "note": note}


def export_figures(wanted: Mapping[str, Figure], figures_dir: Path) -> None:
    """The page's PNGs in ``figures_dir``: those earlier steps rendered copied, the rest exported in
    one browser session, stale ones dropped. Figures are made only for the PNGs exported here."""
    figures_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name, (make_fig, rendered) in wanted.items():
        target = figures_dir / name
        if rendered is not None and rendered.is_file():
            with atomic_path(target) as tmp:
                shutil.copyfile(rendered, tmp)
        else:
            jobs.append(PngJob(make_fig(), target))
    export_pngs(jobs)
    for stale in figures_dir.glob("*.png"):
        if stale.name not in wanted:
            stale.unlink()


@dataclass(frozen=True)
class _SectionContext:
    """What a config's section shows beside its breakdown: its short name, its record, links to its
    files, its rows of the step budget."""

    name: str = ""
    record: Mapping[str, Any] | None = None
    links: list[Link] = field(default_factory=list)
    budget: Cells | None = None


def _section(
    label: str,
    test_id: str,
    frame: pd.DataFrame | None,
    busy: BusyTime | None,
    failed_steps: Mapping[str, str],
    bandwidth: pd.DataFrame | None = None,
    context: _SectionContext = _SectionContext(),
) -> _Section:
    """A config's breakdown: its step budget, dyn against TBE per phase, and per backend its
    sunburst beside its legend table.

    ``bandwidth`` (the config's bandwidth CSV, empty when it has none) adds GB/s
    and % of peak to the legend tables; ``None``: the report has no bandwidth view.
    """
    anchor = dom_id("config", label)
    status = f"failed: {failed_steps[label]}" if label in failed_steps else "ok"
    around = dict(name=context.name or label, status=status, links=context.links)
    if frame is None:
        reason = (
            f"No breakdown: the {failed_steps[label]} step failed (see Failed configs)."
            if label in failed_steps
            else "No breakdown: the workflow recorded no successful run of this config."
        )
        return _Section(label, test_id, anchor, "", [], reason, **around)
    legends = config_legends(frame)
    if not legends:
        message = "The breakdown attributed no time to this config (its per-op CSV has no rows)."
        return _Section(label, test_id, anchor, "", [], message, **around)
    if bandwidth is not None:
        legends = {b: with_bandwidth(t, bandwidth, b) for b, t in legends.items()}
    codes = assign_letter_codes(frame)
    figures = {}
    for backend in legends:
        fig = sunburst_figure(frame[frame["backend"] == backend], codes, "")
        fig.update_layout(width=BACKEND_SUNBURST_PX, height=BACKEND_SUNBURST_PX, margin=dict(t=50))
        figure_id = dom_id(f"sunburst-{backend}", label)
        figures[backend] = (figure_id, figure_div(fig, figure_id))
    return _Section(
        label=label,
        test_id=test_id,
        anchor=anchor,
        png=f"{FIGURES}/{sunburst_png_name(label)}",
        legends=legend_items(
            legends,
            {b: busy_note(busy, b) for b in legends},
            {b: f"{BACKEND_NAMES.get(b, b)} ({b})" for b in legends},
            figures,
            bandwidth=bandwidth is not None,
        ),
        message="",
        budget=context.budget if context.budget is not None and context.budget.rows else None,
        phases=_phases(label, frame, context.record),
        across=_across(frame),
        kernels=[
            (f"{BACKEND_NAMES.get(b, b)} ({b})", to_cells(t, TOP_KERNELS_VIEW))
            for b, t in top_kernels(busy).items()
            if not t.empty
        ],
        **around,
    )


def _across(frame: pd.DataFrame) -> Cells | None:
    """Ops of the same name in several backends (ours and NVIDIA's dynamicemb push the same op names);
    None where fewer than two backends name ops."""
    table = ops_across_backends(frame)
    return to_cells(table, across_view(table)) if not table.empty else None


def _phases(label: str, frame: pd.DataFrame, record: Mapping[str, Any] | None) -> _Phases | None:
    """dyn against TBE per phase; None where the config's breakdown lacks either (other backends, such
    as ``nv``, are shown in their own sunburst and legend, not here)."""
    groups = work_groups(frame)
    if not {"dyn", "trc"} <= set(groups["backend"]):
        return None
    figure_id = dom_id("phases", label)
    fig = phase_figure(groups, "dyn against TBE per phase: ms per iteration of each op or [category]")
    return _Phases(
        times=to_cells(phase_times(groups, record), PHASE_TIMES_VIEW),
        groups=to_cells(paired_groups(groups), PAIRED_VIEW),
        figure_id=figure_id,
        figure_div=Markup(figure_div(fig, figure_id)) if fig is not None else "",
    )


def _failed(status: Mapping[str, Any]) -> _Failed:
    return _Failed(
        label=status["label"],
        anchor=dom_id("failed", status["label"]),
        step=str(status["failed_step"]),
        returncode=str(status["returncode"]),
        log=str(status["log"]),
        log_tail=str(status["log_tail"] or ""),
    )


def _comparison(current: Run, previous: Run | None) -> _Comparison | None:
    """The run against the run of ``compare_to`` (embprof.compare, as ``embprof diff`` does)."""
    if previous is None:
        return None
    found = compare_runs(previous, current)
    return _Comparison(
        name=previous.name,
        configs=config_cells(found.configs),
        ops=op_cells(found.largest_ops(OP_DELTA_ROWS)),
        warnings=found.warnings,
        note=TEST_NOTE.format(alpha=found.alpha),
        tally=found.tally(),
    )
