"""Putting runs into a results database: a results folder's own run (the workflow's step), and
other runs beside it (another folder, or every run of another database)."""

from __future__ import annotations

import os
from pathlib import Path

from embprof.errors import ContractError
from embprof.results.database.read import stored_run
from embprof.results.database.rows import RunRows, check_run_id, default_run_id, run_rows
from embprof.results.database.store import (
    Written,
    claim,
    own_run,
    reading,
    run_ids,
    set_own_run,
    store_run,
    writing,
)
from embprof.results.paths import ResultsPaths
from embprof.results.run import Run


def write_folder(paths: ResultsPaths, run_id: str | None = None) -> Written:
    """The folder's run into its own database (``paths.database``): only changed configs' rows.

    The run keeps the id it got when the file was made (``run_id``, else
    ``<first start>-<commit>``).
    """
    rows = run_rows(Run.from_folder(paths.root))  # every file read and checked before the database is opened
    path = paths.database
    with writing(path) as db:
        own = own_run(db)
        if own is not None and run_id is not None and run_id != own:
            raise ContractError(f"{path}: holds this folder's run as {own}; delete the file to name it {run_id}")
        chosen = own or check_run_id(run_id or default_run_id(rows.run))
        if own is None:
            claim(db, path, chosen, rows.run["results_dir"])
            set_own_run(db, chosen)
        return store_run(db, chosen, rows)


def merge_into(target: str | os.PathLike[str], source: str | os.PathLike[str], run_id: str | None = None) -> list[Written]:
    """``source``'s runs added to the database ``target`` (created when missing), each under its id.

    A results folder gives its run, read from its files, under its database's id (else
    ``<first start>-<commit>``); a database file gives every run it holds. ``run_id``
    names the one run merged. A run already in ``target`` from the same folder is
    brought up to date; one of the same id from another folder is refused.
    """
    runs = _source_runs(Path(source), Path(target), run_id)
    with writing(target) as db:
        for name, rows in runs:
            claim(db, target, name, rows.run["results_dir"])
        return [store_run(db, name, rows) for name, rows in runs]


def _source_runs(source: Path, target: Path, run_id: str | None) -> list[tuple[str, RunRows]]:
    if source.is_dir():
        paths = ResultsPaths(source)
        rows = run_rows(Run.from_folder(source))
        own = None
        if paths.database.is_file():
            with reading(paths.database) as db:
                own = own_run(db)
        return [(check_run_id(run_id or own or default_run_id(rows.run)), rows)]
    if not source.is_file():
        raise ContractError(f"{source}: neither a results folder nor a database")
    if target.exists() and source.resolve() == target.resolve():
        raise ContractError(f"{source}: is the database merged into")
    with reading(source) as db:
        ids = run_ids(db)
        if run_id is not None and len(ids) != 1:
            raise ContractError(f"{source}: --run-id names one run, the file holds {len(ids)}")
        return [(check_run_id(run_id) if run_id else name, stored_run(db, name)) for name in ids]
