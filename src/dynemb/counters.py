"""The numbers that change from one step to the next, kept in device memory for the kernels to read.

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

from dynemb.kernels.operands import OptimizerArgs
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
            # Filled on the device (no copy from pageable host memory, which would wait); once per kind of tick.
            increment = torch.zeros_like(self.values)
            for position in [self.SEQ] * batch + [self.STEP] * step + [self.CLOCKS + g for g in key[2]]:
                increment[position] = 1
            self._increments[key] = increment
        self.values.add_(increment)

    def optimizer(self, optimizer: EmbOptimType, params: OptimizerParams, step: int) -> OptimizerArgs:
        """The update's arguments at ``step`` (the host's count; the device's after ``tick(step=True)``)."""
        return OptimizerArgs(optimizer, params, step, self.values[self.STEP : self.STEP + 1], self.betas)
