"""The results contract of docs/DESIGN.md: one reader and one writer per file format.

Every ``embprof`` command, the workflow's input functions and the report read and write
``results/`` through this package: :class:`ResultsLayout` knows where each file
lies, the modules here what each holds. A file that breaks its format raises
:class:`embprof.errors.ContractError`. Nothing here imports torch, and only the
per-op and bandwidth CSVs need pandas.
"""

from embprof.errors import ContractError
from embprof.results.layout import LABEL, ResultsLayout, label_from_file

__all__ = ["LABEL", "ContractError", "ResultsLayout", "label_from_file"]
