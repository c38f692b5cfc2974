"""Dynamic embedding tables: hash-table-backed, int64 keys, GPU / host / cached storage."""

from dynemb.options import (
    DynamicEmbInitializerArgs,
    DynamicEmbInitializerMode,
    DynamicEmbScoreStrategy,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
    StorageMode,
)
from dynemb.tables import BatchedDynamicEmbeddingTables

__all__ = [
    "BatchedDynamicEmbeddingTables",
    "DynamicEmbInitializerArgs",
    "DynamicEmbInitializerMode",
    "DynamicEmbScoreStrategy",
    "DynamicEmbTableOptions",
    "EmbOptimType",
    "PoolingMode",
    "StorageMode",
]
