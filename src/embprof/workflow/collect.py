"""Which configs a run has: the suite's ``pytest --collect-only -q``, filtered by label."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence

from embprof.errors import ConfigError, SuiteError
from embprof.results.configs import BenchConfig
from embprof.workflow.benchcli import collect_command
from embprof.workflow.configs import parse_collected, select_by_labels
from embprof.workflow.suite import Suite

NO_TESTS_COLLECTED = 5
_USAGE = re.compile(r"^ERROR: (.+)$", re.M)
_RAISED = re.compile(r"^E +(\S.*)$", re.M)


def pytest_cause(output: str) -> str:
    """The line of pytest's output that says why it stopped: its usage error, else the last
    line of the exception it reports; empty when it says neither."""
    usage = _USAGE.findall(output)
    if usage:
        return usage[0].strip()
    raised = _RAISED.findall(output)
    return raised[-1].strip() if raised else ""


def collect_configs(
    suite: Suite, preset: str, select: str | None, labels: Sequence[str], extra_args: Sequence[str]
) -> list[BenchConfig]:
    """The configs of ``suite`` that ``select`` (a ``-k`` expression) and ``labels``
    (substrings, any of them) keep; pytest's output goes to stdout (the rule's log)."""
    command = collect_command(suite, preset, select, extra_args=extra_args)
    print("+", " ".join(command), flush=True)
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=suite.root, env=suite.environment()
    )
    sys.stdout.write(done.stdout + done.stderr)
    if done.returncode == NO_TESTS_COLLECTED:
        if not select:
            raise SuiteError(f"{suite.file}: collects no tests")
        raise ConfigError(f"no benchmark configs match select={select!r}")
    if done.returncode != 0:
        cause = pytest_cause(done.stdout + done.stderr) or "see its output above"
        raise SuiteError(f"pytest --collect-only exited with {done.returncode}: {cause}")
    try:
        configs = select_by_labels(parse_collected(done.stdout), labels)
    except ValueError as exc:
        raise SuiteError(str(exc)) from None
    if not configs:
        if not select and not labels:
            raise SuiteError(f"{suite.file}: none of its tests is a config (no test id ends in [<config label>])")
        raise ConfigError(f"no benchmark configs match select={select!r} labels={list(labels)}")
    return configs
