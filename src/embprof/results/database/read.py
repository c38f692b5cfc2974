"""Reading runs back out of a results database: as rows (to merge them elsewhere) and as what a
comparison of two runs takes (records, per-op tables by label, the environment)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pandas as pd
import sqlite_utils

from embprof.errors import ContractError
from embprof.results.database.rows import STAMPS, ConfigRows, RunRows
from embprof.results.database.schema import CONFIG_KEY, CONFIG_TABLES, CONFIGS, OPCALLS, RECORDS, RUNS
from embprof.results.database.store import own_run, run_ids
from embprof.results.opcalls import COLUMNS as OPCALLS_COLUMNS
from embprof.results.opcalls import NUMBER_COLUMNS


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


def run_opcalls(db: sqlite_utils.Database, run_id: str) -> dict[str, pd.DataFrame]:
    """label -> the per-op table as ``read_opcalls`` gives it (only configs whose status is ok have one)."""
    columns = ", ".join(["label", *OPCALLS_COLUMNS])
    frame = pd.DataFrame(
        list(db.query(f"SELECT {columns} FROM {OPCALLS.name} WHERE run_id = ? ORDER BY rowid", [run_id])),
        columns=["label", *OPCALLS_COLUMNS],
    )
    frame[list(NUMBER_COLUMNS)] = frame[list(NUMBER_COLUMNS)].astype(float)
    return {
        str(label): rows.drop(columns="label").reset_index(drop=True)
        for label, rows in frame.groupby("label", sort=True)
    }


def run_environment(db: sqlite_utils.Database, run_id: str) -> dict[str, Any]:
    [row] = db.query(f"SELECT environment FROM {RUNS.name} WHERE run_id = ?", [run_id])
    return json.loads(row["environment"]) if row["environment"] else {}
