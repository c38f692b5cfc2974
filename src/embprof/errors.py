"""The failures a user can act on, one type per kind; ``str()`` of each is one line.

The ``embprof`` command turns any of them into ``embprof <command>: error: ...``
and exit code 1, never a traceback.
"""

from __future__ import annotations


class EmbprofError(Exception):
    """A failure of the input or the machine, not of this code."""


class ContractError(EmbprofError):
    """A results file that is missing or breaks its format in docs/DESIGN.md."""


class ConfigError(EmbprofError):
    """A config file (the workflow's config, kernel categories, the bandwidth table) is wrong,
    or asks for what this machine cannot do."""


class SuiteError(EmbprofError):
    """The benchmark suite cannot be found or collected (a config's crash is data, not this)."""


class BusyError(EmbprofError):
    """A file another process is writing stays locked for longer than a writer waits."""
