"""Assemble the report folder: index.html, summary.md and figures/*.png.

The figures are rebuilt from the same data and builders that the sunburst and
latency steps used, then embedded as JSON with plotly.js inline once, so the
page opens offline from a copied folder. PNGs the earlier steps already
rendered are copied; only missing ones go through kaleido, all in one browser.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
from embprof.pages.legend import LEGEND_BANDWIDTH_VIEW, LEGEND_VIEW, busy_note, config_legends
from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import BACKEND_NAMES, dom_id, figure_div
from embprof.plots.latency import latency_figure
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
from embprof.report import environment, markdown
from embprof.report.tables import HEADLINE_VIEW, TOP_OPS_VIEW, headline, top_ops
from embprof.results.busy import BusyTime, read_busy
from embprof.results.configs import read_configs
from embprof.results.environment import read_environment
from embprof.results.layout import SUNBURST_PNG_PREFIX, ResultsLayout
from embprof.results.peak import Peak
from embprof.results.records import read_results
from embprof.results.steps import read_statuses, succeeded

TITLE = "DynamicEmb vs TorchRec TBE: latency report"
FIGURES = "figures"
LATENCY_PNG = "latency.png"
BANDWIDTH_PNG = "bandwidth.png"
BACKEND_SUNBURST_PX = 520
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
    statuses = read_statuses(layout.status_dir)
    env = read_environment(layout.environment)
    labels = sorted(set(test_ids) | {r["label"] for r in records})
    by_label = {r["label"]: r for r in records}
    # Status files of configs no longer selected may linger in the folder: only this run's count.
    failed_steps = {
        lab: str(s["failed_step"]) for lab, s in statuses.items() if not s["ok"] and lab in labels
    }
    shown = succeeded(statuses, labels)
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

    cpu_note = environment.CPU_STAND_IN_NOTE if environment.cpu_stand_in(env, busy.values()) else ""
    head = to_cells(headline(labels, by_label, failed_steps), HEADLINE_VIEW)
    top = to_cells(top_ops(opcalls), TOP_OPS_VIEW)
    sections = [
        _section(
            label,
            test_ids.get(label, ""),
            opcalls.get(label),
            busy.get(label),
            failed_steps,
            None if bandwidth is None else bandwidth.get(label, pd.DataFrame()),
        )
        for label in labels
    ]
    failed = [_failed(statuses[label]) for label in sorted(failed_steps)]
    comparison = _comparison(Run(str(layout.root), records, opcalls, env), previous)

    summary = markdown.summary(
        title=TITLE,
        environment_line=environment.one_line(env),
        cpu_note=cpu_note,
        headline=head,
        failed=[markdown.FailedSummary(f.label, f.step, f.returncode, f.log_tail) for f in failed],
        top_ops=to_cells(top_ops(opcalls, limit=10), TOP_OPS_VIEW),
        comparison_name=comparison.name if comparison else None,
        config_deltas=comparison.configs if comparison else None,
        op_deltas=comparison.ops if comparison else None,
        comparison_notes=(
            [f"**{comparison.tally}**", *comparison.warnings, comparison.note] if comparison else ()
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


def _section(
    label: str,
    test_id: str,
    frame: pd.DataFrame | None,
    busy: BusyTime | None,
    failed_steps: Mapping[str, str],
    bandwidth: pd.DataFrame | None = None,
) -> _Section:
    """A config's breakdown: per backend, its sunburst beside its legend table.

    ``bandwidth`` (the config's bandwidth CSV, empty when it has none) adds GB/s
    and % of peak to the legend tables; ``None``: the report has no bandwidth view.
    """
    anchor = dom_id("config", label)
    if frame is None:
        reason = (
            f"No breakdown: the {failed_steps[label]} step failed (see Failed configs)."
            if label in failed_steps
            else "No breakdown: the workflow recorded no successful run of this config."
        )
        return _Section(label, test_id, anchor, "", [], reason)
    legends = config_legends(frame)
    if not legends:
        message = "The breakdown attributed no time to this config (its per-op CSV has no rows)."
        return _Section(label, test_id, anchor, "", [], message)
    view = LEGEND_VIEW
    if bandwidth is not None:
        legends = {b: with_bandwidth(t, bandwidth, b) for b, t in legends.items()}
        view = LEGEND_BANDWIDTH_VIEW
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
            view,
        ),
        message="",
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
