"""Headline rows and number formatting: what a reader sees for ok, failed and missing configs."""

from __future__ import annotations

import math

import pandas as pd
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


def test_nvidias_columns_show_only_where_a_record_times_it():
    """Issue 31: the summary gains NVIDIA's dynamicemb and ours against it, where a record has nv times."""
    from embprof.report.tables import headline_view

    two = record(LABELS[0])
    three = {**record(LABELS[1]), "nv_train_ms": 2.0, "nv_eval_ms": 0.5}
    without = headline([LABELS[0]], {LABELS[0]: two}, {})
    assert "nv train ms" not in [c.title for c in headline_view(without, HEADLINE_VIEW)]
    table = headline([LABELS[0], LABELS[1]], {LABELS[0]: two, LABELS[1]: three}, {}).set_index("label")
    assert table.loc[LABELS[1], "nv_ratio"] == three["dyn_train_ms"] / 2.0
    assert table.loc[LABELS[1], "nv_eval_ratio"] == three["dyn_eval_ms"] / 0.5
    assert math.isnan(table.loc[LABELS[0], "nv_ratio"])
    titles = [c.title for c in headline_view(table.reset_index(), HEADLINE_VIEW)]
    assert {"nv train ms", "train dyn/nv", "eval dyn/nv"} <= set(titles)


def test_repeats_are_a_column_only_where_configs_differ():
    """Every config at 5 repeats: the note says 5 and no column repeats it; 5 and 4: a column."""
    from embprof.report.tables import headline_view, uniform_repeats

    same = headline([LABELS[0], LABELS[1]], {LABELS[0]: record(LABELS[0]), LABELS[1]: record(LABELS[1])}, {})
    assert uniform_repeats(same) == same["repeats"].iloc[0]
    assert "repeats" not in [c.key for c in headline_view(same, HEADLINE_VIEW)]
    differ = same.assign(repeats=[5, 4])
    assert uniform_repeats(differ) is None
    assert "repeats" in [c.key for c in headline_view(differ, HEADLINE_VIEW)]


def test_the_title_names_nvidias_library_where_it_ran():
    from embprof.report.build import report_title

    assert report_title(False) == "DynamicEmb vs TorchRec TBE: latency report"
    assert report_title(True) == "DynamicEmb vs TorchRec TBE and NVIDIA dynamicemb: latency report"


def test_ops_of_the_same_name_side_by_side_across_backends():
    """dyn's and nv's op rows of one name (over stages) beside each other per phase; TBE's kernels are
    under no op; one backend alone gives no table."""
    from embprof.report.tables import across_view, ops_across_backends

    frame = opcalls_frame()
    dyn_ops = frame[(frame["backend"] == "dyn") & (frame["fallback_category"] == "")]
    assert ops_across_backends(frame).empty
    nv = dyn_ops.assign(backend="nv", avg_ms_per_iter=dyn_ops["avg_ms_per_iter"] * 2)
    table = ops_across_backends(pd.concat([frame, nv], ignore_index=True))
    assert list(table.columns[:4]) == ["phase", "op", "dyn_ms", "nv_ms"]
    assert (table["dyn_over_nv"] == 0.5).all()
    want = dyn_ops.groupby(["phase", "op"])["avg_ms_per_iter"].sum()
    assert table.set_index(["phase", "op"])["dyn_ms"].sort_index().tolist() == pytest.approx(want.sort_index().tolist())
    assert [c.title for c in across_view(table)][-1] == "dyn/nv"
