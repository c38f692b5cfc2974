"""The workflow's cluster path on a real one-node SLURM cluster (tests/slurm).

Every job goes through real `sbatch` calls made by Snakemake's SLURM executor
with `--profile profiles/slurm`; the test checks them against SLURM's own
queue (squeue keeps finished jobs for the cluster's MinJobAge of an hour).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPTS = REPO / "tests" / "slurm"
PROFILE_DIR = REPO / "profiles" / "slurm"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
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


def run_through_slurm(workdir: Path, *args: str, snakefile: Path | None = None) -> SnakemakeRun:
    """Run snakemake in `workdir` with the SLURM profile, --verbose so sbatch calls are logged."""
    command = [str(SNAKEMAKE), "--profile", str(PROFILE_DIR), *TEST_ONLY_ARGS, "--verbose",
               "--directory", str(workdir)]
    if snakefile is not None:
        command += ["--snakefile", str(snakefile)]
    proc = subprocess.run([*command, *args], cwd=workdir, capture_output=True, text=True,
                          timeout=600)
    return SnakemakeRun(proc.returncode, proc.stdout + proc.stderr)


def slurm_queue() -> dict[str, QueuedJob]:
    """Every job slurmctld still knows, finished ones included."""
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%P|%k|%T"],
                         capture_output=True, text=True, check=True).stdout
    jobs = {}
    for line in out.splitlines():
        job_id, partition, comment, state = line.strip().split("|")
        jobs[job_id] = QueuedJob(partition, comment, state)
    return jobs


def _run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER_SCRIPTS / name), *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="session")
def slurm_cluster():
    """Install (Debian packages), start, and finally tear down the one-node cluster."""
    install = _run_script("install.sh")
    if install.returncode == 77:
        pytest.skip(install.stderr.strip())
    if install.returncode != 0:
        pytest.fail(f"tests/slurm/install.sh failed: {install.stderr.strip()}")
    start = _run_script("start.sh")
    if start.returncode != 0:
        pytest.fail(f"tests/slurm/start.sh failed: {start.stderr.strip()}")
    yield
    stop = _run_script("stop.sh", "--purge")
    assert stop.returncode == 0, stop.stderr


def assert_jobs_ran_in_slurm(run: SnakemakeRun, state: str = "COMPLETED") -> None:
    """Each submission is a job in SLURM's queue, finished in `state`; together
    they carry the partitions and rule/wildcards comments that the sbatch calls named."""
    queue = slurm_queue()
    assert len(run.slurm_job_ids) == len(run.sbatch_calls) > 0
    missing = [job_id for job_id in run.slurm_job_ids if job_id not in queue]
    assert not missing, f"SLURM jobs {missing} not in squeue"
    queued = sorted((queue[j].comment, queue[j].partition) for j in run.slurm_job_ids)
    called = sorted((c.options["--comment"], c.options["-p"]) for c in run.sbatch_calls)
    assert queued == called
    for job_id in run.slurm_job_ids:
        assert queue[job_id].state == state, (job_id, queue[job_id])


MINI_WORKFLOW = """
ITEMS = ["a", "b"]
localrules: report

rule report:
    input: expand("out/{item}.csv", item=ITEMS)
    output: "out/report.txt"
    shell: "cat {input} > {output}"

rule profile:
    output: "out/{item}.trace"
    shell: "echo {wildcards.item} gpu=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID > {output}"

rule breakdown:
    input: "out/{item}.trace"
    output: "out/{item}.csv"
    shell: "cp {input} {output}"
"""


def test_profile_resources_reach_sbatch_on_a_minimal_workflow(slurm_cluster, tmp_path):
    """Two per-item rules (a GPU one named like the workflow's profile rule, a
    CPU one) through sbatch, the aggregate local: checks the cluster and the
    profile independently of the real workflow."""
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(MINI_WORKFLOW)

    run = run_through_slurm(tmp_path, "report", snakefile=snakefile)
    assert run.returncode == 0, run.log[-3000:]
    assert sorted(c.rule for c in run.sbatch_calls) == ["breakdown"] * 2 + ["profile"] * 2
    for call in run.sbatch_calls:
        for option, value in expected_sbatch_options(call.rule).items():
            assert call.options.get(option) == value, (call.rule, option, call.options)
    assert "--gpus" not in next(c for c in run.sbatch_calls if c.rule == "breakdown").options
    assert_jobs_ran_in_slurm(run)
    # The GPU job ran inside its allocation, with the (device-less) GPU assigned.
    lines = (tmp_path / "out" / "report.txt").read_text().split("\n")
    records = [line.split() for line in lines if line]
    assert [r[:2] for r in records] == [["a", "gpu=0"], ["b", "gpu=0"]]
    assert {r[2].removeprefix("job=") for r in records} <= set(run.slurm_job_ids)

    again = run_through_slurm(tmp_path, "report", snakefile=snakefile)
    assert again.returncode == 0, again.log[-3000:]
    assert NOTHING_TO_DO in again.log
    assert again.sbatch_calls == []
