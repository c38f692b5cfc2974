# Config validation, the profiler choice, the results layout, wildcard constraints and every
# input function. Nothing here imports torch or runs pytest: parsing stays cheap.
#
# Paths: the workflow's own files (the benchmark suite, the default config) are found from
# this file, so the workflow runs from any working directory and as a Snakemake module;
# what it writes goes to results/ under the working directory; the code the rules run is
# the installed embprof package (the `embprof` command), found where Python imports it.
#
# Every output is marked update(): Snakemake keeps its previous version while the job runs
# and puts it back when the job fails (each command writes whole files by a rename), so a
# failing step never leaves the user with less than before, e.g. the last good report.
import importlib.metadata
import os
import shlex
import sys
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

try:
    import embprof
except ImportError:
    raise WorkflowError(
        "the workflow's steps are the embprof command: install the package first "
        "(pip install <this checkout>, or `make .venv/.installed` in it)"
    ) from None

from embprof.defaults import BANDWIDTH_TABLE, KERNEL_CATEGORIES, config_file
from embprof.errors import ConfigError
from embprof.results.configs import read_configs
from embprof.results.layout import EC_RUN, LABEL, ResultsLayout
from embprof.results.steps import RUN_STEPS, read_statuses, succeeded
from embprof.workflow.code import step_digests, tree_digest
from embprof.workflow.configs import code_digest, overrides_for
from embprof.workflow.environment import host_memory_bytes
from embprof.workflow.preflight import SuiteFacts, results_problems, run_problems
from embprof.workflow.profiler import find_nsys, resolve_profiler
from embprof.workflow.settings import Settings
from embprof.workflow.shellenv import pin_profiler, put_interpreter_first_on_path
from embprof.workflow.suite import make_suite, suite_digest
from embprof.workflow.validation import invalid_config, validate_config

# The checkout this workflow lives in: its benchmark suite is what the profiles run, unless
# the config names another (`suite`).
WORKFLOW_ROOT = Path(workflow.current_basedir.get_path_or_uri(secret_free=True)).parent
sys.path.insert(0, str(WORKFLOW_ROOT))  # the checkout's benchmark/ package (its sizes, no torch)
PACKAGE = Path(embprof.__file__).parent
L = ResultsLayout("results")

from benchmark.configs import extra_args_problem, inputs_problem, preset_labels, select_problem

# Everything that can be known before the run stops it here, one line per problem.
try:
    validate_config(config)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
SUITE = make_suite(
    WORKFLOW_ROOT, config["suite"], config["suite_args"], config["suite_env"], config["suite_launcher"], check=False
)
_SUITE = SuiteFacts(preset_labels, select_problem, inputs_problem, extra_args_problem)
_PROBLEMS = run_problems(config, _SUITE, L, host_memory_bytes(), SUITE)
if _PROBLEMS:
    raise WorkflowError(str(invalid_config(_PROBLEMS)))
_BROKEN = results_problems(L)
if _BROKEN:
    raise WorkflowError(str(invalid_config(_BROKEN, f"broken files in {L.root}/")))
try:
    NSYS = find_nsys(config["nsys"]) if config["profiler"] != "torch" else None
    PROFILER = resolve_profiler(config["profiler"], NSYS)
except ConfigError as exc:
    raise WorkflowError(f"config: {exc}") from None

put_interpreter_first_on_path()
# Jobs started elsewhere (cluster nodes re-parse this file) resolve `auto` the same way.
pin_profiler(PROFILER)
if PROFILER == "nsys" and NSYS is None:
    NSYS = "nsys"  # not on this host's PATH; the job looks it up where it runs
NSYS_ARG = f"--nsys {shlex.quote(NSYS)}" if NSYS else ""
# Relative to the working directory, so that a checkout elsewhere with its results beside
# it (same code, another path) re-runs nothing; "." when run from the checkout itself.
SUITE_ARG = shlex.join(SUITE.options(relative_to="."))
# Defaults ship with the package; the working directory's config/ overrides them (the
# commands resolve the same files by themselves; the digests re-run on an edit).
CATEGORIES = config_file(KERNEL_CATEGORIES)
BANDWIDTH = config_file(BANDWIDTH_TABLE)

# Code a step depends on: the modules its command imports (embprof.workflow.code: the import
# graph of embprof.cli.<step>, cached under .snakemake/), and the measured code (in the
# checkout, or another suite's folder). Each is recorded with the step's settings in
# results/settings/, so that editing the code re-runs the step in any clone a copy of
# results/ reaches, while a fresh clone (same content, new mtimes, another path) re-runs
# nothing; the rules' params carry them too.
CODE = step_digests(PACKAGE, cache=Path(".snakemake", "embprof", "code-embprof.json"))
DIGEST = dict(CODE)
if SUITE.own:
    DIGEST["measured"] = tree_digest(WORKFLOW_ROOT, ["benchmark", "src/dynemb"], cache=Path(".snakemake", "embprof", "code-measured.json"))
    DIGEST["suite"] = tree_digest(WORKFLOW_ROOT, ["benchmark"], cache=Path(".snakemake", "embprof", "code-suite.json"))  # what collection lists
else:  # another suite: its file and the .py files beside it measure and list
    DIGEST["measured"] = DIGEST["suite"] = suite_digest(SUITE)
# The figure pages load the plotly.js that plotly.py ships: a new plotly writes it again.
PLOTLY_VERSION = importlib.metadata.version("plotly")
# An overriding file re-runs its step as an edit of the code would.
TABLE_DIGEST = {
    step: code_digest([file.name], root=file.parent)
    for step, file in (("breakdown", CATEGORIES), ("bandwidth", BANDWIDTH))
}
for _step, _digest in TABLE_DIGEST.items():
    DIGEST[_step] = f"{DIGEST[_step]}-{_digest}"


wildcard_constraints:
    label=r"T\d+_totalB\d+_D\d+_[A-Za-z0-9_.=-]+",


def get_all_cores():
    """Every core Snakemake was given (1 where none were: a report, a lint)."""
    return workflow.resource_settings.cores or 1


@lru_cache(maxsize=4)
def _read_configs(path, mtime_ns):
    return {c.label: c.test_id for c in read_configs(path)}


def get_configs():
    """label -> test id, from the collect checkpoint's table."""
    table = checkpoints.collect.get().output.table
    return _read_configs(table, os.stat(table).st_mtime_ns)


def get_labels():
    return list(get_configs())


def get_test_id(wildcards):
    configs = get_configs()
    if wildcards.label not in configs:
        raise WorkflowError(f"{wildcards.label} is not a config in {L.configs}")
    return configs[wildcards.label]


# Size options shape the labels, so collection and every run of a config pass them alike.
SIZE_ARGS = [f"--total-cap={config['total_cap']}"] if config["total_cap"] else []
# Which suite runs, and with what: part of every setting of the steps that run it (none for this
# project's suite as it always ran, so its results folders keep their settings).
SUITE_SETTINGS = {
    key: value
    for key, value in (
        ("suite", None if SUITE.own else SUITE.file.name),
        ("suite_args", list(SUITE.args)),
        ("suite_env", dict(SUITE.env)),
        ("suite_launcher", list(SUITE.launcher)),
    )
    if value
}


def get_run_settings(label):
    """The config's run settings: the global keys, then every matching override."""
    settings = {
        "num_iterations": config["num_iterations"],
        "profile_iterations": config["profile_iterations"],
        "repeats": config["repeats"],
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
    settings = get_run_settings(wildcards.label)
    repeats = f" --repeats {int(settings['repeats'])}" if settings["repeats"] is not None else ""
    return _options(settings, "num_iterations") + repeats


# The settings that shape each step's outputs, beside its code, as files in results/settings/:
# they travel with a copied results/, so a changed setting re-runs its steps in any clone
# (Snakemake's own params trigger lives in .snakemake/, which stays behind).
# A record is written only by the job that made what it describes (embprof.workflow.settings):
# planning writes plans under .snakemake/, and each job's command records its plan once it has
# succeeded (`embprof <step> ... --record-settings PLAN`). One record per job: per config for per-config rules.
SETTINGS_BOOK = Settings()
PER_CONFIG_SETTINGS = ("profile", "timing", "breakdown", "bandwidth", "sunburst")


def _run_settings(label, iterations_key):
    settings = get_run_settings(label)
    return {
        "preset": config["preset"],
        "iterations": settings[iterations_key],
        "torchrec": settings["torchrec"],
        "extra_args": settings["extra_args"],
    }


def _code(*steps):
    """The steps' code digests as one (None where one is unknown here: another suite not on this host)."""
    parts = [CODE[step] if step in CODE else DIGEST[step] for step in steps]
    return None if None in parts else "-".join(parts)


def _known(settings):
    """Settings without a code digest this host cannot know (the record's stands)."""
    return {k: v for k, v in settings.items() if not (k == "code" and v is None)}


SETTINGS = {
    "collect": lambda label: {
        "preset": config["preset"],
        "select": config["select"],
        "labels": config["labels"],
        "size_args": SIZE_ARGS,
        "code": _code("suite", "collect"),
        **SUITE_SETTINGS,
    },
    "profile": lambda label: {
        **_run_settings(label, "profile_iterations"), "profiler": PROFILER, "code": _code("measured", "profile"),
        **SUITE_SETTINGS,
    },
    "timing": lambda label: {
        **_run_settings(label, "num_iterations"), "repeats": get_run_settings(label)["repeats"],
        "code": _code("measured", "timing"),
        **SUITE_SETTINGS,
    },
    "breakdown": lambda label: {"kernel_categories": TABLE_DIGEST["breakdown"], "code": _code("breakdown")},
    "bandwidth": lambda label: {"bandwidth_table": TABLE_DIGEST["bandwidth"], "code": _code("bandwidth")},
    "environment": lambda label: {"preset": config["preset"], "profiler": PROFILER, "code": _code("environment")},
    "report": lambda label: {"compare_to": config["compare_to"], "code": _code("report")},
    "plotly_js": lambda label: {"plotly": PLOTLY_VERSION, "code": _code("plotly_js")},
    **{
        step: (lambda label, step=step: {"code": _code(step)})
        for step in ("status", "aggregate", "sunburst", "latency_plot", "peak_bandwidth", "bandwidth_plot", "database")
    },
}


def get_settings(rule):
    """The input function of ``rule``'s settings (one per config for the benchmark's runs): the plan
    of its record in results/settings/, dated so that a change re-runs the rule."""

    def settings_file(wildcards):
        return _plan(rule, wildcards.label if rule in PER_CONFIG_SETTINGS else None)

    return settings_file


@lru_cache(maxsize=None)
def _plan(rule, label):
    """Planned once per run for each step and config (every DAG pass asks again). The first call
    plans every job of the configs listed so far: Snakemake takes a file that appears in a folder
    it has already listed while it builds the DAG as missing."""
    if not _EVERY_JOB_PLANNED:
        _EVERY_JOB_PLANNED.append(True)
        labels = [c.label for c in read_configs(L.configs)] if L.configs.is_file() else []
        for other in SETTINGS:
            for each in labels if other in PER_CONFIG_SETTINGS else [None]:
                _plan(other, each)
    return SETTINGS_BOOK.plan(L.settings(rule, label), _known(SETTINGS[rule](label)), dry=workflow.dryrun)


_EVERY_JOB_PLANNED = []


def get_trace():
    return L.trace(LABEL, PROFILER)


def get_breakdown_trace(wildcards):
    if PROFILER == "nsys":
        return L.sqlite(wildcards.label)
    return L.trace(wildcards.label, PROFILER)


@lru_cache(maxsize=2)
def _read_statuses(folder, mtime_ns):
    return read_statuses(folder)


def get_statuses():
    """label -> status, every config's (read once the status checkpoint has run)."""
    folder = checkpoints.status.get().output[0]
    return _read_statuses(folder, os.stat(folder).st_mtime_ns)


def get_timing_files(wildcards):
    return [L.timing(label) for label in get_labels()]


def get_ancient_timing_files(wildcards):
    """The timing files as inputs whose updates re-run nothing (the peak: the device they name)."""
    return [ancient(path) for path in get_timing_files(wildcards)]


def get_step_records(wildcards):
    """The records the status checkpoint merges: every config's profile and timing step."""
    return [L.step(step, label) for label in get_labels() for step in RUN_STEPS]


def get_per_op_outputs(wildcards):
    """Per-op tables (with their samples), sunbursts and bandwidth of the configs whose every step
    worked. A failed config has none: the report shows only its failure.
    """
    shown = succeeded(get_statuses(), get_labels())
    return {
        "opcalls": [L.opcalls(label) for label in shown],
        "samples": [L.samples(label) for label in shown],
        "sunburst": [f(label) for label in shown for f in (L.sunburst_png, L.sunburst_html)],
        "bandwidth": [L.bandwidth(label) for label in shown],
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
        "results": L.benchmark_results,
        "status": L.status_dir,
        "environment": L.environment,
        "peak": L.peak,
    }


def get_collect_options():
    """The config's selection as `embprof collect` options (-k expression, label substrings)."""
    options = [shlex.quote(f"--select={config['select']}")] if config["select"] else []
    options += [shlex.quote(f"--label={s}") for s in config["labels"]]
    options += [shlex.quote(f"--extra-arg={arg}") for arg in SIZE_ARGS]
    return " ".join(options)


def get_compare_option(wildcards):
    compare_to = config["compare_to"]
    return f"--compare-to {shlex.quote(compare_to)}" if compare_to else ""


def get_final_output():
    return [L.report_html, L.report_summary]

