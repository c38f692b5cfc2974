"""One tier of storage: a bucketed hash table whose slots index a row store."""

from __future__ import annotations

import torch

from dynemb.hash_table import BucketedHashTable, Evicted, SlotArrays
from dynemb.row_store import RowStore


class KeyValueTable:
    """id -> row of ``width`` floats, with eviction of the lowest-score id of a full bucket."""

    def __init__(
        self, num_buckets: int, bucket_capacity: int, width: int, device_rows: int, device: torch.device,
        shared: tuple[SlotArrays, torch.Tensor] | None = None,
    ) -> None:
        """``shared``: (slot arrays, rows) as views of a group's storage, instead of its own (``RowStore``)."""
        arrays, rows = (None, None) if shared is None else shared
        self.index = BucketedHashTable(num_buckets, bucket_capacity, device, arrays)
        self.rows = RowStore(self.index.capacity, width, device_rows, device, rows)
        self.device = device

    @property
    def capacity(self) -> int:
        return self.index.capacity

    @property
    def version(self) -> int:
        return self.index.version

    def find(self, keys: torch.Tensor) -> torch.Tensor:
        return self.index.find(keys)

    def insert(self, keys: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None = None) -> tuple[torch.Tensor, Evicted]:
        """Slots for new ``keys`` (rows not yet written); evicted ids' rows are still readable."""
        return self.index.insert(keys, scores, protect)

    def upsert(self, keys: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Write ``rows`` for unique ``keys``, overwriting present ids and inserting the rest.

        Returns how many ids were evicted to make room (a device scalar). Used for
        write-back from a cache and for loading checkpoints.
        """
        if keys.numel() == 0:
            return torch.zeros((), dtype=torch.int64, device=self.device)
        slots, evicted = self.index.upsert(keys, scores)
        self.rows.scatter(slots, rows)
        return evicted

    def items(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, rows, scores) of everything stored."""
        keys, slots, scores = self.index.items()
        return keys, self.rows.gather(slots), scores

    def size(self) -> int:
        return self.index.size()
