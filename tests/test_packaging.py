"""embprof as a package: what `pip install .` declares, installs and runs, in a fresh venv.

The fresh venv installs from the pinned locks as constraints (pip's cache and this
machine's torch file; never a CUDA torch): first the core alone, where the analysis
side must work without torch, then the `bench` and `dev` extras.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from imports import REPO, distributions_of, normalize, third_party_imports

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FIXTURE = REPO / "tests" / "data" / "nsys" / "h200_torch_nvtx_nsys2025.3.sqlite"
LOCKS = ("requirements.txt", "requirements-bench.txt", "requirements-dev.txt")
DEV_TOOLS = {"pytest", "pytest-timeout", "hypothesis", "ruff"}
SLURM = {"snakemake-executor-plugin-slurm", "snakemake-executor-plugin-slurm-jobstep"}
NETWORK_TROUBLE = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable")


def names(requirements: list[str]) -> set[str]:
    return {normalize(re.split(r"[=<>!~\[; ]", r, maxsplit=1)[0]) for r in requirements}


def locked(lock: str) -> set[str]:
    lines = (REPO / lock).read_text().splitlines()
    return names([line for line in lines if line and not line.startswith("#")])


def covered(modules: set[str], declared: set[str]) -> set[str]:
    """The modules no declared distribution provides."""
    return {m for m in modules if not distributions_of(m) & declared}


def test_core_dependencies_cover_every_import_of_the_package_but_torch() -> None:
    """torch is only imported where measuring needs it, guarded by a one-line error."""
    modules = third_party_imports(*sorted((REPO / "src" / "embprof").rglob("*.py")))
    core = names(PYPROJECT["project"]["dependencies"])
    assert covered(modules, core) == {"torch"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {"torch", "triton"} <= names(extras["bench"]) and "torch" not in core


def test_extras_cover_the_benchmark_suite() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    suite = third_party_imports(
        REPO / "suite" / "benchmark_batched_dynamicemb_tables.py", REPO / "suite" / "conftest.py",
        REPO / "suite" / "embedding_collection" / "__main__.py",
    )
    core = names(PYPROJECT["project"]["dependencies"])
    assert covered(suite, core | names(extras["gpu"])) == set()
    # On the CPU, torchrec comes without its dependencies (requirements-nodeps.txt).
    assert covered(suite, core | names(extras["bench"])) == {"torchrec"}
    assert "torchrec" in locked("requirements-nodeps.txt")


def test_development_tools_and_the_slurm_plugin_are_out_of_the_runtime_locks() -> None:
    runtime = locked("requirements.txt") | locked("requirements-bench.txt")
    assert not (DEV_TOOLS - {"pytest"}) & runtime  # pytest runs the benchmark suite itself
    assert "pytest" not in locked("requirements.txt")
    assert not SLURM & runtime and SLURM <= locked("requirements-slurm.txt")
    assert DEV_TOOLS - {"pytest"} <= locked("requirements-dev.txt")
    assert "torch" not in locked("requirements.txt")


def test_the_slurm_plugin_loads_only_from_its_own_folder() -> None:
    code = ("from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry; "
            "print(sorted(ExecutorPluginRegistry().plugins))")
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "slurm" not in plain.stdout
    folder = Path(sys.prefix) / "slurm"
    if not folder.is_dir():
        pytest.skip(f"{folder} missing: `make slurm` installs the plugin there")
    env = {"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"}
    with_plugin = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env)
    assert "'slurm'" in with_plugin.stdout


def test_version_and_help_of_every_subcommand() -> None:
    """One version, in the package and in its metadata; `--help` on every subcommand."""
    from importlib.metadata import version

    from embprof import __version__
    from embprof.cli import COMMANDS

    done = subprocess.run([sys.executable, "-m", "embprof", "--version"], capture_output=True, text=True)
    assert done.stdout.strip() == f"embprof {__version__}" == f"embprof {version('embprof')}"
    listed = subprocess.run([sys.executable, "-m", "embprof", "--help"], capture_output=True,
                            text=True, check=True).stdout
    assert all(f"    {command}" in listed for command in COMMANDS)
    for command in COMMANDS:
        shown = subprocess.run([sys.executable, "-m", "embprof", command, "--help"],
                               capture_output=True, text=True, check=True).stdout
        assert shown.startswith(f"usage: embprof {command}"), command


def _pip(venv: Path, *args: str) -> None:
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 and any(t in done.stdout + done.stderr for t in NETWORK_TROUBLE):
        pytest.skip("the package index cannot be reached and pip's cache lacks a pinned file")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "embprof"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin"})


@pytest.mark.slow
def test_fresh_venv_installs_the_package_and_runs_it_from_elsewhere(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    constraints = [arg for lock in LOCKS for arg in ("-c", lock)]
    setuptools = next(line for line in (REPO / "requirements.txt").read_text().splitlines()
                      if line.startswith("setuptools=="))
    _pip(venv, setuptools)
    _pip(venv, "--no-build-isolation", *constraints, ".")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The core: the breakdown from another directory, no torch anywhere.
    assert _run(venv, elsewhere, "--version").stdout.startswith("embprof ")
    done = _run(venv, elsewhere, "breakdown", str(FIXTURE), "--layout", "any", "--out-dir", "out")
    assert done.returncode == 0, done.stderr
    [csv] = [p for p in (elsewhere / "out").glob("opcalls__*.csv") if not p.name.endswith(".samples.csv")]
    assert csv.read_text().splitlines()[0].startswith("backend,phase,parent_stages,op,")
    busy = json.loads(next((elsewhere / "out").glob("*.busy.json")).read_text())
    assert busy["time_source"] == "gpu-kernels"
    python = str(venv / "bin" / "python")
    probe = "import importlib.util as u; print(u.find_spec('torch') is None)"
    assert subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip() == "True"
    no_torch = _run(venv, elsewhere, "peak-bandwidth", "--out", "peak.json", "--device", "cpu")
    assert no_torch.returncode == 1
    assert no_torch.stderr.strip() == "embprof peak-bandwidth: error: measuring needs torch: pip install 'embprof[bench]'"
    # The extras: the benchmark's stack (this machine's CPU torch) and the development tools.
    _pip(venv, "--no-build-isolation", *constraints, ".[bench,dev]")
    measured = _run(venv, elsewhere, "peak-bandwidth", "--out", "peak.json", "--device", "cpu",
                    "--size-mib", "8", "--repeats", "1")
    assert measured.returncode == 0, measured.stderr
    assert json.loads((elsewhere / "peak.json").read_text())["source"] == "measured"
    versions = subprocess.run([python, "-c", "import torch, pytest, hypothesis; print(torch.__version__)"],
                              capture_output=True, text=True, check=True).stdout
    assert versions.strip().endswith("+cpu")


def test_figures_import_no_page() -> None:
    """embprof.pages puts figures on pages and imports embprof.plots, never the other way (issue 33:
    the figure steps' writer lay in plots/ and the two packages imported each other)."""
    for path in sorted((REPO / "src" / "embprof" / "plots").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in names if m.startswith("embprof.pages")], path.name
