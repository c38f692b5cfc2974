"""Where a table's rows go, from its options: the storage mode and the tiers' sizes.

The reference system's rules: a table whose device budget
(``local_hbm_for_values``) holds every row is GPU; otherwise a ``caching`` table
keeps a device cache of the rows the budget holds over host storage (CACHING); a
plain table keeps that many rows on the device and the rest in host memory
(HYBRID), or all of them in host memory when the budget holds no bucket of rows
(HOST). HYBRID keeps whole buckets on the device, so its device rows are the
budget rounded down to whole buckets.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynemb.optimizers import state_width
from dynemb.options import DynamicEmbTableOptions, EmbOptimType, StorageMode

FLOAT_BYTES = 4


@dataclass(frozen=True)
class Layout:
    """A table's storage: ``num_buckets`` of ``bucket_capacity`` slots, the first ``device_buckets`` of them with
    rows in device memory; a CACHING table also has a device cache of ``cache_buckets`` x ``cache_bucket_capacity``."""

    mode: StorageMode
    width: int
    num_buckets: int
    bucket_capacity: int
    device_buckets: int
    cache_buckets: int = 0
    cache_bucket_capacity: int = 0

    @property
    def caching(self) -> bool:
        return self.mode is StorageMode.CACHING


def plan_layout(options: DynamicEmbTableOptions, optimizer: EmbOptimType) -> Layout:
    """GPU if the device budget holds every row; else CACHING (with ``caching``), HYBRID, or HOST."""
    width = options.dim + state_width(optimizer, options.dim)
    row_bytes = width * FLOAT_BYTES
    buckets, slots = options.num_buckets, options.effective_bucket_capacity
    budget = options.local_hbm_for_values
    if budget is None or budget >= options.capacity * row_bytes:
        return Layout(StorageMode.GPU, width, buckets, slots, buckets)
    budget_rows = budget // row_bytes
    if options.caching and budget_rows > 0:
        cache_slots = min(slots, budget_rows)
        return Layout(StorageMode.CACHING, width, buckets, slots, 0, budget_rows // cache_slots, cache_slots)
    device_buckets = budget_rows // slots
    return Layout(StorageMode.HYBRID if device_buckets else StorageMode.HOST, width, buckets, slots, device_buckets)
