"""Faults and bad input against the real workflow (issue 17): real Snakemake runs of the real
benchmark on the tiny config, each case on its own copy of one finished run.

Nothing good is destroyed (a failing job leaves the previous outputs), nothing stale is shown
(a failed config shows only its failure), every error is one line, what can be known before the
run stops it before any job, settings travel with results/, and a hard kill is recovered from.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_workflow_e2e import (
    REPO,
    TINY,
    assert_nothing_to_do,
    checkout_with_results,
    copy_workflow,
    planned_jobs,
    snakemake,
)

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

LABEL = "T2_totalB1024_D16_sgd_gpu_pool=none_cap=1K"


def one_config(path: Path, **changes: object) -> Path:
    """The tiny config narrowed to one config (two iterations, the torch profiler)."""
    config = yaml.safe_load(TINY.read_text()) | {"labels": ["_sgd_gpu_"]} | changes
    path.write_text(yaml.safe_dump(config))
    return path


def digests(results: Path) -> dict[str, str]:
    """Every file of a results folder and its content (logs aside: a run writes its own)."""
    return {
        str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(results.rglob("*"))
        if p.is_file() and "logs" not in p.relative_to(results).parts
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("faults"))
    config = one_config(workdir / "one.yaml")
    done = snakemake(workdir, "--cores", "2", "report", "--configfile", str(config))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return workdir


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run (results and Snakemake's metadata) to break."""
    own = tmp_path / "wf"
    subprocess.run(["cp", "-a", str(finished), str(own)], check=True)
    return own


def test_what_can_be_known_before_the_run_stops_it_before_any_job(run: Path) -> None:
    before = digests(run / "results")
    done = snakemake(run, "--cores", "1", "report", "--configfile", str(run / "one.yaml"), "--config",
                     "select=sgd and", "total_cap=1", f"num_iterations={10**20}", "compare_to=/no/such/folder")
    assert done.returncode != 0
    err = done.stdout + done.stderr
    for line in (
        "  select: 'sgd and' is not a pytest -k expression: at column 8: expected not OR left parenthesis"
        " OR identifier; got end of input",
        "  total_cap: cannot split 1 rows over 2 tables",
        "  compare_to: /no/such/folder: no such folder",
    ):
        assert line in err.splitlines(), err[-3000:]
    assert re.search(r"^  num_iterations: 100000000000000000000 iterations of the smoke preset need at least .+ "
                     r"for their ids, made before the run starts; this host has ", err, re.M)
    assert "Traceback" not in err and not planned_jobs(done.stdout)
    assert digests(run / "results") == before
    labels = snakemake(run, "-n", "report", "--configfile", str(run / "one.yaml"), "--config", "labels=_sgd_gpux_")
    assert labels.returncode != 0
    assert "  labels: '_sgd_gpux_' is in no config label of the smoke preset" in labels.stdout + labels.stderr


def test_what_users_type_on_the_command_line_is_read_as_typed(run: Path) -> None:
    done = snakemake(run, "-n", "--cores", "1", "report", "--configfile", str(run / "one.yaml"), "--config",
                     "torchrec=false", 'overrides={"_sgd_gpu_": {"num_iterations": 3, "torchrec": false}}')
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    timing = next(line for line in done.stdout.splitlines() if "embprof timing --test-id" in line)
    assert "--num-iterations 3 --no-torchrec" in timing


def test_a_failing_job_leaves_the_previous_outputs(run: Path, tmp_path: Path) -> None:
    results = run / "results"
    configs, report = (results / "configs.tsv").read_bytes(), (results / "report" / "index.html").read_bytes()
    # Only pytest can say that a -k expression matches nothing: the collect job fails, in one line.
    done = snakemake(run, "--cores", "1", "report", "--configfile", str(run / "one.yaml"),
                     "--config", "select=no_such_config")
    assert done.returncode != 0
    assert "embprof collect: error: no benchmark configs match select='no_such_config'" in done.stdout + done.stderr
    assert (results / "configs.tsv").read_bytes() == configs
    # A report that fails half way (an earlier results folder whose per-op CSV is broken).
    earlier = tmp_path / "earlier"
    subprocess.run(["cp", "-a", str(results), str(earlier)], check=True)
    (earlier / "opcalls" / f"opcalls__{LABEL}.csv").write_text("backend,phase\n")
    done = snakemake(run, "--cores", "1", "report", "--configfile", str(run / "one.yaml"),
                     "--config", f"compare_to={earlier}")
    assert done.returncode != 0
    assert f"opcalls__{LABEL}.csv: missing column(s)" in (results / "logs" / "report.log").read_text()
    assert (results / "report" / "index.html").read_bytes() == report
    assert (results / "configs.tsv").read_bytes() == configs


def test_a_config_that_fails_shows_only_its_failure(run: Path) -> None:
    config = one_config(run / "crash.yaml", overrides={"_sgd_gpu_": {"extra_args": ["--alpha=-1"]}})
    done = snakemake(run, "--cores", "1", "report", "--configfile", str(config))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = run / "results"
    assert not json.loads((results / "status" / f"{LABEL}.json").read_text())["ok"]
    # The earlier run's per-op files are still there, and none of them is shown.
    for stale in (f"opcalls/opcalls__{LABEL}.csv", f"sunburst/{LABEL}.png", f"bandwidth/bandwidth__{LABEL}.csv"):
        assert (results / stale).is_file(), stale
    html = (results / "report" / "index.html").read_text()
    assert "--alpha must be positive" in html
    assert "No breakdown: the profile step failed" in html
    assert "segmented_unique" not in html  # an op of the earlier breakdown, in no table or figure
    assert not list((results / "report" / "figures").glob("sunburst__*.png"))
    assert "segmented_unique" not in (results / "report" / "summary.md").read_text()


def test_settings_travel_with_a_copied_results_folder(finished: Path, tmp_path: Path) -> None:
    fresh = checkout_with_results(finished, tmp_path / "fresh")
    config = str(one_config(fresh / "one.yaml"))
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", config))
    before = digests(fresh / "results")
    dry = snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", config, "--config", "num_iterations=3")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert planned_jobs(dry.stdout)[("timing", LABEL)] == 1 and ("profile", LABEL) not in planned_jobs(dry.stdout)
    assert digests(fresh / "results") == before  # a dry run changes nothing there
    compare = snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", config,
                        "--config", f"compare_to={finished / 'results'}")
    assert {rule for rule, _ in planned_jobs(compare.stdout)} == {"report"}
    done = snakemake(fresh, "--cores", "1", "report", "--configfile", config, "--config", "num_iterations=3")
    assert done.returncode == 0, done.stderr[-3000:]
    [record] = json.loads((fresh / "results" / "timing" / f"{LABEL}.json").read_text())
    assert record["num_iterations"] == 3
    # Its bandwidth is made again from the new record (ids per iteration), not left as it was.
    assert planned_jobs(done.stdout + done.stderr)[("bandwidth", LABEL)] == 1
    # The settings are in results/ now: a third clone with the copy re-runs nothing for them.
    third = checkout_with_results(fresh, tmp_path / "third")
    assert_nothing_to_do(snakemake(third, "-n", "--cores", "1", "report", "--configfile", config,
                                   "--config", "num_iterations=3"))


def test_a_broken_status_file_is_named_with_what_to_do(run: Path) -> None:
    status = run / "results" / "status" / f"{LABEL}.json"
    status.write_text('{"label": ')
    done = snakemake(run, "-n", "--cores", "1", "report", "--configfile", str(run / "one.yaml"))
    assert done.returncode != 0
    err = done.stdout + done.stderr
    assert f"  results/status/{LABEL}.json: not valid JSON" in err
    assert "delete it and run with --forcerun status (statuses are merged again from results/steps/)" in err
    assert "InputFunctionException" not in err and "Traceback" not in err
    status.unlink()
    done = snakemake(run, "--cores", "1", "report", "--configfile", str(run / "one.yaml"), "--forcerun", "status")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(status.read_text())["ok"] is True


def _start(workdir: Path, *args: str) -> subprocess.Popen[bytes]:
    """Snakemake in a process group of its own (as in a terminal), so it can be killed whole."""
    env = {k: v for k, v in os.environ.items() if k != "EMBPROF_PROFILER"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(workdir / "src"), env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _locked(workdir: Path) -> bool:
    locks = workdir / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.iterdir())


NEW_SETTING = ("--config", "num_iterations=3")


def _start_timing(workdir: Path) -> subprocess.Popen[bytes]:
    """A run that times the config again (a changed setting); returns once its timing job runs."""
    log = workdir / "results" / "logs" / "timing" / f"{LABEL}.log"
    log.unlink(missing_ok=True)
    process = _start(workdir, "--cores", "1", "report", "--configfile", str(workdir / "one.yaml"), *NEW_SETTING)
    deadline = time.monotonic() + 120
    while not (_locked(workdir) and log.exists() and "pytest" in log.read_text(errors="replace")):
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before it was killed"
        time.sleep(0.2)
    return process


def _kill_hard(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the run and its jobs, as an out-of-memory killer or a lost terminal would."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _embprof(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embprof", *args], cwd=workdir, capture_output=True,
                          text=True, timeout=60, check=False)


def test_a_hard_kill_is_recovered_from_in_one_command(run: Path) -> None:
    timing = (run / "results" / "timing" / f"{LABEL}.json").read_bytes()
    _kill_hard(_start_timing(run))
    assert _locked(run)
    assert (run / "results" / "timing" / f"{LABEL}.json").read_bytes() == timing  # the killed job's output stays
    locked = snakemake(run, "--cores", "1", "report", "--configfile", str(run / "one.yaml"), *NEW_SETTING)
    assert locked.returncode != 0 and "LockException" in locked.stdout + locked.stderr
    plain = snakemake(run, "--unlock")  # no --cores: plain, as a user types it
    assert plain.returncode == 0 and "Unlocked working directory" in plain.stdout + plain.stderr
    # embprof unlock (what `make report` runs first) refuses while a run holds the lock ...
    process = _start_timing(run)
    try:
        held = _embprof(run, "unlock")
        assert held.returncode == 1 and held.stderr.count("\n") == 1
        assert f"snakemake (pid {process.pid}) runs here and holds the lock" in held.stderr
    finally:
        _kill_hard(process)
    # ... and takes the one a killed run left; the next run does what the killed one was cut off from.
    freed = _embprof(run, "unlock")
    assert freed.returncode == 0, freed.stderr
    assert freed.stdout.strip() == "embprof unlock: removed the lock a killed run left in .snakemake"
    done = snakemake(run, "--cores", "1", "report", "--configfile", str(run / "one.yaml"), *NEW_SETTING)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("timing", LABEL) in planned_jobs(done.stdout + done.stderr)
    [record] = json.loads((run / "results" / "timing" / f"{LABEL}.json").read_text())
    assert record["num_iterations"] == 3


def test_make_report_removes_a_stale_lock_first() -> None:
    done = subprocess.run(["make", "-n", "report"], cwd=REPO, capture_output=True, text=True, check=True)
    commands = [line for line in done.stdout.splitlines() if line.startswith(".venv/bin/")]
    assert commands[-2:] == [".venv/bin/embprof unlock", ".venv/bin/snakemake --cores 1 report"]
