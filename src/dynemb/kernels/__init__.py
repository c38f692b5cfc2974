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


def use_triton(tensor: torch.Tensor) -> bool:
    """True when ``tensor``'s step should run the fused Triton kernel."""
    return tensor.is_cuda and os.environ.get(_ENV, "triton") != "torch" and triton_importable()


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


def find_slots(keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, bucket_capacity: int) -> torch.Tensor:
    """Slot of each key in its bucket, -1 where absent (see ``torch_ops.find_slots``)."""
    return _run("find_slots", keys, keys, buckets, table_keys, occupied, bucket_capacity)


def reduce_and_update(
    optimizer: EmbOptimType, rows: torch.Tensor, grouped_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor,
    params: OptimizerParams, step: int,
) -> None:
    """Sum each id's gradient rows and apply the optimizer in place (see ``torch_ops.reduce_and_update``)."""
    _run("reduce_and_update", rows, optimizer, rows, grouped_slots, order, index_grads, params, step)


def pool_rows(emb: torch.Tensor, inverse: torch.Tensor, offsets: torch.Tensor, mode: PoolingMode, out: torch.Tensor) -> None:
    """Pooled SUM/MEAN of bags of ``emb`` rows into ``out`` (see ``torch_ops.pool_rows``)."""
    _run("pool_rows", emb, emb, inverse, offsets, mode, out)


def gather_rows(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``source[index]`` of a row-strided source (see ``torch_ops.gather_rows``)."""
    return _run("gather_rows", source, source, index)


def bucket_of(keys: torch.Tensor, num_buckets: int) -> torch.Tensor:
    """Bucket in ``[0, num_buckets)`` of each key (``dynemb.hashing.bucket_of``, fused on CUDA)."""
    return _run("bucket_of", keys, keys, num_buckets)


def uniform_rows(keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """Initial rows drawn uniform in (lower, upper) per (seed, id, column) (see ``torch_ops.uniform_rows``)."""
    return _run("uniform_rows", keys, keys, dim, seed_words, lower, upper)


def place_keys(
    sorted_buckets: torch.Tensor, rank: torch.Tensor, order: torch.Tensor, keys: torch.Tensor, scores: torch.Tensor,
    table_keys: torch.Tensor, table_scores: torch.Tensor, occupied: torch.Tensor, protected: torch.Tensor, bucket_capacity: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Slot and write new keys, with score-based eviction (see ``torch_ops.place_keys``)."""
    return _run(
        "place_keys", keys, sorted_buckets, rank, order, keys, scores, table_keys, table_scores, occupied, protected, bucket_capacity,
    )


def find_and_touch(
    keys: torch.Tensor, buckets: torch.Tensor, table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor,
    bucket_capacity: int, counts: torch.Tensor, clock: int, add_counts: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> torch.Tensor:
    """Find, refresh the found ids' scores and count hits and misses (see ``torch_ops.find_and_touch``)."""
    return _run(
        "find_and_touch", keys, keys, buckets, table_keys, occupied, table_scores, bucket_capacity, counts, clock, add_counts, hits, misses,
    )


def group_find(
    indices: torch.Tensor, offsets: torch.Tensor, batch_size: int, table_buckets: torch.Tensor, table_base: torch.Tensor,
    table_keys: torch.Tensor, occupied: torch.Tensor, table_scores: torch.Tensor, bucket_capacity: int,
    clock: int, add_counts: bool, touch: bool, hits: torch.Tensor, misses: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot, bucket) of every index of a batch over tables sharing slot arrays (see ``torch_ops.group_find``)."""
    return _run(
        "group_find", indices, indices, offsets, batch_size, table_buckets, table_base, table_keys, occupied, table_scores,
        bucket_capacity, clock, add_counts, touch, hits, misses,
    )
