"""Bad input gets a ValueError that says what is wrong; ranges reach the profiler."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import dynemb.validation as validation
from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from dynemb.counters import StepCounters
from dynemb.optimizers import OptimizerParams
from dynemb.validation import DeferredChecks, check_batch

GOOD = (torch.tensor([4, 5, 6]), torch.tensor([0, 1, 2, 2, 3]))  # a valid batch of two tables
# Bad offsets of three indices: decreasing, wrong ends, both, and ones outside [0, 3] either way.
BAD_OFFSETS = [[0, 2, 1, 3, 3], [0, 1, 2, 2, 2], [1, 1, 2, 3, 3], [1, 0, 2, 3, 3], [0, 5, 9, -4, 3], [-2, 0, 1, 2, 7]]


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


def defer_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the CUDA path of the value checks on the CPU: fold them on the device, read them later."""
    monkeypatch.setattr(validation, "DEFERRED_DEVICE_TYPES", validation.DEFERRED_DEVICE_TYPES | {"cpu"})


def eager_message(indices: torch.Tensor, offsets: torch.Tensor) -> str:
    with pytest.raises(ValueError) as error:
        two_tables()(indices, offsets)
    return str(error.value)


def train(tables: BatchedDynamicEmbeddingTables, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = tables(indices, offsets)
    out.backward(torch.ones_like(out))
    return out.detach()


READS = {
    "check_inputs": lambda tables: tables.check_inputs(),
    "eval forward": lambda tables: tables.eval()(*GOOD),
    "export_table": lambda tables: tables.export_table(0),
    "load_table": lambda tables: tables.load_table(1, [7], [[0.0] * 4]),
    "size": lambda tables: tables.size(0),
    "cache_stats": lambda tables: tables.cache_stats(),
    "host_stats": lambda tables: tables.host_stats(),
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
@pytest.mark.parametrize("offsets", BAD_OFFSETS)
def test_a_deferred_bad_batch_trains_and_raises_its_eager_message_once_at_a_read(
    monkeypatch: pytest.MonkeyPatch, offsets: list[int], read: object
) -> None:
    indices, offsets = torch.tensor([1, 2, 3]), torch.tensor(offsets)
    message = eager_message(indices, offsets)
    defer_on_cpu(monkeypatch)
    tables = two_tables()
    train(tables, indices, offsets)
    tables.prefetch(indices, offsets)
    with pytest.raises(ValueError) as error:
        read(tables)
    assert str(error.value) == message
    read(tables)  # raised once: nothing is pending any more


def test_a_deferred_eval_batch_waits_for_a_read_point_and_an_eval_loop_reads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eval reads what training left pending (once), so an eval loop does not wait for the device every step;
    a bad eval batch is raised at the next read point."""
    defer_on_cpu(monkeypatch)
    tables = two_tables().eval()
    tables(torch.tensor([1, 2, 3]), torch.tensor(BAD_OFFSETS[0]))
    tables(torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2, 3, 3]))  # no training batch came: nothing read
    with pytest.raises(ValueError, match="non-decreasing"):
        tables.check_inputs()
    tables.train()
    tables(torch.tensor([1, 2, 3]), torch.tensor(BAD_OFFSETS[0]))
    tables.eval()
    with pytest.raises(ValueError, match="non-decreasing"):
        tables(torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2, 3, 3]))


def test_the_first_bad_batch_is_the_one_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    indices = torch.tensor([1, 2, 3])
    first, second = torch.tensor(BAD_OFFSETS[1]), torch.tensor(BAD_OFFSETS[0])
    message = eager_message(indices, first)
    defer_on_cpu(monkeypatch)
    tables = two_tables()
    for offsets in (first, second, GOOD[1]):
        train(tables, indices, offsets)
    with pytest.raises(ValueError) as error:
        tables.check_inputs()
    assert str(error.value) == message
    tables.check_inputs()


def test_a_good_batch_after_a_bad_one_trains_as_on_fresh_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    defer_on_cpu(monkeypatch)
    tables, fresh = two_tables(), two_tables()
    train(tables, torch.tensor([1, 2, 3]), torch.tensor(BAD_OFFSETS[4]))
    out = train(tables, *GOOD)
    with pytest.raises(ValueError, match="non-decreasing"):
        tables.check_inputs()
    assert torch.equal(out, train(fresh, *GOOD))
    for table in range(2):
        ids, rows, _ = tables.export_table(table)
        fresh_ids, fresh_rows, _ = fresh.export_table(table)
        stored = torch.isin(ids, fresh_ids)
        assert torch.equal(ids[stored], fresh_ids) and torch.equal(rows[stored], fresh_rows)


@pytest.mark.parametrize("offsets", [*BAD_OFFSETS, GOOD[1].tolist()])
def test_deferred_offsets_are_a_valid_layout(monkeypatch: pytest.MonkeyPatch, offsets: list[int]) -> None:
    defer_on_cpu(monkeypatch)
    cpu = torch.device("cpu")
    layout = check_batch(torch.tensor([1, 2, 3]), torch.tensor(offsets), 2, DeferredChecks(cpu, StepCounters(1, OptimizerParams(), cpu)))
    safe = layout.offsets
    assert safe[0] == 0 and safe[-1] == 3 and bool((safe[1:] >= safe[:-1]).all())
    assert layout.bounds == safe[::2].tolist()
    if offsets == GOOD[1].tolist():
        assert safe.tolist() == offsets


@pytest.mark.parametrize("pooling", list(PoolingMode))
def test_safe_offsets_keep_a_bad_step_of_several_groups_in_bounds(monkeypatch: pytest.MonkeyPatch, pooling: PoolingMode) -> None:
    # Raw, these offsets give negative bag lengths and bounds past the indices; the step would fail.
    defer_on_cpu(monkeypatch)
    options = [DynamicEmbTableOptions(dim=4, max_capacity=64, bucket_capacity=size) for size in (8, 16)]
    tables = BatchedDynamicEmbeddingTables(options, pooling_mode=pooling)
    for offsets in BAD_OFFSETS:
        out = train(tables, torch.tensor([1, 2, 3]), torch.tensor(offsets))
        assert out.shape == ((3, 4) if pooling is PoolingMode.NONE else (2, 8))
    with pytest.raises(ValueError, match="non-decreasing"):
        tables.check_inputs()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_checks_of_a_training_step_never_wait_for_the_device() -> None:
    tables = two_tables(device="cuda")
    checks = DeferredChecks(tables.device, tables.engine.counters)
    batches = [(torch.tensor([1, 2, 3], device=tables.device), torch.tensor(o, device=tables.device)) for o in (GOOD[1].tolist(), *BAD_OFFSETS)]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        layouts = [check_batch(indices, offsets, 2, checks) for indices, offsets in batches]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    with pytest.raises(ValueError, match="non-decreasing"):
        checks.raise_pending()
    for (indices, _), layout in zip(batches, layouts, strict=True):  # the step of each, on its safe offsets
        train(tables, indices, layout.offsets)
    tables.check_inputs()


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
    # The sync-free caching path: the find through both tiers, the cache's insert and, inside it, the write-back.
    expected = {
        "dynamicemb_prefetch", "DynamicEmbeddingFunction.forward", "DynamicEmbeddingFunction.backward",
        "op:segmented_unique", "op:cache_lookup", "op:cache_insert_evict", "op:storage_insert",
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
