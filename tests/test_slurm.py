"""The workflow's cluster path on a real one-node SLURM cluster (tests/slurm).

Every job goes through real `sbatch` calls made by Snakemake's SLURM executor
with `--profile profiles/slurm`; the test checks them against SLURM's own
queue (squeue keeps finished jobs for the cluster's MinJobAge of an hour).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPTS = REPO / "tests" / "slurm"
PROFILE_DIR = REPO / "profiles" / "slurm"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
# The executor plugin, installed apart from the venv (`make slurm`) so that only SLURM runs load it.
SLURM_PLUGIN = Path(sys.prefix) / "slurm"
CLUSTER_LOCK = "/tmp/embprof-slurm.lock"
# Test-only: short jobs need no 40 s grace before the first status check.
TEST_ONLY_ARGS = ["--slurm-init-seconds-before-status-checks", "2"]

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SBATCH_CALL = re.compile(r"^sbatch call: (sbatch .*?) --wrap=", re.MULTILINE)
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")
NOTHING_TO_DO = "Nothing to be done"


@dataclass(frozen=True)
class SbatchCall:
    """One sbatch command line that the executor logged (without the job script)."""

    options: dict[str, str]

    @property
    def rule(self) -> str:
        return self.options["--comment"].removeprefix("rule_").split("_wildcards_")[0]


@dataclass(frozen=True)
class QueuedJob:
    partition: str
    comment: str
    state: str


@dataclass(frozen=True)
class SnakemakeRun:
    returncode: int
    log: str

    @property
    def sbatch_calls(self) -> list[SbatchCall]:
        return [SbatchCall(parse_sbatch_options(c)) for c in SBATCH_CALL.findall(self.log)]

    @property
    def slurm_job_ids(self) -> list[str]:
        return SUBMITTED.findall(self.log)


def parse_sbatch_options(call: str) -> dict[str, str]:
    """Options of an sbatch call as {option: value}; flags map to ''."""
    tokens = shlex.split(call)[1:]
    options: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and "=" in token:
            name, value = token.split("=", 1)
            options[name] = value
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            options[token] = tokens[i + 1]
            i += 1
        else:
            options[token] = ""
        i += 1
    return options


def profile_settings() -> dict:
    return yaml.safe_load((PROFILE_DIR / "config.yaml").read_text())


def resources_of(rule: str) -> dict:
    """What the profile asks for a rule: its set-resources over default-resources."""
    settings = profile_settings()
    return {**settings["default-resources"], **settings.get("set-resources", {}).get(rule, {})}


def gpu_rules() -> set[str]:
    """The rules the profile gives a GPU."""
    return {rule for rule, res in profile_settings().get("set-resources", {}).items()
            if "gpu" in res or "gres" in res}


def expected_sbatch_options(rule: str) -> dict[str, str]:
    """The sbatch options that the profile's resources for `rule` must become."""
    res = resources_of(rule)
    expected = {"-p": str(res["slurm_partition"]), "-t": str(res["runtime"]),
                "--mem": str(res["mem_mb"])}
    if "gpu" in res:
        expected["--gpus"] = str(res["gpu"])
    if "gres" in res:
        expected["--gres"] = str(res["gres"])
    if "cpus_per_gpu" in res:
        expected["--cpus-per-gpu"] = str(res["cpus_per_gpu"])
    return expected


def run_through_slurm(workdir: Path, *args: str) -> SnakemakeRun:
    """Run snakemake in `workdir` with the SLURM profile, --verbose so sbatch calls are logged."""
    command = [str(SNAKEMAKE), "--profile", str(PROFILE_DIR), *TEST_ONLY_ARGS, "--verbose",
               "--directory", str(workdir)]
    proc = subprocess.run([*command, *args], cwd=workdir, env=workflow_env(workdir),
                          capture_output=True, text=True, timeout=600)
    return SnakemakeRun(proc.returncode, proc.stdout + proc.stderr)


def workflow_env(workdir: Path) -> dict[str, str]:
    """This environment with `workdir`'s src/ first on PYTHONPATH: a copied workflow
    imports its own packages, not the editable install's (jobs inherit it: sbatch --export=ALL);
    then the SLURM executor plugin, as profiles/slurm/README.md says to run it.
    A profiler pinned by an outer Snakemake run (EMBPROF_PROFILER) is dropped."""
    env = {k: v for k, v in os.environ.items() if k != "EMBPROF_PROFILER"}
    parts = [str(workdir / "src"), str(SLURM_PLUGIN), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, parts))
    return env


def slurm_queue() -> dict[str, QueuedJob]:
    """Every job slurmctld still knows, finished ones included."""
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%P|%k|%T"],
                         capture_output=True, text=True, check=True).stdout
    jobs = {}
    for line in out.splitlines():
        job_id, partition, comment, state = line.strip().split("|")
        jobs[job_id] = QueuedJob(partition, comment, state)
    return jobs


def scontrol_job(job_id: str) -> dict[str, str]:
    """The job's record in slurmctld, as KEY=VALUE fields."""
    out = subprocess.run(["scontrol", "--oneliner", "show", "job", job_id],
                         capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\S+?)=(\S*)", out))


def memory_mb(value: str) -> float:
    """SLURM's memory notation (4000M, 62.50G) in MB."""
    return float(value[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[value[-1]]


def _run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER_SCRIPTS / name), *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="session")
def slurm_cluster():
    """Install (Debian packages), start, and finally tear down the one-node cluster.

    A lock makes concurrent test sessions on one machine take turns: each
    starts and tears down the same cluster."""
    with FileLock(CLUSTER_LOCK, timeout=1200):
        install = _run_script("install.sh")
        if install.returncode == 77:
            pytest.skip(install.stderr.strip())
        if install.returncode != 0:
            pytest.fail(f"tests/slurm/install.sh failed: {install.stderr.strip()}")
        start = _run_script("start.sh")
        if start.returncode == 77:
            pytest.skip(start.stderr.strip())
        if start.returncode != 0:
            pytest.fail(f"tests/slurm/start.sh failed: {start.stderr.strip()}")
        try:
            yield
        finally:
            stop = _run_script("stop.sh", "--purge")
        assert stop.returncode == 0, stop.stderr


def assert_jobs_ran_in_slurm(run: SnakemakeRun, cancelled: tuple[str, ...] = ()) -> None:
    """Each submission is a job in SLURM's queue, COMPLETED (CANCELLED where the test
    cancelled it); together they carry the partitions and rule/wildcards comments
    that the sbatch calls named."""
    queue = slurm_queue()
    assert len(run.slurm_job_ids) == len(run.sbatch_calls) > 0
    missing = [job_id for job_id in run.slurm_job_ids if job_id not in queue]
    assert not missing, f"SLURM jobs {missing} not in squeue"
    queued = sorted((queue[j].comment, queue[j].partition) for j in run.slurm_job_ids)
    called = sorted((c.options["--comment"], c.options["-p"]) for c in run.sbatch_calls)
    assert queued == called
    for job_id in run.slurm_job_ids:
        expected = "CANCELLED" if job_id in cancelled else "COMPLETED"
        assert queue[job_id].state == expected, (job_id, queue[job_id])


def test_starting_a_running_cluster_changes_nothing(slurm_cluster):
    """start.sh is idempotent: the daemons it started keep running, the node stays up."""
    state = Path(os.environ.get("EMBPROF_SLURM_DIR", "/tmp/embprof-slurm"))
    pids = {name: (state / f"{name}.pid").read_text() for name in ("slurmctld", "slurmd")}
    again = _run_script("start.sh")
    assert again.returncode == 0, again.stderr
    assert {name: (state / f"{name}.pid").read_text() for name in pids} == pids
    nodes = subprocess.run(["sinfo", "--noheader", "--format=%P %t"], capture_output=True,
                           text=True, check=True).stdout.split("\n")
    assert sorted(filter(None, nodes)) == ["cpu* idle", "gpu idle"]


# --- The real workflow on the tiny config ------------------------------------

TINY_CONFIG = ".test/config_tiny/config.yaml"
WORKFLOW_PATHS = (
    "Snakefile", "rules", "report", "config", "envs", "src", "suite", "profiles", ".test",
)
# The tiny config's second config gets an argument its benchmark rejects: its
# profile and timing jobs run through SLURM, and the report lists it failed.
CRASHING = "_no_hbm_"
CRASH_OVERRIDE = {"overrides": {CRASHING: {"extra_args": ["--no-such-option"]}}}
CRASH_MESSAGE = "--no-such-option"
# SLURM cancels this rule's job of the working config (as preemption or an
# admin would): a job failure that only SLURM knows about.
CANCELLED_RULE = "sunburst"
# Per-config jobs that must go through sbatch (others the workflow adds are checked alike).
PER_CONFIG_RULES = ("profile", "timing")
PROFILED_RULES = ("breakdown", "sunburst")
# Per-op columns that must match between a local and a cluster run (timings differ).
STRUCTURE_COLUMNS = ["backend", "phase", "parent_stages", "op", "calls_per_iter", "num_iters",
                     "kernel_names", "fallback_category"]


def copy_workflow(dest: Path) -> Path:
    """The workflow's tracked files, as the working tree has them, in a fresh folder."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *WORKFLOW_PATHS], cwd=REPO,
                            capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run_locally(workdir: Path, *args: str) -> None:
    proc = subprocess.run([str(SNAKEMAKE), "--cores", "2", "--directory", str(workdir), *args],
                          cwd=workdir, env=workflow_env(workdir), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:] + failed_steps(workdir)


def failed_steps(workdir: Path) -> str:
    """The reasons and log tails of the benchmark steps that failed (recorded as data,
    so Snakemake's own output does not show them)."""
    records = [json.loads(p.read_text()) for p in sorted(workdir.glob("results/steps/*/*.json"))]
    return "".join(f"\n--- {r['step']} {r['label']}: {r['reason']}\n{r['log_tail']}"
                   for r in records if not r["ok"])


def read_labels(workdir: Path) -> list[str]:
    with open(workdir / "results" / "configs.tsv", encoding="utf-8") as handle:
        return [row["label"] for row in csv.DictReader(handle, delimiter="\t")]


@contextmanager
def cancel_when_queued(comment: str) -> Iterator[list[str]]:
    """Cancel, with scancel, the first new SLURM job whose comment is `comment`."""
    known = set(slurm_queue())
    cancelled: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                queue = slurm_queue()
            except subprocess.CalledProcessError:  # slurmctld busy: ask again
                queue = {}
            for job_id, job in queue.items():
                if job_id not in known and job.comment == comment:
                    subprocess.run(["scancel", job_id], check=True)
                    cancelled.append(job_id)
                    return
            stop.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield cancelled
    finally:
        stop.set()
        watcher.join()


@dataclass(frozen=True)
class ClusterRuns:
    local: Path
    cluster: Path
    labels: list[str]
    first: SnakemakeRun
    cancelled: list[str]
    second: SnakemakeRun
    third: SnakemakeRun

    @property
    def working(self) -> list[str]:
        return [label for label in self.labels if CRASHING not in label]

    @property
    def crashing(self) -> list[str]:
        return [label for label in self.labels if CRASHING in label]


@pytest.fixture(scope="module")
def cluster_runs(slurm_cluster, tmp_path_factory) -> ClusterRuns:
    """The tiny config run locally (the reference), then three times through SLURM:
    with one job cancelled, again (resubmits it, builds the report), and once more."""
    base = tmp_path_factory.mktemp("slurm_workflow")
    crash = base / "crash.yaml"
    crash.write_text(yaml.safe_dump(CRASH_OVERRIDE))
    configs = ["--configfile", TINY_CONFIG, str(crash)]

    local = copy_workflow(base / "local")
    run_locally(local, "results/configs.tsv", *configs)
    labels = read_labels(local)
    assert any(CRASHING in label for label in labels) and len(labels) >= 2, labels
    working = [label for label in labels if CRASHING not in label]
    reference_targets = [f"results/steps/profile/{label}.json" for label in labels] + [
        f"results/opcalls/opcalls__{label}.csv" for label in working]

    cluster = copy_workflow(base / "cluster")
    # The local reference runs while the first cluster run mostly waits on SLURM.
    with ThreadPoolExecutor(max_workers=1) as pool:
        reference = pool.submit(run_locally, local, *reference_targets, *configs)
        with cancel_when_queued(f"rule_{CANCELLED_RULE}_wildcards_{working[0]}") as cancelled:
            first = run_through_slurm(cluster, "report", *configs)
        reference.result()
    second = run_through_slurm(cluster, "report", *configs)
    third = run_through_slurm(cluster, "report", *configs)
    return ClusterRuns(local, cluster, labels, first, cancelled, second, third)


def submitted(run: SnakemakeRun) -> list[str]:
    return sorted(call.options["--comment"] for call in run.sbatch_calls)


def remote_jobs(log: str) -> list[str]:
    """The jobs Snakemake ran as cluster jobs (not `localrule`), as sbatch comments."""
    jobs = []
    for block in re.split(r"\n(?=\S)", log):
        if m := re.match(r"(?:rule|checkpoint) (\w+):\n", block):
            wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.MULTILINE)
            values = [w.split("=", 1)[1] for w in wildcards[1].split(", ")] if wildcards else []
            jobs.append(f"rule_{m[1]}_wildcards_{'_'.join(values)}" if values else f"rule_{m[1]}")
    return sorted(jobs)


def test_every_per_config_job_goes_through_sbatch(cluster_runs):
    runs = cluster_runs
    planned = remote_jobs(runs.first.log)
    required = [f"rule_{rule}_wildcards_{label}" for rule in PER_CONFIG_RULES
                for label in runs.labels]
    required += [f"rule_{rule}_wildcards_{label}" for rule in PROFILED_RULES
                 for label in runs.working]
    assert set(required) <= set(planned), (required, planned)
    # Only per-config jobs and GPU measurements; collect, status, report... ran locally.
    assert all("_wildcards_" in job or job.removeprefix("rule_") in gpu_rules()
               for job in planned), planned
    assert submitted(runs.first) == planned, runs.first.log[-3000:] + failed_steps(runs.cluster)
    assert len(runs.cancelled) == 1
    assert_jobs_ran_in_slurm(runs.first, cancelled=tuple(runs.cancelled))
    assert_jobs_ran_in_slurm(runs.second)


def test_gpu_requests_in_the_profile_reach_sbatch(cluster_runs):
    calls = cluster_runs.first.sbatch_calls
    assert {c.rule for c in calls} >= set(PER_CONFIG_RULES)
    for call in calls:
        for option, value in expected_sbatch_options(call.rule).items():
            assert call.options.get(option) == value, (call.rule, option, call.options)
        if call.rule not in gpu_rules():
            assert "--gpus" not in call.options and "--gres" not in call.options, call.options


def test_slurm_holds_the_jobs_to_the_profiles_requests(cluster_runs):
    """What slurmctld recorded for each job (scontrol): partition, time limit,
    memory, and for GPU jobs the GPU and the CPUs per GPU."""
    queue = slurm_queue()
    for job_id in cluster_runs.first.slurm_job_ids:
        rule = SbatchCall({"--comment": queue[job_id].comment}).rule
        res = resources_of(rule)
        job = scontrol_job(job_id)
        assert job["Partition"] == res["slurm_partition"], (rule, job)
        assert job["TimeLimit"] == f"{res['runtime'] // 60:02d}:{res['runtime'] % 60:02d}:00"
        assert memory_mb(job["MinMemoryNode"]) == res["mem_mb"], (rule, job)
        if "gpu" in res:
            assert job["TresPerJob"] == f"gres:gpu:{res['gpu']}", (rule, job)
        if "gres" in res:
            assert job["TresPerNode"] == f"gres:{res['gres']}", (rule, job)
        if "cpus_per_gpu" in res:
            assert job["CpusPerTres"] == f"gres:gpu:{res['cpus_per_gpu']}", (rule, job)
        if rule not in gpu_rules():
            assert "TresPerJob" not in job and "TresPerNode" not in job, (rule, job)


def test_a_failed_slurm_job_is_reported_by_snakemake(cluster_runs):
    runs = cluster_runs
    (job_id,) = runs.cancelled
    assert runs.first.returncode != 0
    assert f"Error in rule {CANCELLED_RULE}" in runs.first.log
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'CANCELLED'" in runs.first.log
    # Everything else went on (keep-going), so the next run resubmits only that job.
    assert runs.second.returncode == 0, runs.second.log[-3000:] + failed_steps(runs.cluster)
    assert submitted(runs.second) == [f"rule_{CANCELLED_RULE}_wildcards_{runs.working[0]}"]


def test_a_crashed_config_is_listed_failed_in_the_report(cluster_runs):
    runs = cluster_runs
    results = runs.cluster / "results"
    html = (results / "report" / "index.html").read_text(encoding="utf-8")
    summary = (results / "report" / "summary.md").read_text(encoding="utf-8")
    for label in runs.crashing:
        status = json.loads((results / "status" / f"{label}.json").read_text())
        assert (status["ok"], status["failed_step"]) == (False, "profile"), status
        assert CRASH_MESSAGE in status["log_tail"]
        assert f"`{label}`: step **profile** failed" in summary
        failed = [a.split("</article>", 1)[0] for a in html.split('<article class="failed-config"')[1:]]
        (article,) = [a for a in failed if f"<h3>{label}</h3>" in a]
        assert "<strong>profile</strong> failed" in article and CRASH_MESSAGE in article
    for label in runs.working:
        assert json.loads((results / "status" / f"{label}.json").read_text())["ok"] is True


def test_cluster_results_equal_a_local_run(cluster_runs):
    runs = cluster_runs
    local, cluster = runs.local / "results", runs.cluster / "results"
    assert (cluster / "configs.tsv").read_text() == (local / "configs.tsv").read_text()
    for label in runs.labels:
        records = [json.loads((root / "steps" / "profile" / f"{label}.json").read_text())
                   for root in (local, cluster)]
        assert records[0]["ok"] == records[1]["ok"] == (label in runs.working)
    for label in runs.working:
        tables = [pd.read_csv(root / "opcalls" / f"opcalls__{label}.csv", keep_default_na=False)
                  for root in (local, cluster)]
        assert list(tables[0].columns) == list(tables[1].columns)
        local_ops, cluster_ops = (
            t[STRUCTURE_COLUMNS].sort_values(STRUCTURE_COLUMNS).reset_index(drop=True)
            for t in tables
        )
        pd.testing.assert_frame_equal(local_ops, cluster_ops)


def test_a_further_run_submits_nothing(cluster_runs):
    third = cluster_runs.third
    assert third.returncode == 0, third.log[-3000:]
    assert NOTHING_TO_DO in third.log
    assert third.sbatch_calls == []
