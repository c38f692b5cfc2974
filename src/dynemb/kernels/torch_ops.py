"""The torch path of each fused step: the CPU implementation and the reference the kernels are tested against.

Each step's signature is the one ``dynemb.kernels`` dispatches and ``dynemb.kernels.triton_ops`` repeats
(``tests/test_dynemb_kernels.py`` checks they agree); the operands are ``dynemb.kernels.operands``' bundles.
"""

from __future__ import annotations

import torch

from dynemb.hashing import bucket_of, random_bits, uniform_open
from dynemb.kernels.operands import (
    CHECK_DECREASING,
    CHECK_PASSED,
    CHECK_WRONG_ENDS,
    RECORD_FIRST,
    RECORD_LAST,
    Access,
    BucketTensors,
    DrawTables,
    Found,
    OptimizerArgs,
    PendingArrays,
    RowParts,
    SlotArrays,
    Source,
)
from dynemb.optimizers import update_rows
from dynemb.options import PoolingMode

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
    index: SlotArrays, keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, access: Access | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slot (-1: absent) and bucket of every key, over tables that share one set of slot arrays.

    A key's table is ``table[i]`` (-1: no key, whose slot is -1 and bucket 0); with ``table`` None, that of a
    TBE batch's index ``i`` (the last ``t`` with ``offsets[t * batch_size] <= i``), or table 0 without
    ``offsets``. Indices repeat, so with ``access`` a found slot's score is set to
    its ``clock`` (or, ``add_counts``, raised by one per index), and its ``hits[t]``/``misses[t]``
    count lookups per index.
    """
    n = keys.numel()
    if table is None:
        table = torch.zeros(n, dtype=torch.int64, device=keys.device) if offsets is None else _batch_tables(offsets, batch_size, n)
    keyed = table >= 0
    buckets = torch.where(keyed, table_buckets(keys, table.clamp(min=0), index.maps), 0)
    cap = index.bucket_capacity
    if n <= _FIND_CHUNK:
        slots = _find_chunk(keys, buckets, index.keys, index.occupied, cap)
    else:
        slots = torch.cat([
            _find_chunk(key_chunk, bucket_chunk, index.keys, index.occupied, cap)
            for key_chunk, bucket_chunk in zip(keys.split(_FIND_CHUNK), buckets.split(_FIND_CHUNK), strict=True)
        ])
    slots = torch.where(keyed, slots, -1)
    if access is not None:
        found = slots >= 0
        target = torch.where(found, slots, index.scores.numel() - 1)  # absent keys touch the spare entry
        if access.add_counts:
            index.scores.index_add_(0, target, torch.ones_like(target))
        else:
            index.scores[target] = access.clock.expand_as(target)
        counted = table.clamp(min=0)
        access.hits.index_add_(0, counted, found.to(torch.int64))
        access.misses.index_add_(0, counted, (keyed & ~found).to(torch.int64))
    return slots, buckets


def _batch_tables(offsets: torch.Tensor, batch_size: int, n: int) -> torch.Tensor:
    """Table of each of a TBE batch's ``n`` indices: the last ``t`` with ``offsets[t * batch_size] <= i``."""
    bounds = offsets[::batch_size].contiguous()
    return torch.searchsorted(bounds, torch.arange(n, device=offsets.device), right=True) - 1


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
    parts: RowParts, grouped_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor, optimizer: OptimizerArgs,
) -> None:
    """In place on the rows ``[dim + state]`` of ``parts``: position ``j`` carries the gradient row
    ``index_grads[order[j]]`` of the id at ``grouped_slots[j]`` (equal slots adjacent; -1: the spare row);
    each id's rows are summed and its row stepped once by ``optimizer``."""
    if grouped_slots.numel() == 0:
        return
    slots, counts = torch.unique_consecutive(grouped_slots, return_counts=True)
    grads = torch.segment_reduce(index_grads[order], "sum", lengths=counts, unsafe=True)
    updated = gather_rows(parts, slots, parts.width)
    update_rows(optimizer.optimizer, updated, grads, optimizer.params, optimizer.step)
    scatter_rows(parts, slots, updated)


def pool_rows(
    emb: torch.Tensor, inverse: torch.Tensor, offsets: torch.Tensor, mode: PoolingMode, out: torch.Tensor, fresh: torch.Tensor | None = None,
) -> None:
    """``out[b] = sum (MEAN: mean) of emb[inverse[j]]`` for ``j`` in bag ``b`` (``offsets`` ``[bags + 1]``, from any start);
    with ``fresh``, an index ``j`` whose ``inverse`` is not a row of ``emb`` (negative, or a row of the tier behind
    a cache) takes ``fresh[j]`` instead."""
    lengths = offsets[1:] - offsets[:-1]
    inside = (inverse >= 0) & (inverse < emb.shape[0])
    values = emb[torch.where(inside, inverse, 0)]
    if fresh is not None:
        values = torch.where(inside.unsqueeze(1), values, fresh)
    pooled = torch.segment_reduce(values, "sum", lengths=lengths, unsafe=True, initial=0.0)
    if mode is PoolingMode.MEAN:
        pooled = pooled / lengths.clamp(min=1).unsqueeze(1).to(pooled.dtype)
    out.copy_(pooled)


def place_keys(
    index: SlotArrays, sorted_buckets: torch.Tensor, rank: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slot each new key ``keys[order[i]]`` (bucket ``sorted_buckets[i]``, ``rank[i]``-th new key there) and write it.

    In its bucket the ``r``-th new key takes the ``r``-th slot by (priority, position):
    empty slots first, then occupied ones by ascending score; ``protected`` slots
    never. Returns, per sorted key, its slot (-1: no slot left) and what it evicted
    (mask, key, score).
    """
    occupied = index.occupied
    sorted_slots, placed = _plan_slots(sorted_buckets, rank, index)
    spare = occupied.numel() - 1
    target = torch.where(placed, sorted_slots, spare)
    evicted = (occupied[target], index.keys[target], index.scores[target])
    index.keys[target] = keys[order]
    index.scores[target] = scores[order]
    occupied[target] = True
    occupied[spare] = False
    return sorted_slots, *evicted


def _plan_slots(buckets: torch.Tensor, rank: torch.Tensor, index: SlotArrays) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot, placed) of each new key, the ``rank[i]``-th of bucket ``buckets[i]`` (ascending where many)."""
    n = buckets.numel()
    cap = index.bucket_capacity
    occupied, table_scores, protected = index.occupied, index.scores, index.protected
    spare = occupied.numel() - 1
    if n * cap <= _ROWS_PER_KEY_LIMIT:
        # Each key reads its own bucket's row: no compaction, no host sync.
        rows, row_of_key = buckets, torch.arange(n, device=buckets.device)
    else:
        # A bulk insert (a checkpoint load): one row per touched bucket bounds memory.
        rows, counts = torch.unique_consecutive(buckets, return_counts=True)
        row_of_key = torch.repeat_interleave(torch.arange(rows.numel(), device=buckets.device), counts, output_size=n)
    per_bucket = spare // cap
    priority = torch.where(occupied[:spare].view(per_bucket, cap)[rows], table_scores[:spare].view(per_bucket, cap)[rows], _INT64_MIN)
    priority = torch.where(protected[:spare].view(per_bucket, cap)[rows], _INT64_MAX, priority)
    ordered_priority, candidate = torch.sort(priority, dim=1, stable=True)
    eligible = (ordered_priority != _INT64_MAX).sum(dim=1)
    placed = rank < eligible[row_of_key]
    position = candidate[row_of_key, rank.clamp(max=cap - 1)]
    return torch.where(placed, buckets * cap + position, -1), placed


def find_or_claim(
    index: SlotArrays, keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, access: Access | None,
    claim: bool, rows: RowParts | None, columns: int, behind: SlotArrays | None,
) -> Found:
    """``find`` of a TBE batch (``table`` None) or of keys of given tables (-1: no key), with each index's table;
    with ``claim`` (``index.pending`` allocated), the found slots marked in ``index.protected`` (``write_new``
    clears them), each absent key's pending entry (``entry``; entry ``bucket * capacity + j`` holds the bucket's
    ``j``-th new key by id, -1 for keys past the ``bucket_capacity``-th), filling the pending ``keys`` and
    ``uses``, and the new ids (the first index of each, and how many: a one-entry tensor); with ``rows``, each
    index's first ``columns`` (the spare row where absent); with ``behind`` (the tier behind a cache), each
    absent index's slot there (``outer``), protected there too with ``claim``."""
    if table is None:
        table = _batch_tables(offsets, batch_size, keys.numel())
    slots, buckets = find(index, keys, table, None, 0, access)
    out = None if rows is None else gather_rows(rows, slots, columns)
    outer = None
    if behind is not None:
        outer, _ = find(behind, keys, torch.where(slots < 0, table, -1), None, 0, None)
        if claim:
            behind.protected[outer[outer >= 0]] = True
    if not claim:
        return Found(slots, buckets, table, out, None, None, None, outer)
    index.protected[slots[slots >= 0]] = True
    entry = torch.full_like(slots, -1)
    absent = torch.nonzero((slots < 0) & (table >= 0)).squeeze(1)
    if absent.numel():
        _claim(keys[absent], buckets[absent], absent, entry, index.pending, index.bucket_capacity)
    return Found(slots, buckets, table, out, entry, *_first_of_each(entry), outer)


def _claim(keys: torch.Tensor, buckets: torch.Tensor, positions: torch.Tensor, entry: torch.Tensor, pending: PendingArrays, cap: int) -> None:
    """Pending entries of the absent keys at ``positions`` (ascending), as ``find_or_claim`` describes."""
    by_key = torch.sort(keys, stable=True).indices
    order = by_key[torch.sort(buckets[by_key], stable=True).indices]  # (bucket, key); positions ascending within
    sorted_keys, sorted_buckets = keys[order], buckets[order]
    starts = torch.ones_like(sorted_keys, dtype=torch.bool)
    starts[1:] = (sorted_keys[1:] != sorted_keys[:-1]) | (sorted_buckets[1:] != sorted_buckets[:-1])
    group = torch.cumsum(starts, 0) - 1
    first, bucket = positions[order][starts], sorted_buckets[starts]
    j = torch.arange(first.numel(), device=first.device) - torch.searchsorted(bucket, bucket)
    claimed = torch.where(j < cap, bucket * cap + j, -1)
    entry[positions[order]] = claimed[group]
    kept = claimed >= 0
    pending.keys[claimed[kept]] = sorted_keys[starts][kept]
    pending.uses[claimed[kept]] = torch.bincount(group, minlength=first.numel())[kept]


def _first_of_each(entry: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, count): the first index of each new id (entry), and how many (a one-entry tensor)."""
    claiming = torch.nonzero(entry >= 0).squeeze(1)
    by_entry = torch.sort(entry[claiming], stable=True)
    starts = torch.ones_like(by_entry.values, dtype=torch.bool)
    starts[1:] = by_entry.values[1:] != by_entry.values[:-1]
    reps = claiming[by_entry.indices[starts]]
    return reps, torch.tensor([reps.numel()], dtype=torch.int64, device=entry.device)


def place_new(index: SlotArrays, found: Found, evictions: torch.Tensor) -> None:
    """Plan the slot of each of the first ``count`` new ids at ``reps`` of a claiming ``find_or_claim`` into the
    pending ``target``: the ``r``-th new id of a bucket by id (its entry's place in the pending row) takes the
    ``r``-th slot as ``place_keys`` picks it, ``insert``'s order. Writes nothing else to the table; adds each
    table's evictions to ``evictions``."""
    reps = found.reps[: int(found.count[0])]
    cap = index.bucket_capacity
    bucket = found.buckets[reps]
    entry = found.entry[reps]
    rank = entry - bucket * cap
    order = torch.sort(bucket, stable=True).indices  # the planner reads a bucket's row once where many keys share it
    slots, placed = _plan_slots(bucket[order], rank[order], index)
    target = torch.empty_like(slots)
    target[order] = slots
    index.pending.target[entry] = target
    evicts = torch.zeros_like(placed)
    evicts[order] = placed & index.occupied[torch.where(placed, slots, 0)]
    evictions.index_add_(0, found.table[reps], evicts.to(evictions.dtype))


def outgoing(index: SlotArrays, found: Found, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a cache's insert (``place_new`` done, ``write_new`` not yet) sends to the tier behind it, one entry per
    index of the batch: (key, table, slot here). An index the cache could not place (absent, and no entry or no
    slot planned for its id) sends its own key (slot -1: an access there); the index that carries a new id whose
    planned slot holds an id sends that id, its evictee (slot: the slot it leaves); any other index sends
    nothing (table -1)."""
    slots, entry, table = found.slots, found.entry, found.table
    target = torch.where(entry >= 0, index.pending.target[entry.clamp(min=0)], -1)
    spilled = (slots < 0) & (table >= 0) & (target < 0)
    out_keys, out_table = keys.clone(), torch.where(spilled, table, -1)
    source = torch.full_like(slots, -1)
    reps = found.reps[: int(found.count[0])]
    planned = index.pending.target[entry[reps]]
    carriers = torch.nonzero((planned >= 0) & index.occupied[planned.clamp(min=0)]).squeeze(1)
    at, leaving = reps[carriers], planned[carriers]
    out_keys[at], out_table[at], source[at] = index.keys[leaving], table[at], leaving
    return out_keys, out_table, source


def write_new(
    index: SlotArrays, found: Found, keys: torch.Tensor, access: Access, parts: RowParts, draws: DrawTables, state_fill: float,
    source: Source | None,
) -> None:
    """Store the new ids of ``keys`` that ``place_new`` planned (key; score: their uses with ``add_counts``, else
    ``clock``; row in ``parts``: drawn, its first ``dim`` columns by ``draws`` and every other column
    ``state_fill``), reset their pending entries, release the batch's slots in ``protected``, and give each
    index with slot -1 the slot its new id got in ``found.slots`` (-1 where none). With ``source`` a new id
    whose index has a slot there takes that row (and score, as ``Source`` says); ``Source.spill`` gives the
    indices left without a slot here theirs there. An index's values are ``fresh_rows``' job: where it runs
    (before the write, or after it from the rows the ids landed in) is the tier's choice."""
    pending, slots, entry, table = index.pending, found.slots, found.entry, found.table
    dim = draws.dim
    index.protected[slots[slots >= 0]] = False
    reps = found.reps[: int(found.count[0])]
    at = entry[reps]
    target = pending.target[at]
    placed = torch.nonzero(target >= 0).squeeze(1)
    new_slots, new_keys, tables = target[placed], keys[reps[placed]], table[reps[placed]]
    scores = pending.uses[at[placed]] if access.add_counts else access.clock.expand_as(new_keys).clone()
    rows = torch.full((placed.numel(), parts.width), state_fill, dtype=torch.float32, device=keys.device)
    rows[:, :dim] = uniform_rows(new_keys, dim, draws.seed_words[tables], draws.lower[tables], draws.span[tables])
    if source is not None:
        origin = source.slots[reps[placed]]
        known = origin >= 0
        rows = torch.where(known.unsqueeze(1), gather_rows(source.rows, origin, parts.width), rows)
        earlier = torch.where(known, source.index.scores[origin.clamp(min=0)], 0)
        if source.carry:
            scores = torch.where(known, earlier, scores)
        elif access.add_counts:
            scores = scores + earlier
        if source.carry:  # ids found here are overwritten from there
            both = torch.nonzero((slots >= 0) & (source.slots >= 0)).squeeze(1)
            scatter_rows(parts, slots[both], gather_rows(source.rows, source.slots[both], parts.width))
            index.scores[slots[both]] = source.index.scores[source.slots[both]]
        source.index.protected[source.slots[source.slots >= 0]] = False
    index.keys[new_slots] = new_keys
    index.scores[new_slots] = scores
    index.occupied[new_slots] = True
    scatter_rows(parts, new_slots, rows)
    pending.keys[at] = _INT64_MAX
    pending.owner[at] = 0
    pending.uses[at] = 0
    absent = torch.nonzero(slots < 0).squeeze(1)
    claimed = entry[absent]
    given = torch.where(claimed >= 0, pending.target[claimed.clamp(min=0)], -1)
    if source is not None and source.spill is not None:
        behind = source.spill[absent]
        given = torch.where(given >= 0, given, torch.where(behind >= 0, source.base + behind, -1))
    slots[absent] = given


def fresh_rows(keys: torch.Tensor, slots: torch.Tensor, table: torch.Tensor, draws: DrawTables, dst: torch.Tensor, source: Source | None) -> None:
    """For each index with slot -1: its initial values into its row of ``dst``: with ``source``, its row there
    where it has a slot there, else its key's draw."""
    positions = torch.nonzero(slots < 0).squeeze(1)
    tables = table[positions]
    values = uniform_rows(keys[positions], dst.shape[1], draws.seed_words[tables], draws.lower[tables], draws.span[tables])
    if source is not None:
        origin = source.slots[positions]
        values = torch.where((origin >= 0).unsqueeze(1), gather_rows(source.rows, origin, dst.shape[1]), values)
    dst[positions] = values


def check_offsets(offsets: torch.Tensor, num_indices: int, record: torch.Tensor, seq: torch.Tensor, safe: bool) -> torch.Tensor:
    """Fold the checks of batch ``seq`` (a one-entry tensor: offsets non-decreasing, from 0 to ``num_indices``)
    into ``record`` (``operands.RECORD_*``; a failure becomes the record's unless an earlier batch's is pending)
    without a host read, and return the offsets: with ``safe``, the batch's where it passed, else an even split
    of its indices into its bags, in bounds for every kernel (pooling, unpooling, the table search) either way;
    without (a lookup whose kernels read the offsets only where any values are in bounds), the batch's own."""
    seq = seq.reshape(())
    low, high = offsets[0], offsets[-1]
    wrong = (low != 0) | (high != num_indices)
    check = torch.where((offsets[1:] < offsets[:-1]).any(), CHECK_DECREASING, torch.where(wrong, CHECK_WRONG_ENDS, CHECK_PASSED))
    failed = check != CHECK_PASSED
    ends = torch.where(wrong, torch.stack([low, high, torch.full_like(low, num_indices)]), 0)  # kept for wrong ends only
    first = torch.cat([torch.stack([seq, check]), ends])
    record[RECORD_LAST] = torch.where(failed, seq, record[RECORD_LAST])
    record[:RECORD_LAST] = torch.where(failed & (record[RECORD_FIRST] >= seq), first, record[:RECORD_LAST])
    if not safe:
        return offsets
    even = torch.arange(offsets.numel(), dtype=torch.int64, device=offsets.device) * num_indices // (offsets.numel() - 1)
    return torch.where(failed, even, offsets)


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


__all__ = [
    "check_offsets", "find", "find_or_claim", "fresh_rows", "gather_rows", "gather_unique", "outgoing", "place_keys", "place_new",
    "pool_rows", "reduce_and_update", "scatter_rows", "table_buckets", "uniform_rows", "write_new",
]
