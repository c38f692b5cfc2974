"""The latency plot: grid of optimizer rows and suite panels, stacked train bars, log toggle."""

from __future__ import annotations

import pytest
from report_inputs import LABELS, record

from embprof.plots.latency import latency_figure, timed_configs


@pytest.fixture(scope="module")
def records():
    recs = [record(label, 1 + i / 10, trc="adam" not in label) for i, label in enumerate(LABELS)]
    recs[3]["status"] = "failed"  # the no_caching config: timing crashed
    return recs


@pytest.fixture(scope="module")
def fig(records):
    return latency_figure(records)


def test_grid_has_a_row_per_optimizer_and_a_panel_per_suite(fig):
    titles = [a.text for a in fig.layout.annotations if "·" in a.text]
    panels = ["GPU", "Caching cfr=0.5", "Caching cfr=1", "NoHBM"]  # NoCaching only had a failure
    assert titles == [f"{o} · {p}" for o in ("adam", "exact_rowwise_adagrad", "sgd") for p in panels]
    empty = [a for a in fig.layout.annotations if a.text == "no config in this suite"]
    assert len(empty) == 12 - 5


def test_train_bars_stack_forward_and_backward_beside_eval_per_backend(fig):
    assert len({t.xaxis for t in fig.data}) == 5  # the five panels that hold a timed config
    by_name = {t.name: t for t in fig.data if t.customdata[0][0] == LABELS[0]}
    assert set(by_name) == {f"{b} {p}" for b in ("dyn", "trc") for p in ("forward", "backward", "eval")}
    fwd, bwd = by_name["dyn forward"], by_name["dyn backward"]
    assert fwd.offsetgroup == bwd.offsetgroup != by_name["dyn eval"].offsetgroup
    assert bwd.base == fwd.y
    eval_bar = by_name["dyn eval"]
    assert eval_bar.marker.pattern.shape == "/" and eval_bar.marker.pattern.fillmode == "overlay"
    assert eval_bar.marker.color == "#3D85C6"
    assert by_name["trc forward"].offsetgroup != fwd.offsetgroup
    assert fig.layout.barmode == "group"


def test_missing_trc_and_failed_configs_draw_no_bars(records, fig):
    labels = {t.customdata[0][0] for t in fig.data}
    assert LABELS[3] not in labels
    adam = [t for t in fig.data if t.customdata[0][0] == LABELS[4]]
    assert {t.name for t in adam} == {"dyn forward", "dyn backward", "dyn eval"}
    assert [t.label for t in timed_configs(records)] == sorted(set(LABELS) - {LABELS[3]})


def test_each_series_appears_once_in_the_legend(fig):
    shown = [t.name for t in fig.data if t.showlegend]
    assert sorted(shown) == sorted({t.name for t in fig.data})


def test_log_toggle_switches_every_y_axis(fig):
    (menu,) = fig.layout.updatemenus
    linear, log = menu.buttons
    axes = {name for name in fig.layout if name.startswith("yaxis")}
    assert linear.method == log.method == "relayout"
    assert log.args[0] == {f"{axis}.type": "log" for axis in axes}
    assert linear.args[0] == {f"{axis}.type": "linear" for axis in axes}
    assert len(axes) == 12


def test_no_timed_config_still_gives_a_figure():
    fig = latency_figure([record(LABELS[0], status="failed")])
    assert len(fig.data) == 0
    assert fig.layout.annotations[-1].text == "no config timed successfully"


def test_error_bars_span_the_fastest_to_the_slowest_repeat(records, fig):
    rec = records[0]
    by_name = {t.name: t for t in fig.data if t.customdata[0][0] == LABELS[0]}
    bwd, evl, fwd = by_name["dyn backward"], by_name["dyn eval"], by_name["dyn forward"]
    assert fwd.error_y.array is None  # the bars of a train stack share one, on its top
    top = bwd.base[0] + bwd.y[0]
    train = rec["timings"]["dyn_train_ms"]
    assert top + bwd.error_y.array[0] == pytest.approx(train["max"])
    assert top - bwd.error_y.arrayminus[0] == pytest.approx(train["min"])
    assert evl.y[0] + evl.error_y.array[0] == pytest.approx(rec["timings"]["dyn_eval_ms"]["max"])
    assert bwd.customdata[0][2] == f"{train['min']:.3f} to {train['max']:.3f} ms"  # in the hover
    # records from before repeats: one value each, no error bars
    old = {k: v for k, v in rec.items() if k not in ("repeats", "timer", "timings")}
    bars = [t for t in latency_figure([old]).data if t.name in ("dyn backward", "dyn eval")]
    assert bars and all(t.error_y.array is None for t in bars)


def test_nvidias_dynamicemb_draws_its_own_bars_where_a_record_times_it():
    """Issue 31: a record with nv times gets nv's forward, backward and eval bars beside dyn's and trc's."""
    timed = record(LABELS[0]) | {"nv_forward_ms": 1.0, "nv_backward_ms": 2.0, "nv_train_ms": 3.0, "nv_eval_ms": 0.5}
    fig = latency_figure([timed, record(LABELS[1])])
    names = {t.name for t in fig.data if t.customdata[0][0] == LABELS[0]}
    assert {"nv forward", "nv backward", "nv eval"} <= names
    nv = {t.name: t for t in fig.data if t.name.startswith("nv")}
    assert nv["nv backward"].base == nv["nv forward"].y and list(nv["nv forward"].y) == [1.0]
    assert all(t.customdata[0][0] == LABELS[0] for t in nv.values())  # the other record timed no nv
