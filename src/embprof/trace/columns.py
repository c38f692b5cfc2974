"""Fast integer column reads from SQLite straight into numpy.

``np.fromiter`` over the cursor streams rows into one preallocated-by-growth
array: no list of tuples, no per-row Python object kept alive.
"""

from __future__ import annotations

import itertools
import sqlite3

import numpy as np


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def column_names(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def read_int_columns(conn: sqlite3.Connection, sql: str, ncols: int) -> list[np.ndarray]:
    """Run ``sql`` (every selected value an integer, never NULL) -> one int64 array per column."""
    flat = np.fromiter(itertools.chain.from_iterable(conn.execute(sql)), dtype=np.int64)
    table = flat.reshape(-1, ncols)
    return [np.ascontiguousarray(table[:, i]) for i in range(ncols)]


def read_strings_by_id(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """``StringIds`` values for the given ids only (exports hold many more than a trace uses)."""
    if len(ids) == 0:
        return {}
    out: dict[int, str] = {}
    for chunk in np.array_split(ids, max(1, len(ids) // 50_000 + 1)):
        inlist = ",".join(str(int(i)) for i in chunk)
        out.update(conn.execute(f"SELECT id, value FROM StringIds WHERE id IN ({inlist})"))
    return out
