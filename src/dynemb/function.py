"""The autograd function: the engine's lookup in forward, its fused optimizer update in backward.

There are no autograd parameters: backward sums the gradients of each unique id
and applies the optimizer to the stored rows directly, as TBE does (one fused
kernel does both, ``dynemb.kernels.reduce_and_update``). The function takes a
zero-size anchor tensor that requires grad so autograd calls backward.
"""

from __future__ import annotations

import torch

from dynemb.engine import Engine
from dynemb.ranges import emit_range
from dynemb.validation import BatchLayout


class DynamicEmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, anchor: torch.Tensor, engine: Engine, indices: torch.Tensor, layout: BatchLayout) -> torch.Tensor:  # noqa: ARG004 - anchor only links the graph
        with emit_range("DynamicEmbeddingFunction.forward"):
            output, plans = engine.lookup(indices, layout, training=True)
        ctx.engine = engine
        ctx.plans = plans
        return output

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[None, None, None, None]:
        with emit_range("DynamicEmbeddingFunction.backward"):
            ctx.engine.apply_gradients(ctx.plans, grad_output.contiguous())
        ctx.plans = None
        return None, None, None, None
