"""Seeded Monte Carlo checks of the DiPriMe package's noise laws (issue 11).

Each test draws thousands of samples in one vectorised call (many identical nodes or many
trees at once), compares them with the law its docstring derives (privlab.mechanisms.dipreme.
privacy), and fails only on a p-value below 1e-6: with fixed seeds the outcome is fixed, and a
correct sampler would need a one-in-a-million draw to fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privlab.mechanisms.dipreme import DiPriMeClassifier, DPERTClassifier, DPERTRegressor
from privlab.mechanisms.dipreme.growth import Splitter, _choose, _numeric_split, route
from privlab.platform.dp.ledger import Ledger

pytestmark = pytest.mark.statistical
P_MIN = 1e-6


def test_the_private_median_draws_intervals_with_width_times_exp_weights_and_uniform_values() -> None:
    values = np.array([0.5, 1.0, 1.2, 3.0, 3.1, 6.0, 8.5])  # m = 7 values in the public range [0, 10]
    m, nodes, epsilon, delta = len(values), 40_000, 1.2, 0.5
    node = np.repeat(np.arange(nodes), m)
    counts = np.full(nodes, m)
    starts = np.arange(nodes + 1) * m
    splitter = Splitter(kind="private_median", epsilon_median=np.array([epsilon]), median_sensitivity=delta)
    thresholds = _numeric_split(splitter, np.tile(values, nodes), node, counts, starts, np.zeros(nodes),
                                np.full(nodes, 10.0), np.zeros(nodes, np.int64), np.random.default_rng(11))
    edges = np.concatenate(([0.0], values, [10.0]))
    index = np.searchsorted(values, thresholds)  # interval i has i values below it
    weights = np.diff(edges) * np.exp(epsilon * -np.abs(np.arange(m + 1) - m / 2) / (2 * delta))
    expected = weights / weights.sum() * nodes
    assert stats.chisquare(np.bincount(index, minlength=m + 1), expected).pvalue > P_MIN
    position = (thresholds - edges[index]) / np.diff(edges)[index]  # uniform inside its interval
    assert stats.kstest(position, "uniform").pvalue > P_MIN


def test_the_feature_choice_follows_the_exponential_mechanism() -> None:
    utilities = np.array([-10.0, -11.0, -12.5, -10.2])
    nodes, epsilon, delta = 40_000, 0.8, 0.5
    splitter = Splitter(kind="private_median", epsilon_choice=np.array([epsilon]), choice_sensitivity=delta)
    chosen = _choose(splitter, np.tile(utilities, (nodes, 1)), np.zeros(nodes, np.int64), np.random.default_rng(3))
    weights = np.exp(epsilon * (utilities - utilities.max()) / (2 * delta))
    assert stats.chisquare(np.bincount(chosen, minlength=4), weights / weights.sum() * nodes).pvalue > P_MIN


def _leaf_noise(est, X, y) -> np.ndarray:  # noqa: ANN001
    """Noisy minus true class counts of every leaf of every tree (trees on all rows)."""
    leaves = route(est.trees_, X, est.layout_.is_categorical)
    true = np.zeros_like(est.leaf_values_)
    for t in range(leaves.shape[0]):
        np.add.at(true[t], (leaves[t], y), 1.0)
    return (est.leaf_values_ - true).ravel()


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_leaf_class_counts_get_laplace_noise_of_the_recorded_scale(neighbouring: str) -> None:
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (30, 2))
    y = (X[:, 0] > 0.5).astype(int)
    trees = 300
    est = DPERTClassifier(epsilon=600.0, max_depth=3, n_estimators=trees, feature_bounds=(0.0, 1.0),
                          classes=[0, 1], partition="full", random_state=7)
    est.fit(X, y, ledger=Ledger(epsilon_cap=None, neighbouring=neighbouring))
    scale = {e.noise_scale for e in est.events_}
    assert len(scale) == 1  # every tree: Δ/(ε/T), Δ = 1 or 2
    b = scale.pop()
    assert b == pytest.approx((1.0 if neighbouring == "add_remove" else 2.0) * trees / 600.0)
    noise = _leaf_noise(est, X, y)
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > P_MIN


def _add_remove(epsilon: float) -> Ledger:
    """The paper's relation, which holds for a forest whose trees all see every row (no split)."""
    return Ledger(epsilon_cap=epsilon, neighbouring="add_remove")


def test_dipreme_leaves_get_the_leaf_share_of_epsilon() -> None:
    rng = np.random.default_rng(8)
    X = rng.uniform(0, 1, (40, 1))
    y = (X[:, 0] > 0.3).astype(int)
    trees, epsilon, share = 300, 300.0, 0.25
    est = DiPriMeClassifier(epsilon=epsilon, max_depth=3, n_estimators=trees, split_fraction=share,
                            feature_bounds=(0.0, 1.0), classes=[0, 1], partition="full", random_state=2).fit(X, y, ledger=_add_remove(epsilon))
    b = 1.0 / (epsilon / trees * (1 - share))
    assert [e.noise_scale for e in est.events_ if e.name == "leaf_class_counts"] == pytest.approx([b] * trees)
    assert stats.kstest(_leaf_noise(est, X, y), stats.laplace(scale=b).cdf).pvalue > P_MIN


def test_regression_leaves_get_laplace_counts_and_centred_sums_of_the_recorded_scales() -> None:
    rng = np.random.default_rng(12)
    X = rng.uniform(0, 1, (30, 2))
    y = np.clip(0.2 + 0.5 * X[:, 0] + rng.normal(0, 0.05, 30), 0.0, 1.0)
    trees, epsilon = 300, 600.0
    est = DPERTRegressor(epsilon=epsilon, max_depth=3, n_estimators=trees, feature_bounds=(0.0, 1.0),
                         target_bounds=(0.0, 1.0), partition="full", random_state=4).fit(X, y, ledger=_add_remove(epsilon))
    b_count = {e.noise_scale for e in est.events_ if e.name == "leaf_counts"}
    b_sum = {e.noise_scale for e in est.events_ if e.name == "leaf_sums"}
    assert len(b_count) == len(b_sum) == 1
    b_count, b_sum = b_count.pop(), b_sum.pop()
    assert b_count == pytest.approx(1.0 / (epsilon / trees / 2)) and b_sum == pytest.approx(0.5 / (epsilon / trees / 2))
    leaves = route(est.trees_, X, est.layout_.is_categorical)
    true_count = np.zeros_like(est.leaf_counts_)
    true_sum = np.zeros_like(est.leaf_sums_)
    for t in range(trees):
        np.add.at(true_count[t], leaves[t], 1.0)
        np.add.at(true_sum[t], leaves[t], y - 0.5)
    assert stats.kstest((est.leaf_counts_ - true_count).ravel(), stats.laplace(scale=b_count).cdf).pvalue > P_MIN
    assert stats.kstest((est.leaf_sums_ - true_sum).ravel(), stats.laplace(scale=b_sum).cdf).pvalue > P_MIN


def test_a_fitted_forest_draws_its_root_medians_with_the_planned_epsilon() -> None:
    """End to end: the estimator hands each median the ε its plan records (here one candidate,
    so the whole split share of a depth-1 tree) with Δ = 1/2."""
    values = np.array([0.5, 1.0, 1.2, 3.0, 3.1, 6.0, 8.5])
    X, y = values[:, None], np.array([0, 0, 0, 1, 1, 1, 1])
    trees, share = 400, 0.5
    epsilon = 1.2 * trees / share  # each tree's root median gets ε·b/T = 1.2
    est = DiPriMeClassifier(epsilon=epsilon, max_depth=1, n_estimators=trees, split_fraction=share,
                            feature_bounds=(0.0, 10.0), classes=[0, 1], partition="full", random_state=9).fit(X, y, ledger=_add_remove(epsilon))
    per_median = [dict(e.details)["epsilon_per_median"] for e in est.events_ if e.name == "median_splits"]
    assert per_median == pytest.approx([1.2] * trees)
    index = np.searchsorted(values, est.trees_.threshold[:, 0])
    edges = np.concatenate(([0.0], values, [10.0]))
    weights = np.diff(edges) * np.exp(1.2 * -np.abs(np.arange(8) - 3.5) / (2 * 0.5))
    observed = np.bincount(index, minlength=8)
    assert stats.chisquare(observed, weights / weights.sum() * trees).pvalue > P_MIN
