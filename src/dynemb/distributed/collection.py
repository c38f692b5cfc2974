"""``ShardedDynamicEmbeddingCollection``: dynamic tables sharded row-wise over the ranks of a group.

Each rank holds one shard of every table (a local ``BatchedDynamicEmbeddingTables``
with ``1/world`` of the capacity) and owns the ids that :func:`owner_of` assigns
it. A forward on a rank's local batch:

1. optionally deduplicates the ids per table (``use_index_dedup``), so each
   distinct id crosses the network once;
2. sends every id to its owner (all-to-all of counts, then of ids);
3. looks the received ids up in the local shard, one bag per source rank;
4. returns the rows by the reverse all-to-all and puts them back in input order.

Backward retraces those steps through autograd: gradients of duplicate ids are
summed (sorted segment reduction), sent to the owners, and the owner's local
tables apply the fused optimizer. Every rank must call forward and backward in
step, as with any collective.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import torch
import torch.distributed as dist
from torch import nn

from dynemb.distributed.comm import RowsAllToAll, exchange, exchange_counts
from dynemb.distributed.routing import (
    OwnerPolicy,
    destination_order,
    inverse_permutation,
    owner_of,
    regroup_index,
    table_of_each_id,
    unique_per_table,
)
from dynemb.initializers import Initializer
from dynemb.options import (
    DynamicEmbInitializerArgs,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
)
from dynemb.ranges import emit_range, op_range
from dynemb.segments import UniqueIds, reduce_grads
from dynemb.tables import BatchedDynamicEmbeddingTables


class ExpandUnique(torch.autograd.Function):
    """Rows of the distinct ids -> a row per input id; backward sums duplicates by sorted segments."""

    @staticmethod
    def forward(ctx, unique_rows: torch.Tensor, unique: UniqueIds) -> torch.Tensor:
        ctx.unique = unique
        with op_range("gather_embedding"):
            return unique_rows.index_select(0, unique.inverse)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        with emit_range("ShardedDynamicEmbeddingCollection.backward"), op_range("reduce_grads"):
            return reduce_grads(grad.contiguous(), ctx.unique), None


class PermuteRows(torch.autograd.Function):
    """``rows[index]`` for a permutation ``index``; backward gathers by the inverse permutation.

    Autograd's own ``index_select`` backward zero-fills and scatter-adds, which a
    permutation never needs.
    """

    @staticmethod
    def forward(
        ctx, rows: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor
    ) -> torch.Tensor:
        ctx.inverse = inverse
        with op_range("gather_embedding"):
            return rows.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        with emit_range("ShardedDynamicEmbeddingCollection.backward"), op_range("permute_grads"):
            return grad.index_select(0, ctx.inverse), None, None


def pinned_bounds(args: DynamicEmbInitializerArgs, max_capacity: int) -> DynamicEmbInitializerArgs:
    """Initializer args with the default bounds made explicit for a table of ``max_capacity`` rows."""
    resolved = Initializer(args, seed=0, max_capacity=max_capacity)
    return replace(args, lower=resolved.lower, upper=resolved.upper)


def shard_options(options: DynamicEmbTableOptions, world_size: int) -> DynamicEmbTableOptions:
    """One rank's part of a table: ``1/world`` of its capacity and of its device memory budget.

    Default initializer bounds depend on capacity; they are pinned to the whole
    table's, so an id starts from the same vector whichever rank owns it.
    """
    hbm = options.local_hbm_for_values
    return replace(
        options,
        max_capacity=math.ceil(options.max_capacity / world_size),
        local_hbm_for_values=None if hbm is None else math.ceil(hbm / world_size),
        initializer_args=pinned_bounds(options.initializer_args, options.max_capacity),
        eval_initializer_args=pinned_bounds(options.eval_initializer_args, options.max_capacity),
    )


class ShardedDynamicEmbeddingCollection(nn.Module):
    """Sequence embeddings (pooling NONE) of many features over row-wise sharded dynamic tables.

    ``table_options`` describe whole tables (global capacity); ``feature_tables[f]``
    is the table that feature ``f`` looks up (several features may share one fused
    table). ``forward(indices, offsets)`` takes the rank's local batch in TBE layout
    over features (feature-major ids, ``num_features * batch + 1`` offsets) and
    returns ``[len(indices), dim]`` in the same order.
    """

    def __init__(
        self,
        table_options: Sequence[DynamicEmbTableOptions],
        feature_tables: Sequence[int],
        optimizer: EmbOptimType = EmbOptimType.EXACT_SGD,
        device: torch.device | str | None = None,
        use_index_dedup: bool = True,
        owner_policy: OwnerPolicy = OwnerPolicy.HASH,
        group: dist.ProcessGroup | None = None,
        **optimizer_kwargs: float,
    ) -> None:
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError(
                "ShardedDynamicEmbeddingCollection needs an initialized torch.distributed process group"
            )
        if not feature_tables:
            raise ValueError("at least one feature is needed")
        bad = [t for t in feature_tables if not 0 <= t < len(table_options)]
        if bad:
            raise ValueError(
                f"feature_tables name tables {bad}, but there are {len(table_options)} tables"
            )
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.num_tables = len(table_options)
        self.num_features = len(feature_tables)
        self.use_index_dedup = use_index_dedup
        self.owner_policy = owner_policy
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.local = BatchedDynamicEmbeddingTables(
            [shard_options(o, self.world_size) for o in table_options],
            optimizer=optimizer,
            pooling_mode=PoolingMode.NONE,
            device=self.device,
            **optimizer_kwargs,
        )
        # Summed over forwards: ids this rank sent to owners (itself included), and ids
        # its shard looked up for all ranks. Read by the benchmark; known on the host.
        self.ids_sent = 0
        self.ids_looked_up = 0
        self.register_buffer(
            "feature_tables",
            torch.tensor(list(feature_tables), dtype=torch.int64, device=self.device),
            persistent=False,
        )

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        if offsets.numel() < self.num_features + 1 or (offsets.numel() - 1) % self.num_features:
            raise ValueError(
                f"offsets must have num_features * batch + 1 entries ({self.num_features} features), got {offsets.numel()}"
            )
        with emit_range("ShardedDynamicEmbeddingCollection.forward"):
            tables = None
            if self.num_tables > 1:
                with op_range("route_ids"):
                    tables = table_of_each_id(
                        self.feature_tables, offsets, self.num_features, indices.numel()
                    )
            unique, ids = None, indices
            if self.use_index_dedup:
                with op_range("segmented_unique"):
                    unique, tables = unique_per_table(indices, tables, self.num_tables)
                ids = unique.keys
            with op_range("route_ids"):
                owners = owner_of(ids, self.world_size, self.owner_policy)
                order, send_counts = destination_order(
                    owners, tables, self.num_tables, self.world_size
                )
            with op_range("all_to_all_ids"):
                recv_counts = exchange_counts(send_counts, self.group)
                send_splits, recv_splits = torch.stack(
                    [send_counts.sum(1), recv_counts.sum(1)]
                ).tolist()
                received = exchange(ids[order], send_splits, recv_splits, self.group)
            with op_range("route_ids"):
                num_received = sum(recv_splits)
                self.ids_sent += sum(send_splits)
                self.ids_looked_up += num_received
                regroup = self.num_tables > 1  # with one table, source-major is table-major
                if regroup:
                    to_table_major = regroup_index(recv_counts, num_received)
                    to_source_major = regroup_index(recv_counts.t(), num_received)
                    received = received[to_table_major]
                local_offsets = torch.zeros(
                    self.num_tables * self.world_size + 1, dtype=torch.int64, device=self.device
                )
                local_offsets[1:] = torch.cumsum(recv_counts.t().reshape(-1), 0)
            rows = self.local(received, local_offsets)
            if regroup:
                rows = PermuteRows.apply(rows, to_source_major, to_table_major)
            rows = RowsAllToAll.apply(rows, recv_splits, send_splits, self.group)
            rows = PermuteRows.apply(rows, inverse_permutation(order), order)
            return rows if unique is None else ExpandUnique.apply(rows, unique)
