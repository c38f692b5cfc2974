"""The failures a user can act on, one type per kind; ``str()`` of each is one line.

The ``embprof`` command turns any of them into ``embprof <command>: error: ...``
and exit code 1, never a traceback. Every kind embprof raises lives here (docs/DESIGN.md,
"Names"); a class that never leaves its package (raised and caught inside it, and turned into
one of these before it does: trace's ``CollidingCalls``, ``NotIntegers``, ``NotText``,
``OutOfOrder``, plots' ``_NoAnswer``) is a signal, not a kind, and lives beside its raiser.
"""

from __future__ import annotations

from pathlib import Path


class EmbprofError(Exception):
    """A failure of the input or the machine, not of this code."""


class ContractError(EmbprofError):
    """A results file that is missing or breaks its format in docs/DESIGN.md."""


class ConfigError(EmbprofError):
    """A config file (the workflow's config, kernel categories, the bandwidth table) is wrong,
    or asks for what this machine cannot do."""


class FormulaError(ConfigError):
    """A bandwidth table's formula that cannot be parsed, or evaluated with the variables given
    (``embprof.bandwidth.expr``)."""


class SuiteError(EmbprofError):
    """The benchmark suite cannot be found or collected (a config's crash is data, not this)."""


class BusyError(EmbprofError):
    """A file another process is writing stays locked for longer than a writer waits."""


class TraceError(EmbprofError):
    """A trace the breakdown cannot use (``embprof.trace``); ``str()`` is one line naming the file
    and the problem."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class PeakError(EmbprofError):
    """The peak bandwidth cannot be measured here, nor looked up in the bandwidth table
    (``embprof.bandwidth.peak``)."""


class ExportError(EmbprofError):
    """Static export could not run (no browser) or a figure failed to render (``embprof.plots.export``)."""


class LockHeldError(EmbprofError):
    """A snakemake process still runs in the directory: its lock is not stale (``embprof.workflow.lock``)."""
