"""Optimizer state layout and the fused row update, one formula per optimizer.

State lives beside each embedding row (``[dim + state_width]`` per row). The update
reads a batch of rows, applies the optimizer to embedding and state together, and
writes them back: one gather, elementwise math, one scatter, so a fused kernel can
replace ``update_rows`` without touching its callers. Formulas follow FBGEMM's TBE
(and the reference system): gradients of duplicate ids are summed before the step,
ADAM's bias correction uses a per-module step count, weight decay adds
``weight_decay * w`` to ADAM's step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from dynemb.options import EmbOptimType


@dataclass(frozen=True)
class OptimizerParams:
    """Hyper-parameters shared by every table of a module; a value no optimizer step can use is refused here,
    before it silently turns rows into NaN."""

    learning_rate: float = 0.01
    eps: float = 1e-8
    beta1: float = 0.9
    beta2: float = 0.999
    weight_decay: float = 0.0
    initial_accumulator_value: float = 0.0

    def __post_init__(self) -> None:
        rules = {
            "learning_rate": (lambda v: v >= 0, ">= 0"),
            "eps": (lambda v: v > 0, "> 0"),
            "beta1": (lambda v: 0 <= v < 1, "in [0, 1)"),
            "beta2": (lambda v: 0 <= v < 1, "in [0, 1)"),
            "weight_decay": (lambda v: v >= 0, ">= 0"),
            "initial_accumulator_value": (lambda v: v >= 0, ">= 0"),
        }
        for name, (allowed, wanted) in rules.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not allowed(value):
                raise ValueError(f"{name} must be a finite number {wanted}, got {value!r}")


def state_width(optimizer: EmbOptimType, dim: int) -> int:
    """Floats of optimizer state stored per row."""
    return {
        EmbOptimType.EXACT_SGD: 0,
        EmbOptimType.ADAM: 2 * dim,
        EmbOptimType.EXACT_ADAGRAD: dim,
        EmbOptimType.EXACT_ROWWISE_ADAGRAD: 1,
    }[optimizer]


def state_fields(optimizer: EmbOptimType, dim: int) -> dict[str, tuple[int, int]]:
    """Named state columns as (start, stop) within the state part; rowwise state is one column."""
    return {
        EmbOptimType.EXACT_SGD: {},
        EmbOptimType.ADAM: {"exp_avg": (0, dim), "exp_avg_sq": (dim, 2 * dim)},
        EmbOptimType.EXACT_ADAGRAD: {"sum": (0, dim)},
        EmbOptimType.EXACT_ROWWISE_ADAGRAD: {"sum": (0, 1)},
    }[optimizer]


def state_fill(optimizer: EmbOptimType, params: OptimizerParams) -> float:
    """Every state column's value in a fresh row: accumulators start at ``initial_accumulator_value``, moments at 0."""
    return params.initial_accumulator_value if optimizer in (EmbOptimType.EXACT_ADAGRAD, EmbOptimType.EXACT_ROWWISE_ADAGRAD) else 0.0


def initial_state(optimizer: EmbOptimType, count: int, dim: int, params: OptimizerParams, device: torch.device) -> torch.Tensor:
    """State part of ``count`` fresh rows (``state_fill``)."""
    return torch.full((count, state_width(optimizer, dim)), state_fill(optimizer, params), dtype=torch.float32, device=device)


def update_rows(optimizer: EmbOptimType, rows: torch.Tensor, grads: torch.Tensor, params: OptimizerParams, step: int) -> None:
    """Apply one optimizer step in place to ``rows`` ``[n, dim + state]`` given summed ``grads`` ``[n, dim]``."""
    dim = grads.shape[1]
    weight = rows[:, :dim]
    lr = params.learning_rate
    if optimizer is EmbOptimType.EXACT_SGD:
        weight.add_(grads, alpha=-lr)
    elif optimizer is EmbOptimType.ADAM:
        exp_avg, exp_avg_sq = rows[:, dim : 2 * dim], rows[:, 2 * dim : 3 * dim]
        exp_avg.mul_(params.beta1).add_(grads, alpha=1.0 - params.beta1)
        exp_avg_sq.mul_(params.beta2).addcmul_(grads, grads, value=1.0 - params.beta2)
        m_hat = exp_avg / (1.0 - params.beta1**step)
        v_hat = exp_avg_sq / (1.0 - params.beta2**step)
        step_size = m_hat / (v_hat.sqrt() + params.eps)
        if params.weight_decay:
            step_size.add_(weight, alpha=params.weight_decay)
        weight.add_(step_size, alpha=-lr)
    elif optimizer is EmbOptimType.EXACT_ADAGRAD:
        accumulator = rows[:, dim : 2 * dim]
        accumulator.addcmul_(grads, grads)
        weight.addcdiv_(grads, accumulator.sqrt().add_(params.eps), value=-lr)
    elif optimizer is EmbOptimType.EXACT_ROWWISE_ADAGRAD:
        accumulator = rows[:, dim : dim + 1]
        accumulator.add_(grads.square().mean(dim=1, keepdim=True))
        weight.addcmul_(grads, lr / (accumulator.sqrt() + params.eps), value=-1.0)
    else:
        raise ValueError(f"unsupported optimizer {optimizer}")
