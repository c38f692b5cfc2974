# Checks and input functions, nothing else. What a run is (its config checked, its suite, profiler
# and code, each job's settings and command options) is embprof.workflow.run's WorkflowRun, built
# once here; nothing imports torch or runs pytest, so parsing stays cheap.
#
# Paths: the workflow's own files (the benchmark suite, the default config) are found from
# this file, so the workflow runs from any working directory and as a Snakemake module;
# what it writes goes to results/ under the working directory; the code the rules run is
# the installed embprof package (the `embprof` command), found where Python imports it.
#
# Every output is marked update(): Snakemake keeps its previous version while the job runs
# and puts it back when the job fails (each command writes whole files by a rename), so a
# failing step never leaves the user with less than before, e.g. the last good report.
import os
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

try:
    from embprof.errors import EmbprofError
except ImportError:
    raise WorkflowError(
        "the workflow's steps are the embprof command: install the package first "
        "(pip install <this checkout>, or `make .venv/.installed` in it)"
    ) from None

from embprof.results.configs import read_configs
from embprof.results.paths import EC_RUN, LABEL
from embprof.results.steps import RUN_STEPS, read_statuses, succeeded
from embprof.workflow.ec import LAUNCHER as EC_LAUNCHER, load_family
from embprof.workflow.environment import host_memory_bytes
from embprof.workflow.inputs import cheap_signature
from embprof.workflow.run import PER_CONFIG, WorkflowRun

# The checkout this workflow lives in: its benchmark suite is what the profiles run, unless
# the config names another (`suite`).
WORKFLOW_ROOT = Path(workflow.current_basedir.get_path_or_uri(secret_free=True)).parent

# Everything that can be known before the run stops it here, one line per problem: the schema,
# the suite's facts, the results files the input functions read, the profiler; and the
# EmbeddingCollection family's config (rules/embedding_collection.smk).
try:
    RUN = WorkflowRun.from_config(config, WORKFLOW_ROOT, memory=host_memory_bytes())
    EC = load_family(WORKFLOW_ROOT)
except EmbprofError as exc:
    raise WorkflowError(str(exc)) from None
RUN.prepare_jobs()
RESULTS = RUN.paths  # where each file of the results folder lies (embprof.results.ResultsPaths)


wildcard_constraints:
    label=r"T\d+_totalB\d+_D\d+_[A-Za-z0-9_.=-]+",
    ec_run="|".join(EC.runs),


def get_all_cores():
    """Every core Snakemake was given (1 where none were: a report, a lint)."""
    return workflow.resource_settings.cores or 1


@lru_cache(maxsize=4)
def _read_configs(path, mtime_ns):
    configs = {c.label: c.test_id for c in read_configs(path)}
    RUN.plan_configs(list(configs), dry=workflow.dryrun)  # a collect job may have listed new ones
    return configs


def get_configs():
    """label -> test id, from the collect checkpoint's table (asked of Snakemake until it is there:
    once a checkpoint's output is there it stays there for the run, so its path is kept)."""
    if not _COLLECTED:
        _COLLECTED.append(checkpoints.collect.get().output.table)
    return _read_configs(_COLLECTED[0], os.stat(_COLLECTED[0]).st_mtime_ns)


_COLLECTED = []


def get_labels():
    return list(get_configs())


@cheap_signature
def get_test_id(wildcards):
    configs = get_configs()
    if wildcards.label not in configs:
        raise WorkflowError(f"{wildcards.label} is not a config in {RESULTS.configs}")
    return configs[wildcards.label]


def get_options(rule):
    """The run options of ``rule``'s command: one string where no override tells configs apart,
    else an input function of the config."""
    options = RUN.profile_options if rule == "profile" else RUN.timing_options
    if RUN.same_options_for_all:
        return options("")
    return cheap_signature(lambda wildcards: options(wildcards.label))


def get_settings(step):
    """The plan of ``step``'s record in results/settings/ (one per config for the per-config steps),
    dated so that a change re-runs the step (embprof.workflow.settings; a record is written only by
    the job that succeeded with it). An input function; for a per-config step, the plans' pattern
    (embprof.workflow.run.WorkflowRun.plan_pattern says why each is planned before it is read)."""
    if step in PER_CONFIG:
        return RUN.plan_pattern(step)
    return cheap_signature(lambda wildcards: RUN.plan(step, None, dry=workflow.dryrun))


def get_trace():
    return RESULTS.trace(LABEL, RUN.profiler)


def get_breakdown_trace():
    """What the breakdown reads: nsys's export, or the torch profiler's trace."""
    return RESULTS.sqlite(LABEL) if RUN.profiler == "nsys" else RESULTS.trace(LABEL, RUN.profiler)


@lru_cache(maxsize=2)
def _read_statuses(folder, mtime_ns):
    return read_statuses(folder)


def get_statuses():
    """label -> status, every config's (read once the status checkpoint has run)."""
    folder = checkpoints.status.get().output[0]
    return _read_statuses(folder, os.stat(folder).st_mtime_ns)


def get_timing_files(wildcards):
    return [RESULTS.timing(label) for label in get_labels()]


def get_ancient_timing_files(wildcards):
    """The timing files as inputs whose updates re-run nothing (the peak: the device they name)."""
    return [ancient(path) for path in get_timing_files(wildcards)]


def get_step_records(wildcards):
    """The records the status checkpoint merges: every config's profile and timing step."""
    return [RESULTS.step(step, label) for label in get_labels() for step in RUN_STEPS]


def get_per_op_outputs(wildcards):
    """Per-op tables (with their samples), sunbursts and bandwidth of the configs whose every step
    worked. A failed config has none: the report shows only its failure.
    """
    shown = succeeded(get_statuses(), get_labels())
    return {
        "opcalls": [RESULTS.opcalls(label) for label in shown],
        "samples": [RESULTS.samples(label) for label in shown],
        "sunburst": [f(label) for label in shown for f in (RESULTS.sunburst_png, RESULTS.sunburst_html)],
        "bandwidth": [RESULTS.bandwidth(label) for label in shown],
    }


def get_bandwidth_files(wildcards):
    return get_per_op_outputs(wildcards)["bandwidth"]


def get_measured_outputs(wildcards):
    """Everything measured on the benchmark's host, no figures: what `measure` leaves for
    `report` to draw elsewhere (a GPU host without a browser, then a workstation)."""
    per_op = get_per_op_outputs(wildcards)
    return {
        "opcalls": per_op["opcalls"],
        "samples": per_op["samples"],
        "bandwidth": per_op["bandwidth"],
        "results": RESULTS.benchmark_results,
        "status": RESULTS.status_dir,
        "environment": RESULTS.environment,
        "peak": RESULTS.peak,
    }


def get_final_output():
    return [RESULTS.report_html, RESULTS.report_summary]


@cheap_signature
def get_ec_args(wildcards):
    """An EmbeddingCollection run's launcher arguments, shell-quoted."""
    return EC.launcher_args(wildcards.ec_run)


def get_ec_options():
    return f"--nproc {EC.nproc}" if EC.nproc else ""


def get_ec_outputs():
    """Every run's record, and every run's per-op CSVs where the family profiles."""
    return [RESULTS.ec_results, *(RESULTS.ec_opcalls(run) for run in (EC.runs if EC.profile else []))]
