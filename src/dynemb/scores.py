"""Score strategies: what a slot's score records, so eviction drops the right id."""

from __future__ import annotations

import torch

from dynemb.options import DynamicEmbScoreStrategy


class ScorePolicy:
    """TIMESTAMP keeps the logical time of the last access (LRU); LFU counts accesses.

    The clock is logical (one tick per training lookup of a table) rather than a
    device timer: the eviction order is then reproducible and identical on CPU and GPU.
    """

    def __init__(self, strategy: DynamicEmbScoreStrategy) -> None:
        self.strategy = strategy
        self.clock = 0

    def tick(self) -> None:
        self.clock += 1

    def for_new(self, counts: torch.Tensor, previous: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of ids entering a tier; ``previous`` is their score in the tier they come from."""
        if self.strategy is DynamicEmbScoreStrategy.TIMESTAMP:
            return torch.full_like(counts, self.clock)
        return counts if previous is None else counts + previous
