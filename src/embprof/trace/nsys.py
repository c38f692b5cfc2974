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
from pathlib import Path

import numpy as np

from .columns import column_names, read_int_columns, read_strings_by_id, table_names
from .errors import TraceError
from .model import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, Ranges, Trace, Work
from .names import MEMCPY_KINDS, MEMSET_NAME, memcpy_name

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
NVTX_PUSH_POP = 59
PID_MASK = np.int64(-(1 << 24))  # 0xFFFF_FFFF_FF00_0000: globalTid -> globalPid


def _require_columns(conn: sqlite3.Connection, path: Path, table: str, needed: tuple[str, ...]) -> set[str]:
    have = column_names(conn, table)
    missing = [c for c in needed if c not in have]
    if missing:
        raise TraceError(path, f"table {table} lacks column(s) {', '.join(missing)}")
    return have


def _read_work_table(conn, path, table, name_col: str | None):
    cols = ("start", "end", "correlationId", "globalPid") + ((name_col,) if name_col else ())
    _require_columns(conn, path, table, cols)
    sel = ", ".join(f'coalesce("{c}", -1)' for c in cols)
    return read_int_columns(conn, f"SELECT {sel} FROM {table}", len(cols))


def _read_ranges(conn: sqlite3.Connection, path: Path) -> Ranges:
    have = _require_columns(conn, path, NVTX, ("start", "end", "eventType", "globalTid"))
    where = f"eventType = {NVTX_PUSH_POP}"
    if "domainId" in have:
        where += " AND coalesce(domainId, 0) = 0"
    id_expr = "coalesce(textId, -1)" if "textId" in have else "-1"
    start, end, tid, text_id = read_int_columns(
        conn,
        f"SELECT start, coalesce(end, -1), coalesce(globalTid, 0), {id_expr} FROM {NVTX} "
        f"WHERE {where} ORDER BY rowid",
        4,
    )
    unclosed = int(np.count_nonzero(end < 0))
    if unclosed:
        raise TraceError(path, f"{unclosed} NVTX range(s) never closed (no end time); the capture was cut inside them")
    codes = np.full(len(start), -1, dtype=np.int64)
    names: list[str] = []
    by_id = text_id >= 0
    if by_id.any():
        uniq, inverse = np.unique(text_id[by_id], return_inverse=True)
        values = read_strings_by_id(conn, uniq)
        names = [values.get(int(i), "") for i in uniq]
        codes[by_id] = inverse
    if (~by_id).any() and "text" in have:
        # Inline (unregistered) strings: factorize as they stream, keeping one copy per distinct name.
        index: dict[str | None, int] = {}
        base = len(names)
        inline = np.fromiter(
            (index.setdefault(t, len(index)) for (t,) in conn.execute(
                f"SELECT text FROM {NVTX} WHERE {where} AND {'textId IS NULL' if 'textId' in have else '1'} ORDER BY rowid"
            )),
            dtype=np.int64,
        )
        codes[~by_id] = inline + base
        names.extend("" if t is None else t for t in index)
    elif (~by_id).any():
        names.append("")
        codes[~by_id] = len(names) - 1
    return Ranges(thread=tid, start=start, end=end, name=codes, names=names)


def read_sqlite(path: Path) -> Trace:
    """Read the columns the attribution needs from one export."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise TraceError(path, f"cannot open as SQLite: {exc}") from None
    try:
        return _read_sqlite(conn, path)
    except sqlite3.DatabaseError as exc:
        raise TraceError(path, f"unreadable SQLite export ({exc}); truncated or not an Nsight Systems export?") from None
    finally:
        conn.close()


def _read_sqlite(conn: sqlite3.Connection, path: Path) -> Trace:
    tables = table_names(conn)
    if KERNEL not in tables:
        raise TraceError(path, f"no {KERNEL} table: the export holds no GPU kernels (profile with --trace=cuda)")
    if RUNTIME not in tables:
        raise TraceError(path, f"no {RUNTIME} table: kernels cannot be joined to the calls that launched them")
    if NVTX not in tables:
        raise TraceError(path, f"no {NVTX} table: no ranges were traced (profile with --trace=cuda,nvtx)")

    k_start, k_end, k_corr, k_pid, k_name = _read_work_table(conn, path, KERNEL, "shortName")
    uniq_names, k_code = np.unique(k_name, return_inverse=True)
    strings = read_strings_by_id(conn, uniq_names)
    work_names = [strings.get(int(i), f"kernel#{int(i)}") for i in uniq_names]
    parts = [(k_start, k_end, k_corr, k_pid, k_code, np.full(len(k_start), KIND_KERNEL, np.int8))]

    if MEMCPY in tables:
        m_start, m_end, m_corr, m_pid, m_kind = _read_work_table(conn, path, MEMCPY, "copyKind")
        kinds, m_code = np.unique(m_kind, return_inverse=True)
        parts.append((m_start, m_end, m_corr, m_pid, m_code + len(work_names), np.full(len(m_start), KIND_MEMCPY, np.int8)))
        work_names += [memcpy_name(MEMCPY_KINDS.get(int(k), f"kind{int(k)}")) for k in kinds]
    if MEMSET in tables:
        s_start, s_end, s_corr, s_pid = _read_work_table(conn, path, MEMSET, None)
        parts.append((s_start, s_end, s_corr, s_pid, np.full(len(s_start), len(work_names)), np.full(len(s_start), KIND_MEMSET, np.int8)))
        work_names.append(MEMSET_NAME)
    start, end, corr, pid, code, kind = (np.concatenate(c) for c in zip(*parts, strict=True))

    _require_columns(conn, path, RUNTIME, ("start", "globalTid", "correlationId"))
    r_corr, r_tid, r_start = read_int_columns(
        conn, f"SELECT correlationId, coalesce(globalTid, 0), start FROM {RUNTIME} WHERE correlationId IS NOT NULL", 3
    )
    launch_idx = join_launches(pid, corr, r_tid & PID_MASK, r_corr)
    found = launch_idx >= 0
    dropped = int(len(found) - np.count_nonzero(found))
    if not found.any():
        raise TraceError(path, f"none of the {len(found)} kernels/copies has a runtime call with its correlationId")
    li = launch_idx[found]
    work = Work(
        thread=r_tid[li], launch=r_start[li], start=start[found], end=end[found],
        name=code[found], kind=kind[found], names=work_names,
    )
    return Trace(path=path, ranges=_read_ranges(conn, path), work=work, dropped_unlaunched=dropped)


def join_launches(w_pid: np.ndarray, w_corr: np.ndarray, r_pid: np.ndarray, r_corr: np.ndarray) -> np.ndarray:
    """Index of the runtime row with the same (process, correlationId) per work item, -1 when none.

    Many work items may share one launch (CUDA graph nodes carry the graph
    launch's correlation id).
    """
    if len(r_pid) == 0:
        return np.full(len(w_pid), -1, dtype=np.int64)
    _, codes = np.unique(np.concatenate([r_pid, w_pid]), return_inverse=True)
    r_key = codes[: len(r_pid)] * (np.int64(1) << 33) + r_corr
    w_key = codes[len(r_pid):] * (np.int64(1) << 33) + w_corr
    order = np.argsort(r_key, kind="stable")
    sorted_keys = r_key[order]
    pos = np.searchsorted(sorted_keys, w_key)
    pos_clipped = np.minimum(pos, len(sorted_keys) - 1)
    hit = (sorted_keys[pos_clipped] == w_key) & (w_corr >= 0)
    return np.where(hit, order[pos_clipped], -1)


def find_nsys(explicit: str | None) -> str | None:
    """nsys from ``--nsys``, else ``$NSYS``, else ``PATH``."""
    for candidate in (explicit, os.environ.get("NSYS")):
        if candidate:
            return candidate if (shutil.which(candidate) or Path(candidate).is_file()) else None
    return shutil.which("nsys")


def read_nsys_rep(path: Path, nsys: str | None) -> Trace:
    """Export a ``.nsys-rep`` to SQLite in a temporary directory, then read it."""
    exe = find_nsys(nsys)
    if exe is None:
        raise TraceError(path, "a .nsys-rep needs nsys to export it, and none was found (pass --nsys PATH, set NSYS, or put nsys on PATH)")
    with tempfile.TemporaryDirectory(prefix="embprof-export-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        cmd = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise TraceError(path, f"cannot run {exe}: {exc.strerror}") from None
        if proc.returncode != 0 or not out.is_file():
            last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
            raise TraceError(path, f"nsys export failed (exit {proc.returncode}): {last}")
        trace = read_sqlite(out)
        trace.path = path
        return trace

