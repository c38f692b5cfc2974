"""Summaries of repeated timings and the test that tells a change from noise (docs/COMPARE.md).

Timings are right-skewed and a shared machine adds outliers, so the figures
here are rank- and order-based: the median, not the mean; the range of the
repeats, not the standard deviation; the Mann-Whitney U test, not a t-test.
The spread is the whole range on purpose: two runs of the same code differ by
more than one run's repeats vary among themselves (the machine drifts between
them), and the range is the widest honest measure of that within one run
(docs/COMPARE.md has the measurements). The test works on many rows at once
(one row per config metric or per op): rows are grouped by their sample sizes
and each group is ranked in one numpy pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

ALPHA = 0.05  # two-sided significance level of the test
# Without ties, samples this large together still have an exact null distribution in float64.
EXACT_MAX_TOTAL = 40


def spread_pct(samples: np.ndarray) -> np.ndarray:
    """Per row of ``samples`` (rows x values): (max - min) / median, in %.

    NaN where a row has fewer than two values or a median of 0; NaN values are ignored.
    """
    data = np.atleast_2d(np.asarray(samples, dtype=float))
    counts = np.sum(~np.isnan(data), axis=1)
    out = np.full(len(data), np.nan)
    ok = counts >= 2
    if ok.any():
        rows = data[ok]
        median = np.nanmedian(rows, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[ok] = np.where(median > 0, 100.0 * (np.nanmax(rows, axis=1) - np.nanmin(rows, axis=1)) / median, np.nan)
    return out


def summarize(values: Sequence[float]) -> dict[str, float | None]:
    """Median, p90, min, max and spread ((max - min) / median, %) of one metric's repeats.

    ``spread_pct`` is None for a single value: one repeat says nothing about noise.
    """
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or len(data) == 0 or not np.isfinite(data).all():
        raise ValueError(f"need one or more finite values, got {list(values)!r}")
    spread = float(spread_pct(data[None, :])[0])
    return {
        "median": float(np.median(data)),
        "p90": float(np.percentile(data, 90)),
        "min": float(data.min()),
        "max": float(data.max()),
        "spread_pct": None if math.isnan(spread) else spread,
    }


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two-sided p-values of the Mann-Whitney U test, one per row of ``a`` (k x m) against ``b`` (k x n).

    Exact (the U statistic's null distribution) for rows without ties when m + n
    <= EXACT_MAX_TOTAL; otherwise the normal approximation with tie and continuity
    corrections. NaN where m or n is below 2 (no test is possible); see
    :func:`can_reject` for sizes too small to ever reach a significance level.
    """
    a, b = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    if len(a) != len(b):
        raise ValueError(f"{len(a)} rows against {len(b)}")
    k, m = a.shape
    n = b.shape[1]
    if k == 0:
        return np.zeros(0)
    if m < 2 or n < 2:
        return np.full(k, np.nan)
    ranks, tie_term, tied = _average_ranks(np.concatenate([a, b], axis=1))
    u = ranks[:, :m].sum(axis=1) - m * (m + 1) / 2.0  # pairs (a_i, b_j) with a_i > b_j; ties count 1/2
    p = _normal_p(u, m, n, tie_term)
    exact = ~tied
    if m + n <= EXACT_MAX_TOTAL and exact.any():
        cdf = _u_cdf(m, n)
        ui = np.rint(u[exact]).astype(np.int64)
        below = cdf[ui]
        above = 1.0 - np.where(ui > 0, cdf[np.maximum(ui - 1, 0)], 0.0)
        p[exact] = np.minimum(1.0, 2.0 * np.minimum(below, above))
    return p


def smallest_p(m: int, n: int) -> float:
    """The smallest two-sided p-value the test can give samples of sizes m and n (no ties):
    every value of one sample below every value of the other."""
    return min(1.0, 2.0 / math.comb(m + n, m)) if m and n else 1.0


def can_reject(m: int, n: int, alpha: float = ALPHA) -> bool:
    """Whether samples this small can ever show a difference at ``alpha`` (5 against 5 can:
    p >= 0.0079; 3 against 3 cannot: p >= 0.1)."""
    return m >= 2 and n >= 2 and smallest_p(m, n) < alpha


def _average_ranks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1-based ranks within each row (ties get their average), each row's sum of t^3 - t over
    tie groups of size t, and whether the row has any tie."""
    k, width = x.shape
    order = np.argsort(x, axis=1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=1)
    starts = np.ones_like(ordered, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    group = np.cumsum(starts.ravel()) - 1
    position = np.tile(np.arange(1, width + 1, dtype=float), k)
    size = np.bincount(group)
    mean_rank = np.bincount(group, weights=position) / size
    ranks = np.empty_like(x)
    np.put_along_axis(ranks, order, mean_rank[group].reshape(k, width), axis=1)
    group_row = np.flatnonzero(starts.ravel()) // width
    tie_term = np.bincount(group_row, weights=size.astype(float) ** 3 - size, minlength=k)
    return ranks, tie_term, tie_term > 0


def _normal_p(u: np.ndarray, m: int, n: int, tie_term: np.ndarray) -> np.ndarray:
    total = m + n
    variance = m * n / 12.0 * ((total + 1) - tie_term / (total * (total - 1)))
    deviation = np.maximum(np.abs(u - m * n / 2.0) - 0.5, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(variance > 0, deviation / np.sqrt(np.maximum(variance, 0.0)), 0.0)
    return np.minimum(1.0, _erfc(z / math.sqrt(2.0)))


def _erfc(x: np.ndarray) -> np.ndarray:
    """The complementary error function for x >= 0, vectorized (fractional error below 1.2e-7).

    Numerical Recipes' Chebyshev fit ``erfcc``; numpy has no erfc, and a p-value is
    compared with ALPHA, far coarser than the fit's error.
    """
    t = 1.0 / (1.0 + 0.5 * x)
    poly = np.polynomial.polynomial.polyval(t, _ERFC_COEFFS)
    return t * np.exp(-x * x + poly)


_ERFC_COEFFS = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)


@lru_cache(maxsize=64)
def _u_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0..m*n under the null: the Gaussian binomial coefficient's coefficients.

    The number of ways to reach U = u is the coefficient of q^u in
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); dividing by (1 - q^i) is a running
    sum with stride i. Exact in float64 while the counts stay below 2^53.
    """
    size = m * n + 1
    ways = np.zeros(size + n + m + 1)
    ways[0] = 1.0
    for i in range(1, m + 1):
        shift = n + i
        ways[shift:] -= ways[:-shift].copy()
        # a running sum with stride i: one cumulative sum down the columns of an (L/i) x i view
        padded = np.concatenate([ways, np.zeros(-len(ways) % i)]).reshape(-1, i)
        ways = np.cumsum(padded, axis=0).ravel()[: len(ways)]
    counts = ways[:size]
    cdf = np.cumsum(counts) / counts.sum()
    cdf.setflags(write=False)
    return cdf
