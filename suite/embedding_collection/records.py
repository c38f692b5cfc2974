"""The EmbeddingCollection result record and its atomic, lock-protected append.

One record per run (one backend, one dedup setting), written by rank 0 after
every rank's times are gathered, through the results contract's writer
(:mod:`embprof.results.records`, fields :data:`EC_RESULT_FIELDS`), which follows
the benchmark suite's rule: an exclusive file lock, read the list, add, write
a temporary file in the same directory, rename it over the original.
"""

from __future__ import annotations

import os
from typing import Any

from embprof.results import records
from embprof.results.records import EC_RESULT_FIELDS

__all__ = ["EC_RESULT_FIELDS", "append_record", "check_record"]


def check_record(record: dict[str, Any]) -> None:
    records.check_record(record, EC_RESULT_FIELDS)


def append_record(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append an EmbeddingCollection record to its results file (atomically, under a lock)."""
    records.append_record(path, record, EC_RESULT_FIELDS)
