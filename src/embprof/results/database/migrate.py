"""Older results databases brought to this embprof's schema: in place by a write (inside its
transaction), in a copy in memory by a read (the file left as it is).

Version 1 -> 2 (issue 33): the per-op rows' samples leave ``opcalls.ms_by_iter`` (``;``-joined
text) for a table of their own, ``op_samples``, one row per row and iteration. Every config's
rows change shape, so the next write of a run replaces all of its configs once.

Version 2 -> 3 (issue 31): columns of NVIDIA's dynamicemb (``nv_*``) in ``records`` (null in
records written before it ran) and in the ``summary`` view.
"""

from __future__ import annotations

import sqlite3

import sqlite_utils

from embprof.results.database.schema import DOCS, OP_SAMPLES, OPCALLS, SCHEMA_VERSION, TABLES, create_schema

LEGACY_SAMPLES = "ms_by_iter"


def upgrade(db: sqlite_utils.Database, version: int) -> None:
    """``db`` (of schema ``version``) to :data:`SCHEMA_VERSION`; the caller holds the transaction."""
    if version < 2:
        _samples_to_their_table(db)
    _add_missing_columns(db)
    create_schema(db)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


def in_memory(db: sqlite_utils.Database, version: int) -> sqlite_utils.Database:
    """A copy of ``db`` in memory, upgraded (reading an older file changes nothing on disk)."""
    copy = sqlite3.connect(":memory:")
    db.conn.backup(copy)
    upgraded = sqlite_utils.Database(copy)
    upgraded.execute("PRAGMA foreign_keys = ON")
    with upgraded.conn:
        upgrade(upgraded, version)
    return upgraded


def _samples_to_their_table(db: sqlite_utils.Database) -> None:
    if LEGACY_SAMPLES not in db[OPCALLS.name].columns_dict:
        return
    key = [c for c in OP_SAMPLES.pk if c != "iteration"]
    rows = db.execute(
        f"SELECT {', '.join(key)}, {LEGACY_SAMPLES} FROM {OPCALLS.name} WHERE coalesce({LEGACY_SAMPLES}, '') != ''"
    ).fetchall()
    # The column goes first: nothing refers to it, while op_samples will refer to its table.
    db.execute(f"ALTER TABLE {OPCALLS.name} DROP COLUMN {LEGACY_SAMPLES}")
    db.execute(f"DELETE FROM {DOCS.name} WHERE name = ? AND column_name = ?", [OPCALLS.name, LEGACY_SAMPLES])
    create_schema(db)
    samples = (
        dict(zip(key, row[:-1], strict=True)) | {"iteration": i, "ms": float(ms)}
        for row in rows for i, ms in enumerate(row[-1].split(";"))
    )
    db[OP_SAMPLES.name].insert_all(samples, pk=OP_SAMPLES.pk, batch_size=10_000)


def _add_missing_columns(db: sqlite_utils.Database) -> None:
    """Columns a table of this schema has and the file's lacks, added (null in its rows)."""
    names = set(db.table_names())
    for table in TABLES:
        if table.name not in names:
            continue
        have = db[table.name].columns_dict
        for column in table.columns:
            if column.name not in have:
                db[table.name].add_column(column.name, column.type)
