"""Enums and per-table options: the vocabulary shared with TorchRec/FBGEMM and the reference system.

Names and values follow NVIDIA dynamicemb and FBGEMM's TBE so a benchmark can drive
both libraries with the same words. ``StorageMode`` is never set by a user: it is
derived from capacity, row bytes, ``local_hbm_for_values`` and ``caching``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field


class EmbOptimType(enum.Enum):
    """Optimizers fused into the backward pass (TBE's names)."""

    EXACT_SGD = "exact_sgd"
    ADAM = "adam"
    EXACT_ADAGRAD = "exact_adagrad"
    EXACT_ROWWISE_ADAGRAD = "exact_row_wise_adagrad"


class PoolingMode(enum.Enum):
    """How the rows of one bag combine: NONE keeps a row per index (sequence embedding)."""

    SUM = 0
    MEAN = 1
    NONE = 2


class DynamicEmbScoreStrategy(enum.Enum):
    """What a slot's score means; the lowest score in a full bucket is evicted.

    TIMESTAMP: the table's logical clock at the last access (least recently used goes).
    LFU: how often the id was looked up (least frequently used goes).
    """

    TIMESTAMP = 0
    LFU = 3


class DynamicEmbInitializerMode(enum.Enum):
    """Distribution a new id's embedding is drawn from."""

    NORMAL = "normal"
    TRUNCATED_NORMAL = "truncated_normal"
    UNIFORM = "uniform"
    CONSTANT = "constant"


class StorageMode(enum.Enum):
    """Where a table's rows live (derived, read-only).

    GPU: every row in device memory. CACHING: a device cache over host storage.
    HYBRID: one table whose rows are partly in device and partly in host memory.
    HOST: every row in host memory (keys and scores stay on the device).
    """

    GPU = "gpu"
    CACHING = "caching"
    HYBRID = "hybrid"
    HOST = "host"


@dataclass(frozen=True)
class DynamicEmbInitializerArgs:
    """Parameters of one initializer; ``lower``/``upper`` of None mean the mode's default."""

    mode: DynamicEmbInitializerMode = DynamicEmbInitializerMode.UNIFORM
    mean: float = 0.0
    std_dev: float = 1.0
    lower: float | None = None
    upper: float | None = None
    value: float = 0.0


def _default_eval_initializer() -> DynamicEmbInitializerArgs:
    return DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.CONSTANT, value=0.0)


@dataclass(frozen=True)
class DynamicEmbTableOptions:
    """Options of one table.

    ``local_hbm_for_values``: bytes of device memory for rows (embedding plus optimizer
    state); None means as much as the whole table needs. ``max_capacity`` is rounded up
    to whole buckets. ``seed`` makes initial values a pure function of (seed, id), so a
    given id starts from the same vector whatever batch or storage mode brings it in.
    """

    dim: int = 128
    max_capacity: int = 1 << 20
    local_hbm_for_values: int | None = None
    caching: bool = False
    score_strategy: DynamicEmbScoreStrategy = DynamicEmbScoreStrategy.TIMESTAMP
    initializer_args: DynamicEmbInitializerArgs = field(default_factory=DynamicEmbInitializerArgs)
    eval_initializer_args: DynamicEmbInitializerArgs = field(default_factory=_default_eval_initializer)
    bucket_capacity: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dim <= 0:
            raise ValueError(f"dim must be positive, got {self.dim}")
        if self.max_capacity <= 0:
            raise ValueError(f"max_capacity must be positive, got {self.max_capacity}")
        if self.bucket_capacity <= 0:
            raise ValueError(f"bucket_capacity must be positive, got {self.bucket_capacity}")
        if self.local_hbm_for_values is not None and self.local_hbm_for_values < 0:
            raise ValueError(f"local_hbm_for_values must be >= 0 or None, got {self.local_hbm_for_values}")

    @property
    def effective_bucket_capacity(self) -> int:
        """Slots per bucket: never more than the table holds."""
        return min(self.bucket_capacity, self.max_capacity)

    @property
    def num_buckets(self) -> int:
        return math.ceil(self.max_capacity / self.effective_bucket_capacity)

    @property
    def capacity(self) -> int:
        """Rows the table can hold: ``max_capacity`` rounded up to whole buckets."""
        return self.num_buckets * self.effective_bucket_capacity
