"""A config's legend tables (one per backend, the codes its sunburst uses) and the notes under them."""

from __future__ import annotations

import pandas as pd

from embprof.pages.cells import Column, fmt_calls, fmt_gbps, fmt_mb, fmt_ms, fmt_pct
from embprof.plots.sunburst import assign_letter_codes, backends_present, legend_table
from embprof.results.busy import BusyTime

CPU_STAND_IN_NOTE = (
    "CPU leaf operators stand in for kernels: this profile came from the PyTorch "
    "profiler on a machine without a GPU, so times are CPU times of leaf operators."
)
# Names longer than this are cut in the middle on a page (the full name on hover): FBGEMM's
# kernel names run past 70 characters and would push the numbers off the screen.
NAME_CHARS = 38
# Numbers right after the op so they stay in view beside a sunburst; long stage paths go last.
LEGEND_VIEW = (
    Column("code", "code"),
    Column("op", "op", shorten=NAME_CHARS),
    Column("ms_per_iter", "ms/iter", fmt_ms, True),
    Column("pct_of_iter", "% of iter", fmt_pct, True),
    Column("calls_per_iter", "calls/iter", fmt_calls, True),
    Column("phase", "phase"),
    Column("stage", "stage", shorten=NAME_CHARS),
)
# With a bandwidth view: GB/s and % of peak beside the op's time (a dash: no bytes formula).
LEGEND_BANDWIDTH_VIEW = (
    *LEGEND_VIEW[:4],
    Column("achieved_gbps", "GB/s", fmt_gbps, True),
    Column("pct_of_peak", "% of peak", fmt_pct, True),
    *LEGEND_VIEW[4:],
)


# Columns from the trace that the breakdown writes since issue 19 (an op's host time, what copies and
# memsets moved),
# shown after calls/iter where the per-op CSV has them.
TRACE_VIEW = (
    Column("cpu_ms_per_iter", "CPU ms/iter", fmt_ms, True),
    Column("copy_bytes_per_iter", "MB/iter", fmt_mb, True),
    Column("memory_kinds", "memory", shorten=NAME_CHARS),
)


def legend_view(table: pd.DataFrame, bandwidth: bool = False) -> tuple[Column, ...]:
    """The legend's columns for ``table``: with GB/s and % of peak in a bandwidth view, and the
    trace's columns where the per-op CSV had them (older CSVs: none, rather than a dash each)."""
    view = LEGEND_BANDWIDTH_VIEW if bandwidth else LEGEND_VIEW
    at = next(i for i, c in enumerate(view) if c.key == "calls_per_iter") + 1
    held = tuple(c for c in TRACE_VIEW if c.key in table.columns and _holds_values(table[c.key]))
    return (*view[:at], *held, *view[at:])


def _holds_values(column: pd.Series) -> bool:
    return bool(column.astype(str).str.len().gt(0).any()) if column.dtype == object else bool(column.notna().any())


def config_legends(opcalls: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Backend -> legend table of one config, with the codes its sunburst uses."""
    codes = assign_letter_codes(opcalls)
    return {b: legend_table(opcalls, codes, b) for b in backends_present(opcalls)}


def busy_note(busy: BusyTime | None, backend: str) -> str:
    """A line under a sunburst: the backend's busy time when the breakdown measured it."""
    if busy is None or backend not in busy.ms_per_iter:
        return ""
    what = "CPU busy (leaf operators)" if busy.cpu_leaf_ops else "GPU busy"
    return f"{what}: {busy.ms_per_iter[backend]:.3f} ms per iteration"
