"""``BatchedDynamicEmbeddingTables``: many hash-table-backed embedding tables behind one TBE-shaped module."""

from __future__ import annotations

import torch
from torch import nn

from dynemb.engine import Engine, Member
from dynemb.function import DynamicEmbeddingFunction
from dynemb.graphs import StepGraphs
from dynemb.graphs import wanted as graphs_wanted
from dynemb.optimizers import OptimizerParams, initial_state, state_fields
from dynemb.options import DynamicEmbTableOptions, EmbOptimType, PoolingMode, StorageMode
from dynemb.ranges import emit_range
from dynemb.validation import BatchLayout, DeferredChecks, check_batch


class BatchedDynamicEmbeddingTables(nn.Module):
    """Embedding tables keyed by arbitrary int64 ids, trained by an optimizer fused into backward.

    ``forward(indices, offsets)`` takes TBE's layout: flat table-major int64 ids and
    ``num_tables * batch_size + 1`` offsets. Pooling NONE returns a row per index
    ``[len(indices), dim]``; SUM and MEAN return ``[batch_size, sum of dims]``.
    In training, new ids are inserted (initialized) and backward updates the rows of
    the ids used; in eval nothing is inserted or updated, and unknown ids get the
    eval initializer's value.

    Bad input raises ValueError. The checks that need the offsets' values (non-decreasing,
    from 0 to len(indices)) would make every step wait for the GPU, so on CUDA they are
    made on the device and kept there: the first failure since the last read is raised,
    with the message an eager check gives, by ``check_inputs`` (which a training loop may
    call every N steps) and at points that read the device anyway or do not run in a step:
    ``export_table``, ``load_table``, ``size``, ``cache_stats``, ``host_stats``, and the
    first eval forward after training (an eval loop reads once; its own batches wait for
    the next read point). Until then a bad batch runs on safe offsets (garbage out, nothing
    out of bounds). On the CPU they raise at once.

    ``cuda_graphs`` (default: whether ``DYNEMB_CUDA_GRAPHS=1``): replay the training steps of a batch shape that
    repeats from CUDA graphs (``dynemb.graphs``; a step's output is then overwritten by the next step of its shape).
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
        cuda_graphs: bool | None = None,
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
        self.dims = [options.dim for options in table_options]
        # Tables that agree on layout share one storage and train in one pass, whatever their storage mode.
        self.engine = Engine(table_options, optimizer, pooling_mode, self.params, self.device)
        self._anchor = torch.empty(0, device=self.device, requires_grad=True)
        self._checks = DeferredChecks(self.device, self.engine.counters)
        # Training steps replayed from CUDA graphs where shapes repeat (off unless asked: ``dynemb.graphs``).
        self.graphs = StepGraphs(self) if graphs_wanted(cuda_graphs) else None

    @property
    def num_tables(self) -> int:
        return self.engine.num_tables

    @property
    def step(self) -> int:
        """Training steps taken (backward passes)."""
        return self.engine.step

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        graphed = self.training and torch.is_grad_enabled() and self.graphs is not None
        output = self.graphs.forward(indices, offsets) if graphed else None
        if output is not None:
            return output
        layout = self._check(indices, offsets, self.engine.lookups(self.training))
        if self.training and torch.is_grad_enabled():
            return DynamicEmbeddingFunction.apply(self._anchor, self.engine, indices, layout)
        if not self.training:
            self._checks.raise_pending(after_training=True)
        stage = "DynamicEmbeddingFunction.forward" if self.training else "dynamicemb_eval_forward"
        with emit_range(stage):
            output, _ = self.engine.lookup(indices, layout, training=self.training)
        return output

    def prefetch(self, indices: torch.Tensor, offsets: torch.Tensor) -> None:
        """Bring the ids of a coming batch into the device cache (CACHING tables; others need nothing)."""
        if not self.training:
            check_batch(indices, offsets, self.num_tables, self._checks)  # a prefetch in eval fetches nothing
            return
        layout = self._check(indices, offsets, self.engine.lookups(True, prefetch=True))
        with emit_range("dynamicemb_prefetch"):
            self.engine.prefetch(indices, layout)

    def _check(self, indices: torch.Tensor, offsets: torch.Tensor, lookups: list[int]) -> BatchLayout:
        """``check_batch`` of a batch that the groups ``lookups`` look up."""
        return check_batch(indices, offsets, self.num_tables, self._checks, self.training, lookups, self.engine.needs_safe_offsets)

    def check_inputs(self) -> None:
        """Raise the first failed check of the offsets' values among the batches taken since the last read, and
        forget it. One host sync: on CUDA those checks wait on the device until read (see the class docstring)."""
        self._checks.raise_pending()

    def storage_mode(self, table: int) -> StorageMode:
        self._table(table)
        return self.engine.storage_mode(table)

    def size(self, table: int) -> int:
        """Distinct ids stored in the table (all tiers)."""
        self.check_inputs()
        member = self._table(table)
        return member.group.size(member.local)

    def capacity(self, table: int) -> int:
        """Rows the table can hold (its storage, for CACHING)."""
        member = self._table(table)
        return member.group.capacity(member.local)

    def cache_stats(self, table: int | None = None) -> dict[str, int]:
        """Training lookups of the first tier (a CACHING table's cache, any other table's storage), and ids it evicted.

        A lookup is one index of a batch (an id repeated in a batch counts each time):
        ``hits`` found its id there, ``misses`` did not (a cache miss, or a new id);
        ``evictions`` counts ids pushed out of that tier to make room (a cache writes
        them back to storage; storage drops them). Prefetches count as lookups.
        """
        self.check_inputs()
        chosen = range(self.num_tables) if table is None else [table]
        totals = {"hits": 0, "misses": 0, "evictions": 0}
        for t in chosen:
            member = self._table(t)
            for name in totals:
                totals[name] += int(getattr(member.group, name)[member.local])
        return totals

    def reset_cache_stats(self) -> None:
        for group, _ in self.engine.groups:
            for counter in (group.hits, group.misses, group.evictions):
                counter.zero_()

    def count_host_traffic(self, on: bool = True) -> None:
        """Count the host rows the training steps move (``host_stats``) from now on, or stop counting (the
        default state: each count is a few small launches per step, so only a pass meant to be counted should
        pay for it). Graphs captured before are dropped, so that replayed steps count as eager ones do."""
        self.engine.count_host_traffic(on)
        if self.graphs is not None:
            self.graphs = StepGraphs(self)

    def host_stats(self) -> dict[str, int]:
        """Host rows the training steps (prefetches included) moved between host and device memory while
        counted (``count_host_traffic``) since the last ``reset_host_stats``, read here (one host sync): ``rows_in`` and
        ``bytes_in`` read from host memory (a cache's misses brought in whole, with their optimizer state; the
        embedding of each distinct host row a HYBRID or HOST lookup reads; each host row the update reads),
        ``rows_out`` and ``bytes_out`` written to it (evictees and ids a cache could not place, new ids stored
        in host memory, each host row the update writes back). Each move counts once; all zero where every
        row is in device memory. See docs/dynemb.md."""
        self.check_inputs()
        return self.engine.host_stats()

    def reset_host_stats(self) -> None:
        self.engine.reset_host_stats()

    def export_table(self, table: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(ids ascending, rows ``[n, dim]``, optimizer state per row by name), on the CPU."""
        self.check_inputs()
        member = self._table(table)
        keys, rows = member.group.export(member.local)
        order = torch.argsort(keys)
        keys, rows = keys[order].cpu(), rows[order].cpu()
        dim = self.dims[table]
        state = {
            name: rows[:, dim + start : dim + stop].squeeze(1) if stop - start == 1 else rows[:, dim + start : dim + stop].clone()
            for name, (start, stop) in state_fields(self.optimizer, dim).items()
        }
        return keys, rows[:, :dim].clone(), state

    def load_table(self, table: int, ids: torch.Tensor, rows: torch.Tensor, state: dict[str, torch.Tensor] | None = None) -> None:
        """Insert or overwrite ids with the given rows (and optimizer state, else fresh state).

        ``ids``, ``rows`` and each state entry are tensors or anything ``torch.as_tensor`` takes (lists, arrays).
        """
        self.check_inputs()
        member = self._table(table)
        dim = self.dims[table]
        ids, rows = _as_tensor("ids", ids), _as_tensor("rows", rows)
        state = None if state is None else {name: _as_tensor(f"state {name!r}", values) for name, values in state.items()}
        if ids.dim() != 1 or ids.dtype != torch.int64:
            raise ValueError(f"ids must be a 1-D int64 tensor, got {ids.dtype} of shape {tuple(ids.shape)}")
        if rows.dim() != 2 or rows.shape[1] != dim:
            raise ValueError(f"rows must be [n, {dim}] for table {table}, got {tuple(rows.shape)}")
        if rows.shape[0] != ids.numel():
            raise ValueError(f"{ids.numel()} ids but {rows.shape[0]} rows")
        ids = ids.to(self.device)
        if torch.unique(ids).numel() != ids.numel():
            raise ValueError("ids must be unique")
        full = torch.cat([rows.to(self.device, torch.float32), self._state_columns(dim, ids.numel(), state)], dim=1)
        member.group.load(member.local, ids, full)

    def _state_columns(self, dim: int, count: int, state: dict[str, torch.Tensor] | None) -> torch.Tensor:
        fields = state_fields(self.optimizer, dim)
        fresh = initial_state(self.optimizer, count, dim, self.params, self.device)
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

    def _table(self, table: int) -> Member:
        if not isinstance(table, int) or not 0 <= table < self.num_tables:
            raise ValueError(f"table {table} out of range: {self.num_tables} tables")
        return self.engine.member(table)


def _as_tensor(name: str, values: object) -> torch.Tensor:
    """A tensor of ``values`` (already one: itself), or a ValueError naming what could not become one."""
    if isinstance(values, torch.Tensor):
        return values
    try:
        return torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"{name} must be a tensor or convertible to one: {error}") from None


def _concrete_device(device: torch.device | str | None) -> torch.device:
    """``cuda`` pinned to its index (``cuda:0``), so it compares equal to the device of the tensors fed in."""
    resolved = torch.device(device) if device is not None else torch.device("cpu")
    if resolved.type == "cuda" and resolved.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return resolved
