"""Storage modes: derivation, and CACHING / HYBRID / HOST training identical to all-in-GPU."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES

from dynemb import (
    BatchedDynamicEmbeddingTables,
    DynamicEmbInitializerArgs,
    DynamicEmbInitializerMode,
    DynamicEmbScoreStrategy,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
    StorageMode,
)
from dynemb.optimizers import state_width

DIM, CAPACITY = 4, 1024
ROW_BYTES_ADAM = DIM * 3 * 4
# All-on-device rows train through the fused kernel, other modes through torch: on CUDA the two
# sum gradients in different orders, so values agree to float rounding (about 1e-6 here), not bitwise.
CLOSE = dict(atol=1e-5, rtol=1e-5)


def options(**overrides: object) -> DynamicEmbTableOptions:
    base = dict(dim=DIM, max_capacity=CAPACITY, bucket_capacity=8, seed=5)
    base.update(overrides)
    return DynamicEmbTableOptions(**base)


def make(
    device: str, pooling: PoolingMode = PoolingMode.SUM, tables: int = 2, optimizer: EmbOptimType = EmbOptimType.ADAM, **overrides: object,
) -> BatchedDynamicEmbeddingTables:
    return BatchedDynamicEmbeddingTables([options(**overrides)] * tables, optimizer, pooling, device=device, learning_rate=0.05)


def batches(count: int, id_range: int, bags: int = 16, tables: int = 2, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    result = []
    for _ in range(count):
        lengths = torch.randint(0, 4, (tables * bags,), generator=generator)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        ids = torch.randint(-id_range, id_range, (int(offsets[-1]),), generator=generator) * 7919
        result.append((ids, offsets))
    return result


def assert_same_tables(a: BatchedDynamicEmbeddingTables, b: BatchedDynamicEmbeddingTables) -> None:
    for t in range(a.num_tables):
        ids_a, rows_a, state_a = a.export_table(t)
        ids_b, rows_b, state_b = b.export_table(t)
        assert torch.equal(ids_a, ids_b)
        torch.testing.assert_close(rows_a, rows_b, **CLOSE)
        for name in state_a:
            torch.testing.assert_close(state_a[name], state_b[name], **CLOSE)


def test_storage_mode_follows_budget() -> None:
    total = options().capacity * ROW_BYTES_ADAM
    cases = [
        (dict(local_hbm_for_values=None), StorageMode.GPU),
        (dict(local_hbm_for_values=total), StorageMode.GPU),
        (dict(local_hbm_for_values=total, caching=True), StorageMode.GPU),
        (dict(local_hbm_for_values=total // 2), StorageMode.HYBRID),
        (dict(local_hbm_for_values=total // 2, caching=True), StorageMode.CACHING),
        (dict(local_hbm_for_values=0), StorageMode.HOST),
        (dict(local_hbm_for_values=ROW_BYTES_ADAM - 1, caching=True), StorageMode.HOST),
        (dict(local_hbm_for_values=ROW_BYTES_ADAM, caching=True), StorageMode.CACHING),  # a cache of one row
        (dict(local_hbm_for_values=8 * ROW_BYTES_ADAM - 1), StorageMode.HOST),  # HYBRID keeps whole buckets of 8 rows
        (dict(local_hbm_for_values=8 * ROW_BYTES_ADAM), StorageMode.HYBRID),
    ]
    for overrides, mode in cases:
        tables = make("cpu", **overrides)
        assert tables.storage_mode(0) is mode, overrides
        assert tables.capacity(0) == CAPACITY


@pytest.mark.parametrize(
    ("overrides", "prefetch"),
    [
        (dict(caching=True, hbm_rows=16), "none"),
        (dict(caching=True, hbm_rows=16), "before_forward"),
        (dict(caching=True, hbm_rows=16), "between_forward_and_backward"),
        (dict(caching=True, hbm_rows=16, score_strategy=DynamicEmbScoreStrategy.LFU), "before_forward"),
        (dict(hbm_rows=CAPACITY // 3), "none"),
        (dict(hbm_rows=0), "none"),
    ],
    ids=["caching", "caching-prefetch", "caching-prefetch-mid-step", "caching-lfu", "hybrid", "host"],
)
@pytest.mark.parametrize("optimizer", [EmbOptimType.ADAM, EmbOptimType.EXACT_SGD, EmbOptimType.EXACT_ROWWISE_ADAGRAD])
@pytest.mark.parametrize("device", DEVICES)
def test_mode_trains_like_all_in_gpu(overrides: dict, prefetch: str, optimizer: EmbOptimType, device: str) -> None:
    """Same ids, same gradients: every output and the final rows and state match, with evictions happening."""
    overrides = dict(overrides)
    row_bytes = (DIM + state_width(optimizer, DIM)) * 4
    overrides["local_hbm_for_values"] = overrides.pop("hbm_rows") * row_bytes
    reference = make(device, optimizer=optimizer)
    tested = make(device, optimizer=optimizer, **overrides)
    assert tested.storage_mode(0) is not StorageMode.GPU
    data = batches(14, id_range=40)
    generator = torch.Generator().manual_seed(1)
    for step, (ids, offsets) in enumerate(data):
        ids, offsets = ids.to(device), offsets.to(device)
        following = data[(step + 1) % len(data)]
        if prefetch == "before_forward":
            tested.prefetch(ids, offsets)
        expected = reference(ids, offsets)
        got = tested(ids, offsets)
        torch.testing.assert_close(got, expected, **CLOSE)
        if prefetch == "between_forward_and_backward":
            tested.prefetch(following[0].to(device), following[1].to(device))
        grad = torch.randn(expected.shape, generator=generator).to(device)
        expected.backward(grad)
        got.backward(grad)
    assert_same_tables(reference, tested)
    assert tested.size(0) == reference.size(0)
    if tested.storage_mode(0) is StorageMode.CACHING:
        stats = tested.cache_stats()
        assert stats["evictions"] > 0 and stats["hits"] > 0 and stats["misses"] > 0


MODES = {
    # A cache of one bucket of 8 rows a table over storage that never fills: a batch brings more ids than it
    # holds (misses, evictions written back, ids that stay in storage); the same with NORMAL initial values,
    # which kernels cannot draw (the path that counts a batch's misses on the host).
    "caching": dict(caching=True, hbm_rows=8),
    "caching-normal": dict(caching=True, hbm_rows=8, initializer_args=DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.NORMAL, std_dev=0.05)),
    # Tables of 64 rows, as full as the all-in-GPU ones (both evict the same ids): a third of them, or none, on the device.
    "hybrid": dict(max_capacity=64, hbm_rows=24),
    "host": dict(max_capacity=64, hbm_rows=0),
}


@pytest.mark.parametrize("pooling", [PoolingMode.NONE, PoolingMode.MEAN])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("optimizer", [EmbOptimType.ADAM, EmbOptimType.EXACT_SGD, EmbOptimType.EXACT_ROWWISE_ADAGRAD])
@pytest.mark.parametrize("device", DEVICES)
def test_every_mode_trains_like_all_in_gpu_with_evictions(device: str, optimizer: EmbOptimType, mode: str, pooling: PoolingMode) -> None:
    """Several steps of each optimizer, pooling NONE and MEAN: every mode's outputs, rows and optimizer state are
    the all-in-GPU tables', and every mode evicted (a cache its cached ids, full tables their lowest scores)."""
    overrides = dict(MODES[mode])
    hbm_rows = overrides.pop("hbm_rows")
    overrides["local_hbm_for_values"] = hbm_rows * (DIM + state_width(optimizer, DIM)) * 4
    shared = {k: v for k, v in overrides.items() if k in ("max_capacity", "initializer_args")}
    reference = make(device, pooling=pooling, optimizer=optimizer, **shared)
    tested = make(device, pooling=pooling, optimizer=optimizer, **overrides)
    assert tested.storage_mode(0).value == mode.split("-")[0]
    generator = torch.Generator().manual_seed(3)
    for step in range(8):
        ids = torch.randint(-30, 30, (2 * 24,), generator=generator) * 7919 + step % 3  # 24 per table: more than a cache holds
        offsets = torch.arange(49) if pooling is PoolingMode.NONE else torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.randint(0, 4, (32,), generator=generator), 0)]).clamp(max=48)
        offsets[-1] = 48
        ids, offsets = ids.to(device), offsets.to(device)
        expected, got = reference(ids, offsets), tested(ids, offsets)
        torch.testing.assert_close(got, expected, **CLOSE)
        grad = torch.randn(expected.shape, generator=generator).to(device)
        expected.backward(grad)
        got.backward(grad)
    assert_same_tables(reference, tested)
    assert tested.size(0) == reference.size(0) and tested.size(1) == reference.size(1)
    assert tested.cache_stats()["evictions"] > 0
    if tested.storage_mode(0) is not StorageMode.CACHING:
        assert reference.cache_stats()["evictions"] == tested.cache_stats()["evictions"]


@pytest.mark.parametrize("device", DEVICES)
def test_cache_bucket_overflow_keeps_updates(device: str) -> None:
    """A batch with more ids than the cache holds: the surplus trains in host storage."""
    reference = make(device, pooling=PoolingMode.NONE, tables=1)
    tested = make(device, pooling=PoolingMode.NONE, tables=1, caching=True, local_hbm_for_values=8 * ROW_BYTES_ADAM)
    assert tested.storage_mode(0) is StorageMode.CACHING
    ids = torch.arange(30, device=device) * 31
    offsets = torch.arange(31, device=device)
    for _ in range(3):
        expected, got = reference(ids, offsets), tested(ids, offsets)
        torch.testing.assert_close(got, expected, **CLOSE)
        expected.backward(torch.ones_like(expected))
        got.backward(torch.ones_like(got))
    assert_same_tables(reference, tested)


@pytest.mark.parametrize("device", DEVICES)
def test_eval_reads_without_inserting_or_updating(device: str) -> None:
    eval_value = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.CONSTANT, value=0.25)
    tables = make(device, pooling=PoolingMode.NONE, tables=1, eval_initializer_args=eval_value)
    known = torch.tensor([3, 5], device=device)
    trained = tables(known, torch.arange(3, device=device))
    trained.backward(torch.ones_like(trained))
    _, rows_before, _ = tables.export_table(0)
    tables.eval()
    out = tables(torch.tensor([5, 99, 3], device=device), torch.arange(4, device=device))
    assert not out.requires_grad
    torch.testing.assert_close(out[0].cpu(), rows_before[1])
    torch.testing.assert_close(out[2].cpu(), rows_before[0])
    assert torch.equal(out[1].cpu(), torch.full((DIM,), 0.25))
    assert tables.size(0) == 2
    tables.train()
    assert torch.equal(tables.export_table(0)[1], rows_before)


@pytest.mark.parametrize("mode", [DynamicEmbInitializerMode.UNIFORM, DynamicEmbInitializerMode.NORMAL, DynamicEmbInitializerMode.TRUNCATED_NORMAL])
def test_initializers_have_their_distribution(mode: DynamicEmbInitializerMode) -> None:
    args = DynamicEmbInitializerArgs(mode=mode, mean=0.5, std_dev=2.0, lower=-1.0, upper=3.0)
    tables = BatchedDynamicEmbeddingTables([DynamicEmbTableOptions(dim=64, max_capacity=8192, initializer_args=args)], pooling_mode=PoolingMode.NONE)
    ids = torch.arange(2000) * 1_000_003
    values = tables(ids, torch.arange(ids.numel() + 1)).detach()
    if mode is DynamicEmbInitializerMode.NORMAL:
        assert abs(values.mean() - 0.5) < 0.05 and abs(values.std() - 2.0) < 0.05
    else:
        assert values.min() >= -1.0 and values.max() <= 3.0
        assert values.min() < -0.95 and values.max() > 2.95
    if mode is DynamicEmbInitializerMode.UNIFORM:
        assert abs(values.mean() - 1.0) < 0.02


@pytest.mark.parametrize("device", DEVICES)
def test_export_load_round_trip_with_state(device: str) -> None:
    source = make(device, caching=True, local_hbm_for_values=16 * ROW_BYTES_ADAM)
    for ids, offsets in batches(5, id_range=30):
        out = source(ids.to(device), offsets.to(device))
        out.backward(torch.ones_like(out))
    target = make(device)
    for t in range(2):
        ids, rows, state = source.export_table(t)
        assert ids.numel() == source.size(t) > 0
        target.load_table(t, ids, rows, state)
    assert_same_tables(source, target)
    # Loading over cached ids refreshes the cache copy, not only host storage.
    ids, rows, _ = source.export_table(0)
    source.load_table(0, ids, rows + 1.0)
    assert torch.equal(source.export_table(0)[1], rows + 1.0)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(caching=True, local_hbm_for_values=16 * ROW_BYTES_ADAM),
        dict(local_hbm_for_values=CAPACITY * ROW_BYTES_ADAM // 3),
        dict(local_hbm_for_values=0),
    ],
    ids=["caching", "hybrid", "host"],
)
@pytest.mark.parametrize("device", DEVICES)
def test_eval_reads_every_tier(overrides: dict, device: str) -> None:
    """Eval finds ids wherever they live (cache or host), and leaves the tables as they were."""
    tables = make(device, pooling=PoolingMode.NONE, tables=1, **overrides)
    for ids, offsets in batches(6, id_range=40, tables=1):
        out = tables(ids.to(device), offsets.to(device))
        out.backward(torch.ones_like(out))
    ids, rows, _ = tables.export_table(0)
    size = tables.size(0)
    tables.eval()
    query = torch.cat([ids, torch.tensor([123456789])]).to(device)
    out = tables(query, torch.arange(query.numel() + 1, device=device))
    torch.testing.assert_close(out[:-1].cpu(), rows, atol=0, rtol=0)
    assert torch.equal(out[-1].cpu(), torch.zeros(DIM))
    assert tables.size(0) == size
    assert torch.equal(tables.export_table(0)[1], rows)
