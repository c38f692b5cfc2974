"""Tables that agree on layout, stored as one and looked up and updated in one pass for the whole batch.

A loop over tables launches some 45 kernels per table, and at the seed size the
host, not the GPU, then bounds the step. The tables of a group therefore share one
hash index and one row store per tier (table ``t`` owns a range of buckets, see
``dynemb.hash_table.BucketMap``), whatever their storage mode: the store's rows
sit in device memory, in page-locked host memory the kernels read in place, or
split between the two (``dynemb.row_store``). A CACHING group puts a device cache
tier in front of a host storage tier.

Training goes as TBE's does, with slots for ids:

- forward: one kernel finds every index (not unique ids) of every table in the
  first tier (the cache, else the storage; a cache's find also looks each absent
  index up in storage), picking its table and bucket and touching its score; the
  rows are read straight away (from device rows in the same kernel for pooling
  NONE; from host rows each distinct row once, by a sort of the batch's slots).
  The absent ids are inserted without the host learning how many there are: the
  find carries each into a sorted row of pending ids of its bucket, and the insert
  (one index elected per id, the slots planned, the rows written with initial
  values drawn in the kernel, the absent indices filled in) loops to a count only
  the device knows, so a step never waits for the GPU (``BucketedHashTable.insert_new``).
  A cache's misses go the same way, their rows read straight from storage and the
  ids they evict written straight back, with the indices it could not place, in
  one pass over storage (``dynemb.tier.CachedTier``). An initializer kernels cannot
  draw inline (NORMAL, TRUNCATED_NORMAL), and host rows kernels cannot reach, ask
  the host whether any index is absent (one host sync); then the absent ids are
  made unique, brought in (a cache's misses from storage, where they are, else
  initialized) and inserted, and a cache writes the rows it evicts back to storage.
- backward: the batch's slots (one int per index) sorted once (forward's sort where
  it made one and no id was inserted since); runs of equal slots are the unique ids
  whose gradients one fused kernel sums and applies to their rows, wherever they
  live: a cache and its storage are one address space. Ids a cache could not hold
  are stepped in storage the same way.

Eval lookups take the same find (without touching scores) and read, and draw the
eval initializer's values for unknown ids in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from dynemb import kernels
from dynemb.counters import HostTraffic, distinct_from, new_ids
from dynemb.hash_table import BucketMap, Evicted
from dynemb.initializers import GroupInitializer, Initializer
from dynemb.kernels.operands import Access
from dynemb.layout import Layout
from dynemb.optimizers import OptimizerParams, initial_state, state_fill
from dynemb.options import (
    DynamicEmbScoreStrategy,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
    StorageMode,
)
from dynemb.ranges import op_range
from dynemb.scores import ScorePolicy
from dynemb.segments import unpool_grad
from dynemb.tier import CachedTier, Tier

if TYPE_CHECKING:
    from dynemb.counters import StepCounters


@dataclass(frozen=True)
class GroupBatch:
    """A group's part of a TBE batch: its tables' indices and bags, ``batch_size`` bags per table."""

    indices: torch.Tensor
    offsets: torch.Tensor
    batch_size: int


@dataclass(frozen=True)
class BatchPlan:
    """What backward needs: each index's slot in the first tier (-1: none) as forward left it, and the batch."""

    batch: GroupBatch
    slots: torch.Tensor
    version: int
    sorted: tuple[torch.Tensor, torch.Tensor] | None  # the slots sorted, and the sort's order, where forward made it
    spilled: bool  # some index found no cache slot: its id's row is in storage


def group_key(options: DynamicEmbTableOptions, layout: Layout) -> tuple:
    """Tables with equal keys can share storage: same row width, bucket sizes, scores and initializer modes."""
    return (
        layout.caching, layout.width, layout.bucket_capacity, layout.cache_bucket_capacity, options.score_strategy,
        options.initializer_args.mode, options.eval_initializer_args.mode,
    )


class TableGroup:
    """The storage of tables that share a ``group_key``, and the batched lookup, update, export and load."""

    def __init__(
        self, options: list[DynamicEmbTableOptions], layouts: list[Layout], optimizer: EmbOptimType, params: OptimizerParams,
        seeds: list[int], device: torch.device, counters: StepCounters, index: int,
    ) -> None:
        """``counters``: the module's (``index``: this group's clock there)."""
        first = layouts[0]
        self.counters = counters
        self.clock = counters.clock(index)
        self.layouts = layouts
        self.dim = options[0].dim
        self.width = first.width
        self.optimizer = optimizer
        self.params = params
        self.device = device
        storage = BucketMap(tuple(layout.num_buckets for layout in layouts), tuple(layout.device_buckets for layout in layouts))
        self.storage = Tier(storage, first.bucket_capacity, first.width, device)
        self.cache = None
        if first.caching:
            cache_buckets = tuple(layout.cache_buckets for layout in layouts)
            self.cache = Tier(BucketMap(cache_buckets, cache_buckets), first.cache_bucket_capacity, first.width, device)
        self.front = self.cache or self.storage
        self.scores = ScorePolicy(options[0].score_strategy)
        self.counts_accesses = self.scores.strategy is DynamicEmbScoreStrategy.LFU
        self.initializer = GroupInitializer(
            [Initializer(o.initializer_args, s, o.max_capacity) for o, s in zip(options, seeds, strict=True)], device, self.dim,
        )
        self.eval_initializer = GroupInitializer(
            [Initializer(o.eval_initializer_args, s, o.max_capacity) for o, s in zip(options, seeds, strict=True)], device, self.dim,
        )
        self.hits = torch.zeros(len(options), dtype=torch.int64, device=device)
        self.misses = torch.zeros_like(self.hits)
        self.evictions = torch.zeros_like(self.hits)
        # With initial values kernels can draw inline and rows they reach, a step's new ids (a cache's misses) are
        # inserted without the host learning how many there are: the step never waits for the device. A cache and
        # its storage are then one tier to the lookup (``CachedTier``).
        drawable = self.initializer.draws is not None and self.eval_initializer.draws is not None
        self.on_device = drawable and self.storage.mapped
        # The host rows training moves, counted on the device (``HostTraffic``), where the group has any.
        self.traffic = HostTraffic(self.dim, self.width, device)
        self.counts_traffic = not self.storage.device_only
        self.chain: Tier | CachedTier = self.storage if self.cache is None else CachedTier(self.cache, self.storage, self.traffic)
        self.state_fill = state_fill(optimizer, params)
        # The reference system's op names: a cache's find and insert are cache_lookup and cache_insert_evict.
        self.find_op = "storage_find" if self.cache is None else "cache_lookup"
        self.insert_op = "storage_insert" if self.cache is None else "cache_insert_evict"

    @property
    def version(self) -> int:
        """Changes whenever a slot that a plan's slots name changes owner (either tier's, on the sync-free path)."""
        return self.chain.version if self.on_device else self.front.version

    def host_counts(self) -> list[int]:
        """What a step changes of the host's own counts of this group: its clock and its tiers' versions."""
        return [self.scores.clock, self.storage.version, 0 if self.cache is None else self.cache.version]

    def advance(self, counts: list[int]) -> None:
        """Add ``counts`` (as ``host_counts`` orders them) to the host's counts: a CUDA graph replayed a step."""
        clock, stored, cached = counts
        self.scores.clock += clock
        self.storage.advance(stored)
        if self.cache is not None:
            self.cache.advance(cached)

    def mode(self, table: int) -> StorageMode:
        return self.layouts[table].mode

    def _access(self) -> Access:
        """How this step's training lookups record what they touch: scores by the policy's clock, hits, misses."""
        return Access(self.clock, self.counts_accesses, self.hits, self.misses)

    # --- training and eval lookups ----------------------------------------------------------------------

    def lookup(self, batch: GroupBatch, pooling: PoolingMode) -> tuple[torch.Tensor, BatchPlan]:
        """Training forward of the group's batch: output in TBE layout, and each index's slot for backward."""
        self.scores.tick()
        if self.on_device:
            return self._lookup_on_device(batch, pooling)
        slots, buckets, per_index, ordered, missing = self._find_and_read(batch, pooling, touch=True)
        spilled = False
        if missing.numel():
            fresh, spilled = self._insert(batch, slots, buckets, missing)
            with op_range("gather_embedding"):
                per_index = self._patch(per_index, slots, missing, fresh)
            ordered = None  # the new ids' slots changed the order
        with op_range("gather_embedding"):
            output = self._output(per_index, slots, batch, pooling)
        return output, BatchPlan(batch, slots, self.version, ordered, spilled)

    def prefetch(self, batch: GroupBatch) -> None:
        """Bring a coming batch's ids into the cache (a group without a cache holds every row already)."""
        if self.cache is None:
            return
        self.scores.tick()
        if self.on_device:
            access = self._access()
            with op_range(self.find_op):
                found = self.chain.find_or_claim(batch, access, claim=True, columns=0)
            with op_range(self.insert_op):
                self.chain.insert_new(found, batch.indices, access, self.evictions, self.initializer.draws, self.state_fill, None)
            return
        slots, buckets, _, _, missing = self._find_and_read(batch, PoolingMode.SUM, touch=True, read=False)
        if missing.numel():
            self._insert(batch, slots, buckets, missing)

    def _lookup_on_device(self, batch: GroupBatch, pooling: PoolingMode) -> tuple[torch.Tensor, BatchPlan]:
        """``lookup`` without a host sync: the find carries each absent id into a pending row of its bucket, the
        insert runs over the batch or to a count only the device knows (``BucketedHashTable.insert_new``), and
        fills in the absent indices' values and slots. Backward sorts the slots (they changed after any sort here)."""
        access = self._access()
        with op_range(self.find_op):
            found = self.chain.find_or_claim(batch, access, claim=True, columns=self._fused_read(pooling))
        per_index = self._read_host_rows(found.slots, found.read, count=True)
        fresh = self._fresh_target(per_index, found.slots)
        with op_range(self.insert_op):
            self.chain.insert_new(found, batch.indices, access, self.evictions, self.initializer.draws, self.state_fill, fresh)
        if self.cache is None and self.traffic.on:  # a cache counts its own insert's rows (``CachedTier``)
            at, valid = new_ids(found)
            self.traffic.add(HostTraffic.ROW_OUT, (valid & (found.slots[at] >= self.storage.host_from)).sum())
        with op_range("gather_embedding"):
            output = self._output(per_index, found.slots, batch, pooling, fresh)
        return output, BatchPlan(batch, found.slots, self.version, None, False)

    def _fused_read(self, pooling: PoolingMode) -> int:
        """Columns the find reads of each index's embedding itself: for pooling NONE (from device rows only)."""
        return self.dim if pooling is PoolingMode.NONE else 0

    def _read_host_rows(self, slots: torch.Tensor, per_index: torch.Tensor | None, count: bool = False) -> torch.Tensor | None:
        """Per-index rows where some live in host memory (each distinct row read once, by a sort of the slots;
        ``count``: a training lookup's, counted as traffic)."""
        if self.chain.device_only:
            return per_index
        with op_range("segmented_unique"):
            ordered = torch.sort(slots.to(self.front.slot_dtype))
        if count and self.traffic.on:
            self.traffic.add(HostTraffic.EMB_IN, distinct_from(ordered.values, self.front.host_from))
        with op_range("gather_embedding"):
            return self.front.gather_unique(*ordered, self.dim)

    def _fresh_target(self, per_index: torch.Tensor | None, slots: torch.Tensor) -> torch.Tensor:
        """Where absent indices' initial values go: their per-index rows, else a scratch the pooling reads for
        indices left without a slot."""
        if per_index is not None:
            return per_index
        return torch.empty(slots.numel(), self.dim, dtype=torch.float32, device=self.device)

    def _eval_on_device(self, batch: GroupBatch, pooling: PoolingMode) -> torch.Tensor:
        """``eval_lookup`` without a host sync: unknown ids' eval values are drawn in place."""
        with op_range(self.find_op):
            found = self.chain.find_or_claim(batch, None, claim=False, columns=self._fused_read(pooling))
        per_index = self._read_host_rows(found.slots, found.read)
        with op_range("initializer"):
            fresh = self._fresh_target(per_index, found.slots)
            self.chain.fresh_rows(batch.indices, found, self.eval_initializer.draws, fresh)
        with op_range("gather_embedding"):
            return self._output(per_index, found.slots, batch, pooling, fresh)

    def eval_lookup(self, batch: GroupBatch, pooling: PoolingMode) -> torch.Tensor:
        """Eval forward: stored rows, the eval initializer's values for unknown ids; nothing inserted, no score or
        counter touched."""
        if self.on_device:
            return self._eval_on_device(batch, pooling)
        slots, _, per_index, _, missing = self._find_and_read(batch, pooling, touch=False)
        if missing.numel():
            if per_index is None:
                per_index = self.front.gather(slots, self.dim)
            keys = batch.indices[missing]
            table = self._table_of(missing, batch)
            with op_range("initializer"):
                rows = self.eval_initializer(keys, table, self.dim)
            if self.cache is not None:
                with op_range("storage_find"):
                    stored = self.storage.find(keys, table)
                    rows = torch.where((stored >= 0).unsqueeze(1), self.storage.gather(stored, self.dim), rows)
            per_index[missing] = rows
        with op_range("gather_embedding"):
            return self._output(per_index, slots, batch, pooling)

    def _find_and_read(
        self, batch: GroupBatch, pooling: PoolingMode, touch: bool, read: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None, torch.Tensor]:
        """(slot, bucket) of every index; its row's embedding (``read``: unless pooled from device rows in
        place); the sorted slots where the read sorted them; and the positions found absent.

        The read is queued before the host asks whether any index is absent (the one
        host sync of a batch without new ids), so the GPU reads while the host waits.
        """
        with op_range(self.find_op):
            slots, buckets = self.front.find_batch(batch, self._access() if touch else None)
        per_index = ordered = None
        front = self.front
        if read and not front.device_only:
            # Host rows: each distinct row read once, by the slots' sort (which backward reuses).
            with op_range("segmented_unique"):
                ordered = torch.sort(slots.to(front.slot_dtype))
            if touch and self.traffic.on:
                self.traffic.add(HostTraffic.EMB_IN, distinct_from(ordered.values, front.host_from))
            with op_range("gather_embedding"):
                per_index = front.gather_unique(*ordered, self.dim)
        elif read and pooling is PoolingMode.NONE:
            with op_range("gather_embedding"):
                per_index = front.gather(slots, self.dim)
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)
        return slots, buckets, per_index, ordered, missing

    def _table_of(self, positions: torch.Tensor, batch: GroupBatch) -> torch.Tensor:
        """Table (within the group) of the indices at ``positions`` of the group's batch."""
        bounds = batch.offsets[:: batch.batch_size].contiguous()
        return torch.searchsorted(bounds, positions, right=True) - 1

    def _insert(self, batch: GroupBatch, slots: torch.Tensor, buckets: torch.Tensor, missing: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """Insert the absent ids of the batch into the first tier; return the row of each missing index, and
        whether some id found no slot (with a cache: it stays in storage, and ``slots`` says -1 for its indices)."""
        with op_range("segmented_unique"):
            keys, key_buckets = batch.indices[missing], buckets[missing]
            # Sorted by (bucket, id): each table's buckets are its own, so equal ids of two tables stay apart.
            by_key = torch.sort(keys, stable=True).indices
            order = by_key[torch.sort(key_buckets[by_key], stable=True).indices]
            sorted_keys, sorted_buckets = keys[order], key_buckets[order]
            starts = torch.ones_like(sorted_keys, dtype=torch.bool)
            starts[1:] = (sorted_keys[1:] != sorted_keys[:-1]) | (sorted_buckets[1:] != sorted_buckets[:-1])
            first = torch.nonzero(starts).squeeze(1)  # host sync: the number of new ids
            new_keys, new_buckets = sorted_keys[first], sorted_buckets[first]
            inverse = torch.empty_like(order)
            inverse[order] = torch.cumsum(starts, 0) - 1
            table = self._table_of(missing[order[first]], batch)
        uses = torch.diff(first, append=first.new_tensor([missing.numel()]))  # indices per new id
        fresh, scores, stored = self._incoming(new_keys, table, uses)
        with op_range(self.insert_op):
            identity = torch.arange(new_keys.numel(), device=self.device)
            new_slots, evicted = self.front.insert_sorted(new_buckets, identity, new_keys, scores, protect=slots)
            self.evictions.index_add_(0, table, evicted.mask.to(torch.int64))
        spilled = False
        if self.cache is not None:  # before the new rows take the evicted ids' slots
            spilled = self._write_back(evicted, table, new_keys, new_slots, fresh, scores, stored)
        with op_range("store_to_flat"):
            self.front.scatter(new_slots, fresh)
        if self.front.host_from is not None and self.traffic.on:
            self.traffic.add(HostTraffic.ROW_OUT, (new_slots >= self.front.host_from).sum())
        slots[missing] = new_slots[inverse]
        # Ids whose bucket was full of this batch's ids (slot -1) are used with these values.
        return fresh[inverse, : self.dim], spilled

    def _initial_rows(self, keys: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Full rows (embedding and fresh optimizer state) of ids seen for the first time."""
        emb = self.initializer(keys, table, self.dim)
        if self.width == self.dim:
            return emb
        return torch.cat([emb, initial_state(self.optimizer, keys.numel(), self.dim, self.params, self.device)], dim=1)

    def _incoming(self, keys: torch.Tensor, table: torch.Tensor, uses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Full rows and scores of ids entering the first tier: from storage where a cache's misses are stored
        there, else initial; and (a cache) their storage slots."""
        if self.cache is None:
            with op_range("initializer"):
                rows = self._initial_rows(keys, table)
            return rows, self.scores.for_new(uses), None
        with op_range("storage_find"):
            stored = self.storage.find(keys, table)
            rows = self.storage.gather(stored)
        if self.traffic.on:
            self.traffic.add(HostTraffic.ROW_IN, (stored >= 0).sum())
        with op_range("initializer"):
            rows = torch.where((stored >= 0).unsqueeze(1), rows, self._initial_rows(keys, table))
        return rows, self.scores.for_new(uses, self.storage.slot_scores(stored)), stored

    def _write_back(
        self, evicted: Evicted, table: torch.Tensor, keys: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor,
        stored: torch.Tensor,
    ) -> bool:
        """Write to storage, in one upsert, the ids a cache insert evicted (their rows with optimizer state and
        scores) and the new ids it found no slot for (``slots`` -1: they stay in storage); whether there were
        any of those. New storage ids of a bucket are ranked by id, and the stored rows of the batch's misses
        (``stored``) are never evicted for them, as on the sync-free path (``dynemb.tier.CachedTier``)."""
        with op_range("flagged_compact"):
            real = torch.nonzero(evicted.mask).squeeze(1)
            outside = torch.nonzero(slots < 0).squeeze(1)
        if real.numel() + outside.numel() == 0:
            return False
        with op_range("load_from_flat"):
            leaving = self.front.gather(evicted.slots[real])
        if self.traffic.on:
            self.traffic.add(HostTraffic.ROW_OUT, real.numel() + outside.numel())
        with op_range("storage_insert"):
            keys = torch.cat([evicted.keys[real], keys[outside]])
            order = torch.sort(keys, stable=True).indices
            self.storage.upsert(
                keys[order], torch.cat([table[real], table[outside]])[order], torch.cat([leaving, rows[outside]])[order],
                torch.cat([evicted.scores[real], scores[outside]])[order], protect=stored,
            )
        return outside.numel() > 0

    def _patch(self, per_index: torch.Tensor | None, slots: torch.Tensor, missing: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor | None:
        """Per-index rows after an insert: the new ids' rows (which the insert just stored, or could not).
        Pooling from device rows in place (``per_index`` None) needs them only where some index found no slot
        (one host sync)."""
        if per_index is None:
            if not bool((slots[missing] < 0).any()):
                return None
            per_index = self.front.gather(slots, self.dim)
        per_index[missing] = fresh
        return per_index

    def _output(
        self, per_index: torch.Tensor | None, slots: torch.Tensor, batch: GroupBatch, pooling: PoolingMode, fresh: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """NONE: the per-index rows. SUM/MEAN: ``[batch, tables * dim]``, bag ``(t, b)`` into row ``b``, columns
        of table ``t``, summed from ``per_index`` where given, else straight from the device rows (an index
        without a slot from its row of ``fresh`` where given, else from the spare row)."""
        if pooling is PoolingMode.NONE:
            return per_index
        if per_index is None:
            source = self.front.device_rows(self.dim)
            inverse = slots if fresh is not None else self.front.or_spare(slots)
        else:
            source, inverse, fresh = per_index, torch.arange(slots.numel(), device=self.device), None
        tables, size = len(self.layouts), batch.batch_size
        bags = torch.empty(tables * size, self.dim, dtype=torch.float32, device=self.device)
        kernels.pool_rows(source, inverse, batch.offsets, pooling, bags, fresh)
        return bags.view(tables, size, self.dim).transpose(0, 1).reshape(size, tables * self.dim)

    # --- backward ---------------------------------------------------------------------------------------

    def apply_gradients(self, plan: BatchPlan, grad_output: torch.Tensor, pooling: PoolingMode, step: int) -> None:
        """Sum each id's gradients over the batch and apply the optimizer to its stored row, for every table at once."""
        batch, slots, ordered = plan.batch, plan.slots, plan.sorted
        stale = plan.version != self.version
        updated = self.chain if self.on_device else self.front
        if stale:  # the tables changed since forward: find the ids again
            slots = updated.addresses(batch)
            ordered = None
        n = slots.numel()
        if n == 0:
            return
        with op_range("reduce_grads"):
            if pooling is PoolingMode.NONE:
                index_grads = grad_output
            else:
                tables, size = len(self.layouts), batch.batch_size
                bag_grads = grad_output.view(size, tables, self.dim).transpose(0, 1).reshape(tables * size, self.dim)
                index_grads = unpool_grad(bag_grads, batch.offsets[1:] - batch.offsets[:-1], pooling, n)
        if ordered is None:
            with op_range("segmented_unique"):
                ordered = torch.sort(slots.to(updated.slot_dtype))  # groups each id's indices
        optimizer = self.counters.optimizer(self.optimizer, self.params, step)
        with op_range("optimizer_update_fused"):
            updated.reduce_and_update(*ordered, index_grads, optimizer)
        if updated.host_from is not None and self.traffic.on:
            self.traffic.updated(ordered[0], updated.host_from)
        if self.cache is not None and not self.on_device and (plan.spilled or stale):
            with op_range("optimizer_update_fused"):
                # Indices whose id is not cached: step its row in storage.
                outside = torch.nonzero(slots < 0).squeeze(1)
                if outside.numel():
                    stored = self.storage.find(batch.indices[outside], self._table_of(outside, batch))
                    stored, order = torch.sort(stored)
                    self.storage.reduce_and_update(stored, order, index_grads[outside], optimizer)
                    if self.traffic.on:
                        self.traffic.updated(stored, 0)

    # --- one table at a time: export, load, sizes --------------------------------------------------------

    def _tables(self, table: int, count: int) -> torch.Tensor:
        return torch.full((count,), table, dtype=torch.int64, device=self.device)

    def export(self, table: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, full rows) of one table; cache rows win over storage rows (the cache holds the newest copy)."""
        keys, rows = self.storage.items(table)
        if self.cache is None:
            return keys, rows
        cache_keys, cache_rows = self.cache.items(table)
        only_stored = torch.nonzero(self.cache.find(keys, self._tables(table, keys.numel())) < 0).squeeze(1)
        return torch.cat([cache_keys, keys[only_stored]]), torch.cat([cache_rows, rows[only_stored]])

    def load(self, table: int, keys: torch.Tensor, rows: torch.Tensor) -> None:
        """Insert or overwrite unique ids of one table with full rows; a cached copy is refreshed too."""
        tables = self._tables(table, keys.numel())
        most = self.storage.max_keys_per_bucket(keys, tables)
        if most > self.storage.bucket_capacity:
            raise ValueError(
                f"{most} of the ids hash to one bucket of {self.storage.bucket_capacity} slots; raise max_capacity or bucket_capacity"
            )
        evicted = self.storage.upsert(keys, tables, rows, self.scores.for_new(torch.ones_like(keys)))
        if self.cache is None:
            self.evictions[table] += evicted
            return
        self.cache.scatter(self.cache.find(keys, tables), rows)

    def size(self, table: int) -> int:
        """Distinct ids the table holds, in all tiers."""
        stored = self.storage.size(table)
        if self.cache is None:
            return stored
        cache_keys = self.cache.ids(table)
        only_cached = int((self.storage.find(cache_keys, self._tables(table, cache_keys.numel())) < 0).sum())
        return stored + only_cached

    def capacity(self, table: int) -> int:
        """Rows the table can hold (in storage)."""
        return self.storage.table_capacity(table)
