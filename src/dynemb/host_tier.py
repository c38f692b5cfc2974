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


class HostTier:
    """Host storage of every table of a group: find, read and write rows of ids given with their table."""

    def __init__(
        self, arrays: SlotArrays, rows: torch.Tensor, table_buckets: list[int], bucket_base: list[int], bucket_capacity: int, device: torch.device,
    ) -> None:
        """``rows``: ``[slots + 1, width]`` in host memory, as a tensor device kernels can use (the last row: the spare)."""
        self.rows = rows
        self.index = BucketedHashTable(rows.shape[0] // bucket_capacity, bucket_capacity, device, arrays)
        self.table_buckets = torch.tensor(table_buckets, dtype=torch.int64, device=device)
        self.table_base = torch.tensor(bucket_base, dtype=torch.int64, device=device)

    def buckets(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Each key's bucket in its table's region (as the table's own view hashes it)."""
        return self.table_base[table] + torch.remainder(mix64(keys), self.table_buckets[table])

    def find(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Slot of each key of table ``table[i]``, -1 where absent."""
        return self.index.find(keys, self.buckets(keys, table))

    def read(self, slots: torch.Tensor, columns: int | None = None) -> torch.Tensor:
        """Rows at ``slots`` (first ``columns`` only, if given) on the device; slot -1 reads the spare row."""
        source = self.rows if columns is None else self.rows[:, :columns]
        return kernels.gather_rows(source, self.index.or_spare(slots))

    def upsert(self, keys: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor) -> None:
        """Write ``rows`` of unique ``keys``: overwrite present ids, insert the rest (a full bucket evicts its lowest score)."""
        slots, _ = self.index.upsert(keys, scores, self.buckets(keys, table))
        self.rows[self.index.or_spare(slots)] = rows
