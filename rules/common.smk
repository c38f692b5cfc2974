# Config validation, the profiler choice, wildcard constraints and every input
# function. Nothing here imports torch or runs pytest: parsing stays cheap.
import json
import os
import shlex
import sys
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from embprof.workflow.configs import code_digest, code_files, overrides_for, read_table
from embprof.workflow.profiler import (
    TRACE_SUFFIX,
    ProfilerError,
    find_nsys,
    resolve_profiler,
)
from embprof.workflow.shellenv import pin_profiler, put_interpreter_first_on_path
from embprof.workflow.validation import ConfigError, validate_config

try:
    validate_config(config, Path(workflow.basedir) / "config" / "schemas" / "config.schema.yaml")
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

put_interpreter_first_on_path()

try:
    NSYS = find_nsys(config["nsys"]) if config["profiler"] != "torch" else None
    PROFILER = resolve_profiler(config["profiler"], NSYS)
except ProfilerError as exc:
    raise WorkflowError(f"config: {exc}") from None
# Jobs started elsewhere (cluster nodes re-parse this file) resolve `auto` the same way.
pin_profiler(PROFILER)
TRACE = f"results/traces/{{label}}{TRACE_SUFFIX[PROFILER]}"
if PROFILER == "nsys" and NSYS is None:
    NSYS = "nsys"  # not on this host's PATH; the job looks it up where it runs
NSYS_ARG = f"--nsys {shlex.quote(NSYS)}" if NSYS else ""

# Code a step depends on. Rules take these digests as params: editing the code
# re-runs them, while a fresh clone (same content, new mtimes) re-runs nothing.
# The plotting rules also list their code files as ancient() inputs; the others
# do not, as every input file costs each DAG pass a stat (dry-run speed).
CODE = {
    "measured": ["benchmark", "src/dynemb"],
    "breakdown": ["workflow/scripts/breakdown.py", "src/embprof/trace", "config/kernel_categories.yaml"],
    "sunburst": ["workflow/scripts/sunburst.py", "src/embprof/plots", "src/embprof/report"],
    "aggregate": ["workflow/scripts/aggregate.py", "src/embprof/report"],
    "latency_plot": ["workflow/scripts/latency_plot.py", "src/embprof/plots", "src/embprof/report"],
    "report": [
        "workflow/scripts/report.py", "src/embprof/report", "src/embprof/plots", "src/embprof/bandwidth",
    ],
    "bandwidth": ["workflow/scripts/bandwidth.py", "src/embprof/bandwidth", "config/bandwidth.yaml"],
    "peak_bandwidth": ["workflow/scripts/peak_bandwidth.py", "src/embprof/bandwidth/peak.py"],
}
DIGEST = {step: code_digest(paths, root=workflow.basedir) for step, paths in CODE.items()}


wildcard_constraints:
    label=r"T\d+_totalB\d+_D\d+_[A-Za-z0-9_.=-]+",


@lru_cache(maxsize=None)
def _code_files(step):
    return tuple(code_files(CODE[step], root=workflow.basedir))


def get_code_files(step):
    """The code files of a step, as ancient() inputs: declared, but mtimes never re-run it."""
    return [ancient(f) for f in _code_files(step)]


@lru_cache(maxsize=4)
def _read_configs(path, mtime_ns):
    return {c.label: c.test_id for c in read_table(path)}


def get_configs():
    """label -> test id, from the collect checkpoint's table."""
    table = checkpoints.collect.get().output.table
    return _read_configs(table, os.stat(table).st_mtime_ns)


def get_labels():
    return list(get_configs())


def get_test_id(wildcards):
    configs = get_configs()
    if wildcards.label not in configs:
        raise WorkflowError(f"{wildcards.label} is not a config in results/configs.tsv")
    return configs[wildcards.label]


# Size options shape the labels, so collection and every run of a config pass them alike.
SIZE_ARGS = [f"--total-cap={config['total_cap']}"] if config["total_cap"] else []


def get_run_settings(label):
    """The config's run settings: the global keys, then every matching override."""
    settings = {
        "num_iterations": config["num_iterations"],
        "profile_iterations": config["profile_iterations"],
        "torchrec": config["torchrec"],
        "extra_args": [],
    }
    settings.update(overrides_for(label, config["overrides"]))
    settings["extra_args"] = SIZE_ARGS + list(settings["extra_args"])
    return settings


def _options(settings, iterations_key):
    options = []
    if settings[iterations_key] is not None:
        options.append(f"--num-iterations {int(settings[iterations_key])}")
    if not settings["torchrec"]:
        options.append("--no-torchrec")
    options += [shlex.quote(f"--extra-arg={arg}") for arg in settings["extra_args"]]
    return " ".join(options)


def get_profile_options(wildcards):
    return _options(get_run_settings(wildcards.label), "profile_iterations")


def get_timing_options(wildcards):
    return _options(get_run_settings(wildcards.label), "num_iterations")


def get_breakdown_trace(wildcards):
    if PROFILER == "nsys":
        return f"results/sqlite/{wildcards.label}.sqlite"
    return TRACE.format(label=wildcards.label)


def get_status(label):
    """The config's status (read once its checkpoint has run)."""
    with open(checkpoints.status.get(label=label).output[0], encoding="utf-8") as handle:
        return json.load(handle)


def get_timing_files(wildcards):
    return expand("results/timing/{label}.json", label=get_labels())


def get_status_files(wildcards):
    return expand("results/status/{label}.json", label=get_labels())


def get_per_op_outputs(wildcards):
    """Per-op tables, sunbursts and bandwidth of the configs whose steps worked.

    A failed profile has no per-op outputs; bandwidth also needs the timing
    record (ids per iteration).
    """
    profiled, timed = [], []
    for label in get_labels():
        steps = get_status(label)["steps"]
        if steps["profile"]["ok"]:
            profiled.append(label)
            if steps["timing"]["ok"]:
                timed.append(label)
    return {
        "opcalls": expand("results/opcalls/opcalls__{label}.csv", label=profiled),
        "sunburst": expand("results/sunburst/{label}.{ext}", label=profiled, ext=["png", "html"]),
        "bandwidth": expand("results/bandwidth/bandwidth__{label}.csv", label=timed),
    }


def get_measured_outputs(wildcards):
    """Everything measured on the benchmark's host, no figures: what `measure` leaves for
    `report` to draw elsewhere (a GPU host without a browser, then a workstation)."""
    per_op = get_per_op_outputs(wildcards)
    return {
        "opcalls": per_op["opcalls"],
        "bandwidth": per_op["bandwidth"],
        "results": "results/benchmark_results.json",
        "status": get_status_files(wildcards),
        "environment": "results/environment.json",
        "peak": "results/peak_bandwidth.json",
    }


def get_collect_options():
    """The config's selection as collect.py options (-k expression, label substrings)."""
    options = [shlex.quote(f"--select={config['select']}")] if config["select"] else []
    options += [shlex.quote(f"--label={s}") for s in config["labels"]]
    options += [shlex.quote(f"--extra-arg={arg}") for arg in SIZE_ARGS]
    return " ".join(options)


def get_compare_option(wildcards):
    compare_to = config["compare_to"]
    return f"--compare-to {shlex.quote(compare_to)}" if compare_to else ""


def get_final_output():
    return ["results/report/index.html", "results/report/summary.md"]
