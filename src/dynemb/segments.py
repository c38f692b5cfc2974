"""Per-batch index arithmetic: unique ids, pooling into bags, gradient reduction.

Gradients of duplicate ids are summed by a sorted segment reduction (one sort in
``segmented_unique``, reused by backward) rather than atomic adds, which pile up
on hot ids on a GPU. Each function is one step a fused kernel can replace.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dynemb.options import PoolingMode


@dataclass(frozen=True)
class UniqueIds:
    """Unique ids of one table's indices, and how to map back."""

    keys: torch.Tensor  # [U] ascending
    counts: torch.Tensor  # [U] occurrences in the batch
    inverse: torch.Tensor  # [N] position in keys of each index
    order: torch.Tensor  # [N] a permutation that sorts the indices (groups duplicates)


def segmented_unique(indices: torch.Tensor) -> UniqueIds:
    sorted_ids, order = torch.sort(indices, stable=True)
    keys, counts = torch.unique_consecutive(sorted_ids, return_counts=True)
    segment = torch.repeat_interleave(torch.arange(keys.numel(), device=indices.device), counts, output_size=indices.numel())
    inverse = torch.empty_like(segment)
    inverse[order] = segment
    return UniqueIds(keys, counts, inverse, order)


def unpool_grad(bag_grads: torch.Tensor, lengths: torch.Tensor, mode: PoolingMode, num_indices: int) -> torch.Tensor:
    """Gradient of each index from its bag's gradient (MEAN divides by the bag length)."""
    if mode is PoolingMode.MEAN:
        bag_grads = bag_grads / lengths.clamp(min=1).unsqueeze(1).to(bag_grads.dtype)
    return torch.repeat_interleave(bag_grads, lengths, dim=0, output_size=num_indices)


def reduce_grads(index_grads: torch.Tensor, unique: UniqueIds) -> torch.Tensor:
    """Sum of the gradients of each unique id ``[U, dim]``, by a sorted segment reduction."""
    return torch.segment_reduce(index_grads[unique.order], "sum", lengths=unique.counts, unsafe=True)
