"""Routing arithmetic of the sharded collection, against direct (slow, obvious) computations."""

from __future__ import annotations

import torch

from dynemb.distributed.routing import (
    OwnerPolicy,
    destination_order,
    owner_of,
    regroup_index,
    table_of_each_id,
    unique_per_table,
)


def test_regroup_index_moves_segments_and_back() -> None:
    counts = torch.tensor([[2, 0, 1], [3, 1, 0]])  # segments (a, b), a-major
    data = torch.arange(int(counts.sum()))
    segments = torch.split(data, counts.reshape(-1).tolist())
    expected = torch.cat([segments[a * 3 + b] for b in range(3) for a in range(2)])
    forward = regroup_index(counts, data.numel())
    assert torch.equal(data[forward], expected)
    assert torch.equal(data[forward][regroup_index(counts.t(), data.numel())], data)


def test_unique_per_table_separates_equal_ids_of_different_tables() -> None:
    ids = torch.tensor([5, 3, 5, 5, 3, -1])
    tables = torch.tensor([0, 0, 1, 0, 1, 1])
    unique, unique_tables = unique_per_table(ids, tables, num_tables=2)
    pairs = sorted({(int(t), int(i)) for t, i in zip(tables, ids, strict=True)})
    assert list(zip(unique_tables.tolist(), unique.keys.tolist(), strict=True)) == pairs
    assert torch.equal(unique.keys[unique.inverse], ids)
    assert torch.equal(unique_tables[unique.inverse], tables)
    assert unique.counts.tolist() == [
        sum((int(t), int(i)) == p for t, i in zip(tables, ids, strict=True)) for p in pairs
    ]


def test_owners_cover_every_rank_and_stay_in_range() -> None:
    ids = torch.cat([torch.arange(4000), torch.arange(4000) * 8, -torch.arange(1, 100) << 40])
    for policy in OwnerPolicy:
        owners = owner_of(ids, 8, policy)
        assert int(owners.min()) >= 0 and int(owners.max()) < 8
    hashed = torch.bincount(owner_of(torch.arange(8000) * 8, 8), minlength=8)
    assert int(hashed.min()) > 800, f"hash owners unbalanced on strided ids: {hashed.tolist()}"


def test_destination_order_groups_by_owner_then_table() -> None:
    owners = torch.tensor([1, 0, 1, 0, 1])
    tables = torch.tensor([1, 1, 0, 0, 1])
    order, counts = destination_order(owners, tables, num_tables=2, world_size=2)
    keys = (owners * 2 + tables)[order]
    assert torch.equal(keys, torch.sort(keys).values)
    assert counts.tolist() == [[1, 1], [1, 2]]


def test_table_of_each_id_follows_feature_segments() -> None:
    offsets = torch.tensor([0, 1, 3, 3, 4, 6, 7])  # 3 features x batch 2
    tables = table_of_each_id(torch.tensor([0, 1, 0]), offsets, num_features=3, num_ids=7)
    assert tables.tolist() == [0, 0, 0, 1, 0, 0, 0]
