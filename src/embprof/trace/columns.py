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
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

try:
    import adbc_driver_sqlite.dbapi as _adbc
except ImportError:  # pragma: no cover - exercised by forcing the fallback in a test
    _adbc = None

BATCH_ROWS = 1 << 16
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

    def batches(self, sql: str) -> Iterator[pa.RecordBatch]:
        """The result in record batches of up to 64K rows, so no full Arrow copy is ever held."""
        if self._adbc is not None:
            with self._adbc.cursor() as cur:
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                cur.execute(sql)
                yield from cur.fetch_record_batch()
            return
        cur = self._sqlite.execute(sql)
        names = [d[0] for d in cur.description]
        while rows := cur.fetchmany(BATCH_ROWS):
            yield pa.record_batch([_array(c) for c in zip(*rows, strict=True)], names=names)

    def table(self, sql: str) -> pa.Table:
        batches = list(self.batches(sql))
        return pa.Table.from_batches(batches) if batches else pa.table({})

    def ints(self, sql: str, ncols: int) -> list[np.ndarray]:
        """One int64 array per selected column (all integers, never NULL)."""
        return stack_batches((b.columns for b in self.batches(sql)), ncols)

    def close(self) -> None:
        for conn in (self._adbc, self._sqlite):
            if conn is not None:
                conn.close()


class NotIntegers(ValueError):
    """A selected column holds values that are no integers (text, reals) somewhere: SQLite keeps
    whatever a row was given, and the reader must not guess a time from it."""

    def __init__(self, column: int) -> None:
        super().__init__(f"column {column} is not all integers")
        self.column = column


def _array(values: tuple) -> pa.Array:
    """A column read through sqlite3 as Arrow; values of mixed types become text, as ADBC's do."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def stack_batches(batches: Iterable[list[pa.Array]], ncols: int) -> list[np.ndarray]:
    """Join the integer columns of successive batches into int64 numpy arrays.

    Each batch is viewed zero-copy and joined by numpy one column at a time,
    so the result lives in numpy memory (returned to the OS when freed).
    :class:`NotIntegers` names a column that is not of an integer type.
    """
    parts: list[list[np.ndarray]] = [[] for _ in range(ncols)]
    for cols in batches:
        for i in range(ncols):
            if not pa.types.is_integer(cols[i].type):
                raise NotIntegers(i)
            parts[i].append(np.asarray(cols[i].to_numpy(zero_copy_only=False), dtype=np.int64))
    out = []
    for i in range(ncols):
        out.append(np.concatenate(parts[i]) if parts[i] else np.empty(0, np.int64))
        parts[i] = []
    return out


def read_strings_by_id(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """``StringIds`` values for the given ids only (exports hold many more than a trace uses)."""
    out: dict[int, str] = {}
    for lo in range(0, len(ids), 50_000):
        inlist = ",".join(str(int(i)) for i in ids[lo : lo + 50_000])
        out.update(conn.execute(f"SELECT id, value FROM StringIds WHERE id IN ({inlist})"))
    return out
