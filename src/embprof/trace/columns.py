"""Bulk column reads from SQLite into Arrow/numpy.

The ADBC SQLite driver decodes rows in C straight into Arrow arrays, several
times faster than iterating a ``sqlite3`` cursor in Python; that read is most
of the breakdown's time on a large export. Where the driver is not installed
the same queries run through ``sqlite3`` (slower, same result). Every
selected value is made non-NULL in SQL (``coalesce``), so each column has one
type and no type inference can go wrong.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path

import numpy as np
import pyarrow as pa

try:
    import adbc_driver_sqlite.dbapi as _adbc
except ImportError:  # pragma: no cover - exercised by forcing the fallback in a test
    _adbc = None

DatabaseErrors: tuple[type[BaseException], ...] = (sqlite3.Error,) + ((_adbc.Error,) if _adbc else ())


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def column_names(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def read_only_uri(path: Path) -> str:
    return f"file:{urllib.parse.quote(str(Path(path).resolve()))}?mode=ro&immutable=1"


class BulkReader:
    """Runs SELECTs against one export and returns Arrow tables."""

    def __init__(self, path: Path, use_adbc: bool = True) -> None:
        self.uri = read_only_uri(path)
        self._adbc = _adbc.connect(self.uri) if (use_adbc and _adbc is not None) else None
        self._sqlite = None if self._adbc else sqlite3.connect(self.uri, uri=True)

    def table(self, sql: str) -> pa.Table:
        if self._adbc is not None:
            with self._adbc.cursor() as cur:
                cur.execute(sql)
                return cur.fetch_arrow_table()
        cur = self._sqlite.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        cols = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        return pa.table({n: pa.array(c) for n, c in zip(names, cols, strict=True)})

    def ints(self, sql: str) -> list[np.ndarray]:
        """One int64 array per selected column."""
        return [int_column(c) for c in self.table(sql).columns]

    def close(self) -> None:
        for conn in (self._adbc, self._sqlite):
            if conn is not None:
                conn.close()


def int_column(col: pa.ChunkedArray) -> np.ndarray:
    """int64 numpy copy of a non-null integer column.

    Chunks are viewed zero-copy and joined by numpy, so the result lives in
    numpy's memory (given back to the OS when freed), not in Arrow's pool.
    """
    if len(col) == 0:
        return np.empty(0, dtype=np.int64)
    if col.num_chunks == 1:
        return np.array(col.chunk(0).to_numpy(), dtype=np.int64)
    return np.concatenate([np.asarray(c.to_numpy(), dtype=np.int64) for c in col.chunks if len(c)])


def read_strings_by_id(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """``StringIds`` values for the given ids only (exports hold many more than a trace uses)."""
    out: dict[int, str] = {}
    for lo in range(0, len(ids), 50_000):
        inlist = ",".join(str(int(i)) for i in ids[lo : lo + 50_000])
        out.update(conn.execute(f"SELECT id, value FROM StringIds WHERE id IN ({inlist})"))
    return out
