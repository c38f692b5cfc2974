"""HTML pages from Jinja templates: plotly.js inline once per page, figures as inline JSON."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup, escape

from embprof.pages.cells import Cells, shorten_middle, to_cells
from embprof.pages.legend import legend_view
from embprof.plots.figures import plotly_js


@dataclass(frozen=True)
class LegendItem:
    """One backend's legend table; in the report also its own sunburst, drawn beside it."""

    title: str
    note: str
    cells: Cells
    figure_id: str = ""
    figure_div: str = ""


# After these characters, and between a lower-case letter and an upper-case one.
_BREAKS = re.compile(r"[_/.]|[a-z](?=[A-Z])")


def breakable(text: str) -> Markup:
    """``text`` escaped, with a line-break opportunity after each ``_``, ``/`` and ``.`` and inside
    camel case (``Device|Radix|Sort``): a config label, a stage path or a kernel name wraps at its
    parts instead of widening its table or being cut mid-word."""
    return Markup(_BREAKS.sub(r"\g<0><wbr>", str(escape(text))))


@cache
def _environment(packages: tuple[str, ...]) -> jinja2.Environment:
    """Templates of ``packages`` (their ``templates/`` folders, first wins), then this package's."""
    loaders = [jinja2.PackageLoader(p, "templates") for p in (*packages, "embprof.pages")]
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shorten_middle"] = shorten_middle
    env.filters["breakable"] = breakable
    return env


def render(template: str, packages: tuple[str, ...] = (), plotly_src: str | None = None, **context: Any) -> str:
    """Render a page; ``*_div`` values and plotly.js are trusted HTML made by plotly.

    ``plotly_src``: a (relative) URL of plotly.js for the page to load; None inlines it,
    so that the page opens anywhere on its own.
    """
    env = _environment(packages)
    inline = Markup(plotly_js()) if plotly_src is None else ""
    return env.get_template(template).render(plotly_js=inline, plotly_src=plotly_src, **context)


def legend_items(
    legends: dict[str, pd.DataFrame],
    notes: dict[str, str],
    names: dict[str, str],
    figures: dict[str, tuple[str, str]] | None = None,
    bandwidth: bool = False,
) -> list[LegendItem]:
    """Legend tables per backend; ``figures`` maps a backend to (figure id, figure div)."""
    figures = figures or {}
    return [
        LegendItem(
            title=names.get(b, b),
            note=notes.get(b, ""),
            cells=to_cells(t, legend_view(t, bandwidth)),
            figure_id=figures.get(b, ("", ""))[0],
            figure_div=Markup(figures.get(b, ("", ""))[1]),
        )
        for b, t in legends.items()
    ]


def figure_page(
    title: str, figure_id: str, figure_div: str, items: list[LegendItem], note: str = "",
    plotly_src: str | None = None,
) -> str:
    """A page of its own for one figure (and its legend tables), readable offline; with
    ``plotly_src`` it loads plotly.js from there instead of holding a copy."""
    return render(
        "figure_page.html.j2",
        plotly_src=plotly_src,
        title=title,
        figure_id=figure_id,
        figure_div=Markup(figure_div),
        legend_items=items,
        note=note,
    )
