"""Which configs a run has: the suite's ``pytest --collect-only -q``, filtered by label."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from embprof.errors import ConfigError, SuiteError
from embprof.results.configs import BenchConfig
from embprof.workflow.benchcli import SUITE, collect_command, suite_env
from embprof.workflow.configs import parse_collected, select_by_labels

NO_TESTS_COLLECTED = 5


def collect_configs(
    root: Path, preset: str, select: str | None, labels: Sequence[str], extra_args: Sequence[str]
) -> list[BenchConfig]:
    """The configs of the suite in ``root`` that ``select`` (a ``-k`` expression) and ``labels``
    (substrings, any of them) keep; pytest's output goes to stdout (the rule's log)."""
    command = collect_command(preset, select, SUITE, extra_args=extra_args)
    print("+", " ".join(command), flush=True)
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=root, env=suite_env(root)
    )
    sys.stdout.write(done.stdout + done.stderr)
    if done.returncode == NO_TESTS_COLLECTED:
        raise ConfigError(f"no benchmark configs match select={select!r}")
    if done.returncode != 0:
        raise SuiteError(f"pytest --collect-only exited with {done.returncode} (see above)")
    try:
        configs = select_by_labels(parse_collected(done.stdout), labels)
    except ValueError as exc:
        raise SuiteError(str(exc)) from None
    if not configs:
        raise ConfigError(f"no benchmark configs match select={select!r} labels={list(labels)}")
    return configs
