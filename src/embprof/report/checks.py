"""Checks that make a GPU run's numbers trustworthy, written down beside its report.

- Consistency: per config and backend, the per-op rows add up to the backend's
  GPU-busy time per iteration in the same trace (the union of its kernels and
  copies). Rows count overlapping work twice and the union once, so a gap means
  concurrency, or work the rows missed.
- Profiler overhead: each backend's profiled iteration (the wall time of its
  ``dyn``/``trc`` ranges in the trace) against the unprofiled timing run's
  train ms of the same config.
- DynamicEmb against TBE per suite, beside the reference system's published
  H100 ratios.
- Where the run holds them (``results/crosscheck/``), each config's per-op rows
  against Nsight Systems' ``nvtx_kern_sum`` and NVIDIA's ``nsys_breakdown.py`` on
  the same trace (:mod:`embprof.report.crosscheck`).

    embprof checks results/ --out examples/h200/CHECKS.md

Every check reads the run (:class:`~embprof.results.run.Run`): the configs it shows are
those whose per-op files are of the run.
"""

from __future__ import annotations

import pandas as pd

from embprof.labels import parse_label
from embprof.report.budget import overhead_pct
from embprof.report.crosscheck import crosscheck, crosscheck_markdown
from embprof.report.markdown import md_text
from embprof.results.run import Run

CONSISTENCY_TOLERANCE = 0.05
# NVIDIA dynamicemb's published training-time ratios to TBE on an H100 (dyn / trc):
# (mode, optimizer, cache footprint ratio) -> ratio.
REFERENCE_H100_RATIOS = {
    ("gpu", "sgd", None): 2.0,
    ("gpu", "adam", None): 1.6,
    ("caching", "sgd", 1.0): 2.6,
    ("caching", "adam", 1.0): 0.86,
}


def consistency(run: Run) -> pd.DataFrame:
    """Per config shown and backend: summed per-op ms per iteration against GPU-busy ms per iteration."""
    rows = []
    for label, ops in run.opcalls.items():
        busy = run.busy.get(label)
        if busy is None:
            continue
        summed = ops.groupby("backend")["avg_ms_per_iter"].sum()
        for backend, busy_ms in sorted(busy.ms_per_iter.items()):
            ops_ms = float(summed.get(backend, 0.0))
            rows.append({
                "label": label, "backend": backend, "ops_ms_per_iter": ops_ms, "busy_ms_per_iter": busy_ms,
                "ops_over_busy": ops_ms / busy_ms if busy_ms else float("nan"),
            })
    table = pd.DataFrame(rows, columns=["label", "backend", "ops_ms_per_iter", "busy_ms_per_iter", "ops_over_busy"])
    table["within_5pct"] = (table["ops_over_busy"] - 1).abs() <= CONSISTENCY_TOLERANCE
    return table


MEASURES = {True: "range + its device work", False: "host range only"}


def overhead(run: Run) -> pd.DataFrame:
    """Per config shown and backend: profiled iteration ms against the unprofiled train ms, and how it
    was measured."""
    rows = []
    for record in _ok(run.records):
        busy = run.busy.get(record["label"])
        if busy is None:
            continue
        for backend, profiled in sorted(busy.range_ms_per_iter.items()):
            timed = record.get(f"{backend}_train_ms")
            if timed:
                rows.append({
                    "label": record["label"], "backend": backend, "profiled_ms_per_iter": profiled,
                    "timed_train_ms": timed, "overhead_pct": overhead_pct(profiled, timed),
                    "measured_as": MEASURES[busy.range_until_device_done],
                })
    columns = ["label", "backend", "profiled_ms_per_iter", "timed_train_ms", "overhead_pct", "measured_as"]
    return pd.DataFrame(rows, columns=columns)


def against_reference(records: list[dict]) -> pd.DataFrame:
    """DynamicEmb / TBE training time per config, with the reference system's H100 ratio where published."""
    rows = []
    for record in records:
        dyn, trc = record.get("dyn_train_ms"), record.get("trc_train_ms")
        if not dyn or not trc:
            continue
        fields = parse_label(record["label"])
        key = (fields.mode, fields.optimizer, fields.cache_footprint_ratio)
        rows.append({
            "label": record["label"], "mode": fields.mode, "optimizer": fields.optimizer,
            "cfr": fields.cache_footprint_ratio, "dyn_train_ms": dyn, "trc_train_ms": trc,
            "dyn_over_trc": dyn / trc, "reference_h100": REFERENCE_H100_RATIOS.get(key),
        })
    columns = ["label", "mode", "optimizer", "cfr", "dyn_train_ms", "trc_train_ms", "dyn_over_trc", "reference_h100"]
    return pd.DataFrame(rows, columns=columns)


def _md(table: pd.DataFrame, floats: str = "{:.3f}") -> str:
    if table.empty:
        return "(nothing to check)\n"
    shown = table.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = shown[column].map(lambda v: "—" if pd.isna(v) else floats.format(v))
    header = "| " + " | ".join(map(md_text, shown.columns)) + " |\n| " + " | ".join("---" for _ in shown.columns) + " |\n"
    return header + "".join("| " + " | ".join(map(md_text, row)) + " |\n" for row in shown.itertuples(index=False))


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status", "ok") == "ok"]


def _crosscheck(run: Run) -> str:
    """Per op against the tools' breakdowns kept in the run's folder (none for a database's run)."""
    if run.paths is None:
        return ""
    return crosscheck_markdown(crosscheck(run.paths.root, run.opcalls))


def checks_markdown(run: Run) -> str:
    """The three checks of ``run`` as Markdown."""
    sums = consistency(run)
    passed = int(sums["within_5pct"].sum())
    return (
        "## Per-op rows against GPU-busy time\n\n"
        f"Per config and backend, the per-op rows' ms per iteration summed, against the union of the "
        f"backend's device work per iteration in the same trace: {passed} of {len(sums)} within "
        f"{CONSISTENCY_TOLERANCE:.0%}.\n\n" + _md(sums)
        + "\n## Profiled iteration against the unprofiled timing\n\n"
        "Time per profiled iteration of each backend (nsys running) against the timing run's train ms "
        "(no profiler) of the same config. `range + its device work`: from the backend range's start until "
        "the range and the device work launched in it are done, as the timing run measures a step. "
        "`host range only` (sidecars written before that rule): the range's host time, which for a "
        "backend that does not wait for its GPU work ends before that work does and is no iteration "
        "time.\n\n" + _md(overhead(run), "{:.2f}")
        + "\n## DynamicEmb against TBE, beside the reference system\n\n"
        "Train ms per iteration, dyn / trc, with NVIDIA dynamicemb's published H100 ratio where there is "
        "one.\n\n" + _md(against_reference(_ok(run.records)), "{:.2f}")
        + "".join("\n" + part for part in (_crosscheck(run),) if part)
    )
