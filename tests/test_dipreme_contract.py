"""The DiPriMe package's estimators against privlab's budget protocol (issue 11).

What ``tests/test_estimator_contract.py`` asks of a PrivateEstimator, asked here of the
scikit-learn-style forests: the ledger receives exactly the plan (total = ε, exactly); a plan
over the cap, bad settings and bad data are refused before anything is charged or drawn;
"disjoint" is charged by parallel composition over a positional split of the rows (declared to
the ledger, which accepts it under replace-one too) and only when the trees' rows really are
disjoint; same seed → same model, other seed → other
model; the fitted model keeps no copy of the data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone

from privlab.mechanisms.dipreme import (DiPriMeClassifier, DiPriMeRegressor, DPERTClassifier, DPERTRegressor,
                                        MedianForestClassifier)
from privlab.mechanisms.dipreme.dpdf import DPDFClassifier
from privlab.mechanisms.dipreme.fit_arguments import ForestNotFittedError
from privlab.mechanisms.dipreme.tree_rows import assign_rows, rows_are_disjoint
from privlab.platform.core.errors import BudgetExceededError, LedgerError, ModeError, NotFittedError, SchemaError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SecureSource
from privlab.platform.dp.transcript import TranscriptWriter

BOUNDS = [(-5.0, 5.0), (-5.0, 5.0), (0.0, 3.0)]
CATEGORIES = {2: (0, 1, 2, 3)}
EPSILON = 1.3


def _data(n: int = 240, seed: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.clip(rng.normal(0, 1.5, n), -5, 5), np.clip(rng.normal(1, 1, n), -5, 5),
                         rng.integers(0, 4, n)]).astype(float)
    labels = (X[:, 0] + 0.5 * X[:, 2] > 0.7).astype(int)
    target = np.clip(0.5 + 0.1 * X[:, 0] + 0.05 * X[:, 2] + rng.normal(0, 0.05, n), 0, 1)
    return X, labels, target


BUILDERS: dict[str, Callable[..., Any]] = {
    "dipreme_regressor": lambda **kw: DiPriMeRegressor(epsilon=EPSILON, max_depth=3, n_estimators=4, max_features=2,
                                                       feature_bounds=BOUNDS, target_bounds=(0.0, 1.0),
                                                       categories=CATEGORIES, **kw),
    "dipreme_classifier": lambda **kw: DiPriMeClassifier(epsilon=EPSILON, max_depth=3, n_estimators=4,
                                                         feature_bounds=BOUNDS, classes=[0, 1],
                                                         categories=CATEGORIES, **kw),
    "dpert_regressor": lambda **kw: DPERTRegressor(epsilon=EPSILON, max_depth=3, n_estimators=4, feature_bounds=BOUNDS,
                                                   target_bounds=(0.0, 1.0), categories=CATEGORIES, **kw),
    "dpert_classifier": lambda **kw: DPERTClassifier(epsilon=EPSILON, max_depth=3, n_estimators=4,
                                                     feature_bounds=BOUNDS, classes=[0, 1], categories=CATEGORIES,
                                                     **kw),
    "dpdf_classifier": lambda **kw: DPDFClassifier(epsilon=EPSILON, max_depth=2, n_estimators=3,
                                                   feature_bounds=BOUNDS, classes=[0, 1], categories=CATEGORIES,
                                                   **{k: v for k, v in kw.items() if k != "partition"}),
}
NAMES = sorted(BUILDERS)
PARTITIONED = [n for n in NAMES if not n.startswith("dpdf")]


def _y(name: str) -> np.ndarray:
    _, labels, target = _data()
    return target if "regressor" in name else labels


@pytest.mark.parametrize("name", NAMES)
def test_a_fresh_ledger_is_charged_exactly_epsilon(name: str) -> None:
    X, _, _ = _data()
    est = BUILDERS[name](random_state=3).fit(X, _y(name))
    assert est.ledger_.total().epsilon == EPSILON  # exact, not approximately
    assert est.ledger_.epsilon_cap == EPSILON
    assert est.events_ == est.ledger_.events
    assert all(e.sensitivity is not None and e.noise_scale is not None for e in est.events_)
    # Public inputs only: other data of the same shape gives the same plan.
    X2, labels2, target2 = _data(seed=9)
    again = BUILDERS[name](random_state=4).fit(X2, target2 if "regressor" in name else labels2)
    assert again.events_ == est.events_


@pytest.mark.parametrize("name", PARTITIONED)
@pytest.mark.parametrize("partition", ["disjoint", "full"])
def test_disjoint_is_parallel_composition_only_when_rows_are_disjoint(name: str, partition: str) -> None:
    X, _, _ = _data()
    if partition == "disjoint":  # a permutation cut at n-dependent sizes: not parallel under add/remove
        refusing = Ledger(epsilon_cap=None, neighbouring="add_remove")
        with pytest.raises(LedgerError, match="not a parallel split under add/remove neighbours"):
            BUILDERS[name](random_state=1, partition=partition).fit(X, _y(name), ledger=refusing, scope="train")
        assert len(refusing) == 0 and refusing.partitions == ()
    ledger = Ledger(epsilon_cap=None)
    est = BUILDERS[name](random_state=1, partition=partition).fit(X, _y(name), ledger=ledger, scope="train")
    T = est.n_estimators
    rows, trees = assign_rows(len(X), T, partition, np.random.default_rng(0))
    assert rows_are_disjoint(rows, len(X)) == (partition == "disjoint")
    if partition == "disjoint":
        assert len(ledger.partitions) == 1
        parent, parts = ledger.partitions[0]
        assert parent == "train" and len(parts) == T
        assert {e.scope for e in ledger.events} == set(parts)
        per_tree = [math.fsum(e.epsilon for e in ledger.events if e.scope == p) for p in parts]
        assert per_tree == [EPSILON] * T  # every tree gets all of ε ...
        assert sorted(est.tree_sizes_) == sorted(np.bincount(trees))  # ... on its own rows
        assert est.tree_sizes_.sum() == len(X)
    else:
        assert ledger.partitions == ()
        assert {e.scope for e in ledger.events} == {"train"}
        assert list(est.tree_sizes_) == [len(X)] * T
    assert ledger.total().epsilon == EPSILON


@pytest.mark.parametrize("name", PARTITIONED)
def test_disjoint_on_a_replace_one_ledger_is_parallel_composition_over_a_positional_split(name: str) -> None:
    X, _, _ = _data()
    ledger = Ledger(epsilon_cap=EPSILON)  # replace_one: parallel composition needs a split by position
    est = BUILDERS[name](random_state=1, partition="disjoint").fit(X, _y(name), ledger=ledger, scope="train")
    [partition] = ledger.to_dict()["partitions"]
    assert partition["parent"] == "train" and partition["split"]["kind"] == "permuted"
    assert partition["split"]["n"] == len(X)  # the drawn split, recorded so it can be redrawn
    assert len(partition["parts"]) == est.n_estimators
    assert ledger.total().epsilon == EPSILON  # not T·ε: the max over the trees
    assert {e.scope for e in ledger.events} == set(partition["parts"])
    standalone = BUILDERS[name](random_state=1).fit(X, _y(name))  # a plain scikit-learn fit: replace-one too
    assert standalone.ledger_.neighbouring == "replace_one"
    assert [e.sensitivity for e in ledger.events] == [a.sensitivity for a in standalone.events_]
    # Every Δ is twice its add/remove-one value (compared where add/remove holds: every tree on every row).
    full = BUILDERS[name](random_state=1, partition="full")
    on_add_remove = full.fit(X, _y(name), ledger=Ledger(epsilon_cap=EPSILON, neighbouring="add_remove")).events_
    on_replace_one = clone(full).fit(X, _y(name), ledger=Ledger(epsilon_cap=EPSILON)).events_
    assert all(r.sensitivity == 2 * a.sensitivity for r, a in zip(on_replace_one, on_add_remove, strict=True))


@pytest.mark.parametrize("name", PARTITIONED)
def test_a_second_disjoint_fit_on_one_ledger_gets_new_parts_and_composes_sequentially(name: str) -> None:
    X, _, _ = _data()
    ledger = Ledger(epsilon_cap=2 * EPSILON)
    BUILDERS[name](random_state=1).fit(X, _y(name), ledger=ledger, scope="train")
    BUILDERS[name](random_state=2).fit(X, _y(name), ledger=ledger, scope="train")
    assert [parent for parent, _ in ledger.partitions] == ["train", "train"]
    assert ledger.total().epsilon == pytest.approx(2 * EPSILON)
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceededError, match="over the cap"):
        BUILDERS[name](random_state=rng).fit(X, _y(name), ledger=ledger, scope="train")
    assert len(ledger.partitions) == 2 and rng.bit_generator.state == state


@pytest.mark.parametrize("name", PARTITIONED)
def test_replace_one_doubles_every_sensitivity_and_noise_scale(name: str) -> None:
    X, _, _ = _data()
    add_remove = Ledger(epsilon_cap=None, neighbouring="add_remove")
    replace_one = Ledger(epsilon_cap=None)
    BUILDERS[name](random_state=1, partition="full").fit(X, _y(name), ledger=add_remove)
    BUILDERS[name](random_state=1, partition="full").fit(X, _y(name), ledger=replace_one)
    assert replace_one.total().epsilon == add_remove.total().epsilon == EPSILON
    for a, r in zip(add_remove.events, replace_one.events, strict=True):
        assert (a.name, a.epsilon) == (r.name, r.epsilon)
        assert r.sensitivity == 2 * a.sensitivity and r.noise_scale == 2 * a.noise_scale


def test_the_recorded_split_follows_the_paper_and_charges_k_medians_sequentially() -> None:
    X, _, target = _data()
    est = BUILDERS["dipreme_regressor"](random_state=0, split_fraction=0.4).fit(X, target)
    first_tree = [e for e in est.events_ if dict(e.details)["tree"] == 0]
    by_name = {e.name: e for e in first_tree}
    assert [e.name for e in first_tree] == ["median_splits", "feature_choice", "leaf_counts", "leaf_sums"]
    assert by_name["median_splits"].epsilon == pytest.approx(EPSILON * 0.4 / 2)
    assert dict(by_name["median_splits"].details)["epsilon_per_median"] == pytest.approx(EPSILON * 0.4 / 2 / (3 * 2))
    # The paper's add/remove-one sensitivities, doubled for the replace-one ledger a plain fit charges.
    assert by_name["feature_choice"].sensitivity == 2 * 1.0  # B² with B = 1
    assert by_name["median_splits"].sensitivity == 2 * 0.5
    assert by_name["leaf_sums"].sensitivity == 2 * 0.5  # B/2 for centred targets
    assert by_name["leaf_counts"].epsilon == pytest.approx(EPSILON * 0.6 / 2)
    one = BUILDERS["dipreme_regressor"](random_state=0).set_params(max_features=1).fit(X, target)
    assert [e.name for e in one.events_[:3]] == ["median_splits", "leaf_counts", "leaf_sums"]


@pytest.mark.parametrize("name", NAMES)
def test_a_plan_over_the_cap_is_refused_before_anything_is_drawn(name: str) -> None:
    X, _, _ = _data()
    ledger = Ledger(epsilon_cap=EPSILON)
    ledger.charge(name="earlier", mechanism="laplace", epsilon=EPSILON / 2)
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    est = BUILDERS[name](random_state=rng)
    with pytest.raises(BudgetExceededError, match="over the cap"):
        est.fit(X, _y(name), ledger=ledger)
    assert [e.name for e in ledger.events] == ["earlier"] and ledger.partitions == ()
    assert rng.bit_generator.state == state
    # scikit-learn's validate_data records the input's shape (n_features_in_) before anything else.
    learned = [a for a in vars(est) if a.endswith("_") and not a.startswith("_") and a != "n_features_in_"]
    assert not learned, "a refused fit left fitted state"


def _bad_settings(name: str) -> list[tuple[dict[str, Any], type[Exception], str]]:
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"epsilon": None}, TypeError, r"epsilon \(None\) must be"),
        ({"epsilon": "1"}, TypeError, r"epsilon \('1'\) must be a finite real number > 0"),
        ({"epsilon": 0.0}, ValueError, r"epsilon \(0.0\) must be a finite real number > 0"),
        ({"epsilon": -1.0}, ValueError, r"epsilon \(-1.0\) must be a finite real number > 0"),
        ({"epsilon": math.nan}, ValueError, r"epsilon \(nan\) must be a finite"),
        ({"max_depth": 0}, ValueError, r"max_depth \(0\) must be an int in \[1, 20\]"),
        ({"max_depth": 2.0}, TypeError, r"max_depth \(2.0\) must be an int in \[1, 20\]"),
        ({"n_estimators": 0}, ValueError, r"n_estimators \(0\) must be an int in \[1, 10000\]"),
        ({"random_state": "seed"}, TypeError, r"random_state \('seed'\) must be None, an int >= 0 or a numpy"),
        ({"feature_bounds": None}, ValueError, r"feature_bounds \(None\) must be given"),
        ({"feature_bounds": [(0.0, 1.0)]}, ValueError, r"feature_bounds .* must be one \(lower, upper\) pair"),
        ({"feature_bounds": [(1.0, 0.0)] * 3}, ValueError, r"feature_bounds\[0\] \(\(1.0, 0.0\)\) must be"),
        ({"categories": {2: (0, 0)}}, ValueError, r"categories\[2\] .* must be 1 to 62 distinct"),
    ]
    if "regressor" in name:
        cases.append(({"target_bounds": None}, TypeError, r"target_bounds \(None\) must be a pair \(lower, upper\)"))
        cases.append(({"target_bounds": (1.0, 0.0)}, ValueError, r"target_bounds \(\(1.0, 0.0\)\) must be a pair"))
    if name.startswith("dipreme"):
        cases.append(({"split_fraction": 1.0}, ValueError, r"split_fraction \(1.0\) must be a finite real number in \(0, 1\)"))
        cases.append(({"max_features": 0}, ValueError, r"max_features \(0\) must be None, 'sqrt' or an int >= 1"))
        cases.append(({"partition": "random"}, ValueError, r"partition \('random'\) must be one of \['disjoint', 'full'\]"))
    if name.startswith("dpdf"):
        cases.append(({"bins": 1}, ValueError, r"bins \(1\) must be an int >= 2"))
    return cases


def _bad_data(name: str) -> list[tuple[np.ndarray, np.ndarray, type[Exception], str]]:
    X, _, _ = _data()
    y = _y(name)
    nan = X.copy()
    nan[3, 1] = np.nan
    outside = X.copy()
    outside[7, 0] = 6.0
    unknown = X.copy()
    unknown[2, 2] = 9.0
    cases = [(nan, y, SchemaError, "NaN"), (outside, y, SchemaError, "X column 0 has values outside its public bounds"),
             (unknown, y, SchemaError, "X column 2 has values outside its declared categories")]
    if "regressor" in name:
        y_out = y.copy()
        y_out[0] = 1.5
        cases.append((X, y_out, SchemaError, "y has values outside target_bounds"))
    else:
        y_out = y.copy()
        y_out[0] = 7
        cases.append((X, y_out, SchemaError, "y has labels outside the declared classes"))
    return cases


@pytest.mark.parametrize("name", NAMES)
def test_bad_settings_and_bad_data_are_refused_before_anything_is_charged(name: str) -> None:
    X, _, _ = _data()
    for settings, error, pattern in _bad_settings(name):
        ledger = Ledger(epsilon_cap=None, neighbouring="add_remove")
        est = BUILDERS[name](random_state=0).set_params(**settings)
        with pytest.raises(error, match=pattern):
            est.fit(X, _y(name), ledger=ledger)
        assert not ledger.events and not ledger.partitions, settings
    for data, y, error, pattern in _bad_data(name):
        ledger = Ledger(epsilon_cap=None, neighbouring="add_remove")
        rng = np.random.default_rng(2)
        state = rng.bit_generator.state
        with pytest.raises(error, match=pattern):
            BUILDERS[name](random_state=rng).fit(data, y, ledger=ledger)
        assert not ledger.events and not ledger.partitions and rng.bit_generator.state == state


# Values that must never appear in a message (issue 30 item 8): scikit-learn printed a 1-D X whole
# and quoted a string that did not convert.
SECRET = 4.271828


def _malformed_data(name: str) -> list[tuple[Any, type[Exception], str]]:
    X, _, _ = _data()
    flat = X[:, 0].copy()
    flat[0] = SECRET
    cube = np.repeat(X[:, :, None], 2, axis=2)
    cube[0, 0, 0] = SECRET
    nan, inf = X.copy(), X.copy()
    nan[5, 1], inf[6, 0] = np.nan, np.inf
    text = X.astype(object)
    text[3, 0] = f"{SECRET}x"
    objects = X.astype(object)
    objects[4, 1] = {"value": SECRET}
    return [(flat, SchemaError, r"X must be a 2-D array \(n_samples, n_features\), got a 1-D array\. Reshape your "
                                r"data"),
            (cube, SchemaError, r"X must be a 2-D array \(n_samples, n_features\), got a 3-D array"),
            (nan, SchemaError, r"X column 1 holds NaN or infinity"),
            (inf, SchemaError, r"X column 0 holds NaN or infinity"),
            (text, SchemaError, r"X holds text that is not a number"),
            (objects, TypeError, r"X must hold numbers: a float\(\) argument must be a string or a real number"),
            (X.tolist()[:3] + [X.tolist()[3][:2]], SchemaError, r"its rows have different lengths")]


@pytest.mark.parametrize("name", NAMES)
def test_malformed_features_and_huge_sizes_are_refused_fast_in_our_words(name: str) -> None:
    for data, error, pattern in _malformed_data(name):
        ledger = Ledger(epsilon_cap=None, neighbouring="add_remove")
        with pytest.raises(error, match=pattern) as raised:
            BUILDERS[name](random_state=0).fit(data, _y(name)[:len(data)], ledger=ledger)
        assert str(SECRET) not in str(raised.value) and "4.27" not in str(raised.value)
        assert not ledger.events
    X, _, _ = _data()
    if "regressor" in name:
        with pytest.raises(SchemaError, match="y holds text that is not a number") as raised:
            BUILDERS[name](random_state=0).fit(X, [f"{SECRET}y"] * len(X))
        assert str(SECRET) not in str(raised.value)
    began = time.perf_counter()
    with pytest.raises(ValueError, match=r"n_estimators \(10000000\) must be an int in \[1, 10000\]"):
        BUILDERS[name](random_state=0).set_params(n_estimators=10**7).fit(X, _y(name))
    deep = BUILDERS[name](random_state=0).set_params(n_estimators=10_000, max_depth=12)
    with pytest.raises(ValueError, match=r"n_estimators × (2\*\*max_depth|5\^max_depth) .* must be at most"):
        deep.fit(X, _y(name))
    assert time.perf_counter() - began < 2.0


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith(("dipreme", "dpert"))] + ["dpdf_classifier"])
def test_trees_that_each_hold_every_record_are_bounded_without_stating_the_count(name: str) -> None:
    X, _, _ = _data()
    many = np.repeat(X, 150, axis=0)  # 36,000 records × 1,000 trees > MAX_PAIRS
    y = np.repeat(_y(name), 150)
    est = BUILDERS[name](random_state=0).set_params(n_estimators=1_000, max_depth=1)
    if "partition" in est.get_params():
        est.set_params(partition="full")
    with pytest.raises(ValueError, match=r"n_estimators \(1000\) × the number of records must be at most") as raised:
        est.fit(many, y)
    assert "36000" not in str(raised.value) and "36,000" not in str(raised.value)


@pytest.mark.parametrize("name", NAMES)
def test_unfitted_same_seed_other_seed_and_no_copy_of_the_data(name: str) -> None:
    X, _, _ = _data()
    y = _y(name)
    with pytest.raises(NotFittedError, match="not fitted; call fit"):
        BUILDERS[name]().predict(X)
    assert issubclass(ForestNotFittedError, NotFittedError)
    first = BUILDERS[name](random_state=7).fit(X, y).predict(X)
    assert np.array_equal(first, BUILDERS[name](random_state=7).fit(X, y).predict(X))
    def output(est: Any) -> np.ndarray:
        return est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)

    assert not np.array_equal(output(BUILDERS[name](random_state=8).fit(X, y)),
                              output(BUILDERS[name](random_state=7).fit(X, y)))
    before = X.copy()
    fitted = BUILDERS[name](random_state=7).fit(X, y)
    assert np.array_equal(X, before)
    arrays = [v for v in vars(fitted).values() if isinstance(v, np.ndarray)]
    if hasattr(fitted, "trees_"):
        arrays += [fitted.trees_.threshold]
    for array in arrays:
        for column in X.T[:2]:  # real-valued columns: no fitted array holds their values
            assert np.isin(column, array).mean() < 0.05


def test_the_non_private_median_forest_charges_nothing_and_needs_no_bounds() -> None:
    X, labels, _ = _data()
    est = MedianForestClassifier(max_depth=3, n_estimators=3, random_state=0).fit(X, labels)
    assert not hasattr(est, "ledger_") and est.score(X, labels) > 0.8


def test_dpert_in_release_mode_charges_lattice_laplace_and_refuses_labels_read_from_the_data(tmp_path: Path) -> None:
    X, labels, _ = _data()
    context = {"spec_sha256": "00", "data_sha256": "11"}
    with TranscriptWriter(tmp_path / "fit.transcript", context=context) as writer:
        ledger = Ledger(epsilon_cap=EPSILON)
        est = BUILDERS["dpert_classifier"]().fit(X, labels, ledger=ledger, source=SecureSource(writer))
        assert {e.mechanism for e in ledger.events} == {"laplace_lattice"}
        assert all(e.noise_scale >= p.noise_scale for e, p in zip(  # padded for the lattice
            ledger.events, est.planned_events(3, neighbouring="replace_one"), strict=True))
        assert ledger.total().epsilon == EPSILON and writer.count > 0
        drawn = writer.count
        refused = Ledger(epsilon_cap=EPSILON)
        with pytest.raises(ModeError, match=r"classes \(None\) must be declared in release mode"):
            BUILDERS["dpert_classifier"]().set_params(classes=None).fit(X, labels, ledger=refused,
                                                                       source=SecureSource(writer))
        assert not refused.events and writer.count == drawn
        with pytest.raises(ModeError, match="research-only"):
            BUILDERS["dipreme_classifier"]().fit(X, labels, ledger=refused, source=SecureSource(writer))
        assert not refused.events and writer.count == drawn
