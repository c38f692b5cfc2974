"""The breakdown per op against the two its users already have, on the same traces.

``tools/gpu_host/reference_breakdowns.sh`` writes, per profiled config, into
``results/crosscheck/``:

- ``nvtx_kern_sum__<label>.csv``: Nsight Systems' ``nsys stats -r nvtx_kern_sum``
  (per NVTX range name and kernel name, the kernels launched inside the range on
  its own thread; a kernel inside nested ranges counts in each);
- ``nsys_breakdown__<label>.csv``: NVIDIA's ``benchmark/nsys_breakdown.py``
  (the ``dyn`` backend's kernels under the innermost ``op:*`` range of one stack
  over all threads; its ``total_ms`` is over every profiled iteration).

Per op, the workflow's kernel rows of one backend against each: its rows of that
op and the rows under it (inclusive) against ``nvtx_kern_sum``'s range ``op:<name>``,
its rows of that op (the innermost op) against NVIDIA's script. Copies and
memsets are left out: neither tool counts them under an op.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from embprof.errors import ContractError

FOLDER = "crosscheck"
TOLERANCE = 0.005  # the largest relative difference per op that counts as agreeing
COLUMNS = ["label", "op", "ours_inclusive_ms", "nvtx_kern_sum_ms", "ours_innermost_ms", "nsys_breakdown_ms",
           "max_rel_diff", "agrees"]


def _csv(path: Path, what: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as error:
        raise ContractError(f"{path}: not {what} ({str(error).splitlines()[0] if str(error) else error})") from None


def read_nvtx_kern_sum(path: Path) -> dict[str, float]:
    """Per op name (the range ``op:<name>``, push/pop ranges only), its kernels' total ms."""
    table = _csv(path, "an nvtx_kern_sum CSV")
    range_col = next((c for c in ("NVTX Range", "Range") if c in table), None)
    time_col, scale = next(((c, s) for c, s in (("Total Time (ns)", 1e-6), ("Total Time (us)", 1e-3),
                                                ("Total Time (ms)", 1.0)) if c in table), (None, 1.0))
    if range_col is None or time_col is None:
        raise ContractError(f"{path}: not an nvtx_kern_sum CSV (no 'NVTX Range' and 'Total Time' columns)")
    if "Style" in table:
        table = table[table["Style"].astype(str).str.lower().isin(["pushpop", ""])]
    # The default domain's ranges may come as ':op:name' (domain, colon, name).
    name = table[range_col].astype(str).str.replace(r"^:", "", regex=True)
    ops = name.str.startswith("op:")
    totals = pd.to_numeric(table.loc[ops, time_col], errors="coerce") * scale
    if totals.isna().any():
        raise ContractError(f"{path}: a total time that is not a number")
    return totals.groupby(name[ops].str.slice(3)).sum().to_dict()


def read_nsys_breakdown(path: Path) -> dict[str, float]:
    """Per op name, NVIDIA's script's total ms over its rows of that op (``dyn`` only, kernels only)."""
    table = _csv(path, "an nsys_breakdown.py CSV")
    if not {"op", "total_ms"} <= set(table.columns):
        raise ContractError(f"{path}: not an nsys_breakdown.py CSV (no 'op' and 'total_ms' columns)")
    wrapped = table["fallback_category"].astype(str) == "" if "fallback_category" in table else True
    rows = table[wrapped]
    return pd.to_numeric(rows["total_ms"], errors="coerce").groupby(rows["op"].astype(str)).sum().to_dict()


def ours_per_op(opcalls: pd.DataFrame, backend: str = "dyn") -> tuple[dict[str, float], dict[str, float]]:
    """Per op name, total ms of the backend's kernel rows: under it at any depth, and as the innermost op."""
    rows = opcalls[(opcalls["backend"] == backend) & opcalls["copy_bytes_per_iter"].isna()
                   & (opcalls["fallback_category"].astype(str) == "")]
    innermost = rows.groupby("op")["total_ms"].sum().to_dict()
    inclusive: dict[str, float] = {}
    for stages, op, total in zip(rows["parent_stages"].astype(str), rows["op"], rows["total_ms"], strict=True):
        names = {op} | {s[3:] for s in stages.split("/") if s.startswith("op:")}
        for name in names:
            inclusive[name] = inclusive.get(name, 0.0) + float(total)
    return inclusive, innermost


def _rel(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def crosscheck(results: Path, opcalls: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per config and op found by any of the three, for the configs of ``opcalls`` (label ->
    per-op table) whose two tools' files lie in the results folder ``results``; empty where none has."""
    rows = []
    folder = Path(results) / FOLDER
    for label in opcalls:
        kern, script = folder / f"nvtx_kern_sum__{label}.csv", folder / f"nsys_breakdown__{label}.csv"
        if not (kern.is_file() and script.is_file()):
            continue
        by_range, by_script = read_nvtx_kern_sum(kern), read_nsys_breakdown(script)
        inclusive, innermost = ours_per_op(opcalls[label])
        for op in sorted(set(by_range) | set(by_script) | set(inclusive)):
            pairs = [(inclusive.get(op, 0.0), by_range.get(op, 0.0)), (innermost.get(op, 0.0), by_script.get(op, 0.0))]
            worst = max(_rel(a, b) for a, b in pairs)
            rows.append({"label": label, "op": op, "ours_inclusive_ms": pairs[0][0], "nvtx_kern_sum_ms": pairs[0][1],
                         "ours_innermost_ms": pairs[1][0], "nsys_breakdown_ms": pairs[1][1],
                         "max_rel_diff": worst, "agrees": worst <= TOLERANCE and not math.isnan(worst)})
    return pd.DataFrame(rows, columns=COLUMNS)


def crosscheck_markdown(table: pd.DataFrame) -> str:
    """The CHECKS.md section: every op of every config, and the verdict."""
    if table.empty:
        return ""
    agree = int(table["agrees"].sum())
    lines = [
        "## Per op against Nsight Systems and NVIDIA's script",
        "",
        "The same trace of each config broken down three ways (DESIGN.md, \"Attribution rule\"): the "
        "`dyn` kernel rows here, per op with the ops nested in it, against Nsight Systems' "
        "`nsys stats -r nvtx_kern_sum` (range `op:<name>`); per innermost op against NVIDIA's "
        "`benchmark/nsys_breakdown.py`. Total ms over the profiled iterations; they agree within "
        f"{TOLERANCE:.1%} per op in {agree} of {len(table)} op rows.",
        "",
        "| config | op | ours (with nested) | nvtx_kern_sum | ours (innermost) | nsys_breakdown.py | max diff | agrees |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.label} | {r.op} | {r.ours_inclusive_ms:.3f} | {r.nvtx_kern_sum_ms:.3f} | "
                     f"{r.ours_innermost_ms:.3f} | {r.nsys_breakdown_ms:.3f} | {r.max_rel_diff:.3%} | "
                     f"{'yes' if r.agrees else '**no**'} |")
    return "\n".join(lines) + "\n"
