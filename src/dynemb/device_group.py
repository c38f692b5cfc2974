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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dynemb import kernels
from dynemb.hash_table import BucketedHashTable, SlotArrays
from dynemb.initializers import Initializer
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
from dynemb.storage import DynamicTable, FlatTable, Layout, build_table, plan_layout
from dynemb.validation import BatchLayout


@dataclass(frozen=True)
class GroupPlan:
    """What backward needs: each index's slot (-1: none) as forward left the tables, and the batch."""

    slots: torch.Tensor
    version: int
    indices: torch.Tensor
    offsets: torch.Tensor
    batch_size: int


def _shares_storage(options: list[DynamicEmbTableOptions], layouts: list[Layout]) -> bool:
    """Every row on the device, and one row width, bucket capacity, score strategy and initializer draws."""
    if any(layout.mode is not StorageMode.GPU for layout in layouts):
        return False
    first = options[0]
    draws = [Initializer(o.initializer_args, 0, o.max_capacity) for o in options]
    eval_draws = [Initializer(o.eval_initializer_args, 0, o.max_capacity) for o in options]
    return all(
        layout.width == layouts[0].width
        and o.effective_bucket_capacity == first.effective_bucket_capacity
        and o.score_strategy is first.score_strategy
        and draw.same_draw_as(draws[0])
        and eval_draw.same_draw_as(eval_draws[0])
        for o, layout, draw, eval_draw in zip(options, layouts, draws, eval_draws, strict=True)
    )


class DeviceTableGroup:
    """The tables of one module that share device storage, and the batched lookup and update over them."""

    def __init__(self, tables: list[FlatTable], arrays: SlotArrays, rows: torch.Tensor, bucket_base: list[int], device: torch.device) -> None:
        self.tables = tables
        self.device = device
        self.bucket_capacity = tables[0].table.index.bucket_capacity
        self.dim = tables[0].dim
        self.rows = rows
        self.arrays = arrays
        self.index = BucketedHashTable(rows.shape[0] // self.bucket_capacity, self.bucket_capacity, device, arrays)
        self.table_buckets = torch.tensor([t.table.index.num_buckets for t in tables], dtype=torch.int64, device=device)
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

    @property
    def version(self) -> int:
        """Changes whenever any table's slots change owner (an insert here or through a table)."""
        return sum(t.table.version for t in self.tables)

    @property
    def spare(self) -> int:
        return self.rows.shape[0] - 1

    def _clock(self) -> int:
        for table in self.tables:
            table.scores.tick()
        return self.tables[0].scores.clock

    def lookup(self, indices: torch.Tensor, layout: BatchLayout, pooling: PoolingMode) -> tuple[torch.Tensor, GroupPlan]:
        """Training forward of the whole batch: output in TBE layout, and each index's slot for backward.

        With pooling NONE the rows are gathered before the host learns whether any
        index is new, so the GPU gathers while the host waits; new ids' rows are
        patched in afterwards. Pooled modes pool once every slot is known.
        """
        with op_range("storage_find"):
            slots, buckets = self._find(indices, layout.offsets, layout.batch_size, touch=True)
        per_index = None
        if pooling is PoolingMode.NONE:
            with op_range("gather_embedding"):
                per_index = kernels.gather_rows(self._values, self._stored(slots))
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)  # the one host sync of a batch without new ids
        if missing.numel():
            fresh = self._insert(indices, slots, buckets, missing)
            with op_range("gather_embedding"):
                per_index = self._patch(per_index, slots, missing, fresh)
        with op_range("gather_embedding"):
            output = self._output(per_index, slots, layout, pooling)
        return output, GroupPlan(slots, self.version, indices, layout.offsets, layout.batch_size)

    @property
    def _values(self) -> torch.Tensor:
        """The embedding columns of every stored row (the optimizer state follows them)."""
        return self.rows[:, : self.dim]

    def _stored(self, slots: torch.Tensor) -> torch.Tensor:
        """Row of each slot; the spare row for -1."""
        return torch.where(slots >= 0, slots, self.spare)

    def _find(self, indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, touch: bool) -> tuple[torch.Tensor, torch.Tensor]:
        clock = self._clock() if touch else self.tables[0].scores.clock
        return kernels.group_find(
            indices, offsets, batch_size, self.table_buckets, self.table_base, self.arrays.keys, self.arrays.occupied,
            self.arrays.scores, self.bucket_capacity, clock, self.counts_accesses, touch, self.hits, self.misses,
        )

    def _insert(self, indices: torch.Tensor, slots: torch.Tensor, buckets: torch.Tensor, missing: torch.Tensor) -> torch.Tensor:
        """Insert the absent ids of the batch; return the fresh embedding of each missing index."""
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
            table = torch.searchsorted(self.table_base, new_buckets, right=True) - 1
        with op_range("initializer"):
            fresh = self.tables[0].initial_rows(new_keys, self.seed_words[table])
        with op_range("storage_insert"):
            if self.counts_accesses:
                scores = torch.diff(first, append=first.new_tensor([missing.numel()]))
            else:
                scores = torch.full_like(new_keys, self.tables[0].scores.clock)
            identity = torch.arange(new_keys.numel(), device=self.device)
            new_slots, evicted = self.index.insert_sorted(new_buckets, identity, new_keys, scores, protect=slots)
            self.evictions.index_add_(0, table, evicted.mask.to(torch.int64))
            for t in self.tables:
                t.table.index.version += 1
        with op_range("store_to_flat"):
            self.rows[self._stored(new_slots)] = fresh
        slots[missing] = new_slots[inverse]
        # Ids whose bucket was full of this batch's ids (slot -1) are used with these values, not stored.
        return fresh[inverse, : self.dim]

    def eval_lookup(self, indices: torch.Tensor, layout: BatchLayout, pooling: PoolingMode) -> torch.Tensor:
        """Eval forward of the whole batch: stored rows, the eval initializer's values for unknown ids;
        nothing inserted, no score or counter touched."""
        with op_range("storage_find"):
            slots, buckets = self._find(indices, layout.offsets, layout.batch_size, touch=False)
        per_index = None
        if pooling is PoolingMode.NONE:
            with op_range("gather_embedding"):
                per_index = kernels.gather_rows(self._values, self._stored(slots))
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)
        if missing.numel():
            if per_index is None:
                per_index = kernels.gather_rows(self._values, self._stored(slots))
            with op_range("initializer"):
                table = torch.searchsorted(self.table_base, buckets[missing], right=True) - 1
                per_index[missing] = self.tables[0].eval_initializer(indices[missing], self.dim, self.seed_words[table])
        with op_range("gather_embedding"):
            return self._output(per_index, slots, layout, pooling)

    def _patch(self, per_index: torch.Tensor | None, slots: torch.Tensor, missing: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor | None:
        """Per-index rows after an insert: the new ids' stored rows, ``fresh`` values where an index found no
        slot. Pooled modes (``per_index`` None) only need them when some index found none (one host sync)."""
        unstored = slots[missing] < 0
        if per_index is None:
            if not bool(unstored.any()):
                return None
            per_index = kernels.gather_rows(self._values, self._stored(slots))
        per_index[missing] = torch.where(unstored.unsqueeze(1), fresh, kernels.gather_rows(self._values, self._stored(slots[missing])))
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
        with op_range("optimizer_update_fused"):
            first = self.tables[0]
            kernels.reduce_and_update(first.optimizer, self.rows, sorted_slots, order, index_grads, first.params, step)


def build_tables(
    options: list[DynamicEmbTableOptions], optimizer: EmbOptimType, params: OptimizerParams, seeds: list[int], device: torch.device,
) -> tuple[list[DynamicTable], DeviceTableGroup | None]:
    """The module's tables, sharing one device storage (and a group to drive them) when they qualify."""
    layouts = [plan_layout(o, optimizer) for o in options]
    if not _shares_storage(options, layouts):
        return [build_table(o, optimizer, params, seed, device) for o, seed in zip(options, seeds, strict=True)], None
    cap = options[0].effective_bucket_capacity
    width = layouts[0].width
    bucket_base = []
    total_buckets = 0
    for o in options:
        bucket_base.append(total_buckets)
        total_buckets += o.num_buckets + 1  # the table's buckets, then its spare bucket
    slot_count = total_buckets * cap + 1  # and the group's own spare entry
    arrays = SlotArrays.allocate(slot_count, device)
    rows = torch.zeros(slot_count, width, dtype=torch.float32, device=device)
    tables = []
    for o, layout, seed, base in zip(options, layouts, seeds, bucket_base, strict=True):
        start, length = base * cap, o.capacity + 1  # its slots and its spare (its spare bucket's first slot)
        shared = (arrays.region(start, length), rows[start : start + length])
        tables.append(FlatTable(o, layout, optimizer, params, seed, device, shared))
    return tables, DeviceTableGroup(tables, arrays, rows, bucket_base, device)
