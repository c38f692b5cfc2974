"""The report's view of bandwidth: legend columns joined on (phase, stage, op), and the chart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embprof.bandwidth.view import pct_of_peak_figure, per_op_pct, with_bandwidth
from embprof.errors import ContractError
from embprof.results.bandwidth import COLUMNS, read_bandwidth
from embprof.results.configs import BenchConfig, write_configs
from embprof.results.paths import ResultsPaths
from embprof.results.peak import Peak
from embprof.results.run import Run

PEAK = Peak("cuda:0", "NVIDIA H200", 4000.0, "measured", "copy", "2026-01-01T00:00:00+00:00")
LABEL_A = "T2_totalB1024_D16_adam_gpu_pool=none_cap=1K"
LABEL_B = "T2_totalB1024_D16_sgd_gpu_pool=none_cap=1K"


def _bandwidth(
    rows: list[tuple[str, str, str, str, float | None, float]], peak: float = 4000.0
) -> pd.DataFrame:
    frame = pd.DataFrame(
        rows,
        columns=["backend", "phase", "parent_stages", "op", "bytes_per_iter", "avg_ms_per_iter"],
    )
    frame["bytes_per_iter"] = frame["bytes_per_iter"].astype(float)
    frame["achieved_gbps"] = frame["bytes_per_iter"] / frame["avg_ms_per_iter"] / 1e6
    frame["pct_of_peak"] = frame["achieved_gbps"] / peak * 100
    frame["formula"] = np.where(frame["bytes_per_iter"].notna(), "f: x", "")
    return frame[list(COLUMNS)]


BW = _bandwidth(
    [
        ("dyn", "forward", "fwd", "gather_embedding", 2e9, 1.0),  # 2000 GB/s, 50%
        ("dyn", "forward", "fwd", "storage_find", None, 3.0),
        ("dyn", "backward", "bwd", "reduce_grads", 1e9, 0.5),  # 2000 GB/s
        ("dyn", "backward", "bwd", "reduce_grads", 1e9, 1.5),  # a duplicate key: 2e9 / 2 ms
        ("trc", "forward", "", "split_embedding_codegen_forward_unweighted_kernel", 3e9, 1.0),
    ]
)


def test_legend_gets_gbps_and_pct_in_its_own_order() -> None:
    legend = pd.DataFrame(
        {
            "code": ["A", "B", "C"],
            "phase": ["forward", "backward", "forward"],
            "stage": ["fwd", "bwd", "fwd"],
            "op": ["storage_find", "reduce_grads", "gather_embedding"],
            "ms_per_iter": [3.0, 2.0, 1.0],
        }
    )
    out = with_bandwidth(legend, BW, "dyn")
    assert out[["code", "op"]].equals(legend[["code", "op"]])
    assert np.isnan(out["achieved_gbps"].iloc[0]) and np.isnan(out["pct_of_peak"].iloc[0])
    assert out["achieved_gbps"].iloc[1:].tolist() == pytest.approx([1000.0, 2000.0])
    assert out["pct_of_peak"].iloc[1:].tolist() == pytest.approx([25.0, 50.0])
    empty = with_bandwidth(legend, None, "dyn")
    assert empty["achieved_gbps"].isna().all() and empty["pct_of_peak"].isna().all()


def test_per_op_pct_sums_stages_and_keeps_only_formulas() -> None:
    table = per_op_pct({LABEL_A: BW})
    assert sorted(table["op"]) == [
        "gather_embedding",
        "reduce_grads",
        "split_embedding_codegen_forward_unweighted_kernel",
    ]
    trc = table[table["backend"] == "trc"].iloc[0]
    assert trc["achieved_gbps"] == pytest.approx(3000.0) and trc["pct_of_peak"] == pytest.approx(
        75.0
    )


def test_chart_has_a_cell_per_config_and_op() -> None:
    fig = pct_of_peak_figure({LABEL_A: BW, LABEL_B: BW.iloc[:2]}, PEAK)
    heat = fig.data[0]
    assert list(heat.y) == [LABEL_A, LABEL_B]
    assert list(heat.x) == [
        "dyn · gather_embedding",
        "dyn · reduce_grads",
        "trc · split_embedding_codegen_forward_unweighted_kernel",
    ]
    np.testing.assert_allclose(
        np.asarray(heat.z, dtype=float), [[50.0, 25.0, 75.0], [50.0, np.nan, np.nan]]
    )
    assert heat.text[0][0] == "50.0%" and heat.text[1][1] == ""
    assert "4,000 GB/s, measured on NVIDIA H200" in fig.layout.title.text


def test_files_round_trip_and_bad_files(tmp_path: Path) -> None:
    paths = ResultsPaths(tmp_path)
    paths.bandwidth_dir.mkdir()
    BW.to_csv(paths.bandwidth(LABEL_A), index=False)
    write_configs(paths.configs, [BenchConfig(f"t[{i}]", label) for i, label in enumerate((LABEL_A, LABEL_B))])
    loaded = Run.from_folder(tmp_path).bandwidth  # the configs of the run that have a bandwidth CSV
    assert list(loaded) == [LABEL_A]
    pd.testing.assert_frame_equal(
        loaded[LABEL_A].drop(columns="parent_stages"), BW.drop(columns="parent_stages")
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("backend,op\ndyn,x\n")
    with pytest.raises(ContractError, match="lacks column"):
        read_bandwidth(bad)
