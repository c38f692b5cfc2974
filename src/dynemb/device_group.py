"""Device-resident tables in one shared storage, looked up and updated in one pass for the whole batch.

A loop over tables launches some 45 kernels per table, and at the seed size the
host, not the GPU, then bounds the step. Tables whose rows all live on the device
and that share the row width, bucket capacity, score strategy and initializer
(seed aside) are therefore laid out as one hash table: table ``t`` owns buckets
``table_base[t] + [0, num_buckets_t)``, then one spare bucket that no key hashes to
(its first slot is the table's own spare entry), so each table's ``KeyValueTable``
is a view of its region and every per-table operation (export, load, size) works
unchanged.

Training goes as TBE's does, with slots for ids:

- forward: one kernel finds every index (not unique ids) of every table, picking
  its table and bucket and touching its score; only if some index is absent (one
  host sync) are the absent ids made unique, initialized and inserted. The output
  is one gather (pooling NONE) or one pooling kernel of the stored rows.
- backward: the batch's slots (one int per index) are sorted once; runs of equal
  slots are the unique ids whose gradients the fused kernel sums and applies.

Eval lookups take the same find (without touching scores) and gather.

CACHING tables that agree the same way share their device caches as one such group
and their host storages as one ``HostTier`` behind it: a batch's cache misses are
read from host storage (or initialized) and the rows they evict written back
there, each in one pass for all tables; ids that find no cache slot are used and
updated in host storage.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from dynemb import kernels
from dynemb.hash_table import BucketedHashTable, Evicted, SlotArrays
from dynemb.host_memory import device_view
from dynemb.host_tier import HostTier
from dynemb.initializers import Initializer
from dynemb.key_value_table import KeyValueTable
from dynemb.optimizers import OptimizerParams
from dynemb.options import (
    DynamicEmbScoreStrategy,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
    StorageMode,
)
from dynemb.ranges import op_range
from dynemb.segments import unpool_grad
from dynemb.storage import CachedTable, DynamicTable, FlatTable, Layout, build_table, plan_layout
from dynemb.validation import BatchLayout


@dataclass(frozen=True)
class GroupPlan:
    """What backward needs: each index's slot (-1: none) as forward left the tables, and the batch."""

    slots: torch.Tensor
    version: int
    indices: torch.Tensor
    offsets: torch.Tensor
    batch_size: int
    spilled: bool = False  # some index found no cache slot: its id's row is in host storage


def _shares_storage(options: list[DynamicEmbTableOptions], layouts: list[Layout]) -> bool:
    """One storage mode, GPU or CACHING, and one row width, bucket capacities, score strategy and initializer draws."""
    mode = layouts[0].mode
    if mode not in (StorageMode.GPU, StorageMode.CACHING):
        return False
    first = options[0]
    draws = [Initializer(o.initializer_args, 0, o.max_capacity) for o in options]
    eval_draws = [Initializer(o.eval_initializer_args, 0, o.max_capacity) for o in options]
    return all(
        layout.mode is mode
        and layout.width == layouts[0].width
        and layout.cache_bucket_capacity == layouts[0].cache_bucket_capacity
        and o.effective_bucket_capacity == first.effective_bucket_capacity
        and o.score_strategy is first.score_strategy
        and draw.same_draw_as(draws[0])
        and eval_draw.same_draw_as(eval_draws[0])
        for o, layout, draw, eval_draw in zip(options, layouts, draws, eval_draws, strict=True)
    )


class DeviceTableGroup:
    """The tables of one module that share device storage, and the batched lookup and update over them.

    ``tiers``: each table's device tier (a ``FlatTable``'s table, a ``CachedTable``'s
    cache) as views of ``arrays`` and ``rows``; ``backing``: the caching tables' host storage.
    """

    def __init__(
        self, tables: list[DynamicTable], tiers: list[KeyValueTable], arrays: SlotArrays, rows: torch.Tensor, bucket_base: list[int],
        device: torch.device, backing: HostTier | None = None,
    ) -> None:
        self.tables = tables
        self.tiers = tiers
        self.backing = backing
        self.device = device
        self.bucket_capacity = tiers[0].index.bucket_capacity
        self.dim = tables[0].dim
        self.rows = rows
        self.arrays = arrays
        self.index = BucketedHashTable(rows.shape[0] // self.bucket_capacity, self.bucket_capacity, device, arrays)
        self.table_buckets = torch.tensor([tier.index.num_buckets for tier in tiers], dtype=torch.int64, device=device)
        self.table_base = torch.tensor(bucket_base, dtype=torch.int64, device=device)
        self.seed_words = torch.tensor([t.initializer.seed_word for t in tables], dtype=torch.int64, device=device)
        self.counts_accesses = tables[0].scores.strategy is DynamicEmbScoreStrategy.LFU
        # Per-table counters as views of one tensor each, so one kernel counts for all.
        self.hits = torch.zeros(len(tables), dtype=torch.int64, device=device)
        self.misses = torch.zeros_like(self.hits)
        self.evictions = torch.zeros_like(self.hits)
        for t, table in enumerate(tables):
            table.hits, table.misses, table.evictions = self.hits[t], self.misses[t], self.evictions[t]
        self.slot_dtype = torch.int32 if rows.shape[0] < 2**31 else torch.int64
        # The reference system's op names: a cache's find and insert are cache_lookup and cache_insert_evict.
        self.find_op = "storage_find" if backing is None else "cache_lookup"
        self.insert_op = "storage_insert" if backing is None else "cache_insert_evict"

    @property
    def version(self) -> int:
        """Changes whenever any table's slots change owner (an insert here or through a table)."""
        return sum(tier.version for tier in self.tiers)

    def _clock(self) -> int:
        for table in self.tables:
            table.scores.tick()
        return self.tables[0].scores.clock

    def lookup(self, indices: torch.Tensor, layout: BatchLayout, pooling: PoolingMode) -> tuple[torch.Tensor, GroupPlan]:
        """Training forward of the whole batch: output in TBE layout, and each index's slot for backward.

        With pooling NONE the rows are gathered as found (``_find_batch``) and new ids'
        rows patched in afterwards; pooled modes pool once every slot is known.
        """
        slots, buckets, per_index, missing = self._find_batch(indices, layout, touch=True, gather=pooling is PoolingMode.NONE)
        spilled = False
        if missing.numel():
            fresh, spilled = self._insert(indices, slots, buckets, missing)
            with op_range("gather_embedding"):
                per_index = self._patch(per_index, slots, missing, fresh)
        with op_range("gather_embedding"):
            output = self._output(per_index, slots, layout, pooling)
        return output, GroupPlan(slots, self.version, indices, layout.offsets, layout.batch_size, spilled)

    def prefetch(self, indices: torch.Tensor, layout: BatchLayout) -> None:
        """Bring a coming batch's ids into the caches (a group without host storage holds every row already)."""
        if self.backing is None:
            return
        slots, buckets, _, missing = self._find_batch(indices, layout, touch=True, gather=False)
        if missing.numel():
            self._insert(indices, slots, buckets, missing)

    @property
    def _values(self) -> torch.Tensor:
        """The embedding columns of every stored row (the optimizer state follows them)."""
        return self.rows[:, : self.dim]

    def _stored(self, slots: torch.Tensor) -> torch.Tensor:
        """Row of each slot; the spare row for -1."""
        return self.index.or_spare(slots)

    def _gather(self, slots: torch.Tensor) -> torch.Tensor:
        """Embedding of the row at each slot (the spare row's for -1)."""
        return kernels.gather_rows(self._values, self._stored(slots))

    def _table_of(self, buckets: torch.Tensor) -> torch.Tensor:
        """Table owning each bucket of the shared storage."""
        return torch.searchsorted(self.table_base, buckets, right=True) - 1

    def _find_batch(
        self, indices: torch.Tensor, layout: BatchLayout, touch: bool, gather: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(slot, bucket) of every index, its stored embedding if ``gather``, and the positions found absent.

        The gather is queued before the host asks whether any index is absent (the one
        host sync of a batch without new ids), so the GPU gathers while the host waits.
        """
        with op_range(self.find_op):
            slots, buckets = self._find(indices, layout.offsets, layout.batch_size, touch)
        per_index = None
        if gather:
            with op_range("gather_embedding"):
                per_index = self._gather(slots)
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)
        return slots, buckets, per_index, missing

    def _find(self, indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, touch: bool) -> tuple[torch.Tensor, torch.Tensor]:
        clock = self._clock() if touch else self.tables[0].scores.clock
        return kernels.group_find(
            indices, offsets, batch_size, self.table_buckets, self.table_base, self.arrays.keys, self.arrays.occupied,
            self.arrays.scores, self.bucket_capacity, clock, self.counts_accesses, touch, self.hits, self.misses,
        )

    def _insert(self, indices: torch.Tensor, slots: torch.Tensor, buckets: torch.Tensor, missing: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """Insert the absent ids of the batch; return the embedding of each missing index, and whether some
        id found no slot (with host storage: it stays there, and ``slots`` says -1 for its indices)."""
        with op_range("segmented_unique"):
            keys, key_buckets = indices[missing], buckets[missing]
            # Sorted by (bucket, id): buckets are table-major, so each table's new ids are a run.
            by_key = torch.sort(keys, stable=True).indices
            order = by_key[torch.sort(key_buckets[by_key], stable=True).indices]
            sorted_keys, sorted_buckets = keys[order], key_buckets[order]
            starts = torch.ones_like(sorted_keys, dtype=torch.bool)
            starts[1:] = (sorted_keys[1:] != sorted_keys[:-1]) | (sorted_buckets[1:] != sorted_buckets[:-1])
            first = torch.nonzero(starts).squeeze(1)  # host sync: the number of new ids
            new_keys, new_buckets = sorted_keys[first], sorted_buckets[first]
            inverse = torch.empty_like(order)
            inverse[order] = torch.cumsum(starts, 0) - 1
            table = self._table_of(new_buckets)
        uses = torch.diff(first, append=first.new_tensor([missing.numel()]))  # indices per new id
        fresh, scores = self._incoming(new_keys, table, uses)
        with op_range(self.insert_op):
            identity = torch.arange(new_keys.numel(), device=self.device)
            new_slots, evicted = self.index.insert_sorted(new_buckets, identity, new_keys, scores, protect=slots)
            self.evictions.index_add_(0, table, evicted.mask.to(torch.int64))
            for tier in self.tiers:
                tier.index.version += 1
        if self.backing is not None:
            self._write_back(evicted, table)  # before the new rows take the evicted ids' slots
        with op_range("store_to_flat"):
            self.rows[self._stored(new_slots)] = fresh
        slots[missing] = new_slots[inverse]
        spilled = self.backing is not None and self._keep_outside(new_keys, table, new_slots, fresh, scores)
        # Ids whose bucket was full of this batch's ids (slot -1) are used with these values.
        return fresh[inverse, : self.dim], spilled

    def _write_back(self, evicted: Evicted, table: torch.Tensor) -> None:
        """Write the rows (with optimizer state) of ids an insert evicted to host storage."""
        with op_range("flagged_compact"):
            real = torch.nonzero(evicted.mask).squeeze(1)
        if real.numel():
            with op_range("load_from_flat"):
                rows = self.rows[evicted.slots[real]]
            with op_range("storage_insert"):
                self.backing.upsert(evicted.keys[real], table[real], rows, evicted.scores[real])

    def _keep_outside(self, keys: torch.Tensor, table: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor) -> bool:
        """Store in host storage the new ids that found no device slot; whether there were any."""
        outside = torch.nonzero(slots < 0).squeeze(1)
        if outside.numel() == 0:
            return False
        with op_range("storage_insert"):
            outside = outside[torch.sort(keys[outside], stable=True).indices]  # in id order, as a table on its own
            self.backing.upsert(keys[outside], table[outside], rows[outside], scores[outside])
        return True

    def _incoming(self, keys: torch.Tensor, table: torch.Tensor, uses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Full rows and scores of ids entering the device tier: from host storage where it holds them, else initial."""
        initial = self.tables[0]
        if self.backing is None:
            with op_range("initializer"):
                rows = initial.initial_rows(keys, self.seed_words[table])
            return rows, initial.scores.for_new(uses)
        with op_range("storage_find"):
            stored = self.backing.find(keys, table)
            rows = self.backing.read(stored)
        with op_range("initializer"):
            rows = torch.where((stored >= 0).unsqueeze(1), rows, initial.initial_rows(keys, self.seed_words[table]))
        return rows, initial.scores.for_new(uses, self.backing.index.slot_scores(stored))

    def eval_lookup(self, indices: torch.Tensor, layout: BatchLayout, pooling: PoolingMode) -> torch.Tensor:
        """Eval forward of the whole batch: stored rows, the eval initializer's values for unknown ids;
        nothing inserted, no score or counter touched."""
        slots, buckets, per_index, missing = self._find_batch(indices, layout, touch=False, gather=pooling is PoolingMode.NONE)
        if missing.numel():
            if per_index is None:
                per_index = self._gather(slots)
            keys = indices[missing]
            table = self._table_of(buckets[missing])
            with op_range("initializer"):
                rows = self.tables[0].eval_initializer(keys, self.dim, self.seed_words[table])
            if self.backing is not None:
                with op_range("storage_find"):
                    stored = self.backing.find(keys, table)
                    rows = torch.where((stored >= 0).unsqueeze(1), self.backing.read(stored, self.dim), rows)
            per_index[missing] = rows
        with op_range("gather_embedding"):
            return self._output(per_index, slots, layout, pooling)

    def _patch(self, per_index: torch.Tensor | None, slots: torch.Tensor, missing: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor | None:
        """Per-index rows after an insert: the new ids' stored rows, ``fresh`` values where an index found no
        slot. Pooled modes (``per_index`` None) only need them when some index found none (one host sync)."""
        unstored = slots[missing] < 0
        if per_index is None:
            if not bool(unstored.any()):
                return None
            per_index = self._gather(slots)
        per_index[missing] = torch.where(unstored.unsqueeze(1), fresh, self._gather(slots[missing]))
        return per_index

    def _output(self, per_index: torch.Tensor | None, slots: torch.Tensor, layout: BatchLayout, pooling: PoolingMode) -> torch.Tensor:
        """NONE: the per-index rows. SUM/MEAN: ``[batch, tables * dim]``, bag ``(t, b)`` into row ``b``, columns
        of table ``t``, summed from ``per_index`` where given, else straight from the stored rows."""
        if pooling is PoolingMode.NONE:
            return per_index
        if per_index is None:
            source, inverse = self._values, self._stored(slots)
        else:
            source, inverse = per_index, torch.arange(slots.numel(), device=self.device)
        tables, batch = len(self.tables), layout.batch_size
        bags = torch.empty(tables * batch, self.dim, dtype=torch.float32, device=self.device)
        kernels.pool_rows(source, inverse, layout.offsets, pooling, bags)
        return bags.view(tables, batch, self.dim).transpose(0, 1).reshape(batch, tables * self.dim)

    def apply_gradients(self, plan: GroupPlan, grad_output: torch.Tensor, pooling: PoolingMode, step: int) -> None:
        """Sum each id's gradients over the batch and apply the optimizer to its stored row, for every table at once."""
        slots = plan.slots
        if plan.version != self.version:  # the tables changed since forward: find the ids again
            slots, _ = self._find(plan.indices, plan.offsets, plan.batch_size, touch=False)
        n = slots.numel()
        if n == 0:
            return
        with op_range("reduce_grads"):
            if pooling is PoolingMode.NONE:
                index_grads = grad_output
            else:
                tables, batch = len(self.tables), plan.batch_size
                bag_grads = grad_output.view(batch, tables, self.dim).transpose(0, 1).reshape(tables * batch, self.dim)
                index_grads = unpool_grad(bag_grads, plan.offsets[1:] - plan.offsets[:-1], pooling, n)
        with op_range("segmented_unique"):
            # Sorting the slots groups each id's indices; slots below 2**31 sort as int32 (half the radix passes).
            sorted_slots, order = torch.sort(slots.to(self.slot_dtype))
        first = self.tables[0]
        with op_range("optimizer_update_fused"):
            kernels.reduce_and_update(first.optimizer, self.rows, sorted_slots, order, index_grads, first.params, step)
        if self.backing is not None and (plan.spilled or plan.version != self.version):
            with op_range("optimizer_update_fused"):
                # Indices whose id is not cached: update its row in host storage.
                outside = torch.nonzero(slots < 0).squeeze(1)
                if outside.numel():
                    bounds = plan.offsets[:: plan.batch_size].contiguous()
                    table = torch.searchsorted(bounds, outside, right=True) - 1
                    stored, order = torch.sort(self.backing.find(plan.indices[outside], table))
                    kernels.reduce_and_update(first.optimizer, self.backing.rows, stored, order, index_grads[outside], first.params, step)


def build_tables(
    options: list[DynamicEmbTableOptions], optimizer: EmbOptimType, params: OptimizerParams, seeds: list[int], device: torch.device,
) -> tuple[list[DynamicTable], DeviceTableGroup | None]:
    """The module's tables, sharing one storage (and a group to drive them) when they qualify."""
    layouts = [plan_layout(o, optimizer) for o in options]
    if _shares_storage(options, layouts):
        if layouts[0].mode is StorageMode.GPU:
            return _device_group(options, layouts, optimizer, params, seeds, device)
        built = _caching_group(options, layouts, optimizer, params, seeds, device)
        if built is not None:
            return built
    return [build_table(o, optimizer, params, seed, device) for o, seed in zip(options, seeds, strict=True)], None


def _regions(
    buckets: list[int], bucket_capacity: int, width: int, device: torch.device, rows_device: torch.device | None = None,
) -> tuple[list[int], SlotArrays, torch.Tensor]:
    """Bucket bases of tables laid out one after another (each with a spare bucket), their slot arrays and rows
    (on ``rows_device`` if given)."""
    bucket_base = []
    total_buckets = 0
    for count in buckets:
        bucket_base.append(total_buckets)
        total_buckets += count + 1  # the table's buckets, then its spare bucket
    slot_count = total_buckets * bucket_capacity + 1  # and the group's own spare entry
    rows = torch.zeros(slot_count, width, dtype=torch.float32, device=rows_device or device)
    return bucket_base, SlotArrays.allocate(slot_count, device), rows


def _view(arrays: SlotArrays, rows: torch.Tensor, base: int, bucket_capacity: int, capacity: int) -> tuple[SlotArrays, torch.Tensor]:
    """One table's region: its slots and its spare (its spare bucket's first slot)."""
    start, length = base * bucket_capacity, capacity + 1
    return arrays.region(start, length), rows[start : start + length]


def _device_group(
    options: list[DynamicEmbTableOptions], layouts: list[Layout], optimizer: EmbOptimType, params: OptimizerParams, seeds: list[int],
    device: torch.device,
) -> tuple[list[DynamicTable], DeviceTableGroup]:
    cap = options[0].effective_bucket_capacity
    bucket_base, arrays, rows = _regions([o.num_buckets for o in options], cap, layouts[0].width, device)
    tables = [
        FlatTable(o, layout, optimizer, params, seed, device, _view(arrays, rows, base, cap, o.capacity))
        for o, layout, seed, base in zip(options, layouts, seeds, bucket_base, strict=True)
    ]
    return tables, DeviceTableGroup(tables, [t.table for t in tables], arrays, rows, bucket_base, device)


def _caching_group(
    options: list[DynamicEmbTableOptions], layouts: list[Layout], optimizer: EmbOptimType, params: OptimizerParams, seeds: list[int],
    device: torch.device,
) -> tuple[list[DynamicTable], DeviceTableGroup] | None:
    """Caches in one device storage, host storages in one ``HostTier``; None where kernels cannot reach host memory."""
    width = layouts[0].width
    storage_cap = options[0].effective_bucket_capacity
    storage_buckets = [o.num_buckets for o in options]
    storage_base, storage_arrays, host_rows = _regions(storage_buckets, storage_cap, width, device, torch.device("cpu"))
    reachable = device_view(host_rows, device)
    if reachable is None:
        warnings.warn(
            f"dynemb: kernels on {device} cannot reach host memory (cudaHostRegister failed or no unified addressing); "
            "caching tables go table by table, copying rows through the CPU (slower)",
            RuntimeWarning, stacklevel=4,
        )
        return None
    cache_cap = layouts[0].cache_bucket_capacity
    cache_buckets = [layout.cache_buckets for layout in layouts]
    cache_base, cache_arrays, cache_rows = _regions(cache_buckets, cache_cap, width, device)
    tables = [
        CachedTable(
            o, layout, optimizer, params, seed, device,
            (_view(cache_arrays, cache_rows, c_base, cache_cap, buckets * cache_cap), _view(storage_arrays, host_rows, s_base, storage_cap, o.capacity)),
        )
        for o, layout, seed, c_base, s_base, buckets in zip(options, layouts, seeds, cache_base, storage_base, cache_buckets, strict=True)
    ]
    backing = HostTier(storage_arrays, reachable, storage_buckets, storage_base, storage_cap, device)
    return tables, DeviceTableGroup(tables, [t.cache for t in tables], cache_arrays, cache_rows, cache_base, device, backing)
