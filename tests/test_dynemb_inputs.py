"""Bad input gets a ValueError that says what is wrong; ranges reach the profiler."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode


def two_tables(**kwargs: object) -> BatchedDynamicEmbeddingTables:
    options = DynamicEmbTableOptions(dim=4, max_capacity=128, bucket_capacity=16)
    return BatchedDynamicEmbeddingTables([options, options], **kwargs)


@pytest.mark.parametrize(
    ("indices", "offsets", "message"),
    [
        (torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([0, 1, 2, 3]), "indices must be torch.int64"),
        (torch.tensor([1.0, 2.0]), torch.tensor([0, 1, 2]), "indices must be torch.int64"),
        (torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2, 3]), "num_tables \\* batch_size \\+ 1"),
        (torch.tensor([1, 2, 3]), torch.tensor([0]), "num_tables \\* batch_size \\+ 1"),
        (torch.tensor([1, 2, 3]), torch.tensor([0, 2, 1, 3, 3]), "non-decreasing"),
        (torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2, 2, 2]), "end at len\\(indices\\)=3"),
        (torch.tensor([1, 2, 3]), torch.tensor([1, 1, 2, 3, 3]), "start at 0"),
        (torch.tensor([1, 2, 3]), torch.tensor([0.0, 1.0, 3.0]), "offsets must be"),
        (torch.tensor([[1, 2, 3]]), torch.tensor([0, 1, 3]), "1-D"),
    ],
)
def test_bad_batches_raise(indices: torch.Tensor, offsets: torch.Tensor, message: str) -> None:
    tables = two_tables()
    with pytest.raises(ValueError, match=message):
        tables(indices, offsets)
    with pytest.raises(ValueError, match=message):
        tables.prefetch(indices, offsets)


def test_bad_loads_raise() -> None:
    tables = two_tables(optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD)
    ids = torch.arange(3)
    with pytest.raises(ValueError, match="rows must be \\[n, 4\\]"):
        tables.load_table(0, ids, torch.zeros(3, 5))
    with pytest.raises(ValueError, match="3 ids but 2 rows"):
        tables.load_table(0, ids, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="unique"):
        tables.load_table(0, torch.tensor([1, 1, 2]), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="int64"):
        tables.load_table(0, ids.to(torch.int32), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="unknown optimizer state"):
        tables.load_table(0, ids, torch.zeros(3, 4), {"exp_avg": torch.zeros(3, 4)})
    with pytest.raises(ValueError, match="1 values per id"):
        tables.load_table(0, ids, torch.zeros(3, 4), {"sum": torch.zeros(3, 4)})
    with pytest.raises(ValueError, match="out of range"):
        tables.load_table(2, ids, torch.zeros(3, 4))
    with pytest.raises(ValueError, match="hash to one bucket"):
        tables.load_table(0, torch.arange(200), torch.zeros(200, 4))
    with pytest.raises(ValueError, match="rows must be a tensor or convertible"):
        tables.load_table(0, ids, [[0.0] * 4, "x", None])
    assert tables.size(0) == 0
    # Lists and arrays are taken as tensors.
    tables.load_table(0, [5, 6], [[1.0] * 4, [2.0] * 4], {"sum": [0.5, 0.25]})
    ids, rows, state = tables.export_table(0)
    assert ids.tolist() == [5, 6] and rows[:, 0].tolist() == [1.0, 2.0] and state["sum"].tolist() == [0.5, 0.25]


def test_bad_construction_raises() -> None:
    with pytest.raises(ValueError, match="one dim"):
        BatchedDynamicEmbeddingTables(
            [DynamicEmbTableOptions(dim=4), DynamicEmbTableOptions(dim=8)], pooling_mode=PoolingMode.NONE
        )
    with pytest.raises(ValueError, match="dim must be positive"):
        DynamicEmbTableOptions(dim=0)
    with pytest.raises(ValueError, match="at least one table"):
        BatchedDynamicEmbeddingTables([])
    options = [DynamicEmbTableOptions(dim=4)]
    for name, value in [("learning_rate", -0.1), ("learning_rate", float("nan")), ("eps", 0.0), ("beta1", 1.0), ("beta2", float("inf")),
                        ("weight_decay", -1e-4), ("initial_accumulator_value", -1.0), ("learning_rate", "0.1")]:
        with pytest.raises(ValueError, match=f"{name} must be a finite number"):
            BatchedDynamicEmbeddingTables(options, **{name: value})


def test_mixed_dims_pool_side_by_side() -> None:
    tables = BatchedDynamicEmbeddingTables(
        [DynamicEmbTableOptions(dim=4, max_capacity=64), DynamicEmbTableOptions(dim=8, max_capacity=64)],
        pooling_mode=PoolingMode.SUM,
    )
    out = tables(torch.tensor([1, 2, 3]), torch.tensor([0, 2, 3]))
    assert out.shape == (1, 12)
    out.backward(torch.ones_like(out))
    assert tables.size(0) == 2 and tables.size(1) == 1


def test_stage_and_op_ranges_reach_the_torch_profiler() -> None:
    options = DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=8, caching=True, local_hbm_for_values=16 * 4 * 4)
    tables = BatchedDynamicEmbeddingTables([options], EmbOptimType.EXACT_SGD, PoolingMode.NONE)
    ids, offsets = torch.arange(20), torch.arange(21)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tables.prefetch(ids, offsets)
        out = tables(ids + 100, offsets)
        with torch.autograd.set_multithreading_enabled(False):
            out.backward(torch.ones_like(out))
    names = {event.name for event in prof.events()}
    expected = {
        "dynamicemb_prefetch", "DynamicEmbeddingFunction.forward", "DynamicEmbeddingFunction.backward",
        "op:segmented_unique", "op:cache_lookup", "op:flagged_compact", "op:storage_find", "op:initializer",
        "op:cache_insert_evict", "op:load_from_flat", "op:store_to_flat", "op:storage_insert",
        "op:gather_embedding", "op:reduce_grads", "op:optimizer_update_fused",
    }
    assert expected <= names, expected - names


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_plain_cuda_device_accepts_tensors_on_its_index() -> None:
    # torch.device("cuda") != torch.device("cuda:0"): the tables pin the index.
    tables = two_tables(device="cuda")
    out = tables(torch.tensor([1, 2, 3], device="cuda:0"), torch.tensor([0, 1, 2, 2, 3], device="cuda:0"))
    assert out.device == torch.device("cuda", 0)
