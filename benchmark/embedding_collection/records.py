"""The EmbeddingCollection result record and its atomic, lock-protected append.

One record per run (one backend, one dedup setting), written by rank 0 after
every rank's times are gathered. Appends follow the benchmark suite's rule: an
exclusive file lock, read the list, add, write a temporary file in the same
directory, rename it over the original.
"""

from __future__ import annotations

import os
from typing import Any

from benchmark.results import append_to_json_list

EC_RESULT_FIELDS = (
    "label",
    "benchmark",
    "status",
    "skip_reason",
    "use_index_dedup",
    "use_dynamic_embedding",
    "table_backend",
    "batch_size",
    "local_batch_size",
    "world_size",
    "device",
    "gpu_name",
    "backend",
    "num_features",
    "num_tables",
    "num_embeddings_per_feature",
    "total_rows",
    "rows_scale",
    "multi_hot_sizes",
    "embedding_dim",
    "optimizer_type",
    "owner_policy",
    "iterations",
    "warmup_iterations",
    "forward_ms",
    "backward_ms",
    "total_ms",
    "forward_ms_per_rank",
    "backward_ms_per_rank",
    "total_ms_per_rank",
    "ids_sent_per_rank_per_iter",
    "timer",
    "torch_version",
    "fbgemm_gpu_version",
    "torchrec_version",
)


def check_record(record: dict[str, Any]) -> None:
    missing = [f for f in EC_RESULT_FIELDS if f not in record]
    extra = [f for f in record if f not in EC_RESULT_FIELDS]
    if missing or extra:
        raise ValueError(
            f"EmbeddingCollection record fields: missing {missing}, unexpected {extra}"
        )


def append_record(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append an EmbeddingCollection record to its results file (atomically, under a lock)."""
    check_record(record)
    append_to_json_list(path, record)
