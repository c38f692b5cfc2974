"""The results contract (embprof.results): each format's reader checks it, with one-line errors."""

from __future__ import annotations

import json
import re

import pytest
from report_inputs import LABELS, opcalls_frame

from embprof.errors import ContractError
from embprof.results.busy import read_busy
from embprof.results.configs import read_configs
from embprof.results.opcalls import read_opcalls
from embprof.results.records import read_results
from embprof.results.steps import read_statuses


def test_opcalls_keep_empty_text_as_empty_strings(tmp_path):
    path = tmp_path / "o.csv"
    opcalls_frame().to_csv(path, index=False)
    frame = read_opcalls(path)
    assert (frame.loc[frame.op == "aten::copy_", "parent_stages"] == "").all()
    assert frame["avg_ms_per_iter"].dtype == float
    path.write_text(path.read_text().splitlines()[0] + "\n")
    assert read_opcalls(path).empty


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("backend,", "backnd,", 1), "missing column(s) backend"),
        (lambda t: t.replace(",0.41,", ",abc,", 1), "avg_ms_per_iter must be a finite number"),
        (lambda t: t.replace("dyn,forward", ",forward", 1), "must not be empty"),
        (lambda t: "", "empty file"),
    ],
)
def test_opcalls_errors_name_file_line_and_column(tmp_path, edit, message):
    path = tmp_path / "o.csv"
    opcalls_frame().to_csv(path, index=False)
    path.write_text(edit(path.read_text()))
    with pytest.raises(ContractError, match=re.escape(message)) as err:
        read_opcalls(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_busy_sidecar_as_the_breakdown_writes_it(tmp_path):
    path = tmp_path / "b.busy.json"
    assert read_busy(path) is None
    path.write_text(json.dumps({"label": "x", "time_source": "cpu-leaf-ops+gpu-kernels", "num_iters": 3,
                                "busy_ms_per_iter": {"dyn": 1.5, "trc": 0.5}, "traces": []}))
    busy = read_busy(path)
    assert busy.ms_per_iter == {"dyn": 1.5, "trc": 0.5} and busy.cpu_leaf_ops
    path.write_text(json.dumps({"time_source": "wall-clock", "busy_ms_per_iter": {}}))
    with pytest.raises(ContractError, match="time_source"):
        read_busy(path)
    path.write_text(json.dumps({"time_source": "gpu-kernels", "busy_ms_per_iter": {"dyn": -1}}))
    with pytest.raises(ContractError, match="dyn"):
        read_busy(path)


def test_results_configs_and_statuses_are_checked(tmp_path):
    results = tmp_path / "r.json"
    results.write_text(json.dumps([{"label": "not a label"}]))
    with pytest.raises(ContractError, match="not a config label"):
        read_results(results)
    results.write_text(json.dumps([{"label": LABELS[0]}, {"label": LABELS[0]}]))
    with pytest.raises(ContractError, match="more than once"):
        read_results(results)
    results.write_text("{")
    with pytest.raises(ContractError, match="not valid JSON"):
        read_results(results)

    configs = tmp_path / "configs.tsv"
    configs.write_text("id\tlabel\nx\ty\n")
    with pytest.raises(ContractError, match="header"):
        read_configs(configs)

    status = tmp_path / "status"
    status.mkdir()
    (status / "a.json").write_text(json.dumps({"label": LABELS[0], "ok": True}))
    with pytest.raises(ContractError, match="log_tail"):
        read_statuses(status)


def test_layout_names_every_file_and_keeps_the_wildcard() -> None:
    from embprof.results.paths import LABEL, ResultsPaths, label_from_file

    paths = ResultsPaths("res")
    label = LABELS[1]
    assert paths.opcalls(label) == paths.root / "opcalls" / f"opcalls__{label}.csv"
    assert paths.busy(label).name == f"opcalls__{label}.busy.json"
    assert paths.samples(label).name == f"opcalls__{label}.samples.csv"
    assert paths.trace(label, "nsys").name == f"{label}.nsys-rep"
    assert paths.trace(label, "torch").name == f"{label}.kineto.json.gz"
    assert str(paths.opcalls(LABEL)) == "res/opcalls/opcalls__{label}.csv"
    assert str(paths.log("profile", LABEL)) == "res/logs/profile/{label}.log"
    assert str(paths.log("report")) == "res/logs/report.log"
    # A label outside the wildcard's characters is sanitized the way the breakdown names its files.
    assert paths.status("T1_totalB2_D3_x y").name == "T1_totalB2_D3_x_y.json"
    for path in (paths.opcalls(label), paths.busy(label), paths.samples(label), paths.bandwidth(label),
                 paths.sunburst_png(label), paths.timing(label), paths.trace(label, "torch")):
        assert label_from_file(path) == label
    with pytest.raises(ContractError, match="cannot tell the config label"):
        label_from_file("breakdown.csv")


def test_every_writer_round_trips_through_its_reader(tmp_path) -> None:
    import math

    import pandas as pd
    from report_inputs import iteration_ns, samples_frame

    from embprof.results.bandwidth import COLUMNS, read_bandwidth, write_bandwidth
    from embprof.results.busy import BusyTime, TopKernel, write_busy
    from embprof.results.configs import BenchConfig, write_configs
    from embprof.results.environment import read_environment, write_environment
    from embprof.results.opcalls import write_opcalls
    from embprof.results.peak import Peak, read_peak, write_peak
    from embprof.results.records import merge_results, write_results
    from embprof.results.samples import read_op_samples, read_samples, write_samples
    from embprof.results.steps import StepRecord, merge_status, read_status, write_status

    records = [{"label": LABELS[0], "dyn_train_ms": math.nan}, {"label": LABELS[1], "dyn_train_ms": 1.5}]
    write_results(tmp_path / "r.json", records)
    assert json.loads((tmp_path / "r.json").read_text())[0]["dyn_train_ms"] is None  # strict JSON
    assert read_results(tmp_path / "r.json")[1] == records[1]
    (tmp_path / "t.json").write_text(json.dumps([{"label": LABELS[2]}]))
    assert [r["label"] for r in merge_results([tmp_path / "t.json", tmp_path / "r.json"])] == sorted(LABELS[:3])
    with pytest.raises(ContractError, match="already came from"):
        merge_results([tmp_path / "r.json", tmp_path / "r.json"])

    configs = [BenchConfig("suite.py::T::t[x]", LABELS[0])]
    write_configs(tmp_path / "c.tsv", configs)
    assert read_configs(tmp_path / "c.tsv") == configs

    frame = opcalls_frame()
    write_opcalls(frame.iloc[:, ::-1], tmp_path / "o.csv")  # columns in any order: written in the contract's
    assert list(read_opcalls(tmp_path / "o.csv").columns) == list(frame.columns)

    busy = BusyTime({"dyn": 2.0, "nv": 1.0}, "gpu-kernels", {"dyn": 3.0}, True, {"dyn": 0.5},
                    {"dyn": [TopKernel("k", 1.5, 2.0, 750.0)]}, LABELS[0], 10, 1, 2, ["a.sqlite"])
    write_busy(busy, tmp_path / "b.json")
    assert read_busy(tmp_path / "b.json") == busy  # one typed record, written and read
    write_busy(BusyTime({"dyn": 2.0}, "gpu-kernels"), tmp_path / "b.json")  # a host-only range: no rule
    assert not read_busy(tmp_path / "b.json").range_until_device_done

    samples = samples_frame(frame)
    write_samples(frame, iteration_ns(frame), tmp_path / "o.samples.csv")
    pd.testing.assert_frame_equal(read_samples(tmp_path / "o.samples.csv"), samples)
    assert read_op_samples(tmp_path / "o.csv").equals(samples)  # the samples file beside the CSV

    bandwidth = frame.assign(bytes_per_iter=1e6, achieved_gbps=2.0, pct_of_peak=float("nan"), formula="f")
    write_bandwidth(bandwidth, tmp_path / "bw.csv")
    back = read_bandwidth(tmp_path / "bw.csv")
    assert list(back.columns) == list(COLUMNS) and back["pct_of_peak"].isna().all()

    peak = Peak("cpu", "x", 10.0, "measured", "copy", "2026-12-01")
    write_peak(peak, tmp_path / "p.json")
    assert read_peak(tmp_path / "p.json") == peak

    write_environment(tmp_path / "e.json", {"device": "cpu"})
    assert read_environment(tmp_path / "e.json") == {"device": "cpu"}
    (tmp_path / "e.json").write_text("[]")
    with pytest.raises(ContractError, match="JSON object"):
        read_environment(tmp_path / "e.json")

    step = StepRecord("profile", LABELS[0], "t", False, 3, "log", "tail")
    step.write(tmp_path / "s.json")
    status = merge_status(LABELS[0], "t", [StepRecord.read(tmp_path / "s.json")])
    write_status(tmp_path / "status.json", status)
    assert read_status(tmp_path / "status.json")["failed_step"] == "profile"
    with pytest.raises(ContractError, match="other configs"):
        merge_status(LABELS[1], "t", [step])


def test_older_csvs_keep_their_samples_in_ms_by_iter(tmp_path):
    """A per-op CSV of issues 20 to 32 reads as a new one, its samples from its ms_by_iter column; one
    older still has none; a broken cell is one line naming the file."""
    import pandas as pd
    from report_inputs import legacy_csv, samples_frame

    from embprof.results.samples import read_op_samples

    frame = opcalls_frame()
    path = tmp_path / f"opcalls__{LABELS[0]}.csv"
    legacy_csv(frame).to_csv(path, index=False)
    assert "ms_by_iter" in path.read_text().splitlines()[0]
    pd.testing.assert_frame_equal(read_opcalls(path), frame, check_dtype=False)
    got, want = read_op_samples(path), samples_frame(frame)
    assert got[["backend", "phase", "parent_stages", "op", "iteration"]].equals(want.drop(columns="ms"))
    assert got["ms"].to_numpy() == pytest.approx(want["ms"].to_numpy(), rel=1e-5)  # 6 significant digits
    frame.to_csv(path, index=False)  # older still: no samples at all
    assert read_op_samples(path).empty
    legacy_csv(frame).assign(ms_by_iter="1;2").to_csv(path, index=False)
    with pytest.raises(ContractError, match="ms_by_iter must hold num_iters numbers") as err:
        read_opcalls(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace(",ns", ",ms", 1), "missing column(s) ns"),
        (lambda t: t.replace(",0,", ",-1,", 1), "iteration must be a whole number"),
        (lambda t: t.replace("\n", ",x\n", 2).replace(",x\n", "\n", 1), "line 2"),
        (lambda t: t + t.splitlines()[1] + "\n", "repeat an earlier line"),
    ],
)
def test_samples_errors_name_file_and_line(tmp_path, edit, message):
    from report_inputs import iteration_ns

    from embprof.results.samples import read_samples, write_samples

    frame = opcalls_frame()
    path = tmp_path / "o.samples.csv"
    write_samples(frame, iteration_ns(frame), path)
    path.write_text(edit(path.read_text()))
    with pytest.raises(ContractError, match=re.escape(message)) as err:
        read_samples(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
