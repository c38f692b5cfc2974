"""Opening a results database and writing runs into it, a run's configs replaced one by one.

A write is one transaction: it replaces the rows of each config whose content changed
(an upsert: the others keep their rows and their ``written_at``), removes configs the run
no longer has, and leaves every other run alone. A new file is written beside its path and
renamed once complete; an existing one is changed in place by SQLite's transaction, so a
failed or killed write leaves it as it was.

Writers take turns: each holds the file's lock (:mod:`embprof.exclusive`) from before it
looks whether the file exists until its transaction is committed, so two merges at once
both land (none is lost to the other's rename, none dies on SQLite's own lock). A file
that fails SQLite's integrity check is refused before anything is read or written, and
a write whose result fails it is rolled back. Any other SQLite failure of a damaged file
is one line naming it (:class:`~embprof.errors.ContractError`), never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import sqlite_utils

from embprof import __version__
from embprof.atomic import atomic_path
from embprof.errors import ContractError
from embprof.exclusive import exclusive
from embprof.results.database.migrate import in_memory, upgrade
from embprof.results.database.rows import RunRows, check_run_id
from embprof.results.database.schema import (
    CONFIG_TABLES,
    CONFIGS,
    META,
    RUN_TABLES,
    RUNS,
    SCHEMA_VERSION,
    create_schema,
)

OWN_RUN = "own_run"


@dataclass(frozen=True)
class Written:
    """What one write of a run did, per config."""

    run_id: str
    written: list[str]
    unchanged: list[str]
    removed: list[str]

    def line(self, path: str | os.PathLike[str]) -> str:
        return (
            f"{path}: run {self.run_id}: {len(self.written)} config(s) written, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} removed"
        )


def _connect(path: Path) -> sqlite_utils.Database:
    db = sqlite_utils.Database(sqlite3.connect(path))
    db.execute("PRAGMA foreign_keys = ON")
    return db


def check_version(db: sqlite_utils.Database, path: str | os.PathLike[str]) -> int:
    """The schema version of a database this embprof reads: empty (this version), of its version,
    or older (:mod:`~embprof.results.database.migrate` upgrades it); one line otherwise."""
    try:
        names = set(db.table_names())
    except sqlite3.DatabaseError as exc:
        raise ContractError(f"{path}: not an SQLite database ({exc})") from None
    if not names:
        return SCHEMA_VERSION
    if META.name not in names:
        raise ContractError(f"{path}: not an embprof results database (it has no {META.name} table)")
    found = meta_value(db, "schema_version")
    if found is None or not found.isdigit():
        raise ContractError(f"{path}: no schema version in its {META.name} table")
    if int(found) > SCHEMA_VERSION:
        raise ContractError(
            f"{path}: schema version {found} is newer than this embprof's ({SCHEMA_VERSION}): "
            "read it with a newer embprof"
        )
    return int(found)


def meta_value(db: sqlite_utils.Database, key: str) -> str | None:
    rows = list(db.query(f"SELECT value FROM {META.name} WHERE key = ?", [key]))
    return rows[0]["value"] if rows else None


def check_integrity(db: sqlite_utils.Database, path: str | os.PathLike[str]) -> None:
    """SQLite's integrity check of the whole file (within a transaction: as the transaction left it)."""
    try:
        [(verdict,)] = db.execute("PRAGMA integrity_check(1)").fetchall()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB":
            raise ContractError(f"{path}: not an SQLite database ({exc})") from None
        verdict = str(exc)  # too damaged for the check to walk it
    if verdict != "ok":
        problem = " ".join(str(verdict).split())
        raise ContractError(
            f"{path}: damaged database (integrity check: {problem}): restore it from a copy, "
            "or write it again from its results folders"
        )


@contextmanager
def _damage_is_one_line(path: str | os.PathLike[str]) -> Iterator[None]:
    """SQLite's failures of a damaged or foreign file as one line naming it."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise ContractError(f"{path}: unreadable database ({problem})") from None


@contextmanager
def reading(path: str | os.PathLike[str]) -> Iterator[sqlite_utils.Database]:
    """An existing embprof database, its version and its integrity checked."""
    target = Path(path)
    if not target.is_file():
        raise ContractError(f"{path}: no such database")
    db = _connect(target)
    try:
        with _damage_is_one_line(path):
            check_integrity(db, path)
            version = check_version(db, path)
            if not db.table_names():
                raise ContractError(f"{path}: not an embprof results database (it is empty)")
            if version < SCHEMA_VERSION:  # read through an upgraded copy: the file stays as it is
                upgraded = in_memory(db, version)
                db.close()
                db = upgraded
            yield db
    finally:
        db.close()


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[sqlite_utils.Database]:
    """The database at ``path`` (created when missing), in one transaction with its schema in place,
    under its lock, its integrity checked before and after."""
    target = Path(path)
    with exclusive(target):
        if target.exists():
            with _transaction(target, path) as db:
                yield db
            return
        with atomic_path(target, suffix=".sqlite") as tmp, _transaction(tmp, path) as db:
            yield db


@contextmanager
def _transaction(file: Path, path: str | os.PathLike[str]) -> Iterator[sqlite_utils.Database]:
    """``file`` open in one write transaction: committed only when the block and the checks pass."""
    db = _connect(file)
    try:
        with _damage_is_one_line(path):
            check_integrity(db, path)
            version = check_version(db, path)
            db.execute("BEGIN IMMEDIATE")
            try:
                if version < SCHEMA_VERSION:
                    upgrade(db, version)
                prepare(db)
                yield db
                check_integrity(db, path)
            except BaseException:
                db.conn.rollback()
                raise
            db.conn.commit()
    finally:
        db.close()


def prepare(db: sqlite_utils.Database) -> None:
    """The schema in place and this embprof's versions in ``meta``."""
    create_schema(db)
    db[META.name].upsert_all(
        [{"key": "schema_version", "value": str(SCHEMA_VERSION)},
         {"key": "embprof_version", "value": __version__}],
        pk="key",
    )


def run_ids(db: sqlite_utils.Database) -> list[str]:
    return [row["run_id"] for row in db.query(f"SELECT run_id FROM {RUNS.name} ORDER BY run_id")]


def results_dir_of(db: sqlite_utils.Database, run_id: str) -> str | None:
    rows = list(db.query(f"SELECT results_dir FROM {RUNS.name} WHERE run_id = ?", [run_id]))
    return rows[0]["results_dir"] if rows else None


def claim(db: sqlite_utils.Database, path: str | os.PathLike[str], run_id: str, results_dir: str) -> None:
    """``run_id`` may be written with rows of ``results_dir``: new here, or already that folder's run.

    Two folders never share a run id: a copy of a results folder carries its database's
    run id, and writing it over the original's would lose the original's rows.
    """
    check_run_id(run_id)
    held = results_dir_of(db, run_id)
    if held is not None and held != results_dir:
        raise ContractError(
            f"{path}: run {run_id} is the run of {held}: pass --run-id NAME to add {results_dir} as another run"
        )


def store_run(db: sqlite_utils.Database, run_id: str, rows: RunRows) -> Written:
    """Write ``rows`` as the run ``run_id``: configs whose digest changed are replaced, the others kept."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    db[RUNS.name].upsert({"run_id": run_id, "written_at": now, **rows.run}, pk="run_id")
    stored = {
        row["label"]: row["digest"]
        for row in db.query(f"SELECT label, digest FROM {CONFIGS.name} WHERE run_id = ?", [run_id])
    }
    written, unchanged = [], []
    for label, config in sorted(rows.configs.items()):
        if stored.get(label) == config.digest:
            unchanged.append(label)
            continue
        _delete_config(db, run_id, label)
        key = {"run_id": run_id, "label": label}
        for table in CONFIG_TABLES:
            extra = {"digest": config.digest, "written_at": now} if table is CONFIGS else {}
            table_rows = [key | row | extra for row in config.tables.get(table.name, [])]
            if table_rows:
                db[table.name].insert_all(table_rows, pk=table.pk)
        written.append(label)
    removed = sorted(set(stored) - set(rows.configs))
    for label in removed:
        _delete_config(db, run_id, label)
    return Written(run_id, written, unchanged, removed)


def _delete_config(db: sqlite_utils.Database, run_id: str, label: str) -> None:
    """The config's rows, in every table (its foreign keys cascade)."""
    db.execute(f"DELETE FROM {CONFIGS.name} WHERE run_id = ? AND label = ?", [run_id, label])


def own_run(db: sqlite_utils.Database) -> str | None:
    """The run of the results folder this database was written in (``embprof db write``)."""
    return meta_value(db, OWN_RUN) if META.name in db.table_names() else None


def set_own_run(db: sqlite_utils.Database, run_id: str) -> None:
    db[META.name].upsert({"key": OWN_RUN, "value": run_id}, pk="key")


__all__ = [
    "OWN_RUN", "RUN_TABLES", "Written", "check_integrity", "check_version", "claim", "meta_value", "own_run", "reading",
    "results_dir_of", "run_ids", "set_own_run", "store_run", "writing",
]
