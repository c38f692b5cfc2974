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
