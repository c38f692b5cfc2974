"""The host storage of caching tables that share storage: one hash table, rows in host memory kernels reach.

Laid out as the shared device cache is (``dynemb.device_group``): table ``t`` owns
buckets ``table_base[t] + [0, num_buckets_t)`` and a spare bucket, so each table's
own ``KeyValueTable`` of host storage is a view of its region. The index lives on
the device; the rows in host memory, read and written in place by device kernels
(``dynemb.host_memory``), so the misses and write-backs of a whole batch take one
kernel each instead of a copy per table through the CPU.
"""

from __future__ import annotations

import torch

from dynemb import kernels
from dynemb.hash_table import BucketedHashTable, SlotArrays
from dynemb.hashing import mix64
from dynemb.optimizers import OptimizerParams
from dynemb.options import EmbOptimType


class HostTier:
    """Host storage of every table of a group: find, read and write rows of ids given with their table."""

    def __init__(
        self, arrays: SlotArrays, rows: torch.Tensor, table_buckets: list[int], bucket_base: list[int], bucket_capacity: int, device: torch.device,
    ) -> None:
        """``rows``: ``[slots + 1, width]`` in host memory, as a tensor device kernels can use (the last row: the spare)."""
        self.arrays = arrays
        self.rows = rows
        self.bucket_capacity = bucket_capacity
        self.index = BucketedHashTable(rows.shape[0] // bucket_capacity, bucket_capacity, device, arrays)
        self.table_buckets = torch.tensor(table_buckets, dtype=torch.int64, device=device)
        self.table_base = torch.tensor(bucket_base, dtype=torch.int64, device=device)

    @property
    def spare(self) -> int:
        return self.rows.shape[0] - 1

    def buckets(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Each key's bucket in its table's region (as the table's own view hashes it)."""
        return self.table_base[table] + torch.remainder(mix64(keys), self.table_buckets[table])

    def find(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Slot of each key of table ``table[i]``, -1 where absent."""
        return kernels.find_slots(keys, self.buckets(keys, table), self.arrays.keys, self.arrays.occupied, self.bucket_capacity)

    def read(self, slots: torch.Tensor, columns: int | None = None) -> torch.Tensor:
        """Rows at ``slots`` (first ``columns`` only, if given) on the device; slot -1 reads the spare row."""
        source = self.rows if columns is None else self.rows[:, :columns]
        return kernels.gather_rows(source, torch.where(slots >= 0, slots, self.spare))

    def upsert(self, keys: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor) -> None:
        """Write ``rows`` of unique ``keys``: overwrite present ids, insert the rest (a full bucket evicts its lowest score)."""
        buckets = self.buckets(keys, table)
        slots = kernels.find_slots(keys, buckets, self.arrays.keys, self.arrays.occupied, self.bucket_capacity)
        self.index.set_scores(slots, scores)
        missing = torch.nonzero(slots < 0).squeeze(1)  # host sync: how many ids are new here
        if missing.numel():
            sorted_buckets, order = torch.sort(buckets[missing], stable=True)
            new_slots, _ = self.index.insert_sorted(sorted_buckets, order, keys[missing], scores[missing], protect=slots)
            slots[missing] = new_slots
        self.rows[torch.where(slots >= 0, slots, self.spare)] = rows

    def update(self, optimizer: EmbOptimType, slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor, params: OptimizerParams, step: int) -> None:
        """Sum the gradient rows of each id (``slots`` grouped) and step its host row in place."""
        kernels.reduce_and_update(optimizer, self.rows, slots, order, index_grads, params, step)
