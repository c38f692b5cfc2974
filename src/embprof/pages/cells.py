"""Tables turned into cells of text: one formatting for HTML and Markdown, so both show the
same numbers with the same rounding."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

MISSING = "—"


def as_number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan



Formatter = Callable[[Any], str]


def fmt_ms(value: Any) -> str:
    number = as_number(value)
    if math.isnan(number):
        return MISSING
    return f"{number:.3f}" if abs(number) >= 0.001 or number == 0 else f"{number:.2e}"


def _formatter(template: str) -> Formatter:
    """A cell formatter: ``template`` for numbers, the missing mark for anything else."""

    def fmt(value: Any) -> str:
        number = as_number(value)
        return MISSING if math.isnan(number) else template.format(number)

    return fmt


fmt_ratio = _formatter("{:.2f}×")
fmt_pct = _formatter("{:.1f}%")
fmt_signed_pct = _formatter("{:+.1f}%")
fmt_signed_ms = _formatter("{:+.3f}")
fmt_gbps = _formatter("{:,.1f}")
fmt_count = _formatter("{:,.0f}")
fmt_p = _formatter("{:.2g}")  # a p-value
fmt_us = _formatter("{:,.1f}")  # microseconds


def fmt_mb(value: Any) -> str:
    """Bytes as MB (10^6), the missing mark for none."""
    number = as_number(value)
    return MISSING if math.isnan(number) else f"{number / 1e6:,.3f}"


def fmt_calls(value: Any) -> str:
    number = as_number(value)
    if math.isnan(number):
        return MISSING
    return f"{number:,.0f}" if number == round(number) else f"{number:,.2f}"


def fmt_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return str(value) if str(value) else MISSING


@dataclass(frozen=True)
class Column:
    """``shorten``: on a page, texts longer than this many characters are cut in the middle,
    the full text on hover (0: never); Markdown keeps them whole. ``hover``: a column whose text
    a page shows on hover (a config's full label behind its short name)."""

    key: str
    title: str
    fmt: Formatter = fmt_text
    numeric: bool = False
    shorten: int = 0
    hover: str = ""


@dataclass(frozen=True)
class Cells:
    """A table ready to print: titles, per-column alignment, rows of strings."""

    titles: list[str]
    numeric: list[bool]
    rows: list[list[str]]
    shorten: list[int] = field(default_factory=list)
    # Per row, per column, the text a page shows on hover ('' for none); empty: none at all.
    hovers: list[list[str]] = field(default_factory=list)


def to_cells(frame: pd.DataFrame, columns: Sequence[Column]) -> Cells:
    rows = [
        [col.fmt(value) for col, value in zip(columns, values, strict=True)]
        for values in frame[[c.key for c in columns]].itertuples(index=False, name=None)
    ]
    hovers = []
    if any(c.hover for c in columns):
        keyed = [c.hover for c in columns]
        texts = frame[[k for k in keyed if k]].astype(str).to_dict("records")
        hovers = [[row[k] if k else "" for k in keyed] for row in texts]
    return Cells(
        [c.title for c in columns], [c.numeric for c in columns], rows, [c.shorten for c in columns],
        hovers,
    )


def shorten_middle(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis in the middle: kernel names differ
    at both ends (``split_embedding_nobag_backward_..._warp_per_row_1``), so both are kept."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit - 1) // 2 + (limit - 1) % 2
    tail = limit - 1 - head
    return f"{text[:head]}…{text[len(text) - tail:]}" if tail else f"{text[:head]}…"
