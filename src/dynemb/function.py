"""The autograd function: lookup in forward, fused optimizer update in backward.

There are no autograd parameters: backward sums the gradients of each unique id
and applies the optimizer to the stored rows directly, as TBE does (on device-only
rows, one fused kernel does both: ``dynemb.kernels.reduce_and_update``). The function
takes a zero-size anchor tensor that requires grad so autograd calls backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from dynemb import kernels
from dynemb.device_group import GroupPlan
from dynemb.options import PoolingMode
from dynemb.ranges import emit_range, op_range
from dynemb.segments import UniqueIds, segmented_unique_per_table, unpool_grad
from dynemb.storage import UpdatePlan
from dynemb.validation import BatchLayout

if TYPE_CHECKING:
    from dynemb.tables import BatchedDynamicEmbeddingTables


@dataclass(frozen=True)
class TableBatch:
    """What backward needs of one table's part of the batch."""

    unique: UniqueIds
    plan: UpdatePlan | None
    start: int
    stop: int
    lengths: torch.Tensor | None  # bag lengths (pooled modes)


def bag_lengths(layout: BatchLayout, table: int) -> torch.Tensor:
    first = table * layout.batch_size
    window = layout.offsets[first : first + layout.batch_size + 1]
    return window[1:] - window[:-1]


def lookup_batch(module: BatchedDynamicEmbeddingTables, indices: torch.Tensor, layout: BatchLayout, training: bool) -> tuple[torch.Tensor, list[TableBatch] | GroupPlan]:
    """Output in TBE layout and what backward needs: a plan for tables sharing device storage, else one per table.

    In the per-table loop each table writes its part straight into the output
    (rows ``start:stop`` for pooling NONE, its columns for SUM/MEAN), so no
    concatenation copy follows.
    """
    if module.group is not None:
        if training:
            return module.group.lookup(indices, layout, module.pooling_mode)
        return module.group.eval_lookup(indices, layout, module.pooling_mode), []
    pooled = module.pooling_mode is not PoolingMode.NONE
    if pooled:
        width = sum(table.dim for table in module.tables)
        output = torch.empty(layout.batch_size, width, dtype=torch.float32, device=indices.device)
    else:
        output = torch.empty(indices.numel(), module.tables[0].dim, dtype=torch.float32, device=indices.device)
    saved: list[TableBatch] = []
    column = 0
    with op_range("segmented_unique"):
        uniques = segmented_unique_per_table(indices, layout.bounds)
    for t, (table, unique) in enumerate(zip(module.tables, uniques, strict=True)):
        start, stop = layout.bounds[t], layout.bounds[t + 1]
        emb, plan = table.lookup(unique.keys, unique.counts, training)
        lengths = bag_lengths(layout, t) if pooled else None
        with op_range("gather_embedding"):
            if pooled:
                first = t * layout.batch_size
                window = layout.offsets[first : first + layout.batch_size + 1]
                kernels.pool_rows(emb, unique.inverse, window, module.pooling_mode, output[:, column : column + table.dim])
            else:
                torch.index_select(emb, 0, unique.inverse, out=output[start:stop])
        column += table.dim
        saved.append(TableBatch(unique, plan, start, stop, lengths))
    return output, saved


class DynamicEmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, anchor: torch.Tensor, module: BatchedDynamicEmbeddingTables, indices: torch.Tensor, layout: BatchLayout) -> torch.Tensor:  # noqa: ARG004 - anchor only links the graph
        with emit_range("DynamicEmbeddingFunction.forward"):
            output, saved = lookup_batch(module, indices, layout, training=True)
        ctx.module = module
        ctx.saved = saved
        return output

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[None, None, None, None]:
        module: BatchedDynamicEmbeddingTables = ctx.module
        with emit_range("DynamicEmbeddingFunction.backward"):
            grad_output = grad_output.contiguous()
            module.step += 1
            if isinstance(ctx.saved, GroupPlan):
                module.group.apply_gradients(ctx.saved, grad_output, module.pooling_mode, module.step)
                ctx.saved = None
                return None, None, None, None
            column = 0
            for table, batch in zip(module.tables, ctx.saved, strict=True):
                with op_range("reduce_grads"):
                    if batch.lengths is None:
                        index_grads = grad_output[batch.start : batch.stop]
                    else:
                        bag_grads = grad_output[:, column : column + table.dim]
                        index_grads = unpool_grad(bag_grads, batch.lengths, module.pooling_mode, batch.stop - batch.start)
                column += table.dim
                if batch.stop > batch.start and batch.plan is not None:
                    table.apply_gradients(batch.plan, index_grads, batch.unique, module.step)
        ctx.saved = None
        return None, None, None, None
