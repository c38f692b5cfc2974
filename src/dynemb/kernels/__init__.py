"""Where each hot step runs: fused Triton kernels on CUDA, plain torch elsewhere.

Every fused step has one dispatch point (``use_triton``) and a torch fallback with
the same signature and the same result up to float summation order. Triton is used
for CUDA tensors when it imports; ``DYNEMB_KERNELS=torch`` forces the torch path
everywhere (the "before" of a speed comparison, or a way to rule the kernels out).
The kernels themselves live in ``dynemb.kernels.triton_ops``, imported lazily so a
CPU-only install never needs Triton.
"""

from __future__ import annotations

import functools
import os
import warnings

import torch

from dynemb.kernels.operands import BucketTensors, DrawTables, PendingArrays, RowParts
from dynemb.optimizers import OptimizerParams
from dynemb.options import EmbOptimType, PoolingMode

_ENV = "DYNEMB_KERNELS"


@functools.cache
def triton_importable() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except ImportError:
        return False
    return True


def _triton_for(is_cuda: bool) -> bool:
    return is_cuda and os.environ.get(_ENV, "triton") != "torch" and triton_importable()


def use_triton(tensor: torch.Tensor) -> bool:
    """True when ``tensor``'s step should run the fused Triton kernel."""
    return _triton_for(tensor.is_cuda)


def kernel_path(device: torch.device | str) -> str:
    """Which kernels the hot steps run on ``device`` in this process, as a run's records name it.

    ``triton`` (the fused kernels), ``torch`` (the fallback: not CUDA, Triton missing, or
    ``DYNEMB_KERNELS=torch``), or ``triton+torch`` once some Triton kernel failed to
    compile and its step ran in torch (``_run`` warns when that happens).
    """
    if not _triton_for(torch.device(device).type == "cuda"):
        return "torch"
    return "triton+torch" if _FAILED else "triton"


def _ops(tensor: torch.Tensor):  # noqa: ANN202 - one of two modules with the same functions
    if use_triton(tensor):
        from dynemb.kernels import triton_ops

        return triton_ops
    from dynemb.kernels import torch_ops

    return torch_ops


def _run(step: str, tensor: torch.Tensor, *args: object) -> object:
    """``step`` of the Triton module for ``tensor`` where it applies, else (or if it cannot compile) of the torch one.

    A kernel that fails to compile (say, a Triton version without some feature)
    raises before it launches and before anything is written, so the step can rerun
    in torch; it is reported once and not tried again in this process. A failure
    after a write (``PartialUpdateError``) is raised, never rerun.
    """
    ops = _ops(tensor)
    if ops.__name__.endswith("triton_ops") and step not in _FAILED:
        # The kernels index 1-D inputs densely; tables' own arrays are dense already, so
        # nothing written in place is ever a copy.
        dense = tuple(a.contiguous() if isinstance(a, torch.Tensor) and a.dim() == 1 and not a.is_contiguous() else a for a in args)
        try:
            return getattr(ops, step)(*dense)
        except ops.PartialUpdateError:
            raise
        except Exception as error:  # noqa: BLE001 - any compile failure falls back, loudly
            _FAILED.add(step)
            warnings.warn(f"dynemb: Triton kernel for {step} failed ({type(error).__name__}: {error}); using torch for it", RuntimeWarning, stacklevel=3)
    from dynemb.kernels import torch_ops

    return getattr(torch_ops, step)(*args)


_FAILED: set[str] = set()


def find(
    keys: torch.Tensor, table: torch.Tensor | None, offsets: torch.Tensor | None, batch_size: int, maps: BucketTensors,
    table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor, bucket_capacity: int,
    clock: int, add_counts: bool, touch: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot, bucket) of every key over tables sharing slot arrays (see ``torch_ops.find``)."""
    return _run(
        "find", keys, keys, table, offsets, batch_size, maps, table_keys, occupied, table_scores, bucket_capacity,
        clock, add_counts, touch, hits, misses,
    )


def reduce_and_update(
    optimizer: EmbOptimType, parts: RowParts, grouped_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor,
    params: OptimizerParams, step: int,
) -> None:
    """Sum each id's gradient rows and apply the optimizer in place (see ``torch_ops.reduce_and_update``)."""
    _run("reduce_and_update", parts.device, optimizer, parts, grouped_slots, order, index_grads, params, step)


def gather_rows(parts: RowParts, slots: torch.Tensor, columns: int) -> torch.Tensor:
    """The first ``columns`` of each slot's row (see ``torch_ops.gather_rows``)."""
    return _run("gather_rows", parts.device, parts, slots, columns)


def gather_unique(parts: RowParts, sorted_slots: torch.Tensor, order: torch.Tensor, columns: int) -> torch.Tensor:
    """Each index's row, each distinct row read once (see ``torch_ops.gather_unique``)."""
    return _run("gather_unique", parts.device, parts, sorted_slots, order, columns)


def scatter_rows(parts: RowParts, slots: torch.Tensor, values: torch.Tensor) -> None:
    """Write full rows at each slot's row (see ``torch_ops.scatter_rows``)."""
    _run("scatter_rows", parts.device, parts, slots, values)


def pool_rows(
    emb: torch.Tensor, inverse: torch.Tensor, offsets: torch.Tensor, mode: PoolingMode, out: torch.Tensor, fresh: torch.Tensor | None = None,
) -> None:
    """Pooled SUM/MEAN of bags of ``emb`` rows into ``out`` (see ``torch_ops.pool_rows``)."""
    _run("pool_rows", emb, emb, inverse, offsets, mode, out, fresh)


def uniform_rows(
    keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, lower: float | torch.Tensor, span: float | torch.Tensor,
) -> torch.Tensor:
    """Initial rows drawn uniform in (lower, lower + span) per (seed, id, column) (see ``torch_ops.uniform_rows``)."""
    return _run("uniform_rows", keys, keys, dim, seed_words, lower, span)


def place_keys(
    sorted_buckets: torch.Tensor, rank: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor,
    table_keys: torch.Tensor, table_scores: torch.Tensor, occupied: torch.Tensor, protected: torch.Tensor, bucket_capacity: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slot and write new keys, with score-based eviction (see ``torch_ops.place_keys``)."""
    return _run(
        "place_keys", keys, sorted_buckets, rank, order, keys, scores, table_keys, table_scores, occupied, protected, bucket_capacity,
    )


def find_or_claim(
    keys: torch.Tensor, offsets: torch.Tensor, batch_size: int, maps: BucketTensors, table_keys: torch.Tensor,
    occupied: torch.Tensor, table_scores: torch.Tensor, bucket_capacity: int, clock: int, add_counts: bool, touch: bool,
    hits: torch.Tensor, misses: torch.Tensor, pending: PendingArrays | None, protected: torch.Tensor, rows: RowParts | None, columns: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None]:
    """A TBE batch's find with each index's table, its new ids and read rows (see ``torch_ops.find_or_claim``)."""
    return _run(
        "find_or_claim", keys, keys, offsets, batch_size, maps, table_keys, occupied, table_scores, bucket_capacity, clock,
        add_counts, touch, hits, misses, pending, protected, rows, columns,
    )


def place_new(
    reps: torch.Tensor, count: torch.Tensor, buckets: torch.Tensor, entry: torch.Tensor, table: torch.Tensor, pending: PendingArrays,
    occupied: torch.Tensor, table_scores: torch.Tensor, protected: torch.Tensor, evictions: torch.Tensor, bucket_capacity: int,
) -> None:
    """Plan the new ids' slots (see ``torch_ops.place_new``)."""
    _run("place_new", reps, reps, count, buckets, entry, table, pending, occupied, table_scores, protected, evictions, bucket_capacity)


def write_new(
    reps: torch.Tensor, count: torch.Tensor, keys: torch.Tensor, entry: torch.Tensor, table: torch.Tensor, pending: PendingArrays,
    table_keys: torch.Tensor, table_scores: torch.Tensor, occupied: torch.Tensor, protected: torch.Tensor, parts: RowParts,
    draws: DrawTables, state_fill: float, dim: int, clock: int, lfu: bool, slots: torch.Tensor, dst: torch.Tensor,
) -> None:
    """Store the planned new ids with initial rows and fill in the absent indices (see ``torch_ops.write_new``)."""
    _run(
        "write_new", reps, reps, count, keys, entry, table, pending, table_keys, table_scores, occupied, protected, parts, draws,
        state_fill, dim, clock, lfu, slots, dst,
    )


def fresh_rows(keys: torch.Tensor, slots: torch.Tensor, table: torch.Tensor, draws: DrawTables, dst: torch.Tensor) -> None:
    """Initial values of the absent indices (see ``torch_ops.fresh_rows``)."""
    _run("fresh_rows", keys, keys, slots, table, draws, dst)


def check_offsets(offsets: torch.Tensor, num_indices: int, record: torch.Tensor, seq: int) -> torch.Tensor:
    """Fold a batch's offset checks into a deferred-checks record; offsets safe for every kernel (see
    ``torch_ops.check_offsets``)."""
    return _run("check_offsets", offsets, offsets, num_indices, record, seq)
