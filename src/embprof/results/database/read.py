"""Reading runs back out of a results database: as rows (to merge them elsewhere) and as a
:class:`~embprof.results.run.Run`, the object a results folder gives (records, configs and
statuses, per-op tables, samples, busy time and bandwidth by label, environment)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pandas as pd
import sqlite_utils

from embprof.errors import ContractError
from embprof.results.busy import BusyTime
from embprof.results.database.rows import STAMPS, ConfigRows, RunRows
from embprof.results.database.schema import (
    BUSY,
    CONFIG_KEY,
    CONFIG_TABLES,
    CONFIGS,
    OP_SAMPLES,
    OPCALLS,
    RECORDS,
    RUNS,
)
from embprof.results.database.store import own_run, reading, run_ids
from embprof.results.opcalls import COLUMNS as OPCALLS_COLUMNS
from embprof.results.opcalls import NUMBER_COLUMNS
from embprof.results.run import Run
from embprof.results.samples import FRAME_COLUMNS as SAMPLE_COLUMNS

BANDWIDTH_COLUMNS = ("backend", "phase", "parent_stages", "op", "bytes_per_iter", "avg_ms_per_iter",
                     "achieved_gbps", "pct_of_peak", "formula")


def run_list(db: sqlite_utils.Database) -> pd.DataFrame:
    """One row per run: its id, whether it is the file's own (its folder's), configs, failed ones, when, what."""
    own = own_run(db)
    frame = pd.DataFrame(list(db.query(f"""
        SELECT r.run_id, count(c.label) AS configs, coalesce(sum(c.status = 'failed'), 0) AS failed,
               r.started_at, r.git_commit, r.device, r.results_dir
        FROM {RUNS.name} r LEFT JOIN {CONFIGS.name} c ON c.run_id = r.run_id
        GROUP BY r.run_id ORDER BY r.started_at, r.run_id""")),
        columns=["run_id", "configs", "failed", "started_at", "git_commit", "device", "results_dir"])
    frame.insert(1, "own", ["yes" if run == own else "" for run in frame["run_id"]])
    return frame


def require_run(db: sqlite_utils.Database, path: Any, run_id: str) -> None:
    known = run_ids(db)
    if run_id not in known:
        raise ContractError(f"{path}: no run {run_id!r} (runs: {', '.join(known) or 'none'})")


def _rows(db: sqlite_utils.Database, table: str, run_id: str) -> list[dict[str, Any]]:
    return list(db.query(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY rowid", [run_id]))


def stored_run(db: sqlite_utils.Database, run_id: str) -> RunRows:
    """The run's rows as a folder's would be read (with each config's stored digest)."""
    [run] = _rows(db, RUNS.name, run_id)
    by_label: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: {t.name: [] for t in CONFIG_TABLES})
    for table in CONFIG_TABLES:
        for row in _rows(db, table.name, run_id):
            by_label[row["label"]][table.name].append({k: v for k, v in row.items() if k not in CONFIG_KEY})
    configs = {}
    for label, tables in by_label.items():
        [config] = tables[CONFIGS.name]
        tables[CONFIGS.name] = [{k: v for k, v in config.items() if k not in STAMPS}]
        configs[label] = ConfigRows(label, tables, config["digest"])
    return RunRows({k: v for k, v in run.items() if k not in ("run_id", "written_at")}, configs)


def run_records(db: sqlite_utils.Database, run_id: str) -> list[dict[str, Any]]:
    """The run's benchmark records as its folder held them, sorted by label."""
    rows = db.query(f"SELECT record FROM {RECORDS.name} WHERE run_id = ? ORDER BY label", [run_id])
    return [json.loads(row["record"]) for row in rows]


def _by_label(db: sqlite_utils.Database, table: str, columns: tuple[str, ...], run_id: str) -> dict[str, pd.DataFrame]:
    """label -> the run's rows of ``table`` (``columns``), in the order written."""
    names = ", ".join(["label", *columns])
    frame = pd.DataFrame(
        list(db.query(f"SELECT {names} FROM {table} WHERE run_id = ? ORDER BY rowid", [run_id])),
        columns=["label", *columns],
    )
    return {
        str(label): rows.drop(columns="label").reset_index(drop=True)
        for label, rows in frame.groupby("label", sort=True)
    }


def run_opcalls(db: sqlite_utils.Database, run_id: str) -> dict[str, pd.DataFrame]:
    """label -> the per-op table as ``read_opcalls`` gives it (only configs whose status is ok have one)."""
    frames = _by_label(db, OPCALLS.name, OPCALLS_COLUMNS, run_id)
    for frame in frames.values():
        frame[list(NUMBER_COLUMNS)] = frame[list(NUMBER_COLUMNS)].astype(float)
        for column in ("copy_bytes_per_iter", "cpu_ms_per_iter"):
            frame[column] = frame[column].astype(float)
    return frames


def run_samples(db: sqlite_utils.Database, run_id: str, labels: list[str]) -> dict[str, pd.DataFrame]:
    """label -> the per-op rows' samples, long, as ``read_op_samples`` gives them (none for a config
    whose per-op table came without)."""
    from embprof.results.samples import empty_samples

    frames = _by_label(db, OP_SAMPLES.name, SAMPLE_COLUMNS, run_id)
    for frame in frames.values():
        frame["iteration"] = frame["iteration"].astype("int64")
        frame["ms"] = frame["ms"].astype(float)
    return {label: frames.get(label, empty_samples()) for label in labels}


def run_bandwidth(db: sqlite_utils.Database, run_id: str) -> dict[str, pd.DataFrame] | None:
    """label -> the bandwidth table of each config whose rows carry one (None: no config's does)."""
    frames = {
        label: frame.astype({c: float for c in ("bytes_per_iter", "avg_ms_per_iter", "achieved_gbps", "pct_of_peak")})
        for label, frame in _by_label(db, OPCALLS.name, BANDWIDTH_COLUMNS, run_id).items()
        if frame[["bytes_per_iter", "achieved_gbps", "formula"]].notna().to_numpy().any()
    }
    return frames or None


def run_busy(db: sqlite_utils.Database, run_id: str) -> dict[str, BusyTime]:
    """label -> the busy time the database keeps of its sidecar (busy and range time per backend)."""
    out: dict[str, BusyTime] = {}
    rows = list(db.query(f"SELECT * FROM {BUSY.name} WHERE run_id = ? ORDER BY label, backend", [run_id]))
    for label, part in pd.DataFrame(rows, columns=[c.name for c in BUSY.columns]).groupby("label", sort=True):
        ranges = part.dropna(subset=["range_ms_per_iter"])
        out[str(label)] = BusyTime(
            ms_per_iter=dict(zip(part["backend"], part["busy_ms_per_iter"].astype(float), strict=True)),
            time_source=str(part["time_source"].iloc[0]),
            range_ms_per_iter=dict(zip(ranges["backend"], ranges["range_ms_per_iter"].astype(float), strict=True)),
            range_until_device_done=bool(part["range_until_device_done"].iloc[0]),
            label=str(label),
        )
    return out


def run_environment(db: sqlite_utils.Database, run_id: str) -> dict[str, Any]:
    [row] = db.query(f"SELECT environment FROM {RUNS.name} WHERE run_id = ?", [run_id])
    return json.loads(row["environment"]) if row["environment"] else {}


def run_configs(db: sqlite_utils.Database, run_id: str) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """label -> pytest id, and label -> status (the configs whose status the folder held)."""
    rows = list(db.query(f"SELECT * FROM {CONFIGS.name} WHERE run_id = ? ORDER BY label", [run_id]))
    statuses = {
        r["label"]: {"label": r["label"], "test_id": r["test_id"], "ok": r["failed_step"] is None,
                     **{k: r[k] for k in ("failed_step", "returncode", "log", "log_tail", "reason")}}
        for r in rows if r["log"] is not None or r["failed_step"] is not None
    }
    return {r["label"]: r["test_id"] for r in rows}, statuses


def read_run(path: Any, run_id: str) -> Run:
    """The run ``run_id`` of the results database ``path``, named by its id: what
    :meth:`Run.from_folder` gives of the folder it was written from.

    It holds what the database keeps: of the busy sidecars the busy and range time per
    backend (not the idle time and top kernels), of the peak bandwidth none (its GB/s is in
    the ``runs`` row).
    """
    with reading(path) as db:
        require_run(db, path, run_id)
        configs, statuses = run_configs(db, run_id)
        opcalls = run_opcalls(db, run_id)
        return Run(
            name=run_id,
            records=run_records(db, run_id),
            opcalls=opcalls,
            environment=run_environment(db, run_id),
            samples=run_samples(db, run_id, list(opcalls)),
            busy=run_busy(db, run_id),
            bandwidth=run_bandwidth(db, run_id),
            configs=configs,
            statuses=statuses,
        )
