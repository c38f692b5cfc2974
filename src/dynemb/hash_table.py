"""A bucketed hash table over arbitrary int64 keys, with a score per slot.

Layout: ``keys``, ``scores`` and ``occupied`` are ``[num_buckets, bucket_capacity]``;
an insert fills empty slots in position order and a slot, once used, only changes
owner (there is no erase), so each bucket's occupied slots are a prefix of it;
slot ``b * bucket_capacity + p`` is also the row index of the key's values in the
row store. An ``occupied`` flag (not a sentinel key) marks used slots, so every
int64 is a valid key. All operations are vectorized over a batch of keys: a find
is one probe kernel on CUDA (one gather of the candidate buckets and one compare
on the CPU, ``dynemb.kernels``); an insert sorts the new
keys by bucket, ranks them within it, and hands each the next free or lowest-score
slot of its bucket. No Python loop runs per key and no probe loop syncs the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dynemb import kernels


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
    """The per-slot arrays of a hash table, each one entry longer than its slots (the spare).

    A table allocates its own, or takes views of a larger set (``region``): tables
    whose rows all live on the device share one set, so one kernel serves them all
    (``dynemb.device_group``).
    """

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

    def region(self, start: int, length: int) -> SlotArrays:
        """Views of entries ``start:start + length``."""
        return SlotArrays(*(array[start : start + length] for array in (self.keys, self.scores, self.occupied, self.protected)))


class BucketedHashTable:
    """Key -> slot map with score-based eviction inside each bucket."""

    def __init__(self, num_buckets: int, bucket_capacity: int, device: torch.device, arrays: SlotArrays | None = None) -> None:
        if num_buckets <= 0 or bucket_capacity <= 0:
            raise ValueError(f"a hash table needs buckets and slots, got {num_buckets} x {bucket_capacity}")
        self.num_buckets = num_buckets
        self.bucket_capacity = bucket_capacity
        self.device = device
        # Every per-slot array has one spare entry past the end (index ``capacity``):
        # writes for slot -1 (an absent id, a key that found no slot) land there, so
        # batch updates need no mask and no host sync. The spare is never occupied.
        arrays = SlotArrays.allocate(self.capacity + 1, device) if arrays is None else arrays
        if arrays.keys.numel() != self.capacity + 1:
            raise ValueError(f"slot arrays of {arrays.keys.numel()} entries for {self.capacity} slots and a spare")
        self._keys, self._scores, self._occupied, self._protected = arrays.keys, arrays.scores, arrays.occupied, arrays.protected
        self.keys = self._keys[:-1].view(num_buckets, bucket_capacity)
        self.scores = self._scores[:-1].view(num_buckets, bucket_capacity)
        self.occupied = self._occupied[:-1].view(num_buckets, bucket_capacity)
        # Bumped whenever slots change owner: lets callers know if saved slots are stale.
        self.version = 0

    @property
    def capacity(self) -> int:
        return self.num_buckets * self.bucket_capacity

    def buckets(self, keys: torch.Tensor) -> torch.Tensor:
        return kernels.bucket_of(keys, self.num_buckets)

    def find(self, keys: torch.Tensor, buckets: torch.Tensor | None = None) -> torch.Tensor:
        """Slot of each key, -1 where absent (one probe kernel on CUDA, chunked compares on the CPU).

        ``buckets``: each key's bucket where the caller chose it (tables sharing one set of
        arrays hash into their own bucket range); by default ``self.buckets(keys)``.
        """
        buckets = self.buckets(keys) if buckets is None else buckets
        return kernels.find_slots(keys, buckets, self._keys, self._occupied, self.bucket_capacity)

    def find_and_touch(
        self, keys: torch.Tensor, counts: torch.Tensor, clock: int, add_counts: bool, hits: torch.Tensor, misses: torch.Tensor,
    ) -> torch.Tensor:
        """``find``, then each found key's score becomes ``clock`` (or grows by its count, ``add_counts``);
        ``hits``/``misses`` (device scalars) grow by the keys found/absent. One kernel on CUDA."""
        return kernels.find_and_touch(
            keys, self.buckets(keys), self._keys, self._occupied, self._scores, self.bucket_capacity, counts, clock, add_counts, hits, misses,
        )

    def slot_scores(self, slots: torch.Tensor) -> torch.Tensor:
        """Scores at ``slots``; 0 for slot -1."""
        return torch.where(slots >= 0, self._scores[self.or_spare(slots)], 0)

    def or_spare(self, slots: torch.Tensor) -> torch.Tensor:
        """Each slot, the spare entry (index ``capacity``) for -1."""
        return torch.where(slots >= 0, slots, self.capacity)

    def set_scores(self, slots: torch.Tensor, scores: torch.Tensor) -> None:
        """Overwrite scores at ``slots`` (unique); slot -1 entries are ignored."""
        self._scores[self.or_spare(slots)] = scores

    def add_scores(self, slots: torch.Tensor, increments: torch.Tensor) -> None:
        """Add to scores at ``slots`` (unique); slot -1 entries are ignored."""
        self._scores.index_add_(0, self.or_spare(slots), increments)

    def insert(self, keys: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None = None) -> tuple[torch.Tensor, Evicted]:
        """Give each new key a slot; return the slots (-1: its bucket had no slot left) and the evicted keys.

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
        sorted_buckets, order = torch.sort(self.buckets(keys), stable=True)
        return self.insert_sorted(sorted_buckets, order, keys, scores, protect)

    def insert_sorted(
        self, sorted_buckets: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None,
    ) -> tuple[torch.Tensor, Evicted]:
        """``insert`` of ``keys[order]``, whose buckets ``sorted_buckets`` (ascending) the caller chose.

        Tables sharing one set of arrays give each key a bucket of its own table's range.
        """
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

    def upsert(self, keys: torch.Tensor, scores: torch.Tensor, buckets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Slots for unique ``keys`` whether present or new, with ``scores`` set; and how many ids were evicted
        (a device scalar). New keys are inserted as by ``insert`` (one host sync: whether any is new)."""
        buckets = self.buckets(keys) if buckets is None else buckets
        slots = self.find(keys, buckets)
        self.set_scores(slots, scores)
        missing = torch.nonzero(slots < 0).squeeze(1)
        if missing.numel() == 0:
            return slots, torch.zeros((), dtype=torch.int64, device=self.device)
        sorted_buckets, order = torch.sort(buckets[missing], stable=True)
        new_slots, evicted = self.insert_sorted(sorted_buckets, order, keys[missing], scores[missing], protect=slots)
        slots[missing] = new_slots
        return slots, evicted.count()

    def max_keys_per_bucket(self, keys: torch.Tensor) -> int:
        """Most of ``keys`` that share one bucket: above bucket_capacity, one insert cannot hold them all."""
        if keys.numel() == 0:
            return 0
        return int(torch.bincount(self.buckets(keys), minlength=1).max())

    def items(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(keys, slots, scores) of every occupied slot, in slot order."""
        slots = torch.nonzero(self.occupied.view(-1)).squeeze(1)
        return self._keys[slots], slots, self._scores[slots]

    def size(self) -> int:
        return int(self.occupied.sum())
