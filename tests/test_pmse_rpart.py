"""tree="rpart" against R's rpart: the committed oracle fixture, one fit for many configurations, pairs.

The fixture (tests/fixtures/rpart_oracle.npz) was written by benchmarks/rpart_oracle.py with R's
rpart (its docstring says how the datasets and configurations are drawn); these tests need no R.
The live test at the end reruns the oracle on fresh datasets when ``Rscript`` with rpart is
installed.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from privlab.mechanisms.pmse import cart
from privlab.mechanisms.pmse.propensity import pmse, pmse_configurations, pmse_neighbour_pair

_DRIVER = Path(__file__).resolve().parent.parent / "benchmarks" / "rpart_oracle.py"
_spec = importlib.util.spec_from_file_location("rpart_oracle_driver", _DRIVER)
assert _spec is not None and _spec.loader is not None
oracle = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = oracle  # dataclasses look their module up there
_spec.loader.exec_module(oracle)

TABLE1 = [(d, cp) for cp in (0.01, 0.001) for d in (1, 2, 5, None)]


@pytest.fixture(scope="module")
def fixture() -> tuple:
    return oracle.load_fixture()


def _explained(item: dict) -> bool:
    """A disagreement the rpart module documents: an exact tie, iscale, or inexact priors."""
    return item["tied_nodes"] > 0 or item["iscale_nodes"] > 0 or not item["exact_priors"]


def test_every_fixture_fit_matches_rpart(fixture: tuple) -> None:
    datasets, fits, probabilities, meta = fixture
    assert len(datasets) >= 500 and len(fits) >= 12 * 500
    assert {d.x.shape[1] for d in datasets} == {1, 2, 3, 4, 5}
    result = oracle.compare(datasets, fits, probabilities)
    disagreements = result["disagreements"]
    assert len(disagreements) < 0.005 * len(fits), disagreements[:5]
    assert all(_explained(item) for item in disagreements), disagreements[:5]
    # As measured when the fixture was written (rpart 4.1.19): every fit agrees.
    assert result["agree"] == len(fits), disagreements[:5]


def test_fixture_covers_what_the_issue_asks(fixture: tuple) -> None:
    datasets, fits, _, meta = fixture
    sizes = np.array([d.x.shape[0] for d in datasets])
    shares = np.array([d.labels.mean() for d in datasets])
    distinct = np.array([min(np.unique(d.x[:, j]).size for j in range(d.x.shape[1])) / d.x.shape[0] for d in datasets])
    assert (sizes <= 60).mean() > 0.3  # small n
    assert (np.abs(shares - 0.5) > 0.1).mean() > 0.3  # unbalanced classes
    assert (distinct < 0.5).mean() > 0.5  # heavy ties
    assert len({(c.minsplit, c.minbucket, c.cp, c.maxdepth) for _, c in fits}) > 100
    assert meta["nsplit"].max() >= 20 and (meta["nsplit"] == 0).any()


def test_one_fit_serves_every_configuration(fixture: tuple) -> None:
    """pmse_for_configurations (one grown tree, rpart's recursion replayed per configuration)
    equals one fit per configuration bit for bit, and rpart's own pMSE to 1e-12."""
    datasets, fits, probabilities, _ = fixture
    by_dataset: dict[int, list[tuple[oracle.Config, np.ndarray]]] = {}
    for (i, config), prob in zip(fits, probabilities, strict=True):
        if (config.minsplit, config.minbucket) == (20, 7):
            by_dataset.setdefault(i, []).append((config, prob))
    for i, entries in by_dataset.items():
        data = datasets[i]
        configs = [(c.maxdepth, c.cp) for c, _ in entries]
        together = cart.pmse_for_configurations(data.x, data.labels, configs)
        separate = [
            cart.fit_propensity_tree(data.x, data.labels, max_depth=d, cp=cp).pmse for d, cp in configs
        ]
        np.testing.assert_array_equal(together, separate)
        theirs = [np.mean((prob - 0.5) ** 2) for _, prob in entries]
        np.testing.assert_allclose(together, theirs, rtol=0, atol=1e-12)


def _section5(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x1 = rng.normal(2.0, math.sqrt(10.0), n)
    x = np.column_stack([x1, rng.normal(-2.5 + 0.5 * x1, math.sqrt(3.0))])
    x_prime = x.copy()
    x_prime[rng.integers(n)] += rng.normal(0.0, 5.0, 2)
    theta = rng.normal(0.0, math.sqrt(10.0), 5)
    s1 = rng.normal(theta[0], math.sqrt(abs(theta[1])), n)
    synthetic = np.column_stack([s1, rng.normal(theta[2] + theta[3] * s1, math.sqrt(abs(theta[4])))])
    return x, x_prime, synthetic


def test_neighbour_pair_equals_separate_fits() -> None:
    rng = np.random.default_rng(12)
    for n in (30, 200, 1000):
        for _ in range(5):
            x, x_prime, synthetic = _section5(n, rng)
            pair = pmse_neighbour_pair(x, x_prime, synthetic, TABLE1)
            np.testing.assert_array_equal(pair[:, 0], pmse_configurations(x, synthetic, TABLE1))
            np.testing.assert_array_equal(pair[:, 1], pmse_configurations(x_prime, synthetic, TABLE1))


def test_default_tree_is_rpart_and_greedy_is_still_there() -> None:
    rng = np.random.default_rng(3)
    x, _, synthetic = _section5(300, rng)
    assert pmse(x, synthetic, max_depth=None, cp=0.001) == pmse(x, synthetic, max_depth=30, cp=0.001, tree="rpart")
    greedy = pmse(x, synthetic, max_depth=None, cp=0.001, tree="greedy")
    assert greedy == pmse_configurations(x, synthetic, [(None, 0.001)], tree="greedy")[0]


def test_rpart_settings_are_validated() -> None:
    z = np.arange(40.0).reshape(-1, 1)
    labels = np.r_[np.zeros(20), np.ones(20)]
    with pytest.raises(ValueError, match=r"tree \('cart'\) must be one of 'rpart', 'greedy'"):
        cart.fit_propensity_tree(z, labels, max_depth=2, cp=0.01, tree="cart")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"minsplit \(1\) must be an int ≥ 2"):
        cart.fit_propensity_tree(z, labels, max_depth=2, cp=0.01, minsplit=1)
    with pytest.raises(TypeError, match=r"minsplit \(20\.0\) must be an int ≥ 2"):
        cart.fit_propensity_tree(z, labels, max_depth=2, cp=0.01, minsplit=20.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"minbucket \(0\) must be an int ≥ 1"):
        cart.fit_propensity_tree(z, labels, max_depth=2, cp=0.01, minbucket=0)
    with pytest.raises(ValueError, match=r"max_depth \(31\) must be at most 30 with tree='rpart'"):
        cart.fit_propensity_tree(z, labels, max_depth=31, cp=0.01)
    with pytest.raises(ValueError, match=r"max_depth \(31\) must be at most 30"):
        cart.pmse_for_configurations(z, labels, [(2, 0.01), (31, 0.01)])
    with pytest.raises(ValueError, match=r"tie_break \('sklearn'\) must be 'first' with tree='rpart'"):
        cart.fit_propensity_tree(z, labels, max_depth=2, cp=0.01, tie_break="sklearn")
    with pytest.raises(ValueError, match=r"minsplit \(10\) and minbucket \(None\) must be left at their defaults"):
        cart.fit_propensity_tree(z, labels, max_depth=2, cp=0.01, tree="greedy", minsplit=10)


def test_rpart_semantics_on_small_hand_checked_cases() -> None:
    # Six rows, perfectly separable at x = 3.5: with minsplit = 20 rpart does not split at all
    # (6 < minsplit); with minsplit = 2, minbucket = 1 it splits once, at the midpoint.
    z = np.array([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]])
    labels = np.array([0, 0, 0, 1, 1, 1])
    assert cart.fit_propensity_tree(z, labels, max_depth=None, cp=0.01).node_count == 1
    tree = cart.fit_propensity_tree(z, labels, max_depth=None, cp=0.01, minsplit=2, minbucket=1)
    np.testing.assert_array_equal(tree.propensities, [0, 0, 0, 1, 1, 1])
    assert tree.node_count == 3
    # minbucket = 4 forbids every cut of six rows (each side needs four).
    assert cart.fit_propensity_tree(z, labels, max_depth=None, cp=0.0, minsplit=2, minbucket=4).node_count == 1
    # cp: the split removes risk 3 of the root's 3, complexity 3/1 = 3 > cp·3 for any cp < 1.
    assert cart.fit_propensity_tree(z, labels, max_depth=None, cp=0.99, minsplit=2, minbucket=1).node_count == 3


@pytest.mark.skipif(not oracle.rpart_available(), reason="needs Rscript with the rpart package (r-cran-rpart)")
def test_live_against_r_rpart() -> None:
    datasets, fits = oracle.generate(40, seed=oracle.SEED + 1)
    probabilities, _ = oracle.run_rpart(datasets, fits)
    result = oracle.compare(datasets, fits, probabilities)
    assert result["agree"] == len(fits), result["disagreements"][:5]


def test_reports_name_the_tree_of_the_run() -> None:
    from privlab.mechanisms.pmse.reports_sensitivity import tree_rule
    from privlab.platform.results.reports import StudyResults

    def results(params: dict) -> StudyResults:
        return StudyResults(study="s", workload="pmse_sensitivity", run_id="r", experiment="e", spec_name="x",
                            root_seed=1, command=None, entries=({"params": params, "units": 1},), reservoirs={},
                            timing={})

    assert tree_rule(results({"params.tree": "rpart", "depth": 1, "cp": 0.01})) == "rpart"
    assert tree_rule(results({"depth": 1, "cp": 0.01})) == "greedy"  # runs before issue 12


def test_filtered_scan_equals_rparts_full_scan() -> None:
    """The division-free filter (altered priors exactly 1) never changes rpart's chosen cut."""
    from privlab.mechanisms.pmse import rpart_tree as rt

    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(300):
        n, q = int(rng.integers(4, 200)), int(rng.integers(1, 4))
        z = np.round(rng.normal(size=(n, q)) * rng.choice([1.0, 3.0, 10.0]), int(rng.integers(0, 2)))
        labels = (rng.random(n) < rng.uniform(0.1, 0.9)).astype(np.uint8)
        workspace = cart._workspace(n, q)
        workspace.layout_of(np.ascontiguousarray(z), labels)
        ones = int(labels.sum())
        candidates = np.empty(n, np.int64)
        for f in range(q):
            for minbucket in (1, 2, 7):
                full = rt._scan_feature(workspace.layout, f, 0, n, ones, minbucket, 1.0, 1.0)
                filtered = rt._scan_feature_exact(workspace.layout, f, 0, n, ones, minbucket, candidates)
                assert full == filtered
                checked += 1
    assert checked >= 900
