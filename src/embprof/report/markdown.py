"""The Markdown summary that goes into a pull request beside the HTML report.

Every text that comes from a trace (range and kernel names), a log or the environment is
escaped before it is placed (:func:`md_text`, :func:`md_code`, :func:`md_fenced`): a
Markdown renderer shows it as the characters it is, never as HTML (``<script>``), a
link, emphasis or a broken table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from embprof.pages.cells import Cells

LOG_LINES = 8
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Markdown's own syntax in running text: a backslash escape shows the character itself. An
# underscore between two letters or digits is no emphasis, so labels and op names stay readable.
_SYNTAX = re.compile(r"[\\`*\[\]|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(text: object) -> str:
    """``text`` as Markdown that renders as exactly those characters, on one line."""
    flat = " ".join(str(text).splitlines())
    escaped = _SYNTAX.sub(lambda m: "\\" + m.group(0), flat)
    return "".join(_HTML.get(c, c) for c in escaped)


def md_code(text: object) -> str:
    """``text`` as an inline code span (no HTML is rendered in one), fenced by more backticks
    than it holds in a row."""
    flat = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_fenced(lines: Sequence[str], indent: str = "") -> list[str]:
    """``lines`` as a fenced code block whose fence no line can close."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{indent}{fence}", *(f"{indent}{line}" for line in lines), f"{indent}{fence}"]


def md_table(cells: Cells) -> str:
    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(md_text(v) for v in values) + " |"

    rule = ["---:" if numeric else "---" for numeric in cells.numeric]
    return "\n".join([line(cells.titles), "| " + " | ".join(rule) + " |", *map(line, cells.rows)])


@dataclass(frozen=True)
class FailedSummary:
    label: str
    step: str
    returncode: str
    log_tail: str


def _repeats(count: int | None) -> str:
    """The note's words for the repeats: their count where every config ran the same, else none (a column has them)."""
    return f"{count} repeats" if count is not None else "repeats"


def summary(
    *,
    title: str,
    ratios: str,
    environment_line: str,
    repeats: int | None = None,
    cpu_note: str,
    headline: Cells,
    failed: Sequence[FailedSummary],
    budget: Cells | None = None,
    top_ops: Cells,
    link: Cells | None = None,
    link_note: str = "",
    comparison_name: str | None = None,
    config_deltas: Cells | None = None,
    op_deltas: Cells | None = None,
    comparison_notes: Sequence[str] = (),
) -> str:
    """The summary; ``comparison_notes`` are Markdown (escape any text they carry with :func:`md_text`)."""
    parts = [f"# {title}", "", md_text(environment_line), ""]
    if cpu_note:
        parts += [f"> {cpu_note}", ""]
    parts += [
        "## Configs",
        "",
        f"Milliseconds per iteration, the median of the {_repeats(repeats)} (± %: (max − min) / median); "
        f"ratios are {ratios}.",
        "",
        md_table(headline),
        "",
    ]
    if budget is not None and budget.rows:
        parts += [
            "## Where a step's time goes",
            "",
            "ms per train iteration: timed (unprofiled median), profiled (the backend range until its "
            "device work is done), device busy in it, and the rest (see the report).",
            "",
            md_table(budget),
            "",
        ]
    if failed:
        parts += ["## Failed configs", ""]
        for item in failed:
            tail = item.log_tail.rstrip("\n").splitlines()[-LOG_LINES:]
            parts += [
                f"- {md_code(item.label)}: step **{md_text(item.step)}** failed (exit {md_text(item.returncode)})",
                "",
                *md_fenced(tail, indent="  "),
                "",
            ]
    parts += ["## Ops that cost most across configs", "", md_table(top_ops), ""]
    if link is not None and link.rows:
        parts += ["## Host traffic against the link", "", md_text(link_note), "", md_table(link), ""]
    if comparison_name is not None and config_deltas is not None and op_deltas is not None:
        parts += [f"## Changes against {md_code(comparison_name)}", ""]
        parts += [f"> {note}" for note in comparison_notes] + ([""] if comparison_notes else [])
        parts += [md_table(config_deltas), ""]
        if op_deltas.rows:
            parts += ["Largest per-op moves:", "", md_table(op_deltas), ""]
    parts += ["Full report with figures: `report/index.html`.", ""]
    return "\n".join(parts)
