"""Another benchmark suite through the workflow (issue 30): a suite that keeps the reference system's
contract, run from its own folder through its launcher, its bad inputs refused before any job.

The suite is tests/seed_suite, a CPU stand-in of that contract with NVIDIA's kind of labels; the
profiler is a stand-in nsys that runs the suite's command as nsys would and writes a real H200
trace of that config (tests/data/nsys), so everything after the profile is the real thing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from test_workflow_e2e import assert_nothing_to_do, copy_workflow, snakemake

from embprof.results.opcalls import read_opcalls
from embprof.results.paths import ResultsPaths
from embprof.results.records import read_results
from embprof.workflow.preflight import other_suite_problems
from embprof.workflow.suite import make_suite, suite_problems
from embprof.workflow.validation import validate_config

REPO = Path(__file__).resolve().parents[1]
STAND_IN = REPO / "tests" / "seed_suite"
TRACE = REPO / "tests" / "data" / "nsys" / "h200_tbe_autograd_threads_nsys2025.3.sqlite"
TRACED = "T2_totalB32_D16_sgd_gpu_pool=none_cap=1000"  # the config of that trace
CRASHING = "T2_totalB32_D16_adam_gpu_pool=none_cap=1000"
LAUNCHER = "-m torch.distributed.run --nnodes 1 --nproc_per_node 1"

FAKE_NSYS = """#!/bin/sh
# `profile ... -o PREFIX --force-overwrite true CMD...`: run CMD as nsys does, then write the trace
# of the config; `export ... --output OUT TRACE`: copy it (the trace is an export already).
case "$1" in
profile)
  shift; out=""
  while [ $# -gt 0 ]; do
    case "$1" in -o) out="$2"; shift 2;; --force-overwrite) shift 2; break;; *) shift;; esac
  done
  echo "$@" >> "$(dirname "$0")/profiled.txt"
  "$@" || exit $?
  cp "{trace}" "$out.nsys-rep";;
export)
  out=""; last=""
  while [ $# -gt 0 ]; do case "$1" in --output) out="$2"; shift 2;; *) last="$1"; shift;; esac; done
  cp "$last" "$out";;
esac
"""


def config(**changes: object) -> dict:
    filled: dict = dict(changes)
    validate_config(filled)
    return filled


# ---- before any job: the suite's own source, the keys it cannot honour ----

@pytest.mark.parametrize(("source", "problem"), [
    (None, "no such file"),
    ("def test_x(:\n", "not a pytest file (Python cannot parse it"),
    ("def helper():\n    pass\n", "collects no tests"),
    ("import os\nRESULTS = os.environ['BENCHMARK_RESULTS_FILE']\ndef test_x():\n    return {'label': 1}\n",
     "its records lack the seed's fields gpu_name, num_tables"),
    ("def test_x():\n    return {'dyn_train_ms': 1}\n", "writes no records to $BENCHMARK_RESULTS_FILE"),
])
def test_a_suite_that_cannot_run_is_named_in_one_line(tmp_path: Path, source: str | None, problem: str) -> None:
    path = tmp_path / "suite.py"
    if source is not None:
        path.write_text(source)
    problems = suite_problems(path)
    assert problems and problem in problems[0] and all("\n" not in p for p in problems)


def test_the_stand_in_and_a_readme_are_told_apart() -> None:
    assert suite_problems(STAND_IN / "benchmark_seed_contract.py") == []
    assert "not a pytest file" in suite_problems(REPO / "README.md")[0]


def test_keys_only_this_projects_suite_takes_are_refused_for_another(tmp_path: Path) -> None:
    suite = make_suite(REPO, STAND_IN / "benchmark_seed_contract.py")
    bad = config(total_cap=1024, repeats=3, profiler="torch", overrides={"_gpu_": {"repeats": 2}})
    problems = other_suite_problems(bad, suite, ResultsPaths(tmp_path / "results"))
    assert [p.split(":")[0] for p in problems] == ["total_cap", "repeats, overrides._gpu_.repeats", "profiler"]
    assert other_suite_problems(config(profiler="nsys"), suite, ResultsPaths(tmp_path / "results")) == []


def test_a_missing_suite_is_no_problem_where_its_configs_are_listed_already(tmp_path: Path) -> None:
    """The host that draws a results folder copied from the GPU host has no copy of the suite."""
    gone = make_suite(REPO, tmp_path / "elsewhere" / "suite.py", check=False)
    results = ResultsPaths(tmp_path / "results")
    assert "no such file" in other_suite_problems(config(), gone, results)[0]
    results.configs.parent.mkdir(parents=True)
    results.configs.write_text("test_id\tlabel\n")
    assert other_suite_problems(config(), gone, results) == []


def test_snakemake_stops_before_any_job_on_a_suite_that_cannot_run(tmp_path: Path) -> None:
    work = copy_workflow(tmp_path / "wf")
    (tmp_path / "notests.py").write_text("x = 1\n")
    run = snakemake(work, "-n", "--cores", "1", "measure", "--config", f"suite={tmp_path / 'notests.py'}",
                    "profiler=nsys", "total_cap=1000")
    said = run.stdout + run.stderr
    assert run.returncode == 1
    assert f"suite: {tmp_path / 'notests.py'}: collects no tests" in said
    assert "total_cap: only this project's suite takes --total-cap" in said
    assert "Traceback" not in said and not (work / "results" / "configs.tsv").exists()


# ---- the whole run ----

@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in suite, outside the workflow's checkout as a user's recsys-examples is, measured and
    reported; one of its two configs crashes."""
    root = tmp_path_factory.mktemp("suite-run")
    work = copy_workflow(root / "wf")
    suite = root / "recsys-examples" / "benchmark"
    shutil.copytree(STAND_IN, suite)
    nsys = root / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text(FAKE_NSYS.replace("{trace}", str(TRACE)))
    nsys.chmod(0o755)
    os.environ["SEED_SUITE_FAIL"] = CRASHING
    try:
        done = snakemake(work, "--cores", "2", "report", "--config", f"suite={suite / 'benchmark_seed_contract.py'}",
                         "profiler=nsys", f"nsys={nsys}", f"suite_launcher={LAUNCHER}", "num_iterations=3",
                         "suite_env={SEED_SUITE_ENV: set}", timeout=1200)
    finally:
        del os.environ["SEED_SUITE_FAIL"]
    assert done.returncode == 0, done.stderr[-3000:]
    return work


@pytest.mark.slow
@pytest.mark.e2e
def test_another_suite_is_measured_from_its_own_folder_through_its_launcher(run: Path) -> None:
    results = ResultsPaths(run / "results")
    configs = results.configs.read_text().splitlines()[1:]
    assert [c.split("\t")[0] for c in configs] == [
        f"benchmark_seed_contract.py::TestGpu::test_gpu[{label}]" for label in (TRACED, CRASHING)]
    profiled = (run.parent / "bin" / "profiled.txt").read_text().splitlines()
    # the interpreter that runs the workflow's steps, then the launcher, then pytest
    assert profiled and all(line.split(" ", 1)[0].startswith(sys.prefix) and
                            f" {LAUNCHER} -m pytest --rootdir=. " in line for line in profiled)
    assert all("--preset" not in line and "--profile nsys" in line for line in profiled)
    (record,) = read_results(results.benchmark_results)
    assert record["label"] == TRACED and record["device"] == "cpu"
    assert record["provenance"]["started_at"] and "not this project's suite" in record["provenance"]["null_reasons"]["kernel_path"]
    rows = read_opcalls(results.opcalls(TRACED))
    assert set(rows["backend"]) == {"trc"} and rows["num_iters"].iloc[0] == 2
    status = json.loads(results.status(CRASHING).read_text())
    assert status["ok"] is False and "failing as asked" in status["log_tail"]
    assert CRASHING in (results.report_html.read_text())
    settings = json.loads((run / "results" / "settings" / "collect.json").read_text())
    assert settings["suite"] == "benchmark_seed_contract.py" and settings["suite_env"] == {"SEED_SUITE_ENV": "set"}


@pytest.mark.slow
@pytest.mark.e2e
def test_a_run_of_another_suite_has_nothing_left_to_do(run: Path) -> None:
    suite = run.parent / "recsys-examples" / "benchmark" / "benchmark_seed_contract.py"
    again = snakemake(run, "-n", "--cores", "1", "report", "--config", f"suite={suite}", "profiler=nsys",
                      f"nsys={run.parent / 'bin' / 'nsys'}", f"suite_launcher={LAUNCHER}", "num_iterations=3",
                      "suite_env={SEED_SUITE_ENV: set}")
    assert_nothing_to_do(again)
