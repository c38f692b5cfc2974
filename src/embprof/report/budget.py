"""Where a step's time goes, per config and backend: the unprofiled timed step, the profiled
step, the device busy in it, and the rest split into device idle within the range and host time.

All of it comes from what the workflow already wrote: the records' train ms (medians of the
unprofiled repeats) and the breakdown's sidecars (busy, range and, since issue 19, idle ms per
iteration). Without the idle split (older sidecars) the rest stays one number, "not busy".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from embprof.pages.cells import Column, as_number, fmt_calls, fmt_ms, fmt_pct, fmt_text, fmt_us
from embprof.plots.figures import base_layout, new_figure
from embprof.results.busy import BusyTime

COLUMNS = [
    "label", "name", "backend", "timed_ms", "profiled_ms", "busy_ms", "idle_ms", "host_ms",
    "not_busy_ms", "busy_pct", "overhead_pct",
]
# The parts a profiled step is made of, as the chart stacks them (key, legend name, colour).
PARTS = (
    ("busy_ms", "busy", "#2E7D32"),
    ("idle_ms", "idle within the range", "#F9A825"),
    ("host_ms", "host only", "#78909C"),
    ("unsplit_ms", "not busy (idle + host, not split)", "#CFD8DC"),
)
BAR_PX = 22


def overhead_pct(profiled_ms: float, timed_ms: float) -> float:
    """How much longer the profiled step took than the unprofiled one, in % of the latter."""
    return 100.0 * (profiled_ms / timed_ms - 1.0) if timed_ms > 0 else math.nan


def step_budget(
    labels: Sequence[str],
    records: Mapping[str, Mapping[str, Any]],
    busy: Mapping[str, BusyTime | None],
    names: Mapping[str, str],
) -> pd.DataFrame:
    """One row per config and backend that the breakdown measured (``COLUMNS``; NaN: unknown).

    ``profiled_ms`` is the range's time until its device work is done; a sidecar that holds the
    host range only (written before that rule) gives none, since it is no step's time.
    """
    rows = []
    for label in labels:
        sidecar = busy.get(label)
        if sidecar is None:
            continue
        record = records.get(label, {})
        for backend, busy_ms in sidecar.ms_per_iter.items():
            profiled = (
                sidecar.range_ms_per_iter.get(backend, math.nan)
                if sidecar.range_until_device_done
                else math.nan
            )
            idle = sidecar.idle_ms_per_iter.get(backend, math.nan)
            timed = as_number(record.get(f"{backend}_train_ms")) if record.get("status", "ok") == "ok" else math.nan
            rows.append(
                {
                    "label": label,
                    "name": names.get(label, label),
                    "backend": backend,
                    "timed_ms": timed,
                    "profiled_ms": profiled,
                    "busy_ms": busy_ms,
                    "idle_ms": idle,
                    "host_ms": max(profiled - busy_ms - idle, 0.0) if not math.isnan(profiled + idle) else math.nan,
                    "not_busy_ms": max(profiled - busy_ms, 0.0) if not math.isnan(profiled) else math.nan,
                    "busy_pct": 100.0 * busy_ms / profiled if profiled > 0 else math.nan,
                    "overhead_pct": overhead_pct(profiled, timed),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def budget_view(table: pd.DataFrame, cpu: bool, config: str = "name") -> tuple[Column, ...]:
    """The table's columns: idle and host where some sidecar split them, not busy where some did
    not; on the CPU the busy time is that of the leaf operators. ``config``: the column that names
    the config (``name`` on the page, with the label on hover; ``label`` in Markdown)."""
    device = "CPU" if cpu else "GPU"
    split = table["idle_ms"].notna()
    return (
        Column(config, "config", hover="label" if config != "label" else ""),
        Column("backend", "backend", fmt_text),
        Column("timed_ms", "timed ms", fmt_ms, True),
        Column("profiled_ms", "profiled ms", fmt_ms, True),
        Column("busy_ms", f"{device} busy ms", fmt_ms, True),
        Column("busy_pct", "busy %", fmt_pct, True),
        *(
            (Column("idle_ms", f"{device} idle in range ms", fmt_ms, True),
             Column("host_ms", "host only ms", fmt_ms, True))
            if split.any() else ()
        ),
        *((Column("not_busy_ms", "not busy ms", fmt_ms, True),) if not split.all() else ()),
        Column("overhead_pct", "profiler overhead", fmt_pct, True),
    )


TOP_KERNELS_VIEW = (
    Column("kernel", "kernel", fmt_text, shorten=38),
    Column("ms_per_iter", "ms/iter", fmt_ms, True),
    Column("pct_of_busy", "% of busy", fmt_pct, True),
    Column("calls_per_iter", "calls/iter", fmt_calls, True),
    Column("mean_us", "mean µs", fmt_us, True),
)


def top_kernels(busy: BusyTime | None) -> dict[str, pd.DataFrame]:
    """Backend -> its costliest kernels as the breakdown wrote them (none in older sidecars), with
    each one's share of the backend's busy time."""
    if busy is None:
        return {}
    out = {}
    for backend, rows in busy.top_kernels.items():
        table = pd.DataFrame([vars(r) for r in rows], columns=["kernel", "ms_per_iter", "calls_per_iter", "mean_us"])
        total = busy.ms_per_iter.get(backend, math.nan)
        out[backend] = table.assign(pct_of_busy=100.0 * table["ms_per_iter"] / total if total > 0 else math.nan)
    return out


def budget_figure(table: pd.DataFrame, cpu: bool = False) -> go.Figure | None:
    """Stacked bars per config and backend (busy, idle, host; or busy and not busy where the
    sidecar holds no idle split) with the unprofiled timed step as a diamond; None: no bars."""
    shown = table[table["profiled_ms"].notna()]
    if shown.empty:
        return None
    split = shown["idle_ms"].notna()
    bars = shown.assign(
        y=shown["name"] + " · " + shown["backend"],
        unsplit_ms=np.where(split, 0.0, shown["not_busy_ms"]),
        idle_ms=shown["idle_ms"].fillna(0.0),
        host_ms=shown["host_ms"].fillna(0.0),
    )
    device = "CPU" if cpu else "GPU"
    fig = new_figure(
        **base_layout(
            title=f"Where a step's time goes: {device} busy and the rest, against the timed step (ms per iteration)",
            width=1200,
            height=max(320, BAR_PX * len(bars) + 160),
        )
    )
    for key, name, colour in PARTS:
        if not bars[key].any():
            continue
        fig.add_trace(
            go.Bar(
                x=bars[key], y=bars["y"], orientation="h", name=name.replace("busy", f"{device} busy", 1)
                if key == "busy_ms" else name, marker_color=colour,
                customdata=bars["label"],
                hovertemplate="%{customdata}<br>%{fullData.name}: %{x:.3f} ms<extra></extra>",
            )
        )
    timed = bars[bars["timed_ms"].notna()]
    fig.add_trace(
        go.Scatter(
            x=timed["timed_ms"], y=timed["y"], mode="markers", name="timed step (unprofiled)",
            marker=dict(symbol="diamond", size=9, color="#111"),
            customdata=timed["label"],
            hovertemplate="%{customdata}<br>timed (unprofiled): %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        barmode="stack",
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0.0, traceorder="normal"),
        margin=dict(l=20, r=30, t=100, b=40),
        xaxis=dict(title="ms per iteration", rangemode="tozero"),
        yaxis=dict(autorange="reversed", automargin=True, title=None),
    )
    return fig

