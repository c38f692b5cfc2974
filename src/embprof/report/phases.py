"""DynamicEmb against TBE phase by phase: time per phase (device and wall) and what each phase is
made of, dyn's ops beside TBE's kernels grouped by the kernel categories.

TBE runs under no ``op:*`` range, so each of its rows already carries the category the
breakdown gave it from the categories file (``fallback_category``); dyn's work under an op is
grouped by op, and dyn's work under none (or a copy inside an op) by its category as TBE's is.
Profiles run train steps only, so eval has the timed (unprofiled) wall time alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from embprof.pages.cells import (
    Column,
    as_number,
    fmt_ms,
    fmt_pct,
    fmt_ratio,
    fmt_text,
    shorten_middle,
)
from embprof.pages.legend import NAME_CHARS
from embprof.plots.figures import OP_PALETTE, base_layout, new_figure
from embprof.report.tables import ratio

BACKENDS = ("dyn", "trc")
PROFILED_PHASES = ("forward", "backward")
TABLE_PHASES = ("forward", "backward", "train", "eval")
TOP_GROUPS = 8
OTHER = "other"
OTHER_COLOR = "#BDBDBD"


def group_name(op: str, category: str) -> str:
    """A row's group: its op, or ``[category]`` for work under no op and for copies in one."""
    return f"[{category}]" if category else op


def work_groups(frame: pd.DataFrame) -> pd.DataFrame:
    """backend, phase, group, ms_per_iter, pct_of_phase: the per-op CSV summed per group."""
    rows = frame.assign(
        group=[group_name(o, c) for o, c in zip(frame["op"], frame["fallback_category"], strict=True)]
    )
    out = rows.groupby(["backend", "phase", "group"], as_index=False)["avg_ms_per_iter"].sum()
    out = out.rename(columns={"avg_ms_per_iter": "ms_per_iter"})
    totals = out.groupby(["backend", "phase"])["ms_per_iter"].transform("sum")
    out["pct_of_phase"] = 100.0 * out["ms_per_iter"] / totals.where(totals > 0)
    return out.sort_values(["backend", "phase", "ms_per_iter", "group"], ascending=[True, True, False, True],
                           ignore_index=True)


def _phases(groups: pd.DataFrame) -> list[str]:
    present = set(groups["phase"])
    return [p for p in PROFILED_PHASES if p in present] + sorted(present - set(PROFILED_PHASES))


def phase_times(groups: pd.DataFrame, record: Mapping[str, Any] | None) -> pd.DataFrame:
    """Per phase (forward, backward, train, eval): dyn and trc device ms (the sum of the phase's
    work in the profile) and wall ms (the timed, unprofiled medians), with dyn / trc."""
    record = record if record and record.get("status", "ok") == "ok" else {}
    device = groups.groupby(["backend", "phase"])["ms_per_iter"].sum()

    def gpu(backend: str, phase: str) -> float:
        if phase == "train":
            parts = [device.get((backend, p), math.nan) for p in PROFILED_PHASES]
            return math.fsum(parts) if not any(math.isnan(x) for x in parts) else math.nan
        return float(device.get((backend, phase), math.nan))

    rows = []
    for phase in TABLE_PHASES:
        values = {f"{b}_gpu_ms": gpu(b, phase) for b in BACKENDS}
        values |= {f"{b}_wall_ms": as_number(record.get(f"{b}_{phase}_ms")) for b in BACKENDS}
        rows.append(
            {
                "phase": phase,
                **values,
                "gpu_ratio": ratio(values["dyn_gpu_ms"], values["trc_gpu_ms"]),
                "wall_ratio": ratio(values["dyn_wall_ms"], values["trc_wall_ms"]),
            }
        )
    return pd.DataFrame(rows)


def paired_groups(groups: pd.DataFrame, top: int = TOP_GROUPS) -> pd.DataFrame:
    """Per phase, dyn's and TBE's groups side by side, costliest first (``top`` each, the rest
    summed as ``other``): phase, dyn_group, dyn_ms, dyn_pct, trc_group, trc_ms, trc_pct."""
    rows = []
    for phase in _phases(groups):
        sides = {b: _top(groups[(groups["backend"] == b) & (groups["phase"] == phase)], top) for b in BACKENDS}
        for rank in range(max(len(s) for s in sides.values())):
            row: dict[str, Any] = {"phase": phase if rank == 0 else ""}
            for b, side in sides.items():
                got = side.iloc[rank] if rank < len(side) else None
                row[f"{b}_group"] = got["group"] if got is not None else ""
                row[f"{b}_ms"] = got["ms_per_iter"] if got is not None else math.nan
                row[f"{b}_pct"] = got["pct_of_phase"] if got is not None else math.nan
            rows.append(row)
    return pd.DataFrame(
        rows, columns=["phase", *(f"{b}_{k}" for b in BACKENDS for k in ("group", "ms", "pct"))]
    )


def _top(side: pd.DataFrame, top: int) -> pd.DataFrame:
    if len(side) <= top + 1:
        return side.reset_index(drop=True)
    head = side.iloc[:top]
    rest = side.iloc[top:]
    other = pd.DataFrame([{"group": f"{OTHER} ({len(rest)})", "ms_per_iter": rest["ms_per_iter"].sum(),
                           "pct_of_phase": rest["pct_of_phase"].sum()}])
    return pd.concat([head, other], ignore_index=True)


def phase_figure(groups: pd.DataFrame, title: str) -> go.Figure | None:
    """Paired bars: per phase a dyn bar and a TBE bar, stacked by group; one colour per group
    name, so a category both backends have (``[memory]``) has the same colour in both."""
    phases = _phases(groups)
    if not phases:
        return None
    shown = []
    for phase in phases:
        for b in BACKENDS:
            side = _top(groups[(groups["backend"] == b) & (groups["phase"] == phase)], TOP_GROUPS)
            shown.append(side.assign(y=f"{phase} · {b}", backend=b))
    bars = pd.concat(shown, ignore_index=True)
    bars = bars.assign(key=bars["group"].where(~bars["group"].str.startswith(OTHER), OTHER))
    order = bars.groupby("key")["ms_per_iter"].sum().sort_values(ascending=False).index
    y = [f"{p} · {b}" for p in phases for b in BACKENDS]
    fig = new_figure(**base_layout(title=title, width=1200, height=110 + 34 * len(y) + 24 * math.ceil(len(order) / 4)))
    colours = iter(OP_PALETTE * (1 + len(order) // len(OP_PALETTE)))
    for key in order:
        part = bars[bars["key"] == key]
        fig.add_trace(
            go.Bar(
                x=part["ms_per_iter"], y=part["y"], orientation="h", name=_short(key),
                marker_color=OTHER_COLOR if key == OTHER else next(colours),
                customdata=list(zip(part["group"], part["pct_of_phase"].fillna(0.0), strict=True)),
                hovertemplate="%{y}<br>%{customdata[0]}: %{x:.3f} ms (%{customdata[1]:.1f}% of the phase)"
                "<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        legend=dict(orientation="h", y=-0.12, yanchor="top", x=0.0, font=dict(size=11)),
        margin=dict(l=20, r=30, t=60, b=30),
        xaxis=dict(title=None, rangemode="tozero"),
        yaxis=dict(categoryorder="array", categoryarray=y, autorange="reversed", automargin=True),
    )
    return fig


def _short(name: str) -> str:
    return shorten_middle(name, NAME_CHARS)


def _blank_or_text(value: Any) -> str:
    """Rows of one phase name it once; a side with fewer groups leaves its cells blank."""
    return "" if value == "" else fmt_text(value)


PHASE_TIMES_VIEW = (
    Column("phase", "phase"),
    Column("dyn_gpu_ms", "dyn device ms", fmt_ms, True),
    Column("trc_gpu_ms", "trc device ms", fmt_ms, True),
    Column("gpu_ratio", "device dyn/trc", fmt_ratio, True),
    Column("dyn_wall_ms", "dyn wall ms", fmt_ms, True),
    Column("trc_wall_ms", "trc wall ms", fmt_ms, True),
    Column("wall_ratio", "wall dyn/trc", fmt_ratio, True),
)
PAIRED_VIEW = (
    Column("phase", "phase", _blank_or_text),
    Column("dyn_group", "dyn op or [category]", _blank_or_text, shorten=NAME_CHARS),
    Column("dyn_ms", "ms/iter", fmt_ms, True),
    Column("dyn_pct", "% of phase", fmt_pct, True),
    Column("trc_group", "TBE [category]", _blank_or_text, shorten=NAME_CHARS),
    Column("trc_ms", "ms/iter", fmt_ms, True),
    Column("trc_pct", "% of phase", fmt_pct, True),
)
