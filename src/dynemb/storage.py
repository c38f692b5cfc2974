"""One logical embedding table in any storage mode: lookup, update, export and load.

``FlatTable`` holds GPU, HYBRID and HOST modes: one hash table whose rows are on
the device, split, or on the host. ``CachedTable`` is the CACHING mode: a device
cache (its own hash table, LRU or LFU by score) over host storage; ids evicted
from the cache are written back with their latest values and optimizer state,
so nothing is lost until host storage itself evicts. Each step runs under the
reference system's ``op:`` range name so the profile breakdown can attribute it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dynemb import kernels
from dynemb.hash_table import SlotArrays
from dynemb.initializers import Initializer
from dynemb.key_value_table import KeyValueTable
from dynemb.optimizers import OptimizerParams, initial_state, state_width, update_rows
from dynemb.options import DynamicEmbTableOptions, EmbOptimType, StorageMode
from dynemb.ranges import op_range
from dynemb.scores import ScorePolicy
from dynemb.segments import UniqueIds, reduce_grads

_FLOAT_BYTES = 4


@dataclass(frozen=True)
class UpdatePlan:
    """Where forward found each unique id, for backward's optimizer step."""

    keys: torch.Tensor
    slots: torch.Tensor
    version: int
    exact: bool  # False: some ids live outside the slots tier; backward must look them up


@dataclass(frozen=True)
class Layout:
    """How a table's rows are placed, derived from its options (the reference system's rules)."""

    mode: StorageMode
    width: int
    device_rows: int
    cache_buckets: int = 0
    cache_bucket_capacity: int = 0


def plan_layout(options: DynamicEmbTableOptions, optimizer: EmbOptimType) -> Layout:
    """GPU if the device budget holds every row; else CACHING (with ``caching``), HYBRID, or HOST when no row fits."""
    width = options.dim + state_width(optimizer, options.dim)
    row_bytes = width * _FLOAT_BYTES
    capacity = options.capacity
    budget = options.local_hbm_for_values
    if budget is None or budget >= capacity * row_bytes:
        return Layout(StorageMode.GPU, width, capacity + 1)
    budget_rows = budget // row_bytes
    if budget_rows == 0:
        return Layout(StorageMode.HOST, width, 0)
    if options.caching:
        bucket_capacity = min(options.effective_bucket_capacity, budget_rows)
        return Layout(StorageMode.CACHING, width, 0, budget_rows // bucket_capacity, bucket_capacity)
    return Layout(StorageMode.HYBRID, width, budget_rows)


class DynamicTable:
    """Behaviour shared by every storage mode: rows, initializers, counters."""

    def __init__(self, options: DynamicEmbTableOptions, layout: Layout, optimizer: EmbOptimType, params: OptimizerParams, seed: int, device: torch.device) -> None:
        self.options = options
        self.layout = layout
        self.dim = options.dim
        self.optimizer = optimizer
        self.params = params
        self.device = device
        self.scores = ScorePolicy(options.score_strategy)
        self.initializer = Initializer(options.initializer_args, seed, options.max_capacity)
        self.eval_initializer = Initializer(options.eval_initializer_args, seed, options.max_capacity)
        self.hits = torch.zeros((), dtype=torch.int64, device=device)
        self.misses = torch.zeros((), dtype=torch.int64, device=device)
        self.evictions = torch.zeros((), dtype=torch.int64, device=device)

    @property
    def storage_mode(self) -> StorageMode:
        return self.layout.mode

    def reset_stats(self) -> None:
        self.hits.zero_()
        self.misses.zero_()
        self.evictions.zero_()

    def initial_rows(self, keys: torch.Tensor, seed_words: torch.Tensor | None = None) -> torch.Tensor:
        """Full rows (embedding and fresh optimizer state) for ids seen for the first time (``seed_words``: per key)."""
        emb = self.initializer(keys, self.dim, seed_words)
        if self.layout.width == self.dim:
            return emb
        state = initial_state(self.optimizer, keys.numel(), self.dim, self.params, keys.device)
        return torch.cat([emb, state], dim=1)

    def _update_tier(self, tier: KeyValueTable, slots: torch.Tensor, grads: torch.Tensor, step: int) -> None:
        """Optimizer step on the rows at ``slots`` given summed ``grads`` (slot -1 rows go to the spare row and are discarded)."""
        rows = tier.rows.gather(slots)
        update_rows(self.optimizer, rows, grads, self.params, step)
        tier.rows.scatter(slots, rows)

    def _reduce_and_update_tier(self, tier: KeyValueTable, slots: torch.Tensor, index_grads: torch.Tensor, unique: UniqueIds, step: int) -> None:
        """Sum each unique id's gradient rows and step its row: one fused kernel where every row is on the device."""
        if tier.rows.device_only:
            with op_range("optimizer_update_fused"):
                grouped = torch.repeat_interleave(slots, unique.counts, output_size=unique.order.numel())
                kernels.reduce_and_update(self.optimizer, tier.rows.device_part, grouped, unique.order, index_grads, self.params, step)
            return
        with op_range("reduce_grads"):
            grads = reduce_grads(index_grads, unique)
        with op_range("optimizer_update_fused"):
            self._update_tier(tier, slots, grads, step)

    def _check_fits(self, tier: KeyValueTable, keys: torch.Tensor) -> None:
        most = tier.index.max_keys_per_bucket(keys)
        if most > tier.index.bucket_capacity:
            raise ValueError(
                f"{most} of the ids hash to one bucket of {tier.index.bucket_capacity} slots; "
                "raise max_capacity or bucket_capacity"
            )

    def _upsert(self, tier: KeyValueTable, keys: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor) -> None:
        self.evictions += tier.upsert(keys, rows, scores)


class FlatTable(DynamicTable):
    """GPU, HYBRID and HOST modes: one hash table, rows wherever the layout puts them."""

    def __init__(
        self, options: DynamicEmbTableOptions, layout: Layout, optimizer: EmbOptimType, params: OptimizerParams, seed: int, device: torch.device,
        shared: tuple[SlotArrays, torch.Tensor] | None = None,
    ) -> None:
        super().__init__(options, layout, optimizer, params, seed, device)
        self.table = KeyValueTable(options.num_buckets, options.effective_bucket_capacity, layout.width, layout.device_rows, device, shared)

    @property
    def capacity(self) -> int:
        return self.table.capacity

    def lookup(self, keys: torch.Tensor, counts: torch.Tensor, training: bool) -> tuple[torch.Tensor, UpdatePlan | None]:
        """Embeddings ``[len(keys), dim]`` of unique ids; training inserts new ids and refreshes scores."""
        if not training:
            with op_range("storage_find"):
                slots = self.table.find(keys)
            return _rows_or_default(self.table, slots, keys, self.eval_initializer, self.dim), None
        self.scores.tick()
        with op_range("storage_find"):
            slots = self.scores.find_and_touch(self.table.index, keys, counts, self.hits, self.misses)
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)
        fresh = None
        if missing.numel():
            new_keys = keys[missing]
            with op_range("initializer"):
                fresh = self.initial_rows(new_keys)
            with op_range("storage_insert"):
                new_slots, evicted = self.table.insert(new_keys, self.scores.for_new(counts[missing]), protect=slots)
            self.evictions += evicted.count()
            with op_range("store_to_flat"):
                self.table.rows.scatter(new_slots, fresh)
            slots[missing] = new_slots
        with op_range("load_from_flat"):
            emb = self.table.rows.gather(slots, self.dim)
        if fresh is not None:
            # Ids whose bucket was full of this batch's ids (slot -1) are used with
            # fresh values, not stored; selected without a host sync.
            emb[missing] = torch.where((new_slots < 0).unsqueeze(1), fresh[:, : self.dim], emb[missing])
        return emb, UpdatePlan(keys, slots, self.table.version, exact=True)

    def prefetch(self, keys: torch.Tensor, counts: torch.Tensor) -> None:
        """Nothing to bring in: every row is already where lookups read it."""

    def apply_gradients(self, plan: UpdatePlan, index_grads: torch.Tensor, unique: UniqueIds, step: int) -> None:
        """Optimizer step on the rows of ``unique``'s ids from the gradient of every index of the batch."""
        slots = plan.slots if plan.version == self.table.version else self.table.find(plan.keys)
        self._reduce_and_update_tier(self.table, slots, index_grads, unique, step)

    def export(self) -> tuple[torch.Tensor, torch.Tensor]:
        keys, rows, _ = self.table.items()
        return keys, rows

    def load(self, keys: torch.Tensor, rows: torch.Tensor) -> None:
        self._check_fits(self.table, keys)
        self._upsert(self.table, keys, rows, self.scores.for_new(torch.ones_like(keys)))

    def size(self) -> int:
        return self.table.size()


class CachedTable(DynamicTable):
    """CACHING mode: a device cache over host storage, with write-back of evicted rows."""

    def __init__(
        self, options: DynamicEmbTableOptions, layout: Layout, optimizer: EmbOptimType, params: OptimizerParams, seed: int, device: torch.device,
        shared: tuple[tuple[SlotArrays, torch.Tensor], tuple[SlotArrays, torch.Tensor]] | None = None,
    ) -> None:
        """``shared``: (cache, host storage) regions of a group's storage, each (slot arrays, rows), instead of its own."""
        super().__init__(options, layout, optimizer, params, seed, device)
        cache_rows = layout.cache_buckets * layout.cache_bucket_capacity
        cache_region, storage_region = (None, None) if shared is None else shared
        self.cache = KeyValueTable(layout.cache_buckets, layout.cache_bucket_capacity, layout.width, cache_rows + 1, device, cache_region)
        self.storage = KeyValueTable(options.num_buckets, options.effective_bucket_capacity, layout.width, 0, device, storage_region)

    @property
    def capacity(self) -> int:
        return self.storage.capacity

    def _admit(self, keys: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Bring every id of the batch into the cache; return cache slots and the ids it could not hold.

        Returns (slots, outside positions, outside rows): ids whose cache bucket was
        full of this batch's ids stay in host storage, where their update goes.
        """
        self.scores.tick()
        with op_range("cache_lookup"):
            slots = self.scores.find_and_touch(self.cache.index, keys, counts, self.hits, self.misses)
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)
        if missing.numel() == 0:
            return slots, None, None
        miss_keys = keys[missing]
        with op_range("storage_find"):
            stored_slots = self.storage.find(miss_keys)
            rows = self.storage.rows.gather(stored_slots)
            scores = self.scores.for_new(counts[missing], self.storage.index.slot_scores(stored_slots))
            fresh = torch.nonzero(stored_slots < 0).squeeze(1)
        if fresh.numel():
            with op_range("initializer"):
                rows[fresh] = self.initial_rows(miss_keys[fresh])
        with op_range("cache_insert_evict"):
            new_slots, evicted = self.cache.insert(miss_keys, scores, protect=slots)
            evicted_keys, evicted_slots, evicted_scores = evicted.compact()
        self.evictions += evicted_keys.numel()
        if evicted_keys.numel():
            with op_range("load_from_flat"):
                evicted_rows = self.cache.rows.gather(evicted_slots)
        with op_range("store_to_flat"):
            self.cache.rows.scatter(new_slots, rows)
        if evicted_keys.numel():
            with op_range("storage_insert"):
                self.storage.upsert(evicted_keys, evicted_rows, evicted_scores)
        slots[missing] = new_slots
        outside = torch.nonzero(new_slots < 0).squeeze(1)
        if outside.numel() == 0:
            return slots, None, None
        with op_range("storage_insert"):
            self.storage.upsert(miss_keys[outside], rows[outside], scores[outside])
        return slots, missing[outside], rows[outside]

    def lookup(self, keys: torch.Tensor, counts: torch.Tensor, training: bool) -> tuple[torch.Tensor, UpdatePlan | None]:
        if not training:
            return self._eval_lookup(keys), None
        slots, outside, outside_rows = self._admit(keys, counts)
        with op_range("load_from_flat"):
            emb = self.cache.rows.gather(slots, self.dim)
        if outside is not None:
            emb[outside] = outside_rows[:, : self.dim]
        return emb, UpdatePlan(keys, slots, self.cache.version, exact=outside is None)

    def _eval_lookup(self, keys: torch.Tensor) -> torch.Tensor:
        with op_range("cache_lookup"):
            slots = self.cache.find(keys)
        emb = self.cache.rows.gather(slots, self.dim)
        with op_range("flagged_compact"):
            missing = torch.nonzero(slots < 0).squeeze(1)
        if missing.numel():
            with op_range("storage_find"):
                stored_slots = self.storage.find(keys[missing])
            emb[missing] = _rows_or_default(self.storage, stored_slots, keys[missing], self.eval_initializer, self.dim)
        return emb

    def prefetch(self, keys: torch.Tensor, counts: torch.Tensor) -> None:
        """Admit the next batch's ids into the cache so its forward only hits."""
        self._admit(keys, counts)

    def apply_gradients(self, plan: UpdatePlan, index_grads: torch.Tensor, unique: UniqueIds, step: int) -> None:
        """Update the cached rows; ids that left the cache (or never got in) are updated in host storage."""
        stale = plan.version != self.cache.version or not plan.exact
        if not stale:
            self._reduce_and_update_tier(self.cache, plan.slots, index_grads, unique, step)
            return
        slots = self.cache.find(plan.keys)
        with op_range("reduce_grads"):
            grads = reduce_grads(index_grads, unique)
        with op_range("optimizer_update_fused"):
            self._update_tier(self.cache, slots, grads, step)
            outside = torch.nonzero(slots < 0).squeeze(1)
            if outside.numel():
                stored_slots = self.storage.find(plan.keys[outside])
                self._update_tier(self.storage, stored_slots, grads[outside], step)

    def export(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Cache rows win over host rows: the cache holds the newest copy of its ids."""
        cache_keys, cache_rows, _ = self.cache.items()
        stored_keys, stored_rows, _ = self.storage.items()
        only_stored = torch.nonzero(self.cache.find(stored_keys) < 0).squeeze(1)
        return torch.cat([cache_keys, stored_keys[only_stored]]), torch.cat([cache_rows, stored_rows[only_stored]])

    def load(self, keys: torch.Tensor, rows: torch.Tensor) -> None:
        """Write to host storage, and refresh any copy the cache holds."""
        self._check_fits(self.storage, keys)
        self._upsert(self.storage, keys, rows, self.scores.for_new(torch.ones_like(keys)))
        self.cache.rows.scatter(self.cache.find(keys), rows)

    def size(self) -> int:
        cache_keys, _, _ = self.cache.index.items()
        in_both = int((self.storage.find(cache_keys) >= 0).sum())
        return self.cache.size() + self.storage.size() - in_both


def _rows_or_default(tier: KeyValueTable, slots: torch.Tensor, keys: torch.Tensor, default: Initializer, dim: int) -> torch.Tensor:
    """Stored embeddings where found, ``default``'s values elsewhere (no insert)."""
    with op_range("load_from_flat"):
        emb = tier.rows.gather(slots, dim)
    missing = torch.nonzero(slots < 0).squeeze(1)
    if missing.numel():
        with op_range("initializer"):
            emb[missing] = default(keys[missing], dim)
    return emb


def build_table(options: DynamicEmbTableOptions, optimizer: EmbOptimType, params: OptimizerParams, seed: int, device: torch.device) -> DynamicTable:
    """The table class for the storage mode that the options imply."""
    layout = plan_layout(options, optimizer)
    kind = CachedTable if layout.mode is StorageMode.CACHING else FlatTable
    return kind(options, layout, optimizer, params, seed, device)
