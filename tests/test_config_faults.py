"""Bad input before and around a run (issue 17): what users type on the command line, what can be
known before any job, broken results files, settings that travel, the lock a killed run leaves.

The suite's facts are the benchmark's own (suite.configs); commands run as the rules run them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from embprof.errors import (
    ConfigError,
    ContractError,
    LockHeldError,
)
from embprof.results.paths import ResultsPaths
from embprof.results.records import merge_results
from embprof.results.steps import StepRecord, read_status
from embprof.workflow.lock import LOCKS, release_stale_lock, snakemake_pids
from embprof.workflow.preflight import SuiteFacts, results_problems, run_problems
from embprof.workflow.settings import PLANS, Settings, record_from_plan
from embprof.workflow.validation import validate_config
from suite.configs import extra_args_problem, inputs_problem, preset_labels, select_problem

REPO = Path(__file__).resolve().parents[1]

SUITE = SuiteFacts(preset_labels, select_problem, inputs_problem, extra_args_problem)
GPU = "T2_totalB1024_D16_sgd_gpu_pool=none_cap=1K"
HBM = "T2_totalB1024_D16_sgd_no_hbm_pool=none_cap=4K"
GIB = 1 << 30


def embprof(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embprof", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def config(**changes: object) -> dict:
    """A schema-valid config (defaults filled), changed."""
    filled: dict = dict(changes)
    validate_config(filled)
    return filled


# ---- what users type on the command line (Snakemake hands it over as strings) ----

def test_command_line_strings_are_read_as_the_schema_types_them() -> None:
    typed = config(
        torchrec="false", num_iterations="null", select="null", labels="_gpu_",
        overrides={"_gpu_": {"num_iterations": "3", "torchrec": "no", "extra_args": "--num-tables=4"}},
    )
    assert typed["torchrec"] is False and typed["num_iterations"] is None
    assert typed["select"] == "null"  # a -k expression stays what was typed
    assert typed["labels"] == ["_gpu_"]
    assert typed["overrides"] == {"_gpu_": {"num_iterations": 3, "torchrec": False, "extra_args": ["--num-tables=4"]}}


def test_a_string_that_is_no_such_value_is_still_named_by_the_schema() -> None:
    with pytest.raises(ConfigError) as err:
        config(total_cap="yes", overrides={"_gpu_": {"num_iterations": "three"}})
    assert "  total_cap: 'yes' is not of type 'integer', 'null'" in str(err.value).splitlines()
    assert "  overrides._gpu_.num_iterations: 'three' is not of type 'integer', 'null'" in str(err.value).splitlines()


# ---- what can be known before any job ----

def test_every_problem_known_before_the_run_is_one_line(tmp_path: Path) -> None:
    results = ResultsPaths(tmp_path / "results")
    bad = config(select="sgd and", total_cap=1, num_iterations=10**20, compare_to=str(tmp_path / "gone"),
                 overrides={"_gpu_": {"profile_iterations": 10**12}})
    problems = run_problems(bad, SUITE, results, memory=24 * GIB)
    assert problems[0] == ("select: 'sgd and' is not a pytest -k expression: at column 8: "
                           "expected not OR left parenthesis OR identifier; got end of input")
    assert problems[1] == "total_cap: cannot split 1 rows over 2 tables"
    assert problems[2].startswith("num_iterations: 100000000000000000000 iterations of the smoke preset need at least ")
    assert problems[2].endswith("for their ids, made before the run starts; this host has 24.0 GiB")
    assert problems[3].startswith("overrides._gpu_.profile_iterations: 1000000000000 iterations")
    assert problems[4] == f"compare_to: {tmp_path / 'gone'}: no such folder"
    assert len(problems) == 5 and all("\n" not in p for p in problems)
    assert run_problems(config(), SUITE, results, memory=24 * GIB) == []


def test_labels_that_name_no_config_and_equals_in_select() -> None:
    problems = run_problems(config(labels=["_sgd_gpu_", "_sgd_gpux_"], select="cap=1K"), SUITE,
                            ResultsPaths(), memory=None)
    assert problems == [
        "select: 'cap=1K' is not a pytest -k expression: at column 4: expected end of input; got = "
        "(-k cannot hold '='; `labels:` takes label parts with '=')",
        "labels: '_sgd_gpux_' is in no config label of the smoke preset (e.g. T2_totalB1024_D16_adam_gpu_pool=none_cap=1K)",
    ]


def test_overrides_that_match_nothing_or_cannot_apply_are_refused() -> None:
    """Issue 34, case 7: an override key in no label was ignored without a word, and an override's
    --num-tables (the docs' own example) failed its config while the run exited 0."""
    problems = run_problems(config(overrides={
        "_sgd_gpux_": {"num_iterations": 3},
        "_gpu_": {"extra_args": ["--num-tables=4", "--repeats", "3", "--alpha=1.2"]},
    }), SUITE, ResultsPaths(), memory=None)
    assert problems == [
        "overrides: '_sgd_gpux_' is in no config label of the smoke preset (e.g. T2_totalB1024_D16_adam_gpu_pool=none_cap=1K)",
        "overrides._gpu_.extra_args: --repeats is passed by the workflow itself: set repeats instead",
        "overrides._gpu_.extra_args: --num-tables shapes the config labels, which collection fixed for every "
        "config: it cannot change some of them",
    ]


@pytest.mark.parametrize("page", ["config/README.md", "docs/workflow.md"])
def test_the_docs_example_overrides_are_a_run_that_can_work(page: str) -> None:
    import re

    import yaml

    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", (REPO / page).read_text(), re.S) if "overrides:" in b]
    example = yaml.safe_load(block)
    assert run_problems(config(**{"preset": "smoke", **example}), SUITE, ResultsPaths(), memory=None) == []


def test_iterations_are_held_against_the_memory_their_inputs_need() -> None:
    # smoke: 1024 ids per iteration, an int64 id and an int64 offset each.
    assert inputs_problem("smoke", 65536, memory=GIB) is None
    assert inputs_problem("smoke", 65537, memory=GIB) is not None
    assert inputs_problem("seed", 100, memory=None) is None


def test_compare_to_must_be_another_readable_results_folder(tmp_path: Path) -> None:
    results = ResultsPaths(tmp_path / "results")
    results.root.mkdir()
    empty, broken = tmp_path / "empty", tmp_path / "broken"
    empty.mkdir()
    broken.mkdir()
    (broken / "benchmark_results.json").write_text("[{")
    lines = [run_problems(config(compare_to=str(folder)), SUITE, results, memory=None)
             for folder in (empty, broken, results.root)]
    assert lines[0] == [f"compare_to: {empty}: not a results folder (it has no benchmark_results.json)"]
    assert lines[1][0].startswith(f"compare_to: {broken / 'benchmark_results.json'}: not valid JSON")
    assert lines[2] == [f"compare_to: {results.root} is this run's own results folder; name an earlier one"]


@pytest.mark.parametrize(("args", "cause"), [
    (["--select", "sgd and"], "Wrong expression passed to '-k': sgd and: at column 8"),
    (["--extra-arg=--total-cap=1"], "cannot split 1 rows over 2 tables"),
    (["--select", "no_such_config"], "no benchmark configs match select='no_such_config'"),
])
def test_collect_says_why_pytest_stopped_in_its_one_line(tmp_path: Path, args: list[str], cause: str) -> None:
    """The collect job's own check, for what only pytest can tell (or a run by hand)."""
    out = tmp_path / "configs.tsv"
    done = embprof("collect", "--preset", "smoke", *args, "--out", str(out))
    assert done.returncode == 1 and not out.exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embprof collect: error: ") and cause in lines[0], lines


def test_the_benchmark_refuses_iterations_whose_inputs_cannot_fit() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suite/benchmark_batched_dynamicemb_tables.py", "--collect-only",
         "-q", "-p", "no:cacheprovider", "--preset", "smoke", "--num-iterations", str(10**20)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 4
    assert done.stderr.strip().startswith("ERROR: --num-iterations: 100000000000000000000 iterations of the smoke preset")
    assert "Traceback" not in done.stdout + done.stderr


# ---- broken results files the workflow reads ----

def _status(label: str, **changes: object) -> dict:
    return {"label": label, "test_id": "t", "ok": True, "failed_step": None, "returncode": None,
            "log": "l", "log_tail": "", "reason": "", "steps": {}} | changes


def test_broken_files_the_input_functions_read_are_named_with_what_to_do(tmp_path: Path) -> None:
    paths = ResultsPaths(tmp_path)
    paths.status_dir.mkdir()
    paths.configs.write_text(f"test_id\tlabel\nt1\t{GPU}\nt2\t{HBM}\n")
    assert results_problems(paths) == []  # no status yet: the checkpoints make them
    paths.status(GPU).write_text('{"label": ')
    paths.status(HBM).write_text(json.dumps(_status(HBM, ok="yes")))
    problems = results_problems(paths)
    assert problems[0].startswith(f"{paths.status(GPU)}: not valid JSON")
    assert problems[1] == (f"{paths.status(HBM)}: status: ok must be true or false, got 'yes': delete it and run "
                           f"with --forcerun status (statuses are merged again from {tmp_path / 'steps'}/)")
    paths.configs.write_text("label\n")
    assert results_problems(paths) == [
        f"{paths.configs}: header must be 'test_id<TAB>label', got ['label']: delete it and run with "
        "--forcerun collect (the configs are listed again)"
    ]


def test_status_and_step_records_are_checked_for_their_types(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_status(GPU, ok=False, failed_step=None)))
    with pytest.raises(ContractError, match="a failed config needs its failed_step"):
        read_status(path)
    record = tmp_path / "r.json"
    record.write_text(json.dumps({"step": "profile", "label": GPU, "test_id": "t", "ok": 1,
                                  "returncode": 0, "log": None}))
    with pytest.raises(ContractError, match="ok must be true or false"):
        StepRecord.read(record)


def test_a_bad_timing_record_is_named_by_the_file_it_came_from(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps([{"label": GPU}]))
    bad.write_text(json.dumps([{"label": "not a label"}]))
    with pytest.raises(ContractError) as err:
        merge_results([good, bad])
    assert str(err.value) == f"{bad}: record 0: not a config label: 'not a label'"
    out = tmp_path / "benchmark_results.json"
    done = embprof("aggregate", "--out", str(out), str(good), str(bad))
    assert done.returncode == 1 and not out.exists()
    assert done.stderr.strip() == f"embprof aggregate: error: {bad}: record 0: not a config label: 'not a label'"


# ---- settings that travel with results/ ----

def test_a_record_changes_only_when_the_job_that_used_it_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34, case 2: planning (a dry run, a run stopped on the lock, a --touch) never changes a
    record; a changed setting re-runs its job until the job records it, whatever the mtimes."""
    monkeypatch.chdir(tmp_path)
    record = Path("results/settings/timing/L.json")
    # No record yet (a folder from before records): taken as it is now, and filled in, dated 0,
    # except by a dry run.
    assert Settings().plan(record, {"iterations": 2}, dry=True).stat().st_mtime == 0 and not record.exists()
    plan = Settings().plan(record, {"iterations": 2})
    assert plan == PLANS / record and plan.stat().st_mtime == 0
    assert json.loads(record.read_text()) == {"iterations": 2} and record.stat().st_mtime == 0
    # Unchanged: the plan stays dated 0 (it re-runs nothing), the record untouched.
    os.utime(record, (1000, 1000))
    assert Settings().plan(record, {"iterations": 2}).stat().st_mtime == 0 and record.stat().st_mtime == 1000
    # Changed: the plan is dated now, with a new time in it, every time it is planned; the record stays.
    seen = set()
    for dry in (True, False, False):  # a dry run; runs that stop on the lock or touch
        before = time.time() - 1
        plan = Settings().plan(record, {"iterations": 3}, dry=dry)
        assert plan.stat().st_mtime > before and json.loads(plan.read_text())["iterations"] == 3
        seen.add(plan.read_bytes())
        assert json.loads(record.read_text()) == {"iterations": 2} and record.stat().st_mtime == 1000
    assert len(seen) == 3  # a checksum Snakemake recorded for the job never matches the next plan
    # The job that ran with it records it (its command, `embprof <step> ... --record-settings PLAN`).
    assert record_from_plan(plan) == record and json.loads(record.read_text()) == {"iterations": 3}
    assert Settings().plan(record, {"iterations": 3}).stat().st_mtime == 0
    # A key the record never held (the code digest, added later) is taken as it is now.
    assert Settings().plan(record, {"iterations": 3, "code": "abc"}).stat().st_mtime == 0
    assert json.loads(record.read_text()) == {"iterations": 3, "code": "abc"}
    assert Settings().plan(record, {"iterations": 3, "code": "def"}).stat().st_mtime > 0
    # Only a plan can be recorded, as one line.
    done = embprof("unlock", "--record-settings", str(tmp_path / "x.json"), cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.strip().endswith("not a settings plan (they lie under .snakemake/embprof/settings/)")


def test_a_settled_plan_is_read_again_whenever_either_file_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: planning remembers settled plans (a dry run of 160 configs read 1,600 small files);
    the shortcut never hides a change, even a record replaced by one of the same size and mtime."""
    monkeypatch.chdir(tmp_path)
    known = Path(".snakemake/embprof/plans-settled.json")
    record = Path("results/settings/timing/L.json")

    def plan(settings: dict, dry: bool = False) -> Path:
        book = Settings(known=known)  # a new run
        path = book.plan(record, settings, dry=dry)
        book.save()
        return path

    assert plan({"iterations": 2}, dry=True).stat().st_mtime == 0 and not record.exists()
    assert plan({"iterations": 2}, dry=True).stat().st_mtime == 0 and not record.exists()
    assert plan({"iterations": 2}).stat().st_mtime == 0 and json.loads(record.read_text()) == {"iterations": 2}
    assert plan({"iterations": 2}).stat().st_mtime == 0
    # Another copy's record, same size and mtime, other settings: a change all the same.
    record.write_text(record.read_text().replace("2", "3"))
    os.utime(record, (0, 0))
    assert plan({"iterations": 2}).stat().st_mtime > 0
    assert plan({"iterations": 3}).stat().st_mtime == 0
    assert plan({"iterations": 4}, dry=True).stat().st_mtime > 0


# ---- the lock a killed run leaves ----

def _proc(root: Path, pid: int, argv: list[str], cwd: Path) -> None:
    entry = root / str(pid)
    entry.mkdir(parents=True)
    (entry / "cmdline").write_bytes("\0".join(argv).encode() + b"\0")
    (entry / "cwd").symlink_to(cwd)


def test_snakemake_processes_are_found_by_their_working_directory(tmp_path: Path) -> None:
    here, elsewhere, proc = tmp_path / "wf", tmp_path / "other", tmp_path / "proc"
    here.mkdir()
    elsewhere.mkdir()
    _proc(proc, 11, ["/venv/bin/python3", "/venv/bin/snakemake", "--cores", "1"], here)
    _proc(proc, 12, ["python", "-m", "snakemake", "-d", str(here)], elsewhere)
    _proc(proc, 13, ["snakemake", "--directory=wf"], tmp_path)
    _proc(proc, 14, ["snakemake", "report"], elsewhere)
    _proc(proc, 15, ["python", "-c", "snakemake"], here)
    assert snakemake_pids(here, proc) == [11, 12, 13]


def test_a_stale_lock_is_removed_and_a_held_one_kept(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    assert release_stale_lock(tmp_path, proc).removed == ()
    (tmp_path / LOCKS).mkdir(parents=True)
    for name in ("0.input.lock", "0.output.lock"):
        (tmp_path / LOCKS / name).write_text("results/x\n")
    _proc(proc, 21, ["snakemake", "--cores", "1"], tmp_path)
    with pytest.raises(LockHeldError, match=r"snakemake \(pid 21\) runs here and holds the lock"):
        release_stale_lock(tmp_path, proc)
    assert len(list((tmp_path / LOCKS).iterdir())) == 2
    (proc / "21" / "cwd").unlink()
    (proc / "21" / "cwd").symlink_to(proc)
    assert [p.name for p in release_stale_lock(tmp_path, proc).removed] == ["0.input.lock", "0.output.lock"]
    assert list((tmp_path / LOCKS).iterdir()) == []
