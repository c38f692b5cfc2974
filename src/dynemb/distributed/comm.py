"""The all-to-all exchanges of row-wise sharding, and their gradients.

Ids and counts travel without gradient. Embedding rows travel through
:class:`RowsAllToAll`, whose backward is the same exchange reversed: each rank
returns the gradients of the rows it received to the rank that sent them, so
the owner's fused optimizer sees every gradient of its ids.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from dynemb.ranges import emit_range, op_range


def exchange_counts(send_counts: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """``[world, k]`` counts for each destination -> ``[world, k]`` counts from each source."""
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts.contiguous(), group=group)
    return recv_counts


def exchange(
    values: torch.Tensor,
    send_splits: list[int],
    recv_splits: list[int],
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    """Send ``values[rows of rank r]`` to rank r; rows arrive grouped by source rank."""
    out = values.new_empty((sum(recv_splits), *values.shape[1:]))
    dist.all_to_all_single(out, values.contiguous(), recv_splits, send_splits, group=group)
    return out


class RowsAllToAll(torch.autograd.Function):
    """Differentiable exchange of embedding rows; backward sends gradients the reverse way."""

    @staticmethod
    def forward(
        ctx,
        rows: torch.Tensor,
        send_splits: list[int],
        recv_splits: list[int],
        group: dist.ProcessGroup | None,
    ) -> torch.Tensor:
        ctx.send_splits, ctx.recv_splits, ctx.group = send_splits, recv_splits, group
        with op_range("all_to_all_embeddings"):
            return exchange(rows, send_splits, recv_splits, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        with emit_range("ShardedDynamicEmbeddingCollection.backward"), op_range("all_to_all_grads"):
            grad_rows = exchange(grad, ctx.recv_splits, ctx.send_splits, ctx.group)
        return grad_rows, None, None, None
