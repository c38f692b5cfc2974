"""The comparison of two runs: per-config and per-op verdicts, environment warnings, the gate."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from report_inputs import LABELS, opcalls_frame, record, samples_frame

from embprof.compare import (
    CHANGE,
    METRICS,
    NEW,
    NOISE,
    REMOVED,
    UNTESTED,
    Run,
    compare_runs,
    gate_failures,
    gate_untested,
)
from embprof.compare.render import render, shown
from embprof.results.provenance import FIELDS
from embprof.results.timings import TIMING_METRICS, timing_entry


def scaled(rec: dict, factor: float, metrics=TIMING_METRICS) -> dict:
    """The record with the repeats of ``metrics`` times ``factor``, summaries and medians recomputed."""
    out = copy.deepcopy(rec)
    for metric in metrics:
        if out["timings"][metric] is not None:
            out["timings"][metric] = timing_entry([v * factor for v in out["timings"][metric]["repeats"]])
            out[metric] = out["timings"][metric]["median"]
    return out


def with_repeats(rec: dict, metric: str, values: list[float]) -> dict:
    out = copy.deepcopy(rec)
    out["timings"][metric] = timing_entry(values)
    out[metric] = out["timings"][metric]["median"]
    return out


def run(name: str, records: list[dict], opcalls: dict | None = None, environment: dict | None = None,
        samples: dict | None = None) -> Run:
    """A run of these parts; its per-op tables' samples as the breakdown writes them unless given."""
    opcalls = opcalls or {}
    samples = {label: samples_frame(frame) for label, frame in opcalls.items()} if samples is None else samples
    return Run(name, records, opcalls, environment or {}, samples=samples)


def rows(comparison, label: str) -> dict[str, pd.Series]:
    return {r.metric: r for r in comparison.configs[comparison.configs.label == label].itertuples()}


def test_the_same_run_twice_has_no_change():
    records = [record(label) for label in LABELS[:3]]
    frames = {label: opcalls_frame() for label in LABELS[:3]}
    same = compare_runs(run("a", records, frames), run("b", copy.deepcopy(records), frames))
    assert set(same.configs["verdict"]) == {NOISE} and set(same.ops["verdict"]) == {NOISE}
    assert same.tally() == "no change: 12 config metrics within noise"
    assert gate_failures(same, 0.0).empty


def test_a_config_twice_as_slow_is_a_change_and_fails_the_gate():
    old = [record(label) for label in LABELS[:3]]
    new = [scaled(old[0], 2.0), *copy.deepcopy(old[1:])]
    found = compare_runs(run("old", old), run("new", new))
    doubled = rows(found, LABELS[0])
    for metric in ("dyn_train_ms", "dyn_eval_ms", "trc_train_ms", "trc_eval_ms"):
        assert doubled[metric].verdict == CHANGE
        assert doubled[metric].delta_pct == pytest.approx(100.0)
        assert doubled[metric].p_value == pytest.approx(2 / 252)  # five repeats each, all apart
        assert doubled[metric].noise_pct == pytest.approx(7.0)  # 0.97..1.04 of the median
    assert set(found.configs[found.configs.label != LABELS[0]]["verdict"]) == {NOISE}
    failures = gate_failures(found, 50.0)
    assert set(failures["label"]) == {LABELS[0]} and len(failures) == 4
    assert gate_failures(found, 100.0).empty  # slower by exactly 100%, not more
    assert shown(found.configs)["shown_verdict"].tolist().count("slower") == 4
    faster = compare_runs(run("new", new), run("old", old))
    assert gate_failures(faster, 0.0).empty
    assert shown(faster.configs)["shown_verdict"].tolist().count("faster") == 4
    assert found.tally() == "4 changes (4 slower), 8 config metrics within noise"


def test_a_significant_delta_within_the_spread_is_noise():
    old = with_repeats(record(LABELS[0]), "dyn_train_ms", [1.0, 1.1, 1.2, 1.3, 1.4])
    new = with_repeats(old, "dyn_train_ms", [1.35, 1.45, 1.5, 1.55, 2.6])
    row = rows(compare_runs(run("o", [old]), run("n", [new])), LABELS[0])["dyn_train_ms"]
    assert row.p_value == pytest.approx(4 / 252)  # one pair out of order: p < 0.05
    assert row.delta_pct == pytest.approx(25.0) and row.noise_pct == pytest.approx(125 / 1.5)
    assert row.verdict == NOISE


def test_older_records_of_one_repeat_are_untested_and_configs_come_and_go():
    current = [record(label) for label in LABELS[:2]]
    older = [{k: v for k, v in record(label, 3.0).items() if k not in ("repeats", "timer", "timings")}
             for label in (LABELS[0], LABELS[2])]
    found = compare_runs(run("old", older), run("new", current))
    assert {r.verdict for r in rows(found, LABELS[0]).values()} == {UNTESTED}
    assert {r.verdict for r in rows(found, LABELS[1]).values()} == {NEW}
    assert {r.verdict for r in rows(found, LABELS[2]).values()} == {REMOVED}
    assert gate_failures(found, 10.0).empty
    slower = compare_runs(run("new", current), run("old", older))  # three times as slow, untested
    assert set(gate_untested(slower, 10.0)["label"]) == {LABELS[0]}


def _frame_with(op: str, factor: float) -> pd.DataFrame:
    frame = opcalls_frame()
    hit = frame["op"] == op
    frame.loc[hit, "avg_ms_per_iter"] *= factor  # and its samples with it (samples_frame)
    return frame


def test_per_op_samples_are_the_profiled_iterations():
    old = {LABELS[0]: opcalls_frame(), LABELS[1]: opcalls_frame()}
    new = {LABELS[0]: _frame_with("reduce_grads", 2.0), LABELS[1]: opcalls_frame().iloc[1:]}
    found = compare_runs(run("o", [], old), run("n", [], new))
    ops = found.ops.set_index(["label", "op"])
    changed = ops.loc[(LABELS[0], "reduce_grads")]
    assert changed.verdict == CHANGE and changed.delta_pct == pytest.approx(100.0)
    assert changed.before_n == changed.after_n == 5
    assert ops.loc[(LABELS[1], "segmented_unique")].verdict == REMOVED
    assert ops.loc[(LABELS[1], "segmented_unique")].after_ms == 0.0
    assert set(ops.drop(index=[(LABELS[0], "reduce_grads"), (LABELS[1], "segmented_unique")]).verdict) == {NOISE}
    assert found.largest_ops(1)["op"].tolist() == ["reduce_grads"]
    old_csv = run("o", [], {LABELS[0]: opcalls_frame()}, samples={})  # a per-op CSV from before samples
    assert set(compare_runs(old_csv, run("n", [], new)).ops.verdict) == {UNTESTED}


def test_per_op_stages_add_up_iteration_by_iteration():
    frame = opcalls_frame()
    twice = pd.concat([frame, frame.assign(parent_stages="other")], ignore_index=True)
    found = compare_runs(run("o", [], {LABELS[0]: frame}), run("n", [], {LABELS[0]: twice})).ops
    row = found.set_index("op").loc["reduce_grads"]
    assert row.delta_pct == pytest.approx(100.0) and row.verdict == CHANGE


def _provenance(**changes) -> dict:
    base = {f: None for f in FIELDS} | {
        "git_commit": "a" * 40, "git_dirty": False, "kernel_path": "triton", "triton": "3.5.0",
        "cuda": "13.0", "driver": "580.159.04", "host_load_1m": 0.2, "cpu_count": 16, "torch_threads": 16,
    }
    base.update(changes)
    base["null_reasons"] = {f: "not here" for f in FIELDS if base[f] is None}
    return base


def test_environments_that_differ_are_named():
    rec = record(LABELS[0]) | {"device": "cuda:0", "gpu_name": "NVIDIA H200", "provenance": _provenance()}
    other = rec | {"gpu_name": "NVIDIA H100 80GB HBM3", "provenance": _provenance(
        git_commit="b" * 40, kernel_path="torch", git_dirty=True, host_load_1m=40.0)}
    found = compare_runs(run("old", [rec]), run("new", [other]))
    text = "\n".join(found.warnings)
    assert "GPU differs: NVIDIA H200 in old, NVIDIA H100 80GB HBM3 in new" in text
    assert f"commit differs: {'a' * 40} in old, {'b' * 40} in new" in text
    assert "dynemb kernel path differs: triton in old, torch in new" in text
    assert "new: 1 of 1 timing runs measured uncommitted changes" in text
    assert "new: 1 of 1 timing runs started on a busy host (load up to 40 on 16 CPUs)" in text
    assert not compare_runs(run("old", [rec]), run("new", [copy.deepcopy(rec)])).warnings
    mixed = compare_runs(run("old", [rec]), run("new", [rec, other | {"label": LABELS[1]}]))
    assert any(w.startswith("new mixes records of more than one GPU") for w in mixed.warnings)
    older = {k: v for k, v in rec.items() if k != "provenance"}
    assert any("old has no provenance" in w for w in compare_runs(run("old", [older]), run("new", [rec])).warnings)


def test_tbe_changing_with_the_same_libraries_is_named_as_the_machine():
    """TBE is the same code in both runs: where it changed, so did the machine."""
    old = [record(label) | {"fbgemm_gpu_version": "1.8.0"} for label in LABELS[:3]]
    machine = compare_runs(run("old", old), run("new", [scaled(old[0], 2.0), *copy.deepcopy(old[1:])]))
    drift = [w for w in machine.warnings if w.startswith("TBE changed")]
    assert drift == [
        f"TBE changed in 1 config with the same torch, fbgemm_gpu and device in both runs, so the machine "
        f"differs: {LABELS[0]} trc_train_ms +100%, trc_eval_ms +100%; dyn's 2 changes there may be the machine's"
    ]
    only_tbe = compare_runs(run("old", old), run("new", [scaled(old[0], 2.0, ("trc_train_ms",)), *old[1:]]))
    assert [w for w in only_tbe.warnings if w.startswith("TBE changed")][0].endswith("dyn did not change there")
    code = compare_runs(run("old", old), run("new", [scaled(old[0], 2.0, ("dyn_train_ms", "dyn_eval_ms")), *old[1:]]))
    assert not any(w.startswith("TBE changed") for w in code.warnings)  # dyn alone changed: the code
    upgraded = [scaled(old[0], 2.0) | {"fbgemm_gpu_version": "1.9.0"}, *old[1:]]
    warnings = compare_runs(run("old", old), run("new", upgraded)).warnings
    assert any(w.startswith("fbgemm_gpu differs") for w in warnings)
    assert not any(w.startswith("TBE changed") for w in warnings)  # the upgrade explains TBE's move


def test_render_as_text_and_markdown():
    old = [record(label) for label in LABELS[:2]]
    found = compare_runs(run("old", old), run("new", [scaled(old[0], 2.0), old[1]]))
    text = render(found, "text", op_limit=5)
    assert text.startswith("embprof diff: old -> new") and "slower" in text and LABELS[0] in text
    markdown = render(found, "markdown", op_limit=5, gate="gate: FAILED")
    assert markdown.startswith("### embprof diff: `old` → `new`")
    assert "| config | metric | before ms |" in markdown and markdown.rstrip().endswith("gate: FAILED")
    assert np.isfinite(found.configs["p_value"]).all()


def test_every_backend_the_runs_hold_is_compared():
    """A third backend (NVIDIA's dynamicemb, ``nv``) in the records and the per-op tables is compared
    as dyn and trc are: its train and eval metrics after theirs, its ops by their samples."""
    def with_nv(rec: dict, factor: float) -> dict:
        timings = {m: timing_entry([v * factor for v in rec["timings"]["dyn_" + m[3:]]["repeats"]])
                   for m in ("nv_train_ms", "nv_eval_ms")}
        return rec | {m: t["median"] for m, t in timings.items()} | {"timings": rec["timings"] | timings}

    old = [with_nv(record(LABELS[0]), 1.0)]
    new = [with_nv(record(LABELS[0]), 2.0)]
    nv = opcalls_frame().assign(backend=lambda f: f["backend"].replace({"trc": "nv"}))
    faster = nv.assign(avg_ms_per_iter=lambda f: f["avg_ms_per_iter"].where(f["backend"] != "nv", f["avg_ms_per_iter"] / 2))
    found = compare_runs(run("old", old, {LABELS[0]: nv}), run("new", new, {LABELS[0]: faster}))
    assert found.configs["metric"].tolist() == [*METRICS, "nv_train_ms", "nv_eval_ms"]
    assert set(found.configs.set_index("metric").loc[["nv_train_ms", "nv_eval_ms"], "verdict"]) == {CHANGE}
    ops = found.ops[found.ops["backend"] == "nv"]
    assert len(ops) == (nv["backend"] == "nv").sum() > 0 and set(ops["verdict"]) == {CHANGE}
    assert ops["delta_pct"].tolist() == pytest.approx([-50.0] * len(ops))
