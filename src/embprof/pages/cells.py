"""Tables turned into cells of text: one formatting for HTML and Markdown, so both show the
same numbers with the same rounding."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    key: str
    title: str
    fmt: Formatter = fmt_text
    numeric: bool = False


@dataclass(frozen=True)
class Cells:
    """A table ready to print: titles, per-column alignment, rows of strings."""

    titles: list[str]
    numeric: list[bool]
    rows: list[list[str]]


def to_cells(frame: pd.DataFrame, columns: Sequence[Column]) -> Cells:
    rows = [
        [col.fmt(value) for col, value in zip(columns, values, strict=True)]
        for values in frame[[c.key for c in columns]].itertuples(index=False, name=None)
    ]
    return Cells([c.title for c in columns], [c.numeric for c in columns], rows)
