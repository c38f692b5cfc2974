"""The torch path of each fused step: the CPU implementation and the reference the kernels are tested against.

Signatures match ``dynemb.kernels.triton_ops`` one for one.
"""

from __future__ import annotations

import torch

from dynemb.hashing import bucket_of, mix64, random_bits, uniform_open
from dynemb.optimizers import OptimizerParams, update_rows
from dynemb.options import EmbOptimType, PoolingMode

# Keys per chunk in find: bounds the [chunk, bucket_capacity] compare matrix.
_FIND_CHUNK = 1 << 16
# Above this many (key, slot) pairs an insert reads one row per touched bucket, not per key.
_ROWS_PER_KEY_LIMIT = 1 << 24
_INT64_MIN = torch.iinfo(torch.int64).min
_INT64_MAX = torch.iinfo(torch.int64).max


def find_slots(keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, bucket_capacity: int) -> torch.Tensor:
    """Slot of each key in its bucket (``buckets``), -1 where absent; ``table_keys``/``occupied`` are flat per slot."""
    if keys.numel() <= _FIND_CHUNK:
        return _find_chunk(keys, buckets, table_keys, occupied, bucket_capacity)
    return torch.cat([
        _find_chunk(key_chunk, bucket_chunk, table_keys, occupied, bucket_capacity)
        for key_chunk, bucket_chunk in zip(keys.split(_FIND_CHUNK), buckets.split(_FIND_CHUNK), strict=True)
    ])


def find_and_touch(
    keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor,
    bucket_capacity: int, counts: torch.Tensor, clock: int, add_counts: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> torch.Tensor:
    """``find_slots``; found slots' scores set to ``clock`` (``add_counts``: raised by ``counts``); hits/misses counted."""
    slots = find_slots(keys, buckets, table_keys, occupied, bucket_capacity)
    target = torch.where(slots >= 0, slots, table_scores.numel() - 1)  # absent keys touch the spare entry
    if add_counts:
        table_scores.index_add_(0, target, counts)
    else:
        table_scores[target] = torch.full_like(counts, clock)
    found = (slots >= 0).sum()
    hits += found
    misses += slots.numel() - found
    return slots


def group_find(
    indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, table_buckets: torch.Tensor, table_base: torch.Tensor,
    table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor, bucket_capacity: int,
    clock: int, add_counts: bool, touch: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slot (-1: absent) and bucket of every index of a TBE batch, over tables that share one set of slot arrays.

    Index ``i`` belongs to the last table ``t`` with ``offsets[t * batch_size] <= i``;
    table ``t`` owns buckets ``table_base[t] + [0, table_buckets[t])``. Indices repeat,
    so with ``touch`` a found slot's score is set to ``clock`` (or, ``add_counts``,
    raised by one per index), and ``hits[t]``/``misses[t]`` count lookups per index.
    """
    n = indices.numel()
    bounds = offsets[::batch_size].contiguous()
    table = torch.searchsorted(bounds, torch.arange(n, device=indices.device), right=True) - 1
    buckets = table_base[table] + torch.remainder(mix64(indices), table_buckets[table])
    slots = find_slots(indices, buckets, table_keys, occupied, bucket_capacity)
    if touch:
        found = slots >= 0
        target = torch.where(found, slots, table_scores.numel() - 1)  # absent keys touch the spare entry
        if add_counts:
            table_scores.index_add_(0, target, torch.ones_like(target))
        else:
            table_scores[target] = clock
        hits.index_add_(0, table, found.to(torch.int64))
        misses.index_add_(0, table, (~found).to(torch.int64))
    return slots, buckets


def _find_chunk(keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, cap: int) -> torch.Tensor:
    # Buckets fill from position 0 and slots are never vacated, so the occupied
    # slots of a bucket are a prefix: the first equal key decides, and only its
    # slot's flag needs reading (an empty slot's stale key can only match after
    # every occupied position).
    per_bucket = table_keys[: (table_keys.numel() // cap) * cap].view(-1, cap)
    position = (per_bucket[buckets] == keys.unsqueeze(1)).to(torch.uint8).argmax(dim=1)
    slots = buckets * cap + position
    found = (table_keys[slots] == keys) & occupied[slots]
    return torch.where(found, slots, -1)


def reduce_and_update(
    optimizer: EmbOptimType, rows: torch.Tensor, grouped_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor,
    params: OptimizerParams, step: int,
) -> None:
    """In place on ``rows`` ``[capacity + 1, dim + state]``: position ``j`` carries the gradient row
    ``index_grads[order[j]]`` of the id at ``grouped_slots[j]`` (equal slots adjacent; -1: the spare last row);
    each id's rows are summed and its row stepped once."""
    if grouped_slots.numel() == 0:
        return
    slots, counts = torch.unique_consecutive(grouped_slots, return_counts=True)
    grads = torch.segment_reduce(index_grads[order], "sum", lengths=counts, unsafe=True)
    target = torch.where(slots >= 0, slots, rows.shape[0] - 1)
    updated = rows[target]
    update_rows(optimizer, updated, grads, params, step)
    rows[target] = updated


def gather_rows(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``source[index]`` for a ``[rows, dim]`` source whose rows may be strided (the embedding columns of wider rows)."""
    return torch.index_select(source, 0, index)


def pool_rows(emb: torch.Tensor, inverse: torch.Tensor, offsets: torch.Tensor, mode: PoolingMode, out: torch.Tensor) -> None:
    """``out[b] = sum (MEAN: mean) of emb[inverse[j]]`` for ``j`` in bag ``b`` (``offsets`` ``[bags + 1]``, from any start)."""
    lengths = offsets[1:] - offsets[:-1]
    pooled = torch.segment_reduce(emb[inverse], "sum", lengths=lengths, unsafe=True, initial=0.0)
    if mode is PoolingMode.MEAN:
        pooled = pooled / lengths.clamp(min=1).unsqueeze(1).to(pooled.dtype)
    out.copy_(pooled)


def place_keys(
    sorted_buckets: torch.Tensor, rank: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor,
    table_keys: torch.Tensor, table_scores: torch.Tensor, occupied: torch.Tensor, protected: torch.Tensor, bucket_capacity: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slot each new key ``keys[order[i]]`` (bucket ``sorted_buckets[i]``, ``rank[i]``-th new key there) and write it.

    In its bucket the ``r``-th new key takes the ``r``-th slot by (priority, position):
    empty slots first, then occupied ones by ascending score; ``protected`` slots
    never. Per-slot arrays are flat with a spare last entry. Returns, per sorted key,
    its slot (-1: no slot left) and what it evicted (mask, key, score).
    """
    n = sorted_buckets.numel()
    cap = bucket_capacity
    spare = occupied.numel() - 1
    if n * cap <= _ROWS_PER_KEY_LIMIT:
        # Each key reads its own bucket's row: no compaction, no host sync.
        rows, row_of_key = sorted_buckets, torch.arange(n, device=keys.device)
    else:
        # A bulk insert (a checkpoint load): one row per touched bucket bounds memory.
        rows, counts = torch.unique_consecutive(sorted_buckets, return_counts=True)
        row_of_key = torch.repeat_interleave(torch.arange(rows.numel(), device=keys.device), counts, output_size=n)
    per_bucket = spare // cap
    priority = torch.where(occupied[:spare].view(per_bucket, cap)[rows], table_scores[:spare].view(per_bucket, cap)[rows], _INT64_MIN)
    priority = torch.where(protected[:spare].view(per_bucket, cap)[rows], _INT64_MAX, priority)
    ordered_priority, candidate = torch.sort(priority, dim=1, stable=True)
    eligible = (ordered_priority != _INT64_MAX).sum(dim=1)
    placed = rank < eligible[row_of_key]
    position = candidate[row_of_key, rank.clamp(max=cap - 1)]
    sorted_slots = torch.where(placed, sorted_buckets * cap + position, -1)
    target = torch.where(placed, sorted_slots, spare)
    evicted = (occupied[target], table_keys[target], table_scores[target])
    table_keys[target] = keys[order]
    table_scores[target] = scores[order]
    occupied[target] = True
    occupied[spare] = False
    return sorted_slots, *evicted


def uniform_rows(keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """``[len(keys), dim]`` float32 uniform in (lower, upper), a pure function of (seed, id, column).

    ``seed_words``: ``hashing.seed_word(seed)``, or a tensor of one such word per key.
    """
    return lower + (upper - lower) * uniform_open(random_bits(keys, dim, seed_words), 40)


__all__ = ["bucket_of", "find_and_touch", "find_slots", "gather_rows", "group_find", "place_keys", "pool_rows", "reduce_and_update", "uniform_rows"]
