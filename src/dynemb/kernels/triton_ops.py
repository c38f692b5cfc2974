"""Fused Triton kernels for the hot steps of a training iteration.

- ``find``: one probe kernel for a whole batch over every table of a group: each
  key picks its table (given, or by binary search of the batch's offsets) and bucket,
  then scans the bucket in chunks until it matches an occupied slot or reaches the
  first empty one (buckets fill as a prefix). No host sync, no ``[keys,
  bucket_capacity]`` compare matrix in memory. Training lookups also refresh the
  found ids' scores and count hits and misses in the same kernel.
- ``find_or_claim``: the find of a training lookup that inserts without a host sync:
  it also reads each index's row (pooling NONE from device rows), protects the
  batch's slots, and carries each absent id into its bucket's sorted row of pending
  ids (``atomic_min`` per entry); a second kernel locates each index's entry and
  elects one index per new id. ``place_new`` plans each new id's slot as
  ``place_keys`` does, and ``write_new`` writes the ids with rows drawn in the kernel,
  releases the slots and gives the absent indices theirs; both loop to a count that
  only the device holds. ``fresh_rows`` fills in the absent indices' values.
- ``check_offsets``: a batch's offset checks folded into the module's record by
  batch number (the first failure stays), and offsets safe for every kernel.
- Row kernels (``gather_rows``, ``gather_unique``, ``scatter_rows`` and the update)
  address rows through ``RowParts``: below ``split`` in device memory, from it on in
  host memory that the device reaches in place (page-locked and mapped), as TBE's
  UVM rows are. ``gather_unique`` reads each distinct row of a sorted batch once per
  block, so a batch whose ids repeat moves each host row over the bus about once.
- ``reduce_and_update``: the gradient rows of each id (grouped by slot, as a sort
  of the batch's slots leaves them) are summed and the optimizer is applied in
  place to the stored row and its state, without atomics and without a host sync.
  Each program takes a block of 32 positions (fewer for rows wider than 128), loads
  each gradient row once and sums every id's rows with a segmented scan (runs of
  consecutive positions in registers, then across warps), and steps the ids that lie
  wholly inside, their rows read while the gradients load; slot -1 (the spare row, a
  sink) is not stepped. An id crossing block edges (a hot id spans hundreds) is
  stepped by a second kernel from the blocks' partial sums, which it reads 64 blocks
  at a time in a fixed order: deterministic, no float atomics.
- ``uniform_rows``: the uniform initializer in one kernel instead of a dozen
  elementwise torch ops (the same integer bits, so up to float rounding the same values).
- ``place_keys``: an insert's slot choice (empty slots first, then lowest score,
  protected slots never) planned per key from its bucket's row (its rank's worth of
  minima), then written by a second kernel: no per-bucket sort, no host sync.
- ``pool_rows``: pooled SUM/MEAN straight from the unique rows through ``inverse``
  into the module's output columns, without the ``[indices, dim]`` intermediate.

Each launcher has its torch fallback's signature (``dynemb.kernels`` picks one; the operands are
``dynemb.kernels.operands``' bundles); all tensors must be on one device and contiguous in their last dim.
Kernels launch through ``_launch``, which calls a variant's compiled kernel directly
after its first launch (Triton's generic launch path costs the host more than many of
these kernels run).
With ``TRITON_INTERPRET=1`` set before Triton is first imported, the kernels run
on CPU tensors through Triton's interpreter (how the tests check them without a GPU).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from dynemb.errors import PartialUpdateError
from dynemb.kernels.operands import (
    Access,
    DrawTables,
    Found,
    OptimizerArgs,
    RowParts,
    SlotArrays,
    Source,
)
from dynemb.options import EmbOptimType, PoolingMode

# Kernels run through Triton's interpreter (on CPU tensors): launched the plain way.
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

# Grouped gradient positions per program of the fused reduce + update, and floats per
# [positions, dim] tile at most (wider rows take fewer positions). Swept on an H200 over
# 16-128 positions and 2-16 warps (a seed-size step, dim 128): 32 positions over 8 warps
# (16 floats a tile per thread) ran fastest for SGD and ADAM alike, 0.37 and 0.71 ms
# against 0.59 and 0.87 for 64; larger tiles spill or leave too few blocks resident.
_SEGMENT_BLOCK = 32
_SEGMENT_TILE = 32 * 128
# Rows loaded per loop step in the reductions.
_BLOCK_N = 8
# Warps per program of the per-bag kernel: most bags are a row or two, so small programs
# (32 resident per SM) keep more rows in flight than wide ones.
_BAG_WARPS = 2
# Warps per block of the fused reduce + update (see _SEGMENT_BLOCK).
_SEGMENT_WARPS = 8
# Floats one warp loads of a row at once (32 threads x 16 bytes): rows narrower than this
# share a warp, which sets how the scan splits a block (``_segment_shape``).
_WARP_FLOATS = 128
# Blocks whose partial sums the crossing kernel reads per step of a run: one step covers
# every run but the hottest ids' (a 7,000-position id spans some 220 blocks of 32), and
# a [64, 128] tile over 4 warps stays in registers (wider rows take fewer blocks a step).
_CROSSING_CHUNK = 64
_CROSSING_WARPS = 4
# Rows per program in the row gather and scatter.
_GATHER_ROWS = 8
# Sorted positions per program of the gather that reads each distinct row once.
_UNIQUE_BLOCK = 32
# Keys per program and bucket positions per step in the probe.
_FIND_BLOCK = 32
_FIND_CHUNK = 32
# Elements per program in elementwise kernels.
_ELEMENT_BLOCK = 1024


def _specialization(value: object) -> tuple:
    """What Triton compiles a kernel argument's variant by, or finer: a tensor's dtype and 16-byte alignment, an
    int's width class and whether it is 1 or a multiple of 16 (its specialization), any other value's type."""
    if isinstance(value, torch.Tensor):
        return value.dtype, value.data_ptr() % 16 == 0
    if isinstance(value, bool) or not isinstance(value, int):
        return (type(value),)
    return -(2**31) <= value < 2**31, value == 1, value % 16 == 0


# Compiled variants met so far, by kernel, launch options and the arguments' specializations.
_COMPILED: dict[tuple, object] = {}


def _launch(kernel: triton.JITFunction, grid: tuple[int, ...], *args: object, **meta: object) -> None:
    """``kernel[grid](*args, **meta)`` (runtime arguments positional, constexprs and launch options by name).

    The first launch of a variant goes through Triton, which compiles it and hands back the compiled kernel;
    later ones call that straight away. Triton's own launch path (binding, specialization, its cache key,
    checks of globals) costs the host some 100 µs a launch, more than many of these kernels run, and a step
    launches about ten.
    """
    if _INTERPRETED:
        kernel[grid](*args, **meta)
        return
    key = (kernel, tuple(meta.items()), torch.cuda.current_device(), *map(_specialization, args))
    compiled = _COMPILED.get(key)
    if compiled is None:
        _COMPILED[key] = kernel[grid](*args, **meta)
        return
    values = (*args, *(meta[name] for name in kernel.arg_names[len(args):]))
    stream = torch.cuda.current_stream().cuda_stream
    grid = (*grid, 1, 1)
    compiled.run(
        grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, compiled.launch_metadata(grid[:3], stream, *values),
        *_launch_hooks(), *values,
    )


def _launch_after_write(written: str, kernel: triton.JITFunction, grid: tuple[int, ...], *args: object, **meta: object) -> None:
    """``_launch`` of a step's later kernel, once an earlier one has ``written``: a failure here (say, this
    kernel does not compile with the installed Triton) raises ``PartialUpdateError``, since rerunning the
    whole step in torch would apply the first kernel's writes twice."""
    try:
        _launch(kernel, grid, *args, **meta)
    except Exception as error:
        raise PartialUpdateError(f"{kernel.fn.__name__} failed after {written}: {error}") from error


def _launch_hooks() -> tuple[object, object]:
    """The enter and exit hooks a profiler may have set on Triton's launches (read at each launch, as Triton does)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    from triton.compiler import CompiledKernel

    return CompiledKernel.launch_enter_hook, CompiledKernel.launch_exit_hook


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
def _touch(scores_ptr, slot, hit, increments, clock, BLOCK: tl.constexpr, ADD_COUNTS: tl.constexpr):
    """Record an access of each found slot: raise its score by ``increments`` (LFU) or set it to ``clock``.

    The add is atomic: a key given twice, or an index repeated, must count every time.
    """
    if ADD_COUNTS:
        tl.atomic_add(scores_ptr + slot, increments, mask=hit)
    else:
        tl.store(scores_ptr + slot, tl.full([BLOCK], 0, tl.int64) + clock, mask=hit)


# Batch lengths change every step: kernels are not specialized on them
# (Triton would otherwise compile a variant for values divisible by 16, or equal to 1).
@triton.jit
def _carry_in(query, absent, bucket, pending_ptr, CAP: tl.constexpr):
    """Insert each absent key into its bucket's row of pending keys, kept ascending: walking the row, an entry
    keeps the smaller of its key and the one carried (``atomic_min``) and the larger is carried on; a key
    stops where it finds itself or an unused entry, and keys carried past the row's end are left out. As
    entries only ever decrease, a key never lands twice, and the row ends as the bucket's smallest new keys
    in order, however the lanes interleave."""
    carried = query
    active = absent
    j = 0
    going = tl.max(active.to(tl.int32), axis=0) > 0
    while going:
        old = tl.atomic_min(pending_ptr + bucket * CAP + j, carried, mask=active)
        done = active & ((old == carried) | (old == _HIGHEST))
        carried = tl.where(active & (old > carried), old, carried)
        active = active & (done == 0)
        j += 1
        going = (tl.max(active.to(tl.int32), axis=0) > 0) & (j < CAP)


@triton.jit
def _bucket_of(query, table, valid, num_buckets_ptr, device_buckets_ptr, device_base_ptr, host_base_ptr):
    """Bucket of each key of table ``table`` in a ``BucketMap``'s slot arrays (``torch_ops.table_buckets``); 0 where
    not ``valid``."""
    num_buckets = tl.load(num_buckets_ptr + table, mask=valid, other=1)
    local = _mix64(query.to(tl.uint64, bitcast=True)).to(tl.int64, bitcast=True) % num_buckets
    local = tl.where(local < 0, local + num_buckets, local)  # torch.remainder's sign
    device_buckets = tl.load(device_buckets_ptr + table, mask=valid, other=0)
    device_base = tl.load(device_base_ptr + table, mask=valid, other=0)
    host_base = tl.load(host_base_ptr + table, mask=valid, other=0)
    return tl.where(local < device_buckets, device_base + local, host_base + local - device_buckets)


@triton.jit(do_not_specialize=["n", "batch_size", "spare"])
def _find_kernel(
    query_ptr, n, table_ptr, offsets_ptr, batch_size, num_tables, num_buckets_ptr, device_buckets_ptr, device_base_ptr, host_base_ptr,
    keys_ptr, occupied_ptr, scores_ptr, slot_ptr, bucket_ptr, clock_ptr, hits_ptr, misses_ptr,
    table_out_ptr, pending_ptr, protected_ptr, count_ptr, spare, rows_ptr, row_stride, out_ptr,
    outer_ptr, outer_num_buckets_ptr, outer_device_buckets_ptr, outer_device_base_ptr, outer_host_base_ptr,
    outer_keys_ptr, outer_occupied_ptr, outer_protected_ptr,
    CAP: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr, SEARCH_STEPS: tl.constexpr, TABLES: tl.constexpr,
    TOUCH: tl.constexpr, ADD_COUNTS: tl.constexpr, WRITE_TABLE: tl.constexpr, CLAIM: tl.constexpr, GATHER: tl.constexpr,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, OUTER: tl.constexpr, OUTER_CAP: tl.constexpr, OUTER_CHUNK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < n
    query = tl.load(query_ptr + offs, mask=live, other=0)
    table = tl.zeros([BLOCK], dtype=tl.int64)
    if TABLES == 1:  # given per key; -1: no key
        table = tl.load(table_ptr + offs, mask=live, other=-1)
    elif TABLES == 2:  # of a TBE batch: the last t with offsets[t * batch_size] <= index (empty tables skipped)
        hi = table + num_tables
        for _ in range(SEARCH_STEPS):
            mid = (table + hi) // 2
            open_ = hi - table > 1
            below = tl.load(offsets_ptr + mid * batch_size, mask=live & open_, other=0) <= offs
            table = tl.where(open_ & below, mid, table)
            hi = tl.where(open_ & (below == 0), mid, hi)
    valid = live & (table >= 0)
    bucket = _bucket_of(query, table, valid, num_buckets_ptr, device_buckets_ptr, device_base_ptr, host_base_ptr)
    tl.store(bucket_ptr + offs, bucket, mask=live)
    result = _probe(query, bucket * CAP, valid, keys_ptr, occupied_ptr, CAP, BLOCK, CHUNK)
    tl.store(slot_ptr + offs, result, mask=live)
    if TOUCH:
        hit = valid & (result >= 0)
        _touch(scores_ptr, result, hit, tl.full([BLOCK], 1, tl.int64), tl.load(clock_ptr), BLOCK, ADD_COUNTS)  # one access per index
        first = tl.min(tl.where(valid, table, num_tables), axis=0)
        last = tl.max(tl.where(valid, table, -1), axis=0)
        if first == last:  # the usual block: one table, one atomic per counter
            found_here = tl.sum(hit.to(tl.int64), axis=0)
            tl.atomic_add(hits_ptr + first, found_here)
            tl.atomic_add(misses_ptr + first, tl.sum(valid.to(tl.int64), axis=0) - found_here)
        else:
            tl.atomic_add(hits_ptr + table, hit.to(tl.int64), mask=valid)
            tl.atomic_add(misses_ptr + table, (hit == 0).to(tl.int64), mask=valid)
    if WRITE_TABLE:
        tl.store(table_out_ptr + offs, table, mask=live)
    if CLAIM:
        if tl.program_id(0) == 0:  # the new ids' count, which the next kernel (``_locate_kernel``) adds to
            tl.store(count_ptr, 0)
        # The batch's own slots are protected from the insert's evictions (the write releases them).
        tl.store(protected_ptr + result, tl.full([BLOCK], 1, tl.uint8), mask=valid & (result >= 0))
        _carry_in(query, valid & (result < 0), bucket, pending_ptr, CAP)
    if OUTER:  # the tier behind a cache: each absent key's slot there (protected there while a claim's insert runs)
        behind = valid & (result < 0)
        outer_bucket = _bucket_of(
            query, table, behind, outer_num_buckets_ptr, outer_device_buckets_ptr, outer_device_base_ptr, outer_host_base_ptr,
        )
        outer = _probe(query, outer_bucket * OUTER_CAP, behind, outer_keys_ptr, outer_occupied_ptr, OUTER_CAP, BLOCK, OUTER_CHUNK)
        tl.store(outer_ptr + offs, outer, mask=live)
        if CLAIM:
            tl.store(outer_protected_ptr + outer, tl.full([BLOCK], 1, tl.uint8), mask=outer >= 0)
    if GATHER:  # device rows: each index's embedding read as soon as its slot is known (absent: the spare row)
        cols = tl.arange(0, BLOCK_D)
        mask = live[:, None] & (cols[None, :] < DIM)
        row = tl.where(result >= 0, result, spare)
        values = tl.load(rows_ptr + row[:, None] * row_stride + cols[None, :], mask=mask, other=0.0)
        tl.store(out_ptr + offs.to(tl.int64)[:, None] * DIM + cols[None, :], values, mask=mask)


def find(
    index: SlotArrays, keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, access: Access | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One kernel for every key over tables sharing slot arrays: (slot, bucket) per key (see ``torch_ops.find``)."""
    n = keys.numel()
    slots = torch.empty(n, dtype=torch.int64, device=keys.device)
    buckets = torch.empty(n, dtype=torch.int64, device=keys.device)
    if n == 0:
        return slots, buckets
    _launch_find(index, keys, table, offsets, batch_size, access, slots, buckets)
    return slots, buckets


def _launch_find(
    index: SlotArrays, keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, access: Access | None,
    slots: torch.Tensor, buckets: torch.Tensor, table_out: torch.Tensor | None = None, claim: torch.Tensor | None = None,
    gather: tuple[RowParts, torch.Tensor] | None = None, behind: tuple[SlotArrays, torch.Tensor] | None = None,
) -> None:
    """The probe kernel; ``table_out``: where to write each key's table; ``claim`` (the new ids' count, which it
    zeroes): carry absent keys into the index's pending rows; ``gather``: (device rows, output) to read each
    index's embedding in the same pass; ``behind``: (the index behind a cache, output) to find each absent key
    there too."""
    n = keys.numel()
    maps = index.maps
    tables = maps.num_buckets.numel()
    mode = 1 if table is not None else 2 if offsets is not None else 0
    table_keys, occupied = index.keys, index.occupied.view(torch.uint8)
    rows, out = (gather[0].device, gather[1]) if gather is not None else (table_keys, keys)
    dim = out.shape[1] if gather is not None else 1
    spare = table_keys.numel() - 1
    # Without an access nothing is touched: the clock's and counters' places are taken by the keys (never used).
    clock, add_counts, hits, misses = (table_keys, False, table_keys, table_keys) if access is None else access
    # Without a tier behind, its places are taken by this index's arrays (never read).
    outer_index, outer = behind if behind is not None else (index, slots)
    outer_cap = outer_index.bucket_capacity
    _launch(_find_kernel, (triton.cdiv(n, _FIND_BLOCK),),
        keys, n, keys if table is None else table, keys if offsets is None else offsets, batch_size, tables, *maps,
        table_keys, occupied, index.scores, slots, buckets, clock, hits, misses,
        keys if table_out is None else table_out, keys if claim is None else index.pending.keys,
        occupied if claim is None else index.protected.view(torch.uint8), keys if claim is None else claim, spare, rows, rows.stride(0), out,
        outer, *outer_index.maps, outer_index.keys, outer_index.occupied.view(torch.uint8), outer_index.protected.view(torch.uint8),
        CAP=index.bucket_capacity, BLOCK=_FIND_BLOCK, CHUNK=min(_FIND_CHUNK, triton.next_power_of_2(index.bucket_capacity)),
        SEARCH_STEPS=max(1, (tables - 1).bit_length()), TABLES=mode, TOUCH=access is not None, ADD_COUNTS=add_counts,
        WRITE_TABLE=table_out is not None, CLAIM=claim is not None, GATHER=gather is not None, DIM=dim, BLOCK_D=max(16, triton.next_power_of_2(dim)),
        OUTER=behind is not None, OUTER_CAP=outer_cap, OUTER_CHUNK=min(_FIND_CHUNK, triton.next_power_of_2(outer_cap)),
    )


def find_or_claim(
    index: SlotArrays, keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, access: Access | None,
    claim: bool, rows: RowParts | None, columns: int, behind: SlotArrays | None,
) -> Found:
    """``find`` of a TBE batch (or of keys of given tables) that also gives each index's table; with ``claim``,
    the found slots marked in ``index.protected`` (``write_new`` clears them), each absent key's pending entry
    (``entry``, -1: none) and the new ids (``Found``); with ``rows`` (device rows only) each index's first
    ``columns`` (the spare row where absent); with ``behind``, each absent key's slot in the index behind a cache
    (``outer``). See ``torch_ops.find_or_claim``."""
    n = keys.numel()
    slots, buckets, found_table = (torch.empty(n, dtype=torch.int64, device=keys.device) for _ in range(3))
    out = torch.empty(n, columns, dtype=torch.float32, device=keys.device) if rows is not None else None
    gather = None if rows is None else (rows, out)
    outer = None if behind is None else torch.empty(n, dtype=torch.int64, device=keys.device)
    probe = None if behind is None else (behind, outer)
    if not claim:
        if n:
            _launch_find(index, keys, table, offsets, batch_size, access, slots, buckets, found_table, None, gather, probe)
        return Found(slots, buckets, found_table, out, None, None, None, outer)
    entry = torch.empty(n, dtype=torch.int64, device=keys.device)
    reps = torch.empty(n, dtype=torch.int64, device=keys.device)
    if n == 0:
        return Found(slots, buckets, found_table, out, entry, reps, torch.zeros(1, dtype=torch.int64, device=keys.device), outer)
    count = torch.empty(1, dtype=torch.int64, device=keys.device)  # zeroed by the find
    pending = index.pending
    _launch_find(index, keys, table, offsets, batch_size, access, slots, buckets, found_table, count, gather, probe)
    # Once every key is carried in: where each landed, how often it is used, and one index per new id.
    cap = index.bucket_capacity
    _launch_after_write(
        "the find claimed slots and pending entries", _locate_kernel, (triton.cdiv(n, _FIND_BLOCK),), keys, slots, found_table, buckets, n, pending.keys, pending.uses, pending.owner,
        pending.owner.numel(), entry, reps, count, CAP=cap, BLOCK=_FIND_BLOCK, CHUNK=min(_FIND_CHUNK, triton.next_power_of_2(cap)),
    )
    return Found(slots, buckets, found_table, out, entry, reps, count, outer)


@triton.jit(do_not_specialize=["n"])
def _locate_kernel(
    query_ptr, slot_ptr, table_ptr, bucket_ptr, n, pending_ptr, uses_ptr, owner_ptr, entries, entry_ptr, reps_ptr, count_ptr,
    CAP: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr,
):
    """Each absent key's entry in its bucket's pending row (-1: carried past its end), its uses counted, and
    the first of its indices to claim the entry's owner appended to the new ids at ``count``."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    keyed = tl.load(table_ptr + offs, mask=valid, other=-1) >= 0
    absent = valid & keyed & (tl.load(slot_ptr + offs, mask=valid, other=0) < 0)
    entry = tl.full([BLOCK], -1, tl.int64)
    if tl.max(absent.to(tl.int32), axis=0) > 0:
        # Read under ``valid``, not ``absent`` (both are only used where absent): Triton 3.6's layout pass
        # fails on this kernel when these loads share the mask of the 2-D compare (tools/gpu_host/compile_kernels.py).
        query = tl.load(query_ptr + offs, mask=valid, other=0)
        base = tl.load(bucket_ptr + offs, mask=valid, other=0) * CAP
        for start in range(0, CAP, CHUNK):
            pos = start + tl.arange(0, CHUNK)
            live = absent[:, None] & (pos[None, :] < CAP)
            stored = tl.load(pending_ptr + base[:, None] + pos[None, :], mask=live, other=0)
            first = tl.min(tl.where(live & (stored == query[:, None]), pos[None, :], CAP), axis=1)
            entry = tl.where((entry < 0) & (first < CAP), base + first, entry)
        claiming = entry >= 0
        tl.atomic_add(uses_ptr + entry, tl.full([BLOCK], 1, tl.int64), mask=claiming)
        # Triton's compare-and-swap takes no mask: lanes without an entry compare -1 with an owner (never
        # negative), so nothing swaps, each at an entry of its own (all at one entry, they would queue on its
        # address: a batch of new ids spent a millisecond there).
        idle = offs % entries
        old = tl.atomic_cas(owner_ptr + tl.where(claiming, entry, idle), tl.where(claiming, 0, -1).to(tl.int32), (offs + 1).to(tl.int32))
        lead = claiming & (old == 0)
        found = tl.sum(lead.to(tl.int32), axis=0)
        if found > 0:
            at = tl.atomic_add(count_ptr, found.to(tl.int64)) + tl.cumsum(lead.to(tl.int64), axis=0) - 1
            tl.store(reps_ptr + at, offs, mask=lead)
    tl.store(entry_ptr + offs, entry, mask=valid)


@triton.jit
def _row_pointers(device_ptr, host_ptr, stride, split, spare, slot):
    """Where each slot's row starts: rows below ``split`` in device memory, the rest in host memory; -1: the spare."""
    row = tl.where(slot >= 0, slot, spare).to(tl.int64)
    return tl.where(row < split, device_ptr + row * stride, host_ptr + (row - split) * stride)


@triton.jit
def _stored_rows(row_ptr, stepped, cols, DIM: tl.constexpr, OPT: tl.constexpr):
    """What a step reads of rows ``row_ptr`` (``[R, 1]`` pointers: embedding, then state) where ``stepped``
    (``[R, 1]``): the embedding and the state fields (ADAM's m and v; an Adagrad sum; unused ones are the
    embedding again). Apart from the step so that the reads can be in flight while the gradients are summed."""
    mask = stepped & (cols < DIM)
    w = tl.load(row_ptr + cols, mask=mask, other=0.0)
    state_a = w
    state_b = w
    if OPT == 1:
        state_a = tl.load(row_ptr + DIM + cols, mask=mask, other=0.0)
        state_b = tl.load(row_ptr + 2 * DIM + cols, mask=mask, other=0.0)
    elif OPT == 2:
        state_a = tl.load(row_ptr + DIM + cols, mask=mask, other=0.0)
    elif OPT == 3:
        state_a = tl.load(row_ptr + DIM, mask=stepped, other=0.0)
    return w, state_a, state_b


@triton.jit
def _apply_optimizer(
    row_ptr, w, state_a, state_b, g, stepped, cols, lr, eps, beta1, beta2, weight_decay, bias1, bias2,
    DIM: tl.constexpr, OPT: tl.constexpr,
):
    """One optimizer step on rows ``row_ptr`` where ``stepped``, from what ``_stored_rows`` read of them and
    their summed gradients ``g`` (``[R, BLOCK_D]``); writes the embedding and the state back."""
    mask = stepped & (cols < DIM)
    if OPT == 0:
        w = w - lr * g
    elif OPT == 1:
        m = beta1 * state_a + (1.0 - beta1) * g
        v = beta2 * state_b + (1.0 - beta2) * g * g
        step = (m / bias1) / (tl.sqrt_rn(v / bias2) + eps) + weight_decay * w
        w = w - lr * step
        tl.store(row_ptr + DIM + cols, m, mask=mask)
        tl.store(row_ptr + 2 * DIM + cols, v, mask=mask)
    elif OPT == 2:
        acc = state_a + g * g
        w = w - lr * g / (tl.sqrt_rn(acc) + eps)
        tl.store(row_ptr + DIM + cols, acc, mask=mask)
    else:
        acc = state_a + tl.sum(g * g, axis=1)[:, None] / DIM
        w = w - g * (lr / (tl.sqrt_rn(acc) + eps))
        tl.store(row_ptr + DIM, acc, mask=stepped)
    tl.store(row_ptr + cols, w, mask=mask)


@triton.jit
def _segmented_sum(value_a, start_a, value_b, start_b):
    """Combine of a segmented scan: a sum restarts where ``b`` holds a segment's start."""
    return tl.where(start_b != 0, value_b, value_a + value_b), start_a | start_b


@triton.jit
def _segmented_scan(g, starts, P: tl.constexpr, GROUPS: tl.constexpr, BLOCK_D: tl.constexpr):
    """Segmented prefix sums over positions of the rows ``g`` (``[P, BLOCK_D]``; ``starts`` 1 where a segment
    starts), row ``i`` holding position ``(i % GROUPS) * (P // GROUPS) + i // GROUPS``. With ``GROUPS`` the rows
    one load of the block's warps covers, Triton keeps the rows of one ``i % GROUPS`` in the same threads: each
    run of ``P // GROUPS`` consecutive positions is scanned in registers and only the runs' totals cross
    threads (rows in position order would cross warps, through shared memory, at every row)."""
    K: tl.constexpr = P // GROUPS
    local, seen = tl.associative_scan((tl.reshape(g, [K, GROUPS, BLOCK_D]), tl.reshape(starts, [K, GROUPS, BLOCK_D])), 0, _segmented_sum)
    total = tl.sum(tl.where((tl.arange(0, K) == K - 1)[:, None, None], local, 0.0), axis=0)
    into, _ = tl.associative_scan((total, tl.max(seen, axis=0)), 0, _segmented_sum)
    group = tl.arange(0, GROUPS)[:, None]
    carried = tl.gather(into, tl.broadcast_to(tl.maximum(group - 1, 0), [GROUPS, BLOCK_D]), 0)
    carried = tl.where(group > 0, carried, 0.0)  # what the runs before each run leave open
    return tl.reshape(tl.where(seen != 0, local, local + carried[None, :, :]), [P, BLOCK_D])


@triton.jit
def _power(base, exponent):
    """``base ** exponent`` (float64 ``base``, int64 ``exponent`` >= 0) by squaring: multiplications only."""
    result = base * 0.0 + 1.0
    while exponent > 0:
        result = tl.where(exponent % 2 == 1, result * base, result)
        base = base * base
        exponent = exponent // 2
    return result


@triton.jit
def _bias_corrections(step_ptr, betas_ptr, OPT: tl.constexpr):
    """ADAM's ``1 - beta ** step`` for both moments, the step read from device memory (float64 betas: as exact
    as the host's); 1 for the other optimizers, which read nothing."""
    bias1 = 1.0
    bias2 = 1.0
    if OPT == 1:
        step = tl.load(step_ptr)
        bias1 = (1.0 - _power(tl.load(betas_ptr), step)).to(tl.float32)
        bias2 = (1.0 - _power(tl.load(betas_ptr + 1), step)).to(tl.float32)
    return bias1, bias2


@triton.jit(do_not_specialize=["n"])
def _segment_update_kernel(
    grad_ptr, grad_stride, order_ptr, slot_ptr, n, device_ptr, host_ptr, row_stride, split, spare, head_ptr, tail_ptr,
    lr, eps, beta1, beta2, weight_decay, step_ptr, betas_ptr,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, P: tl.constexpr, GROUPS: tl.constexpr, ROW_ALIGN: tl.constexpr, OPT: tl.constexpr,
):
    """One block of ``P`` grouped positions: a segmented scan of the block's gradient rows leaves, at each id's
    last position in the block, the sum of its rows there. Ids whose rows all lie in the block are stepped; the
    sums of the ids crossing the block's edges are left for the crossing kernel (``head``: the id that came from
    before; ``tail``: the id that starts here and goes on). Slot -1 (the spare row, a sink) is not stepped."""
    b = tl.program_id(0).to(tl.int64)
    first = b * P
    lane = tl.arange(0, P)
    offset = (lane % GROUPS) * (P // GROUPS) + lane // GROUPS  # the position of row ``lane`` (``_segmented_scan``)
    pos = first + offset
    valid = pos < n
    slot = tl.load(slot_ptr + pos, mask=valid, other=-2)  # -2: no position (slots are -1 or more)
    before = tl.load(slot_ptr + pos - 1, mask=valid & (offset > 0), other=-3)
    following = tl.load(slot_ptr + pos + 1, mask=pos + 1 < n, other=-3)
    prev = tl.load(slot_ptr + first - 1, mask=first > 0, other=-3)
    after = tl.load(slot_ptr + first + P, mask=first + P < n, other=-3)
    real = valid & (slot >= 0)
    last = real & ((slot != following) | (offset == P - 1))  # the id's last position in the block
    inside = (last & (slot != prev) & (slot != after))[:, None]
    cols = tl.arange(0, BLOCK_D)[None, :]
    row = tl.multiple_of(_row_pointers(device_ptr, host_ptr, row_stride, split, spare, slot), ROW_ALIGN)[:, None]
    w, state_a, state_b = _stored_rows(row, inside, cols, DIM, OPT)
    index = tl.load(order_ptr + pos, mask=real, other=0).to(tl.int64)
    g = tl.load(grad_ptr + index[:, None] * grad_stride + cols, mask=real[:, None] & (cols < DIM), other=0.0)
    sums = _segmented_scan(g, tl.broadcast_to((slot != before).to(tl.int32)[:, None], [P, BLOCK_D]), P, GROUPS, BLOCK_D)
    bias1, bias2 = _bias_corrections(step_ptr, betas_ptr, OPT)
    _apply_optimizer(row, w, state_a, state_b, sums, inside, cols, lr, eps, beta1, beta2, weight_decay, bias1, bias2, DIM, OPT)
    # Each is one row's at most (sorted slots: only the first id can come from before, only the last go on).
    partial = b * DIM + tl.broadcast_to(cols, [P, BLOCK_D])
    tl.store(head_ptr + partial, sums, mask=(last & (slot == prev))[:, None] & (cols < DIM))
    tl.store(tail_ptr + partial, sums, mask=(last & (slot == after) & (slot != prev))[:, None] & (cols < DIM))


@triton.jit(do_not_specialize=["n"])
def _crossing_update_kernel(
    slot_ptr, n, device_ptr, host_ptr, row_stride, split, spare, head_ptr, tail_ptr,
    lr, eps, beta1, beta2, weight_decay, step_ptr, betas_ptr,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, P: tl.constexpr, CHUNK: tl.constexpr, ROW_ALIGN: tl.constexpr, OPT: tl.constexpr,
):
    """Step the id that starts in block ``b`` and goes on past it: its tail here plus the heads of the blocks it
    covers (those whose first position holds its slot), ``CHUNK`` blocks per step and in a fixed order."""
    b = tl.program_id(0).to(tl.int64)
    first = b * P
    if first + P < n:
        slot_last = tl.load(slot_ptr + first + P - 1)
        prev = tl.load(slot_ptr + first - 1, mask=first > 0, other=-3)
        if (slot_last >= 0) & (slot_last == tl.load(slot_ptr + first + P)) & (slot_last != prev):
            cols = tl.arange(0, BLOCK_D)
            one = (tl.arange(0, 2) == 0)[:, None]  # a two-row tile whose second row is masked off
            slots = tl.zeros([2], dtype=tl.int64) + slot_last
            row = tl.multiple_of(_row_pointers(device_ptr, host_ptr, row_stride, split, spare, slots), ROW_ALIGN)[:, None]
            w, state_a, state_b = _stored_rows(row, one, cols[None, :], DIM, OPT)
            acc = tl.load(tail_ptr + b * DIM + cols, mask=cols < DIM, other=0.0)
            blocks = b + 1 + tl.arange(0, CHUNK)
            going = first < n
            while going:
                # Sorted slots: the blocks the id covers are a prefix of the chunk.
                covered = tl.load(slot_ptr + blocks * P, mask=blocks * P < n, other=-3) == slot_last
                heads = tl.load(head_ptr + blocks[:, None] * DIM + cols[None, :], mask=covered[:, None] & (cols[None, :] < DIM), other=0.0)
                acc += tl.sum(heads, axis=0)
                going = tl.sum(covered.to(tl.int32), axis=0) == CHUNK
                blocks += CHUNK
            g = tl.where(one, acc[None, :], 0.0)
            bias1, bias2 = _bias_corrections(step_ptr, betas_ptr, OPT)
            _apply_optimizer(row, w, state_a, state_b, g, one, cols[None, :], lr, eps, beta1, beta2, weight_decay, bias1, bias2, DIM, OPT)


def reduce_and_update(
    parts: RowParts, grouped_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor, optimizer: OptimizerArgs,
) -> None:
    """In place on the rows ``[dim + state]`` of ``parts``: position ``j`` carries the gradient row
    ``index_grads[order[j]]`` of the id at ``grouped_slots[j]`` (sorted, so equal slots are adjacent; -1: the
    spare row, a sink left as it is); each id's rows are summed and its row stepped once. No host sync: blocks
    of positions (``_segment_shape``) step the ids inside them, a second kernel the ids that cross block edges."""
    n = grouped_slots.numel()
    if n == 0:
        return
    dim = index_grads.shape[1]
    block_d = triton.next_power_of_2(dim)
    positions, groups = _segment_shape(block_d)
    blocks = triton.cdiv(n, positions)
    head = torch.empty(blocks, dim, dtype=torch.float32, device=index_grads.device)
    tail = torch.empty(blocks, dim, dtype=torch.float32, device=index_grads.device)
    rows = (parts.device, parts.host, parts.width, parts.split, parts.spare)
    hyper = _hyper_parameters(optimizer)
    meta = dict(DIM=dim, BLOCK_D=block_d, P=positions, ROW_ALIGN=_row_alignment(parts), OPT=_OPTIMIZER_CODE[optimizer.optimizer])
    _launch(
        _segment_update_kernel, (blocks,),
        index_grads, index_grads.stride(0), order, grouped_slots, n, *rows, head, tail, *hyper, **meta,
        GROUPS=groups, num_warps=_SEGMENT_WARPS,
    )
    if blocks == 1:
        return
    _launch_after_write(
        "the first kernel stepped the ids inside blocks", _crossing_update_kernel, (blocks,), grouped_slots, n, *rows, head, tail, *hyper, **meta,
        CHUNK=max(1, min(_CROSSING_CHUNK, _SEGMENT_TILE // block_d)), num_warps=_CROSSING_WARPS,
    )


def _segment_shape(block_d: int) -> tuple[int, int]:
    """Positions per block of the fused update (a tile of ``_SEGMENT_TILE`` floats at most) and the runs of
    consecutive positions its scan keeps within threads (``_segmented_scan``): one per row a load of the
    block's warps covers."""
    positions = max(1, min(_SEGMENT_BLOCK, _SEGMENT_TILE // block_d))
    return positions, min(positions, _SEGMENT_WARPS * max(1, _WARP_FLOATS // block_d))


def _row_alignment(parts: RowParts) -> int:
    """Bytes that every row's address is a multiple of: 16 lets the kernels move rows in 16-byte vectors
    (Triton cannot tell from a choice between two tensors' addresses), else a float's 4."""
    aligned = parts.width % 4 == 0 and parts.device.data_ptr() % 16 == 0 and parts.host.data_ptr() % 16 == 0
    return 16 if aligned else 4


def _hyper_parameters(optimizer: OptimizerArgs) -> tuple:
    """What the update kernels take of the optimizer: its constants, and where the step and the betas (for ADAM's
    bias corrections, computed in the kernel so that a CUDA graph's replay of a step uses its own step) are."""
    params = optimizer.params
    return params.learning_rate, params.eps, params.beta1, params.beta2, params.weight_decay, optimizer.at, optimizer.betas


@triton.jit(do_not_specialize=["n", "split", "spare"])
def _move_rows_kernel(
    device_ptr, host_ptr, stride, split, spare, slot_ptr, dense_ptr, n,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, TO_STORE: tl.constexpr,
):
    """Row ``i`` of the dense ``[n, DIM]`` tensor and the first ``DIM`` columns of slot ``i``'s stored row: read
    from the store into the dense rows, or (``TO_STORE``) written from them into the store."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    valid = rows < n
    stored = _row_pointers(device_ptr, host_ptr, stride, split, spare, tl.load(slot_ptr + rows, mask=valid, other=0))
    cols = tl.arange(0, BLOCK_D)
    mask = valid[:, None] & (cols[None, :] < DIM)
    store_at, dense_at = stored[:, None] + cols[None, :], dense_ptr + rows[:, None] * DIM + cols[None, :]
    if TO_STORE:
        tl.store(store_at, tl.load(dense_at, mask=mask), mask=mask)
    else:
        tl.store(dense_at, tl.load(store_at, mask=mask), mask=mask)


def gather_rows(parts: RowParts, slots: torch.Tensor, columns: int) -> torch.Tensor:
    """``[len(slots), columns]``: the first ``columns`` of the row of each slot (the spare row for -1)."""
    n = slots.numel()
    out = torch.empty(n, columns, dtype=parts.device.dtype, device=slots.device)
    if n:
        _launch(_move_rows_kernel, (triton.cdiv(n, _GATHER_ROWS),),
            parts.device, parts.host, parts.width, parts.split, parts.spare, slots, out, n,
            DIM=columns, BLOCK_D=triton.next_power_of_2(columns), ROWS=_GATHER_ROWS, TO_STORE=False,
        )
    return out


@triton.jit
def _maximum(a, b):
    return tl.maximum(a, b)


@triton.jit(do_not_specialize=["n", "split", "spare"])
def _gather_unique_kernel(
    device_ptr, host_ptr, stride, split, spare, sorted_ptr, order_ptr, out_ptr, n,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, P: tl.constexpr,
):
    """One block of ``P`` sorted positions: each distinct slot's row is read once (by its first position in
    the block) and handed to the block's other positions of the same slot, then written to their indices."""
    first = tl.program_id(0).to(tl.int64) * P
    lane = tl.arange(0, P)
    pos = first + lane
    valid = pos < n
    slot = tl.load(sorted_ptr + pos, mask=valid, other=-2)
    before = tl.load(sorted_ptr + pos - 1, mask=valid & (lane > 0), other=-3)
    leads = valid & (slot != before)  # the block's first position always reads
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < DIM
    source = _row_pointers(device_ptr, host_ptr, stride, split, spare, slot)
    values = tl.load(source[:, None] + cols[None, :], mask=leads[:, None] & cmask[None, :], other=0.0)
    # Equal slots are adjacent: a position's reader is the last leading lane at or before it.
    reader = tl.associative_scan(tl.where(leads, lane, 0), 0, _maximum)
    values = tl.gather(values, tl.broadcast_to(reader[:, None], [P, BLOCK_D]), 0)
    index = tl.load(order_ptr + pos, mask=valid, other=0)
    tl.store(out_ptr + index[:, None] * DIM + cols[None, :], values, mask=valid[:, None] & cmask[None, :])


def gather_unique(parts: RowParts, sorted_slots: torch.Tensor, order: torch.Tensor, columns: int) -> torch.Tensor:
    """``gather_rows`` of the slots ``sorted_slots[j]`` of indices ``order[j]``, into index order, reading
    each distinct row once per block of ``_UNIQUE_BLOCK`` positions (see ``torch_ops.gather_unique``)."""
    n = sorted_slots.numel()
    out = torch.empty(n, columns, dtype=parts.device.dtype, device=sorted_slots.device)
    if n:
        _launch(_gather_unique_kernel, (triton.cdiv(n, _UNIQUE_BLOCK),),
            parts.device, parts.host, parts.width, parts.split, parts.spare, sorted_slots, order, out, n,
            DIM=columns, BLOCK_D=max(16, triton.next_power_of_2(columns)), P=_UNIQUE_BLOCK,
        )
    return out


def scatter_rows(parts: RowParts, slots: torch.Tensor, values: torch.Tensor) -> None:
    """Write full rows ``values`` (``[len(slots), width]``, contiguous) at each slot's row (the spare row for -1)."""
    n = slots.numel()
    if n:
        width = parts.width
        _launch(_move_rows_kernel, (triton.cdiv(n, _GATHER_ROWS),),
            parts.device, parts.host, width, parts.split, parts.spare, slots, values.contiguous(), n,
            DIM=width, BLOCK_D=triton.next_power_of_2(width), ROWS=_GATHER_ROWS, TO_STORE=True,
        )


@triton.jit
def _pool_kernel(
    emb_ptr, emb_stride, emb_rows, inverse_ptr, offsets_ptr, out_ptr, out_stride, fresh_ptr,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, MEAN: tl.constexpr, FRESH: tl.constexpr,
):
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
        source = emb_ptr + row[:, None] * emb_stride
        if FRESH:  # an index without a row here (no slot, or a row of the tier behind a cache): its row of the fresh values
            inside = (row >= 0) & (row < emb_rows)
            source = tl.where(inside[:, None], source, fresh_ptr + pos.to(tl.int64)[:, None] * DIM)
        values = tl.load(source + cols[None, :], mask=pmask[:, None] & cmask[None, :], other=0.0)
        acc += tl.sum(values, axis=0)
    if MEAN:
        acc = acc / tl.maximum(stop - start, 1).to(tl.float32)
    tl.store(out_ptr + bag.to(tl.int64) * out_stride + cols, acc, mask=cmask)


def pool_rows(
    emb: torch.Tensor, inverse: torch.Tensor, offsets: torch.Tensor, mode: PoolingMode, out: torch.Tensor, fresh: torch.Tensor | None = None,
) -> None:
    """``out[b] = sum (MEAN: mean) of emb[inverse[j]]`` for ``j`` in bag ``b`` (``offsets`` ``[bags + 1]``, from any start);
    with ``fresh``, ``inverse`` entries that are no row of ``emb`` read ``fresh[j]``."""
    bags = offsets.numel() - 1
    if bags == 0:
        return
    dim = emb.shape[1]
    _launch(_pool_kernel, (bags,),
        emb, emb.stride(0), emb.shape[0], inverse, offsets, out, out.stride(0), emb if fresh is None else fresh,
        DIM=dim, BLOCK_D=triton.next_power_of_2(dim), BLOCK_N=_BLOCK_N, MEAN=mode is PoolingMode.MEAN, FRESH=fresh is not None,
        num_warps=_BAG_WARPS,
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
def _uniform_open(keys, seeds, cols):
    """``[len(keys), len(cols)]`` uniforms in (0, 1) of (seed, id, column): ``hashing.uniform_open`` of
    ``hashing.random_bits`` (uint64 ``keys`` and ``seeds``)."""
    columns = cols.to(tl.uint64) * 0x9E3779B97F4A7C15
    bits = _mix64(_mix64(keys)[:, None] ^ (columns[None, :] + seeds[:, None]))
    word = (bits >> 40) & 0xFFFFFF
    return (word.to(tl.float32) + 0.5) * (1.0 / 16777216.0)


@triton.jit
def _drawn_rows(query, table, valid, seeds_ptr, lower_ptr, span_ptr, cols):
    """Initial values ``lower + span * u`` of each key of its table (``DrawTables``), ``[len(query), len(cols)]``."""
    seeds = tl.load(seeds_ptr + table, mask=valid, other=0).to(tl.uint64, bitcast=True)
    lower = tl.load(lower_ptr + table, mask=valid, other=0.0)
    span = tl.load(span_ptr + table, mask=valid, other=0.0)
    return lower[:, None] + span[:, None] * _uniform_open(query.to(tl.uint64, bitcast=True), seeds, cols)


@triton.jit(do_not_specialize=["n"])
def _uniform_kernel(
    keys_ptr, out_ptr, n, seed_word, seed_ptr, lower, span, lower_ptr, span_ptr,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr, SEED_PER_KEY: tl.constexpr, BOUNDS_PER_KEY: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = tl.arange(0, BLOCK_D)
    valid = rows < n
    keys = tl.load(keys_ptr + rows, mask=valid, other=0).to(tl.uint64, bitcast=True)
    if SEED_PER_KEY:
        seeds = tl.load(seed_ptr + rows, mask=valid, other=0).to(tl.uint64, bitcast=True)
    else:
        seeds = tl.zeros([BLOCK_K], dtype=tl.uint64) + seed_word.to(tl.int64).to(tl.uint64, bitcast=True)
    uniform = _uniform_open(keys, seeds, cols)
    mask = valid[:, None] & (cols[None, :] < DIM)
    if BOUNDS_PER_KEY:
        value = tl.load(lower_ptr + rows, mask=valid, other=0.0)[:, None] + tl.load(span_ptr + rows, mask=valid, other=0.0)[:, None] * uniform
    else:
        value = lower + span * uniform
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * DIM + cols[None, :], value, mask=mask)


def uniform_rows(
    keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, lower: float | torch.Tensor, span: float | torch.Tensor,
) -> torch.Tensor:
    """``[len(keys), dim]`` float32 uniform in (lower, lower + span), the values of ``torch_ops.uniform_rows``."""
    n = keys.numel()
    out = torch.empty(n, dim, dtype=torch.float32, device=keys.device)
    if n:
        per_key = isinstance(seed_words, torch.Tensor)
        word, seeds = (0, seed_words) if per_key else (seed_words, keys)
        bounds_per_key = isinstance(lower, torch.Tensor)
        low, width, lows, widths = (0.0, 0.0, lower, span) if bounds_per_key else (lower, span, out, out)
        block_d = triton.next_power_of_2(dim)
        block_k = max(1, min(64, 4096 // block_d))
        _launch(_uniform_kernel, (triton.cdiv(n, block_k),),
            keys, out, n, word, seeds, low, width, lows, widths,
            DIM=dim, BLOCK_D=block_d, BLOCK_K=block_k, SEED_PER_KEY=per_key, BOUNDS_PER_KEY=bounds_per_key,
        )
    return out


@triton.jit
def _plan_slot(base, rank, occupied_ptr, scores_ptr, protected_ptr, CAP: tl.constexpr, BLOCK_C: tl.constexpr):
    """(slot, placed) of the ``rank``-th new key of the bucket starting at slot ``base``: empty slots first (they
    form the bucket's tail), then occupied ones by ascending score (ties: lower position), protected never.
    Reads the table only, so keys of one bucket may be planned at once; rank -1 places nothing."""
    s = tl.arange(0, BLOCK_C)
    real = s < CAP
    occupied = tl.load(occupied_ptr + base + s, mask=real, other=0) != 0
    fill = tl.sum(occupied.to(tl.int32), axis=0)
    if rank < CAP - fill:
        position = (fill + rank).to(tl.int64)
        placed = rank >= 0
    else:
        priority = tl.where(occupied, tl.load(scores_ptr + base + s, mask=real, other=0), _LOWEST)
        blocked = (tl.load(protected_ptr + base + s, mask=real, other=1) != 0) | (real == 0)
        priority = tl.where(blocked, _HIGHEST, priority)
        eligible = tl.sum((blocked == 0).to(tl.int32), axis=0)
        placed = rank < eligible
        # The rank-th slot of the stable ascending order of priority: rank + 1 leftmost minima, each taken out
        # in turn. A bucket's new ids rank low (most batches bring one or two), so this is a few passes over
        # the bucket where sorting it (every pair of slots compared) was CAP of them.
        position = tl.zeros([], dtype=tl.int64)
        for _ in range(0, tl.minimum(rank, eligible - 1) + 1):
            position = tl.argmin(priority, axis=0, tie_break_left=True).to(tl.int64)
            priority = tl.where(s == position, _HIGHEST, priority)
    return tl.where(placed, base + position, -1), placed


@triton.jit
def _place_kernel(
    sorted_bucket_ptr, rank_ptr, occupied_ptr, scores_ptr, protected_ptr, keys_ptr,
    target_ptr, evicted_mask_ptr, evicted_key_ptr, evicted_score_ptr,
    CAP: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """Plan one new key: its slot and what it evicts."""
    i = tl.program_id(0)
    target, placed = _plan_slot(tl.load(sorted_bucket_ptr + i) * CAP, tl.load(rank_ptr + i), occupied_ptr, scores_ptr, protected_ptr, CAP, BLOCK_C)
    tl.store(target_ptr + i, target)
    safe = tl.where(placed, target, 0)
    tl.store(evicted_mask_ptr + i, (tl.load(occupied_ptr + safe) != 0) & placed)
    tl.store(evicted_key_ptr + i, tl.where(placed, tl.load(keys_ptr + safe), 0))
    tl.store(evicted_score_ptr + i, tl.where(placed, tl.load(scores_ptr + safe), 0))


@triton.jit(do_not_specialize=["n"])
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
    index: SlotArrays, sorted_buckets: torch.Tensor, rank: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slot and write new keys exactly as ``torch_ops.place_keys``: a planning kernel that only reads the table
    (one program per key: the slot of its rank in its bucket's priority order), then a kernel that writes the keys."""
    n = sorted_buckets.numel()
    device = keys.device
    target = torch.empty(n, dtype=torch.int64, device=device)
    evicted_mask = torch.empty(n, dtype=torch.bool, device=device)
    evicted_keys = torch.empty(n, dtype=torch.int64, device=device)
    evicted_scores = torch.empty(n, dtype=torch.int64, device=device)
    if n == 0:
        return target, evicted_mask, evicted_keys, evicted_scores
    occupied_bytes = index.occupied.view(torch.uint8)
    cap = index.bucket_capacity
    block_c = triton.next_power_of_2(cap)
    _launch(_place_kernel, (n,),
        sorted_buckets, rank, occupied_bytes, index.scores, index.protected.view(torch.uint8), index.keys,
        target, evicted_mask.view(torch.uint8), evicted_keys, evicted_scores,
        CAP=cap, BLOCK_C=block_c,
    )
    _launch(_write_kernel, (triton.cdiv(n, _ELEMENT_BLOCK),),
        target, order, keys, scores, index.keys, index.scores, occupied_bytes, n, BLOCK=_ELEMENT_BLOCK,
    )
    return target, evicted_mask, evicted_keys, evicted_scores


# Programs of the kernels that walk a batch's new ids, whose count only the device knows: each takes
# every GRID-th id, so a step without new ids costs a launch and one load per program.
_PENDING_PROGRAMS = 4096
# New ids per loop step of the row writer.
_PENDING_ROWS = 8


@triton.jit
def _place_pending_kernel(
    reps_ptr, count_ptr, bucket_ptr, entry_ptr, table_ptr, target_ptr,
    occupied_ptr, scores_ptr, protected_ptr, evictions_ptr,
    CAP: tl.constexpr, BLOCK_C: tl.constexpr, GRID: tl.constexpr,
):
    """Plan each new id's slot (``PendingArrays.target``): its entry's place in the bucket's pending row is its
    rank by id, as ``insert`` ranks new ids. Counts evictions."""
    count = tl.load(count_ptr)
    for i in range(tl.program_id(0), count, GRID):
        position = tl.load(reps_ptr + i)
        base = tl.load(bucket_ptr + position) * CAP
        entry = tl.load(entry_ptr + position)
        target, placed = _plan_slot(base, entry - base, occupied_ptr, scores_ptr, protected_ptr, CAP, BLOCK_C)
        tl.store(target_ptr + entry, target)
        evicts = placed & (tl.load(occupied_ptr + tl.where(placed, target, 0)) != 0)
        tl.atomic_add(evictions_ptr + tl.load(table_ptr + position), 1, mask=evicts)


def place_new(index: SlotArrays, found: Found, evictions: torch.Tensor) -> None:
    """Plan the slot of each of the first ``count`` new ids at ``reps`` into the pending ``target`` (see
    ``torch_ops.place_new``); reads the table only, and adds each table's evictions to ``evictions``."""
    n = found.reps.numel()
    if n == 0:
        return
    cap = index.bucket_capacity
    block_c = triton.next_power_of_2(cap)
    grid = min(n, _PENDING_PROGRAMS)
    _launch(_place_pending_kernel, (grid,),
        found.reps, found.count, found.buckets, found.entry, found.table, index.pending.target, index.occupied.view(torch.uint8), index.scores,
        index.protected.view(torch.uint8), evictions, CAP=cap, BLOCK_C=block_c, GRID=grid,
    )


@triton.jit(do_not_specialize=["n"])
def _outgoing_kernel(
    query_ptr, slot_ptr, entry_ptr, table_ptr, target_ptr, owner_ptr, keys_ptr, occupied_ptr, out_keys_ptr, out_table_ptr, source_ptr, n,
    BLOCK: tl.constexpr,
):
    """Per index: what a cache's insert sends to the tier behind it (``torch_ops.outgoing``). The index that
    carries a new id is the one that won its entry's owner in ``_locate_kernel``."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    table = tl.load(table_ptr + offs, mask=valid, other=-1)
    absent = valid & (table >= 0) & (tl.load(slot_ptr + offs, mask=valid, other=0) < 0)
    entry = tl.load(entry_ptr + offs, mask=absent, other=-1)
    target = tl.load(target_ptr + entry, mask=absent & (entry >= 0), other=-1)
    spilled = absent & (target < 0)
    carrier = absent & (target >= 0)
    carrier = carrier & (tl.load(owner_ptr + entry, mask=carrier, other=0) == (offs + 1).to(tl.int32))
    carrier = carrier & (tl.load(occupied_ptr + target, mask=carrier, other=0) != 0)
    query = tl.load(query_ptr + offs, mask=valid, other=0)
    tl.store(out_keys_ptr + offs, tl.where(carrier, tl.load(keys_ptr + target, mask=carrier, other=0), query), mask=valid)
    tl.store(out_table_ptr + offs, tl.where(spilled | carrier, table, -1), mask=valid)
    tl.store(source_ptr + offs, tl.where(carrier, target, -1), mask=valid)


def outgoing(index: SlotArrays, found: Found, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a cache's insert sends to the tier behind it, one entry per index (see ``torch_ops.outgoing``): one
    kernel over the batch."""
    n = keys.numel()
    out_keys, out_table, source = (torch.empty(n, dtype=torch.int64, device=keys.device) for _ in range(3))
    if n:
        pending = index.pending
        _launch(
            _outgoing_kernel, (triton.cdiv(n, _ELEMENT_BLOCK),), keys, found.slots, found.entry, found.table, pending.target, pending.owner,
            index.keys, index.occupied.view(torch.uint8), out_keys, out_table, source, n, BLOCK=_ELEMENT_BLOCK,
        )
    return out_keys, out_table, source


@triton.jit
def _give_absent(offs, n, slot_ptr, entry_ptr, target_ptr, spill_ptr, base, SPILL: tl.constexpr):
    """The indices ``offs`` with slot -1: the slot their new id got (``SPILL``: else ``base`` plus their slot in the
    tier behind, else -1)."""
    valid = offs < n
    absent = valid & (tl.load(slot_ptr + offs, mask=valid, other=0) < 0)
    entry = tl.load(entry_ptr + offs, mask=absent, other=-1)
    given = tl.load(target_ptr + entry, mask=absent & (entry >= 0), other=-1)
    if SPILL:
        behind = tl.load(spill_ptr + offs, mask=absent, other=-1)
        given = tl.where(given >= 0, given, tl.where(behind >= 0, base + behind, -1))
    tl.store(slot_ptr + offs, given, mask=absent)


@triton.jit(do_not_specialize=["n", "split", "spare", "state_fill", "source_split", "source_spare", "base"])
def _write_pending_kernel(
    reps_ptr, count_ptr, query_ptr, entry_ptr, table_ptr, target_ptr, pending_ptr, owner_ptr, uses_ptr,
    keys_ptr, scores_ptr, occupied_ptr, protected_ptr, device_ptr, host_ptr, row_stride, split, spare,
    seeds_ptr, lower_ptr, span_ptr, state_fill, clock_ptr, slot_ptr, n,
    source_slot_ptr, source_device_ptr, source_host_ptr, source_split, source_spare, source_scores_ptr, source_protected_ptr,
    spill_ptr, base,
    DIM: tl.constexpr, WIDTH: tl.constexpr, BLOCK_W: tl.constexpr, ROWS: tl.constexpr,
    LANES: tl.constexpr, LFU: tl.constexpr, GRID: tl.constexpr, SOURCE: tl.constexpr, CARRY: tl.constexpr, SPILL: tl.constexpr,
):
    """Write each planned new id (key, score, occupied flag, row: drawn with fresh optimizer state, or taken from
    the source tier) and free its pending entry for the next batch; then, per index, release its slot here (and
    its source slot there), overwrite a found id from its source slot (``CARRY``: a write-back) and give each
    absent index its new id's slot (``_give_absent``)."""
    count = tl.load(count_ptr)
    cols = tl.arange(0, BLOCK_W)
    for start in range(tl.program_id(0) * ROWS, count, GRID * ROWS):
        i = start + tl.arange(0, ROWS)
        valid = i < count
        position = tl.load(reps_ptr + i, mask=valid, other=0)
        entry = tl.load(entry_ptr + position, mask=valid, other=0)
        target = tl.load(target_ptr + entry, mask=valid, other=-1)
        placed = valid & (target >= 0)
        query = tl.load(query_ptr + position, mask=valid, other=0)
        if LFU:
            score = tl.load(uses_ptr + entry, mask=valid, other=0)
        else:
            score = tl.full([ROWS], 0, tl.int64) + tl.load(clock_ptr)
        table = tl.load(table_ptr + position, mask=valid, other=0)
        values = tl.where(cols[None, :] < DIM, _drawn_rows(query, table, valid, seeds_ptr, lower_ptr, span_ptr, cols), state_fill)
        if SOURCE:
            origin = tl.load(source_slot_ptr + position, mask=valid, other=-1)
            known = placed & (origin >= 0)
            earlier = tl.load(source_scores_ptr + origin, mask=known, other=0)
            if CARRY:
                score = tl.where(known, earlier, score)
            elif LFU:
                score = score + earlier
            row = _row_pointers(source_device_ptr, source_host_ptr, row_stride, source_split, source_spare, origin)
            taken = tl.load(row[:, None] + cols[None, :], mask=known[:, None] & (cols[None, :] < WIDTH), other=0.0)
            values = tl.where(known[:, None], taken, values)
        tl.store(keys_ptr + target, query, mask=placed)
        tl.store(scores_ptr + target, score, mask=placed)
        tl.store(occupied_ptr + target, tl.full([ROWS], 1, tl.uint8), mask=placed)
        row = _row_pointers(device_ptr, host_ptr, row_stride, split, spare, target)
        tl.store(row[:, None] + cols[None, :], values, mask=placed[:, None] & (cols[None, :] < WIDTH))
        tl.store(pending_ptr + entry, tl.full([ROWS], _HIGHEST, tl.int64), mask=valid)
        tl.store(owner_ptr + entry, tl.zeros([ROWS], dtype=tl.int32), mask=valid)
        tl.store(uses_ptr + entry, tl.zeros([ROWS], dtype=tl.int64), mask=valid)
    for first in range(tl.program_id(0) * LANES, n, GRID * LANES):
        offs = first + tl.arange(0, LANES).to(tl.int64)
        here = offs < n
        found = tl.load(slot_ptr + offs, mask=here, other=-1)
        tl.store(protected_ptr + found, tl.zeros([LANES], dtype=tl.uint8), mask=found >= 0)
        if SOURCE:
            origin = tl.load(source_slot_ptr + offs, mask=here, other=-1)
            tl.store(source_protected_ptr + origin, tl.zeros([LANES], dtype=tl.uint8), mask=origin >= 0)
            if CARRY:  # an id found here is overwritten from there
                both = (found >= 0) & (origin >= 0)
                if tl.max(both.to(tl.int32), axis=0) > 0:
                    row = _row_pointers(source_device_ptr, source_host_ptr, row_stride, source_split, source_spare, origin)
                    taken = tl.load(row[:, None] + cols[None, :], mask=both[:, None] & (cols[None, :] < WIDTH), other=0.0)
                    into = _row_pointers(device_ptr, host_ptr, row_stride, split, spare, found)
                    tl.store(into[:, None] + cols[None, :], taken, mask=both[:, None] & (cols[None, :] < WIDTH))
                    tl.store(scores_ptr + found, tl.load(source_scores_ptr + origin, mask=both, other=0), mask=both)
        _give_absent(offs, n, slot_ptr, entry_ptr, target_ptr, spill_ptr, base, SPILL)


def _source_operands(source: Source | None, stand_in: torch.Tensor, parts: RowParts) -> tuple:
    """A ``Source`` as the write and fresh kernels take it: (slots, device rows, host rows, split, spare, scores,
    protected flags, spill slots, base); without one, stand-ins the kernels never read."""
    if source is None:
        return stand_in, parts.device, parts.host, 0, 0, stand_in, stand_in, stand_in, 0
    rows, index = source.rows, source.index
    spill = stand_in if source.spill is None else source.spill
    return (
        source.slots, rows.device, rows.host, rows.split, rows.spare, index.scores, index.protected.view(torch.uint8), spill, source.base,
    )


def write_new(
    index: SlotArrays, found: Found, keys: torch.Tensor, access: Access, parts: RowParts, draws: DrawTables, state_fill: float,
    source: Source | None,
) -> None:
    """Store the new ids ``place_new`` planned, with rows drawn or taken from ``source``, reset their pending
    entries, release the batch's slots in ``protected``, and give the absent indices their slots (see
    ``torch_ops.write_new``)."""
    n = keys.numel()  # the batch's indices (``reps`` holds ``count`` of them, and may be no longer: torch's find)
    if n == 0:
        return
    pending, width = index.pending, parts.width
    grid = min(triton.cdiv(n, _FIND_BLOCK), _PENDING_PROGRAMS)
    _launch(
        _write_pending_kernel, (grid,), found.reps, found.count, keys, found.entry, found.table, pending.target, pending.keys, pending.owner,
        pending.uses, index.keys, index.scores, index.occupied.view(torch.uint8), index.protected.view(torch.uint8), parts.device, parts.host,
        width, parts.split, parts.spare, draws.seed_words, draws.lower, draws.span, state_fill, access.clock, found.slots, n,
        *_source_operands(source, keys, parts),
        DIM=draws.dim, WIDTH=width, BLOCK_W=triton.next_power_of_2(width), ROWS=_PENDING_ROWS, LANES=_FIND_BLOCK, LFU=access.add_counts,
        GRID=grid, SOURCE=source is not None, CARRY=source is not None and source.carry, SPILL=source is not None and source.spill is not None,
    )


@triton.jit(do_not_specialize=["n", "row_stride", "source_split", "source_spare"])
def _fresh_kernel(
    query_ptr, slot_ptr, table_ptr, seeds_ptr, lower_ptr, span_ptr, dst_ptr, n,
    source_slot_ptr, source_device_ptr, source_host_ptr, row_stride, source_split, source_spare,
    DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK: tl.constexpr, SOURCE: tl.constexpr,
):
    """Each index with slot -1: its row in the source tier where it has one there (``SOURCE``), else its draw, into
    its row of ``dst``."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    absent = valid & (tl.load(slot_ptr + offs, mask=valid, other=0) < 0)
    if tl.max(absent.to(tl.int32), axis=0) > 0:
        cols = tl.arange(0, BLOCK_D)
        query = tl.load(query_ptr + offs, mask=absent, other=0)
        table = tl.load(table_ptr + offs, mask=absent, other=0)
        values = _drawn_rows(query, table, absent, seeds_ptr, lower_ptr, span_ptr, cols)
        if SOURCE:
            origin = tl.load(source_slot_ptr + offs, mask=absent, other=-1)
            known = absent & (origin >= 0)
            row = _row_pointers(source_device_ptr, source_host_ptr, row_stride, source_split, source_spare, origin)
            taken = tl.load(row[:, None] + cols[None, :], mask=known[:, None] & (cols[None, :] < DIM), other=0.0)
            values = tl.where(known[:, None], taken, values)
        tl.store(dst_ptr + offs[:, None] * DIM + cols[None, :], values, mask=absent[:, None] & (cols[None, :] < DIM))


def fresh_rows(keys: torch.Tensor, slots: torch.Tensor, table: torch.Tensor, draws: DrawTables, dst: torch.Tensor, source: Source | None) -> None:
    """For each index with slot -1: its initial values (its row in ``source`` where it has one there, else its
    key's draw) into its row of ``dst`` (``[n, dim]``, contiguous) (see ``torch_ops.fresh_rows``)."""
    n = keys.numel()
    if n == 0:
        return
    dim = dst.shape[1]
    if source is None:
        from_there = (keys, dst, dst, 0, 0, 0)
    else:
        from_there = (source.slots, source.rows.device, source.rows.host, source.rows.width, source.rows.split, source.rows.spare)
    _launch(
        _fresh_kernel, (triton.cdiv(n, _FIND_BLOCK),), keys, slots, table, draws.seed_words, draws.lower, draws.span, dst, n, *from_there,
        DIM=dim, BLOCK_D=max(16, triton.next_power_of_2(dim)), BLOCK=_FIND_BLOCK, SOURCE=source is not None,
    )


@triton.jit(do_not_specialize=["entries", "num_indices"])
def _check_offsets_kernel(offsets_ptr, entries, num_indices, record_ptr, seq_ptr, BLOCK: tl.constexpr):
    """Fold batch ``seq``'s checks into the record: any program that sees a decreasing pair (program 0 also the
    ends) marks the batch failed and, unless an earlier batch's failure is pending, makes it the record's."""
    seq = tl.load(seq_ptr)
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    pairs = offs + 1 < entries
    here = tl.load(offsets_ptr + offs, mask=pairs, other=0)
    ahead = tl.load(offsets_ptr + offs + 1, mask=pairs, other=0)
    decreasing = tl.max((pairs & (ahead < here)).to(tl.int32), axis=0) > 0
    low = tl.load(offsets_ptr)
    high = tl.load(offsets_ptr + entries - 1)
    wrong_ends = (pid == 0) & ((low != 0) | (high != num_indices))
    code = tl.where(decreasing, 2, tl.where(wrong_ends, 1, 0))
    if code > 0:
        tl.atomic_max(record_ptr + 5, seq)
        # Earlier batches' kernels are done: a first failure below seq is theirs and stays.
        if tl.load(record_ptr) >= seq:
            tl.atomic_min(record_ptr, seq)
            tl.atomic_max(record_ptr + 1, code)
            if wrong_ends:
                tl.store(record_ptr + 2, low)
                tl.store(record_ptr + 3, high)
                tl.store(record_ptr + 4, num_indices)


@triton.jit(do_not_specialize=["entries", "num_indices"])
def _safe_offsets_kernel(offsets_ptr, entries, num_indices, record_ptr, seq_ptr, safe_ptr, BLOCK: tl.constexpr):
    """Batch ``seq``'s offsets where it passed, else an even split of its indices into its bags."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < entries
    failed = tl.load(record_ptr + 5) == tl.load(seq_ptr)
    given = tl.load(offsets_ptr + offs, mask=valid, other=0)
    tl.store(safe_ptr + offs, tl.where(failed, offs * num_indices // (entries - 1), given), mask=valid)


def check_offsets(offsets: torch.Tensor, num_indices: int, record: torch.Tensor, seq: torch.Tensor, safe: bool) -> torch.Tensor:
    """Fold batch ``seq``'s offset checks into ``record`` and return the offsets (``safe``: ones every kernel can
    take; see ``torch_ops.check_offsets``): one launch, two with ``safe``, no host read."""
    entries = offsets.numel()
    grid = (triton.cdiv(entries, _ELEMENT_BLOCK),)
    _launch(_check_offsets_kernel, grid, offsets, entries, num_indices, record, seq, BLOCK=_ELEMENT_BLOCK)
    if not safe:
        return offsets
    safe_offsets = torch.empty_like(offsets)
    _launch_after_write("the checks were folded into the record", _safe_offsets_kernel, grid, offsets, entries, num_indices, record, seq, safe_offsets, BLOCK=_ELEMENT_BLOCK)
    return safe_offsets
