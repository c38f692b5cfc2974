"""Bulk column reads from SQLite into Arrow record batches.

The ADBC SQLite driver decodes rows in C straight into Arrow arrays, several
times faster than iterating a ``sqlite3`` cursor in Python; that read is most
of the breakdown's time on a large export. It is driven through
``adbc_driver_manager``'s own statements, not its DB-API module, which imports
``pyarrow.dataset`` and with it pandas (a third of a second of start-up that
the breakdown never needs). Where the driver is not installed the same
queries run through ``sqlite3`` (slower, same result). Nullable columns are
made non-NULL in SQL (``coalesce``), so each column has one type and no type
inference can go wrong.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from embprof.arrow import to_ints

try:
    import adbc_driver_manager as _adbc
    import adbc_driver_sqlite as _adbc_sqlite
except ImportError:  # pragma: no cover - exercised by forcing the fallback in a test
    _adbc = _adbc_sqlite = None

BATCH_ROWS = 1 << 16
DatabaseErrors: tuple[type[BaseException], ...] = (sqlite3.Error,) + ((_adbc.Error,) if _adbc else ())


def table_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def column_names(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def read_only_uri(path: Path) -> str:
    return f"file:{urllib.parse.quote(str(Path(path).resolve()))}?mode=ro&immutable=1"


class BulkReader:
    """Runs SELECTs against one export; each result streams as Arrow record batches.

    Several results may stream at once (the breakdown reads ranges and runtime
    calls side by side); each has its own statement.
    """

    def __init__(self, path: Path, use_adbc: bool = True) -> None:
        self.uri = read_only_uri(path)
        self._db = self._conn = self._sqlite = None
        if use_adbc and _adbc is not None:
            self._db = _adbc_sqlite.connect(self.uri)
            self._conn = _adbc.AdbcConnection(self._db)
        else:
            self._sqlite = sqlite3.connect(self.uri, uri=True)
            self._sqlite.text_factory = bytes  # text as the driver gives it: the reader checks it is UTF-8

    def batches(self, sql: str) -> Iterator[pa.RecordBatch]:
        """The result in record batches of up to 64K rows, so no full Arrow copy is ever held."""
        if self._db is not None:
            stmt = _adbc.AdbcStatement(self._conn)
            reader = None
            try:
                stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                stmt.set_sql_query(sql)
                handle, _ = stmt.execute_query()
                reader = pa.RecordBatchReader.from_stream(handle)
                yield from reader
            finally:
                if reader is not None:
                    reader.close()
                stmt.close()
            return
        if self._sqlite is None:
            raise sqlite3.ProgrammingError("reader closed")
        cur = self._sqlite.cursor()
        cur.execute(sql)
        names = [d[0] for d in cur.description]
        while rows := cur.fetchmany(BATCH_ROWS):
            yield pa.record_batch([_array(c) for c in zip(*rows, strict=True)], names=names)

    def close(self) -> None:
        """Idempotent: a stream abandoned half-way closes its reader again when it is collected."""
        for handle in (self._conn, self._db, self._sqlite):
            if handle is not None:
                handle.close()
        self._conn = self._db = self._sqlite = None


def _array(values: tuple) -> pa.Array:
    """A column read through sqlite3 as Arrow; values of mixed types become text, as ADBC's do."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


class NotIntegers(ValueError):
    """A selected column holds values that are no integers (text, reals) somewhere: SQLite keeps
    whatever a row was given, and the reader must not guess a time from it."""

    def __init__(self, column: int) -> None:
        super().__init__(f"column {column} is not all integers")
        self.column = column


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def read_ahead(produce: Callable[[], Iterator], depth: int = 2) -> Iterator:
    """The items ``produce()`` yields, made by a thread of their own up to ``depth`` ahead.

    The driver decodes rows in C without the GIL, so on two cores the next batch
    is read while this thread attributes the last one. An exception in the
    producer is raised here; closing this generator stops the producer (which
    then closes what it opened) and waits for it.
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in produce():
                if not put(item):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it
            put(_Raised(exc))
            return
        put(end)

    worker = threading.Thread(target=run, name="embprof-read-ahead", daemon=True)
    worker.start()
    try:
        while (item := ready.get()) is not end:
            if isinstance(item, _Raised):
                raise item.exc
            yield item
    finally:
        stop.set()
        worker.join()


def int_column(batch: pa.RecordBatch, i: int) -> np.ndarray:
    """Column ``i`` of a batch as int64 numpy (zero-copy for the driver's int64 columns);
    :class:`NotIntegers` where the batch holds another type there."""
    column = batch.column(i)
    if not pa.types.is_integer(column.type):
        raise NotIntegers(i)
    return to_ints(column)


class NotText(ValueError):
    """A string of the export is not UTF-8 text (``where`` says which, ``raw`` holds its bytes)."""

    def __init__(self, where: str, raw: bytes) -> None:
        super().__init__(f"{where} holds {raw[:60]!r}, not UTF-8 text")


def read_strings_by_id(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """``StringIds`` values for the given ids only (exports hold many more than a trace uses);
    :class:`NotText` for a value that is not UTF-8."""
    out: dict[int, str] = {}
    for lo in range(0, len(ids), 50_000):
        inlist = ",".join(str(int(i)) for i in ids[lo : lo + 50_000])
        rows = conn.execute(f"SELECT id, CAST(value AS BLOB) FROM StringIds WHERE id IN ({inlist})")
        for key, raw in rows:
            try:
                out[key] = bytes(raw or b"").decode("utf-8")
            except UnicodeDecodeError:
                raise NotText(f"table StringIds: id {key}", bytes(raw)) from None
    return out
