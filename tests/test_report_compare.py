"""Deltas against a previous results folder: per config and metric, per op."""

from __future__ import annotations

import pandas as pd
import pytest

from embprof.report import compare


def test_config_deltas_mark_new_and_removed_configs():
    now = [
        {"label": "a", "dyn_train_ms": 2.0, "trc_train_ms": 1.0},
        {"label": "n", "dyn_train_ms": 1.0},
    ]
    before = [
        {"label": "a", "dyn_train_ms": 1.0, "trc_train_ms": 1.0},
        {"label": "r", "dyn_train_ms": 3.0},
        {"label": "f", "dyn_train_ms": 9.0, "status": "failed"},
    ]
    deltas = compare.config_deltas(now, before)
    rows = {(r.label, r.metric): r for r in deltas.itertuples()}
    assert (
        rows[("a", "dyn_train_ms")].delta_ms == 1.0
        and rows[("a", "dyn_train_ms")].delta_pct == 100.0
    )
    assert rows[("a", "trc_train_ms")].delta_pct == 0.0
    assert rows[("n", "dyn_train_ms")].change == "new"
    assert rows[("r", "dyn_train_ms")].change == "removed"
    assert not any(label == "f" for label, _ in rows)
    assert ("a", "dyn_eval_ms") not in rows  # measured in neither run


def test_op_deltas_rank_by_absolute_change_and_count_missing_ops_as_zero():
    def frame(ops):
        return pd.DataFrame(
            [("dyn", "forward", "", op, 1.0, ms) for op, ms in ops],
            columns=[
                "backend",
                "phase",
                "parent_stages",
                "op",
                "calls_per_iter",
                "avg_ms_per_iter",
            ],
        )

    now = {"c": frame([("x", 1.0), ("y", 0.2), ("new", 0.5)])}
    before = {"c": frame([("x", 0.4), ("y", 0.35), ("old", 0.1)]), "gone": frame([("x", 9.0)])}
    deltas = compare.op_deltas(now, before)
    assert deltas["op"].tolist() == ["x", "new", "y", "old"]
    assert deltas["delta_ms"].tolist() == pytest.approx([0.6, 0.5, -0.15, -0.1])
    assert deltas.loc[deltas.op == "x", "delta_pct"].item() == pytest.approx(150.0)
    assert deltas.loc[deltas.op == "new", "delta_pct"].isna().item()
