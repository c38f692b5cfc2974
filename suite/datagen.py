"""Sparse-feature batches for the benchmark, generated for all iterations up front.

Every id of every iteration exists before any table is built, so the cache can
be sized from the workload's real footprint and the timed loop replays exactly
the batches the warm-up saw. Generation is one vectorized pass per run (no
per-table or per-iteration Python loop over ids) and seeded.

Layout follows TBE: per iteration, flat int64 ``indices`` table-major and
``offsets`` of length ``tables * batch + 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .configs import DISTRIBUTIONS


@dataclass(frozen=True)
class Batches:
    """All iterations' inputs, plus the id statistics the record and cache sizing need."""

    indices: list[torch.Tensor]
    offsets: list[torch.Tensor]
    distinct_per_table: list[int]  # over all iterations: the workload's footprint in rows
    avg_n_unique: float  # per iteration, summed over tables
    avg_n_total: float  # per iteration, summed over tables

    def __len__(self) -> int:
        return len(self.indices)


def powlaw_ids(u: torch.Tensor, caps: torch.Tensor, alpha: float) -> torch.Tensor:
    """Inverse CDF of a continuous power law x^-alpha on [1, cap + 1), shifted to ids [0, cap).

    Id 0 is the hottest; the density falls with the id, as in the reference benchmark.
    """
    if alpha <= 0:
        raise ValueError(f"pow-law alpha must be positive, got {alpha}")
    caps_f = caps.to(torch.float64)
    if abs(alpha - 1.0) < 1e-9:
        x = torch.exp(u * torch.log1p(caps_f))
    else:
        e = 1.0 - alpha
        x = ((caps_f + 1.0) ** e - 1.0) * u + 1.0
        x = x ** (1.0 / e)
    ids = x.floor().to(torch.int64) - 1
    return torch.minimum(ids.clamp_(min=0), caps - 1)


def zipf_ids(u: torch.Tensor, caps: torch.Tensor, alpha: float) -> torch.Tensor:
    """Discrete Zipf over ranks 1..cap (weights k^-alpha), as ids 0..cap-1; one table of weights per distinct cap."""
    ids = torch.empty_like(caps)
    for cap in torch.unique(caps).tolist():
        sel = caps == cap
        ranks = torch.arange(1, cap + 1, dtype=torch.float64, device=u.device)
        cdf = torch.cumsum(ranks.pow_(-alpha), 0)
        cdf /= cdf[-1].clone()
        ids[sel] = torch.searchsorted(cdf, u[sel]).clamp_(max=cap - 1)
    return ids


def generate_batches(
    *,
    num_iterations: int,
    batch_size: int,
    caps: Sequence[int],
    distribution: str,
    alpha: float,
    pooled: bool,
    max_hotness: int,
    seed: int,
    device: torch.device,
) -> Batches:
    """Ids for ``num_iterations`` batches of ``batch_size`` samples per table.

    ``pooled`` draws bag lengths uniformly in 1..max_hotness; otherwise every
    sample holds one id (pooling none: one output row per id).
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
    if num_iterations < 1 or batch_size < 1:
        raise ValueError("num_iterations and batch_size must be at least 1")
    if min(caps) < 1:
        raise ValueError(f"every table needs a positive capacity, got {list(caps)}")
    num_tables = len(caps)
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (num_iterations, num_tables, batch_size)
    if pooled:
        lengths = torch.randint(1, max_hotness + 1, shape, generator=gen, device=device)
    else:
        lengths = torch.ones(shape, dtype=torch.int64, device=device)

    # Table of every value, in (iteration, table, sample) order.
    per_segment = lengths.sum(dim=2)  # [iters, tables]
    table_of_segment = torch.arange(num_tables, device=device).repeat(num_iterations)
    table_of_value = torch.repeat_interleave(table_of_segment, per_segment.flatten())
    caps_t = torch.tensor(list(caps), dtype=torch.int64, device=device)
    value_caps = caps_t[table_of_value]

    if distribution == "uniform":
        u = torch.rand(value_caps.shape, generator=gen, device=device, dtype=torch.float64)
        values = torch.minimum((u * value_caps).to(torch.int64), value_caps - 1)
    else:
        u = torch.rand(value_caps.shape, generator=gen, device=device, dtype=torch.float64)
        sampler = powlaw_ids if distribution == "pow-law" else zipf_ids
        values = sampler(u, value_caps, alpha)

    per_iter_total = per_segment.sum(dim=1)
    starts = [0, *torch.cumsum(per_iter_total, 0).tolist()]
    indices = [values[starts[i] : starts[i + 1]] for i in range(num_iterations)]
    flat_offsets = torch.zeros(
        (num_iterations, num_tables * batch_size + 1), dtype=torch.int64, device=device
    )
    torch.cumsum(lengths.view(num_iterations, -1), dim=1, out=flat_offsets[:, 1:])
    offsets = list(flat_offsets.unbind(0))

    distinct, avg_unique = _id_statistics(values, table_of_value, per_iter_total, caps_t)
    return Batches(
        indices=indices,
        offsets=offsets,
        distinct_per_table=distinct,
        avg_n_unique=avg_unique,
        avg_n_total=float(per_iter_total.double().mean()),
    )


def _id_statistics(
    values: torch.Tensor,
    table_of_value: torch.Tensor,
    per_iter_total: torch.Tensor,
    caps: torch.Tensor,
) -> tuple[list[int], float]:
    """Distinct ids per table over all iterations, and the mean per-iteration distinct count."""
    num_tables = caps.numel()
    span = int(caps.max())
    table_key = table_of_value * span + values
    distinct = torch.bincount(torch.unique(table_key) // span, minlength=num_tables)
    iteration = torch.repeat_interleave(
        torch.arange(per_iter_total.numel(), device=values.device), per_iter_total
    )
    iter_keys = torch.unique(iteration * (num_tables * span) + table_key)
    per_iter_unique = torch.bincount(iter_keys // (num_tables * span), minlength=per_iter_total.numel())
    return distinct.tolist(), float(per_iter_unique.double().mean())
