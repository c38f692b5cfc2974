"""The results database's tables and views, each column with what it means (docs/database.md).

The schema is data: :data:`TABLES` and :data:`VIEWS` create the database and, through the
``schema_docs`` table written beside them, document it, so that ``embprof db schema``
describes any database from the file itself. Every change of a table or a view's columns
raises :data:`SCHEMA_VERSION`; a database of a newer version is refused, not guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlite_utils
from sqlite_utils.db import ForeignKey

from embprof.results.timings import RECORD_METRICS

# 2 (issue 33): op_samples holds opcalls.ms_by_iter, one row per iteration; 3 (issue 31): the
# records' and the summary's columns of NVIDIA's dynamicemb (nv) beside dyn's and trc's.
SCHEMA_VERSION = 3
RUN_KEY = ("run_id",)
CONFIG_KEY = ("run_id", "label")


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # str, int or float: TEXT, INTEGER or REAL
    doc: str


@dataclass(frozen=True)
class Table:
    """A table: its primary key, the table its rows belong to (by that table's key), its indexes."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    pk: tuple[str, ...]
    parent: str | None = None
    indexes: tuple[tuple[str, ...], ...] = ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@dataclass(frozen=True)
class View:
    name: str
    doc: str
    sql: str
    columns: tuple[tuple[str, str], ...]  # (name, doc), in the view's order


def _c(name: str, type_: type, doc: str) -> Column:
    return Column(name, type_, doc)


_RUN = _c("run_id", str, "the run (runs.run_id)")
_LABEL = _c("label", str, "the config label (configs.label)")
_MEDIANS = tuple(_c(m, float, f"median of the repeats of {m.removesuffix('_ms').replace('_', ' ')}, ms") for m in RECORD_METRICS)

META = Table(
    "meta", "This file's schema version, and which run its results folder holds.",
    (_c("key", str, "`schema_version`, `own_run` (the run of the folder the file lies in), `embprof_version` (its last writer)"),
     _c("value", str, "the value, as text")),
    pk=("key",),
)
DOCS = Table(
    "schema_docs", "What every table, view and column means (what `embprof db schema` prints).",
    (_c("name", str, "a table or view"),
     _c("column_name", str, "one of its columns; empty for the table or view itself"),
     _c("description", str, "what it holds")),
    pk=("name", "column_name"),
)
RUNS = Table(
    "runs", "One row per run: a results folder, where and when it was measured.",
    (_c("run_id", str, "the run's name: `<first start>-<commit>` unless one was given (`--run-id`)"),
     _c("results_dir", str, "the results folder it was read from (absolute, on the host that wrote it)"),
     _c("written_at", str, "when its rows were last written (UTC, ISO 8601)"),
     _c("started_at", str, "when its first timing run started (provenance)"),
     _c("date", str, "when its environment was recorded (environment.json)"),
     _c("git_commit", str, "the commit it measured; null where its records differ"),
     _c("git_dirty", int, "1 when it measured uncommitted changes"),
     _c("device", str, "cpu or cuda:N"),
     _c("gpu_name", str, "the GPU"),
     _c("driver", str, "the NVIDIA driver"),
     _c("cpu_name", str, "the host's CPU"),
     _c("hostname", str, "the host that recorded the environment"),
     _c("python", str, "Python's version"),
     _c("torch", str, "torch's version"),
     _c("fbgemm_gpu", str, "fbgemm_gpu's version"),
     _c("torchrec", str, "torchrec's version"),
     _c("triton", str, "Triton's version"),
     _c("cuda", str, "CUDA's version (torch.version.cuda)"),
     _c("kernel_path", str, "dynemb's kernels: triton, torch or triton+torch"),
     _c("snakemake", str, "Snakemake's version"),
     _c("profiler", str, "nsys or torch"),
     _c("nsys_version", str, "Nsight Systems' version"),
     _c("preset", str, "smoke or seed"),
     _c("host_load_1m", float, "the highest 1-minute load a timing run started under"),
     _c("cpu_count", int, "CPUs the benchmark could use"),
     _c("torch_threads", int, "torch's threads in the timing runs"),
     _c("peak_gbps", float, "the device's peak memory bandwidth, GB/s (peak_bandwidth.json)"),
     _c("peak_source", str, "measured or datasheet"),
     _c("environment", str, "environment.json whole, as JSON")),
    pk=RUN_KEY,
    indexes=(("git_commit",), ("started_at",)),
)
CONFIGS = Table(
    "configs", "One row per config of a run, its label's fields parsed, and whether it worked.",
    (_RUN,
     _c("label", str, "the config label (docs/DESIGN.md, \"Config labels\")"),
     _c("test_id", str, "its pytest node id (configs.tsv); empty where the folder has none"),
     _c("num_tables", int, "tables"),
     _c("total_batch", int, "batch over all tables"),
     _c("batch_size", int, "batch per table"),
     _c("dim", int, "embedding dimension"),
     _c("optimizer", str, "sgd, adam, exact_rowwise_adagrad, ..."),
     _c("suite", str, "where rows live: gpu, caching, no_caching or no_hbm"),
     _c("pooling", str, "pooling mode"),
     _c("cap", str, "rows per table as the label writes them (25M, 1638K, 4096-8192)"),
     _c("cap_rows", int, "rows over all tables"),
     _c("cfr", float, "cache footprint ratio; null outside caching"),
     _c("status", str, "ok, failed (a step failed: no numbers of it are kept) or missing (no record yet)"),
     _c("failed_step", str, "the first step that failed (profile, timing, ...)"),
     _c("returncode", int, "its exit code"),
     _c("reason", str, "why it failed, where known"),
     _c("log", str, "its log, relative to the working directory"),
     _c("log_tail", str, "the last lines of that log"),
     _c("digest", str, "a digest of this config's rows: a write leaves a config whose digest it matches alone"),
     _c("written_at", str, "when this config's rows were last replaced (UTC)")),
    pk=CONFIG_KEY,
    parent="runs",
    indexes=(("suite",), ("optimizer",), ("status",)),
)
RECORDS = Table(
    "records", "One row per benchmark record (timing/<label>.json): a config's unprofiled timings.",
    (_RUN, _LABEL,
     _c("status", str, "the record's status (ok)"),
     _c("device", str, "where it ran"),
     _c("gpu_name", str, "the GPU"),
     _c("timer", str, "cuda_events, cpu_time, or wall_clock (older CPU records)"),
     _c("repeats", int, "timed passes over the batches"),
     _c("num_iterations", int, "iterations per pass"),
     _c("avg_n_unique", float, "unique ids per iteration"),
     _c("avg_n_total", float, "ids per iteration"),
     *_MEDIANS,
     _c("trc_skip_reason", str, "why the TorchRec/FBGEMM baseline did not run"),
     _c("nv_skip_reason", str, "why NVIDIA's dynamicemb did not run"),
     _c("torch_version", str, "torch's version"),
     _c("fbgemm_gpu_version", str, "fbgemm_gpu's version"),
     _c("torchrec_version", str, "torchrec's version"),
     _c("git_commit", str, "the commit it measured"),
     _c("git_dirty", int, "1 when it measured uncommitted changes"),
     _c("started_at", str, "when its timing run started"),
     _c("record", str, "the record whole, as JSON")),
    pk=CONFIG_KEY,
    parent="configs",
)
TIMINGS = Table(
    "timings", "One row per record and metric: its repeats and their summary.",
    (_RUN, _LABEL,
     _c("metric", str, "dyn|trc _ forward|backward|train|eval _ms"),
     _c("n", int, "repeats"),
     _c("median", float, "ms"),
     _c("p90", float, "ms"),
     _c("min", float, "ms"),
     _c("max", float, "ms"),
     _c("spread_pct", float, "(max - min) / median, %; null for one repeat"),
     _c("repeats", str, "every repeat, ms, as a JSON list")),
    pk=(*CONFIG_KEY, "metric"),
    parent="records",
    indexes=(("metric",),),
)
OPCALLS = Table(
    "opcalls", "One row per row of a config's per-op CSV, with its achieved bandwidth.",
    (_RUN, _LABEL,
     _c("backend", str, "dyn or trc"),
     _c("phase", str, "forward or backward"),
     _c("parent_stages", str, "the stages around the op, outer to inner, /-joined"),
     _c("op", str, "the op range's name (without op:), or a kernel's short name"),
     _c("calls_per_iter", float, "kernel (or leaf op) calls per iteration"),
     _c("avg_ms_per_iter", float, "ms per iteration"),
     _c("total_ms", float, "ms over the profiled iterations"),
     _c("num_iters", int, "profiled iterations"),
     _c("kernel_names", str, "the kernels, ;-joined"),
     _c("fallback_category", str, "the category of work under no op range"),
     _c("copy_bytes_per_iter", float, "bytes its copies or memsets moved per iteration (the trace's); null for kernels"),
     _c("memory_kinds", str, "its copies' memory kinds (pinned->device, ...) or a memset's, ;-joined"),
     _c("cpu_ms_per_iter", float, "the op range's own host time per iteration, ms; null for work under no op"),
     _c("bytes_per_iter", float, "bytes the op must move per iteration (bandwidth table); null without a formula"),
     _c("achieved_gbps", float, "bytes_per_iter over its time, GB/s"),
     _c("pct_of_peak", float, "achieved_gbps as % of the run's peak_gbps"),
     _c("formula", str, "the bytes formula")),
    pk=(*CONFIG_KEY, "backend", "phase", "parent_stages", "op"),
    parent="configs",
    indexes=(("op",), ("backend", "phase")),
)
OP_SAMPLES = Table(
    "op_samples", "One row per per-op row and profiled iteration: its ms in that iteration (the samples file).",
    (_RUN, _LABEL,
     *(c for c in OPCALLS.columns if c.name in OPCALLS.pk[2:]),  # the per-op row's key
     _c("iteration", int, "the profiled iteration, 0-based in start order (a label's traces one after another)"),
     _c("ms", float, "the row's ms in that iteration (0 where it ran nothing); their mean is avg_ms_per_iter")),
    pk=(*CONFIG_KEY, "backend", "phase", "parent_stages", "op", "iteration"),
    parent="opcalls",
)
BUSY = Table(
    "busy", "One row per config and backend: its device time per profiled iteration (the busy sidecar).",
    (_RUN, _LABEL,
     _c("backend", str, "dyn or trc"),
     _c("busy_ms_per_iter", float, "the union of its device work per iteration, ms"),
     _c("range_ms_per_iter", float, "from its range's start until its device work is done, ms; null in older sidecars"),
     _c("range_until_device_done", int, "1 when range_ms_per_iter waits for the device work, 0 for a host-only range"),
     _c("time_source", str, "gpu-kernels, or cpu-leaf-ops for a CPU-only torch profile")),
    pk=(*CONFIG_KEY, "backend"),
    parent="configs",
)
# In the order rows must be written (a row's parent first) and deleted (the reverse).
RUN_TABLES = (RUNS, CONFIGS, RECORDS, TIMINGS, OPCALLS, OP_SAMPLES, BUSY)
TABLES = (META, DOCS, *RUN_TABLES)
CONFIG_TABLES = (CONFIGS, RECORDS, TIMINGS, OPCALLS, OP_SAMPLES, BUSY)

_SPREADS = ("dyn_train_ms", "trc_train_ms", "dyn_eval_ms", "trc_eval_ms", "nv_train_ms", "nv_eval_ms")
# The report's summary table (embprof.report.tables.headline): a failed config keeps its row
# and shows its failure; numbers only of records whose status is ok.
SUMMARY = View(
    "summary",
    "The report's summary table: one row per config, medians with their spreads, dyn/trc ratios.",
    f"""
SELECT c.run_id, c.label,
  CASE WHEN c.failed_step IS NOT NULL THEN 'failed: ' || c.failed_step
       WHEN r.label IS NULL THEN 'missing' ELSE r.status END AS status,
  {", ".join(f"CASE WHEN r.status = 'ok' THEN r.{m} END AS {m}" for m in _SPREADS)},
  {", ".join(f"CASE WHEN r.status = 'ok' THEN s.{m}_spread END AS {m}_spread" for m in _SPREADS)},
  CASE WHEN r.status = 'ok' AND r.trc_train_ms != 0 THEN r.dyn_train_ms * 1.0 / r.trc_train_ms END AS train_ratio,
  CASE WHEN r.status = 'ok' AND r.trc_eval_ms != 0 THEN r.dyn_eval_ms * 1.0 / r.trc_eval_ms END AS eval_ratio,
  CASE WHEN r.status = 'ok' AND r.nv_train_ms != 0 THEN r.dyn_train_ms * 1.0 / r.nv_train_ms END AS nv_ratio,
  CASE WHEN r.status = 'ok' AND r.nv_eval_ms != 0 THEN r.dyn_eval_ms * 1.0 / r.nv_eval_ms END AS nv_eval_ratio,
  CASE WHEN r.status = 'ok' THEN s.repeats END AS repeats,
  CASE WHEN r.status = 'ok' THEN r.avg_n_unique END AS unique_ids,
  CASE WHEN r.status = 'ok' THEN r.avg_n_total END AS total_ids,
  CASE WHEN r.status = 'ok' THEN coalesce(r.trc_skip_reason, '') ELSE '' END AS trc_note
FROM configs c
LEFT JOIN records r ON r.run_id = c.run_id AND r.label = c.label
LEFT JOIN (
  SELECT run_id, label,
    {", ".join(f"max(CASE WHEN metric = '{m}' THEN spread_pct END) AS {m}_spread" for m in _SPREADS)},
    max(CASE WHEN metric = 'dyn_train_ms' THEN n END) AS repeats
  FROM timings GROUP BY run_id, label
) s ON s.run_id = c.run_id AND s.label = c.label
""",
    (("run_id", "the run"), ("label", "the config"),
     ("status", "ok, failed: <step>, or missing"),
     *((m, f"median {m.removesuffix('_ms').replace('_', ' ')} ms; null unless the record is ok") for m in _SPREADS),
     *((f"{m}_spread", f"its spread, %") for m in _SPREADS),
     ("train_ratio", "dyn_train_ms / trc_train_ms"),
     ("eval_ratio", "dyn_eval_ms / trc_eval_ms"),
     ("nv_ratio", "dyn_train_ms / nv_train_ms (ours against NVIDIA's dynamicemb)"),
     ("nv_eval_ratio", "dyn_eval_ms / nv_eval_ms"),
     ("repeats", "timed passes behind each median"),
     ("unique_ids", "unique ids per iteration"),
     ("total_ids", "ids per iteration"),
     ("trc_note", "why the baseline did not run, else empty")),
)
OP_SHARES = View(
    "op_shares",
    "Per config, backend and op (summed over phases and stages): ms per iteration and its share of the step.",
    """
SELECT run_id, label, backend, op, ms_per_iter,
  100.0 * ms_per_iter / nullif(sum(ms_per_iter) OVER (PARTITION BY run_id, label, backend), 0) AS pct_of_iter
FROM (
  SELECT run_id, label, backend, op, sum(avg_ms_per_iter) AS ms_per_iter
  FROM opcalls GROUP BY run_id, label, backend, op
)
""",
    (("run_id", "the run"), ("label", "the config"), ("backend", "dyn or trc"), ("op", "the op"),
     ("ms_per_iter", "its ms per iteration"),
     ("pct_of_iter", "% of its backend's ms per iteration in the config (the step)")),
)
# The report's costliest ops (embprof.report.tables.top_ops), every op rather than the first 15.
COSTLIEST_OPS = View(
    "costliest_ops",
    "The report's costliest ops: per run, backend and op, summed over its configs, costliest first.",
    """
SELECT run_id, backend, op, count(*) AS configs, sum(ms_per_iter) AS total_ms_per_iter,
  avg(ms_per_iter) AS mean_ms_per_iter, avg(pct_of_iter) AS mean_pct_of_iter,
  max(pct_of_iter) AS max_pct_of_iter,
  max(CASE WHEN costliest = 1 THEN label END) AS costliest_config
FROM (
  SELECT *, row_number() OVER (PARTITION BY run_id, backend, op ORDER BY ms_per_iter DESC, label) AS costliest
  FROM op_shares
)
GROUP BY run_id, backend, op
ORDER BY run_id, total_ms_per_iter DESC, backend, op
""",
    (("run_id", "the run"), ("backend", "dyn or trc"), ("op", "the op"),
     ("configs", "configs it ran in"), ("total_ms_per_iter", "its ms per iteration summed over them"),
     ("mean_ms_per_iter", "their mean"), ("mean_pct_of_iter", "its mean % of the step"),
     ("max_pct_of_iter", "its largest % of the step"), ("costliest_config", "the config where it cost most")),
)
VIEWS = (SUMMARY, OP_SHARES, COSTLIEST_OPS)


def create_schema(db: sqlite_utils.Database) -> None:
    """Every table (where missing), index and view, and their descriptions; idempotent."""
    by_name = {t.name: t for t in TABLES}
    for table in TABLES:
        parent = by_name[table.parent] if table.parent else None
        foreign_keys = [_belongs_to(table, parent)] if parent else None
        db[table.name].create(
            {c.name: c.type for c in table.columns}, pk=_key(table.pk),
            foreign_keys=foreign_keys, not_null=set(table.pk), if_not_exists=True,
        )
        for columns in table.indexes:
            db[table.name].create_index(columns, if_not_exists=True)
    for view in VIEWS:
        db.create_view(view.name, view.sql.strip(), replace=True)
    db["schema_docs"].upsert_all(_docs(), pk=DOCS.pk)


def _belongs_to(table: Table, parent: Table) -> ForeignKey:
    """A row's link to the row it belongs to: deleting a run (or a config) deletes its rows."""
    compound = len(parent.pk) > 1
    return ForeignKey(
        table.name, None if compound else parent.pk[0], parent.name, None if compound else parent.pk[0],
        columns=parent.pk, other_columns=parent.pk, is_compound=compound, on_delete="CASCADE",
    )


def _key(columns: tuple[str, ...]) -> str | tuple[str, ...]:
    """sqlite-utils' spelling of a key: a column's name, or a tuple of names for a compound one."""
    return columns[0] if len(columns) == 1 else columns


def _docs() -> list[dict[str, str]]:
    rows = []
    for thing in (*TABLES, *VIEWS):
        rows.append({"name": thing.name, "column_name": "", "description": thing.doc})
        columns = thing.columns if isinstance(thing, Table) else [Column(n, str, d) for n, d in thing.columns]
        rows += [{"name": thing.name, "column_name": c.name, "description": c.doc} for c in columns]
    return rows
