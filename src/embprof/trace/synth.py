"""Write Nsight Systems SQLite exports in the real schema from numpy arrays.

The benchmark and the property tests generate traces this way, so they
exercise the same reader as real exports. The table definitions are those
of Nsight Systems 2026.2 (export schema 3.25.0), column for column,
including ``greenContextId`` before ``streamId``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
        "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
        "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
        "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, "
        "localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, "
        "sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, "
        "graphId INTEGER, clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER, "
        "maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER, "
        "tensorSizeMinusOneElements TEXT NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
        "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, "
        "srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, "
        "graphNodeId INTEGER, virtualAddress INTEGER, copyCount INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
        "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
        "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
        "floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT"
    ),
}

_INSERT = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "(start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName, "
        "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
        "localMemoryPerThread, localMemoryTotal, gridId, graphNodeId, tensorSizeMinusOneElements) "
        "VALUES (?, ?, 0, 1, ?, ?, ?, ?, ?, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, ?, ?, '')",
        ("start", "end", "streamId", "correlationId", "globalPid", "nameId", "nameId", "gridId", "graphNodeId"),
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "(start, end, eventClass, globalTid, correlationId, nameId, returnValue) VALUES (?, ?, 1, ?, ?, ?, 0)",
        ("start", "end", "globalTid", "correlationId", "nameId"),
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "(start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes, copyKind) "
        "VALUES (?, ?, 0, 1, ?, ?, ?, 4096, ?)",
        ("start", "end", "streamId", "correlationId", "globalPid", "copyKind"),
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "(start, end, deviceId, contextId, streamId, correlationId, globalPid, value, bytes) "
        "VALUES (?, ?, 0, 1, ?, ?, ?, 0, 4096)",
        ("start", "end", "streamId", "correlationId", "globalPid"),
    ),
    "NVTX_EVENTS": (
        "(start, end, eventType, text, globalTid, textId, domainId) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("start", "end", "eventType", "text", "globalTid", "textId", "domainId"),
    ),
}


def _column(table: Mapping[str, object], name: str, n: int) -> list:
    col = table.get(name)
    if col is None:
        return [None] * n
    if isinstance(col, np.ndarray):
        return col.tolist()
    return list(col)


def write_export(
    path: Path,
    strings: Mapping[int, str],
    tables: Mapping[str, Mapping[str, object]],
    more: Iterable[Mapping[str, Mapping[str, object]]] = (),
) -> None:
    """Create ``path`` with StringIds and the given tables (table -> column -> values).

    Columns not given are NULL where the schema allows; absent tables are not created,
    as in a real export where nothing of that kind was traced. NVTX ``end`` may hold
    ``None`` (a range never closed); ``graphNodeId``/``textId``/``text`` may be None.
    ``more`` yields further rows of the same tables, appended in order, so that an
    export of many millions of rows is written without holding all of them at once.
    """
    path = Path(path)
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute(f"CREATE TABLE StringIds ({SCHEMA['StringIds']})")
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", sorted(strings.items()))
        for name in tables:
            conn.execute(f"CREATE TABLE {name} ({SCHEMA[name]})")
        _insert(conn, tables)
        for chunk in more:
            _insert(conn, chunk)
        conn.commit()
    finally:
        conn.close()


def _insert(conn: sqlite3.Connection, tables: Mapping[str, Mapping[str, object]]) -> None:
    for name, cols in tables.items():
        sql, fields = _INSERT[name]
        n = len(next(iter(cols.values())))
        columns = [_column(cols, f, n) for f in fields]
        conn.executemany(f"INSERT INTO {name} {sql}", zip(*columns, strict=True))
