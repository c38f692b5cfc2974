"""The storage engine of a module: its tables partitioned into groups that agree on layout.

Every storage mode goes through the same ``TableGroup`` (``dynemb.group``); what
varies is where a group's rows live. Tables with equal ``group_key`` (row width,
bucket sizes, score strategy, initializer modes) form one group whatever their
sizes, initializer parameters or device budgets; a module whose tables all agree
is one group and a batch goes to it untouched. Otherwise each group gets its
tables' part of the batch (their indices and bags, in table order) and its output
is placed back: rows of the output for pooling NONE, columns for SUM/MEAN.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dynemb.counters import StepCounters
from dynemb.group import BatchPlan, GroupBatch, TableGroup, group_key
from dynemb.layout import plan_layout
from dynemb.optimizers import OptimizerParams
from dynemb.options import DynamicEmbTableOptions, EmbOptimType, PoolingMode, StorageMode
from dynemb.validation import BatchLayout


@dataclass(frozen=True)
class Member:
    """Where one of the module's tables lives: its group and its index there."""

    group: TableGroup
    local: int


@dataclass(frozen=True)
class Placement:
    """Where a group's part of the module's batch sits in it: index positions (pooling NONE) or output columns
    (SUM/MEAN); neither where the group holds every table."""

    positions: torch.Tensor | None = None
    columns: torch.Tensor | None = None

    def put(self, output: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
        """``output`` with the group's ``part`` in place (``part`` itself where it is all of it)."""
        if self.positions is not None:
            return output.index_copy_(0, self.positions, part)
        if self.columns is not None:
            return output.index_copy_(1, self.columns, part)
        return part

    def take(self, grad_output: torch.Tensor) -> torch.Tensor:
        """The group's part of the module's output gradient."""
        if self.positions is not None:
            return grad_output.index_select(0, self.positions)
        if self.columns is not None:
            return grad_output.index_select(1, self.columns)
        return grad_output


EnginePlan = list[tuple[BatchPlan, Placement]]


class Engine:
    """Lookup, update and per-table access for every table of a module."""

    def __init__(
        self, options: list[DynamicEmbTableOptions], optimizer: EmbOptimType, pooling: PoolingMode, params: OptimizerParams,
        device: torch.device,
    ) -> None:
        self.pooling = pooling
        self.device = device
        self.step = 0
        layouts = [plan_layout(o, optimizer) for o in options]
        seeds = [o.seed + (t << 32) for t, o in enumerate(options)]
        partition: dict[tuple, list[int]] = {}
        for t, (o, layout) in enumerate(zip(options, layouts, strict=True)):
            partition.setdefault(group_key(o, layout), []).append(t)
        self.optimizer = optimizer
        self.counters = StepCounters(len(partition), params, device)
        self.groups: list[tuple[TableGroup, list[int]]] = []
        self.members: dict[int, Member] = {}
        for g, tables in enumerate(partition.values()):
            group = TableGroup(
                [options[t] for t in tables], [layouts[t] for t in tables], optimizer, params, [seeds[t] for t in tables], device, self.counters, g,
            )
            self.groups.append((group, tables))
            self.members.update({t: Member(group, local) for local, t in enumerate(tables)})
        dims = [o.dim for o in options]
        self.width = sum(dims) if pooling is not PoolingMode.NONE else dims[0]
        starts = [sum(dims[:t]) for t in range(len(dims))]
        # Pooled outputs: each group's tables' columns, fixed for the module's life.
        self._columns = [
            torch.cat([torch.arange(starts[t], starts[t] + dims[t], device=device) for t in tables]) for _, tables in self.groups
        ]

    @property
    def num_tables(self) -> int:
        return len(self.members)

    def lookup(self, indices: torch.Tensor, layout: BatchLayout, training: bool) -> tuple[torch.Tensor, EnginePlan]:
        """The module's output in TBE layout and, in training, each group's plan for backward."""
        output = None if len(self.groups) == 1 else self._empty_output(indices, layout)
        plans: EnginePlan = []
        for g, (group, tables) in enumerate(self.groups):
            batch, placement = self._part(indices, layout, g, tables)
            if training:
                part, plan = group.lookup(batch, self.pooling)
                plans.append((plan, placement))
            else:
                part = group.eval_lookup(batch, self.pooling)
            output = part if output is None else placement.put(output, part)
        return output, plans

    def prefetch(self, indices: torch.Tensor, layout: BatchLayout) -> None:
        for g, (group, tables) in enumerate(self.groups):
            group.prefetch(self._part(indices, layout, g, tables)[0])

    def lookups(self, training: bool, prefetch: bool = False) -> list[int]:
        """The groups whose clocks a batch ticks: every group's for a training lookup, the caching groups' for a
        prefetch, none for eval."""
        if prefetch:
            return [g for g, (group, _) in enumerate(self.groups) if group.cache is not None]
        return list(range(len(self.groups))) if training else []

    @property
    def needs_safe_offsets(self) -> bool:
        """Whether a batch's kernels need offsets in bounds even where the batch's are bad: pooling reads bags, and
        several groups cut the batch at the tables' bounds; one group of pooling NONE reads them only to search
        each index's table, which stays in bounds whatever they hold."""
        return self.pooling is not PoolingMode.NONE or len(self.groups) > 1

    def apply_gradients(self, plans: EnginePlan, grad_output: torch.Tensor) -> None:
        self.step += 1
        if self.optimizer is EmbOptimType.ADAM:  # the one update that reads the step (its bias corrections)
            self.counters.tick(step=True)
        for (group, _), (plan, placement) in zip(self.groups, plans, strict=True):
            group.apply_gradients(plan, placement.take(grad_output).contiguous(), self.pooling, self.step)

    def host_stats(self) -> dict[str, int]:
        """Host rows and bytes the training steps moved each way since the last reset (``HostTraffic``), all
        groups together: one host read."""
        counted = [group.traffic for group, _ in self.groups if group.counts_traffic]
        totals = dict.fromkeys(("rows_in", "rows_out", "bytes_in", "bytes_out"), 0)
        for traffic in counted:
            for name, value in traffic.totals().items():
                totals[name] += value
        return totals

    def reset_host_stats(self) -> None:
        for group, _ in self.groups:
            group.traffic.reset()

    def count_host_traffic(self, on: bool) -> None:
        for group, _ in self.groups:
            group.traffic.on = on and group.counts_traffic

    def host_counts(self) -> list[int]:
        """What a step changes of the host's own counts: the step, and each group's (``TableGroup.host_counts``)."""
        return [self.step] + [count for group, _ in self.groups for count in group.host_counts()]

    def advance(self, counts: list[int]) -> None:
        """Add ``counts`` (as ``host_counts`` orders them) to the host's counts: a CUDA graph replayed a step."""
        self.step += counts[0]
        for g, (group, _) in enumerate(self.groups):
            group.advance(counts[1 + 3 * g : 4 + 3 * g])

    def member(self, table: int) -> Member:
        return self.members[table]

    def storage_mode(self, table: int) -> StorageMode:
        member = self.members[table]
        return member.group.mode(member.local)

    def _part(self, indices: torch.Tensor, layout: BatchLayout, g: int, tables: list[int]) -> tuple[GroupBatch, Placement]:
        """Group ``g``'s part of the batch (its tables' indices and bags, in table order) and where it sits.

        Several groups cut the batch at the tables' bounds: the one host read of the batch's layout (made once,
        ``BatchLayout.bounds``); a module of one group never makes it."""
        if len(self.groups) == 1:
            return GroupBatch(indices, layout.offsets, layout.batch_size), Placement()
        size, offsets, bounds = layout.batch_size, layout.offsets, layout.bounds
        positions = torch.cat([torch.arange(bounds[t], bounds[t + 1], device=indices.device) for t in tables])
        lengths = torch.cat([offsets[t * size + 1 : (t + 1) * size + 1] - offsets[t * size : (t + 1) * size] for t in tables])
        part_offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=indices.device)
        torch.cumsum(lengths, 0, out=part_offsets[1:])
        placement = Placement(positions=positions) if self.pooling is PoolingMode.NONE else Placement(columns=self._columns[g])
        return GroupBatch(indices[positions], part_offsets, size), placement

    def _empty_output(self, indices: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
        rows = indices.numel() if self.pooling is PoolingMode.NONE else layout.batch_size
        return torch.empty(rows, self.width, dtype=torch.float32, device=self.device)
