"""The results contract of docs/DESIGN.md: one reader and one writer per file format.

Every ``embprof`` command, the workflow's input functions and the report read and write
``results/`` through this package: :class:`ResultsPaths` knows where each file
lies, the modules here what each holds, and :class:`Run` is a whole run read once
(``Run.from_folder(path)``; a run of a results database:
``embprof.results.database.read_run``), the object every view of a run takes. A file
that breaks its format raises :class:`embprof.errors.ContractError`. Nothing here
imports torch, and only the per-op, samples and bandwidth CSVs need pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from embprof.errors import ContractError
from embprof.results.paths import LABEL, ResultsPaths, label_from_file

if TYPE_CHECKING:
    from embprof.results.run import Run


def __getattr__(name: str):
    """``Run`` loads the readers of every format when first used (the breakdown needs none of them)."""
    if name == "Run":
        from embprof.results.run import Run

        return Run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LABEL", "ContractError", "ResultsPaths", "Run", "label_from_file"]
