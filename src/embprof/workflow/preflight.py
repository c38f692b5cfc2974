"""What can be known about a run before any job starts, checked when the Snakefile is parsed.

The schema says what a value may look like; these checks say whether the run it
asks for can work: a ``-k`` expression pytest can parse, label substrings (of
``labels`` and of ``overrides``) that name configs of the preset, override
``extra_args`` that neither set what the workflow sets itself nor change a label,
a ``total_cap`` the tables can share, iterations whose inputs fit in this host's
memory, a ``compare_to`` that is a results folder. Every
problem is one line naming its key; nothing here runs pytest or imports torch.
Whether a ``-k`` expression matches any test id is pytest's to say: the collect
job does, in one line.
The suite's facts come in as functions (the benchmark's own ``preset_labels``,
``select_problem`` and ``inputs_problem``, from ``suite/configs.py``: :func:`suite_facts`), so
the rule that makes a label has one home. The results folder's
files that the input functions read are checked here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embprof.errors import ContractError
from embprof.results.configs import read_configs
from embprof.results.paths import ResultsPaths
from embprof.results.steps import read_status
from embprof.workflow.checkout import SUITE_FACTS, suite_module
from embprof.workflow.suite import Suite, suite_problems


@dataclass(frozen=True)
class SuiteFacts:
    """What the benchmark suite says about a preset without running it."""

    labels: Callable[[str, int | None], list[str]]  # (preset, total_cap) -> labels; ValueError
    select_problem: Callable[[str], str | None]  # why a -k expression cannot select, or None
    # (preset, iterations, memory bytes) -> why their inputs cannot fit, or None
    inputs_problem: Callable[[str, int, int | None], str | None]
    # why these options cannot be passed to some configs' runs (they shape labels), or None
    extra_args_problem: Callable[[Sequence[str]], str | None] = lambda args: None


def suite_facts(checkout: str | os.PathLike[str]) -> SuiteFacts:
    """The facts of this project's suite in ``checkout``: its ``suite/configs.py``'s own functions."""
    module = suite_module(checkout, SUITE_FACTS)
    return SuiteFacts(module.preset_labels, module.select_problem, module.inputs_problem,
                      module.extra_args_problem)


# Options the workflow passes to every benchmark run itself, and the config key that sets each:
# in an override's extra_args they would fight it (or make a run look for a label it has not).
WORKFLOW_OPTIONS = {
    "--preset": "preset", "--total-cap": "total_cap", "--num-iterations": "num_iterations or profile_iterations",
    "--repeats": "repeats", "--no-torchrec": "torchrec: false", "--label": "labels",
    "--results-file": None, "--profile": None, "--trace-dir": None,
}


def iteration_problems(
    config: Mapping[str, Any], inputs_problem: Callable[[str, int, int | None], str | None],
    memory: int | None,
) -> list[str]:
    """Iteration counts (global and per override) whose pre-generated inputs exceed this host's memory."""
    settings = {"": config} | {f"overrides.{k}.": v for k, v in config["overrides"].items()}
    problems = []
    for prefix, values in settings.items():
        for key in ("num_iterations", "profile_iterations"):
            if values.get(key) is not None:
                problem = inputs_problem(config["preset"], values[key], memory)
                problems += [f"{prefix}{key}: {problem}"] if problem else []
    return problems


def compare_to_problem(compare_to: str | None, results: ResultsPaths) -> str | None:
    """Why ``compare_to`` is not a previous results folder the report can read, or ``None``."""
    if not compare_to:
        return None
    folder = Path(compare_to)
    if not folder.is_dir():
        return f"compare_to: {compare_to}: no such folder"
    if results.root.is_dir() and os.path.samefile(folder, results.root):
        return f"compare_to: {compare_to} is this run's own results folder; name an earlier one"
    previous = ResultsPaths(folder).benchmark_results
    if not previous.is_file():
        return f"compare_to: {compare_to}: not a results folder (it has no {previous.name})"
    from embprof.results.records import (
        read_results,  # numpy's import, only where there is a folder to read
    )

    try:
        read_results(previous)
    except ContractError as exc:
        return f"compare_to: {exc}"
    return None


def label_problems(config: Mapping[str, Any], suite_labels: Callable[[str, int | None], list[str]]) -> list[str]:
    """A ``total_cap`` the tables cannot share, and ``labels`` or ``overrides`` substrings that name
    no config (an override that matches nothing would be ignored without a word)."""
    preset = config["preset"]
    try:
        labels = suite_labels(preset, config["total_cap"])
    except ValueError as exc:
        return [f"total_cap: {exc}"]
    wanted = [("labels", s) for s in config["labels"]] + [("overrides", s) for s in config["overrides"]]
    return [
        f"{key}: {substring!r} is in no config label of the {preset} preset (e.g. {labels[0]})"
        for key, substring in wanted
        if not any(substring in label for label in labels)
    ]


def extra_args_problems(config: Mapping[str, Any], suite_problem: Callable[[Sequence[str]], str | None]) -> list[str]:
    """Override ``extra_args`` that set what the workflow sets, or that the suite says cannot
    change one config (an option that shapes the labels: the run would look for a test that
    collection never listed, and fail)."""
    problems = []
    for substring, settings in config["overrides"].items():
        args = list(settings.get("extra_args") or [])
        for arg in args:
            option = arg.split("=", 1)[0]
            if option in WORKFLOW_OPTIONS:
                use = WORKFLOW_OPTIONS[option]
                instead = f": set {use} instead" if use else ""
                problems.append(f"overrides.{substring}.extra_args: {option} is passed by the workflow itself{instead}")
        problem = suite_problem(args)
        if problem:
            problems.append(f"overrides.{substring}.extra_args: {problem}")
    return problems


def run_problems(
    config: Mapping[str, Any], suite: SuiteFacts | None, results: ResultsPaths, memory: int | None,
    runs: Suite | None = None,
) -> list[str]:
    """Every problem of a schema-valid config that would make its jobs fail, one line each.

    ``runs``: the suite the config names (None or this project's: ``suite``'s facts apply);
    another suite is checked from its source and against the keys only this project's suite takes
    (``suite`` may then be None).
    """
    if runs is not None and not runs.own:
        problems = other_suite_problems(config, runs, results)
    else:
        assert suite is not None, "this project's suite is checked by its facts"
        problem = suite.select_problem(config["select"]) if config["select"] else None
        problems = [f"select: {problem}"] if problem else []
        problems += label_problems(config, suite.labels)
        problems += extra_args_problems(config, suite.extra_args_problem)
        problems += iteration_problems(config, suite.inputs_problem, memory)
    problems += [p for p in (compare_to_problem(config["compare_to"], results),) if p]
    return problems


def other_suite_problems(config: Mapping[str, Any], suite: Suite, results: ResultsPaths) -> list[str]:
    """Another suite: its file (:func:`~embprof.workflow.suite.suite_problems`), and the keys it cannot honour.

    A missing file is no problem where the results folder already lists its configs: a
    host that draws a copied results folder has no copy of the suite, and runs nothing of it.
    """
    file_problems = suite_problems(suite.file)
    if not suite.file.exists() and results.configs.exists():
        file_problems = []
    problems = file_problems
    if config["total_cap"] is not None:
        problems.append("total_cap: only this project's suite takes --total-cap; another suite sizes its own "
                        "tables (pass its options in suite_args, or edit a copy of it)")
    repeats = [f"overrides.{k}.repeats" for k, v in config["overrides"].items() if v.get("repeats") is not None]
    if config["repeats"] is not None or repeats:
        keys = ", ".join((["repeats"] if config["repeats"] is not None else []) + repeats)
        problems.append(f"{keys}: only this project's suite repeats its timed passes; another suite times one pass")
    if config["profiler"] == "torch":
        problems.append("profiler: torch needs this project's suite (another suite's --profile torch writes "
                        "traces of another layout); use nsys")
    return problems


def results_problems(results: ResultsPaths) -> list[str]:
    """Broken files among those the workflow's input functions read at every DAG pass
    (``configs.tsv`` and its configs' statuses), each named with what to do; the run
    stops before any job rather than in a traceback of an input function.

    Both are checkpoint outputs, which Snakemake does not make again just because one
    is missing: the way out is to delete the file and force its rule.
    """
    if not results.configs.exists():
        return []
    try:
        configs = read_configs(results.configs)
    except ContractError as exc:
        return [f"{exc}: delete it and run with --forcerun collect (the configs are listed again)"]
    problems = []
    for config in configs:
        path = results.status(config.label)
        try:
            if path.exists():
                read_status(path)
        except ContractError as exc:
            problems.append(f"{exc}: delete it and run with --forcerun status "
                            f"(statuses are merged again from {results.root / 'steps'}/)")
    return problems
