"""Shared look and HTML embedding of the report's plotly figures."""

from __future__ import annotations

import re
from functools import cache

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

BACKENDS = ("dyn", "trc", "nv")
BACKEND_NAMES = {"dyn": "DynamicEmb", "trc": "TorchRec TBE", "nv": "NVIDIA dynamicemb"}
PHASE_COLORS = {"forward": "#4C78A8", "backward": "#F58518"}
OTHER_PHASE_COLOR = "#9D9D9D"
# Colour-blind-safe qualitative palette (Okabe-Ito, then Tableau 10 extras) for ops.
OP_PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#4E79A7",
    "#F28E2B",
    "#59A14F",
    "#B07AA1",
    "#76B7B2",
    "#EDC948",
    "#FF9DA7",
    "#9C755F",
    "#BAB0AC",
)
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13, color="#222")
# Interactive figures: no plotly logo; the camera button saves a crisp PNG.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}

_NON_ID = re.compile(r"[^A-Za-z0-9_-]")


def dom_id(prefix: str, name: str) -> str:
    """A stable HTML id, so that re-rendering the same data gives the same page."""
    return f"{prefix}-{_NON_ID.sub('-', name)}"


@cache
def report_template() -> go.layout.Template:
    """The look of every figure, made once.

    Passing it explicitly skips plotly's default template, which every new
    figure would otherwise validate again (about 80 ms each on a 2-core machine).
    """
    return go.layout.Template(
        layout=dict(font=FONT, paper_bgcolor="white", plot_bgcolor="white", colorway=OP_PALETTE)
    )


def new_figure(data: list | None = None, **layout: object) -> go.Figure:
    return go.Figure(data=data, layout=dict(template=report_template(), **layout))


def base_layout(*, title: str, width: int, height: int) -> dict[str, object]:
    """Layout keys every figure shares; give them to the constructor (one validation pass)."""
    return dict(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=16)),
        width=width,
        height=height,
        margin=dict(l=50, r=30, t=70, b=40),
    )


def figure_div(fig: go.Figure, div_id: str) -> str:
    """The figure as an HTML fragment that relies on plotly.js being on the page already.

    On a page the figure takes its container's width (the layout's fixed width
    is for static images), so a wide grid never hides its legend off-screen.
    """
    spec = fig.to_plotly_json()
    spec["layout"] = {k: v for k, v in spec["layout"].items() if k != "width"}
    return pio.to_html(
        spec,
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config=PLOTLY_CONFIG,
        default_width="100%",
        default_height=f"{fig.layout.height or 500}px",
        validate=False,
    )


def plotly_js() -> str:
    """plotly.js as shipped with plotly.py: pages embed it so they work offline."""
    return get_plotlyjs()
