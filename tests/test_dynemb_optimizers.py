"""ADAM and EXACT_ADAGRAD against references written from their update formulas."""

from __future__ import annotations

import math

import pytest
import torch
from devices import DEVICES

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode

ROWS, DIM, BATCH, STEPS = 20, 4, 5, 12
LR, EPS, BETA1, BETA2, DECAY, ACC0 = 0.1, 1e-6, 0.8, 0.95, 0.01, 0.1


def adam_step(w: list[float], m: list[float], v: list[float], g: list[float], step: int) -> None:
    """Adam with bias correction and weight decay inside the step, element by element."""
    for i in range(len(w)):
        m[i] = BETA1 * m[i] + (1 - BETA1) * g[i]
        v[i] = BETA2 * v[i] + (1 - BETA2) * g[i] * g[i]
        m_hat = m[i] / (1 - BETA1**step)
        v_hat = v[i] / (1 - BETA2**step)
        w[i] -= LR * (m_hat / (math.sqrt(v_hat) + EPS) + DECAY * w[i])


def adagrad_step(w: list[float], acc: list[float], g: list[float]) -> None:
    for i in range(len(w)):
        acc[i] += g[i] * g[i]
        w[i] -= LR * g[i] / (math.sqrt(acc[i]) + EPS)


@pytest.mark.parametrize("optimizer", [EmbOptimType.ADAM, EmbOptimType.EXACT_ADAGRAD])
@pytest.mark.parametrize("device", DEVICES)
def test_update_formulas(optimizer: EmbOptimType, device: str) -> None:
    generator = torch.Generator().manual_seed(11)
    options = DynamicEmbTableOptions(dim=DIM, max_capacity=64, bucket_capacity=16)
    tables = BatchedDynamicEmbeddingTables(
        [options], optimizer, PoolingMode.SUM, device=device, learning_rate=LR, eps=EPS,
        beta1=BETA1, beta2=BETA2, weight_decay=DECAY if optimizer is EmbOptimType.ADAM else 0.0,
        initial_accumulator_value=ACC0,
    )
    start = torch.rand(ROWS, DIM, generator=generator)
    tables.load_table(0, torch.arange(ROWS) * 1000 - 7, start)
    weights = {i * 1000 - 7: start[i].tolist() for i in range(ROWS)}
    first = ACC0 if optimizer is EmbOptimType.EXACT_ADAGRAD else 0.0
    state = {key: ([first] * DIM, [0.0] * DIM) for key in weights}

    for step in range(1, STEPS + 1):
        lengths = torch.randint(1, 4, (BATCH,), generator=generator)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        ids = (torch.randint(0, ROWS // 2, (int(offsets[-1]),), generator=generator) * 1000 - 7)
        grad = torch.randn(BATCH, DIM, generator=generator)
        out = tables(ids.to(device), offsets.to(device))
        out.backward(grad.to(device))
        summed: dict[int, list[float]] = {}
        for bag in range(BATCH):
            for key in ids[offsets[bag] : offsets[bag + 1]].tolist():
                acc = summed.setdefault(key, [0.0] * DIM)
                for i in range(DIM):
                    acc[i] += float(grad[bag, i])
        for key, g in summed.items():
            if optimizer is EmbOptimType.ADAM:
                adam_step(weights[key], state[key][0], state[key][1], g, step)
            else:
                adagrad_step(weights[key], state[key][0], g)

    keys, rows, exported_state = tables.export_table(0)
    expected = torch.tensor([weights[key] for key in keys.tolist()])
    torch.testing.assert_close(rows, expected, atol=1e-5, rtol=1e-5)
    if optimizer is EmbOptimType.ADAM:
        m = torch.tensor([state[key][0] for key in keys.tolist()])
        v = torch.tensor([state[key][1] for key in keys.tolist()])
        torch.testing.assert_close(exported_state["exp_avg"], m, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(exported_state["exp_avg_sq"], v, atol=1e-5, rtol=1e-5)
    else:
        acc = torch.tensor([state[key][0] for key in keys.tolist()])
        torch.testing.assert_close(exported_state["sum"], acc, atol=1e-5, rtol=1e-5)
