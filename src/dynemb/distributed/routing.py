"""Index arithmetic of row-wise sharding: which rank owns an id, and the orders ids travel in.

Every function here is local (no communication) and vectorized, so the same code
runs on the CPU under gloo and on the GPU under NCCL. Ids are sent grouped by
(destination rank, table); the owner receives them grouped by (source rank,
table) and looks them up grouped by (table, source rank), TBE's table-major
layout with one bag per source rank.
"""

from __future__ import annotations

import enum

import torch

from dynemb.hashing import GOLDEN_GAMMA, mix64
from dynemb.segments import UniqueIds, segmented_unique


class OwnerPolicy(enum.Enum):
    """How an id picks its owning rank.

    HASH: a mixed hash of the id, balanced for any id distribution (dynamic ids
    have no vocabulary, so there is no block to cut). MODULO: ``id mod world``,
    TorchRec-like balance for dense id ranges, and predictable in tests.
    """

    HASH = "hash"
    MODULO = "modulo"


def owner_of(
    ids: torch.Tensor, world_size: int, policy: OwnerPolicy = OwnerPolicy.HASH
) -> torch.Tensor:
    """The rank in ``[0, world_size)`` that stores each id.

    The hash is salted: the local hash table picks buckets by ``mix64(id)``, and
    reusing that value here would leave each rank only the buckets congruent to
    its rank.
    """
    if policy is OwnerPolicy.MODULO:
        return torch.remainder(ids, world_size)
    return torch.remainder(mix64(ids ^ GOLDEN_GAMMA), world_size)


def exclusive_cumsum(counts: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(counts, 0) - counts


def regroup_index(counts: torch.Tensor, total: int) -> torch.Tensor:
    """Gather index that turns (a, b)-ordered segments into (b, a) order.

    ``counts[a, b]`` is the length of segment (a, b); the data holds the segments
    a-major. ``data[regroup_index(counts, total)]`` holds the same segments
    b-major, each segment's elements in their original order;
    ``regroup_index(counts.T, total)`` is the inverse permutation. ``total`` (the
    sum of ``counts``, known on the host from the split sizes) spares a device sync.
    """
    flat_ab = counts.reshape(-1)
    starts_ab = exclusive_cumsum(flat_ab).view_as(counts)
    counts_ba = counts.t().reshape(-1)
    segment_shift = starts_ab.t().reshape(-1) - exclusive_cumsum(counts_ba)
    shift = torch.repeat_interleave(segment_shift, counts_ba, output_size=total)
    return shift + torch.arange(total, device=counts.device)


def unique_per_table(
    ids: torch.Tensor, tables: torch.Tensor | None, num_tables: int
) -> tuple[UniqueIds, torch.Tensor | None]:
    """Distinct (table, id) pairs, ascending by table then id, and the table of each.

    ``tables`` is None when every id belongs to table 0 (one fused table).
    """
    if tables is None or num_tables == 1:
        return segmented_unique(ids), None
    by_id = torch.sort(ids, stable=True).indices
    order = by_id[torch.sort(tables[by_id], stable=True).indices]
    sorted_ids, sorted_tables = ids[order], tables[order]
    starts = torch.ones_like(sorted_ids, dtype=torch.bool)
    starts[1:] = (sorted_ids[1:] != sorted_ids[:-1]) | (sorted_tables[1:] != sorted_tables[:-1])
    segment = torch.cumsum(starts, 0) - 1
    first = torch.nonzero(starts).squeeze(1)
    counts = torch.diff(first, append=first.new_tensor([ids.numel()]))
    inverse = torch.empty_like(segment)
    inverse[order] = segment
    return UniqueIds(sorted_ids[first], counts, inverse, order), sorted_tables[first]


def destination_order(
    owners: torch.Tensor, tables: torch.Tensor | None, num_tables: int, world_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(permutation grouping ids by (owner, table), ids per (owner, table) as ``[world, tables]``)."""
    key = owners if tables is None else owners * num_tables + tables
    order = torch.sort(key, stable=True).indices
    counts = torch.bincount(key, minlength=world_size * num_tables).view(world_size, num_tables)
    return order, counts


def inverse_permutation(order: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return inverse


def table_of_each_id(
    feature_tables: torch.Tensor, offsets: torch.Tensor, num_features: int, num_ids: int
) -> torch.Tensor:
    """Table of every id of a feature-major TBE batch (``num_features * batch + 1`` offsets)."""
    batch = (offsets.numel() - 1) // num_features
    bounds = offsets[::batch].to(torch.int64)
    return torch.repeat_interleave(feature_tables, torch.diff(bounds), output_size=num_ids)
