"""The numbers that change from one step to the next, kept in device memory for the kernels to read, and the
host rows the steps move (``HostTraffic``), counted there too.

A CUDA graph replays a step's launches with the arguments they were captured with, so nothing that
changes between steps may be a launch argument: the number of the batch whose offsets the deferred
checks fold (``dynemb.validation``), each group's clock (the score of the ids a TIMESTAMP lookup
touches) and the optimizer step (ADAM's bias corrections). They live in one int64 tensor; each batch
the module takes adds one increment to it, in one launch, and a backward of ADAM another. The host
counts beside it where it needs the numbers itself (``ScorePolicy.clock``, ``Engine.step``).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from dynemb.kernels.operands import Found, OptimizerArgs
from dynemb.layout import FLOAT_BYTES
from dynemb.optimizers import OptimizerParams
from dynemb.options import EmbOptimType


class StepCounters:
    """The batch number, the optimizer step and one clock per group, as one-entry views of one device tensor."""

    SEQ, STEP, CLOCKS = 0, 1, 2

    def __init__(self, groups: int, params: OptimizerParams, device: torch.device) -> None:
        self.values = torch.zeros(self.CLOCKS + groups, dtype=torch.int64, device=device)
        self.betas = torch.tensor([params.beta1, params.beta2], dtype=torch.float64, device=device)
        self._increments: dict[tuple, torch.Tensor] = {}

    @property
    def seq(self) -> torch.Tensor:
        return self.values[self.SEQ : self.SEQ + 1]

    def clock(self, group: int) -> torch.Tensor:
        return self.values[self.CLOCKS + group : self.CLOCKS + group + 1]

    def tick(self, batch: bool = False, step: bool = False, clocks: Iterable[int] = ()) -> None:
        """Count a batch, a step and a lookup of each of the groups ``clocks``: one launch."""
        key = (batch, step, tuple(clocks))
        increment = self._increments.get(key)
        if increment is None:
            # Filled on the device, once per kind of tick: ``fill_`` of a one-entry view takes the 1 as a kernel
            # argument, where ``increment[position] = 1`` (torch 2.11 on CUDA) copies it from host memory and waits.
            increment = torch.zeros_like(self.values)
            for position in [self.SEQ] * batch + [self.STEP] * step + [self.CLOCKS + g for g in key[2]]:
                increment[position : position + 1].fill_(1)
            self._increments[key] = increment
        self.values.add_(increment)

    def optimizer(self, optimizer: EmbOptimType, params: OptimizerParams, step: int) -> OptimizerArgs:
        """The update's arguments at ``step`` (the host's count; the device's after ``tick(step=True)``)."""
        return OptimizerArgs(optimizer, params, step, self.values[self.STEP : self.STEP + 1], self.betas)


class HostTraffic:
    """The rows a group's training steps move between host and device memory, counted in device memory.

    The link between host and GPU bounds a step whose rows are in host memory (a cache's misses and
    write-backs, HYBRID and HOST rows read and stepped in place), so a user needs to know how much crosses
    it; counting it on the host would make every step wait for the device. Each count is a reduction the
    step launches beside its own kernels, added into ``values``, read once when asked (``totals``). Those
    reductions are a few small launches each, which a launch-bound step would pay for every batch, so a
    group counts only while ``on`` (``BatchedDynamicEmbeddingTables.count_host_traffic``): a benchmark
    counts an untimed pass, and training pays nothing. Three kinds, by what a moved row carries: ``EMB_IN`` the embedding only
    (``dim`` floats: a lookup's read of a host row), ``ROW_IN`` and ``ROW_OUT`` the whole row (``width``
    floats, embedding and optimizer state: a miss brought into the cache, a row the update reads and writes
    back, an evictee or a new id written to storage). Each row is counted once per move, as the fewest
    bytes that move must carry: a kernel that reads a row again (a missed id's other indices, say) is not.
    """

    EMB_IN, ROW_IN, ROW_OUT = 0, 1, 2

    def __init__(self, dim: int, width: int, device: torch.device) -> None:
        self.dim, self.width = dim, width
        self.values = torch.zeros(3, dtype=torch.int64, device=device)
        self.on = False  # the steps' count sites launch nothing unless it is set

    def add(self, kind: int, count: torch.Tensor | int) -> None:
        """Count ``count`` rows (a device scalar: no host read) of ``kind``."""
        self.values[kind : kind + 1].add_(count)

    def updated(self, sorted_slots: torch.Tensor, host_from: int) -> None:
        """An update stepped the distinct rows of ``sorted_slots`` (ascending): those from ``host_from`` on
        were read from host memory and written back, whole."""
        self.values[self.ROW_IN : self.ROW_OUT + 1].add_(distinct_from(sorted_slots, host_from))

    def reset(self) -> None:
        self.values.zero_()

    def totals(self) -> dict[str, int]:
        """Rows and bytes each way since the last reset (one host read)."""
        emb_in, row_in, row_out = self.values.tolist()
        row_bytes, emb_bytes = self.width * FLOAT_BYTES, self.dim * FLOAT_BYTES
        return {
            "rows_in": emb_in + row_in, "rows_out": row_out,
            "bytes_in": emb_in * emb_bytes + row_in * row_bytes, "bytes_out": row_out * row_bytes,
        }


def distinct_from(sorted_values: torch.Tensor, low: int) -> torch.Tensor:
    """How many distinct values of ``sorted_values`` (ascending) are ``low`` or more: a device scalar."""
    first = sorted_values >= low
    first[1:] &= sorted_values[1:] != sorted_values[:-1]
    return first.sum()


def new_ids(found: Found) -> tuple[torch.Tensor, torch.Tensor]:
    """A claiming find's new ids (``Found.reps``, the first ``count`` of them valid; ``count`` only the device
    knows): each one's batch position (0 where not valid) and whether it is valid. Positions are clamped to the
    batch, so an entry no kernel wrote (past ``count``) never indexes out of bounds."""
    reps = found.reps
    valid = torch.arange(reps.numel(), device=reps.device) < found.count
    return torch.where(valid, reps, 0).clamp_(0, max(found.slots.numel() - 1, 0)), valid
