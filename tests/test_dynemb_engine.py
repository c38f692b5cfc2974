"""The storage engine: tables grouped by layout train exactly as the same tables each in a module of its own."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from devices import DEVICES

import dynemb.row_store as row_store
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
from dynemb.layout import plan_layout

DIM = 6


def _row_bytes(optimizer: EmbOptimType, dim: int = DIM) -> int:
    return plan_layout(DynamicEmbTableOptions(dim=dim), optimizer).width * 4


def _options(strategy: DynamicEmbScoreStrategy, sizes: tuple[int, ...] = (96, 8, 200), **overrides: object) -> list[DynamicEmbTableOptions]:
    # Tables of different sizes (so different bucket counts), one hardly bigger than a bucket:
    # full buckets evict, and a bucket full of the batch's own ids refuses new ones.
    return [DynamicEmbTableOptions(dim=DIM, max_capacity=size, bucket_capacity=8, score_strategy=strategy, seed=3, **overrides) for size in sizes]


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


class Alone:
    """The reference: each table in a module of its own (a group of one), fed its part of every batch."""

    def __init__(self, options: list[DynamicEmbTableOptions], optimizer: EmbOptimType, pooling: PoolingMode, device: str) -> None:
        # Table t of a module draws with seed + (t << 32): a module of one table needs that seed to draw the same rows.
        self.modules = [
            BatchedDynamicEmbeddingTables([replace(o, seed=o.seed + (t << 32))], optimizer, pooling, device=device, learning_rate=0.1)
            for t, o in enumerate(options)
        ]
        self.pooling = pooling

    def __call__(self, ids: torch.Tensor, offsets: torch.Tensor) -> list[torch.Tensor]:
        batch = (offsets.numel() - 1) // len(self.modules)
        outputs = []
        for t, module in enumerate(self.modules):
            window = offsets[t * batch : (t + 1) * batch + 1]
            outputs.append(module(ids[window[0] : window[-1]], window - window[0]))
        return outputs

    def joined(self, outputs: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(outputs, dim=0 if self.pooling is PoolingMode.NONE else 1)

    def backward(self, outputs: list[torch.Tensor], grad: torch.Tensor) -> None:
        dim = 0 if self.pooling is PoolingMode.NONE else 1
        for out, part in zip(outputs, grad.split([o.shape[dim] for o in outputs], dim=dim), strict=True):
            out.backward(part)

    def eval(self) -> Alone:
        for module in self.modules:
            module.eval()
        return self


def _assert_same_tables(tables: BatchedDynamicEmbeddingTables, alone: Alone, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    for t, module in enumerate(alone.modules):
        (ids_a, rows_a, state_a), (ids_b, rows_b, state_b) = tables.export_table(t), module.export_table(0)
        assert torch.equal(ids_a, ids_b), t
        torch.testing.assert_close(rows_a, rows_b, atol=atol, rtol=rtol)
        for name in state_a:
            torch.testing.assert_close(state_a[name], state_b[name], atol=atol, rtol=rtol)
        assert tables.size(t) == module.size(0)
        assert tables.cache_stats(t) == module.cache_stats(0), t


def _train_both(
    tables: BatchedDynamicEmbeddingTables, alone: Alone, batches: list, device: str, prefetch: bool = False, tolerance: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    for ids, offsets in batches:
        ids, offsets = ids.to(device), offsets.to(device)
        if prefetch:
            tables.prefetch(ids, offsets)
            for module, (part, window) in zip(alone.modules, _parts(ids, offsets, len(alone.modules)), strict=True):
                module.prefetch(part, window)
        out = tables(ids, offsets)
        outputs = alone(ids, offsets)
        torch.testing.assert_close(out, alone.joined(outputs), atol=tolerance, rtol=tolerance * 10)
        grad = out.detach() * 0.3 + 1.0
        out.backward(grad)
        alone.backward(outputs, grad)
    return ids, offsets


def _parts(ids: torch.Tensor, offsets: torch.Tensor, tables: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    batch = (offsets.numel() - 1) // tables
    windows = [offsets[t * batch : (t + 1) * batch + 1] for t in range(tables)]
    return [(ids[w[0] : w[-1]], w - w[0]) for w in windows]


def _assert_same_eval(tables: BatchedDynamicEmbeddingTables, alone: Alone, ids: torch.Tensor, offsets: torch.Tensor, tolerance: float = 1e-6) -> None:
    """Eval: stored rows, and the eval initializer's values for ids never seen; nothing inserted."""
    sizes = [tables.size(t) for t in range(tables.num_tables)]
    ids = ids.clone()
    ids[::2] += 1  # every other id never seen, the rest trained
    torch.testing.assert_close(tables.eval()(ids, offsets), alone.joined(alone.eval()(ids, offsets)), atol=tolerance, rtol=tolerance * 10)
    assert [tables.size(t) for t in range(tables.num_tables)] == sizes


UNIFORM = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.UNIFORM, lower=-0.5, upper=0.5)
EVAL_DRAW = DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.NORMAL, mean=0.5, std_dev=0.1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("optimizer", "pooling", "strategy", "hbm_rows"),
    [
        (EmbOptimType.EXACT_SGD, PoolingMode.NONE, DynamicEmbScoreStrategy.TIMESTAMP, None),
        (EmbOptimType.ADAM, PoolingMode.SUM, DynamicEmbScoreStrategy.LFU, None),
        (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.MEAN, DynamicEmbScoreStrategy.TIMESTAMP, 0),
        (EmbOptimType.EXACT_ADAGRAD, PoolingMode.NONE, DynamicEmbScoreStrategy.LFU, 16),
    ],
    ids=["sgd-gpu", "adam-gpu", "rowwise-host", "adagrad-hybrid"],
)
def test_one_group_trains_like_each_table_alone(
    device: str, optimizer: EmbOptimType, pooling: PoolingMode, strategy: DynamicEmbScoreStrategy, hbm_rows: int | None,
) -> None:
    """Tables of different sizes and default initializer bounds (so different per-table parameters) in one group."""
    hbm = None if hbm_rows is None else hbm_rows * _row_bytes(optimizer)
    options = _options(strategy, eval_initializer_args=EVAL_DRAW, local_hbm_for_values=hbm)
    tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=device, learning_rate=0.1)
    assert len(tables.engine.groups) == 1
    alone = Alone(options, optimizer, pooling, device)
    ids, offsets = _train_both(tables, alone, _batches(len(options)), device)
    _assert_same_tables(tables, alone)
    assert tables.cache_stats()["evictions"] > 0, "the case must evict"
    _assert_same_eval(tables, alone, ids, offsets)


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
def test_caches_over_one_storage_train_like_each_caching_table_alone(
    monkeypatch: pytest.MonkeyPatch, device: str, optimizer: EmbOptimType, pooling: PoolingMode, strategy: DynamicEmbScoreStrategy,
    prefetch: bool,
) -> None:
    # Caches of two buckets of 8: every batch misses, evicts (written back to storage) and, with up to
    # ~35 ids of a table in a batch, finds buckets full of its own ids (those stay in storage).
    options = _options(strategy, sizes=(96, 40, 200), eval_initializer_args=EVAL_DRAW, local_hbm_for_values=16 * _row_bytes(optimizer), caching=True)
    tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=device, learning_rate=0.1)
    (group, _), = tables.engine.groups
    assert group.cache is not None and tables.storage_mode(0) is StorageMode.CACHING
    spills = []
    insert = group._insert

    def noting_spills(*args: object) -> tuple[torch.Tensor, bool]:
        fresh, spilled = insert(*args)
        spills.append(spilled)
        return fresh, spilled

    monkeypatch.setattr(group, "_insert", noting_spills)
    alone = Alone(options, optimizer, pooling, device)
    ids, offsets = _train_both(tables, alone, _batches(len(options), count=6), device, prefetch=prefetch, tolerance=1e-5)
    _assert_same_tables(tables, alone, atol=1e-5, rtol=1e-4)
    assert tables.cache_stats()["evictions"] > 0, "the case must evict"
    assert any(spills), "the case must leave ids outside the caches"
    assert all(tables.size(t) > 16 for t in range(len(options)))
    _assert_same_eval(tables, alone, ids, offsets, tolerance=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pooling", [PoolingMode.NONE, PoolingMode.SUM])
def test_tables_in_several_groups_train_like_each_table_alone(device: str, pooling: PoolingMode) -> None:
    """A module whose tables disagree (caching, another score strategy, another bucket size, another dim when
    pooled): each group takes its tables' part of the batch and puts its output back in place."""
    optimizer = EmbOptimType.ADAM
    cached = 16 * _row_bytes(optimizer)
    options = [
        DynamicEmbTableOptions(dim=DIM, max_capacity=96, bucket_capacity=8, seed=1),
        DynamicEmbTableOptions(dim=DIM, max_capacity=120, bucket_capacity=8, local_hbm_for_values=cached, caching=True, seed=2),
        DynamicEmbTableOptions(dim=DIM, max_capacity=200, bucket_capacity=8, seed=3, local_hbm_for_values=0),
        DynamicEmbTableOptions(dim=DIM, max_capacity=64, bucket_capacity=4, seed=4),
        DynamicEmbTableOptions(dim=DIM, max_capacity=96, bucket_capacity=8, score_strategy=DynamicEmbScoreStrategy.LFU, seed=5),
    ]
    if pooling is not PoolingMode.NONE:
        options.append(DynamicEmbTableOptions(dim=3, max_capacity=96, bucket_capacity=8, seed=6))
    tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=device, learning_rate=0.1)
    assert [tables_of for _, tables_of in tables.engine.groups][:4] == [[0, 2], [1], [3], [4]]
    alone = Alone(options, optimizer, pooling, device)
    ids, offsets = _train_both(tables, alone, _batches(len(options), count=4), device)
    _assert_same_tables(tables, alone)
    _assert_same_eval(tables, alone, ids, offsets)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("caching", [False, True])
def test_a_table_loaded_between_forward_and_backward_is_found_again(device: str, caching: bool) -> None:
    optimizer = EmbOptimType.ADAM
    extra = dict(local_hbm_for_values=64 * _row_bytes(optimizer), caching=True) if caching else {}
    options = _options(DynamicEmbScoreStrategy.TIMESTAMP, sizes=(4096, 4096), **extra)
    tables = BatchedDynamicEmbeddingTables(options, optimizer, PoolingMode.NONE, device=device, learning_rate=0.1)
    alone = Alone(options, optimizer, PoolingMode.NONE, device)
    (ids, offsets), (more, _) = _batches(len(options), count=2)
    ids, offsets, more = ids.to(device), offsets.to(device), torch.unique(more).to(device)
    out, outputs = tables(ids, offsets), alone(ids, offsets)
    # New ids moved into table 1 after forward: saved slots are stale, backward must look up again.
    tables.load_table(1, more, torch.ones(more.numel(), DIM, device=device))
    alone.modules[1].load_table(0, more, torch.ones(more.numel(), DIM, device=device))
    out.backward(torch.ones_like(out))
    alone.backward(outputs, torch.ones_like(out))
    _assert_same_tables(tables, alone)


def test_tables_share_a_group_when_they_agree_on_layout() -> None:
    def groups(*options: DynamicEmbTableOptions) -> list[list[int]]:
        return [tables for _, tables in BatchedDynamicEmbeddingTables(list(options), EmbOptimType.ADAM, PoolingMode.SUM).engine.groups]

    row_bytes = _row_bytes(EmbOptimType.ADAM, dim=4)
    base = DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8)

    def caching(capacity: int, cache_rows: int) -> DynamicEmbTableOptions:
        return DynamicEmbTableOptions(dim=4, max_capacity=capacity, bucket_capacity=8, local_hbm_for_values=cache_rows * row_bytes, caching=True)

    agree = [
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, seed=9),
        DynamicEmbTableOptions(dim=4, max_capacity=500, bucket_capacity=8),  # default uniform bounds follow capacity
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, initializer_args=UNIFORM),
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, local_hbm_for_values=0),  # HOST
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, local_hbm_for_values=32 * row_bytes),  # HYBRID
    ]
    for other in agree:
        assert groups(base, other) == [[0, 1]], other
    assert groups(caching(64, 16), caching(500, 40)) == [[0, 1]]  # caches of different sizes, one bucket size
    disagree = [
        DynamicEmbTableOptions(dim=8, max_capacity=64, bucket_capacity=8),  # another row width
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=4),  # another bucket size
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, score_strategy=DynamicEmbScoreStrategy.LFU),
        DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, initializer_args=EVAL_DRAW),  # another mode
        caching(64, 16),
    ]
    for other in disagree:
        assert groups(base, other) == [[0], [1]], other
    assert groups(caching(64, 16), caching(64, 4)) == [[0], [1]]  # a cache of 4 rows has buckets of 4


@pytest.mark.parametrize("device", DEVICES)
def test_a_cache_of_one_row_trains(device: str) -> None:
    optimizer = EmbOptimType.EXACT_SGD
    options = _options(DynamicEmbScoreStrategy.TIMESTAMP, sizes=(64,), local_hbm_for_values=_row_bytes(optimizer), caching=True)
    tables = BatchedDynamicEmbeddingTables(options, optimizer, PoolingMode.NONE, device=device, learning_rate=0.1)
    assert tables.storage_mode(0) is StorageMode.CACHING
    alone = Alone([replace(options[0], local_hbm_for_values=None, caching=False)], optimizer, PoolingMode.NONE, device)
    _train_both(tables, alone, _batches(1, count=4), device)
    assert tables.cache_stats()["evictions"] > 0
    for got, expected in zip(tables.export_table(0)[:2], alone.modules[0].export_table(0)[:2], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "overrides",
    [dict(local_hbm_for_values=0), dict(local_hbm_for_values=24 * 4 * DIM), dict(local_hbm_for_values=16 * 4 * DIM, caching=True)],
    ids=["host", "hybrid", "caching"],
)
def test_host_rows_kernels_cannot_reach_move_through_copies(monkeypatch: pytest.MonkeyPatch, device: str, overrides: dict) -> None:
    """Where host memory cannot be mapped, the same engine stages host rows through copies: the same training
    as with mapped host rows, evictions and spills included."""
    optimizer = EmbOptimType.EXACT_SGD
    options = _options(DynamicEmbScoreStrategy.TIMESTAMP, sizes=(96, 40, 200), **overrides)
    mapped = BatchedDynamicEmbeddingTables(options, optimizer, PoolingMode.NONE, device=device, learning_rate=0.1)
    monkeypatch.setattr(row_store, "device_view", lambda host, device: None)
    with pytest.warns(RuntimeWarning, match="pinned copies"):
        copied = BatchedDynamicEmbeddingTables(options, optimizer, PoolingMode.NONE, device=device, learning_rate=0.1)
    (group, _), = copied.engine.groups
    assert not group.storage.mapped and mapped.engine.groups[0][0].storage.mapped
    for ids, offsets in _batches(len(options), count=6):
        ids, offsets = ids.to(device), offsets.to(device)
        outputs = [tables(ids, offsets) for tables in (copied, mapped)]
        assert torch.equal(outputs[0], outputs[1])
        for out in outputs:
            out.backward(out.detach() * 0.3 + 1.0)
    assert copied.cache_stats() == mapped.cache_stats() and copied.cache_stats()["evictions"] > 0
    for t in range(len(options)):
        for got, expected in zip(copied.export_table(t), mapped.export_table(t), strict=True):
            if isinstance(got, dict):
                assert got.keys() == expected.keys()
            else:
                assert torch.equal(got, expected), t
    copied.eval(), mapped.eval()
    assert torch.equal(copied(ids, offsets), mapped(ids, offsets))
