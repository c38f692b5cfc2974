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
from dynemb.kernels.operands import BucketTensors, DrawTables, PendingArrays, RowParts


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


@dataclass(frozen=True)
class SlotArrays:
    """The per-slot arrays of a hash table, each one entry longer than its slots (the spare)."""

    keys: torch.Tensor
    scores: torch.Tensor
    occupied: torch.Tensor
    protected: torch.Tensor

    @classmethod
    def allocate(cls, length: int, device: torch.device) -> SlotArrays:
        return cls(
            torch.zeros(length, dtype=torch.int64, device=device),
            torch.zeros(length, dtype=torch.int64, device=device),
            torch.zeros(length, dtype=torch.bool, device=device),
            torch.zeros(length, dtype=torch.bool, device=device),
        )


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
        self.bucket_tensors = self.map.tensors(device)
        # Every per-slot array has one spare entry past the end (index ``capacity``):
        # writes for slot -1 (an absent id, a key that found no slot) land there, so
        # batch updates need no mask and no host sync. The spare is never occupied.
        arrays = SlotArrays.allocate(self.capacity + 1, device)
        self._keys, self._scores, self._occupied, self._protected = arrays.keys, arrays.scores, arrays.occupied, arrays.protected
        self.keys = self._keys[:-1].view(self.num_buckets, bucket_capacity)
        self.scores = self._scores[:-1].view(self.num_buckets, bucket_capacity)
        self.occupied = self._occupied[:-1].view(self.num_buckets, bucket_capacity)
        # Bumped whenever slots change owner: lets callers know if saved slots are stale.
        self.version = 0
        self._pending: PendingArrays | None = None

    @property
    def pending(self) -> PendingArrays:
        """The scratch where a training lookup collects its new ids (allocated at the first one)."""
        if self._pending is None:
            length = self.capacity + 1
            self._pending = PendingArrays(
                torch.full((length,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=self.device),
                torch.zeros(length, dtype=torch.int32, device=self.device),
                torch.zeros(length, dtype=torch.int64, device=self.device),
                torch.full((length,), -1, dtype=torch.int64, device=self.device),
            )
        return self._pending

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
        return self._find(keys, table, None, 0, touch=False)

    def find_batch(
        self, indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, touch: bool = False, clock: int = 0,
        add_counts: bool = False, hits: torch.Tensor | None = None, misses: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``find`` of every index of a TBE batch (table ``t``'s bags are ``t * batch_size`` on).

        With ``touch`` a found slot's score becomes ``clock`` (``add_counts``: grows by one
        per index), and ``hits[t]``/``misses[t]`` count lookups per index.
        """
        return self._find(indices, None, offsets, batch_size, touch, clock, add_counts, hits, misses)

    def _find(
        self, keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, touch: bool,
        clock: int = 0, add_counts: bool = False, hits: torch.Tensor | None = None, misses: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        counters = self._keys if hits is None else hits
        return kernels.find(
            keys, table, offsets, batch_size, self.bucket_tensors, self._keys, self._occupied, self._scores, self.bucket_capacity,
            clock, add_counts, touch, counters, counters if misses is None else misses,
        )

    def find_or_claim(
        self, indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, touch: bool, clock: int, add_counts: bool,
        hits: torch.Tensor, misses: torch.Tensor, claim: bool, rows: RowParts | None = None, columns: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None]:
        """``find_batch`` that also gives each index's table; with ``claim`` each absent id's pending entry and the
        batch's new ids (for ``insert_new``); with ``rows`` (device rows) each index's first ``columns``:
        (slots, buckets, table, entry, rows read, new ids)."""
        return kernels.find_or_claim(
            indices, offsets, batch_size, self.bucket_tensors, self._keys, self._occupied, self._scores, self.bucket_capacity,
            clock, add_counts, touch, hits, misses, self.pending if claim else None, self._protected, rows, columns,
        )

    def insert_new(
        self, slots: torch.Tensor, buckets: torch.Tensor, entry: torch.Tensor, new: tuple[torch.Tensor, torch.Tensor], table: torch.Tensor,
        keys: torch.Tensor, evictions: torch.Tensor, parts: RowParts, draws: DrawTables, state_fill: float, dim: int, clock: int, lfu: bool,
        fresh: torch.Tensor,
    ) -> None:
        """Insert the ids ``find_or_claim`` found absent (``new``), each once, with their initial rows (into
        ``parts``), and count evictions per table; each absent index then gets its new id's slot in ``slots``
        (-1 where none) and its initial values in its row of ``fresh``.

        Placement is ``insert``'s (the new ids of a bucket ranked by id), and the batch's own
        slots (which ``find_or_claim`` marked protected) are never evicted. How many ids are
        new only the device knows: every step here runs over the batch or loops to a device
        count, so nothing waits for the host.
        """
        pending = self.pending
        reps, count = new
        kernels.place_new(reps, count, buckets, entry, table, pending, self._occupied, self._scores, self._protected, evictions, self.bucket_capacity)
        kernels.write_new(
            reps, count, keys, entry, table, pending, self._keys, self._scores, self._occupied, self._protected, parts, draws,
            state_fill, dim, clock, lfu, slots, fresh,
        )
        self.version += 1

    def slot_scores(self, slots: torch.Tensor) -> torch.Tensor:
        """Scores at ``slots``; 0 for slot -1."""
        return torch.where(slots >= 0, self._scores[self.or_spare(slots)], 0)

    def or_spare(self, slots: torch.Tensor) -> torch.Tensor:
        """Each slot, the spare entry (index ``capacity``) for -1."""
        return torch.where(slots >= 0, slots, self.capacity)

    def set_scores(self, slots: torch.Tensor, scores: torch.Tensor) -> None:
        """Overwrite scores at ``slots`` (unique); slot -1 entries are ignored."""
        self._scores[self.or_spare(slots)] = scores

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
        cap = self.bucket_capacity
        # Rank of each key among the new keys of its bucket: its distance from its run's start.
        rank = torch.arange(n, device=self.device) - torch.searchsorted(sorted_buckets, sorted_buckets)
        if protect is not None:
            protect = self.or_spare(protect)
            self._protected[protect] = True
        sorted_slots, evicted_mask, evicted_keys, evicted_scores = kernels.place_keys(
            sorted_buckets, rank, order, keys, scores, self._keys, self._scores, self._occupied, self._protected, cap,
        )
        if protect is not None:
            self._protected[protect] = False
        evicted = Evicted(evicted_mask, evicted_keys, sorted_slots, evicted_scores)
        slots = torch.empty_like(sorted_slots)
        slots[order] = sorted_slots
        self.version += 1
        return slots, evicted

    def upsert(self, keys: torch.Tensor, scores: torch.Tensor, table: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Slots for unique ``keys`` whether present or new, with ``scores`` set; and how many ids were evicted
        (a device scalar). New keys are inserted as by ``insert`` (one host sync: whether any is new)."""
        slots, buckets = self.find(keys, table)
        self.set_scores(slots, scores)
        missing = torch.nonzero(slots < 0).squeeze(1)
        if missing.numel() == 0:
            return slots, torch.zeros((), dtype=torch.int64, device=self.device)
        sorted_buckets, order = torch.sort(buckets[missing], stable=True)
        new_slots, evicted = self.insert_sorted(sorted_buckets, order, keys[missing], scores[missing], protect=slots)
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
        parts = [torch.nonzero(self._occupied[start * cap : (start + count) * cap]).squeeze(1) + start * cap for start, count in ranges]
        return torch.cat(parts)

    def items(self, table: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(keys, slots, scores) of every occupied slot of ``table`` (None: of all), in slot order."""
        slots = self._table_slots(table)
        return self._keys[slots], slots, self._scores[slots]

    def size(self, table: int | None = None) -> int:
        return int(self._table_slots(table).numel())
