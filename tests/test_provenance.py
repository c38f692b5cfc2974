"""Provenance: git state, nvidia-smi's driver and clocks (from a real H200's capture), host load,
the merge into environment.json, and the reader's defaults for files from before it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from fake_nvidia_smi import H200_LOAD, install

from dynemb import kernels
from embprof.errors import ContractError
from embprof.results.provenance import (
    FIELDS,
    NOT_RECORDED,
    check_provenance,
    merge_provenance,
    read_provenance,
)
from embprof.workflow.environment import describe_environment
from embprof.workflow.provenance import collect_provenance, git_state, gpu_state

H200_CLOCKS = {"sm_mhz": 1980, "memory_mhz": 3201, "max_sm_mhz": 1980, "max_memory_mhz": 3201}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
        capture_output=True,
    )


def _one_commit_repo(repo: Path) -> Path:
    """A git checkout with one tracked file, a.py, committed."""
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def test_git_commit_and_dirty_tree(tmp_path: Path) -> None:
    repo = _one_commit_repo(tmp_path / "repo")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert git_state(repo) == ({"git_commit": head, "git_dirty": False}, {})
    (repo / "new.py").write_text("untracked files do not count\n")
    assert git_state(repo)[0]["git_dirty"] is False
    (repo / "a.py").write_text("x = 2\n")
    assert git_state(repo)[0] == {"git_commit": head, "git_dirty": True}
    state, reasons = git_state(tmp_path)  # not a checkout
    assert state == {"git_commit": None, "git_dirty": None}
    assert reasons["git_commit"].startswith("git rev-parse exited") and "not a git repository" in reasons["git_commit"]


def test_a_copied_checkout_names_its_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A working tree shipped without .git (the GPU host's copy) takes its commit from the environment."""
    monkeypatch.setenv("EMBPROF_GIT_COMMIT", "1f4fbf8" * 5 + "12345")
    monkeypatch.setenv("EMBPROF_GIT_DIRTY", "0")
    assert git_state(tmp_path) == ({"git_commit": "1f4fbf8" * 5 + "12345", "git_dirty": False}, {})
    monkeypatch.delenv("EMBPROF_GIT_DIRTY")
    state, reasons = git_state(tmp_path)
    assert state["git_dirty"] is None and "EMBPROF_GIT_DIRTY" in reasons["git_dirty"]
    # A copy with a stale .git (its HEAD another commit, its files this one's): the stamp wins.
    repo = _one_commit_repo(tmp_path / "repo")
    monkeypatch.setenv("EMBPROF_GIT_DIRTY", "0")
    assert git_state(repo) == ({"git_commit": "1f4fbf8" * 5 + "12345", "git_dirty": False}, {})
    monkeypatch.delenv("EMBPROF_GIT_COMMIT")
    assert git_state(repo)[0]["git_commit"] != "1f4fbf8" * 5 + "12345"


def test_driver_and_clocks_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", install(tmp_path / "bin")["PATH"])
    assert gpu_state(0) == ({"driver": "590.48.01", "gpu_clocks": H200_CLOCKS}, {})
    state, reasons = gpu_state(None)
    assert state == {"driver": "590.48.01", "gpu_clocks": None}
    assert reasons == {"gpu_clocks": "the benchmark ran on the CPU"}


def test_the_gpu_that_ran_is_found_by_uuid_or_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs, the second one slower (a variant of the real capture: index, UUID and SM clock changed)."""
    header, row = H200_LOAD.read_text().splitlines()
    cells = row.split(", ")
    names = [c.split(" [")[0] for c in header.split(", ")]
    second = list(cells)
    second[names.index("index")] = "1"
    second[names.index("uuid")] = "GPU-11111111-2222-3333-4444-555555555555"
    second[names.index("clocks.current.sm")] = "1755 MHz"
    capture = tmp_path / "two.csv"
    capture.write_text("\n".join([header, row, ", ".join(second)]) + "\n")
    monkeypatch.setenv("PATH", install(tmp_path / "bin", capture)["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_state(1)[0]["gpu_clocks"]["sm_mhz"] == 1755
    assert gpu_state(0, "11111111-2222-3333-4444-555555555555")[0]["gpu_clocks"]["sm_mhz"] == 1755
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # device 0 is then physical GPU 1: the index says nothing
    state, reasons = gpu_state(0)
    assert state["gpu_clocks"] is None and "cannot tell which" in reasons["gpu_clocks"]


def test_without_nvidia_smi_every_gpu_field_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    state, reasons = gpu_state(0)
    assert state == {"driver": None, "gpu_clocks": None}
    assert reasons == {"driver": "nvidia-smi is not on PATH", "gpu_clocks": "nvidia-smi is not on PATH"}


def test_collected_provenance_passes_the_contract() -> None:
    root = Path(__file__).resolve().parents[1]
    provenance = collect_provenance(root, torch.device("cpu"), kernels.kernel_path("cpu"))
    check_provenance(provenance)
    assert provenance["kernel_path"] == "torch"
    assert provenance["torch_threads"] == torch.get_num_threads()
    assert provenance["cuda"] == torch.version.cuda
    if torch.version.cuda is None:
        assert provenance["null_reasons"]["cuda"] == f"torch {torch.__version__} is a CPU build"
    with pytest.raises(ContractError, match="null without a reason"):
        check_provenance({**provenance, "driver": None, "null_reasons": {}})
    with pytest.raises(ContractError, match="kernel_path"):
        check_provenance({**provenance, "kernel_path": "cuda"})


def test_kernel_path_names_what_the_hot_steps_run(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kernels.kernel_path("cpu") == "torch"
    cuda = torch.device("cuda", 0)  # what a CUDA run would be told; no GPU is needed to ask
    expected = "triton" if kernels.triton_importable() else "torch"
    assert kernels.kernel_path(cuda) == expected
    monkeypatch.setenv("DYNEMB_KERNELS", "torch")
    assert kernels.kernel_path(cuda) == "torch"
    monkeypatch.delenv("DYNEMB_KERNELS")
    if kernels.triton_importable():
        monkeypatch.setattr(kernels, "_FAILED", {"find"})
        assert kernels.kernel_path(cuda) == "triton+torch"


def test_older_files_read_with_every_field_null_and_why() -> None:
    old = read_provenance({"label": "x"})
    assert set(old) == {*FIELDS, "null_reasons"}
    assert all(old[f] is None and old["null_reasons"][f] == NOT_RECORDED for f in FIELDS)


def test_environment_merges_the_records_provenance() -> None:
    root = Path(__file__).resolve().parents[1]
    base = collect_provenance(root, torch.device("cpu"), "torch")
    records = [
        {"device": "cpu", "provenance": {**base, "host_load_1m": 0.5, "driver": "590.48.01"}},
        {"device": "cpu", "provenance": {**base, "host_load_1m": 3.5, "driver": "580.159.04"}},
    ]
    merged = merge_provenance([r["provenance"] for r in records])
    assert merged["host_load_1m"] == 3.5  # the busiest start
    assert merged["driver"] is None and merged["null_reasons"]["driver"] == "the records differ: 580.159.04, 590.48.01"
    assert merged["git_commit"] == base["git_commit"]
    env = describe_environment("smoke", "torch", None, records, root)
    assert env["provenance"] == merged and env["driver"] is None
    host = describe_environment("smoke", "torch", None, [], root)  # no record: this host's
    check_provenance(host["provenance"])
    assert host["provenance"]["kernel_path"] is None
