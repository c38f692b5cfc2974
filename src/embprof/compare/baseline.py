"""TBE as the control of a comparison: its code is the same in both runs unless a library
version differs, so where TBE's times changed the machine did, and dyn's changes in those
configs may be the machine's too (docs/COMPARE.md, "Warnings")."""

from __future__ import annotations

import pandas as pd

from embprof.compare.deltas import CHANGE
from embprof.compare.environment import facts
from embprof.results.run import Run

BASELINE_METRICS = ("trc_train_ms", "trc_eval_ms")
# What TBE's times depend on besides the machine: where the runs differ on one of them, TBE's move
# has a cause that its own warning names.
BASELINE_FACTS = ("device", "GPU", "timer", "torch", "fbgemm_gpu", "torchrec", "torch threads")


def baseline_warnings(configs: pd.DataFrame, old: Run, new: Run) -> list[str]:
    """One line naming the configs where TBE changed although nothing it depends on differs."""
    before, after = facts(old), facts(new)
    if any(before[f] and after[f] and before[f] != after[f] for f in BASELINE_FACTS):
        return []
    changed = configs["verdict"] == CHANGE
    baseline = configs["metric"].isin(BASELINE_METRICS)
    moved = configs[changed & baseline]
    if moved.empty:
        return []
    labels = list(dict.fromkeys(moved["label"]))
    dyn = int((changed & ~baseline & configs["label"].isin(labels)).sum())
    details = "; ".join(
        f"{label} " + ", ".join(f"{r.metric} {r.delta_pct:+.0f}%" for r in moved[moved["label"] == label].itertuples())
        for label in labels
    )
    there = f"dyn's {dyn} change{'s' if dyn != 1 else ''} there may be the machine's" if dyn else "dyn did not change there"
    return [
        f"TBE changed in {len(labels)} config{'s' if len(labels) != 1 else ''} with the same torch, fbgemm_gpu "
        f"and device in both runs, so the machine differs: {details}; {there}"
    ]
