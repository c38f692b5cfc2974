"""One run of the workflow as its config asks for it: what the rules pass to their commands.

Built once when the Snakefile is parsed (``rules/common.smk`` holds only input functions
and checks since issue 33; before, it built all of this inline): the config, checked
(the schema, then what can be known before any job: :mod:`embprof.workflow.preflight`),
the suite and the profiler it names, the code each step runs (:mod:`embprof.workflow.code`),
and for each job the settings its record holds (:mod:`embprof.workflow.settings`) and
the options its command takes. Nothing here imports torch or runs pytest.

Values the rules pass as params are Snakemake's own record of a job (``.snakemake/``):
they keep the names and values they had when the rules built them inline, so that moving
them here re-ran nothing.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import embprof
from embprof.defaults import BANDWIDTH_TABLE, KERNEL_CATEGORIES, config_file
from embprof.errors import ConfigError
from embprof.results.configs import read_configs
from embprof.results.paths import LABEL, ResultsPaths
from embprof.workflow.code import step_digests, tree_digest
from embprof.workflow.configs import code_digest, overrides_for
from embprof.workflow.preflight import results_problems, run_problems, suite_facts
from embprof.workflow.profiler import find_nsys, resolve_profiler
from embprof.workflow.settings import PLANS, Settings
from embprof.workflow.shellenv import pin_profiler, put_interpreter_first_on_path
from embprof.workflow.suite import OWN_FOLDER, Suite, make_suite, suite_digest
from embprof.workflow.validation import invalid_config, validate_config

# What the workflow keeps for itself under the working directory (never in results/).
CACHE = Path(".snakemake", "embprof")
# Rules with one job per config, hence one settings record per config (since issue 34).
PER_CONFIG = ("profile", "timing", "breakdown", "bandwidth", "sunburst")
# Rules whose record holds their code digest only.
CODE_ONLY = ("status", "aggregate", "sunburst", "latency_plot", "peak_bandwidth", "bandwidth_plot", "database")
# The digest a rule's `code` param carries where it is not the rule's own command's: the code the
# benchmark's runs measure (profile, timing) and the suite that lists the configs (collect).
_PARAM_CODE = {"collect": "suite", "profile": "measured", "timing": "measured"}


@dataclass
class WorkflowRun:
    """The run ``config`` asks for, in the checkout ``checkout``, writing ``paths``."""

    config: Mapping[str, Any]
    checkout: Path
    paths: ResultsPaths
    suite: Suite
    profiler: str  # nsys or torch (auto resolved here)
    nsys: str | None  # the nsys binary the commands are given (found, configured, or "nsys"), or None
    code: Mapping[str, str]  # rule -> digest of the embprof modules its command imports
    digest: Mapping[str, str | None]  # what the rules' `code` params carry (and `measured`, `suite`)
    tables: Mapping[str, str]  # breakdown, bandwidth -> digest of its kernel categories / bandwidth table
    _plans: _Plans | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, config: MutableMapping[str, Any], checkout: str | os.PathLike[str],
                    results: str | os.PathLike[str] = "results", memory: int | None = None) -> WorkflowRun:
        """``config`` read by its schema (in place: types, defaults) and checked: every problem that
        would make a job fail stops the run here, as one :class:`ConfigError` of one line each.
        ``memory``: this host's, which the iterations' inputs must fit."""
        checkout = Path(checkout)
        paths = ResultsPaths(results)
        validate_config(config, cache=CACHE / "valid-configs.json")
        suite = make_suite(checkout, config["suite"], config["suite_args"], config["suite_env"],
                           config["suite_launcher"], check=False)
        problems = run_problems(config, suite_facts(checkout) if suite.own else None, paths, memory, suite)
        if problems:
            raise invalid_config(problems)
        broken = results_problems(paths)
        if broken:
            raise invalid_config(broken, f"broken files in {paths.root}/")
        try:
            nsys = find_nsys(config["nsys"]) if config["profiler"] != "torch" else None
            profiler = resolve_profiler(config["profiler"], nsys)
        except ConfigError as exc:
            raise ConfigError(f"config: {exc}") from None
        if profiler == "nsys" and nsys is None:
            nsys = "nsys"  # not on this host's PATH; the job looks it up where it runs
        code, digest, tables = _digests(checkout, suite)
        return cls(config, checkout, paths, suite, profiler, nsys, code, digest, tables)

    def prepare_jobs(self) -> None:
        """The environment every job Snakemake starts inherits: this interpreter's ``embprof`` first on
        PATH, and the profiler resolved here pinned, so that jobs started elsewhere (cluster nodes
        re-parse the Snakefile) resolve ``auto`` the same way."""
        put_interpreter_first_on_path()
        pin_profiler(self.profiler)

    # ---- what the rules pass as params ----

    @property
    def preset(self) -> str:
        return self.config["preset"]

    def code_param(self, rule: str) -> str | None:
        """The `code` param of ``rule``: the digest of its command's code, joined for the breakdown and
        the bandwidth with their table's; the measured code for profile and timing, the suite for collect."""
        return self.digest[_PARAM_CODE.get(rule, rule)]

    @property
    def nsys_option(self) -> str:
        return f"--nsys {shlex.quote(self.nsys)}" if self.nsys else ""

    @property
    def suite_option(self) -> str:
        """The options that name the suite. Relative to the working directory, so that a checkout
        elsewhere with its results beside it (same code, another path) re-runs nothing; "." when run
        from the checkout itself."""
        return shlex.join(self.suite.options(relative_to="."))

    @property
    def size_args(self) -> list[str]:
        """Size options shape the labels, so collection and every run of a config pass them alike."""
        return [f"--total-cap={self.config['total_cap']}"] if self.config["total_cap"] else []

    @property
    def collect_options(self) -> str:
        """The config's selection as `embprof collect` options (-k expression, label substrings)."""
        options = [shlex.quote(f"--select={self.config['select']}")] if self.config["select"] else []
        options += [shlex.quote(f"--label={s}") for s in self.config["labels"]]
        options += [shlex.quote(f"--extra-arg={arg}") for arg in self.size_args]
        return " ".join(options)

    def run_settings(self, label: str) -> dict[str, Any]:
        """The config's run settings: the global keys, then every matching override."""
        settings = {key: self.config[key] for key in ("num_iterations", "profile_iterations", "repeats", "torchrec")}
        settings["extra_args"] = []
        settings.update(overrides_for(label, self.config["overrides"]))
        settings["extra_args"] = self.size_args + list(settings["extra_args"])
        return settings

    @property
    def same_options_for_all(self) -> bool:
        """No override: every config's run options are the global ones."""
        return not self.config["overrides"]

    def profile_options(self, label: str) -> str:
        return _options(self.run_settings(label), "profile_iterations")

    def timing_options(self, label: str) -> str:
        settings = self.run_settings(label)
        repeats = f" --repeats {int(settings['repeats'])}" if settings["repeats"] is not None else ""
        return _options(settings, "num_iterations") + repeats

    @property
    def compare_option(self) -> str:
        compare_to = self.config["compare_to"]
        return f"--compare-to {shlex.quote(compare_to)}" if compare_to else ""

    @cached_property
    def plotly(self) -> str:
        """The plotly.py whose plotly.js the figure pages load: a new plotly writes it again."""
        return importlib.metadata.version("plotly")

    # ---- the settings each job's record holds (results/settings/) ----

    @cached_property
    def suite_settings(self) -> dict[str, Any]:
        """Which suite runs, and with what: part of every setting of the steps that run it (none for this
        project's suite as it always ran, so its results folders keep their settings)."""
        pairs = (("suite", None if self.suite.own else self.suite.file.name), ("suite_args", list(self.suite.args)),
                 ("suite_env", dict(self.suite.env)), ("suite_launcher", list(self.suite.launcher)))
        return {key: value for key, value in pairs if value}

    def settings(self, rule: str, label: str | None = None) -> dict[str, Any]:
        """What ``rule``'s record holds (for ``label``: a per-config rule's), without a code digest this
        host cannot know (another suite whose folder is not here: the record's stands)."""
        settings = self._settings(rule, label)
        if settings.get("code", "") is None:
            del settings["code"]
        return settings

    def _settings(self, rule: str, label: str | None) -> dict[str, Any]:
        config = self.config
        if rule == "collect":
            return {"preset": config["preset"], "select": config["select"], "labels": config["labels"],
                    "size_args": self.size_args, "code": self._code("suite", "collect"), **self.suite_settings}
        if rule in ("profile", "timing"):
            assert label is not None, f"{rule} has a record per config"
            run = self.run_settings(label)
            settings = {"preset": config["preset"], "torchrec": run["torchrec"], "extra_args": run["extra_args"]}
            if rule == "profile":
                settings |= {"iterations": run["profile_iterations"], "profiler": self.profiler}
            else:
                settings |= {"iterations": run["num_iterations"], "repeats": run["repeats"]}
            return {**settings, "code": self._code("measured", rule), **self.suite_settings}
        if rule == "breakdown":
            return {"kernel_categories": self.tables["breakdown"], "code": self._code("breakdown")}
        if rule == "bandwidth":
            return {"bandwidth_table": self.tables["bandwidth"], "code": self._code("bandwidth")}
        if rule == "environment":
            return {"preset": config["preset"], "profiler": self.profiler, "code": self._code("environment")}
        if rule == "report":
            return {"compare_to": config["compare_to"], "code": self._code("report")}
        if rule == "plotly_js":
            return {"plotly": self.plotly, "code": self._code("plotly_js")}
        if rule in CODE_ONLY:
            return {"code": self._code(rule)}
        raise KeyError(f"{rule} records no settings")

    def _code(self, *steps: str) -> str | None:
        """The steps' code digests as one (None where one is unknown here: another suite not on this host)."""
        parts = [self.code[step] if step in self.code else self.digest[step] for step in steps]
        return None if None in parts else "-".join(parts)  # type: ignore[arg-type]

    def plan(self, rule: str, label: str | None, dry: bool) -> Path:
        """The input file of ``rule``'s job (of ``label`` for a per-config rule): the plan of its record,
        dated so that a change re-runs the job (:class:`~embprof.workflow.settings.Settings`); ``dry``:
        a dry run, which fills in no record."""
        return self._book(dry).plan(rule, label if rule in PER_CONFIG else None)

    def plan_configs(self, labels: Sequence[str], dry: bool) -> None:
        """Plan every per-config job of ``labels`` not planned yet (configs a collect job listed just now)."""
        self._book(dry).plan_configs(labels)

    def plan_pattern(self, rule: str) -> Path:
        """Where the plans of a per-config rule lie, ``{label}`` for the config: the rule's input names
        them so, without a function to call per job. Every job of a per-config rule is planned before
        Snakemake looks at its plan: each has among its inputs the output of a job whose creation asks a
        settings plan or the configs (collect for profile and timing, status for the breakdown,
        plotly_js for the sunburst, peak_bandwidth for the bandwidth), and the first such ask plans
        every job of the configs listed (:class:`_Plans`)."""
        assert rule in PER_CONFIG, f"{rule} has one job, whose plan its input function names"
        return PLANS / self.paths.settings(rule, LABEL)

    def _book(self, dry: bool) -> _Plans:
        if self._plans is None:
            self._plans = _Plans(self, dry)
        return self._plans


class _Plans:
    """Every job's plan, planned once per run; the first ask plans every job of the configs listed so
    far (per-config rules name their plans by a pattern; and Snakemake takes a file that appears in a
    folder it has already listed while it builds the DAG as missing)."""

    def __init__(self, run: WorkflowRun, dry: bool) -> None:
        self.run, self.dry = run, dry
        self.book = Settings(PLANS, known=CACHE / "plans-settled.json")
        self.planned: dict[tuple[str, str | None], Path] = {}
        configs = run.paths.configs
        labels = [c.label for c in read_configs(configs)] if configs.is_file() else []
        for rule in ("collect", "environment", "report", "plotly_js", *CODE_ONLY):
            if rule not in PER_CONFIG:
                self.plan(rule, None)
        self.plan_configs(labels)

    def plan(self, rule: str, label: str | None) -> Path:
        key = (rule, label)
        if key not in self.planned:
            record = self.run.paths.settings(rule, label)
            self.planned[key] = self.book.plan(record, self.run.settings(rule, label), dry=self.dry)
        return self.planned[key]

    def plan_configs(self, labels: Sequence[str]) -> None:
        for label in labels:
            for rule in PER_CONFIG:
                self.plan(rule, label)
        self.book.save()


def _options(settings: Mapping[str, Any], iterations_key: str) -> str:
    options = []
    if settings[iterations_key] is not None:
        options.append(f"--num-iterations {int(settings[iterations_key])}")
    if not settings["torchrec"]:
        options.append("--no-torchrec")
    options += [shlex.quote(f"--extra-arg={arg}") for arg in settings["extra_args"]]
    return " ".join(options)


def _digests(checkout: Path, suite: Suite) -> tuple[dict[str, str], dict[str, str | None], dict[str, str]]:
    """Code a step depends on: the modules its command imports (the import graph of embprof.cli.<step>,
    cached under .snakemake/), and the measured code (in the checkout, or another suite's folder).
    Each is recorded with the step's settings in results/settings/, so that editing the code re-runs
    the step in any clone a copy of results/ reaches, while a fresh clone (same content, new mtimes,
    another path) re-runs nothing. An overriding kernel categories or bandwidth table re-runs its step
    as an edit of the code would."""
    code = step_digests(Path(embprof.__file__).parent, cache=CACHE / "code-embprof.json")
    digest: dict[str, str | None] = dict(code)
    if suite.own:
        digest["measured"] = tree_digest(checkout, [OWN_FOLDER, "src/dynemb"], cache=CACHE / "code-measured.json")
        digest["suite"] = tree_digest(checkout, [OWN_FOLDER], cache=CACHE / "code-suite.json")  # what collection lists
    else:  # another suite: its file and the .py files beside it measure and list
        digest["measured"] = digest["suite"] = suite_digest(suite)
    tables = {step: code_digest([file.name], root=file.parent)
              for step, file in (("breakdown", config_file(KERNEL_CATEGORIES)), ("bandwidth", config_file(BANDWIDTH_TABLE)))}
    for step, table in tables.items():
        digest[step] = f"{digest[step]}-{table}"
    return code, digest, tables
