"""A run (:class:`embprof.results.run.Run`) as the database's rows: one run, and per config its
rows in every table.

What is written is what the report shows: every config of the run (``Run.labels``) with its
record and status, and per-op rows (the per-op table, its samples per iteration, its busy
sidecar and bandwidth) only of the configs whose per-op files are of this run
(``Run.opcalls``), so a failed config gives rows marked failed and never the numbers an
earlier run left. Every file is read (and checked) before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from embprof.errors import ContractError
from embprof.labels import cap_token, parse_label
from embprof.results.busy import BusyTime
from embprof.results.database.schema import BUSY, CONFIGS, OP_SAMPLES, OPCALLS, RECORDS, RUNS, TIMINGS
from embprof.results.provenance import read_provenance
from embprof.results.records import finite_or_null
from embprof.results.run import Run
from embprof.results.samples import KEY as SAMPLE_KEY
from embprof.results.timings import RECORD_METRICS, timing_summary

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,99}$")
OP_KEY = ["backend", "phase", "parent_stages", "op"]
_BANDWIDTH = ["bytes_per_iter", "achieved_gbps", "pct_of_peak", "formula"]
# Written by the store, not part of a config's content.
STAMPS = ("digest", "written_at")


@dataclass(frozen=True)
class ConfigRows:
    """One config's rows, by table (``configs`` holds one), without ``run_id`` and ``label``.

    ``digest`` names their content: a write leaves a stored config of the same digest alone.
    """

    label: str
    tables: Mapping[str, list[dict[str, Any]]]
    digest: str = ""

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", content_digest(self.tables))


@dataclass(frozen=True)
class RunRows:
    """One run: its ``runs`` row (without ``run_id`` and ``written_at``) and its configs by label."""

    run: Mapping[str, Any]
    configs: Mapping[str, ConfigRows] = field(default_factory=dict)


def content_digest(tables: Mapping[str, list[dict[str, Any]]]) -> str:
    text = json.dumps(finite_or_null(dict(tables)), sort_keys=True, allow_nan=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def check_run_id(run_id: str) -> str:
    if not RUN_ID.match(run_id):
        raise ContractError(
            f"run id {run_id!r}: use up to 100 letters, digits and . _ : + - (starting with a letter or digit)"
        )
    return run_id


def default_run_id(run: Mapping[str, Any]) -> str:
    """``<first start, compact>-<commit, 7 digits>``: stable for one folder's measurements."""
    stamp = run.get("started_at") or run.get("date")
    try:
        when = datetime.fromisoformat(str(stamp)).strftime("%Y%m%dT%H%M%S")
    except ValueError:
        when = "undated"
    commit = run.get("git_commit")
    return check_run_id(f"{when}-{str(commit)[:7]}" if commit else when)


def run_rows(run: Run) -> RunRows:
    """Every row of ``run`` (a results folder's); ContractError on a file that breaks its format."""
    results_dir = str(run.paths.root.resolve()) if run.paths is not None else run.name
    configs = {
        label: ConfigRows(label, _config_tables(run, label)) for label in run.labels
    }
    return RunRows(run_row(run.environment, results_dir, run.peak), configs)


def run_row(env: Mapping[str, Any], results_dir: str, peak: Any = None) -> dict[str, Any]:
    """The ``runs`` row of an environment.json (and the folder's peak bandwidth, where it has one)."""
    provenance = read_provenance(env)
    row: dict[str, Any] = {c.name: env.get(c.name) for c in RUNS.columns if c.name in env}
    row |= {k: provenance[k] for k in ("git_commit", "kernel_path", "triton", "cuda", "started_at",
                                        "host_load_1m", "cpu_count", "torch_threads")}
    row |= {
        "results_dir": results_dir,
        "git_dirty": _flag(provenance["git_dirty"]),
        "driver": env.get("driver") or provenance["driver"],
        "peak_gbps": peak.peak_gbps if peak else None,
        "peak_source": peak.source if peak else None,
        "environment": json.dumps(finite_or_null(dict(env)), sort_keys=True),
    }
    return {c.name: _scalar(row.get(c.name)) for c in RUNS.columns if c.name not in ("run_id", "written_at")}


def _config_tables(run: Run, label: str) -> dict[str, list[dict[str, Any]]]:
    record = run.by_label.get(label)
    tables: dict[str, list[dict[str, Any]]] = {
        CONFIGS.name: [_config_row(label, run.configs.get(label, ""), record, run.statuses.get(label))],
        RECORDS.name: [],
        TIMINGS.name: [],
        OPCALLS.name: [],
        OP_SAMPLES.name: [],
        BUSY.name: [],
    }
    if record is not None:
        tables[RECORDS.name] = [_record_row(record)]
        tables[TIMINGS.name] = _timing_rows(record)
    if label in run.opcalls:
        bandwidth = run.bandwidth.get(label) if run.bandwidth is not None else None
        tables[OPCALLS.name] = _opcalls_rows(_where(run, label), run.opcalls[label], bandwidth)
        tables[OP_SAMPLES.name] = _sample_rows(_where(run, label), run.samples[label], run.opcalls[label])
        tables[BUSY.name] = _busy_rows(run.busy.get(label))
    return tables


def _where(run: Run, label: str) -> str:
    """How errors name a config's per-op table: its file, or the run and label."""
    return str(run.paths.opcalls(label)) if run.paths is not None else f"{run.name}: {label}"


def _config_row(label: str, test_id: str, record: dict | None, status: dict | None) -> dict[str, Any]:
    fields = parse_label(label)
    failed = (status is not None and not status["ok"]) or (record is not None and record.get("status", "ok") != "ok")
    row = {
        "test_id": test_id,
        "num_tables": fields.num_tables,
        "total_batch": fields.total_batch,
        "batch_size": fields.total_batch // fields.num_tables,
        "dim": fields.dim,
        "optimizer": fields.optimizer,
        "suite": fields.mode,
        "pooling": fields.pooling,
        "cap": cap_token(fields.caps),
        "cap_rows": sum(fields.caps),
        "cfr": fields.cache_footprint_ratio,
        "status": "failed" if failed else ("ok" if record is not None else "missing"),
        "failed_step": None, "returncode": None, "reason": None, "log": None, "log_tail": None,
    }
    if status is not None:
        row["log"] = status.get("log")
        if not status["ok"]:
            row |= {k: status.get(k) or None for k in ("failed_step", "reason", "log_tail")}
            row["returncode"] = status.get("returncode")
    return {k: _scalar(v) for k, v in row.items()}


def _record_row(record: Mapping[str, Any]) -> dict[str, Any]:
    provenance = read_provenance(record)
    columns = [c.name for c in RECORDS.columns if c.name not in ("run_id", "label", "record")]
    row = {name: record.get(name) for name in columns}
    row |= {
        "status": record.get("status", "ok"),
        "git_commit": provenance["git_commit"],
        "git_dirty": _flag(provenance["git_dirty"]),
        "started_at": provenance["started_at"],
        "record": json.dumps(finite_or_null(dict(record)), sort_keys=True, allow_nan=False),
    }
    return {k: _scalar(v) for k, v in row.items()}


def _timing_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for metric in RECORD_METRICS:
        try:
            summary = timing_summary(record, metric)
        except (TypeError, ValueError):
            raise ContractError(f"record {record['label']}: {metric}'s repeats must be finite numbers") from None
        if summary is not None:
            rows.append({
                "metric": metric, "n": len(summary["repeats"]),
                **{k: summary[k] for k in ("median", "p90", "min", "max", "spread_pct")},
                "repeats": json.dumps(summary["repeats"]),
            })
    return rows


def _opcalls_rows(path: str, frame: pd.DataFrame, bandwidth: pd.DataFrame | None) -> list[dict[str, Any]]:
    repeated = frame.duplicated(OP_KEY)
    if repeated.any():
        line = int(np.flatnonzero(repeated.to_numpy())[0]) + 2
        raise ContractError(f"{path}: line {line}: backend, phase, parent_stages and op repeat an earlier row")
    if bandwidth is not None:
        achieved = bandwidth.drop_duplicates(OP_KEY)
        frame = frame.merge(achieved[OP_KEY + _BANDWIDTH], on=OP_KEY, how="left", validate="one_to_one")
    else:
        frame = frame.assign(**{c: None for c in _BANDWIDTH})
    frame["num_iters"] = frame["num_iters"].astype(int)
    columns = [c.name for c in OPCALLS.columns if c.name not in ("run_id", "label")]
    return _plain(frame[columns])


def _sample_rows(path: str, samples: pd.DataFrame, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The samples, each of a row of the per-op table (the table's foreign key)."""
    if samples.empty:
        return []
    keys = samples[list(SAMPLE_KEY)].drop_duplicates()
    known = keys.merge(frame[OP_KEY].drop_duplicates(), how="left", indicator=True)["_merge"] == "both"
    if not known.all():
        stray = keys[~known.to_numpy()].iloc[0].tolist()
        raise ContractError(f"{path}: its samples hold a row the table does not: {stray!r}")
    columns = [c.name for c in OP_SAMPLES.columns if c.name not in ("run_id", "label")]
    # plain values already (text, whole numbers, finite floats): no per-cell conversion
    return [dict(zip(columns, row, strict=True)) for row in zip(*(samples[c].tolist() for c in columns), strict=True)]


def _busy_rows(busy: BusyTime | None) -> list[dict[str, Any]]:
    if busy is None:
        return []
    return [
        {
            "backend": backend,
            "busy_ms_per_iter": ms,
            "range_ms_per_iter": busy.range_ms_per_iter.get(backend),
            "range_until_device_done": int(busy.range_until_device_done),
            "time_source": busy.time_source,
        }
        for backend, ms in sorted(busy.ms_per_iter.items())
    ]


def _plain(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as dicts of plain Python values, NaN as None."""
    return [{k: _scalar(v) for k, v in row.items()} for row in frame.astype(object).to_dict("records")]


def _flag(value: Any) -> int | None:
    return None if value is None else int(bool(value))


def _scalar(value: Any) -> Any:
    """A value SQLite stores as it is: numpy scalars as Python's, NaN as None, lists and objects as JSON."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, (list, dict)):
        return json.dumps(finite_or_null(value), sort_keys=True)
    return value
