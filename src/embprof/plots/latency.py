"""Latency plot: DynamicEmb beside TorchRec TBE for every timed config.

A row per optimizer and a panel per suite (GPU, Caching at each cache
footprint ratio, NoCaching, NoHBM). In a panel, each config shows a stacked
forward + backward training bar and an eval bar per backend (medians of the
repeats), with error bars from the fastest to the slowest repeat of the train
and eval times; a button switches every y axis between linear and log scale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from embprof.labels import format_cap, parse_label
from embprof.plots.figures import BACKEND_NAMES, base_layout, new_figure
from embprof.results.timings import repeat_values

MODE_ORDER = ("gpu", "caching", "no_caching", "no_hbm")
MODE_TITLES = {"gpu": "GPU", "caching": "Caching", "no_caching": "NoCaching", "no_hbm": "NoHBM"}
TOP_PX, ROW_PX, BOTTOM_PX, CONTROLS_PX = 130, 360, 50, 34
# (backend, part) -> colour; forward dark, backward light, eval hatched.
SERIES_COLORS = {
    ("dyn", "forward"): "#1F4E79",
    ("dyn", "backward"): "#6FA8DC",
    ("dyn", "eval"): "#3D85C6",
    ("trc", "forward"): "#B45309",
    ("trc", "backward"): "#F6B26B",
    ("trc", "eval"): "#E69138",
    ("nv", "forward"): "#38761D",
    ("nv", "backward"): "#93C47D",
    ("nv", "eval"): "#6AA84F",
}
LATENCY_BACKENDS = ("dyn", "trc", "nv")  # a backend with no time in any record draws no bar


@dataclass(frozen=True, order=True)
class Panel:
    """One suite column; caching suites split by cache footprint ratio."""

    mode_rank: int
    cfr: float
    mode: str

    @property
    def title(self) -> str:
        name = MODE_TITLES[self.mode]
        return f"{name} cfr={self.cfr:g}" if self.mode == "caching" and self.cfr >= 0 else name


@dataclass(frozen=True)
class Timed:
    """The numbers of one successfully timed config, with its place in the grid."""

    label: str
    optimizer: str
    panel: Panel
    short: str
    ms: Mapping[str, float | None]
    # (fastest, slowest) repeat of each train and eval metric; None with fewer than two repeats
    ranges: Mapping[str, tuple[float, float] | None]


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def timed_configs(records: Iterable[Mapping[str, Any]]) -> list[Timed]:
    """Records that timed fine (``status`` ok or absent, a dyn train time), in label order."""
    timed = []
    for record in sorted(records, key=lambda r: r["label"]):
        if record.get("status", "ok") != "ok" or _number(record.get("dyn_train_ms")) is None:
            continue
        fields = parse_label(record["label"])
        cfr = fields.cache_footprint_ratio if fields.cache_footprint_ratio is not None else -1.0
        caps = sorted({format_cap(c) for c in fields.caps})
        short = (
            f"T{fields.num_tables} B{fields.total_batch} D{fields.dim}"
            f"<br>{fields.pooling} cap={'-'.join(caps)}"
        )
        keys = [
            f"{b}_{p}_ms" for b in LATENCY_BACKENDS for p in ("forward", "backward", "train", "eval")
        ]
        repeats = {k: repeat_values(record, k) for k in keys if k.endswith(("_train_ms", "_eval_ms"))}
        timed.append(
            Timed(
                label=record["label"],
                optimizer=fields.optimizer,
                panel=Panel(MODE_ORDER.index(fields.mode), cfr, fields.mode),
                short=short,
                ms={k: _number(record.get(k)) for k in keys},
                ranges={k: (min(v), max(v)) if len(v) > 1 else None for k, v in repeats.items()},
            )
        )
    return timed


def _bar(
    timed: list[Timed], backend: str, part: str, *, first: bool, base_part: str | None = None
) -> go.Bar | None:
    ys = [t.ms[f"{backend}_{part}_ms"] for t in timed]
    if all(y is None for y in ys):
        return None
    group = "train" if part in ("forward", "backward") else "eval"
    train = [t.ms[f"{backend}_train_ms"] for t in timed]
    base = [t.ms[f"{backend}_{base_part}_ms"] or 0.0 for t in timed] if base_part else None
    name = f"{backend} {part}"
    spans = _spans(timed, backend, group)
    return go.Bar(
        x=[t.short for t in timed],
        y=ys,
        base=base,
        name=name,
        legendgroup=name,
        showlegend=first,
        offsetgroup=f"{backend}-{group}",
        error_y=_error_bars(timed, ys, base, spans) if part in ("backward", "eval") else None,
        marker=dict(
            color=SERIES_COLORS[(backend, part)],
            # overlay: white hatching on the bar's colour (plotly's default replaces the colour)
            pattern=dict(
                shape="/" if part == "eval" else "",
                fgcolor="white",
                solidity=0.25,
                fillmode="overlay",
            ),
        ),
        customdata=[
            [t.label, tr, _span_text(span)] for t, tr, span in zip(timed, train, spans, strict=True)
        ],
        hovertemplate=(
            f"<b>{BACKEND_NAMES.get(backend, backend)} {part}</b>: %{{y:.3f}} ms"
            + ("<br>train (measured): %{customdata[1]:.3f} ms" if group == "train" else "")
            + f"<br>{group} repeats: %{{customdata[2]}}"
            + "<br>%{customdata[0]}<extra></extra>"
        ),
    )


def _spans(timed: list[Timed], backend: str, group: str) -> list[tuple[float, float] | None]:
    return [t.ranges.get(f"{backend}_{group}_ms") for t in timed]


def _span_text(span: tuple[float, float] | None) -> str:
    return "one" if span is None else f"{span[0]:.3f} to {span[1]:.3f} ms"


def _error_bars(
    timed: list[Timed], ys: list[float | None], base: list[float] | None,
    spans: list[tuple[float, float] | None],
) -> dict[str, Any] | None:
    """Error bars from the top of a bar (a train stack's top, or an eval bar) down to the fastest
    repeat and up to the slowest; none where no config has two repeats."""
    if all(span is None for span in spans):
        return None
    tops = [(y or 0.0) + (b or 0.0) for y, b in zip(ys, base or [0.0] * len(ys), strict=True)]
    up = [max(span[1] - top, 0.0) if span else 0.0 for span, top in zip(spans, tops, strict=True)]
    down = [max(top - span[0], 0.0) if span else 0.0 for span, top in zip(spans, tops, strict=True)]
    return dict(type="data", symmetric=False, array=up, arrayminus=down, thickness=1.2, width=3, color="#444")


def latency_figure(
    records: Iterable[Mapping[str, Any]], title: str = "Latency per iteration"
) -> go.Figure:
    timed = timed_configs(records)
    optimizers = sorted({t.optimizer for t in timed})
    panels = sorted({t.panel for t in timed})
    rows, cols = max(len(optimizers), 1), max(len(panels), 1)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"{o} · {p.title}" for o in optimizers for p in panels] or None,
        horizontal_spacing=min(0.08, 0.3 / cols),
        vertical_spacing=min(0.18, 0.5 / rows),
        figure=new_figure(),
    )
    seen: set[str] = set()
    for row, optimizer in enumerate(optimizers, start=1):
        for col, panel in enumerate(panels, start=1):
            cell = [t for t in timed if t.optimizer == optimizer and t.panel == panel]
            if not cell:
                _mark_empty(fig, row, col)
                continue
            for backend in LATENCY_BACKENDS:
                for part, base in (("forward", None), ("backward", "forward"), ("eval", None)):
                    name = f"{backend} {part}"
                    bar = _bar(cell, backend, part, first=name not in seen, base_part=base)
                    if bar is not None:
                        seen.add(name)
                        fig.add_trace(bar, row=row, col=col)
            fig.update_yaxes(title_text="ms", row=row, col=col)
    if not timed:
        fig.add_annotation(
            text="no config timed successfully",
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
            font=dict(size=16),
        )
    height = TOP_PX + ROW_PX * rows + BOTTOM_PX
    plot_px = height - TOP_PX - BOTTOM_PX
    above = 1.0 + CONTROLS_PX / plot_px  # controls sit above the subplot titles
    fig.update_layout(
        barmode="group",
        bargap=0.25,
        bargroupgap=0.05,
        legend=dict(orientation="h", yanchor="bottom", y=above, xanchor="right", x=1.0),
        updatemenus=[_scale_toggle(fig, above)],
    )
    fig.update_yaxes(gridcolor="#E5E5E5", zeroline=False)
    fig.update_layout(**base_layout(title=title, width=max(420 * cols, 900), height=height))
    fig.update_layout(
        margin=dict(t=TOP_PX, b=BOTTOM_PX), title=dict(y=1.0, yanchor="top", pad=dict(t=16))
    )
    return fig


def _mark_empty(fig: go.Figure, row: int, col: int) -> None:
    """Say so in a grid cell whose optimizer has no config in that suite.

    Placed in paper coordinates: plotly.js drops axes that carry no trace, so
    a reference to the empty cell's own axes would not resolve.
    """
    fig.update_xaxes(visible=False, row=row, col=col)
    fig.update_yaxes(visible=False, row=row, col=col)
    cell = fig.get_subplot(row, col)
    fig.add_annotation(
        text="no config in this suite",
        showarrow=False,
        x=sum(cell.xaxis.domain) / 2,
        y=sum(cell.yaxis.domain) / 2,
        xref="paper",
        yref="paper",
        xanchor="center",
        yanchor="middle",
        font=dict(color="#8C959F"),
    )


def _scale_toggle(fig: go.Figure, y: float) -> dict[str, Any]:
    """Buttons that set every y axis of the grid to linear or log."""
    axes = [name for name in fig.layout if name.startswith("yaxis")] or ["yaxis"]

    def relayout(scale: str) -> dict[str, str]:
        return {f"{axis}.type": scale for axis in axes}

    return dict(
        type="buttons",
        direction="right",
        showactive=True,
        active=0,
        x=0.0,
        xanchor="left",
        y=y,
        yanchor="bottom",
        pad=dict(t=4, b=4),
        buttons=[
            dict(label="linear y", method="relayout", args=[relayout("linear")]),
            dict(label="log y", method="relayout", args=[relayout("log")]),
        ],
    )
