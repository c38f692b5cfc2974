"""The environment the rules' shell commands inherit from the Snakemake process."""

from __future__ import annotations

import os
import sys

from embprof.workflow.profiler import PIN_VARIABLE


def put_interpreter_first_on_path() -> None:
    """Make ``embprof`` and ``python`` in a rule's shell those of the interpreter running
    Snakemake (the project's venv).

    Rules say ``embprof <step>`` (the venv's console script) so that the logged
    command is the one to re-run by hand; under ``--sdm conda`` the env's own ``bin``
    still comes first, since Snakemake activates it inside the job's shell.
    """
    here = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != here:
        os.environ["PATH"] = os.pathsep.join([here, path]) if path else here


def pin_profiler(profiler: str) -> None:
    """Hand the resolved profiler to every job Snakemake starts (they inherit the environment)."""
    os.environ[PIN_VARIABLE] = profiler
