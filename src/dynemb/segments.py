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


def segmented_unique_per_table(indices: torch.Tensor, bounds: list[int]) -> list[UniqueIds]:
    """``segmented_unique`` of each table's part ``indices[bounds[t]:bounds[t + 1]]``, for all tables at once.

    One sort by (table, id) and one host transfer (every table's number of unique
    ids) for the whole batch, instead of a sort and a host sync per table.
    """
    tables = len(bounds) - 1
    device = indices.device
    n = indices.numel()
    if n == 0 or tables == 1:
        return [segmented_unique(indices[bounds[t] : bounds[t + 1]]) for t in range(tables)]
    sizes = torch.tensor([bounds[t + 1] - bounds[t] for t in range(tables)], device=device)
    table_of = torch.repeat_interleave(torch.arange(tables, dtype=torch.int32, device=device), sizes, output_size=n)
    by_id = torch.sort(indices, stable=True).indices
    # Indices are table-major, so a stable sort by table of the id order sorts by (table, id).
    order = by_id[torch.sort(table_of[by_id], stable=True).indices]
    sorted_ids = indices[order]
    starts_segment = torch.ones(n, dtype=torch.bool, device=device)
    starts_segment[1:] = sorted_ids[1:] != sorted_ids[:-1]
    inner_bounds = [b for b in bounds[1:-1] if 0 < b < n]
    if inner_bounds:
        starts_segment[torch.tensor(inner_bounds, dtype=torch.int64, device=device)] = True
    segments_before = torch.zeros(n + 1, dtype=torch.int64, device=device)
    torch.cumsum(starts_segment, 0, out=segments_before[1:])
    segment = segments_before[1:] - 1
    # Unique ids before each table's first position (and in all): the one host transfer.
    before = segments_before[torch.tensor(bounds, dtype=torch.int64, device=device)].tolist()
    total = before[-1]
    keys = torch.empty(total, dtype=indices.dtype, device=device)
    keys[segment] = sorted_ids
    # Segment starts, written by first positions only (others go to a spare entry).
    first = torch.empty(total + 1, dtype=torch.int64, device=device)
    first[torch.where(starts_segment, segment, total)] = torch.arange(n, device=device)
    first[total] = n
    counts = first[1:] - first[:-1]
    inverse_all = torch.empty_like(segment)
    inverse_all[order] = segment
    result = []
    for t in range(tables):
        lo, hi, u_lo, u_hi = bounds[t], bounds[t + 1], before[t], before[t + 1]
        result.append(UniqueIds(keys[u_lo:u_hi], counts[u_lo:u_hi], inverse_all[lo:hi] - u_lo, order[lo:hi] - lo))
    return result


def pool(rows: torch.Tensor, lengths: torch.Tensor, mode: PoolingMode) -> torch.Tensor:
    """Combine consecutive rows into bags of ``lengths`` (SUM or MEAN; empty bags give zeros)."""
    pooled = torch.segment_reduce(rows, "sum", lengths=lengths, unsafe=True, initial=0.0)
    if mode is PoolingMode.MEAN:
        pooled = pooled / lengths.clamp(min=1).unsqueeze(1).to(pooled.dtype)
    return pooled


def unpool_grad(bag_grads: torch.Tensor, lengths: torch.Tensor, mode: PoolingMode, num_indices: int) -> torch.Tensor:
    """Gradient of each index from its bag's gradient (MEAN divides by the bag length)."""
    if mode is PoolingMode.MEAN:
        bag_grads = bag_grads / lengths.clamp(min=1).unsqueeze(1).to(bag_grads.dtype)
    return torch.repeat_interleave(bag_grads, lengths, dim=0, output_size=num_indices)


def reduce_grads(index_grads: torch.Tensor, unique: UniqueIds) -> torch.Tensor:
    """Sum of the gradients of each unique id ``[U, dim]``, by a sorted segment reduction."""
    return torch.segment_reduce(index_grads[unique.order], "sum", lengths=unique.counts, unsafe=True)
