"""The peak: measured on this machine's host memory, cached, re-used; datasheet only for absent GPUs."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from embprof.bandwidth.peak import measure_peak
from embprof.cli import main
from embprof.errors import ContractError, PeakError
from embprof.results.peak import FIELDS, read_peak, write_peak


def peak_bandwidth(*args: str) -> int:
    return main(["peak-bandwidth", *args])


def test_cpu_copy_is_measured() -> None:
    peak = measure_peak("cpu", nbytes=32 << 20, repeats=3)
    assert peak.source == "measured" and peak.device == "cpu" and peak.name
    # A real host copy: well above a disk, well below any memory system built so far.
    assert 0.2 < peak.peak_gbps < 5000
    assert "32 MiB" in peak.method and "best of 3" in peak.method


def test_round_trip_and_malformed_files(tmp_path: Path) -> None:
    peak = measure_peak("cpu", nbytes=4 << 20, repeats=1)
    path = tmp_path / "sub" / "peak_bandwidth.json"
    write_peak(peak, path)
    assert set(json.loads(path.read_text())) == {*FIELDS, "copy_gbps"}
    assert read_peak(path) == peak and peak.copy_gbps == {}  # no device copies on the CPU
    # A GPU's copy peaks round-trip; a file from before them reads with none.
    gpu = replace(peak, device="cuda:0", copy_gbps={"pinned->device": 55.1, "device->device": 2100.0})
    write_peak(gpu, path)
    assert read_peak(path) == gpu
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "copy_gbps"}))
    assert read_peak(path).copy_gbps == {}
    path.write_text(json.dumps(asdict(gpu) | {"copy_gbps": {"pinned->nowhere": 1.0}}))
    with pytest.raises(ContractError, match="copy_gbps"):
        read_peak(path)
    path.write_text(json.dumps({"device": "cpu"}))
    with pytest.raises(ContractError, match="needs the fields"):
        read_peak(path)
    path.write_text(json.dumps(json.loads(json.dumps(peak.__dict__)) | {"peak_gbps": -1}))
    with pytest.raises(ContractError, match="positive"):
        read_peak(path)
    path.write_text("{")
    with pytest.raises(ContractError, match="not valid JSON"):
        read_peak(path)


def test_bad_arguments() -> None:
    with pytest.raises(PeakError, match="device must be"):
        measure_peak("tpu")
    with pytest.raises(PeakError, match="repeats"):
        measure_peak("cpu", nbytes=1 << 20, repeats=0)


def test_script_measures_then_reuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "peak_bandwidth.json"
    args = ["--out", str(out), "--device", "cpu", "--size-mib", "8", "--repeats", "2"]
    assert peak_bandwidth(*args) == 0
    first = out.read_text()
    assert json.loads(first)["source"] == "measured"
    assert peak_bandwidth(*args) == 0
    assert out.read_text() == first
    assert "re-used" in capsys.readouterr().err
    assert peak_bandwidth(*args, "--force") == 0
    assert "wrote" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a local GPU would be measured instead")
def test_script_uses_the_datasheet_for_an_absent_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "benchmark_results.json"
    records.write_text(
        json.dumps([{"label": "a", "device": "cuda:0", "gpu_name": "NVIDIA H200"}] * 2)
    )
    out = tmp_path / "peak_bandwidth.json"
    assert peak_bandwidth("--out", str(out), "--records", str(records)) == 0
    peak = read_peak(out)
    assert (peak.device, peak.name, peak.peak_gbps, peak.source) == (
        "cuda:0",
        "NVIDIA H200",
        4800.0,
        "datasheet",
    )
    assert peak.method.startswith("datasheet:")

    records.write_text(
        json.dumps([{"label": "a", "device": "cuda:0", "gpu_name": "Unheard-of GPU"}])
    )
    other = tmp_path / "other.json"
    assert peak_bandwidth("--out", str(other), "--records", str(records)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "embprof peak-bandwidth: error: cannot measure 'Unheard-of GPU' here and the bandwidth table"
        " has no datasheet entry for it"
    )
    assert not other.exists() and not list(tmp_path.glob(".other.json*"))


def test_script_measures_here_when_no_record_says_where(tmp_path: Path) -> None:
    records = tmp_path / "benchmark_results.json"
    records.write_text("[]")  # every config's timing failed
    out = tmp_path / "peak_bandwidth.json"
    args = ["--out", str(out), "--records", str(records), "--device", "cpu", "--size-mib", "4"]
    assert peak_bandwidth(*args, "--repeats", "1") == 0
    assert read_peak(out).source == "measured" and read_peak(out).device == "cpu"


def test_script_rejects_mixed_devices_and_absent_cuda(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "r.json"
    records.write_text(
        json.dumps([{"device": "cpu"}, {"device": "cuda:0", "gpu_name": "NVIDIA H200"}])
    )
    assert peak_bandwidth("--out", str(tmp_path / "p.json"), "--records", str(records)) == 1
    assert "several devices" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert peak_bandwidth("--out", str(tmp_path / "p.json"), "--device", "cuda") == 1
        assert "CUDA is not available" in capsys.readouterr().err
