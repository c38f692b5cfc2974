"""Training matches FBGEMM's TBE on the CPU, step by step, from identical rows."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode

fbgemm_training = pytest.importorskip("fbgemm_gpu.split_table_batched_embeddings_ops_training")
fbgemm_common = pytest.importorskip("fbgemm_gpu.split_table_batched_embeddings_ops_common")
fbgemm_configs = pytest.importorskip("fbgemm_gpu.split_embedding_configs")

ROWS, DIM, TABLES, BATCH, STEPS, LR, EPS = 60, 8, 2, 6, 25, 0.05, 1e-4

TBE_OPTIMIZER = {
    EmbOptimType.EXACT_SGD: fbgemm_configs.EmbOptimType.EXACT_SGD,
    EmbOptimType.EXACT_ROWWISE_ADAGRAD: fbgemm_configs.EmbOptimType.EXACT_ROWWISE_ADAGRAD,
    EmbOptimType.EXACT_ADAGRAD: fbgemm_configs.EmbOptimType.EXACT_ADAGRAD,
}
TBE_POOLING = {
    PoolingMode.NONE: fbgemm_common.PoolingMode.NONE,
    PoolingMode.SUM: fbgemm_common.PoolingMode.SUM,
    PoolingMode.MEAN: fbgemm_common.PoolingMode.MEAN,
}


def make_batch(generator: torch.Generator, pooling: PoolingMode) -> tuple[torch.Tensor, torch.Tensor]:
    """Table-major ids with duplicates; pooled bags of 0..4 ids, NONE one id per bag (as TBE needs)."""
    max_len = 1 if pooling is PoolingMode.NONE else 5
    low = 1 if pooling is PoolingMode.NONE else 0
    lengths = torch.randint(low, max_len + 1, (TABLES * BATCH,), generator=generator)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    # Few distinct ids per batch so duplicates (summed gradients) are common.
    indices = torch.randint(0, ROWS // 4, (int(offsets[-1]),), generator=generator) * 4 % ROWS
    return indices, offsets


@pytest.mark.parametrize("pooling", [PoolingMode.NONE, PoolingMode.SUM, PoolingMode.MEAN])
@pytest.mark.parametrize("optimizer", list(TBE_OPTIMIZER))
@pytest.mark.parametrize("device", DEVICES)
def test_training_matches_tbe(optimizer: EmbOptimType, pooling: PoolingMode, device: str) -> None:
    generator = torch.Generator().manual_seed(7)
    tbe = fbgemm_training.SplitTableBatchedEmbeddingBagsCodegen(
        [(ROWS, DIM, fbgemm_common.EmbeddingLocation.HOST, fbgemm_training.ComputeDevice.CPU)] * TABLES,
        optimizer=TBE_OPTIMIZER[optimizer],
        pooling_mode=TBE_POOLING[pooling],
        learning_rate=LR,
        eps=EPS,
    )
    options = DynamicEmbTableOptions(dim=DIM, max_capacity=256, bucket_capacity=32)
    ours = BatchedDynamicEmbeddingTables([options] * TABLES, optimizer, pooling, device=device, learning_rate=LR, eps=EPS)
    ids = torch.arange(ROWS)
    for t, weights in enumerate(tbe.split_embedding_weights()):
        start = torch.rand(ROWS, DIM, generator=generator) - 0.5
        weights.detach().copy_(start)
        ours.load_table(t, ids, start)

    for _ in range(STEPS):
        indices, offsets = make_batch(generator, pooling)
        expected = tbe(indices, offsets)
        got = ours(indices.to(device), offsets.to(device))
        torch.testing.assert_close(got.detach().cpu(), expected.detach(), atol=1e-5, rtol=0)
        grad = torch.randn(expected.shape, generator=generator)
        expected.backward(grad)
        got.backward(grad.to(device))

    tbe_states = tbe.split_optimizer_states()
    for t, weights in enumerate(tbe.split_embedding_weights()):
        exported_ids, rows, state = ours.export_table(t)
        assert exported_ids.tolist() == ids.tolist()
        torch.testing.assert_close(rows, weights.detach(), atol=1e-5, rtol=0)
        if optimizer is not EmbOptimType.EXACT_SGD:
            torch.testing.assert_close(state["sum"], tbe_states[t][0].reshape(state["sum"].shape), atol=1e-5, rtol=0)
    assert ours.size(0) == ROWS
