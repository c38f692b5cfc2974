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
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from embprof.atomic import atomic_path

from .columns import (
    BulkReader,
    DatabaseErrors,
    NotIntegers,
    column_names,
    read_only_uri,
    read_strings_by_id,
    stack_batches,
    table_names,
)
from .errors import TraceError
from .model import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, Ranges, Trace, Work
from .names import MEMCPY_KINDS, MEMSET_NAME, memcpy_name

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
ANALYSIS = "ANALYSIS_DETAILS"  # the session: event times run from 0 to its duration
NVTX_PUSH_POP = 59
PID_MASK = np.int64(-(1 << 24))  # 0xFFFF_FFFF_FF00_0000: globalTid -> globalPid


def _require_columns(conn: sqlite3.Connection, path: Path, table: str, needed: tuple[str, ...]) -> set[str]:
    have = column_names(conn, table)
    missing = [c for c in needed if c not in have]
    if missing:
        raise TraceError(path, f"table {table} lacks column(s) {', '.join(missing)}")
    return have


def _integers(conn: sqlite3.Connection, path: Path, table: str, columns: tuple[str, ...], read) -> list[np.ndarray]:
    """``read()``'s integer columns, or one line naming the column of ``table`` that holds another value."""
    try:
        return read()
    except NotIntegers as exc:
        column = columns[exc.column]
        odd = conn.execute(
            f'SELECT "{column}" FROM {table} WHERE typeof("{column}") NOT IN (\'integer\', \'null\') LIMIT 1'
        ).fetchone()
        shown = repr(odd[0]) if odd else "a value"
        raise TraceError(path, f"table {table}: column {column} holds {shown}, not an integer") from None


def _read_work_table(conn, bulk: BulkReader, path, table, name_col: str | None) -> list[np.ndarray]:
    cols = ("start", "end", "correlationId", "globalPid") + ((name_col,) if name_col else ())
    _require_columns(conn, path, table, cols)
    sql = "SELECT " + ", ".join(f'coalesce("{c}", -1)' for c in cols) + f" FROM {table}"
    return _integers(conn, path, table, cols, lambda: bulk.ints(sql, len(cols)))


def capture_end(conn: sqlite3.Connection) -> int | None:
    """When the capture ended (ns since the session started), where the export says."""
    if ANALYSIS not in table_names(conn) or "duration" not in column_names(conn, ANALYSIS):
        return None
    (duration,) = conn.execute(f"SELECT max(duration) FROM {ANALYSIS}").fetchone()
    return duration if isinstance(duration, int) else None


def check_intervals(path: Path, what: str, start: np.ndarray, end: np.ndarray, until: int | None) -> None:
    """Every interval ends after it starts and (given ``until``) by the end of the capture: a range
    that never ends would silently swallow the work after it, a negative one the busy time."""
    backwards = int(np.count_nonzero(end < start))
    if backwards:
        raise TraceError(path, f"{backwards} {what} end before they start (a negative duration)")
    if until is not None:
        late = int(np.count_nonzero(end > until))
        if late:
            raise TraceError(path, f"{late} {what} end after the capture did ({until} ns): they never ended")


def _read_ranges(conn: sqlite3.Connection, bulk: BulkReader, path: Path) -> Ranges:
    have = _require_columns(conn, path, NVTX, ("start", "end", "eventType", "globalTid"))
    where = f"eventType = {NVTX_PUSH_POP}"
    if "domainId" in have:
        where += " AND coalesce(domainId, 0) = 0"
    id_expr = "coalesce(textId, -1)" if "textId" in have else "-1"
    text_expr = "coalesce(text, '')" if "text" in have else "''"
    # Names: inline text dictionary-encoded batch by batch into one code space.
    index: dict[str, int] = {}
    code_parts: list[np.ndarray] = []

    def numeric(batches):
        for batch in batches:
            encoded = pc.dictionary_encode(batch.column(4).cast(pa.string()))
            local = np.array([index.setdefault(v, len(index)) for v in encoded.dictionary.to_pylist()], dtype=np.int32)
            code_parts.append(local[np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]
                              if len(local) else np.empty(0, np.int32))
            yield batch.columns[:4]

    sql = (f"SELECT coalesce(start, -1), coalesce(end, -1), coalesce(globalTid, 0), {id_expr}, "
           f"CAST({text_expr} AS TEXT) FROM {NVTX} WHERE {where}")
    start, end, tid, text_id = _integers(
        conn, path, NVTX, ("start", "end", "globalTid", "textId"),
        lambda: stack_batches(numeric(bulk.batches(sql)), 4),
    )
    codes = np.concatenate(code_parts) if code_parts else np.empty(0, np.int32)
    code_parts.clear()
    names = list(index)
    unclosed = int(np.count_nonzero(end < 0))
    if unclosed:
        raise TraceError(path, f"{unclosed} NVTX range(s) never closed (no end time); the capture was cut inside them")
    unstarted = int(np.count_nonzero(start < 0))
    if unstarted:
        raise TraceError(path, f"{unstarted} NVTX range(s) have no start time")
    check_intervals(path, "NVTX range(s)", start, end, capture_end(conn))
    by_id = text_id >= 0
    if by_id.any():
        uniq, inverse = np.unique(text_id[by_id], return_inverse=True)
        values = read_strings_by_id(conn, uniq)
        codes[by_id] = len(names) + inverse.astype(np.int32)
        names += [values.get(int(i), "") for i in uniq]
    return Ranges(thread=tid, start=start, end=end, name=codes, names=names)


def read_sqlite(path: Path, use_adbc: bool = True, layout: str | None = None) -> Trace:
    """Read the columns the attribution needs from one export.

    With ``layout`` the ranges are read and turned into their attribution
    context on a second thread while this one reads and joins the work: the
    SQLite driver and numpy release the GIL, so the two overlap on two cores.
    """
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True)
        bulk = BulkReader(path, use_adbc=use_adbc)
    except DatabaseErrors as exc:
        raise TraceError(path, f"cannot open as SQLite: {exc}") from None
    try:
        _check_tables(conn, path)
        if layout is None:
            work, dropped = _read_work(conn, bulk, path)
            return Trace(path=path, ranges=_read_ranges(conn, bulk, path), work=work, dropped_unlaunched=dropped)
        with ThreadPoolExecutor(max_workers=1) as pool:
            context = pool.submit(_range_context_from, path, use_adbc, layout)
            work, dropped = _read_work(conn, bulk, path)
            return Trace(path=path, ranges=None, work=work, dropped_unlaunched=dropped, context=context.result())
    except DatabaseErrors as exc:
        raise _unreadable(path, exc) from None
    except OverflowError as exc:
        raise TraceError(path, f"its ranges' times cannot be nested ({exc})") from None
    finally:
        bulk.close()
        conn.close()


def _unreadable(path: Path, exc: BaseException) -> TraceError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return TraceError(path, f"unreadable SQLite export ({detail}); truncated or not an Nsight Systems export?")


def _range_context_from(path: Path, use_adbc: bool, layout: str):
    from .attribute import range_context

    conn = sqlite3.connect(read_only_uri(path), uri=True)
    bulk = BulkReader(path, use_adbc=use_adbc)
    try:
        return range_context(_read_ranges(conn, bulk, path), layout)
    finally:
        bulk.close()
        conn.close()


def _check_tables(conn: sqlite3.Connection, path: Path) -> None:
    tables = table_names(conn)
    if KERNEL not in tables:
        raise TraceError(path, f"no {KERNEL} table: the export holds no GPU kernels (profile with --trace=cuda)")
    if RUNTIME not in tables:
        raise TraceError(path, f"no {RUNTIME} table: kernels cannot be joined to the calls that launched them")
    if NVTX not in tables:
        raise TraceError(path, f"no {NVTX} table: no ranges were traced (profile with --trace=cuda,nvtx)")


def _read_work(conn: sqlite3.Connection, bulk: BulkReader, path: Path) -> tuple[Work, int]:
    """Kernels, copies and memsets joined to their launching runtime call; and how many had none."""
    tables = table_names(conn)
    k_start, k_end, k_corr, k_pid, k_name = _read_work_table(conn, bulk, path, KERNEL, "shortName")
    k_code, uniq_names = pd.factorize(k_name)
    strings = read_strings_by_id(conn, uniq_names)
    work_names = [strings.get(int(i), f"kernel#{int(i)}") for i in uniq_names]
    parts = [(k_start, k_end, k_corr, k_pid, k_code.astype(np.int32), np.full(len(k_start), KIND_KERNEL, np.int8))]

    if MEMCPY in tables:
        m_start, m_end, m_corr, m_pid, m_kind = _read_work_table(conn, bulk, path, MEMCPY, "copyKind")
        m_code, kinds = pd.factorize(m_kind)
        parts.append((m_start, m_end, m_corr, m_pid, (m_code + len(work_names)).astype(np.int32), np.full(len(m_start), KIND_MEMCPY, np.int8)))
        work_names += [memcpy_name(MEMCPY_KINDS.get(int(k), f"kind{int(k)}")) for k in kinds]
    if MEMSET in tables:
        s_start, s_end, s_corr, s_pid = _read_work_table(conn, bulk, path, MEMSET, None)
        parts.append((s_start, s_end, s_corr, s_pid, np.full(len(s_start), len(work_names), np.int32), np.full(len(s_start), KIND_MEMSET, np.int8)))
        work_names.append(MEMSET_NAME)
    start, end, corr, pid, code, kind = (np.concatenate(c) if len(parts) > 1 else c[0] for c in zip(*parts, strict=True))
    del parts, k_start, k_end, k_corr, k_pid, k_name, k_code
    unstarted = int(np.count_nonzero(start < 0))
    if unstarted:
        raise TraceError(path, f"{unstarted} kernel/copy record(s) have no start time")
    check_intervals(path, "kernel/copy record(s)", start, end, None)

    _require_columns(conn, path, RUNTIME, ("start", "globalTid", "correlationId"))
    sql = f"SELECT correlationId, coalesce(globalTid, 0), coalesce(start, -1) FROM {RUNTIME} WHERE correlationId IS NOT NULL"
    r_corr, r_tid, r_start = _integers(
        conn, path, RUNTIME, ("correlationId", "globalTid", "start"), lambda: bulk.ints(sql, 3)
    )
    launch_idx = join_launches(pid, corr, r_tid & PID_MASK, r_corr)
    del pid, corr, r_corr
    found = launch_idx >= 0
    dropped = int(len(found) - np.count_nonzero(found))
    if not found.any():
        raise TraceError(path, f"none of the {len(found)} kernels/copies has a runtime call with its correlationId")
    every = dropped == 0
    li = launch_idx if every else launch_idx[found]
    work = Work(
        thread=r_tid[li], launch=r_start[li],
        start=start if every else start[found], end=end if every else end[found],
        name=code if every else code[found], kind=kind if every else kind[found], names=work_names,
    )
    return work, dropped


def join_launches(w_pid: np.ndarray, w_corr: np.ndarray, r_pid: np.ndarray, r_corr: np.ndarray) -> np.ndarray:
    """Index of the runtime row with the same (process, correlationId) per work item, -1 when none.

    Many work items may share one launch (CUDA graph nodes carry the graph
    launch's correlation id).
    """
    if len(r_pid) == 0:
        return np.full(len(w_pid), -1, dtype=np.int64)
    if (r_pid == r_pid[0]).all() and (w_pid == r_pid[0]).all():
        r_key, w_key = r_corr, w_corr  # one process, the usual case: the id alone is the key
    else:
        codes, _ = pd.factorize(np.concatenate([r_pid, w_pid]))
        r_key = codes[: len(r_pid)].astype(np.int64) * (np.int64(1) << 33) + r_corr
        w_key = codes[len(r_pid):].astype(np.int64) * (np.int64(1) << 33) + w_corr
        del codes
    order = np.argsort(r_key, kind="stable")  # ids rise with time: nearly sorted, cheap
    keys = r_key[order]
    pos = np.minimum(np.searchsorted(keys, w_key), len(keys) - 1)  # first of repeated ids
    hit = (keys[pos] == w_key) & (w_corr >= 0)
    return np.where(hit, order[pos], -1)


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


def read_nsys_rep(path: Path, nsys: str | None, layout: str | None = None) -> Trace:
    """Export a ``.nsys-rep`` to SQLite in a temporary directory, then read it."""
    with tempfile.TemporaryDirectory(prefix="embprof-export-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        export_sqlite(path, out, nsys)
        trace = read_sqlite(out, layout=layout)
        trace.path = path
        return trace
