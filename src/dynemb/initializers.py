"""Initial embedding values as a pure function of (seed, id, column).

A counter-based generator (SplitMix64 of the id and column) replaces a stateful
RNG: an id gets the same starting vector whichever batch first brings it in,
whichever storage mode holds it, and after it was evicted and comes back. That
makes the storage modes comparable row for row and runs reproducible.

``Initializer`` resolves one table's ``DynamicEmbInitializerArgs``;
``GroupInitializer`` draws for the keys of many tables at once, each with its own
table's seed and parameters (tables of one storage group share the mode only).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from dynemb import kernels
from dynemb.hashing import random_bits, seed_word, uniform_open
from dynemb.kernels.operands import DrawTables
from dynemb.options import DynamicEmbInitializerArgs, DynamicEmbInitializerMode

Number = float | torch.Tensor  # one value, or one per key


class DrawParameters(NamedTuple):
    """What ``draw`` needs besides the keys, each one number or one float32 per key.

    Differences (``span``, ``cdf_low``, ``cdf_span``) are worked out in double
    precision per table, so a key draws the same bits whether its table's
    parameters come as numbers or gathered per key.
    """

    mean: Number
    std_dev: Number
    lower: Number
    upper: Number
    span: Number  # upper - lower
    value: Number
    cdf_low: Number  # TRUNCATED_NORMAL: the standard normal CDF at the bounds
    cdf_span: Number


def _standard_normal(bits: torch.Tensor) -> torch.Tensor:
    """Box-Muller on two independent 24-bit uniforms of the same word."""
    radius = torch.sqrt(-2.0 * torch.log(uniform_open(bits, 40)))
    return radius * torch.cos((2.0 * math.pi) * uniform_open(bits, 8))


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _column(value: Number) -> Number:
    """A per-key parameter as a column that broadcasts over a row's values."""
    return value.unsqueeze(1) if isinstance(value, torch.Tensor) else value


def draw(mode: DynamicEmbInitializerMode, keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor, p: DrawParameters) -> torch.Tensor:
    """``[len(keys), dim]`` float32 initial values on ``keys.device``."""
    if mode is DynamicEmbInitializerMode.CONSTANT:
        return torch.zeros(keys.numel(), dim, dtype=torch.float32, device=keys.device) + _column(p.value)
    if mode is DynamicEmbInitializerMode.UNIFORM:
        return kernels.uniform_rows(keys, dim, seed_words, p.lower, p.span)
    bits = random_bits(keys, dim, seed_words)
    mean, std_dev = _column(p.mean), _column(p.std_dev)
    if mode is DynamicEmbInitializerMode.NORMAL:
        return mean + std_dev * _standard_normal(bits)
    # TRUNCATED_NORMAL: inverse CDF of a uniform between the bounds' CDF values.
    probability = _column(p.cdf_low) + _column(p.cdf_span) * uniform_open(bits, 40)
    z = math.sqrt(2.0) * torch.erfinv((2.0 * probability - 1.0).clamp(-1.0 + 1e-7, 1.0 - 1e-7))
    lower, upper = (torch.as_tensor(_column(v), dtype=torch.float32, device=keys.device) for v in (p.lower, p.upper))
    return torch.minimum(torch.maximum(mean + std_dev * z, lower), upper)


class Initializer:
    """One table's initializer: ``DynamicEmbInitializerArgs`` with its defaults resolved.

    Defaults: UNIFORM without bounds uses +-1/sqrt(max_capacity) (the reference
    planner's rule); TRUNCATED_NORMAL without bounds cuts at mean +- 2 std.
    """

    def __init__(self, args: DynamicEmbInitializerArgs, seed: int, max_capacity: int) -> None:
        self.args = args
        self.mode = args.mode
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

        mean, std_dev = args.mean, args.std_dev
        cdf_low = _normal_cdf((self.lower - mean) / std_dev) if std_dev > 0 else 0.0
        cdf_high = _normal_cdf((self.upper - mean) / std_dev) if std_dev > 0 else 1.0
        self.parameters = DrawParameters(mean, std_dev, self.lower, self.upper, self.upper - self.lower, args.value, cdf_low, cdf_high - cdf_low)

    def __call__(self, keys: torch.Tensor, dim: int) -> torch.Tensor:
        """``[len(keys), dim]`` float32 initial values on ``keys.device``."""
        return draw(self.mode, keys, dim, self.seed_word, self.parameters)


class GroupInitializer:
    """The initializers of a group's tables (one mode), drawing for keys of any of them at once; ``dim``: the
    columns a row's draw fills (its embedding), which kernels that draw rows inline need."""

    def __init__(self, initializers: list[Initializer], device: torch.device, dim: int) -> None:
        modes = {i.mode for i in initializers}
        if len(modes) != 1:
            raise ValueError(f"tables of one group share an initializer mode, got {sorted(m.value for m in modes)}")
        self.mode = modes.pop()
        self.seed_words = torch.tensor([i.seed_word for i in initializers], dtype=torch.int64, device=device)
        columns = zip(*(i.parameters for i in initializers), strict=True)
        # Parameters every table shares stay numbers (no per-key gather); the others become one per table.
        self.parameters = DrawParameters(*(
            values[0] if len(set(values)) == 1 else torch.tensor(values, dtype=torch.float32, device=device) for values in columns
        ))
        self.draws = self._kernel_draws(initializers, device, dim)

    def __call__(self, keys: torch.Tensor, table: torch.Tensor, dim: int) -> torch.Tensor:
        """``[len(keys), dim]`` initial values, key ``i`` drawn as table ``table[i]``'s initializer would."""
        per_key = DrawParameters(*(p[table] if isinstance(p, torch.Tensor) else p for p in self.parameters))
        return draw(self.mode, keys, dim, self.seed_words[table], per_key)

    def _kernel_draws(self, initializers: list[Initializer], device: torch.device, dim: int) -> DrawTables | None:
        """UNIFORM and CONSTANT as ``lower + span * u`` per table, the form kernels draw inline; None for the normals."""
        if self.mode is DynamicEmbInitializerMode.UNIFORM:
            lower, span = [i.lower for i in initializers], [i.upper - i.lower for i in initializers]
        elif self.mode is DynamicEmbInitializerMode.CONSTANT:
            lower, span = [i.args.value for i in initializers], [0.0] * len(initializers)
        else:
            return None
        return DrawTables(
            self.seed_words, torch.tensor(lower, dtype=torch.float32, device=device), torch.tensor(span, dtype=torch.float32, device=device), dim,
        )
