"""64-bit integer mixing on tensors: bucket choice and counter-based random numbers.

torch has no unsigned 64-bit arithmetic, so the SplitMix64 finalizer is written on
int64 with wrapping multiplication and logical (not arithmetic) right shifts.
"""

from __future__ import annotations

import functools

import torch


def _signed(value: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return value - (1 << 64) if value >= (1 << 63) else value


MIX_MUL_1 = _signed(0xBF58476D1CE4E5B9)
MIX_MUL_2 = _signed(0x94D049BB133111EB)
GOLDEN_GAMMA = _signed(0x9E3779B97F4A7C15)


def shift_right_logical(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x >>> bits`` for int64 tensors (zero-filled, as for uint64)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finalizer: every input bit affects every output bit."""
    x = x ^ shift_right_logical(x, 30)
    x = x * MIX_MUL_1
    x = x ^ shift_right_logical(x, 27)
    x = x * MIX_MUL_2
    return x ^ shift_right_logical(x, 31)


def bucket_of(keys: torch.Tensor, num_buckets: int | torch.Tensor) -> torch.Tensor:
    """Bucket index in ``[0, num_buckets)`` of each int64 key (negative keys too); ``num_buckets`` one count
    or one per key (each key's table's)."""
    return torch.remainder(mix64(keys), num_buckets)


def random_bits(keys: torch.Tensor, dim: int, seed_words: int | torch.Tensor) -> torch.Tensor:
    """``[len(keys), dim]`` well-mixed int64 words, one per (id, column): a pure function of (seed, id, column).

    ``seed_words`` is ``seed_word(seed)``, or one such word per key (tables that
    share storage draw each key's row with its own table's seed).
    """
    columns = torch.arange(dim, dtype=torch.int64, device=keys.device) * GOLDEN_GAMMA
    words = seed_words.unsqueeze(1) if isinstance(seed_words, torch.Tensor) else seed_words
    return mix64(mix64(keys).unsqueeze(1) ^ (columns + words))


@functools.cache
def seed_word(seed: int) -> int:
    """``mix64(seed)`` as a Python int (the int64 with its bits)."""
    return int(mix64(torch.tensor(seed, dtype=torch.int64)))


def uniform_open(bits: torch.Tensor, shift: int) -> torch.Tensor:
    """24 bits of ``bits`` starting at ``shift`` as a float32 in (0, 1)."""
    word = shift_right_logical(bits, shift) & ((1 << 24) - 1)
    return (word.to(torch.float32) + 0.5) * (1.0 / (1 << 24))
