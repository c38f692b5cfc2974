"""``BatchedDynamicEmbeddingTables``: many hash-table-backed embedding tables behind one TBE-shaped module."""

from __future__ import annotations

import torch
from torch import nn

from dynemb.device_group import build_tables
from dynemb.function import DynamicEmbeddingFunction, lookup_batch
from dynemb.optimizers import OptimizerParams, initial_state, state_fields
from dynemb.options import DynamicEmbTableOptions, EmbOptimType, PoolingMode, StorageMode
from dynemb.ranges import emit_range, op_range
from dynemb.segments import segmented_unique
from dynemb.storage import DynamicTable
from dynemb.validation import check_batch


class BatchedDynamicEmbeddingTables(nn.Module):
    """Embedding tables keyed by arbitrary int64 ids, trained by an optimizer fused into backward.

    ``forward(indices, offsets)`` takes TBE's layout: flat table-major int64 ids and
    ``num_tables * batch_size + 1`` offsets. Pooling NONE returns a row per index
    ``[len(indices), dim]``; SUM and MEAN return ``[batch_size, sum of dims]``.
    In training, new ids are inserted (initialized) and backward updates the rows of
    the ids used; in eval nothing is inserted or updated, and unknown ids get the
    eval initializer's value.
    """

    def __init__(
        self,
        table_options: list[DynamicEmbTableOptions],
        optimizer: EmbOptimType = EmbOptimType.EXACT_SGD,
        pooling_mode: PoolingMode = PoolingMode.SUM,
        device: torch.device | str | None = None,
        learning_rate: float = 0.01,
        eps: float = 1e-8,
        beta1: float = 0.9,
        beta2: float = 0.999,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
    ) -> None:
        super().__init__()
        if not table_options:
            raise ValueError("at least one table is needed")
        if not isinstance(optimizer, EmbOptimType):
            raise ValueError(f"optimizer must be an EmbOptimType, got {optimizer!r}")
        if not isinstance(pooling_mode, PoolingMode):
            raise ValueError(f"pooling_mode must be a PoolingMode, got {pooling_mode!r}")
        dims = {options.dim for options in table_options}
        if pooling_mode is PoolingMode.NONE and len(dims) > 1:
            raise ValueError(f"pooling NONE needs one dim for all tables, got {sorted(dims)}")
        self.device = _concrete_device(device)
        self.pooling_mode = pooling_mode
        self.optimizer = optimizer
        self.params = OptimizerParams(learning_rate, eps, beta1, beta2, weight_decay, initial_accumulator_value)
        self.step = 0
        seeds = [options.seed + (t << 32) for t, options in enumerate(table_options)]
        self.tables: list[DynamicTable]
        # Tables all on the device, or all caching, that agree on layout share one storage and train in one pass.
        self.tables, self.group = build_tables(table_options, optimizer, self.params, seeds, self.device)
        self._anchor = torch.empty(0, device=self.device, requires_grad=True)

    @property
    def num_tables(self) -> int:
        return len(self.tables)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        layout = check_batch(indices, offsets, self.num_tables, self.device)
        if self.training and torch.is_grad_enabled():
            return DynamicEmbeddingFunction.apply(self._anchor, self, indices, layout)
        stage = "DynamicEmbeddingFunction.forward" if self.training else "dynamicemb_eval_forward"
        with emit_range(stage):
            output, _ = lookup_batch(self, indices, layout, training=self.training)
        return output

    def prefetch(self, indices: torch.Tensor, offsets: torch.Tensor) -> None:
        """Bring the ids of a coming batch into the device cache (CACHING tables; others need nothing)."""
        layout = check_batch(indices, offsets, self.num_tables, self.device)
        if not self.training:
            return
        with emit_range("dynamicemb_prefetch"):
            if self.group is not None:
                self.group.prefetch(indices, layout)
                return
            for t, table in enumerate(self.tables):
                if table.storage_mode is not StorageMode.CACHING:
                    continue
                with op_range("segmented_unique"):
                    unique = segmented_unique(indices[layout.bounds[t] : layout.bounds[t + 1]])
                table.prefetch(unique.keys, unique.counts)

    def storage_mode(self, table: int) -> StorageMode:
        return self._table(table).storage_mode

    def size(self, table: int) -> int:
        """Distinct ids stored in the table (all tiers)."""
        return self._table(table).size()

    def capacity(self, table: int) -> int:
        """Rows the table can hold (its host storage, for CACHING)."""
        return self._table(table).capacity

    def cache_stats(self, table: int | None = None) -> dict[str, int]:
        """Training lookups that hit or missed the device tier, and ids it evicted.

        Table by table a lookup is one of the batch's unique ids; tables in one shared
        storage (``self.group``) count every index, as their one-pass find sees them.
        """
        chosen = self.tables if table is None else [self._table(table)]
        return {
            "hits": sum(int(t.hits) for t in chosen),
            "misses": sum(int(t.misses) for t in chosen),
            "evictions": sum(int(t.evictions) for t in chosen),
        }

    def reset_cache_stats(self) -> None:
        for table in self.tables:
            table.reset_stats()

    def export_table(self, table: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(ids ascending, rows ``[n, dim]``, optimizer state per row by name), on the CPU."""
        chosen = self._table(table)
        keys, rows = chosen.export()
        order = torch.argsort(keys)
        keys, rows = keys[order].cpu(), rows[order].cpu()
        dim = chosen.dim
        state = {
            name: rows[:, dim + start : dim + stop].squeeze(1) if stop - start == 1 else rows[:, dim + start : dim + stop].clone()
            for name, (start, stop) in state_fields(self.optimizer, dim).items()
        }
        return keys, rows[:, :dim].clone(), state

    def load_table(self, table: int, ids: torch.Tensor, rows: torch.Tensor, state: dict[str, torch.Tensor] | None = None) -> None:
        """Insert or overwrite ids with the given rows (and optimizer state, else fresh state)."""
        chosen = self._table(table)
        dim = chosen.dim
        if ids.dim() != 1 or ids.dtype != torch.int64:
            raise ValueError(f"ids must be a 1-D int64 tensor, got {ids.dtype} of shape {tuple(ids.shape)}")
        if rows.dim() != 2 or rows.shape[1] != dim:
            raise ValueError(f"rows must be [n, {dim}] for table {table}, got {tuple(rows.shape)}")
        if rows.shape[0] != ids.numel():
            raise ValueError(f"{ids.numel()} ids but {rows.shape[0]} rows")
        ids = ids.to(self.device)
        if torch.unique(ids).numel() != ids.numel():
            raise ValueError("ids must be unique")
        full = torch.cat([rows.to(self.device, torch.float32), self._state_columns(chosen, ids.numel(), state)], dim=1)
        chosen.load(ids, full)

    def _state_columns(self, table: DynamicTable, count: int, state: dict[str, torch.Tensor] | None) -> torch.Tensor:
        fields = state_fields(self.optimizer, table.dim)
        fresh = initial_state(self.optimizer, count, table.dim, self.params, self.device)
        if state is None:
            return fresh
        unknown = set(state) - set(fields)
        if unknown:
            raise ValueError(f"unknown optimizer state {sorted(unknown)} for {self.optimizer.name}; expected {sorted(fields)}")
        for name, (start, stop) in fields.items():
            if name not in state:
                continue
            values = state[name]
            if values.numel() != count * (stop - start):
                raise ValueError(f"state {name!r} must have {stop - start} values per id, got shape {tuple(values.shape)}")
            fresh[:, start:stop] = values.to(self.device, torch.float32).reshape(count, stop - start)
        return fresh

    def _table(self, table: int) -> DynamicTable:
        if not 0 <= table < self.num_tables:
            raise ValueError(f"table {table} out of range: {self.num_tables} tables")
        return self.tables[table]


def _concrete_device(device: torch.device | str | None) -> torch.device:
    """``cuda`` pinned to its index (``cuda:0``), so it compares equal to the device of the tensors fed in."""
    resolved = torch.device(device) if device is not None else torch.device("cpu")
    if resolved.type == "cuda" and resolved.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return resolved
