"""The summaries of repeats and the Mann-Whitney U test, against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embprof.stats import can_reject, mann_whitney_p, smallest_p, spread_pct, summarize


def brute_force_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact p: every split of the pooled values into |a| and |b|, U counted pair by pair."""
    pooled = [*a, *b]

    def u(first: tuple[int, ...]) -> float:
        rest = [pooled[i] for i in range(len(pooled)) if i not in first]
        return sum((pooled[i] > y) + 0.5 * (pooled[i] == y) for i in first for y in rest)

    observed = u(tuple(range(len(a))))
    every = [u(c) for c in itertools.combinations(range(len(pooled)), len(a))]
    below = sum(x <= observed + 1e-9 for x in every) / len(every)
    above = sum(x >= observed - 1e-9 for x in every) / len(every)
    return min(1.0, 2 * min(below, above))


def textbook_normal_p(a: list[float], b: list[float]) -> float:
    """The normal approximation with tie and continuity corrections, written out long-hand."""
    m, n = len(a), len(b)
    pooled = sorted([*a, *b])
    rank = {v: (pooled.index(v) + 1 + len(pooled) - pooled[::-1].index(v)) / 2 for v in pooled}
    u = sum(rank[x] for x in a) - m * (m + 1) / 2
    ties = sum(c**3 - c for c in (pooled.count(v) for v in set(pooled)))
    sigma = math.sqrt(m * n / 12 * ((m + n + 1) - ties / ((m + n) * (m + n - 1))))
    z = max(abs(u - m * n / 2) - 0.5, 0) / sigma
    return min(1.0, math.erfc(z / math.sqrt(2)))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.1, 100, allow_nan=False), min_size=2, max_size=6, unique=True),
    st.lists(st.floats(0.1, 100, allow_nan=False), min_size=2, max_size=6, unique=True),
)
def test_exact_p_matches_brute_force(a: list[float], b: list[float]) -> None:
    if set(a) & set(b):
        return  # ties across the samples go the normal way; this test is about the exact path
    assert mann_whitney_p(np.array([a]), np.array([b]))[0] == pytest.approx(brute_force_p(a, b), abs=1e-12)


def test_ties_use_the_normal_approximation() -> None:
    a, b = [1.0, 1.0, 2.0, 3.0, 3.0, 4.0], [2.0, 3.0, 5.0, 5.0, 6.0, 7.0]
    assert mann_whitney_p(np.array([a]), np.array([b]))[0] == pytest.approx(textbook_normal_p(a, b), rel=1e-6)
    big_a, big_b = list(np.arange(30.0)), list(np.arange(15.0, 45.0))  # past the exact path's size
    assert mann_whitney_p(np.array([big_a]), np.array([big_b]))[0] == pytest.approx(textbook_normal_p(big_a, big_b), rel=1e-6)


def test_rows_are_tested_at_once_and_each_as_alone() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(size=(50, 5)), rng.lognormal(size=(50, 7)) * 1.5
    together = mann_whitney_p(a, b)
    assert together == pytest.approx([mann_whitney_p(a[i], b[i])[0] for i in range(50)])
    assert np.isnan(mann_whitney_p(a[:, :1], b)).all()  # one value: nothing to test


def test_the_smallest_p_of_small_samples() -> None:
    assert smallest_p(5, 5) == pytest.approx(2 / 252) and can_reject(5, 5)
    assert smallest_p(3, 3) == pytest.approx(0.1) and not can_reject(3, 3)
    assert can_reject(4, 4) and not can_reject(3, 4) and not can_reject(1, 20)
    separated = mann_whitney_p(np.arange(5.0)[None], np.arange(5.0, 10.0)[None])[0]
    assert separated == pytest.approx(smallest_p(5, 5))


def test_summary_of_repeats() -> None:
    s = summarize([3.0, 1.0, 2.0, 4.0, 10.0])
    assert s == {"median": 3.0, "p90": pytest.approx(7.6), "min": 1.0, "max": 10.0, "spread_pct": pytest.approx(300.0)}
    assert summarize([2.0])["spread_pct"] is None  # one repeat says nothing about noise
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])
    rows = np.array([[1.0, 2.0, np.nan], [np.nan, np.nan, np.nan], [0.0, 0.0, 1.0]])
    assert np.allclose(spread_pct(rows), [100 * 1 / 1.5, np.nan, np.nan], equal_nan=True)
