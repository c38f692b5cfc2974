"""The benchmark result record (DESIGN.md) and its lock-protected, atomic append.

Many benchmark processes may finish at once (one per config on a cluster), all
appending to one JSON list. Each append takes an exclusive file lock, reads the
list, adds one record, writes a temporary file in the same directory and
renames it over the original, so a reader never sees a half-written file and no
writer loses another's record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from filelock import FileLock

from embprof.atomic import write_json
from embprof.versions import FBGEMM_DISTRIBUTIONS, package_version

RESULT_FIELDS = (
    "label",
    "gpu_name",
    "device",
    "num_tables",
    "batch_size",
    "embedding_dim",
    "optimizer_type",
    "caching",
    "cache_footprint_ratio",
    "pooling_mode",
    "num_embeddings_per_feature",
    "feature_distribution",
    "alpha",
    "max_hotness",
    "avg_n_unique",
    "avg_n_total",
    "num_iterations",
    "dyn_forward_ms",
    "dyn_backward_ms",
    "dyn_train_ms",
    "dyn_eval_ms",
    "trc_forward_ms",
    "trc_backward_ms",
    "trc_train_ms",
    "trc_eval_ms",
    "torch_version",
    "fbgemm_gpu_version",
    "torchrec_version",
    "trc_skip_reason",
    "status",
)
LOCK_TIMEOUT_S = 120


class ResultsFileError(RuntimeError):
    """The results file exists but is not a JSON list of records."""


def library_versions() -> dict[str, str | None]:
    return {
        "torch_version": package_version("torch"),
        "fbgemm_gpu_version": package_version(*FBGEMM_DISTRIBUTIONS),
        "torchrec_version": package_version("torchrec"),
    }


def check_record(record: dict[str, Any]) -> None:
    """A record must carry exactly the contract's fields."""
    missing = [f for f in RESULT_FIELDS if f not in record]
    extra = [f for f in record if f not in RESULT_FIELDS]
    if missing or extra:
        raise ValueError(f"result record fields: missing {missing}, unexpected {extra}")


def append_record(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append a benchmark record (DESIGN.md's fields) to the results file."""
    check_record(record)
    append_to_json_list(path, record)


def append_to_json_list(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append ``record`` to the JSON list at ``path`` (created when missing), atomically under a lock,
    so that concurrent runs never lose or corrupt a record."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock", timeout=LOCK_TIMEOUT_S):
        records = read_records(target) if target.exists() else []
        records.append(record)
        write_json(target, records, indent=1)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    text = Path(path).read_text()
    if not text.strip():
        return []  # an empty file (e.g. touched by a workflow) holds no records yet
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"{path} is not valid JSON ({exc}); move it aside or delete it") from exc
    if not isinstance(records, list):
        raise ResultsFileError(f"{path} holds a JSON {type(records).__name__}, not a list of records")
    return records
