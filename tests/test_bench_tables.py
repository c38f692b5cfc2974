"""benchmarks/bench_tables.py on the CPU at toy sizes: the script runs, writes its record, refuses bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tables.py"
TOY = ["--device", "cpu", "--tables", "2", "--rows", "3000", "--batch", "256", "--iterations", "3", "--warmup", "1"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_toy_run_times_first_pass_and_steady_state(tmp_path: Path) -> None:
    pytest.importorskip("fbgemm_gpu")
    out = tmp_path / "bench.json"
    done = run(*TOY, "--configs", "sgd-gpu,adam-gpu", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dyn 1st" in done.stdout and "1st x" in done.stdout
    record = json.loads(out.read_text())
    assert record["workload"]["tables"] == 2 and record["workload"]["iterations"] == 3
    sgd, adam = record["results"]
    assert sgd["config"] == "sgd-gpu" and sgd["storage_mode"] == "gpu"
    for key in ("dyn_forward_ms", "dyn_backward_ms", "dyn_first_pass_ms", "tbe_forward_ms", "tbe_first_pass_ms"):
        assert sgd[key] > 0, key
    assert adam["tbe_first_pass_ms"] is None  # TBE has no ADAM on the CPU


def test_host_profile_shows_the_op_ranges() -> None:
    done = run(*TOY, "--configs", "sgd-gpu", "--host-profile")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dyn's host time per op over 10 steps" in done.stdout and "op:storage_find" in done.stdout


def test_off_device_configs_report_host_row_traffic(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = run(*TOY, "--configs", "sgd-hybrid,adam-host", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "host rows moved per training step" in done.stdout
    hybrid, host = json.loads(out.read_text())["results"]
    assert (hybrid["storage_mode"], host["storage_mode"]) == ("hybrid", "host")
    # Every distinct id of a batch is in host memory: its embedding read in forward, its whole row read and
    # written in backward (ADAM's rows are three times the embedding).
    assert host["host_read_bytes_per_iter"] == pytest.approx(host["host_written_bytes_per_iter"] * 4 / 3)
    assert 0 < hybrid["host_read_bytes_per_iter"] == pytest.approx(hybrid["host_written_bytes_per_iter"] * 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--configs", "sgd-gpu,nope"], "unknown config(s) nope"),
        (["--iterations", "0"], "must be positive"),
        (["--json", "/nonexistent/folder/x.json"], "does not exist"),
        (["--kernel-profile"], "--kernel-profile needs CUDA"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], message: str) -> None:
    done = run(*TOY, *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
