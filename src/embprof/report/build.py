"""Assemble the report folder: index.html, summary.md and figures/*.png.

The figures are rebuilt from the same data and builders that the sunburst and
latency steps used, then embedded as JSON with plotly.js inline once, so the
page opens offline from a copied folder. PNGs the earlier steps already
rendered are copied; only missing ones go through kaleido, all in one browser.
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
from embprof.bandwidth.view import bandwidth_figure, load_bandwidth, with_bandwidth
from embprof.compare import Run, compare_runs, load_opcalls, load_run
from embprof.compare.render import TEST_NOTE, config_cells, op_cells
from embprof.pages.cells import Cells, to_cells
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
    headline,
    top_ops,
)
from embprof.results.busy import BusyTime, read_busy
from embprof.results.configs import read_configs
from embprof.results.environment import read_environment
from embprof.results.layout import SUNBURST_PNG_PREFIX, ResultsLayout
from embprof.results.peak import Peak
from embprof.results.records import read_results
from embprof.results.steps import per_op_labels, read_statuses

TITLE = "DynamicEmb vs TorchRec TBE: latency report"
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

    results: ResultsLayout
    out_dir: Path
    compare_to: Path | None = None


def _load_opcalls(
    layout: ResultsLayout, labels: list[str]
) -> tuple[dict[str, pd.DataFrame], dict[str, BusyTime | None]]:
    frames = load_opcalls(layout, labels)
    return frames, {label: read_busy(layout.busy(label)) for label in frames}


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


def build_report(inputs: ReportInputs) -> Path:
    """Write the report folder and return the path of its index.html."""
    layout = inputs.results
    records = read_results(layout.benchmark_results)
    test_ids = {c.label: c.test_id for c in read_configs(layout.configs)}
    # A folder from before statuses (the committed H200 example) has per-op files of every config.
    statuses = read_statuses(layout.status_dir) if layout.status_dir.is_dir() else {}
    env = read_environment(layout.environment)
    labels = sorted(set(test_ids) | {r["label"] for r in records})
    by_label = {r["label"]: r for r in records}
    # Status files of configs no longer selected may linger in the folder: only this run's count.
    failed_steps = {
        lab: str(s["failed_step"]) for lab, s in statuses.items() if not s["ok"] and lab in labels
    }
    shown = per_op_labels(layout, labels)
    opcalls, busy = _load_opcalls(layout, shown)
    bandwidth, peak = load_bandwidth(layout, shown)
    bandwidth_fig = bandwidth_figure(bandwidth, peak)
    previous = load_run(inputs.compare_to) if inputs.compare_to else None

    out = Path(inputs.out_dir)
    figures_dir = out / FIGURES
    latency = latency_figure(records)
    _write_pngs(
        figures_dir,
        {LATENCY_PNG: (lambda: latency, layout.latency_png)}
        | ({BANDWIDTH_PNG: (lambda: bandwidth_fig, layout.bandwidth_png)} if bandwidth_fig is not None else {})
        | {
            sunburst_png_name(label): (
                partial(_config_sunburst, label, frame),
                layout.sunburst_png(label),
            )
            for label, frame in opcalls.items()
        },
    )

    names = distinct_names(labels)
    cpu_stand_in = environment.cpu_stand_in(env, busy.values())
    cpu_note = environment.CPU_STAND_IN_NOTE if cpu_stand_in else ""
    budget = step_budget(labels, by_label, busy, names)
    budget_fig = budget_figure(budget, cpu_stand_in)
    head_table = headline(labels, by_label, failed_steps)
    head_table["name"] = [names[label] for label in head_table["label"]]
    head = to_cells(head_table, HEADLINE_VIEW)
    top = to_cells(top_ops(opcalls, names=names), TOP_OPS_VIEW)
    sections = [
        _section(
            label,
            test_ids.get(label, ""),
            opcalls.get(label),
            busy.get(label),
            failed_steps,
            None if bandwidth is None else bandwidth.get(label, pd.DataFrame()),
            context=_SectionContext(
                name=names[label],
                record=by_label.get(label),
                links=config_links(layout, label, out, with_per_op=label in shown),
                budget=to_cells(budget[budget["label"] == label], budget_view(budget, cpu_stand_in)),
            ),
        )
        for label in labels
    ]
    failed = [_failed(statuses[label]) for label in sorted(failed_steps)]
    comparison = _comparison(Run(str(layout.root), records, opcalls, env), previous)

    summary = markdown.summary(
        title=TITLE,
        environment_line=environment.one_line(env),
        cpu_note=cpu_note,
        headline=to_cells(head_table, HEADLINE_MD_VIEW),
        budget=to_cells(budget, budget_view(budget, cpu_stand_in, config="label")),
        failed=[markdown.FailedSummary(f.label, f.step, f.returncode, f.log_tail) for f in failed],
        top_ops=to_cells(top_ops(opcalls, limit=10), TOP_OPS_MD_VIEW),
        comparison_name=comparison.name if comparison else None,
        config_deltas=comparison.configs if comparison else None,
        op_deltas=comparison.ops if comparison else None,
        comparison_notes=(
            [f"**{markdown.md_text(comparison.tally)}**", *map(markdown.md_text, comparison.warnings),
             markdown.md_text(comparison.note)] if comparison else ()
        ),
    )
    page = render(
        "report.html.j2",
        packages=("embprof.report",),
        title=TITLE,
        subtitle=environment.one_line(env),
        cpu_note=cpu_note,
        headline=head,
        trc_notes=[(r["label"], r["trc_skip_reason"]) for r in records if r.get("trc_skip_reason")],
        latency={
            "id": "latency-plot",
            "div": Markup(figure_div(latency, "latency-plot")),
            "png": f"{FIGURES}/{LATENCY_PNG}",
        },
        top_ops=top,
        budget={
            "cells": to_cells(budget, budget_view(budget, cpu_stand_in)),
            "id": "budget-plot",
            "div": Markup(figure_div(budget_fig, "budget-plot")) if budget_fig is not None else "",
            "split": bool(budget["idle_ms"].notna().any()),
        },
        bandwidth=_bandwidth_context(bandwidth, bandwidth_fig, peak),
        comparison=comparison,
        sections=sections,
        failed=failed,
        environment=environment.environment_rows(env),
    )
    write_text(out / "summary.md", summary)
    return write_text(out / "index.html", page)


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


def _write_pngs(
    figures_dir: Path, wanted: Mapping[str, tuple[Callable[[], go.Figure], Path | None]]
) -> None:
    """Copy PNGs that earlier steps rendered, export the rest in one session, drop stale ones.

    Figures are made only for the PNGs that must be rendered here.
    """
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
        kernels=[
            (f"{BACKEND_NAMES.get(b, b)} ({b})", to_cells(t, TOP_KERNELS_VIEW))
            for b, t in top_kernels(busy).items()
            if not t.empty
        ],
        **around,
    )


def _phases(label: str, frame: pd.DataFrame, record: Mapping[str, Any] | None) -> _Phases | None:
    """dyn against TBE per phase; None where the config has a breakdown of one backend only."""
    groups = work_groups(frame)
    if set(groups["backend"]) < {"dyn", "trc"}:
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
    """The run against the folder of ``compare_to`` (embprof.compare, as ``embprof diff`` does)."""
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
