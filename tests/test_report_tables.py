"""Headline rows and number formatting: what a reader sees for ok, failed and missing configs."""

from __future__ import annotations

import math

import pytest
from report_inputs import LABELS, opcalls_frame, record

from embprof.pages.cells import fmt_ms, to_cells
from embprof.report.tables import HEADLINE_VIEW, headline, ratio, top_ops


def test_headline_ratios_and_failed_or_missing_configs():
    ok = record(LABELS[0])
    failed = record(LABELS[1], status="failed")
    no_trc = record(LABELS[4], trc=False)
    table = headline(
        [LABELS[0], LABELS[1], LABELS[2], LABELS[4]],
        {r["label"]: r for r in (ok, failed, no_trc)},
        {LABELS[2]: "profile"},
    ).set_index("label")
    assert table.loc[LABELS[0], "train_ratio"] == ok["dyn_train_ms"] / ok["trc_train_ms"]
    assert table.loc[LABELS[1], "status"] == "failed"
    assert math.isnan(table.loc[LABELS[1], "dyn_train_ms"])  # a failed run's numbers are not shown
    assert table.loc[LABELS[2], "status"] == "failed: profile"
    assert math.isnan(table.loc[LABELS[4], "train_ratio"])
    assert "ADAM" in table.loc[LABELS[4], "trc_note"]
    cells = to_cells(table.reset_index().assign(name="short"), HEADLINE_VIEW)  # the report adds short names
    row = cells.rows[3]
    assert [row[2], row[4], row[5], row[6]] == [fmt_ms(no_trc["dyn_train_ms"]), "—", "—", "—"]
    assert row[3] == "7.0%"  # dyn's repeats span 0.97..1.04 of their median


def test_ratio_and_ms_formatting_edge_cases():
    assert math.isnan(ratio(1.0, 0.0)) and math.isnan(ratio(math.nan, 1.0))
    assert fmt_ms(None) == "—" and fmt_ms(0.0) == "0.000" and fmt_ms(0.0004) == "4.00e-04"


def test_top_ops_sum_over_configs_and_rank_by_total():
    frames = {"a": opcalls_frame(1.0), "b": opcalls_frame(2.0, with_trc=False)}
    table = top_ops(frames, limit=3)
    assert table.iloc[0][["backend", "op", "configs"]].tolist() == ["dyn", "reduce_grads", 2]
    assert table.iloc[0]["total_ms_per_iter"] == pytest.approx(0.52 * 3)
    assert table.iloc[0]["costliest_config"] == "b"
    assert table["total_ms_per_iter"].is_monotonic_decreasing and len(table) == 3
    assert top_ops({}).empty
