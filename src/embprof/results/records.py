"""Benchmark result records (docs/DESIGN.md, "Benchmark result record") and the files holding them.

A timing file (``timing/<label>.json``) and ``benchmark_results.json`` are JSON
lists of records; the benchmark appends to its ``--results-file`` under a lock.
The EmbeddingCollection benchmark's records follow the same rules with their own
fields (:data:`EC_RESULT_FIELDS`). A benchmark record's per-repeat timings and its
provenance have modules of their own (:mod:`embprof.results.timings`,
:mod:`embprof.results.provenance`); this one checks that a new record carries both.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from embprof.atomic import write_json, write_text
from embprof.errors import ContractError
from embprof.exclusive import exclusive
from embprof.labels import parse_label
from embprof.results.jsonfile import is_non_negative, read_json
from embprof.results.provenance import check_provenance
from embprof.results.timings import check_timing_values, check_timings

RESULT_FIELDS = (
    "label", "gpu_name", "device", "num_tables", "batch_size", "embedding_dim", "optimizer_type",
    "caching", "cache_footprint_ratio", "pooling_mode", "num_embeddings_per_feature",
    "feature_distribution", "alpha", "max_hotness", "avg_n_unique", "avg_n_total",
    "num_iterations", "dyn_forward_ms", "dyn_backward_ms", "dyn_train_ms", "dyn_eval_ms",
    "trc_forward_ms", "trc_backward_ms", "trc_train_ms", "trc_eval_ms", "nv_forward_ms",
    "nv_backward_ms", "nv_train_ms", "nv_eval_ms", "torch_version", "fbgemm_gpu_version",
    "torchrec_version", "trc_skip_reason", "nv_skip_reason", "status", "repeats", "timer",
    "timings", "provenance",
)
# Since issue 32, and only in records of configs whose dyn tables keep rows in host memory: the host rows dyn's
# training iterations move each way (``dynemb``'s ``host_stats``, counted over an untimed pass after the timed
# ones), per iteration. Older records lack them.
HOST_TRAFFIC_FIELDS = (
    "dyn_host_rows_in_per_iter", "dyn_host_rows_out_per_iter", "dyn_host_bytes_in_per_iter", "dyn_host_bytes_out_per_iter",
)
EC_RESULT_FIELDS = (
    "label", "benchmark", "status", "skip_reason", "use_index_dedup", "use_dynamic_embedding",
    "table_backend", "batch_size", "local_batch_size", "world_size", "device", "gpu_name",
    "backend", "num_features", "num_tables", "num_embeddings_per_feature", "total_rows",
    "rows_scale", "multi_hot_sizes", "embedding_dim", "optimizer_type", "owner_policy",
    "iterations", "warmup_iterations", "forward_ms", "backward_ms", "total_ms",
    "forward_ms_per_rank", "backward_ms_per_rank", "total_ms_per_rank",
    "ids_sent_per_rank_per_iter", "timer", "torch_version", "fbgemm_gpu_version",
    "torchrec_version",
)
LOCK_TIMEOUT_S = 120


def check_record(record: dict[str, Any], fields: Sequence[str] = RESULT_FIELDS) -> None:
    """A record carries exactly the contract's fields (a benchmark record: complete timings and
    provenance too, and the host traffic fields all or none). Readers take older records without them."""
    optional = HOST_TRAFFIC_FIELDS if fields is RESULT_FIELDS else ()
    missing = [f for f in fields if f not in record]
    if any(f in record for f in optional):
        missing += [f for f in optional if f not in record]
    extra = [f for f in record if f not in fields and f not in optional]
    if missing or extra:
        raise ContractError(f"result record fields: missing {missing}, unexpected {extra}")
    if fields is RESULT_FIELDS:
        check_timings(record)
        check_provenance(record["provenance"])
        check_host_traffic(record)


def check_host_traffic(record: dict[str, Any]) -> None:
    """The host traffic fields a record has are counts >= 0 or null (``HOST_TRAFFIC_FIELDS``)."""
    for name in HOST_TRAFFIC_FIELDS:
        value = record.get(name)
        if value is not None and not is_non_negative(value):
            raise ContractError(f"{name} is {value!r}, not a count per iteration (a number >= 0, or null)")


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A JSON list of record objects (a file of one object counts as a list of it)."""
    data = read_json(path)
    data = [data] if isinstance(data, dict) else data
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ContractError(f"{path}: expected a JSON list of record objects")
    return data


def check_results(records: list[dict[str, Any]], path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``records`` have valid, unique config labels (``path`` names them in errors)."""
    for i, record in enumerate(records):
        label = record.get("label")
        if not isinstance(label, str):
            raise ContractError(f"{path}: record {i}: label must be a string, got {label!r}")
        try:
            parse_label(label)
            check_timing_values(record)
            check_host_traffic(record)
        except (ValueError, ContractError) as exc:
            raise ContractError(f"{path}: record {i}: {exc}") from None
    labels = [r["label"] for r in records]
    if len(set(labels)) != len(labels):
        dup = next(lab for lab in labels if labels.count(lab) > 1)
        raise ContractError(f"{path}: label {dup!r} appears more than once")
    return records


def read_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``benchmark_results.json`` (or a timing file): records with valid, unique labels."""
    return check_results(read_records(path), path)


def write_results(path: str | os.PathLike[str], records: list[dict[str, Any]]) -> Path:
    """Write a list of records once it passes the checks its readers make; NaN becomes null."""
    check_results(records, path)
    text = json.dumps(finite_or_null(records), indent=2, allow_nan=False) + "\n"
    return write_text(path, text)


def merge_results(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Every record of every file, sorted by label; a label in two files is an error.

    Failed records (``status`` other than ``"ok"``) are kept: the report lists them.
    """
    merged: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for path in paths:
        for record in read_results(path):  # a bad record is named by the file it came from
            label = record["label"]
            if label in merged:
                raise ContractError(f"{path}: label {label!r} already came from {origin[label]}")
            merged[label], origin[label] = record, str(path)
    return [merged[label] for label in sorted(merged)]


def append_record(
    path: str | os.PathLike[str], record: dict[str, Any], fields: Sequence[str] = RESULT_FIELDS
) -> None:
    """Append ``record`` to the JSON list at ``path`` (created when missing), atomically under a
    lock, so that concurrent runs never lose or corrupt a record."""
    check_record(record, fields)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(target, timeout=LOCK_TIMEOUT_S):
        # An empty file (e.g. touched by a workflow) holds no records yet.
        records = read_records(target) if target.exists() and target.stat().st_size else []
        records.append(record)
        write_json(target, records, indent=1)


def finite_or_null(value: Any) -> Any:
    """NaN and infinities become null (in lists and objects too): strict JSON, as browsers and jq read it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [finite_or_null(v) for v in value]
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    return value
