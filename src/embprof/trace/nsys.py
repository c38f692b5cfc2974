"""Nsight Systems SQLite exports (any version since 2023) and ``.nsys-rep`` files.

Columns are picked by name (2026.x inserted ``greenContextId`` before
``streamId``); tables are created lazily, so each is checked before it is
read. A kernel is joined to the runtime call that launched it by
``correlationId`` within one process (``globalPid`` = the call's
``globalTid`` with the thread bits cleared). Ranges: push/pop ranges
(eventType 59) of NVTX's default domain (``domainId`` 0); start/end ranges
(60) may cross threads and are not part of a thread's range stack.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from embprof.arrow import cast, ints_after, starts_with, string_array, take
from embprof.atomic import atomic_path
from embprof.errors import TraceError

from .columns import (
    BulkReader,
    DatabaseErrors,
    NotIntegers,
    NotText,
    column_names,
    int_column,
    read_ahead,
    read_only_uri,
    read_strings_by_id,
    table_names,
)
from .model import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, TIME_GPU, CallRows, RangeRows, WorkRows
from .names import MEMCPY_KINDS, MEMSET_NAME, memcpy_name, memory_kind_code

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"  # every name the other tables hold by id
ANALYSIS = "ANALYSIS_DETAILS"  # the session: event times run from 0 to its duration
NVTX_PUSH_POP = 59
PID_MASK = np.int64(-(1 << 24))  # 0xFFFF_FFFF_FF00_0000: globalTid -> globalPid
STRING_REF = "\x01"  # starts a range name that is a StringIds id (never the start of an NVTX text)
WORK_TABLES = ((KERNEL, KIND_KERNEL, "shortName"), (MEMCPY, KIND_MEMCPY, "copyKind"), (MEMSET, KIND_MEMSET, None))
# Per work table, what it moved: bytes, then source and destination memory kind (a memset has a
# destination only): a column, or a constant for tables without one (kernels move no bytes here).
WORK_MEMORY = {
    KERNEL: (),  # kernels move no bytes the trace counts: nothing more to read
    MEMCPY: (("bytes", 0), ("srcKind", 7), ("dstKind", 7)),
    MEMSET: (("bytes", 0), ("srcKind", None), ("memKind", 7)),
}
# The integer columns each stream selects, in the SELECT's order (its errors name them).
RANGE_COLUMNS = ("start", "end", "globalTid")
CALL_COLUMNS = ("correlationId", "globalTid", "start")
WORK_COLUMNS = ("start", "end", "correlationId", "globalPid")
# What a stream's intervals must not be, in the order they are told (interval_faults' counts):
# never ended, never started, of a negative duration, ending after the capture.
RANGE_FAULTS = (
    "{n} NVTX range(s) never closed (no end time); the capture was cut inside them",
    "{n} NVTX range(s) have no start time",
    "{n} NVTX range(s) end before they start (a negative duration)",
    "{n} NVTX range(s) end after the capture did ({until} ns): they never ended",
)
WORK_FAULTS = (
    None,  # a missing end reads as -1: a negative duration
    "{n} kernel/copy record(s) have no start time",
    "{n} kernel/copy record(s) end before they start (a negative duration)",
    None,  # device work may be flushed after the capture's end
)


def _require_columns(conn: sqlite3.Connection, path: Path, table: str, needed: tuple[str, ...]) -> set[str]:
    have = column_names(conn, table)
    missing = [c for c in needed if c not in have]
    if missing:
        raise TraceError(path, f"table {table} lacks column(s) {', '.join(missing)}")
    return have


def capture_end(conn: sqlite3.Connection) -> int | None:
    """When the capture ended (ns since the session started), where the export says."""
    if ANALYSIS not in table_names(conn) or "duration" not in column_names(conn, ANALYSIS):
        return None
    (duration,) = conn.execute(f"SELECT max(duration) FROM {ANALYSIS}").fetchone()
    return duration if isinstance(duration, int) else None


def interval_faults(start: np.ndarray, end: np.ndarray, until: int | None) -> np.ndarray:
    """How many intervals never ended (-1), never started, end before they start and (given
    ``until``) end after it: a range that never ends would silently swallow the work after it,
    a negative one the busy time."""
    return np.array([
        np.count_nonzero(end < 0), np.count_nonzero(start < 0), np.count_nonzero(end < start),
        0 if until is None else np.count_nonzero(end > until),
    ])


def _faulty(start: np.ndarray, end: np.ndarray, until: int | None) -> bool:
    """Whether a chunk has any of :func:`interval_faults`' faults (the fast test every chunk takes)."""
    if len(start) == 0:
        return False
    return bool(start.min() < 0 or (end < start).any() or (until is not None and end.max() > until))


class NsysSource:
    """An Nsight Systems SQLite export as streams of chunks (:class:`~embprof.trace.model.TraceSource`).

    Tables and columns are checked when it opens; each stream is one SELECT read
    batch by batch, so no table is ever held whole.
    """

    time_source = TIME_GPU

    def __init__(self, path: Path, use_adbc: bool = True, shown_as: Path | None = None) -> None:
        self.path = shown_as or path  # what errors and the sidecar name (a .nsys-rep: the report)
        self._file = path
        self._use_adbc = use_adbc
        try:
            self._conn = sqlite3.connect(read_only_uri(path), uri=True)
        except DatabaseErrors as exc:
            raise TraceError(path, f"cannot open as SQLite: {exc}") from None
        try:
            self._queries()
        except DatabaseErrors as exc:
            self.close()
            raise _unreadable(self.path, exc) from None
        except TraceError:
            self.close()
            raise
        self._strings: dict[int, str] = {}

    def _queries(self) -> None:
        conn, path = self._conn, self._file
        _check_tables(conn, path)
        tables = table_names(conn)
        self._capture_end = capture_end(conn)
        have = _require_columns(conn, path, NVTX, ("start", "end", "eventType", "globalTid"))
        col = _reader(conn, NVTX)
        where = f"eventType = {NVTX_PUSH_POP}"
        if "domainId" in have:
            where += f" AND {col('domainId', 0)} = 0"
        # One name column: the inline text, or STRING_REF + the id of a registered string
        # (which wins where a row has both), fetched from StringIds once per distinct id.
        text = col("text", "''") if "text" in have else "''"
        name = f"CASE WHEN textId >= 0 THEN char({ord(STRING_REF)}) || textId ELSE {text} END" if "textId" in have else text
        self._ranges_sql = f"SELECT {col('start')}, {col('end')}, {col('globalTid', 0)}, {name} FROM {NVTX} WHERE {where}"
        _require_columns(conn, path, RUNTIME, ("start", "globalTid", "correlationId"))
        col = _reader(conn, RUNTIME)
        self._calls_sql = (f"SELECT correlationId, {col('globalTid', 0)}, {col('start')} FROM {RUNTIME} "
                           "WHERE correlationId IS NOT NULL")
        self._work_sql = []
        for table, kind, name_col in WORK_TABLES:
            if table not in tables:
                continue
            cols = ("start", "end", "correlationId", "globalPid") + ((name_col,) if name_col else ())
            have = _require_columns(conn, path, table, cols)
            col = _reader(conn, table)
            select = ", ".join(col(c) for c in cols) + ("" if name_col else ", 0")
            # bytes and memory kinds: a column where the table has it (older exports may lack the kinds)
            moved = [(c, default) for c, default in WORK_MEMORY[table]]
            select += "".join(
                f", {col(c, default)}" if default is not None and c in have else f", {default if default is not None else 0}"
                for c, default in moved
            )
            names = WORK_COLUMNS + (name_col or "name",) + tuple(c for c, _ in moved)
            self._work_sql.append((f"SELECT {select} FROM {table}", kind, table, names))

    def _batches(self, sql: str) -> Iterator[pa.RecordBatch]:
        """One SELECT's batches, read a little ahead by a thread of its own; unreadable pages (a
        truncated file) become one-line errors."""
        try:
            yield from read_ahead(lambda: self._read(sql))
        except DatabaseErrors as exc:
            raise _unreadable(self.path, exc) from None

    def _read(self, sql: str) -> Iterator[pa.RecordBatch]:
        bulk = BulkReader(self._file, use_adbc=self._use_adbc)
        try:
            yield from bulk.batches(sql)
        finally:
            bulk.close()

    @contextmanager
    def _integer_columns(self, table: str, columns: tuple[str, ...]) -> Iterator[None]:
        """:class:`NotIntegers` of a stream's batch as one line naming the table's column and a value
        it holds (SQLite keeps whatever a row was given)."""
        try:
            yield
        except NotIntegers as exc:
            column = columns[exc.column]
            odd = self._conn.execute(
                f'SELECT "{column}" FROM {table} WHERE typeof("{column}") NOT IN (\'integer\', \'null\') LIMIT 1'
            ).fetchone()
            shown = repr(odd[0]) if odd else "a value"
            raise TraceError(self.path, f"table {table}: column {column} holds {shown}, not an integer") from None

    def _refuse(self, intervals: Iterable[tuple[np.ndarray, np.ndarray]], messages: tuple[str | None, ...],
                until: int | None) -> TraceError:
        """The first fault of a stream's intervals, counted over the whole stream (read again: only
        a faulty export comes here)."""
        counts = sum((interval_faults(start, end, until) for start, end in intervals), np.zeros(4, np.int64))
        for n, message in zip(counts.tolist(), messages, strict=True):
            if n and message is not None:
                return TraceError(self.path, message.format(n=n, until=until))
        raise AssertionError("a faulty chunk without a fault")  # pragma: no cover - _faulty and interval_faults agree

    def _range_intervals(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        with self._integer_columns(NVTX, RANGE_COLUMNS):
            for batch in self._batches(self._ranges_sql):
                yield int_column(batch, 0), int_column(batch, 1)

    def ranges(self) -> Iterator[RangeRows]:
        with self._integer_columns(NVTX, RANGE_COLUMNS):
            yield from self._ranges()

    def _ranges(self) -> Iterator[RangeRows]:
        for batch in self._batches(self._ranges_sql):
            start, end = int_column(batch, 0), int_column(batch, 1)
            if _faulty(start, end, self._capture_end):
                raise self._refuse(self._range_intervals(), RANGE_FAULTS, self._capture_end)
            names = self._texts(batch.column(3))
            by_id = np.flatnonzero(starts_with(names, STRING_REF))
            if len(by_id):
                ids = ints_after(take(names, by_id), len(STRING_REF))
                at = np.arange(len(names), dtype=np.int64)
                at[by_id] = len(names) + np.arange(len(by_id))
                names = take(pa.concat_arrays([names, self._strings_of(ids)]), at)
            thread = int_column(batch, 2)
            yield RangeRows(thread=thread, process=thread & PID_MASK, start=start, end=end, names=names)

    def _texts(self, names: pa.Array) -> pa.Array:
        """Range names as Arrow strings, refused in one line where one is not UTF-8 (the driver
        passes a text's bytes through unchecked)."""
        try:
            if names.type != pa.string():
                names = cast(names, pa.string())
            names.validate(full=True)
        except pa.ArrowInvalid:
            raise TraceError(self.path, f"table {NVTX}: a range name is not UTF-8 text") from None
        return names

    def _strings_by_id(self, ids: np.ndarray) -> dict[int, str]:
        try:
            return read_strings_by_id(self._conn, ids)
        except NotText as exc:
            raise TraceError(self.path, str(exc)) from None

    def _strings_of(self, ids: np.ndarray) -> pa.Array:
        """Each id's StringIds value ('' for an unknown id), fetched once per distinct id."""
        uniq, inverse = np.unique(ids, return_inverse=True)
        missing = [i for i in uniq.tolist() if i not in self._strings]
        if missing:
            found = self._strings_by_id(np.array(missing, np.int64))
            self._strings.update((i, found.get(i, "")) for i in missing)
        values = string_array([self._strings[i] for i in uniq.tolist()])
        return take(values, inverse)

    def calls(self) -> Iterator[CallRows]:
        with self._integer_columns(RUNTIME, CALL_COLUMNS):
            for batch in self._batches(self._calls_sql):
                thread = int_column(batch, 1)
                yield CallRows(process=thread & PID_MASK, corr=int_column(batch, 0), thread=thread,
                               start=int_column(batch, 2))

    def work(self) -> list[Iterator[WorkRows]]:
        return [self._work(*query) for query in self._work_sql]

    def _work(self, sql: str, kind: int, table: str, columns: tuple[str, ...]) -> Iterator[WorkRows]:
        with self._integer_columns(table, columns):
            for batch in self._batches(sql):
                start, end = int_column(batch, 0), int_column(batch, 1)
                if _faulty(start, end, None):  # every work table counted: the faults of them all
                    raise self._refuse(self._work_intervals(), WORK_FAULTS, None)
                if kind == KIND_KERNEL:
                    nbytes = mem = np.zeros(batch.num_rows, np.int64)
                else:
                    nbytes = int_column(batch, 5)
                    mem = memory_kind_code(int_column(batch, 6), int_column(batch, 7), memset=kind == KIND_MEMSET)
                yield WorkRows(process=int_column(batch, 3), corr=int_column(batch, 2), start=start, end=end,
                               kind=np.full(batch.num_rows, kind, np.int8), name=int_column(batch, 4),
                               nbytes=nbytes, mem=mem)

    def _work_intervals(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for sql, _, table, columns in self._work_sql:
            with self._integer_columns(table, columns):
                for batch in self._batches(sql):
                    yield int_column(batch, 0), int_column(batch, 1)

    def work_names(self, kind: int, ids: np.ndarray) -> list[str]:
        if kind == KIND_KERNEL:
            strings = self._strings_by_id(ids)
            return [strings.get(int(i), f"kernel#{int(i)}") for i in ids.tolist()]
        if kind == KIND_MEMCPY:
            return [memcpy_name(MEMCPY_KINDS.get(int(k), f"kind{int(k)}")) for k in ids.tolist()]
        return [MEMSET_NAME] * len(ids)

    def close(self) -> None:
        self._conn.close()


def _reader(conn: sqlite3.Connection, table: str):
    """``col(name, default)``: the column as selected, made non-NULL only where the schema lets it be NULL."""
    nullable = {r[1] for r in conn.execute(f"PRAGMA table_info({table})") if not r[3]}

    def col(name: str, default: object = -1) -> str:
        return f'coalesce("{name}", {default})' if name in nullable else f'"{name}"'

    return col


def _unreadable(path: Path, exc: BaseException) -> TraceError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return TraceError(path, f"unreadable SQLite export ({detail}); truncated or not an Nsight Systems export?")


def _check_tables(conn: sqlite3.Connection, path: Path) -> None:
    tables = table_names(conn)
    if KERNEL not in tables:
        raise TraceError(path, f"no {KERNEL} table: the export holds no GPU kernels (profile with --trace=cuda)")
    if RUNTIME not in tables:
        raise TraceError(path, f"no {RUNTIME} table: kernels cannot be joined to the calls that launched them")
    if NVTX not in tables:
        raise TraceError(path, f"no {NVTX} table: no ranges were traced (profile with --trace=cuda,nvtx)")
    if STRINGS not in tables:
        raise TraceError(path, f"no {STRINGS} table: kernel names cannot be read (a damaged export?)")


def find_nsys(explicit: str | None) -> str | None:
    """nsys from ``--nsys``, else ``$NSYS``, else ``PATH``."""
    for candidate in (explicit, os.environ.get("NSYS")):
        if candidate:
            return candidate if (shutil.which(candidate) or Path(candidate).is_file()) else None
    return shutil.which("nsys")


def export_sqlite(report: Path, out: Path, nsys: str | None) -> None:
    """``nsys export --type sqlite`` of ``report`` to ``out``, which appears whole or not at all."""
    if not report.is_file() or report.stat().st_size == 0:
        raise TraceError(report, "missing or empty")
    exe = find_nsys(nsys)
    if exe is None:
        raise TraceError(report, "a .nsys-rep needs nsys to export it, and none was found (pass --nsys PATH, set NSYS, or put nsys on PATH)")
    with atomic_path(out, suffix=".sqlite") as tmp:
        tmp.unlink()  # nsys writes the file itself
        cmd = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(tmp), str(report)]
        print("+", " ".join(cmd), flush=True)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise TraceError(report, f"cannot run {exe}: {exc.strerror}") from None
        if proc.returncode != 0 or not tmp.is_file():
            last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
            raise TraceError(report, f"nsys export failed (exit {proc.returncode}): {last}")


def export_rep(path: Path, nsys: str | None, tmp: str) -> Path:
    """Export a ``.nsys-rep`` to SQLite in the temporary directory ``tmp``; returns the export."""
    out = Path(tmp) / (path.stem + ".sqlite")
    export_sqlite(path, out, nsys)
    return out
