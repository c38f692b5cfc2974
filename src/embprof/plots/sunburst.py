"""Per-config sunburst: where one iteration's time goes, phase -> stage -> op, per backend.

Every op carries a letter code (A, B, ..., Z, AA, ...) so the leaves stay legible
and the legend table beside the figure names them; codes are ranked by the op's
time over all backends of the config, so they do not depend on CSV row order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from embprof.plots.figures import (
    BACKEND_NAMES,
    BACKENDS,
    OP_PALETTE,
    OTHER_PHASE_COLOR,
    PHASE_COLORS,
    base_layout,
    new_figure,
)

STAGE_SEP = "/"
PHASE_ORDER = ("forward", "backward")
ROOT_COLOR = "#F2F2F2"
DOMAIN_GAP = 0.04
TITLE_Y = 1.0
STAGE_COLOR = "#D9D9D9"


def letter_code(index: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA, 27 -> AB (spreadsheet column names)."""
    if index < 0:
        raise ValueError(f"letter codes start at 0, got {index}")
    code = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        code = chr(ord("A") + rem) + code
    return code


def assign_letter_codes(opcalls: pd.DataFrame) -> dict[str, str]:
    """Op name -> code; the costliest op is A, ties broken by name."""
    totals = opcalls.groupby("op", sort=True)["avg_ms_per_iter"].sum()
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return {op: letter_code(i) for i, (op, _) in enumerate(ranked)}


def backends_present(opcalls: pd.DataFrame) -> list[str]:
    """Known backends first in their fixed order, then any other, by name."""
    present = set(opcalls["backend"])
    return [b for b in BACKENDS if b in present] + sorted(present - set(BACKENDS))


def _phase_rank(phase: str) -> tuple[int, str]:
    return (PHASE_ORDER.index(phase), "") if phase in PHASE_ORDER else (len(PHASE_ORDER), phase)


# Per-op CSV columns from the trace (since issue 19) that legend tables carry where a CSV has them:
# numbers that add up over duplicated keys (NaN where no row has one), and the copies' memory kinds.
TRACE_NUMBERS = ("cpu_ms_per_iter", "copy_bytes_per_iter")
MEMORY_KINDS = "memory_kinds"


def _collapse(opcalls: pd.DataFrame) -> pd.DataFrame:
    """One row per (backend, phase, stages, op): duplicated keys add up."""
    keys = ["backend", "phase", "parent_stages", "op"]
    numbers = [c for c in TRACE_NUMBERS if c in opcalls.columns]
    kinds = [MEMORY_KINDS] if MEMORY_KINDS in opcalls.columns else []
    if not opcalls.duplicated(keys).any():  # the breakdown writes one row per key: skip the groupby
        return opcalls[[*keys, "avg_ms_per_iter", "calls_per_iter", *numbers, *kinds]]
    return opcalls.groupby(keys, sort=False, as_index=False).agg(
        avg_ms_per_iter=("avg_ms_per_iter", "sum"),
        calls_per_iter=("calls_per_iter", "sum"),
        **{c: (c, lambda v: v.sum(min_count=1)) for c in numbers},
        **{c: (c, _join_kinds) for c in kinds},
    )


def _join_kinds(values: pd.Series) -> str:
    return ";".join(sorted({k for v in values for k in str(v).split(";") if k}))


def legend_table(opcalls: pd.DataFrame, codes: dict[str, str], backend: str) -> pd.DataFrame:
    """The rows of one backend, costliest first, with their share of the iteration."""
    rows = _collapse(opcalls[opcalls["backend"] == backend])
    total = math.fsum(rows["avg_ms_per_iter"])
    table = pd.DataFrame(
        {
            "code": rows["op"].map(codes),
            "phase": rows["phase"],
            "stage": rows["parent_stages"],
            "op": rows["op"],
            "calls_per_iter": rows["calls_per_iter"],
            **{c: rows[c] for c in (*TRACE_NUMBERS, MEMORY_KINDS) if c in rows.columns},
            "ms_per_iter": rows["avg_ms_per_iter"],
            "pct_of_iter": 100.0 * rows["avg_ms_per_iter"] / total if total > 0 else 0.0,
        }
    )
    return table.sort_values(
        ["ms_per_iter", "code", "phase", "stage"], ascending=[False, True, True, True]
    ).reset_index(drop=True)


@dataclass(frozen=True)
class SunburstNodes:
    """Flat node lists of one backend's tree, as ``go.Sunburst`` takes them."""

    ids: list[str]
    parents: list[str]
    labels: list[str]
    values: list[float]
    colors: list[str]
    names: list[str]


def sunburst_nodes(opcalls: pd.DataFrame, codes: dict[str, str], backend: str) -> SunburstNodes:
    """Root backend -> phase -> one ring per stage level -> op leaves (values: ms/iter).

    Parents carry the exact sum of their leaves (``branchvalues="total"``).
    Ids are typed paths so a stage and an op of the same name never collide.
    """
    rows = _collapse(opcalls[opcalls["backend"] == backend])
    leaf_values: dict[str, float] = {}
    parent_of: dict[str, str] = {backend: ""}
    label_of: dict[str, str] = {}
    name_of: dict[str, str] = {}
    color_of: dict[str, str] = {backend: ROOT_COLOR}
    order = sorted(
        rows.itertuples(index=False),
        key=lambda r: (_phase_rank(r.phase), r.parent_stages, -r.avg_ms_per_iter, r.op),
    )
    for row in order:
        phase_id = f"{backend}|phase:{row.phase}"
        parent_of.setdefault(phase_id, backend)
        label_of[phase_id] = name_of[phase_id] = row.phase
        color_of[phase_id] = PHASE_COLORS.get(row.phase, OTHER_PHASE_COLOR)
        parent = phase_id
        for stage in filter(None, row.parent_stages.split(STAGE_SEP)):
            stage_id = f"{parent}|stage:{stage}"
            parent_of.setdefault(stage_id, parent)
            label_of[stage_id] = name_of[stage_id] = stage
            color_of[stage_id] = STAGE_COLOR
            parent = stage_id
        leaf_id = f"{parent}|op:{row.op}"
        parent_of[leaf_id] = parent
        code = codes[row.op]
        label_of[leaf_id], name_of[leaf_id] = code, f"{code}: {row.op}"
        color_of[leaf_id] = OP_PALETTE[_code_index(code) % len(OP_PALETTE)]
        leaf_values[leaf_id] = float(row.avg_ms_per_iter)

    subtree: dict[str, list[float]] = {node: [] for node in parent_of}
    for leaf, value in leaf_values.items():
        node = leaf
        while node:
            subtree[node].append(value)
            node = parent_of[node]
    total = math.fsum(leaf_values.values())
    label_of[backend] = f"{backend}<br>{total:.3g} ms"
    name_of[backend] = f"{BACKEND_NAMES.get(backend, backend)} ({backend})"
    ids = list(parent_of)
    return SunburstNodes(
        ids=ids,
        parents=[parent_of[i] for i in ids],
        labels=[label_of[i] for i in ids],
        values=[math.fsum(subtree[i]) for i in ids],
        colors=[color_of[i] for i in ids],
        names=[name_of[i] for i in ids],
    )


def _code_index(code: str) -> int:
    index = 0
    for char in code:
        index = index * 26 + (ord(char) - ord("A") + 1)
    return index - 1


def sunburst_figure(opcalls: pd.DataFrame, codes: dict[str, str], title: str) -> go.Figure:
    """One sunburst per backend present, side by side, values in ms per iteration.

    Built as one dict and validated once: plotly's make_subplots and repeated
    update_layout calls cost more than the data when a report holds many configs.
    """
    backends = backends_present(opcalls)
    cols = max(len(backends), 1)
    traces, titles = [], []
    for col, backend in enumerate(backends):
        nodes = sunburst_nodes(opcalls, codes, backend)
        left, right = col / cols + DOMAIN_GAP / 2, (col + 1) / cols - DOMAIN_GAP / 2
        traces.append(
            dict(
                type="sunburst",
                ids=nodes.ids,
                parents=nodes.parents,
                labels=nodes.labels,
                values=nodes.values,
                branchvalues="total",
                sort=False,
                marker=dict(colors=nodes.colors, line=dict(color="white", width=1)),
                customdata=nodes.names,
                hovertemplate=(
                    "<b>%{customdata}</b><br>%{value:.4f} ms/iter<br>"
                    "%{percentRoot:.1%} of the iteration<extra></extra>"
                ),
                insidetextorientation="auto",
                name=backend,
                domain=dict(x=[left, right], y=[0.0, TITLE_Y - 0.04]),
            )
        )
        titles.append(_annotation(_backend_title(opcalls, backend), (left + right) / 2, TITLE_Y))
    if not backends:
        titles.append(_annotation("no kernels attributed to this config", 0.5, 0.5, size=16))
    return new_figure(
        traces,
        annotations=titles,
        **base_layout(title=title, width=max(560 * cols, 640), height=560),
    )


def _annotation(text: str, x: float, y: float, size: int = 14) -> dict:
    return dict(
        text=text,
        x=x,
        y=y,
        xref="paper",
        yref="paper",
        xanchor="center",
        yanchor="bottom",
        showarrow=False,
        font=dict(size=size),
    )


def _backend_title(opcalls: pd.DataFrame, backend: str) -> str:
    total = math.fsum(opcalls.loc[opcalls["backend"] == backend, "avg_ms_per_iter"])
    return f"{BACKEND_NAMES.get(backend, backend)} ({backend}): {total:.3f} ms per iteration"


def sunburst_title(label: str) -> str:
    """The one title both the per-config page and the report give a config's sunburst."""
    return f"{label}: time per iteration by phase, stage and op"
