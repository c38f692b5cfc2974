"""A bucketed hash table over arbitrary int64 keys, with a score per slot, for one table or many.

Layout: ``keys``, ``scores`` and ``occupied`` are ``[num_buckets, bucket_capacity]``;
an insert fills empty slots in position order and a slot, once used, only changes
owner (there is no erase), so each bucket's occupied slots are a prefix of it;
slot ``b * bucket_capacity + p`` is also the row index of the key's values in the
tier's row store. An ``occupied`` flag (not a sentinel key) marks used slots, so
every int64 is a valid key.

Many tables share one set of slot arrays (``BucketMap``): each owns a range of
buckets, split in two so that the buckets whose rows live in device memory come
first for all tables, and one split row serves the whole row store. A key's
bucket is ``mix64(key) mod num_buckets[t]`` within its table ``t``, then placed.

All operations are vectorized over a batch: a find is one probe kernel on CUDA
(chunked compares on the CPU, ``dynemb.kernels``); an insert sorts the new keys
by bucket, ranks them within it, and hands each the next free or lowest-score
slot of its bucket. No Python loop runs per key and no probe loop syncs the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import torch

from dynemb import kernels
from dynemb.kernels.operands import (
    Access,
    BucketTensors,
    DrawTables,
    Found,
    PendingArrays,
    RowParts,
    SlotArrays,
    Source,
)


@dataclass(frozen=True)
class BucketMap:
    """Which buckets of one set of slot arrays each table owns.

    Table ``t`` has ``num_buckets[t]`` buckets; its local buckets below
    ``device_buckets[t]`` lie in the device region (all tables' device buckets, one
    after another, from bucket 0), the rest in the host region that follows it.
    """

    num_buckets: tuple[int, ...]
    device_buckets: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.num_buckets or len(self.num_buckets) != len(self.device_buckets):
            raise ValueError(f"a bucket map needs one entry per table, got {self.num_buckets} and {self.device_buckets}")
        if any(n <= 0 or not 0 <= d <= n for n, d in zip(self.num_buckets, self.device_buckets, strict=True)):
            raise ValueError(f"every table needs buckets, some of them on the device: {self.num_buckets}, {self.device_buckets}")

    @classmethod
    def single(cls, num_buckets: int) -> BucketMap:
        """One table, every bucket in the device region."""
        return cls((num_buckets,), (num_buckets,))

    @property
    def num_tables(self) -> int:
        return len(self.num_buckets)

    @property
    def total_buckets(self) -> int:
        return sum(self.num_buckets)

    @property
    def device_region(self) -> int:
        """Buckets in the device region: every bucket below this one."""
        return sum(self.device_buckets)

    @property
    def device_base(self) -> list[int]:
        return [0, *accumulate(self.device_buckets)][:-1]

    @property
    def host_base(self) -> list[int]:
        host = [n - d for n, d in zip(self.num_buckets, self.device_buckets, strict=True)]
        return [self.device_region + b for b in [0, *accumulate(host)][:-1]]

    def ranges(self, table: int) -> list[tuple[int, int]]:
        """(first bucket, bucket count) of the table's device and host ranges, empty ones left out."""
        device = self.device_buckets[table]
        parts = [(self.device_base[table], device), (self.host_base[table], self.num_buckets[table] - device)]
        return [(start, count) for start, count in parts if count]

    def tensors(self, device: torch.device) -> BucketTensors:
        def as_tensor(values: list[int] | tuple[int, ...]) -> torch.Tensor:
            return torch.tensor(list(values), dtype=torch.int64, device=device)

        return BucketTensors(as_tensor(self.num_buckets), as_tensor(self.device_buckets), as_tensor(self.device_base), as_tensor(self.host_base))


@dataclass(frozen=True)
class Evicted:
    """Ids pushed out of their slots by an insert, one entry per inserted id.

    ``mask`` marks entries that are real evictions; the evicted rows are still in
    place. Kept padded so counting needs no host sync; ``compact`` pays one.
    """

    mask: torch.Tensor
    keys: torch.Tensor
    slots: torch.Tensor
    scores: torch.Tensor

    def count(self) -> torch.Tensor:
        return self.mask.sum()

    def compact(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(keys, slots, scores) of the real evictions only."""
        real = torch.nonzero(self.mask).squeeze(1)
        return self.keys[real], self.slots[real], self.scores[real]


class BucketedHashTable:
    """(key, table) -> slot map with score-based eviction inside each bucket."""

    def __init__(self, buckets: BucketMap | int, bucket_capacity: int, device: torch.device) -> None:
        """``buckets``: the tables' bucket map, or a bucket count for one table."""
        self.map = BucketMap.single(buckets) if isinstance(buckets, int) else buckets
        if bucket_capacity <= 0:
            raise ValueError(f"a hash table needs slots per bucket, got {bucket_capacity}")
        self.num_buckets = self.map.total_buckets
        self.bucket_capacity = bucket_capacity
        self.device = device
        # What every kernel of the index takes. Every per-slot array has one spare entry past the end (index
        # ``capacity``): writes for slot -1 (an absent id, a key that found no slot) land there, so batch
        # updates need no mask and no host sync. The spare is never occupied.
        self.arrays = SlotArrays.allocate(self.capacity, self.map.tensors(device), bucket_capacity, device)
        self.keys = self.arrays.keys[:-1].view(self.num_buckets, bucket_capacity)
        self.scores = self.arrays.scores[:-1].view(self.num_buckets, bucket_capacity)
        self.occupied = self.arrays.occupied[:-1].view(self.num_buckets, bucket_capacity)
        # Bumped whenever slots change owner: lets callers know if saved slots are stale.
        self.version = 0

    @property
    def pending(self) -> PendingArrays:
        """The scratch where a training lookup collects its new ids (allocated at the first one)."""
        return self._claiming().pending

    def _claiming(self) -> SlotArrays:
        """The arrays with the pending scratch (allocated at the first training lookup that claims)."""
        if self.arrays.pending is None:
            self.arrays = self.arrays.with_pending()
        return self.arrays

    @property
    def capacity(self) -> int:
        return self.num_buckets * self.bucket_capacity

    @property
    def device_slots(self) -> int:
        """Slots of the device region (their rows live in device memory)."""
        return self.map.device_region * self.bucket_capacity

    def table_capacity(self, table: int) -> int:
        return self.map.num_buckets[table] * self.bucket_capacity

    def find(self, keys: torch.Tensor, table: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(slot, bucket) of each key of table ``table[i]`` (None: the only table); slot -1 where absent."""
        return kernels.find(self.arrays, keys, table, None, 0, None)

    def find_batch(
        self, indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, access: Access | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``find`` of every index of a TBE batch (table ``t``'s bags are ``t * batch_size`` on), recording the
        lookups in ``access`` where given (scores, hits and misses)."""
        return kernels.find(self.arrays, indices, None, offsets, batch_size, access)

    def find_or_claim(
        self, indices: torch.Tensor, offsets: torch.Tensor | None, batch_size: int, access: Access | None, claim: bool,
        rows: RowParts | None = None, columns: int = 0, table: torch.Tensor | None = None, behind: BucketedHashTable | None = None,
    ) -> Found:
        """``find_batch`` (or, with ``table``, a find of keys of those tables; -1: no key) that also gives each index's
        table; with ``claim`` each absent id's pending entry and the batch's new ids (for ``insert_new``); with
        ``rows`` (device rows) each index's first ``columns``; with ``behind`` (the index behind a cache) each absent
        index's slot there, protected there too with ``claim``."""
        arrays = self._claiming() if claim else self.arrays
        outer = None if behind is None else behind.arrays
        return kernels.find_or_claim(arrays, indices, table, offsets, batch_size, access, claim, rows, columns, outer)

    def plan_new(self, found: Found, evictions: torch.Tensor) -> None:
        """Plan a slot for each new id a claiming ``find_or_claim`` found (``PendingArrays.target``): the new ids of a
        bucket ranked by id, as ``insert`` ranks them, never one of the batch's own slots (which the find marked
        protected). Reads the index only; counts evictions per table."""
        kernels.place_new(self._claiming(), found, evictions)

    def write_new(
        self, found: Found, keys: torch.Tensor, access: Access, parts: RowParts, draws: DrawTables, state_fill: float,
        source: Source | None = None,
    ) -> None:
        """Write the ids ``plan_new`` planned with their rows (into ``parts``: drawn, or from ``source``), release the
        batch's slots, and give each absent index its slot in ``found.slots`` (-1 where none)."""
        kernels.write_new(self._claiming(), found, keys, access, parts, draws, state_fill, source)
        self.version += 1

    def insert_new(
        self, found: Found, keys: torch.Tensor, access: Access, evictions: torch.Tensor, parts: RowParts, draws: DrawTables,
        state_fill: float, fresh: torch.Tensor | None,
    ) -> None:
        """Insert the ids of ``keys`` that a claiming ``find_or_claim`` found absent, each once, with their initial
        rows (into ``parts``), and count evictions per table; each absent index then gets its new id's slot in
        ``found.slots`` (-1 where none) and its initial values in its row of ``fresh``.

        Placement is ``insert``'s (the new ids of a bucket ranked by id), and the batch's own
        slots (which ``find_or_claim`` marked protected) are never evicted. How many ids are
        new only the device knows: every step here runs over the batch or loops to a device
        count, so nothing waits for the host.
        """
        if fresh is not None:  # a new id's row is its draw: its values need not wait for the write
            kernels.fresh_rows(keys, found.slots, found.table, draws, fresh, None)
        self.plan_new(found, evictions)
        self.write_new(found, keys, access, parts, draws, state_fill)

    def slot_scores(self, slots: torch.Tensor) -> torch.Tensor:
        """Scores at ``slots``; 0 for slot -1."""
        return torch.where(slots >= 0, self.arrays.scores[self.or_spare(slots)], 0)

    def or_spare(self, slots: torch.Tensor) -> torch.Tensor:
        """Each slot, the spare entry (index ``capacity``) for -1."""
        return torch.where(slots >= 0, slots, self.capacity)

    def set_scores(self, slots: torch.Tensor, scores: torch.Tensor) -> None:
        """Overwrite scores at ``slots`` (unique); slot -1 entries are ignored."""
        self.arrays.scores[self.or_spare(slots)] = scores

    def insert(
        self, keys: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None = None, table: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, Evicted]:
        """Give each new key (of table ``table[i]``; None: the only table) a slot; return the slots (-1: its
        bucket had no slot left) and the evicted keys.

        ``keys`` must be unique and absent from the table. Within a bucket the new
        keys (in the order of ``keys``) take empty slots first, then occupied slots
        by ascending score (ties: lower position first). Slots in ``protect`` (ids
        this batch already uses; -1 allowed) and slots taken by this insert are never
        evicted, so a batch never pushes out its own ids. No step syncs the host (bar
        a bulk insert on the torch path, see ``torch_ops.place_keys``).
        """
        if keys.numel() == 0:
            empty = torch.empty(0, dtype=torch.int64, device=self.device)
            return empty, Evicted(torch.empty(0, dtype=torch.bool, device=self.device), empty, empty, empty)
        _, buckets = self.find(keys, table)
        sorted_buckets, order = torch.sort(buckets, stable=True)
        return self.insert_sorted(sorted_buckets, order, keys, scores, protect)

    def insert_sorted(
        self, sorted_buckets: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None,
    ) -> tuple[torch.Tensor, Evicted]:
        """``insert`` of ``keys[order]``, whose buckets ``sorted_buckets`` (ascending) the caller found."""
        n = keys.numel()
        # Rank of each key among the new keys of its bucket: its distance from its run's start.
        rank = torch.arange(n, device=self.device) - torch.searchsorted(sorted_buckets, sorted_buckets)
        if protect is not None:
            protect = self.or_spare(protect)
            self.arrays.protected[protect] = True
        sorted_slots, evicted_mask, evicted_keys, evicted_scores = kernels.place_keys(self.arrays, sorted_buckets, rank, order, keys, scores)
        if protect is not None:
            self.arrays.protected[protect] = False
        evicted = Evicted(evicted_mask, evicted_keys, sorted_slots, evicted_scores)
        slots = torch.empty_like(sorted_slots)
        slots[order] = sorted_slots
        self.version += 1
        return slots, evicted

    def upsert(
        self, keys: torch.Tensor, scores: torch.Tensor, table: torch.Tensor | None = None, protect: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Slots for unique ``keys`` whether present or new, with ``scores`` set; and how many ids were evicted
        (a device scalar). New keys are inserted as by ``insert`` (one host sync: whether any is new), never into
        the slots of present keys or of ``protect`` (-1 allowed)."""
        slots, buckets = self.find(keys, table)
        self.set_scores(slots, scores)
        missing = torch.nonzero(slots < 0).squeeze(1)
        if missing.numel() == 0:
            return slots, torch.zeros((), dtype=torch.int64, device=self.device)
        sorted_buckets, order = torch.sort(buckets[missing], stable=True)
        kept = slots if protect is None else torch.cat([slots, protect])
        new_slots, evicted = self.insert_sorted(sorted_buckets, order, keys[missing], scores[missing], protect=kept)
        slots[missing] = new_slots
        return slots, evicted.count()

    def max_keys_per_bucket(self, keys: torch.Tensor, table: torch.Tensor | None = None) -> int:
        """Most of ``keys`` that share one bucket: above bucket_capacity, one insert cannot hold them all."""
        if keys.numel() == 0:
            return 0
        _, buckets = self.find(keys, table)
        return int(torch.bincount(buckets, minlength=1).max())

    def _table_slots(self, table: int | None) -> torch.Tensor:
        """Occupied slots of ``table`` (None: of every table), ascending."""
        ranges = [(0, self.num_buckets)] if table is None else self.map.ranges(table)
        cap = self.bucket_capacity
        parts = [torch.nonzero(self.arrays.occupied[start * cap : (start + count) * cap]).squeeze(1) + start * cap for start, count in ranges]
        return torch.cat(parts)

    def items(self, table: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(keys, slots, scores) of every occupied slot of ``table`` (None: of all), in slot order."""
        slots = self._table_slots(table)
        return self.arrays.keys[slots], slots, self.arrays.scores[slots]

    def size(self, table: int | None = None) -> int:
        return int(self._table_slots(table).numel())
