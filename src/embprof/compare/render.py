"""A comparison as tables: the views the report and ``embprof diff`` share, as text or Markdown."""

from __future__ import annotations

import pandas as pd

from embprof.compare.deltas import CHANGE, Comparison
from embprof.pages.cells import (
    Cells,
    Column,
    fmt_ms,
    fmt_p,
    fmt_pct,
    fmt_signed_ms,
    fmt_signed_pct,
    to_cells,
)
from embprof.report.markdown import md_code, md_table, md_text

TEST_NOTE = (
    "change: the Mann-Whitney U test on the two runs' samples gives p < {alpha:g} (two-sided) and "
    "|Δ %| exceeds the noise, the larger of the two spreads ((max − min) / median of the samples); "
    "untested: too few samples for the test ever to reach p < {alpha:g} (4 against 4 is the fewest). Samples: a "
    "config's repeats (its value: their median), an op's profiled iterations (its value: their mean)."
)
_STATS = (
    Column("delta_pct", "Δ %", fmt_signed_pct, True),
    Column("noise_pct", "noise %", fmt_pct, True),
    Column("p_value", "p", fmt_p, True),
    Column("shown_verdict", "verdict"),
)
CONFIG_VIEW = (
    Column("label", "config"),
    Column("metric", "metric"),
    Column("before_ms", "before ms", fmt_ms, True),
    Column("before_spread_pct", "± %", fmt_pct, True),
    Column("after_ms", "now ms", fmt_ms, True),
    Column("after_spread_pct", "± %", fmt_pct, True),
    Column("delta_ms", "Δ ms", fmt_signed_ms, True),
    *_STATS,
)
OP_VIEW = (
    Column("label", "config"),
    Column("backend", "backend"),
    Column("phase", "phase"),
    Column("op", "op"),
    Column("before_ms", "before ms/iter", fmt_ms, True),
    Column("after_ms", "now ms/iter", fmt_ms, True),
    Column("delta_ms", "Δ ms/iter", fmt_signed_ms, True),
    *_STATS,
)

LOST_VIEW = (Column("label", "config"), Column("metric", "metric"), Column("why", "now"))


def shown(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``shown_verdict``: a change reads slower or faster."""
    direction = rows["delta_ms"].gt(0).map({True: "slower", False: "faster"})
    return rows.assign(shown_verdict=rows["verdict"].where(rows["verdict"] != CHANGE, direction))


def config_cells(rows: pd.DataFrame) -> Cells:
    return to_cells(shown(rows), CONFIG_VIEW)


def op_cells(rows: pd.DataFrame) -> Cells:
    return to_cells(shown(rows), OP_VIEW)


def lost_cells(rows: pd.DataFrame) -> Cells:
    """The gate's metrics timed before and not now: config, metric, why."""
    return to_cells(rows, LOST_VIEW)


def text_table(cells: Cells) -> str:
    """Cells as aligned plain text, numbers right-aligned."""
    widths = [max([len(t), *(len(r[i]) for r in cells.rows)]) for i, t in enumerate(cells.titles)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if numeric else v.ljust(w)
            for v, w, numeric in zip(values, widths, cells.numeric, strict=True)
        ).rstrip()

    return "\n".join([line(cells.titles), line(["-" * w for w in widths]), *map(line, cells.rows)])


def render(comparison: Comparison, fmt: str, op_limit: int, gate: str = "") -> str:
    """The whole comparison (``fmt``: text or markdown), ending with ``gate``'s verdict if given."""
    table = md_table if fmt == "markdown" else text_table
    ops = comparison.largest_ops(op_limit)
    note = TEST_NOTE.format(alpha=comparison.alpha)
    if fmt == "markdown":
        parts = [f"### embprof diff: {md_code(comparison.old)} → {md_code(comparison.new)}", "",
                 f"**{md_text(comparison.tally())}**", ""]
        parts += [f"> **warning:** {md_text(w)}" for w in comparison.warnings] + ([""] if comparison.warnings else [])
        parts += ["**Per config** (ms per iteration)", "", table(config_cells(comparison.configs)), ""]
        if len(ops):
            parts += ["<details><summary>Per op: the largest moves</summary>", "", table(op_cells(ops)), "", "</details>", ""]
        parts += [f"<sub>{md_text(note)}</sub>", ""]
    else:
        parts = [f"embprof diff: {comparison.old} -> {comparison.new}", comparison.tally(), ""]
        parts += [f"warning: {w}" for w in comparison.warnings] + ([""] if comparison.warnings else [])
        parts += ["Per config (ms per iteration):", table(config_cells(comparison.configs)), ""]
        if len(ops):
            parts += ["Per op, the largest moves:", table(op_cells(ops)), ""]
        parts += [note, ""]
    if gate:
        parts += [gate, ""]
    return "\n".join(parts)
