"""The torch path of each fused step: the CPU implementation and the reference the kernels are tested against.

Signatures match ``dynemb.kernels.triton_ops`` one for one.
"""

from __future__ import annotations

import torch

from dynemb.hashing import bucket_of, random_bits, uniform_open
from dynemb.kernels.operands import BucketTensors, RowParts
from dynemb.optimizers import OptimizerParams, update_rows
from dynemb.options import EmbOptimType, PoolingMode

# Keys per chunk in find: bounds the [chunk, bucket_capacity] compare matrix.
_FIND_CHUNK = 1 << 16
# Above this many (key, slot) pairs an insert reads one row per touched bucket, not per key.
_ROWS_PER_KEY_LIMIT = 1 << 24
_INT64_MIN = torch.iinfo(torch.int64).min
_INT64_MAX = torch.iinfo(torch.int64).max


def table_buckets(keys: torch.Tensor, table: torch.Tensor, maps: BucketTensors) -> torch.Tensor:
    """Bucket of each key of table ``table[i]`` in a ``BucketMap``'s slot arrays (``dynemb.hash_table``):
    ``mix64(key) mod num_buckets``, then the table's device range for local buckets below its
    ``device_buckets``, its host range for the rest."""
    local = bucket_of(keys, maps.num_buckets[table])
    device_buckets = maps.device_buckets[table]
    return torch.where(local < device_buckets, maps.device_base[table] + local, maps.host_base[table] + local - device_buckets)


def find(
    keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, maps: BucketTensors,
    table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor, bucket_capacity: int,
    clock: int, add_counts: bool, touch: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slot (-1: absent) and bucket of every key, over tables that share one set of slot arrays.

    A key's table is ``table[i]``; with ``table`` None, that of a TBE batch's index
    ``i`` (the last ``t`` with ``offsets[t * batch_size] <= i``), or table 0 without
    ``offsets``. Indices repeat, so with ``touch`` a found slot's score is set to
    ``clock`` (or, ``add_counts``, raised by one per index), and ``hits[t]``/``misses[t]``
    count lookups per index.
    """
    n = keys.numel()
    if table is None:
        if offsets is None:
            table = torch.zeros(n, dtype=torch.int64, device=keys.device)
        else:
            bounds = offsets[::batch_size].contiguous()
            table = torch.searchsorted(bounds, torch.arange(n, device=keys.device), right=True) - 1
    buckets = table_buckets(keys, table, maps)
    if n <= _FIND_CHUNK:
        slots = _find_chunk(keys, buckets, table_keys, occupied, bucket_capacity)
    else:
        slots = torch.cat([
            _find_chunk(key_chunk, bucket_chunk, table_keys, occupied, bucket_capacity)
            for key_chunk, bucket_chunk in zip(keys.split(_FIND_CHUNK), buckets.split(_FIND_CHUNK), strict=True)
        ])
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


def _rows(parts: RowParts, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Row of each slot (the spare for -1) and, where some rows are in host memory, the positions whose
    rows are on the device and those in host memory."""
    rows = torch.where(slots >= 0, slots, parts.spare)
    if parts.on_device:
        return rows, None, None
    on_device = rows < parts.split
    return rows, torch.nonzero(on_device).squeeze(1), torch.nonzero(~on_device).squeeze(1)


def gather_rows(parts: RowParts, slots: torch.Tensor, columns: int) -> torch.Tensor:
    """``[len(slots), columns]``: the first ``columns`` of the row of each slot (the spare row for -1)."""
    rows, local, remote = _rows(parts, slots)
    if local is None:
        return parts.device[rows, :columns]
    out = torch.empty(slots.numel(), columns, dtype=parts.device.dtype, device=slots.device)
    out[local] = parts.device[rows[local], :columns]
    out[remote] = parts.host[rows[remote] - parts.split, :columns]
    return out


def scatter_rows(parts: RowParts, slots: torch.Tensor, values: torch.Tensor) -> None:
    """Write full rows ``values`` at each slot's row (the spare row for -1)."""
    rows, local, remote = _rows(parts, slots)
    if local is None:
        parts.device[rows] = values
        return
    parts.device[rows[local]] = values[local]
    parts.host[rows[remote] - parts.split] = values[remote]


def gather_unique(parts: RowParts, sorted_slots: torch.Tensor, order: torch.Tensor, columns: int) -> torch.Tensor:
    """``gather_rows`` of the slots ``sorted_slots[j]`` of indices ``order[j]``, into index order."""
    out = torch.empty(sorted_slots.numel(), columns, dtype=parts.device.dtype, device=sorted_slots.device)
    out[order] = gather_rows(parts, sorted_slots, columns)
    return out


def reduce_and_update(
    optimizer: EmbOptimType, parts: RowParts, grouped_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor,
    params: OptimizerParams, step: int,
) -> None:
    """In place on the rows ``[dim + state]`` of ``parts``: position ``j`` carries the gradient row
    ``index_grads[order[j]]`` of the id at ``grouped_slots[j]`` (equal slots adjacent; -1: the spare row);
    each id's rows are summed and its row stepped once."""
    if grouped_slots.numel() == 0:
        return
    slots, counts = torch.unique_consecutive(grouped_slots, return_counts=True)
    grads = torch.segment_reduce(index_grads[order], "sum", lengths=counts, unsafe=True)
    updated = gather_rows(parts, slots, parts.width)
    update_rows(optimizer, updated, grads, params, step)
    scatter_rows(parts, slots, updated)


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


def uniform_rows(
    keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, lower: float | torch.Tensor, span: float | torch.Tensor,
) -> torch.Tensor:
    """``[len(keys), dim]`` float32 uniform in (lower, lower + span), a pure function of (seed, id, column).

    ``seed_words``: ``hashing.seed_word(seed)``, or a tensor of one such word per key;
    ``lower``/``span``: numbers, or float32 tensors of one per key (tables sharing
    storage draw each key's row with its own table's seed and bounds).
    """
    if isinstance(lower, torch.Tensor):
        lower, span = lower.unsqueeze(1), span.unsqueeze(1)
    return lower + span * uniform_open(random_bits(keys, dim, seed_words), 40)


__all__ = ["find", "gather_rows", "gather_unique", "place_keys", "pool_rows", "reduce_and_update", "scatter_rows", "table_buckets", "uniform_rows"]
