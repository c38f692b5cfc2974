"""The hash table and the table-level insert/evict rules against a plain-dict model."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynemb import (
    BatchedDynamicEmbeddingTables,
    DynamicEmbScoreStrategy,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
)
from dynemb.hash_table import BucketedHashTable
from dynemb.hashing import bucket_of
from dynemb.initializers import Initializer


class DictTable:
    """Reference: buckets as Python lists of {key: score}, filled one id at a time."""

    def __init__(self, num_buckets: int, bucket_capacity: int, strategy: DynamicEmbScoreStrategy) -> None:
        self.num_buckets = num_buckets
        self.capacity = bucket_capacity
        self.strategy = strategy
        self.slots: list[list[tuple[int, int] | None]] = [[None] * bucket_capacity for _ in range(num_buckets)]
        self.clock = 0
        self.evictions = 0

    def bucket(self, key: int) -> int:
        return int(bucket_of(torch.tensor([key]), self.num_buckets)[0])

    def where(self, key: int) -> tuple[int, int] | None:
        b = self.bucket(key)
        for p, entry in enumerate(self.slots[b]):
            if entry is not None and entry[0] == key:
                return b, p
        return None

    def keys(self) -> set[int]:
        return {entry[0] for bucket in self.slots for entry in bucket if entry is not None}

    def batch(self, ids: list[int]) -> list[int]:
        """One training lookup; returns the ids that got no slot."""
        self.clock += 1
        counts: dict[int, int] = {}
        for key in ids:
            counts[key] = counts.get(key, 0) + 1
        protected: set[tuple[int, int]] = set()
        new = []
        for key in sorted(counts):
            place = self.where(key)
            if place is None:
                new.append(key)
                continue
            b, p = place
            old = self.slots[b][p][1]
            score = self.clock if self.strategy is DynamicEmbScoreStrategy.TIMESTAMP else old + counts[key]
            self.slots[b][p] = (key, score)
            protected.add(place)
        unplaced = []
        for key in new:
            b = self.bucket(key)
            choices = [
                (-1 if entry is None else entry[1], p)
                for p, entry in enumerate(self.slots[b])
                if (b, p) not in protected
            ]
            if not choices:
                unplaced.append(key)
                continue
            _, p = min(choices)
            if self.slots[b][p] is not None:
                self.evictions += 1
            score = self.clock if self.strategy is DynamicEmbScoreStrategy.TIMESTAMP else counts[key]
            self.slots[b][p] = (key, score)
            protected.add((b, p))
        return unplaced


@pytest.mark.parametrize("device", DEVICES)
def test_find_insert_any_int64_key(device: str) -> None:
    table = BucketedHashTable(8, bucket_capacity=4, device=torch.device(device))
    keys = torch.tensor([0, -1, 2**63 - 1, -(2**63), 12345678901234, -7], device=device)
    assert (table.find(keys)[0] == -1).all()
    slots, evicted = table.insert(keys, torch.ones_like(keys))
    assert int(evicted.count()) == 0 and (slots >= 0).all()
    assert torch.equal(table.find(keys)[0], slots)
    assert torch.unique(slots).numel() == keys.numel()
    assert (table.find(torch.tensor([1, 5, -2], device=device))[0] == -1).all()
    stored, stored_slots, _ = table.items()
    assert sorted(stored.tolist()) == sorted(keys.tolist())
    assert table.size() == keys.numel()


@pytest.mark.parametrize("device", DEVICES)
def test_full_bucket_evicts_lowest_score_and_never_protected(device: str) -> None:
    table = BucketedHashTable(1, bucket_capacity=3, device=torch.device(device))
    first = torch.tensor([10, 20, 30], device=device)
    table.insert(first, torch.tensor([5, 1, 3], device=device))
    slots, evicted = table.insert(torch.tensor([40], device=device), torch.tensor([9], device=device))
    evicted_keys, evicted_slots, evicted_scores = evicted.compact()
    assert evicted_keys.tolist() == [20] and evicted_scores.tolist() == [1]
    assert slots.tolist() == evicted_slots.tolist()
    # 30 (score 3) is next lowest, but protected: 10 goes instead.
    protect = table.find(torch.tensor([30], device=device))[0]
    _, evicted = table.insert(torch.tensor([50], device=device), torch.tensor([9], device=device), protect=protect)
    assert evicted.compact()[0].tolist() == [10]
    # More new ids than unprotected slots: the surplus gets -1, nothing it may not evict is touched.
    protect = table.find(torch.tensor([30, 40, 50], device=device))[0]
    slots, evicted = table.insert(torch.tensor([60], device=device), torch.tensor([9], device=device), protect=protect)
    assert slots.tolist() == [-1] and int(evicted.count()) == 0
    assert sorted(table.items()[0].tolist()) == [30, 40, 50]


@pytest.mark.parametrize("strategy", [DynamicEmbScoreStrategy.TIMESTAMP, DynamicEmbScoreStrategy.LFU])
@pytest.mark.parametrize("hbm_rows", [None, 0, 16], ids=["gpu", "host", "hybrid"])
@pytest.mark.parametrize("device", DEVICES)
def test_training_lookups_match_dict_model(strategy: DynamicEmbScoreStrategy, hbm_rows: int | None, device: str) -> None:
    """Stored ids, evictions and every returned row follow the dict model batch after batch, wherever the rows live."""
    dim, lr = 4, 0.5
    budget = None if hbm_rows is None else hbm_rows * dim * 4
    options = DynamicEmbTableOptions(dim=dim, max_capacity=32, bucket_capacity=8, score_strategy=strategy, seed=3, local_hbm_for_values=budget)
    tables = BatchedDynamicEmbeddingTables([options], EmbOptimType.EXACT_SGD, PoolingMode.NONE, device=device, learning_rate=lr)
    model = DictTable(options.num_buckets, options.bucket_capacity, strategy)
    init = Initializer(options.initializer_args, seed=3, max_capacity=options.max_capacity)
    values: dict[int, torch.Tensor] = {}
    generator = torch.Generator().manual_seed(0)
    pool = torch.cat([torch.arange(-40, 40), torch.tensor([2**62, -(2**62)])])
    unplaced_total = 0
    for _ in range(30):
        ids = pool[torch.randint(0, pool.numel(), (24,), generator=generator)]
        unplaced = set(model.batch(ids.tolist()))
        unplaced_total += len(unplaced)
        for key in set(ids.tolist()) - set(values):
            values[key] = init(torch.tensor([key]), dim)[0]
        out = tables(ids.to(device), torch.arange(ids.numel() + 1, device=device))
        expected = torch.stack([values[key] for key in ids.tolist()])
        torch.testing.assert_close(out.detach().cpu(), expected, atol=1e-6, rtol=0)
        out.backward(torch.ones_like(out))
        stored = model.keys()
        for key in set(values) - stored:
            del values[key]  # evicted or never placed: comes back fresh
        for key in set(ids.tolist()) & stored:
            values[key] = values[key] - lr * (ids == key).sum()
        assert not unplaced & stored
        exported_ids, rows, _ = tables.export_table(0)
        assert set(exported_ids.tolist()) == stored
        torch.testing.assert_close(rows, torch.stack([values[key] for key in exported_ids.tolist()]), atol=1e-5, rtol=0)
    assert tables.cache_stats()["evictions"] == model.evictions > 0
    assert unplaced_total > 0  # some batches overfilled a bucket with their own ids
    assert tables.size(0) == len(model.keys())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(
            st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-20, 20), min_size=1, max_size=12, unique=True),
            st.integers(0, 5),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_insert_matches_sequential_model(batches: list[tuple[list[int], int]]) -> None:
    """Batch insert equals filling one id at a time: empty slot first, then lowest score, never a protected slot."""
    num_buckets, capacity = 2, 3
    table = BucketedHashTable(num_buckets, capacity, torch.device("cpu"))
    model: list[list[tuple[int, int] | None]] = [[None] * capacity for _ in range(num_buckets)]
    for step, (ids, protect_count) in enumerate(batches, start=1):
        present = [key for key in ids if table.find(torch.tensor([key]))[0].item() >= 0]
        new = [key for key in ids if key not in present]
        protected_keys = present[:protect_count]
        protect = table.find(torch.tensor(protected_keys, dtype=torch.int64))[0]
        scores = torch.arange(len(new), dtype=torch.int64) + step * 100
        slots, evicted = table.insert(torch.tensor(new, dtype=torch.int64), scores, protect=protect)

        blocked = {(s // capacity, s % capacity) for s in protect.tolist()}
        expected_slots, expected_evicted = [], []
        for key, score in zip(new, scores.tolist(), strict=True):
            b = int(bucket_of(torch.tensor([key]), num_buckets)[0])
            choices = [(-(2**63) if e is None else e[1], p) for p, e in enumerate(model[b]) if (b, p) not in blocked]
            if not choices:
                expected_slots.append(-1)
                continue
            _, p = min(choices)
            if model[b][p] is not None:
                expected_evicted.append(model[b][p][0])
            model[b][p] = (key, score)
            blocked.add((b, p))
            expected_slots.append(b * capacity + p)
        assert slots.tolist() == expected_slots
        assert sorted(evicted.compact()[0].tolist()) == sorted(expected_evicted)
        stored = {e[0]: b * capacity + p for b in range(num_buckets) for p, e in enumerate(model[b]) if e is not None}
        keys, slots_now, _ = table.items()
        assert dict(zip(keys.tolist(), slots_now.tolist(), strict=True)) == stored
        probe = torch.tensor(ids + [7, -(2**63)], dtype=torch.int64)
        assert table.find(probe)[0].tolist() == [stored.get(key, -1) for key in probe.tolist()]
