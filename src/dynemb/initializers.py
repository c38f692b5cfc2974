"""Initial embedding values as a pure function of (seed, id, column).

A counter-based generator (SplitMix64 of the id and column) replaces a stateful
RNG: an id gets the same starting vector whichever batch first brings it in,
whichever storage mode holds it, and after it was evicted and comes back. That
makes the storage modes comparable row for row and runs reproducible.
"""

from __future__ import annotations

import math

import torch

from dynemb import kernels
from dynemb.hashing import random_bits, seed_word, uniform_open
from dynemb.options import DynamicEmbInitializerArgs, DynamicEmbInitializerMode


def _standard_normal(bits: torch.Tensor) -> torch.Tensor:
    """Box-Muller on two independent 24-bit uniforms of the same word."""
    radius = torch.sqrt(-2.0 * torch.log(uniform_open(bits, 40)))
    return radius * torch.cos((2.0 * math.pi) * uniform_open(bits, 8))


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


class Initializer:
    """Draws initial rows for ids from one ``DynamicEmbInitializerArgs``.

    Defaults: UNIFORM without bounds uses +-1/sqrt(max_capacity) (the reference
    planner's rule); TRUNCATED_NORMAL without bounds cuts at mean +- 2 std.
    """

    def __init__(self, args: DynamicEmbInitializerArgs, seed: int, max_capacity: int) -> None:
        self.args = args
        self.seed = seed
        self.seed_word = seed_word(seed)
        if args.mode is DynamicEmbInitializerMode.UNIFORM:
            bound = 1.0 / math.sqrt(max_capacity)
            self.lower = -bound if args.lower is None else args.lower
            self.upper = bound if args.upper is None else args.upper
        else:
            self.lower = args.mean - 2.0 * args.std_dev if args.lower is None else args.lower
            self.upper = args.mean + 2.0 * args.std_dev if args.upper is None else args.upper
        if self.upper < self.lower:
            raise ValueError(f"initializer bounds reversed: lower={self.lower} > upper={self.upper}")

    def same_draw_as(self, other: Initializer) -> bool:
        """Same distribution (seed aside): one call with per-key seed words can serve both."""
        return (self.args.mode, self.args.mean, self.args.std_dev, self.args.value, self.lower, self.upper) == (
            other.args.mode, other.args.mean, other.args.std_dev, other.args.value, other.lower, other.upper,
        )

    def __call__(self, keys: torch.Tensor, dim: int, seed_words: torch.Tensor | None = None) -> torch.Tensor:
        """``[len(keys), dim]`` float32 initial values on ``keys.device``; ``seed_words`` (one per key) replace the seed."""
        words = self.seed_word if seed_words is None else seed_words
        mode = self.args.mode
        if mode is DynamicEmbInitializerMode.CONSTANT:
            return torch.full((keys.numel(), dim), self.args.value, dtype=torch.float32, device=keys.device)
        if mode is DynamicEmbInitializerMode.UNIFORM:
            return kernels.uniform_rows(keys, dim, words, self.lower, self.upper)
        bits = random_bits(keys, dim, words)
        if mode is DynamicEmbInitializerMode.NORMAL:
            return self.args.mean + self.args.std_dev * _standard_normal(bits)
        # TRUNCATED_NORMAL: inverse CDF of a uniform between the bounds' CDF values.
        std = self.args.std_dev
        low = _normal_cdf((self.lower - self.args.mean) / std)
        high = _normal_cdf((self.upper - self.args.mean) / std)
        p = low + (high - low) * uniform_open(bits, 40)
        z = math.sqrt(2.0) * torch.erfinv((2.0 * p - 1.0).clamp(-1.0 + 1e-7, 1.0 - 1e-7))
        return (self.args.mean + std * z).clamp(self.lower, self.upper)
