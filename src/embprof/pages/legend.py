"""A config's legend tables (one per backend, the codes its sunburst uses) and the notes under them."""

from __future__ import annotations

import pandas as pd

from embprof.pages.cells import Column, fmt_calls, fmt_gbps, fmt_ms, fmt_pct
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
