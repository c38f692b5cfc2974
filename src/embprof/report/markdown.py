"""The Markdown summary that goes into a pull request beside the HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from embprof.pages.cells import Cells

LOG_LINES = 8


def md_table(cells: Cells) -> str:
    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|").replace("\n", " ") for v in values) + " |"

    rule = ["---:" if numeric else "---" for numeric in cells.numeric]
    return "\n".join([line(cells.titles), "| " + " | ".join(rule) + " |", *map(line, cells.rows)])


@dataclass(frozen=True)
class FailedSummary:
    label: str
    step: str
    returncode: str
    log_tail: str


def summary(
    *,
    title: str,
    environment_line: str,
    cpu_note: str,
    headline: Cells,
    failed: Sequence[FailedSummary],
    budget: Cells | None = None,
    top_ops: Cells,
    comparison_name: str | None = None,
    config_deltas: Cells | None = None,
    op_deltas: Cells | None = None,
    comparison_notes: Sequence[str] = (),
) -> str:
    parts = [f"# {title}", "", environment_line, ""]
    if cpu_note:
        parts += [f"> {cpu_note}", ""]
    parts += [
        "## Configs",
        "",
        "Milliseconds per iteration, the median of the repeats (± %: (max − min) / median); "
        "ratios are dyn / trc.",
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
                f"- `{item.label}`: step **{item.step}** failed (exit {item.returncode})",
                "",
                "  ```",
                *(f"  {line}" for line in tail),
                "  ```",
                "",
            ]
    parts += ["## Ops that cost most across configs", "", md_table(top_ops), ""]
    if comparison_name is not None and config_deltas is not None and op_deltas is not None:
        parts += [f"## Changes against `{comparison_name}`", ""]
        parts += [f"> {note}" for note in comparison_notes] + ([""] if comparison_notes else [])
        parts += [md_table(config_deltas), ""]
        if op_deltas.rows:
            parts += ["Largest per-op moves:", "", md_table(op_deltas), ""]
    parts += ["Full report with figures: `report/index.html`.", ""]
    return "\n".join(parts)
