"""A training step never waits for the GPU, in every storage mode.

On a GPU, ``torch.cuda.set_sync_debug_mode("error")`` makes every synchronising CUDA call of
torch raise: reading a device value (``.item()``, ``.tolist()``, ``bool(tensor)``),
``nonzero``, a blocking copy to the host. The steps run under it must train exactly
as the torch path (which may synchronise) trains the same tables on the same batches.

On the CPU, the same steps go down the CUDA code path with the kernel launches stubbed out
(``benchmarks/bench_launch_host.py``) under ``dynemb.kernels.launches.counting``, which records
every op that would make the host wait on CUDA: there must be none.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from dynemb import (
    BatchedDynamicEmbeddingTables,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
)
from dynemb.kernels import kernel_path
from dynemb.optimizers import state_width

CUDA = torch.cuda.is_available()
# The torch path (DYNEMB_KERNELS=torch) is the reference the kernels are tested against, and syncs by design.
needs_cuda_kernels = pytest.mark.skipif(not CUDA or kernel_path("cuda") == "torch", reason="needs CUDA and its Triton kernels")


def _batches(count: int, tables: int, batch: int, pooled: bool, device: str = "cuda") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """TBE batches whose ids repeat within and across batches, with new ids in every batch."""
    generator = torch.Generator().manual_seed(2)
    batches = []
    for step in range(count):
        lengths = torch.randint(0, 4, (tables * batch,), generator=generator) if pooled else torch.ones(tables * batch, dtype=torch.int64)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        ids = torch.randint(0, 2000, (int(offsets[-1]),), generator=generator) ** 2 % (3000 + 500 * step)
        batches.append((ids.to(device), offsets.to(device)))
    return batches


def _tables(optimizer: EmbOptimType, pooling: PoolingMode) -> BatchedDynamicEmbeddingTables:
    options = [DynamicEmbTableOptions(dim=16, max_capacity=4096, bucket_capacity=16, seed=t) for t in range(3)]
    return BatchedDynamicEmbeddingTables(options, optimizer, pooling, device="cuda", learning_rate=0.1)


def _train(tables: BatchedDynamicEmbeddingTables, batches: list) -> list[torch.Tensor]:
    outputs = []
    for ids, offsets in batches:
        out = tables(ids, offsets)
        out.backward(out.detach() * 0.1 + 0.5)
        outputs.append(out.detach())
    return outputs


@needs_cuda_kernels
@pytest.mark.parametrize("optimizer", [EmbOptimType.EXACT_SGD, EmbOptimType.ADAM])
@pytest.mark.parametrize("pooling", [PoolingMode.NONE, PoolingMode.SUM])
def test_an_hbm_training_step_never_synchronises(monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, pooling: PoolingMode) -> None:
    batches = _batches(6, tables=3, batch=300, pooled=pooling is not PoolingMode.NONE)
    tables = _tables(optimizer, pooling)
    outputs = _without_sync(_train, tables, batches)
    assert tables.cache_stats()["misses"] > 0, "the steps brought new ids"
    monkeypatch.setenv("DYNEMB_KERNELS", "torch")
    _assert_trains_like(_tables(optimizer, pooling), _train, batches, tables, outputs)


def _without_sync(train: Callable, tables: BatchedDynamicEmbeddingTables, batches: list) -> list[torch.Tensor]:
    """``train`` on the batches, all but the first two (which compile every kernel variant the steps launch, and
    capture graphs: that may synchronise) under ``set_sync_debug_mode("error")``; their outputs."""
    train(tables, batches[:2])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        return train(tables, batches[2:])
    finally:
        torch.cuda.set_sync_debug_mode(0)


def _assert_trains_like(reference: BatchedDynamicEmbeddingTables, train: Callable, batches: list, tables: BatchedDynamicEmbeddingTables, outputs: list) -> None:
    """``tables``, trained by ``_without_sync``, gave the outputs and rows ``reference`` gives trained the same way."""
    train(reference, batches[:2])
    expected = train(reference, batches[2:])
    for ours, theirs in zip(outputs, expected, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    for t in range(3):
        (keys, rows, _), (want_keys, want_rows, _) = tables.export_table(t), reference.export_table(t)
        assert torch.equal(keys, want_keys)
        torch.testing.assert_close(rows, want_rows, rtol=1e-4, atol=1e-5)


@needs_cuda_kernels
def test_an_hbm_eval_loop_synchronises_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eval reads the training batches' pending checks once, then runs as training does: no synchronisation."""
    batches = _batches(4, tables=3, batch=300, pooled=False)
    tables = _tables(EmbOptimType.EXACT_SGD, PoolingMode.NONE)
    _train(tables, batches)
    tables.eval()
    with torch.no_grad():
        tables(*batches[0])  # reads the checks of the training batches
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            outputs = [tables(ids, offsets) for ids, offsets in batches[1:]]
        finally:
            torch.cuda.set_sync_debug_mode(0)
    monkeypatch.setenv("DYNEMB_KERNELS", "torch")
    reference = _tables(EmbOptimType.EXACT_SGD, PoolingMode.NONE)
    _train(reference, batches)
    reference.eval()
    with torch.no_grad():
        for out, (ids, offsets) in zip(outputs, batches[1:], strict=True):
            torch.testing.assert_close(out, reference(ids, offsets), rtol=1e-5, atol=1e-6)


def _storage_tables(optimizer: EmbOptimType, pooling: PoolingMode, storage: str, device: str, **extra: object) -> BatchedDynamicEmbeddingTables:
    """Three tables of ``storage``'s mode: a cache of 160 rows a table (the batches bring some 1,000 ids: misses,
    evictions, write-backs), a tenth of the rows on the device, or none."""
    row_bytes = (16 + state_width(optimizer, 16)) * 4
    hbm = {"gpu": None, "caching": 160 * row_bytes, "hybrid": 410 * row_bytes, "host": 0}[storage]
    options = [
        DynamicEmbTableOptions(dim=16, max_capacity=4096, bucket_capacity=16, caching=storage == "caching", local_hbm_for_values=hbm, seed=t)
        for t in range(3)
    ]
    tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=device, learning_rate=0.1, **extra)
    assert tables.storage_mode(0).value == storage
    return tables


def _train_prefetching(tables: BatchedDynamicEmbeddingTables, batches: list) -> list[torch.Tensor]:
    """Training steps as the benchmark suite runs a cache: each batch prefetched, then its step."""
    outputs = []
    for ids, offsets in batches:
        tables.prefetch(ids, offsets)
        out = tables(ids, offsets)
        out.backward(out.detach() * 0.1 + 0.5)
        outputs.append(out.detach().clone())
    return outputs


@needs_cuda_kernels
@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphs"])
@pytest.mark.parametrize("storage", ["gpu", "caching", "hybrid", "host"])
@pytest.mark.parametrize("optimizer", [EmbOptimType.EXACT_SGD, EmbOptimType.ADAM])
def test_a_training_step_of_every_storage_mode_never_synchronises(
    monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, storage: str, graphs: bool,
) -> None:
    """A cache's misses, evictions and write-backs, host rows read and stepped in place, and steps replayed from
    CUDA graphs: no synchronisation, and the same training as the torch path."""
    batches = _batches(6, tables=3, batch=300, pooled=False)
    tables = _storage_tables(optimizer, PoolingMode.NONE, storage, "cuda", cuda_graphs=graphs)
    outputs = _without_sync(_train_prefetching, tables, batches)
    if storage == "caching":
        assert tables.cache_stats()["evictions"] > 0, "the steps evicted cached ids"
    if graphs:
        assert tables.graphs is not None and tables.graphs._shapes, "the steps replayed graphs"
    monkeypatch.setenv("DYNEMB_KERNELS", "torch")
    _assert_trains_like(_storage_tables(optimizer, PoolingMode.NONE, storage, "cuda"), _train_prefetching, batches, tables, outputs)


def _cuda_path_stubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU tensors down the CUDA code path, every kernel launch a no-op (``bench_launch_host.stub_launches``)."""
    pytest.importorskip("triton")
    import dynemb.kernels as kernels
    import dynemb.validation as validation
    from dynemb.kernels import triton_ops

    def launch(kernel: object, grid: tuple, *args: object, **meta: object) -> None:
        if kernel is triton_ops._safe_offsets_kernel:
            args[5].copy_(args[0])

    monkeypatch.setattr(kernels, "_triton_for", lambda is_cuda: True)
    monkeypatch.setattr(validation, "DEFERRED_DEVICE_TYPES", frozenset({"cuda", "cpu"}))
    monkeypatch.setattr(triton_ops, "_launch", launch)


@pytest.mark.parametrize("pooling", [PoolingMode.NONE, PoolingMode.SUM])
@pytest.mark.parametrize("storage", ["gpu", "caching", "hybrid", "host"])
@pytest.mark.parametrize("optimizer", [EmbOptimType.EXACT_SGD, EmbOptimType.ADAM])
def test_no_step_of_the_cuda_code_path_would_synchronise(
    monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, storage: str, pooling: PoolingMode,
) -> None:
    """The CPU's view of the GPU test above, for every storage mode and pooling: a prefetch, a forward and a
    backward, and an eval forward after training's one read, call no op that waits for the device on CUDA."""
    from dynemb.kernels.launches import counting

    _cuda_path_stubbed(monkeypatch)
    batches = _batches(4, tables=3, batch=40, pooled=pooling is not PoolingMode.NONE, device="cpu")
    tables = _storage_tables(optimizer, pooling, storage, "cpu")
    _train_prefetching(tables, batches[:2])
    with counting() as training:
        _train_prefetching(tables, batches[2:])
    tables.eval()
    with torch.no_grad():
        tables(*batches[0])  # reads the training batches' checks: the eval loop's one synchronisation
        with counting() as evaluating:
            tables(*batches[1])
    assert training.syncs == [] and evaluating.syncs == []
    assert training.triton["_find_kernel"] >= 2 and evaluating.triton["_find_kernel"] == 1


def test_the_counting_sees_every_kind_of_wait_and_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``counting`` records (the CPU check above can fail): each way a value reaches the host, ops that do
    device work and not views or allocations, and a Triton launch by its kernel."""
    pytest.importorskip("triton")
    from dynemb.kernels import triton_ops
    from dynemb.kernels.launches import counting

    monkeypatch.setattr(triton_ops, "_launch", lambda kernel, grid, *args, **meta: None)
    x = torch.arange(8)
    with counting() as seen:
        y = x * 2  # work
        z = y.view(2, 4).t()  # views: none
        torch.empty(3)  # an allocation: none
        int(x[1]), bool(x[2] > 0), x.tolist()
        x[x > 3], torch.nonzero(x), torch.repeat_interleave(x, x)
        torch.repeat_interleave(x, x, output_size=int(x.sum()))
        triton_ops.uniform_rows(torch.arange(3), 4, 7, 0.0, 1.0)
    assert seen.triton == {"_uniform_kernel": 1}
    assert seen.torch["mul"] == 1 and "view" not in seen.torch and "empty" not in seen.torch and z.shape == (4, 2)
    assert seen.syncs.count("_local_scalar_dense") == 3 and {"tolist", "index", "nonzero", "repeat_interleave"} <= set(seen.syncs)
    assert seen.syncs.count("repeat_interleave") == 1, "one with its output size given does not wait"
