"""One tier of a group's storage: ids to rows, a hash index on the device over a row store.

A group's storage tier holds every stored id (its rows on the device, in host
memory, or split); a CACHING group adds a cache tier on the device in front of it.
The index's slot ``s`` owns row ``s`` of the store, and the index places the buckets
of the device region first, so the store's one split row is where the device
rows end (``dynemb.hash_table.BucketMap``).

The tier is what a group works with: it keeps slots and rows in step (an upsert
writes the rows of the slots it found or gave, the find of a training lookup reads
rows in the same pass where they are on the device, the insert of its new ids writes
their initial rows), decides how slots are sorted (int32 where every slot fits), and
passes everything else on; the group never reaches into its index or its store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dynemb import kernels
from dynemb.counters import HostTraffic, new_ids
from dynemb.hash_table import BucketedHashTable, BucketMap, Evicted
from dynemb.kernels.operands import Access, DrawTables, Found, OptimizerArgs, RowParts, Source
from dynemb.ranges import op_range
from dynemb.row_store import RowStore

if TYPE_CHECKING:
    from dynemb.group import GroupBatch


class Tier:
    """(id, table) -> row of ``width`` floats, with eviction of the lowest-score id of a full bucket."""

    def __init__(self, buckets: BucketMap, bucket_capacity: int, width: int, device: torch.device) -> None:
        self._index = BucketedHashTable(buckets, bucket_capacity, device)
        self._rows = RowStore(self._index.capacity, width, self._index.device_slots, device)
        # Sorting a batch's slots groups each id's indices; slots below 2**31 sort as int32 (half the radix passes).
        self.slot_dtype = torch.int32 if self._index.capacity < 2**31 else torch.int64

    # --- what the tier is -------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Changes whenever a slot changes owner: lets callers know if saved slots are stale."""
        return self._index.version

    def advance(self, versions: int) -> None:
        """Count ``versions`` owner changes the host did not see (a CUDA graph's replay of an insert)."""
        self._index.version += versions

    @property
    def bucket_capacity(self) -> int:
        return self._index.bucket_capacity

    @property
    def device_only(self) -> bool:
        """Every row (the spare too) is in device memory."""
        return self._rows.device_only

    @property
    def mapped(self) -> bool:
        """Kernels reach every row where it is (no copies)."""
        return self._rows.mapped

    @property
    def host_from(self) -> int | None:
        """The first slot whose row is in host memory; None where every row is on the device."""
        return None if self._rows.device_only else self._rows.split

    def device_rows(self, columns: int) -> torch.Tensor:
        """The first ``columns`` of the rows in device memory, as a view (indexed by slot; the spare row last)."""
        return self._rows.device_part[:, :columns]

    def or_spare(self, slots: torch.Tensor) -> torch.Tensor:
        """Each slot, the spare entry (the index's capacity) for -1."""
        return self._index.or_spare(slots)

    # --- finding ids -------------------------------------------------------------------------------------

    def find(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Slot of each key of table ``table[i]``, -1 where absent."""
        return self._index.find(keys, table)[0]

    def find_batch(self, batch: GroupBatch, access: Access | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(slot, bucket) of every index of a TBE batch, recording the lookups in ``access`` where given."""
        return self._index.find_batch(batch.indices, batch.offsets, batch.batch_size, access)

    def find_or_claim(self, batch: GroupBatch, access: Access | None, claim: bool, columns: int, behind: Tier | None = None) -> Found:
        """``find_batch`` that also gives each index's table and (``columns``, where every row is on the device) its
        first ``columns`` read in the same pass; with ``claim``, the batch's new ids for ``insert_new``; with
        ``behind`` (the tier behind a cache), each absent index's slot there (``Found.outer``)."""
        rows, columns = (self._rows.parts(), columns) if columns and self._rows.device_only else (None, 0)
        outer = None if behind is None else behind._index
        return self._index.find_or_claim(batch.indices, batch.offsets, batch.batch_size, access, claim, rows, columns, behind=outer)

    def find_keys(self, keys: torch.Tensor, table: torch.Tensor, access: Access, claim: bool) -> Found:
        """``find_or_claim`` of keys of given tables (-1: no key) rather than a batch."""
        return self._index.find_or_claim(keys, None, 0, access, claim, table=table)

    def insert_new(
        self, found: Found, keys: torch.Tensor, access: Access, evictions: torch.Tensor, draws: DrawTables, state_fill: float,
        fresh: torch.Tensor | None,
    ) -> None:
        """Insert the new ids a claiming ``find_or_claim`` found, with their initial rows
        (``BucketedHashTable.insert_new``): no host sync."""
        self._index.insert_new(found, keys, access, evictions, self._rows.parts(), draws, state_fill, fresh)

    def plan_new(self, found: Found, evictions: torch.Tensor) -> None:
        """The first half of ``insert_new``: each new id's slot planned, nothing written (``BucketedHashTable.plan_new``)."""
        self._index.plan_new(found, evictions)

    def write_new(self, found: Found, keys: torch.Tensor, access: Access, draws: DrawTables, state_fill: float, source: Source | None) -> None:
        """The second half: the planned ids written with their rows, drawn or taken from ``source``."""
        self._index.write_new(found, keys, access, self._rows.parts(), draws, state_fill, source)

    def source(self, slots: torch.Tensor, carry: bool, spill: torch.Tensor | None = None, base: int = 0) -> Source:
        """This tier as the place another tier's new rows come from: the rows at ``slots`` (``Source``)."""
        return Source(self._index.arrays, self._rows.parts(), slots, carry, spill, base)

    def fresh_rows(self, keys: torch.Tensor, found: Found, draws: DrawTables, dst: torch.Tensor) -> None:
        """Each absent index's initial values (an eval lookup's: nothing is stored) into its row of ``dst``."""
        kernels.fresh_rows(keys, found.slots, found.table, draws, dst, None)

    def addresses(self, batch: GroupBatch) -> torch.Tensor:
        """Each index's slot (-1: absent), finding the batch again (a plan made stale by a later insert)."""
        return self.find_batch(batch)[0]

    # --- rows --------------------------------------------------------------------------------------------

    def gather(self, slots: torch.Tensor, columns: int | None = None) -> torch.Tensor:
        """The first ``columns`` (default: all) of each slot's row, on the device; the spare row for -1."""
        return self._rows.gather(slots, columns)

    def gather_unique(self, sorted_slots: torch.Tensor, order: torch.Tensor, columns: int) -> torch.Tensor:
        """``gather`` given the slots sorted: each distinct host row crosses the bus about once."""
        return self._rows.gather_unique(sorted_slots, order, columns)

    def scatter(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Write full rows at each slot's row (slot -1: the spare row)."""
        self._rows.scatter(slots, rows)

    def reduce_and_update(self, sorted_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor, optimizer: OptimizerArgs) -> None:
        """Sum each id's gradient rows (its slot's run in ``sorted_slots``) and step its row once, in place."""
        self._rows.reduce_and_update(sorted_slots, order, index_grads, optimizer)

    # --- inserting and reading whole tables --------------------------------------------------------------

    def insert_sorted(
        self, sorted_buckets: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None,
    ) -> tuple[torch.Tensor, Evicted]:
        """Slots for new ids, evicting as ``BucketedHashTable.insert_sorted`` does; their rows are the caller's to write."""
        return self._index.insert_sorted(sorted_buckets, order, keys, scores, protect)

    def slot_scores(self, slots: torch.Tensor) -> torch.Tensor:
        """Scores at ``slots``; 0 for slot -1."""
        return self._index.slot_scores(slots)

    def upsert(
        self, keys: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor, protect: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Write ``rows`` of unique ``keys``: overwrite present ids, insert the rest (a full bucket evicts its
        lowest score, never a slot of ``protect``). Returns how many ids were evicted (a device scalar)."""
        if keys.numel() == 0:
            return torch.zeros((), dtype=torch.int64, device=self._index.device)
        slots, evicted = self._index.upsert(keys, scores, table, protect)
        self._rows.scatter(slots, rows)
        return evicted

    def max_keys_per_bucket(self, keys: torch.Tensor, table: torch.Tensor) -> int:
        """Most of ``keys`` that share one bucket: above bucket_capacity, one insert cannot hold them all."""
        return self._index.max_keys_per_bucket(keys, table)

    def ids(self, table: int) -> torch.Tensor:
        """Every id the tier holds of ``table``, in slot order."""
        return self._index.items(table)[0]

    def items(self, table: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, full rows) of everything the tier holds of ``table``."""
        keys, slots, _ = self._index.items(table)
        return keys, self._rows.gather(slots)

    def size(self, table: int) -> int:
        return self._index.size(table)

    def table_capacity(self, table: int) -> int:
        return self._index.table_capacity(table)


class CachedTier:
    """A device cache in front of a storage tier, seen by a group as one tier: the sync-free lookup of a CACHING
    group, written once for both tiers, as TBE's LRU cache over its UVM rows.

    The group's rows form one address space: the cache's rows (its spare included), then the storage's from
    ``base`` on (all in host memory), so one address tells every row kernel where an index's row is and one
    fused update steps a batch whose ids a cache could not hold in storage (``parts``). A find probes the cache
    and, for each absent index, the storage (``Found.outer``). Its insert moves each row once, in a few kernels
    over the batch and without a host sync: the cache plans a slot for each missed id (``plan_new``); the ids
    those slots hold, and the indices the cache could not place, go to the storage in one pass (``outgoing``,
    then a claiming find, a plan and a write whose rows come straight from the cache slots they leave); then
    the cache writes its new ids with their rows read straight from storage (or drawn, for ids it holds
    nowhere), and gives each index it could not place its storage address; each absent index's values are then
    read from the row at its address (``fresh_rows``), so a stored row crosses the link once. A missed id's stored row is
    protected from the write-back's evictions until it has been read. The rows the insert moves are counted
    in ``traffic`` (``dynemb.counters.HostTraffic``) on the device.
    """

    def __init__(self, cache: Tier, storage: Tier, traffic: HostTraffic) -> None:
        cache_parts, storage_parts = cache._rows.parts(), storage._rows.parts()
        if storage_parts.split != 0:
            raise ValueError("a cache's storage keeps its rows in host memory")
        self.cache, self.storage, self.traffic = cache, storage, traffic
        self.base = cache_parts.spare + 1
        self.parts = RowParts(cache_parts.device, storage_parts.host, self.base, self.base + storage_parts.spare)
        self.slot_dtype = torch.int32 if self.parts.spare < 2**31 else torch.int64
        tables = storage._index.map.num_tables
        device = cache_parts.device.device
        # The storage's own lookups (the indices the cache could not place) and evictions are not the cache's: not counted.
        self._uncounted = [torch.zeros(tables, dtype=torch.int64, device=device) for _ in range(3)]

    @property
    def version(self) -> int:
        """Changes whenever a slot of either tier changes owner."""
        return self.cache.version + self.storage.version

    @property
    def device_only(self) -> bool:
        """A find reads rows from device memory only (the cache's; stored rows come in through the insert)."""
        return True

    @property
    def host_from(self) -> int:
        """The first address in host memory: the storage's rows."""
        return self.base

    def device_rows(self, columns: int) -> torch.Tensor:
        return self.cache.device_rows(columns)

    def find_or_claim(self, batch: GroupBatch, access: Access | None, claim: bool, columns: int) -> Found:
        """The cache's ``find_or_claim`` that also finds each absent index in storage (``Found.outer``)."""
        return self.cache.find_or_claim(batch, access, claim, columns, behind=self.storage)

    def insert_new(
        self, found: Found, keys: torch.Tensor, access: Access, evictions: torch.Tensor, draws: DrawTables, state_fill: float,
        fresh: torch.Tensor | None,
    ) -> None:
        """Bring the batch's missed ids into the cache and write the ids they evict back to storage, each row moved
        once; each absent index gets its address (cache slot, else ``base`` plus its storage slot, else -1) in
        ``found.slots`` and its values (its stored row, else its draw) in its row of ``fresh``."""
        self.cache.plan_new(found, evictions)
        with op_range("storage_insert"):
            out_keys, out_table, leaving = kernels.outgoing(self.cache._index.arrays, found, keys)
            hits, misses, evicted = self._uncounted
            there = Access(access.clock, access.add_counts, hits, misses)
            stored = self.storage.find_keys(out_keys, out_table, there, claim=True)
            self.storage.plan_new(stored, evicted)
            self.storage.write_new(stored, out_keys, there, draws, state_fill, self.cache.source(leaving, carry=True))
        absent = None if fresh is None else found.slots.clone()  # the write gives them addresses
        self.cache.write_new(found, keys, access, draws, state_fill, self.storage.source(found.outer, False, stored.slots, self.base))
        if fresh is not None:  # from the rows the ids landed in: a stored row crosses the link once, into its cache slot
            kernels.fresh_rows(keys, absent, found.table, draws, fresh, self.addressed(found.slots))
        if self.traffic.on:
            self._count(found, stored, leaving, fill=fresh is not None)

    def _count(self, found: Found, stored: Found, leaving: torch.Tensor, fill: bool) -> None:
        """The rows an insert moved, counted without a host read: out, each evictee the storage took and each
        id the cache could not place that the storage took as new (its drawn row); in, each missed id's stored
        row that came into a cache slot and (``fill``: a lookup's) each index the cache could not place, whose
        values the fill read from its row in storage."""
        traffic = self.traffic
        at, valid = new_ids(stored)
        spilled_new = valid & (leaving[at] < 0) & (stored.slots[at] >= 0)
        traffic.add(traffic.ROW_OUT, ((leaving >= 0) & (stored.slots >= 0)).sum() + spilled_new.sum())
        at, valid = new_ids(found)
        given = found.slots[at]
        traffic.add(traffic.ROW_IN, (valid & (found.outer[at] >= 0) & (given >= 0) & (given < self.base)).sum())
        if fill:
            traffic.add(traffic.EMB_IN, (found.slots >= self.base).sum())

    def addressed(self, addresses: torch.Tensor) -> Source:
        """The rows at ``addresses`` of the group's one address space, as ``fresh_rows`` reads its values from."""
        return Source(None, self.parts, addresses, False)

    def fresh_rows(self, keys: torch.Tensor, found: Found, draws: DrawTables, dst: torch.Tensor) -> None:
        """Each index absent from the cache: its stored row, else its draw, into its row of ``dst``."""
        kernels.fresh_rows(keys, found.slots, found.table, draws, dst, self.storage.source(found.outer, False))

    def addresses(self, batch: GroupBatch) -> torch.Tensor:
        """Each index's address: its cache slot, else ``base`` plus its storage slot, else -1."""
        found = self.cache.find_or_claim(batch, None, False, 0, behind=self.storage)
        return torch.where(found.slots >= 0, found.slots, torch.where(found.outer >= 0, found.outer + self.base, -1))

    def reduce_and_update(self, sorted_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor, optimizer: OptimizerArgs) -> None:
        """Sum each id's gradient rows and step its row once, in the cache or in storage (one address space)."""
        kernels.reduce_and_update(self.parts, sorted_slots, order, index_grads, optimizer)
