"""The audit's statistics against exact cases: μ under Gaussian DP and ε from split halves.

Every check uses fixed seeds, and each tolerance is a confidence statement that holds for those
seeds by construction (a lower confidence bound never exceeds the truth except with probability
1 − confidence, here checked over many seeded replications with an explicit binomial slack).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privlab.platform.audit.audit_statistics import (
    epsilon_lower_bound,
    epsilon_lower_bound_split,
    gdp_mu_of_test,
    gdp_tradeoff,
    mu_lower_bound,
    tradeoff_points,
)

GRID = np.linspace(-2.0, 4.0, 25)


def _counts(scores_d: np.ndarray, scores_dp: np.ndarray, grid: np.ndarray) -> tuple[list[int], list[int]]:
    return ([int((scores_d >= t).sum()) for t in grid], [int((scores_dp >= t).sum()) for t in grid])


def test_gdp_curve_exact_values():
    assert gdp_tradeoff(0.3, 0.0) == pytest.approx(0.7)
    alpha = 0.05
    assert gdp_tradeoff(alpha, 1.0) == pytest.approx(stats.norm.cdf(stats.norm.isf(alpha) - 1.0))
    # A Gaussian shift's exact test lies on its curve: μ of the point is the shift.
    for t in (-1.0, 0.0, 0.7, 2.0):
        a, b = stats.norm.sf(t), stats.norm.cdf(t - 0.8)
        assert gdp_mu_of_test(a, b) == pytest.approx(0.8, abs=1e-12)
    assert gdp_mu_of_test(0.6, 0.5) == -math.inf  # α + β ≥ 1: a test no better than chance
    assert gdp_mu_of_test(0.0, 0.5) == math.inf


@pytest.mark.statistical
def test_mu_bound_of_a_gaussian_shift_is_close_and_below():
    rng = np.random.default_rng(20261129)
    mu, n = 1.0, 20_000
    d, dp = rng.normal(0.0, 1.0, n), rng.normal(mu, 1.0, n)
    bound = mu_lower_bound(*_counts(d, dp, GRID), n, GRID, confidence=0.95)
    assert bound.mu_lower <= mu
    assert bound.mu_lower >= mu - 0.12  # the CI's width at 2·10⁴ trials a side, 50 tests
    assert bound.mu_estimate == pytest.approx(mu, abs=0.08)


@pytest.mark.statistical
def test_mu_bound_covers_at_its_confidence_over_replications():
    rng = np.random.default_rng(7)
    mu, n, reps = 0.5, 2_000, 300
    over = 0
    for _ in range(reps):
        d, dp = rng.normal(0.0, 1.0, n), rng.normal(mu, 1.0, n)
        over += mu_lower_bound(*_counts(d, dp, GRID), n, GRID, confidence=0.9).mu_lower > mu
    # P(over) ≤ 0.1 per replication; 300 replications: ≤ 0.1·300 + 4 sd slack.
    assert over <= 30 + 4 * math.sqrt(300 * 0.1 * 0.9)


@pytest.mark.statistical
def test_mu_bound_flags_a_mechanism_noisier_claim():
    """Scores from N(0,1)/N(1.5,1) audited against a claim of μ = 1: the bound exceeds it."""
    rng = np.random.default_rng(3)
    n = 10_000
    d, dp = rng.normal(0.0, 1.0, n), rng.normal(1.5, 1.0, n)
    assert mu_lower_bound(*_counts(d, dp, GRID), n, GRID, confidence=0.95).mu_lower > 1.0


def test_identical_sides_give_zero():
    rng = np.random.default_rng(1)
    d = rng.normal(size=1000)
    assert mu_lower_bound(*_counts(d, d, GRID), 1000, GRID, confidence=0.95).mu_lower == 0.0


def test_tradeoff_points_upper_bounds_cover_the_empirical_errors():
    points = tradeoff_points([30, 10], [80, 50], 100, [0.0, 1.0], confidence=0.95)
    assert len(points) == 4
    for point in points:
        assert point.fpr <= point.fpr_upper and point.fnr <= point.fnr_upper
    assert points[0].fpr == 0.3 and points[0].fnr == pytest.approx(0.2)


@pytest.mark.statistical
def test_split_half_epsilon_bound_for_laplace_is_below_and_tight():
    rng = np.random.default_rng(42)
    epsilon, n = 1.0, 40_000
    d = rng.laplace(0.0, 1.0 / epsilon, n)
    dp = rng.laplace(1.0, 1.0 / epsilon, n)
    bound = epsilon_lower_bound_split(d, dp, confidence=0.95)
    assert bound.epsilon_lower <= epsilon
    assert bound.epsilon_lower >= 0.7 * epsilon
    assert bound.tests == 4 and bound.trials == n - n // 2


@pytest.mark.statistical
def test_split_half_epsilon_bound_covers_over_replications():
    rng = np.random.default_rng(11)
    epsilon, n, reps = 0.5, 2_000, 200
    over = sum(
        epsilon_lower_bound_split(rng.laplace(0.0, 2.0, n), rng.laplace(1.0, 2.0, n), confidence=0.9).epsilon_lower
        > epsilon for _ in range(reps))
    assert over <= 20 + 4 * math.sqrt(200 * 0.1 * 0.9)


def test_split_half_refuses_bad_input():
    with pytest.raises(ValueError, match="must be 1-d, equal"):
        epsilon_lower_bound_split([1.0], [1.0], confidence=0.95)
    with pytest.raises(ValueError, match="must be 1-d, equal"):
        epsilon_lower_bound_split([1.0, 2.0], [1.0, 2.0, 3.0], confidence=0.95)


def test_grid_epsilon_bound_matches_split_on_a_fixed_event():
    """Counting the chosen event again by hand gives the same bound (no hidden state)."""
    rng = np.random.default_rng(5)
    d, dp = rng.laplace(0.0, 1.0, 400), rng.laplace(1.0, 1.0, 400)
    bound = epsilon_lower_bound_split(d, dp, confidence=0.95)
    t = bound.threshold
    again = epsilon_lower_bound([(d[200:] >= t).sum()], [(dp[200:] >= t).sum()], 200, [t], confidence=0.95)
    assert again == bound


def test_vectorised_intervals_equal_the_scalar_ones():
    from privlab.platform.audit.audit_statistics import clopper_pearson, clopper_pearson_arrays

    counts = [0, 1, 7, 50, 99, 100]
    low, high = clopper_pearson_arrays(counts, 100, 0.99)
    for k, lo, hi in zip(counts, low, high, strict=True):
        assert (lo, hi) == pytest.approx(clopper_pearson(k, 100, 0.99), abs=1e-12)
