"""A run of a results database (embprof.results.database) as a :class:`~embprof.compare.runs.Run`:
the same object :func:`~embprof.compare.runs.load_run` gives for the folder it was written from."""

from __future__ import annotations

import os

from embprof.compare.runs import Run
from embprof.results.database import reading
from embprof.results.database.read import require_run, run_environment, run_opcalls, run_records


def load_database_run(path: str | os.PathLike[str], run_id: str) -> Run:
    """The run ``run_id`` of the results database ``path``, named by its id."""
    with reading(path) as db:
        require_run(db, path, run_id)
        return Run(
            name=run_id,
            records=run_records(db, run_id),
            opcalls=run_opcalls(db, run_id),
            environment=run_environment(db, run_id),
        )
