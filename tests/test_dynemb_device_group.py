"""Tables sharing one device storage train exactly as the same tables looked up one by one."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES

import dynemb.device_group as device_group
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


def _options(strategy: DynamicEmbScoreStrategy, **overrides: object) -> list[DynamicEmbTableOptions]:
    # Tables of different sizes (so different bucket counts), one hardly bigger than a bucket:
    # full buckets evict, and a bucket full of the batch's own ids refuses new ones.
    sizes = overrides.pop("sizes", (96, 8, 200))
    uniform = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.UNIFORM, lower=-0.5, upper=0.5)  # bounds for every size
    return [
        DynamicEmbTableOptions(dim=6, max_capacity=size, bucket_capacity=8, score_strategy=strategy, initializer_args=uniform, seed=3, **overrides)
        for size in sizes
    ]


def _batches(tables: int, count: int = 5, bags: int = 12, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    result = []
    for step in range(count):
        lengths = torch.randint(0, 5, (tables * bags,), generator=generator)
        lengths[bags : 2 * bags] = 0 if step == 1 else lengths[bags : 2 * bags]  # a table with no ids in a batch
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        ids = torch.randint(-60, 60, (int(offsets[-1]),), generator=generator) * (2**40 + 1)  # repeats, negative, huge
        result.append((ids, offsets))
    return result


def _pair(monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, pooling: PoolingMode, options: list[DynamicEmbTableOptions], device: str):
    shared = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=device, learning_rate=0.1)
    with monkeypatch.context() as patch:
        patch.setattr(device_group, "_shares_storage", lambda *args: False)
        separate = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=device, learning_rate=0.1)
    assert shared.group is not None and separate.group is None
    return shared, separate


def _assert_same_tables(a: BatchedDynamicEmbeddingTables, b: BatchedDynamicEmbeddingTables, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    for t in range(a.num_tables):
        (ids_a, rows_a, state_a), (ids_b, rows_b, state_b) = a.export_table(t), b.export_table(t)
        assert torch.equal(ids_a, ids_b), t
        torch.testing.assert_close(rows_a, rows_b, atol=atol, rtol=rtol)
        for name in state_a:
            torch.testing.assert_close(state_a[name], state_b[name], atol=atol, rtol=rtol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("optimizer", "pooling", "strategy"),
    [
        (EmbOptimType.EXACT_SGD, PoolingMode.NONE, DynamicEmbScoreStrategy.TIMESTAMP),
        (EmbOptimType.ADAM, PoolingMode.SUM, DynamicEmbScoreStrategy.LFU),
        (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.MEAN, DynamicEmbScoreStrategy.TIMESTAMP),
        (EmbOptimType.EXACT_ADAGRAD, PoolingMode.NONE, DynamicEmbScoreStrategy.LFU),
    ],
)
def test_shared_storage_trains_like_separate_tables(
    monkeypatch: pytest.MonkeyPatch, device: str, optimizer: EmbOptimType, pooling: PoolingMode, strategy: DynamicEmbScoreStrategy,
) -> None:
    eval_draw = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.NORMAL, mean=0.5, std_dev=0.1)
    options = _options(strategy, eval_initializer_args=eval_draw)
    shared, separate = _pair(monkeypatch, optimizer, pooling, options, device)
    for ids, offsets in _batches(len(options)):
        ids, offsets = ids.to(device), offsets.to(device)
        outputs = []
        for tables in (shared, separate):
            out = tables(ids, offsets)
            out.backward(out.detach() * 0.3 + 1.0)
            outputs.append(out.detach())
        torch.testing.assert_close(outputs[0], outputs[1], atol=1e-6, rtol=1e-5)
    _assert_same_tables(shared, separate)
    # Eval: stored rows, and the eval initializer's values for ids never seen; nothing inserted.
    sizes = [shared.size(t) for t in range(len(options))]
    ids = ids.clone()
    ids[::2] += 1  # every other id never seen, the rest trained
    outputs = [tables.eval()(ids, offsets) for tables in (shared, separate)]
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-6, rtol=1e-5)
    assert [shared.size(t) for t in range(len(options))] == sizes
    evictions = shared.cache_stats()["evictions"]
    assert evictions == separate.cache_stats()["evictions"] > 0, "the case must evict"
    for t in range(len(options)):
        assert shared.size(t) == separate.size(t)


def _caching_options(
    strategy: DynamicEmbScoreStrategy, optimizer: EmbOptimType, cache_rows: int, sizes: tuple[int, ...] = (96, 40, 200), **overrides: object,
) -> list[DynamicEmbTableOptions]:
    """CACHING tables (of different sizes by default), each with a device cache of ``cache_rows`` rows."""
    from dynemb.storage import plan_layout

    row_bytes = plan_layout(DynamicEmbTableOptions(dim=6), optimizer).width * 4
    return _options(strategy, sizes=sizes, local_hbm_for_values=cache_rows * row_bytes, caching=True, **overrides)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("optimizer", "pooling", "strategy", "prefetch"),
    [
        (EmbOptimType.EXACT_SGD, PoolingMode.NONE, DynamicEmbScoreStrategy.TIMESTAMP, True),
        (EmbOptimType.ADAM, PoolingMode.SUM, DynamicEmbScoreStrategy.LFU, False),
        (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.MEAN, DynamicEmbScoreStrategy.LFU, True),
        (EmbOptimType.ADAM, PoolingMode.NONE, DynamicEmbScoreStrategy.TIMESTAMP, False),
    ],
)
def test_shared_caches_and_host_storage_train_like_separate_caching_tables(
    monkeypatch: pytest.MonkeyPatch, device: str, optimizer: EmbOptimType, pooling: PoolingMode, strategy: DynamicEmbScoreStrategy,
    prefetch: bool,
) -> None:
    # Caches of two buckets of 8: every batch misses, evicts (written back to host storage) and,
    # with up to ~35 ids of a table in a batch, finds buckets full of its own ids (those stay in host storage).
    eval_draw = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.NORMAL, mean=0.5, std_dev=0.1)
    options = _caching_options(strategy, optimizer, cache_rows=16, eval_initializer_args=eval_draw)
    shared, separate = _pair(monkeypatch, optimizer, pooling, options, device)
    assert shared.group.backing is not None and shared.storage_mode(0) is StorageMode.CACHING
    spills = []
    insert = shared.group._insert

    def noting_spills(*args: object) -> tuple[torch.Tensor, bool]:
        fresh, spilled = insert(*args)
        spills.append(spilled)
        return fresh, spilled

    monkeypatch.setattr(shared.group, "_insert", noting_spills)
    for ids, offsets in _batches(len(options), count=6):
        ids, offsets = ids.to(device), offsets.to(device)
        outputs = []
        for tables in (shared, separate):
            if prefetch:
                tables.prefetch(ids, offsets)
            out = tables(ids, offsets)
            out.backward(out.detach() * 0.3 + 1.0)
            outputs.append(out.detach())
        torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=1e-4)
    # Ids outside the caches are stepped by the fused kernel here, by torch there: another summation order.
    _assert_same_tables(shared, separate, atol=1e-5, rtol=1e-4)
    ids = ids.clone()
    ids[::2] += 1  # every other id never seen; the rest cached or in host storage
    outputs = [tables.eval()(ids, offsets) for tables in (shared, separate)]
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=1e-4)
    evictions = shared.cache_stats()["evictions"]
    assert evictions == separate.cache_stats()["evictions"] > 0, "the case must evict"
    assert any(spills), "the case must leave ids outside the caches"
    for t in range(len(options)):
        assert shared.size(t) == separate.size(t) > 16


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("caching", [False, True])
def test_a_table_loaded_between_forward_and_backward_is_found_again(monkeypatch: pytest.MonkeyPatch, device: str, caching: bool) -> None:
    if caching:
        options = _caching_options(DynamicEmbScoreStrategy.TIMESTAMP, EmbOptimType.ADAM, cache_rows=64, sizes=(4096, 4096))
    else:
        options = _options(DynamicEmbScoreStrategy.TIMESTAMP, sizes=(4096, 4096))
    shared, separate = _pair(monkeypatch, EmbOptimType.ADAM, PoolingMode.NONE, options, device)
    (ids, offsets), (more, _) = _batches(len(options), count=2)
    ids, offsets, more = ids.to(device), offsets.to(device), torch.unique(more).to(device)
    for tables in (shared, separate):
        out = tables(ids, offsets)
        # New ids moved into table 1 after forward: saved slots are stale, backward must look up again.
        tables.load_table(1, more, torch.ones(more.numel(), 6, device=device))
        out.backward(torch.ones_like(out))
    _assert_same_tables(shared, separate)


def test_storage_is_shared_only_by_tables_that_agree() -> None:
    def group_of(*options: DynamicEmbTableOptions):
        return BatchedDynamicEmbeddingTables(list(options), EmbOptimType.ADAM, PoolingMode.SUM).group

    base = DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8)
    assert group_of(base, base) is not None and group_of(base, base).backing is None
    uniform = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.UNIFORM, lower=-0.1, upper=0.1)

    def caching(capacity: int, cache_rows: int) -> DynamicEmbTableOptions:
        row_bytes = 4 * 12  # dim 4 and ADAM's two moments
        return DynamicEmbTableOptions(
            dim=4, max_capacity=capacity, bucket_capacity=8, initializer_args=uniform, local_hbm_for_values=cache_rows * row_bytes, caching=True,
        )

    assert group_of(caching(64, 16), caching(500, 40)).backing is not None  # caches of different sizes, one bucket size
    assert group_of(caching(64, 16), caching(64, 4)) is None  # a cache of 4 rows has buckets of 4
    assert group_of(base, DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, seed=9)) is not None
    assert group_of(DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, initializer_args=uniform),
                    DynamicEmbTableOptions(dim=4, max_capacity=500, bucket_capacity=8, initializer_args=uniform)) is not None
    for other in (
        DynamicEmbTableOptions(dim=8, max_capacity=64, bucket_capacity=8),  # another row width
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=4),  # another bucket size
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, score_strategy=DynamicEmbScoreStrategy.LFU),
        DynamicEmbTableOptions(dim=4, max_capacity=500, bucket_capacity=8),  # default uniform bounds follow capacity
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, local_hbm_for_values=64 * 48 // 2, caching=True),
    ):
        assert group_of(base, other) is None, other


def test_caching_tables_whose_host_memory_kernels_cannot_reach_go_table_by_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_group, "device_view", lambda host, device: None)
    options = _caching_options(DynamicEmbScoreStrategy.TIMESTAMP, EmbOptimType.EXACT_SGD, cache_rows=16)
    with pytest.warns(RuntimeWarning, match="table by table"):
        tables = BatchedDynamicEmbeddingTables(options, EmbOptimType.EXACT_SGD, PoolingMode.NONE)
    assert tables.group is None and tables.storage_mode(0) is StorageMode.CACHING
    ids, offsets = _batches(len(options), count=1)[0]
    tables(ids, offsets).sum().backward()
    assert tables.size(0) > 0
