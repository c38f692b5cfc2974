"""One tier of a group's storage: a hash index on the device over a row store.

A group's storage tier holds every stored id (its rows on the device, in host
memory, or split); a CACHING group adds a cache tier on the device in front of it.
The index's slot ``s`` owns row ``s`` of the store, and the index places the buckets
of the device region first, so the store's one split row is where the device
rows end (``dynemb.hash_table.BucketMap``).
"""

from __future__ import annotations

import torch

from dynemb.hash_table import BucketedHashTable, BucketMap
from dynemb.row_store import RowStore


class Tier:
    """(id, table) -> row of ``width`` floats, with eviction of the lowest-score id of a full bucket."""

    def __init__(self, buckets: BucketMap, bucket_capacity: int, width: int, device: torch.device) -> None:
        self.index = BucketedHashTable(buckets, bucket_capacity, device)
        self.rows = RowStore(self.index.capacity, width, self.index.device_slots, device)

    @property
    def version(self) -> int:
        return self.index.version

    def find(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Slot of each key of table ``table[i]``, -1 where absent."""
        return self.index.find(keys, table)[0]

    def upsert(self, keys: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Write ``rows`` of unique ``keys``: overwrite present ids, insert the rest (a full bucket evicts its
        lowest score). Returns how many ids were evicted (a device scalar)."""
        if keys.numel() == 0:
            return torch.zeros((), dtype=torch.int64, device=self.index.device)
        slots, evicted = self.index.upsert(keys, scores, table)
        self.rows.scatter(slots, rows)
        return evicted

    def items(self, table: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, full rows) of everything the tier holds of ``table``."""
        keys, slots, _ = self.index.items(table)
        return keys, self.rows.gather(slots)
