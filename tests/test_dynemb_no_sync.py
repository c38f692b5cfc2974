"""A training step of device-resident tables never waits for the host (CUDA only).

``torch.cuda.set_sync_debug_mode("error")`` makes every synchronising CUDA call of
torch raise: reading a device value (``.item()``, ``.tolist()``, ``bool(tensor)``),
``nonzero``, a blocking copy to the host. The steps run under it must train exactly
as the torch path (which may synchronise) trains the same tables on the same batches.
"""

from __future__ import annotations

import pytest
import torch

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode

CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not CUDA, reason="needs CUDA")


def _batches(count: int, tables: int, batch: int, pooled: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """TBE batches whose ids repeat within and across batches, with new ids in every batch."""
    generator = torch.Generator().manual_seed(2)
    batches = []
    for step in range(count):
        lengths = torch.randint(0, 4, (tables * batch,), generator=generator) if pooled else torch.ones(tables * batch, dtype=torch.int64)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        ids = torch.randint(0, 2000, (int(offsets[-1]),), generator=generator) ** 2 % (3000 + 500 * step)
        batches.append((ids.cuda(), offsets.cuda()))
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


@pytest.mark.parametrize("optimizer", [EmbOptimType.EXACT_SGD, EmbOptimType.ADAM])
@pytest.mark.parametrize("pooling", [PoolingMode.NONE, PoolingMode.SUM])
def test_an_hbm_training_step_never_synchronises(monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, pooling: PoolingMode) -> None:
    batches = _batches(6, tables=3, batch=300, pooled=pooling is not PoolingMode.NONE)
    tables = _tables(optimizer, pooling)
    _train(tables, batches[:2])  # compiles every kernel variant the steps launch (that may synchronise)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outputs = _train(tables, batches[2:])
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert tables.cache_stats()["misses"] > 0, "the steps brought new ids"
    monkeypatch.setenv("DYNEMB_KERNELS", "torch")
    reference = _tables(optimizer, pooling)
    _train(reference, batches[:2])
    expected = _train(reference, batches[2:])
    for ours, theirs in zip(outputs, expected, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    for t in range(3):
        (keys, rows, _), (want_keys, want_rows, _) = tables.export_table(t), reference.export_table(t)
        assert torch.equal(keys, want_keys)
        torch.testing.assert_close(rows, want_rows, rtol=1e-4, atol=1e-5)


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
