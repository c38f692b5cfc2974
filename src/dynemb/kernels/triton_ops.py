"""Fused Triton kernels for the hot steps of a training iteration.

- ``find_slots``: one probe kernel per table; each key scans its bucket in chunks
  until it matches an occupied slot or reaches the first empty one (buckets fill as
  a prefix). No host sync, no ``[keys, bucket_capacity]`` compare matrix in memory.
  ``find_and_touch`` (training lookups) also refreshes the found ids' scores and
  counts hits and misses in the same kernel.
- ``reduce_and_update``: the gradient rows of each unique id (ids sorted, so its
  rows are one segment of ``order``) are summed and the optimizer is applied in
  place to the stored row and its state, in one kernel, without atomics. Hot ids
  (long segments) are cut into pieces of ``_PIECE`` rows so one program never walks
  thousands of rows alone; only ids with more than one piece write a partial sum,
  which a second kernel adds up before their update.
- ``bucket_of`` and ``uniform_rows``: the SplitMix64 bucket hash and the uniform
  initializer in one kernel each instead of a dozen elementwise torch ops (the
  same integer bits, so the same buckets and, up to float rounding, the same values).
- ``place_keys``: an insert's slot choice (empty slots first, then lowest score,
  protected slots never) planned per key from its bucket's row by pairwise compares,
  then written by a second kernel: no per-bucket sort, no host sync.
- ``pool_rows``: pooled SUM/MEAN straight from the unique rows through ``inverse``
  into the module's output columns, without the ``[indices, dim]`` intermediate.

Each launcher takes the same arguments as its torch fallback (``dynemb.kernels``
picks one); all tensors must be on one device and contiguous in their last dim.
With ``TRITON_INTERPRET=1`` set before Triton is first imported, the kernels run
on CPU tensors through Triton's interpreter (how the tests check them without a GPU).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dynemb.optimizers import OptimizerParams
from dynemb.options import EmbOptimType, PoolingMode

# Gradient rows per piece of a segment: one program sums at most this many.
_PIECE = 128
# Rows loaded per loop step in the reductions.
_BLOCK_N = 8
# Warps per program of the per-segment and per-bag kernels: most segments are a row or
# two, so small programs (32 resident per SM) keep more rows in flight than wide ones.
_SEGMENT_WARPS = 2
# Rows per program in the row gather.
_GATHER_ROWS = 8
# Keys per program and bucket positions per step in the probe.
_FIND_BLOCK = 32
_FIND_CHUNK = 32
# Elements per program in elementwise kernels.
_ELEMENT_BLOCK = 1024


class PartialUpdateError(RuntimeError):
    """A step failed after it wrote to the rows: rerunning it another way would apply it twice."""


# Priorities of empty and of protected slots in an insert (int64 extremes).
_LOWEST = tl.constexpr(-(2**63))
_HIGHEST = tl.constexpr(2**63 - 1)

_OPTIMIZER_CODE = {
    EmbOptimType.EXACT_SGD: 0,
    EmbOptimType.ADAM: 1,
    EmbOptimType.EXACT_ADAGRAD: 2,
    EmbOptimType.EXACT_ROWWISE_ADAGRAD: 3,
}


@triton.jit
def _probe(query, base, active, keys_ptr, occupied_ptr, CAP: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    """Slot of each ``query`` in the bucket starting at slot ``base``, -1 where absent."""
    result = tl.full([BLOCK], -1, tl.int64)
    for start in range(0, CAP, CHUNK):
        pos = start + tl.arange(0, CHUNK)
        live = active[:, None] & (pos[None, :] < CAP)
        slot = base[:, None] + pos[None, :]
        stored = tl.load(keys_ptr + slot, mask=live, other=0)
        occupied = tl.load(occupied_ptr + slot, mask=live, other=0) != 0
        hit = live & occupied & (stored == query[:, None])
        first = tl.min(tl.where(hit, pos[None, :], CAP), axis=1)
        found = first < CAP
        result = tl.where(found, base + first, result)
        # An empty slot ends the occupied prefix: the key is absent.
        ended = tl.max((live & (occupied == 0)).to(tl.int32), axis=1) > 0
        active = active & (found == 0) & (ended == 0)
    return result


@triton.jit
def _find_kernel(
    query_ptr, bucket_ptr, keys_ptr, occupied_ptr, out_ptr, n, scores_ptr, counts_ptr, clock, hits_ptr, misses_ptr,
    CAP: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr, TOUCH: tl.constexpr, ADD_COUNTS: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    query = tl.load(query_ptr + offs, mask=valid, other=0)
    base = tl.load(bucket_ptr + offs, mask=valid, other=0) * CAP
    result = _probe(query, base, valid, keys_ptr, occupied_ptr, CAP, BLOCK, CHUNK)
    tl.store(out_ptr + offs, result, mask=valid)
    if TOUCH:
        hit = valid & (result >= 0)
        if ADD_COUNTS:  # atomic: a key given twice must count twice
            tl.atomic_add(scores_ptr + result, tl.load(counts_ptr + offs, mask=hit, other=0), mask=hit)
        else:
            tl.store(scores_ptr + result, tl.full([BLOCK], 0, tl.int64) + clock, mask=hit)
        found_here = tl.sum(hit.to(tl.int64), axis=0)
        tl.atomic_add(hits_ptr, found_here)
        tl.atomic_add(misses_ptr, tl.sum(valid.to(tl.int64), axis=0) - found_here)


@triton.jit
def _group_find_kernel(
    query_ptr, n, offsets_ptr, batch_size, num_tables, table_buckets_ptr, table_base_ptr,
    keys_ptr, occupied_ptr, scores_ptr, slot_ptr, bucket_ptr, clock, hits_ptr, misses_ptr,
    CAP: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr, SEARCH_STEPS: tl.constexpr, TOUCH: tl.constexpr, ADD_COUNTS: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    query = tl.load(query_ptr + offs, mask=valid, other=0)
    # Table of each index: the last t with offsets[t * batch_size] <= index (empty tables skipped).
    lo = tl.zeros([BLOCK], dtype=tl.int64)
    hi = lo + num_tables
    for _ in range(SEARCH_STEPS):
        mid = (lo + hi) // 2
        open_ = hi - lo > 1
        below = tl.load(offsets_ptr + mid * batch_size, mask=valid & open_, other=0) <= offs
        lo = tl.where(open_ & below, mid, lo)
        hi = tl.where(open_ & (below == 0), mid, hi)
    table = lo
    table_buckets = tl.load(table_buckets_ptr + table, mask=valid, other=1)
    local = _mix64(query.to(tl.uint64, bitcast=True)).to(tl.int64, bitcast=True) % table_buckets
    local = tl.where(local < 0, local + table_buckets, local)  # torch.remainder's sign
    bucket = tl.load(table_base_ptr + table, mask=valid, other=0) + local
    tl.store(bucket_ptr + offs, bucket, mask=valid)
    result = _probe(query, bucket * CAP, valid, keys_ptr, occupied_ptr, CAP, BLOCK, CHUNK)
    tl.store(slot_ptr + offs, result, mask=valid)
    if TOUCH:
        hit = valid & (result >= 0)
        # Indices repeat: a hot id is touched by many lanes at once.
        if ADD_COUNTS:
            tl.atomic_add(scores_ptr + result, tl.full([BLOCK], 1, tl.int64), mask=hit)
        else:
            tl.store(scores_ptr + result, tl.full([BLOCK], 0, tl.int64) + clock, mask=hit)
        first = tl.min(tl.where(valid, table, num_tables), axis=0)
        last = tl.max(tl.where(valid, table, -1), axis=0)
        if first == last:  # the usual block: one table, one atomic per counter
            found_here = tl.sum(hit.to(tl.int64), axis=0)
            tl.atomic_add(hits_ptr + first, found_here)
            tl.atomic_add(misses_ptr + first, tl.sum(valid.to(tl.int64), axis=0) - found_here)
        else:
            tl.atomic_add(hits_ptr + table, hit.to(tl.int64), mask=valid)
            tl.atomic_add(misses_ptr + table, (hit == 0).to(tl.int64), mask=valid)


def group_find(
    indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, table_buckets: torch.Tensor, table_base: torch.Tensor,
    table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor, bucket_capacity: int,
    clock: int, add_counts: bool, touch: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One kernel for a whole TBE batch over tables sharing slot arrays: (slot, bucket) per index (see ``torch_ops.group_find``)."""
    n = indices.numel()
    slots = torch.empty(n, dtype=torch.int64, device=indices.device)
    buckets = torch.empty(n, dtype=torch.int64, device=indices.device)
    if n == 0:
        return slots, buckets
    tables = table_buckets.numel()
    _group_find_kernel[(triton.cdiv(n, _FIND_BLOCK),)](
        indices, n, offsets, batch_size, tables, table_buckets, table_base,
        table_keys, occupied.view(torch.uint8), table_scores, slots, buckets, clock, hits, misses,
        CAP=bucket_capacity, BLOCK=_FIND_BLOCK, CHUNK=min(_FIND_CHUNK, triton.next_power_of_2(bucket_capacity)),
        SEARCH_STEPS=max(1, (tables - 1).bit_length()), TOUCH=touch, ADD_COUNTS=add_counts,
    )
    return slots, buckets


def find_slots(keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, bucket_capacity: int) -> torch.Tensor:
    """Slot of each key in its bucket (``buckets``), -1 where absent; ``table_keys``/``occupied`` are flat per slot."""
    n = keys.numel()
    out = torch.empty(n, dtype=torch.int64, device=keys.device)
    if n == 0:
        return out
    chunk = min(_FIND_CHUNK, triton.next_power_of_2(bucket_capacity))
    grid = (triton.cdiv(n, _FIND_BLOCK),)
    _find_kernel[grid](
        keys, buckets, table_keys, occupied.view(torch.uint8), out, n, out, out, 0, out, out,
        CAP=bucket_capacity, BLOCK=_FIND_BLOCK, CHUNK=chunk, TOUCH=False, ADD_COUNTS=False,
    )
    return out


def find_and_touch(
    keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor,
    bucket_capacity: int, counts: torch.Tensor, clock: int, add_counts: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> torch.Tensor:
    """``find_slots`` that also refreshes found slots' scores and counts hits and misses, in the same kernel."""
    n = keys.numel()
    out = torch.empty(n, dtype=torch.int64, device=keys.device)
    if n == 0:
        return out
    chunk = min(_FIND_CHUNK, triton.next_power_of_2(bucket_capacity))
    _find_kernel[(triton.cdiv(n, _FIND_BLOCK),)](
        keys, buckets, table_keys, occupied.view(torch.uint8), out, n, table_scores, counts, clock, hits, misses,
        CAP=bucket_capacity, BLOCK=_FIND_BLOCK, CHUNK=chunk, TOUCH=True, ADD_COUNTS=add_counts,
    )
    return out


@triton.jit
def _apply_optimizer(row_ptr, g, cols, cmask, lr, eps, beta1, beta2, weight_decay, bias1, bias2, DIM: tl.constexpr, OPT: tl.constexpr):
    """One optimizer step on the row at ``row_ptr`` (embedding, then state) given the summed gradient ``g``."""
    w = tl.load(row_ptr + cols, mask=cmask, other=0.0)
    if OPT == 0:
        w = w - lr * g
    elif OPT == 1:
        m = tl.load(row_ptr + DIM + cols, mask=cmask, other=0.0)
        v = tl.load(row_ptr + 2 * DIM + cols, mask=cmask, other=0.0)
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        step = (m / bias1) / (tl.sqrt_rn(v / bias2) + eps) + weight_decay * w
        w = w - lr * step
        tl.store(row_ptr + DIM + cols, m, mask=cmask)
        tl.store(row_ptr + 2 * DIM + cols, v, mask=cmask)
    elif OPT == 2:
        acc = tl.load(row_ptr + DIM + cols, mask=cmask, other=0.0) + g * g
        w = w - lr * g / (tl.sqrt_rn(acc) + eps)
        tl.store(row_ptr + DIM + cols, acc, mask=cmask)
    else:
        acc = tl.load(row_ptr + DIM) + tl.sum(g * g, axis=0) / DIM
        w = w - g * (lr / (tl.sqrt_rn(acc) + eps))
        tl.store(row_ptr + DIM, acc)
    tl.store(row_ptr + cols, w, mask=cmask)


@triton.jit
def _reduce_update_kernel(
    grad_ptr, grad_stride, order_ptr, seg_ptr, owner_ptr, first_piece_ptr, slot_ptr, rows_ptr, row_stride, spare, partial_ptr, n_unique,
    lr, eps, beta1, beta2, weight_decay, bias1, bias2,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PIECE: tl.constexpr, OPT: tl.constexpr,
):
    p = tl.program_id(0).to(tl.int64)
    u = tl.load(owner_ptr + p)  # the id whose segment piece p belongs to; n_unique past the last piece
    if u < n_unique:
        seg_start = tl.load(seg_ptr + u)
        seg_stop = tl.load(seg_ptr + u + 1)
        start = seg_start + (p - tl.load(first_piece_ptr + u)) * PIECE
        stop = tl.minimum(start + PIECE, seg_stop)
        cols = tl.arange(0, BLOCK_D)
        cmask = cols < DIM
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for base in range(start, stop, BLOCK_N):
            pos = base + tl.arange(0, BLOCK_N)
            pmask = pos < stop
            index = tl.load(order_ptr + pos, mask=pmask, other=0)
            g = tl.load(grad_ptr + index[:, None] * grad_stride + cols[None, :], mask=pmask[:, None] & cmask[None, :], other=0.0)
            acc += tl.sum(g, axis=0)
        if seg_stop - seg_start <= PIECE:
            slot = tl.load(slot_ptr + u)
            slot = tl.where(slot >= 0, slot, spare)
            _apply_optimizer(rows_ptr + slot * row_stride, acc, cols, cmask, lr, eps, beta1, beta2, weight_decay, bias1, bias2, DIM, OPT)
        else:
            tl.store(partial_ptr + p * DIM + cols, acc, mask=cmask)


@triton.jit
def _combine_update_kernel(
    seg_ptr, first_piece_ptr, slot_ptr, rows_ptr, row_stride, spare, partial_ptr,
    lr, eps, beta1, beta2, weight_decay, bias1, bias2,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PIECE: tl.constexpr, OPT: tl.constexpr,
):
    u = tl.program_id(0)
    count = tl.load(seg_ptr + u + 1) - tl.load(seg_ptr + u)
    if count > PIECE:
        first = tl.load(first_piece_ptr + u)
        last = first + (count + PIECE - 1) // PIECE
        cols = tl.arange(0, BLOCK_D)
        cmask = cols < DIM
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for base in range(first, last, BLOCK_N):
            piece = base + tl.arange(0, BLOCK_N)
            pmask = piece < last
            g = tl.load(partial_ptr + piece[:, None] * DIM + cols[None, :], mask=pmask[:, None] & cmask[None, :], other=0.0)
            acc += tl.sum(g, axis=0)
        slot = tl.load(slot_ptr + u)
        slot = tl.where(slot >= 0, slot, spare)
        _apply_optimizer(rows_ptr + slot * row_stride, acc, cols, cmask, lr, eps, beta1, beta2, weight_decay, bias1, bias2, DIM, OPT)


def reduce_and_update(
    optimizer: EmbOptimType, rows: torch.Tensor, slots: torch.Tensor, index_grads: torch.Tensor,
    order: torch.Tensor, counts: torch.Tensor, params: OptimizerParams, step: int,
) -> None:
    """In place on ``rows`` ``[capacity + 1, dim + state]``: for unique id ``u`` at ``slots[u]`` (-1: the spare
    last row), sum ``index_grads[order[j]]`` over its segment ``j`` (``counts[u]`` long) and apply one step."""
    n_unique = counts.numel()
    if n_unique == 0:
        return
    dim = index_grads.shape[1]
    device = rows.device
    total = order.numel()
    seg = torch.zeros(n_unique + 1, dtype=torch.int64, device=device)
    torch.cumsum(counts, 0, out=seg[1:])
    pieces = (counts + (_PIECE - 1)) // _PIECE
    piece_end = torch.cumsum(pieces, 0)
    first_piece = piece_end - pieces
    # Pieces number at most n_unique + total // PIECE: a grid known without a host sync.
    grid = n_unique + total // _PIECE
    # Owner of each piece (first u with piece_end[u] > p), searched here in bulk rather than per program.
    owner = torch.searchsorted(piece_end, torch.arange(grid, device=device), right=True)
    partial = torch.empty(grid, dim, dtype=torch.float32, device=device)
    block_d = triton.next_power_of_2(dim)
    spare = rows.shape[0] - 1
    hyper = _hyper_parameters(params, step)
    meta = dict(DIM=dim, BLOCK_D=block_d, BLOCK_N=_BLOCK_N, PIECE=_PIECE, OPT=_OPTIMIZER_CODE[optimizer], num_warps=_SEGMENT_WARPS)
    _reduce_update_kernel[(grid,)](
        index_grads, index_grads.stride(0), order, seg, owner, first_piece, slots, rows, rows.stride(0), spare, partial, n_unique,
        *hyper, **meta,
    )
    try:
        _combine_update_kernel[(n_unique,)](seg, first_piece, slots, rows, rows.stride(0), spare, partial, *hyper, **meta)
    except Exception as error:
        raise PartialUpdateError(f"the first kernel already updated the rows of short segments: {error}") from error


def _hyper_parameters(params: OptimizerParams, step: int) -> tuple[float, ...]:
    return (
        params.learning_rate, params.eps, params.beta1, params.beta2, params.weight_decay,
        1.0 - params.beta1**step, 1.0 - params.beta2**step,
    )


@triton.jit
def _gather_kernel(source_ptr, source_stride, index_ptr, out_ptr, n, DIM: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    valid = rows < n
    index = tl.load(index_ptr + rows, mask=valid, other=0)
    cols = tl.arange(0, BLOCK_D)
    mask = valid[:, None] & (cols[None, :] < DIM)
    values = tl.load(source_ptr + index[:, None] * source_stride + cols[None, :], mask=mask)
    tl.store(out_ptr + rows[:, None] * DIM + cols[None, :], values, mask=mask)


def gather_rows(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``source[index]`` for a ``[rows, dim]`` source whose rows may be strided (the embedding columns of wider rows)."""
    n, dim = index.numel(), source.shape[1]
    out = torch.empty(n, dim, dtype=source.dtype, device=source.device)
    if n:
        _gather_kernel[(triton.cdiv(n, _GATHER_ROWS),)](
            source, source.stride(0), index, out, n, DIM=dim, BLOCK_D=triton.next_power_of_2(dim), ROWS=_GATHER_ROWS,
        )
    return out


@triton.jit
def _pool_kernel(emb_ptr, emb_stride, inverse_ptr, offsets_ptr, out_ptr, out_stride, DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, MEAN: tl.constexpr):
    bag = tl.program_id(0)
    first = tl.load(offsets_ptr)
    start = tl.load(offsets_ptr + bag) - first
    stop = tl.load(offsets_ptr + bag + 1) - first
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < DIM
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for base in range(start, stop, BLOCK_N):
        pos = base + tl.arange(0, BLOCK_N)
        pmask = pos < stop
        row = tl.load(inverse_ptr + pos, mask=pmask, other=0)
        values = tl.load(emb_ptr + row[:, None] * emb_stride + cols[None, :], mask=pmask[:, None] & cmask[None, :], other=0.0)
        acc += tl.sum(values, axis=0)
    if MEAN:
        acc = acc / tl.maximum(stop - start, 1).to(tl.float32)
    tl.store(out_ptr + bag.to(tl.int64) * out_stride + cols, acc, mask=cmask)


def pool_rows(emb: torch.Tensor, inverse: torch.Tensor, offsets: torch.Tensor, mode: PoolingMode, out: torch.Tensor) -> None:
    """``out[b] = sum (MEAN: mean) of emb[inverse[j]]`` for ``j`` in bag ``b`` (``offsets`` ``[bags + 1]``, from any start)."""
    bags = offsets.numel() - 1
    if bags == 0:
        return
    dim = emb.shape[1]
    _pool_kernel[(bags,)](
        emb, emb.stride(0), inverse, offsets, out, out.stride(0),
        DIM=dim, BLOCK_D=triton.next_power_of_2(dim), BLOCK_N=_BLOCK_N, MEAN=mode is PoolingMode.MEAN, num_warps=_SEGMENT_WARPS,
    )


@triton.jit
def _mix64(x):
    """SplitMix64's finalizer on uint64 (wrapping multiply, logical shifts): ``dynemb.hashing.mix64``."""
    x = x ^ (x >> 30)
    x = x * 0xBF58476D1CE4E5B9
    x = x ^ (x >> 27)
    x = x * 0x94D049BB133111EB
    return x ^ (x >> 31)


@triton.jit
def _bucket_kernel(keys_ptr, out_ptr, n, num_buckets, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    keys = tl.load(keys_ptr + offs, mask=valid, other=0).to(tl.uint64, bitcast=True)
    mixed = _mix64(keys).to(tl.int64, bitcast=True)
    bucket = mixed % num_buckets
    bucket = tl.where(bucket < 0, bucket + num_buckets, bucket)  # torch.remainder's sign
    tl.store(out_ptr + offs, bucket, mask=valid)


def bucket_of(keys: torch.Tensor, num_buckets: int) -> torch.Tensor:
    """Bucket in ``[0, num_buckets)`` of each key, bit for bit ``dynemb.hashing.bucket_of``."""
    n = keys.numel()
    out = torch.empty(n, dtype=torch.int64, device=keys.device)
    if n:
        _bucket_kernel[(triton.cdiv(n, _ELEMENT_BLOCK),)](keys, out, n, num_buckets, BLOCK=_ELEMENT_BLOCK)
    return out


@triton.jit
def _uniform_kernel(
    keys_ptr, out_ptr, n, seed_word, seed_ptr, lower, scale, DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr, SEED_PER_KEY: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = tl.arange(0, BLOCK_D)
    valid = rows < n
    keys = tl.load(keys_ptr + rows, mask=valid, other=0).to(tl.uint64, bitcast=True)
    if SEED_PER_KEY:
        seeds = tl.load(seed_ptr + rows, mask=valid, other=0).to(tl.uint64, bitcast=True)
    else:
        seeds = tl.zeros([BLOCK_K], dtype=tl.uint64) + seed_word.to(tl.int64).to(tl.uint64, bitcast=True)
    columns = cols.to(tl.uint64) * 0x9E3779B97F4A7C15
    bits = _mix64(_mix64(keys)[:, None] ^ (columns[None, :] + seeds[:, None]))
    word = (bits >> 40) & 0xFFFFFF
    uniform = (word.to(tl.float32) + 0.5) * (1.0 / 16777216.0)
    mask = valid[:, None] & (cols[None, :] < DIM)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * DIM + cols[None, :], lower + scale * uniform, mask=mask)


def uniform_rows(keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """``[len(keys), dim]`` float32 uniform in (lower, upper), the values of ``torch_ops.uniform_rows``."""
    n = keys.numel()
    out = torch.empty(n, dim, dtype=torch.float32, device=keys.device)
    if n:
        per_key = isinstance(seed_words, torch.Tensor)
        word, seeds = (0, seed_words) if per_key else (seed_words, keys)
        block_d = triton.next_power_of_2(dim)
        block_k = max(1, min(64, 4096 // block_d))
        _uniform_kernel[(triton.cdiv(n, block_k),)](
            keys, out, n, word, seeds, lower, upper - lower, DIM=dim, BLOCK_D=block_d, BLOCK_K=block_k, SEED_PER_KEY=per_key,
        )
    return out


@triton.jit
def _place_kernel(
    sorted_bucket_ptr, rank_ptr, occupied_ptr, scores_ptr, protected_ptr, keys_ptr,
    target_ptr, evicted_mask_ptr, evicted_key_ptr, evicted_score_ptr,
    CAP: tl.constexpr, BLOCK_C: tl.constexpr, CHUNK: tl.constexpr,
):
    """Plan one new key: its slot and what it evicts. Reads the table only, so keys of one bucket may run at once."""
    i = tl.program_id(0)
    base = tl.load(sorted_bucket_ptr + i) * CAP
    rank = tl.load(rank_ptr + i)
    s = tl.arange(0, BLOCK_C)
    real = s < CAP
    occupied = tl.load(occupied_ptr + base + s, mask=real, other=0) != 0
    fill = tl.sum(occupied.to(tl.int32), axis=0)
    if rank < CAP - fill:
        # Empty slots come first and form the bucket's tail (occupied slots are a prefix).
        position = (fill + rank).to(tl.int64)
        placed = rank >= 0
    else:
        priority = tl.where(occupied, tl.load(scores_ptr + base + s, mask=real, other=0), _LOWEST)
        blocked = (tl.load(protected_ptr + base + s, mask=real, other=1) != 0) | (real == 0)
        priority = tl.where(blocked, _HIGHEST, priority)
        # Position of each slot in the stable ascending order of priority (ties: lower position first).
        order_of_slot = tl.zeros([BLOCK_C], dtype=tl.int32)
        for c in range(0, BLOCK_C, CHUNK):
            t = c + tl.arange(0, CHUNK)
            t_real = t < CAP
            t_occupied = tl.load(occupied_ptr + base + t, mask=t_real, other=0) != 0
            t_priority = tl.where(t_occupied, tl.load(scores_ptr + base + t, mask=t_real, other=0), _LOWEST)
            t_blocked = (tl.load(protected_ptr + base + t, mask=t_real, other=1) != 0) | (t_real == 0)
            t_priority = tl.where(t_blocked, _HIGHEST, t_priority)
            ahead = (t_priority[None, :] < priority[:, None]) | ((t_priority[None, :] == priority[:, None]) & (t[None, :] < s[:, None]))
            order_of_slot += tl.sum(ahead.to(tl.int32), axis=1)
        eligible = tl.sum((blocked == 0).to(tl.int32), axis=0)
        placed = rank < eligible
        position = tl.sum(tl.where(order_of_slot == rank, s, 0), axis=0).to(tl.int64)
    target = tl.where(placed, base + position, -1)
    tl.store(target_ptr + i, target)
    safe = tl.where(placed, target, 0)
    tl.store(evicted_mask_ptr + i, (tl.load(occupied_ptr + safe) != 0) & placed)
    tl.store(evicted_key_ptr + i, tl.where(placed, tl.load(keys_ptr + safe), 0))
    tl.store(evicted_score_ptr + i, tl.where(placed, tl.load(scores_ptr + safe), 0))


@triton.jit
def _write_kernel(target_ptr, order_ptr, new_keys_ptr, new_scores_ptr, keys_ptr, scores_ptr, occupied_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    target = tl.load(target_ptr + offs, mask=valid, other=-1)
    write = valid & (target >= 0)
    source = tl.load(order_ptr + offs, mask=write, other=0)
    tl.store(keys_ptr + target, tl.load(new_keys_ptr + source, mask=write, other=0), mask=write)
    tl.store(scores_ptr + target, tl.load(new_scores_ptr + source, mask=write, other=0), mask=write)
    tl.store(occupied_ptr + target, tl.full([BLOCK], 1, tl.uint8), mask=write)


def place_keys(
    sorted_buckets: torch.Tensor, rank: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor,
    table_keys: torch.Tensor, table_scores: torch.Tensor, occupied: torch.Tensor, protected: torch.Tensor, bucket_capacity: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slot and write new keys exactly as ``torch_ops.place_keys``: a planning kernel that only reads the table
    (one program per key, its bucket's slot order by pairwise compares), then a kernel that writes the keys."""
    n = sorted_buckets.numel()
    device = keys.device
    target = torch.empty(n, dtype=torch.int64, device=device)
    evicted_mask = torch.empty(n, dtype=torch.bool, device=device)
    evicted_keys = torch.empty(n, dtype=torch.int64, device=device)
    evicted_scores = torch.empty(n, dtype=torch.int64, device=device)
    if n == 0:
        return target, evicted_mask, evicted_keys, evicted_scores
    occupied_bytes = occupied.view(torch.uint8)
    block_c = triton.next_power_of_2(bucket_capacity)
    _place_kernel[(n,)](
        sorted_buckets, rank, occupied_bytes, table_scores, protected.view(torch.uint8), table_keys,
        target, evicted_mask.view(torch.uint8), evicted_keys, evicted_scores,
        CAP=bucket_capacity, BLOCK_C=block_c, CHUNK=min(32, block_c),
    )
    _write_kernel[(triton.cdiv(n, _ELEMENT_BLOCK),)](
        target, order, keys, scores, table_keys, table_scores, occupied_bytes, n, BLOCK=_ELEMENT_BLOCK,
    )
    return target, evicted_mask, evicted_keys, evicted_scores
