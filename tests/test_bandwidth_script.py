"""`embprof bandwidth` end to end, on a per-op CSV made from a real profiler trace.

The CSV holds the TBE kernels of a real TorchRec DLRM step (Kineto trace from
8 A100s, rank 3; tests/data/kineto) in the breakdown's format: TBE runs under no
op range, so each kernel is a row under its short name. The record's sizes are
this test's own; the expectations are computed here from the raw kernel rows.
"""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from embprof.bandwidth.peak import datasheet_peak
from embprof.bandwidth.table import load_table
from embprof.cli import main
from embprof.results.peak import write_peak

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "kineto" / "hta_torchrec_dlrm_a100_rank3.json.gz"
LABEL = "T8_totalB4096_D128_rowwise_adagrad_gpu_pool=sum_cap=1M"
RECORD = {
    "label": LABEL,
    "gpu_name": "NVIDIA A100-PG509-200",
    "device": "cuda:0",
    "num_tables": 8,
    "batch_size": 512,
    "embedding_dim": 128,
    "optimizer_type": "exact_rowwise_adagrad",
    "pooling_mode": "sum",
    "avg_n_total": 40960.0,
    "avg_n_unique": 20000.0,
}
ROW = 128 * 4
BAGS = 8 * 512
# reads 20000 unique rows and 40960 indices, writes one pooled row per bag
FORWARD_BYTES = 20000 * ROW + 40960 * 8 + BAGS * ROW
# reads one gradient row per bag and 40960 sorted indices; reads and writes
# 20000 rows with one fp32 state value each
BACKWARD_BYTES = BAGS * ROW + 40960 * 8 + 2 * 20000 * (ROW + 4)


def _short(name: str) -> str:
    return name.removeprefix("void ").split("<", 1)[0].split("(", 1)[0]


@functools.cache
def _opcalls_from_trace(path: Path) -> pd.DataFrame:
    events = json.load(gzip.open(path))["traceEvents"]
    kernels = pd.DataFrame(
        [(_short(e["name"]), e["dur"] / 1e3) for e in events if e.get("cat") == "kernel"],
        columns=["op", "ms"],
    )
    rows = kernels.groupby("op", as_index=False).agg(
        calls_per_iter=("ms", "size"), avg_ms_per_iter=("ms", "sum")
    )
    rows["phase"] = rows["op"].map(lambda op: "backward" if "backward" in op else "forward")
    return rows.assign(
        backend="trc",
        parent_stages="",
        total_ms=rows["avg_ms_per_iter"],
        num_iters=1,
        kernel_names=rows["op"],
        fallback_category="embedding",
    )[
        [
            "backend",
            "phase",
            "parent_stages",
            "op",
            "calls_per_iter",
            "avg_ms_per_iter",
            "total_ms",
            "num_iters",
            "kernel_names",
            "fallback_category",
        ]
    ]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    opcalls = tmp_path / "opcalls" / f"opcalls__{LABEL}.csv"
    opcalls.parent.mkdir()
    _opcalls_from_trace(TRACE).to_csv(opcalls, index=False)
    record = tmp_path / "timing.json"
    record.write_text(json.dumps(RECORD))
    peak = tmp_path / "peak_bandwidth.json"
    write_peak(datasheet_peak(load_table(), "cuda:0", RECORD["gpu_name"]), peak)
    return {"opcalls": opcalls, "record": record, "peak": peak, "dir": tmp_path}


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embprof", "bandwidth", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_end_to_end_on_real_tbe_kernels(inputs: dict[str, Path]) -> None:
    cwd = inputs["dir"]
    done = _run(inputs["opcalls"], "--record", inputs["record"], "--peak", inputs["peak"], cwd=cwd)
    assert done.returncode == 0, done.stderr
    out = pd.read_csv(
        cwd / "results" / "bandwidth" / f"bandwidth__{LABEL}.csv",
        keep_default_na=False,
        na_values=[""],
    )
    assert list(out.columns) == [
        "backend",
        "phase",
        "parent_stages",
        "op",
        "bytes_per_iter",
        "avg_ms_per_iter",
        "achieved_gbps",
        "pct_of_peak",
        "formula",
    ]
    opcalls = pd.read_csv(inputs["opcalls"])
    assert len(out) == len(opcalls)

    forward = out["op"].str.startswith("split_embedding_codegen_forward_")
    backward = out["op"].str.contains(
        r"_backward_codegen_rowwise_adagrad_.*_kernel_(?:warp|cta)_per_row_1$"
    )
    assert forward.sum() == 2 and backward.sum() == 4
    for mask, nbytes in ((forward, FORWARD_BYTES), (backward, BACKWARD_BYTES)):
        ms = opcalls.loc[mask.to_numpy(), "avg_ms_per_iter"].sum()
        gbps = nbytes / (ms * 1e-3) / 1e9
        assert out.loc[mask, "achieved_gbps"].tolist() == pytest.approx([gbps] * int(mask.sum()))
        assert out.loc[mask, "pct_of_peak"].tolist() == pytest.approx(
            [gbps / 1555 * 100] * int(mask.sum())
        )
        assert out.loc[mask, "bytes_per_iter"].sum() == pytest.approx(nbytes)
    rest = out[~(forward | backward)]
    assert len(rest) > 10 and rest["achieved_gbps"].isna().all() and (rest["formula"].isna()).all()
    assert "6 of" in done.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("no_record", "no record with label"),
        ("bad_csv", "empty file"),
        ("missing_column", "missing column(s) avg_ms_per_iter"),
        ("bad_peak", "not valid JSON"),
        ("bad_name", "cannot tell the config label"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    inputs: dict[str, Path], change: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    opcalls, record, peak, cwd = inputs["opcalls"], inputs["record"], inputs["peak"], inputs["dir"]
    if change == "no_record":
        record.write_text(json.dumps([RECORD | {"label": "T1_totalB1_D1_sgd_gpu_pool=none_cap=1"}]))
    elif change == "bad_csv":
        opcalls.write_text("")
    elif change == "missing_column":
        pd.read_csv(opcalls).drop(columns="avg_ms_per_iter").to_csv(opcalls, index=False)
    elif change == "bad_peak":
        peak.write_text("{")
    else:
        opcalls = opcalls.rename(opcalls.with_name("breakdown.csv"))
    out = cwd / "bw.csv"
    assert (
        main(["bandwidth", str(opcalls), "--record", str(record), "--peak", str(peak), "--out", str(out)])
        == 1
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embprof bandwidth: error: ") and message in lines[0]
    assert not out.exists() and not list(cwd.glob(".bw.csv*"))


def test_failed_timing_run_writes_empty_bandwidth(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    inputs["record"].write_text("[]")
    out = inputs["dir"] / "bw.csv"
    args = [str(inputs["opcalls"]), "--record", str(inputs["record"]), "--out", str(out)]
    assert main(["bandwidth", *args]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == len(pd.read_csv(inputs["opcalls"])) and frame["achieved_gbps"].isna().all()
    assert "timing run failed" in capsys.readouterr().err


def test_peak_of_another_device_gives_no_pct(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = inputs["dir"] / "bw.csv"
    args = [
        str(inputs["opcalls"]),
        "--record",
        str(inputs["record"]),
        "--peak",
        str(inputs["peak"]),
    ]
    inputs["record"].write_text(json.dumps(RECORD | {"gpu_name": "NVIDIA H200"}))
    assert main(["bandwidth", *args, "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert frame["achieved_gbps"].notna().sum() == 6 and frame["pct_of_peak"].isna().all()
    assert (
        "no % of peak: the peak is for 'NVIDIA A100-PG509-200', the config ran on 'NVIDIA H200'"
        in (capsys.readouterr().err)
    )
    inputs["record"].write_text(json.dumps(RECORD | {"device": "cpu", "gpu_name": None}))
    assert main(["bandwidth", *args, "--out", str(out)]) == 0
    assert pd.read_csv(out)["pct_of_peak"].isna().all()
    assert "the peak is for cuda:0, the config ran on cpu" in capsys.readouterr().err
