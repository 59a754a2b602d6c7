"""The contract of everything that fits on private data and releases something (issue 9 item 5).

Every concrete :class:`~privlab.platform.dp.estimator.PrivateEstimator` in privlab — the tabular
synthesizers of the release scheme, the pMSE paper's mechanism and baselines, the plausible-
deniability model and its Table 4 DP classifiers (DP-ERM), the DiPriMe forests, DP-ERT, the
non-private median forests and DP-DF (scikit-learn-style keyword estimators) — needs a case below (``test_every_estimator_has_a_contract_case`` finds them by importing every module of
``privlab.mechanisms``), and each case is held to the same protocol:

* not fitted → :class:`NotFittedError` naming the call that fits;
* the ledger receives exactly the plan (computed from public inputs), on the fit's scope or the
  parts of a partition of it the fit declared by record position, and ``events_`` keeps it;
* a plan over the cap is refused before anything is charged or drawn;
* bad data is refused before anything is charged;
* a research-only estimator is refused in release mode before anything is charged or drawn,
  and a release-safe one charges its plan with the release samplers;
* same seed → same output, another fit seed or sampling seed → another output;
* ``fit`` does not change its input and keeps no reference to it; a refit replaces the state.

Family-specific properties (codes over a domain, hand-derived sensitivities, the pMSE paper's
formulas) stay in ``test_synthesizer_contract.py`` and ``test_pmse_*.py``.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import privlab.mechanisms
from privlab.mechanisms.dipreme.dpdf import DPDFClassifier
from privlab.mechanisms.dipreme.forest import (DiPriMeClassifier, DiPriMeRegressor, DPERTClassifier, DPERTRegressor,
                                               MedianForestClassifier, MedianForestRegressor)
from privlab.mechanisms.plausible_deniability.dp_erm import DPLinearClassifier, DPLinearClassifierParams
from privlab.mechanisms.plausible_deniability.model import (
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.pmse.bppd import BPPDParams, BPPDSynthesizer, NoisyBPPDParams, NoisyBPPDSynthesizer
from privlab.mechanisms.pmse.functional_mechanism import FunctionalMechanismParams, FunctionalMechanismSynthesizer
from privlab.mechanisms.pmse.mechanism import PMSEMechanism, PMSEMechanismParams
from privlab.mechanisms.pmse.smooth_histogram import SmoothHistogramParams, SmoothHistogramSynthesizer
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian
from privlab.mechanisms.synthesizers.base import synthesizer_class, synthesizer_from_spec
from privlab.mechanisms.synthesizers.network_model import BayesianNetworkModel
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import BudgetExceededError, ModeError, NotFittedError, SchemaError
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.plan_conformance import ZCDP_FILTER, check_conforms
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource, SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter

# --- cases -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """How to drive one estimator through the protocol.

    Attributes:
        build: a new, unfitted estimator.
        data: the private training data (a fresh copy on every call).
        fit: ``fit(estimator, data, ledger, source, scope)`` in the family's signature.
        plan: ``plan(estimator, data, scope)``, the events ``fit`` must record.
        bad_data: data the estimator must refuse, with the error and a message fragment.
        output: ``output(estimator, n, rng)``, what the fitted estimator releases, as a frame
            of ``n`` rows drawn with ``rng``; ``None`` for ``estimator.sample(n, rng=rng)``.
            A classifier releases its decision values at ``n`` public records drawn from the
            domain with ``rng``.
    """

    build: Callable[[], PrivateEstimator]
    data: Callable[[], pd.DataFrame]
    fit: Callable[[PrivateEstimator, Any, Ledger, RandomSource, str], PrivateEstimator]
    plan: Callable[[PrivateEstimator, Any, str], list[PrivacyEvent]]
    bad_data: tuple[tuple[Any, type[Exception], str], ...]
    output: Callable[[PrivateEstimator, int, np.random.Generator], pd.DataFrame] | None = None
    ledger: Callable[[float | None], Ledger] = lambda cap: Ledger(epsilon_cap=cap)
    """A ledger capped at ε (``None``: uncapped) that can account for the estimator's steps."""


DOMAIN = Domain(tuple(ColumnDomain(name=n, labels=tuple(f"{n}{i}" for i in range(k)))
                      for n, k in (("a", 3), ("b", 4), ("c", 2))))
TABULAR_EPSILON = 1.3


def _codes(n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(2024)
    truth = BayesianNetworkModel(
        domain=DOMAIN,
        network=(("a", ()), ("b", ("a",)), ("c", ("b",))),
        conditionals=(rng.dirichlet(np.ones(3), 1), rng.dirichlet(np.ones(4), 3), rng.dirichlet(np.ones(2), 4)),
    )
    codes = truth.sample_codes(n, np.random.default_rng(7))
    return pd.DataFrame({name: codes[j] for j, name in enumerate(DOMAIN.names)})


ZCDP_DELTA = 1e-6
ZCDP = ("mst", "aim")
"""Estimators budgeted in zCDP (Gaussian noise): fitted on a zcdp ledger read at ZCDP_DELTA."""


def _zcdp_ledger(cap: float | None) -> Ledger:
    return Ledger(epsilon_cap=cap, delta_cap=None if cap is None else ZCDP_DELTA, accountant="zcdp",
                  delta_slack=ZCDP_DELTA)


def _zcdp_case(name: str, params: Mapping[str, Any]) -> Case:
    case = _tabular_case(name, params)
    return dataclasses.replace(
        case, ledger=_zcdp_ledger,
        plan=lambda est, data, scope: est.planned_events(TABULAR_EPSILON, DOMAIN, len(data), scope=scope,
                                                         delta=ZCDP_DELTA))


def _tabular_case(name: str, params: Mapping[str, Any]) -> Case:
    out_of_domain = _codes()
    out_of_domain.loc[5, "b"] = 4
    with_nan = _codes().astype(float)
    with_nan.loc[3, "a"] = np.nan
    return Case(
        build=lambda: synthesizer_from_spec(name, params, where="contract"),
        data=_codes,
        fit=lambda est, data, ledger, source, scope: est.fit(
            data, domain=DOMAIN, epsilon=TABULAR_EPSILON, ledger=ledger, source=source, scope=scope),
        plan=lambda est, data, scope: est.planned_events(TABULAR_EPSILON, DOMAIN, len(data), scope=scope),
        bad_data=((out_of_domain, SchemaError, "column 'b'"), (with_nan, SchemaError, "column 'a'"),
                  (_codes().drop(columns="c"), SchemaError, "missing column")),
    )


LOWER, UPPER = (-4.0, -5.0), (8.0, 14.0)


def _numeric(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    x1 = rng.normal(2.0, 1.5, n)
    return pd.DataFrame({"x1": x1, "x2": 1.0 + 0.8 * x1 + rng.normal(0.0, 1.0, n)})


def _continuous_case(build: Callable[[], PrivateEstimator], *, bounded: bool) -> Case:
    with_nan = _numeric()
    with_nan.iloc[3, 1] = np.nan
    bad: list[tuple[Any, type[Exception], str]] = [(with_nan, SchemaError, "finite"),
                                                   (_numeric().astype(str), SchemaError, "must be numeric")]
    if bounded:
        bad.append((_numeric().assign(x3=1.0), SchemaError, "3 column"))
    return Case(
        build=build,
        data=_numeric,
        fit=lambda est, data, ledger, source, scope: est.fit(data, ledger=ledger, source=source, scope=scope),
        plan=lambda est, data, scope: est.planned_events(len(data), data.shape[1], scope=scope),
        bad_data=tuple(bad),
    )


def _plausible_deniability_case() -> Case:
    """D_T and D_P are the halves of a seeded permutation of the data's positions, which the model
    reads through the split (the split itself is tested in test_plausible_deniability_model.py);
    basic accounting, as the contract's ledgers are basic."""
    def halves(n: int) -> PositionalSplit:
        return PositionalSplit.permuted(n, [n // 2, n - n // 2], rng=np.random.default_rng(n))

    def fit(est: Any, data: pd.DataFrame, ledger: Ledger, source: RandomSource, scope: str) -> Any:
        return est.fit(data, split=halves(len(data)), domain=DOMAIN, ledger=ledger, source=source, scope=scope)

    def plan(est: Any, data: pd.DataFrame, scope: str) -> list[PrivacyEvent]:
        return est.planned_events(DOMAIN, len(data) // 2, len(data) - len(data) // 2, scope=scope)

    base = _tabular_case("independent_marginals", {})
    return Case(
        build=lambda: PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(
            epsilon=TABULAR_EPSILON, accountant="basic", maxcost=8)),
        data=_codes, fit=fit, plan=plan, bad_data=base.bad_data)


def _dp_erm_case(**params: Any) -> Case:
    """The Table 4 baselines (DP logistic regression / Huber SVM) predicting ``c``."""
    def public_records(n: int, rng: np.random.Generator) -> pd.DataFrame:
        return pd.DataFrame({c.name: rng.integers(0, c.size, n) for c in DOMAIN})

    base = _tabular_case("independent_marginals", {})
    return Case(
        build=lambda: DPLinearClassifier(DPLinearClassifierParams(epsilon=TABULAR_EPSILON, **params)),
        data=_codes,
        fit=lambda est, data, ledger, source, scope: est.fit(
            data, domain=DOMAIN, target="c", ledger=ledger, source=source, scope=scope),
        plan=lambda est, data, scope: est.planned_events(DOMAIN, len(data), target="c", scope=scope),
        bad_data=base.bad_data,
        output=lambda est, n, rng: pd.DataFrame({"decision": est.decision_function(public_records(n, rng))}))


FOREST_BOUNDS = [(-6.0, 6.0), (-6.0, 6.0), (0.0, 1.0)]
FOREST_CATEGORIES = {2: (0, 1, 2, 3)}
FOREST_COLUMNS = ["x1", "x2", "c"]


def _forest_frame(n: int = 240) -> pd.DataFrame:
    rng = np.random.default_rng(19)
    x1 = np.clip(rng.normal(0.0, 1.5, n), -6, 6)
    x2 = np.clip(rng.normal(1.0, 1.0, n), -6, 6)
    c = rng.integers(0, 4, n)
    label = (x1 + 0.5 * c > 0.7).astype(np.int64)
    target = np.clip(0.5 + 0.1 * x1 + 0.05 * c + rng.normal(0.0, 0.05, n), 0.0, 1.0)
    return pd.DataFrame({"x1": x1, "x2": x2, "c": c.astype(float), "label": label, "target": target})


def _forest_case(build: Callable[[], Any], *, regression: bool, bounded_target: bool = True) -> Case:
    """A scikit-learn-style forest: X = (x1, x2, c) inside public bounds, y = a label or a target
    in [0, 1]; it releases its predictions (class-1 probabilities or values) at public records."""
    label = "target" if regression else "label"

    def fit(est: Any, data: pd.DataFrame, ledger: Ledger, source: RandomSource, scope: str) -> Any:
        return est.fit(data[FOREST_COLUMNS].to_numpy(dtype=float), data[label].to_numpy(), ledger=ledger,
                       scope=scope, source=source)

    def plan(est: Any, data: pd.DataFrame, scope: str) -> list[PrivacyEvent]:
        return est.planned_events(len(FOREST_COLUMNS), neighbouring="replace_one", scope=scope)

    def output(est: Any, n: int, rng: np.random.Generator) -> pd.DataFrame:
        X = np.column_stack([rng.uniform(-6, 6, n), rng.uniform(-6, 6, n), rng.integers(0, 4, n)]).astype(float)
        return pd.DataFrame({"prediction": est.predict(X) if regression else est.predict_proba(X)[:, 1]})

    nan, outside, unknown, bad_y = (_forest_frame() for _ in range(4))
    nan.loc[3, "x2"] = np.nan
    outside.loc[7, "x1"] = 7.0
    unknown.loc[2, "c"] = 9.0
    bad_y.loc[0, label] = 1.5 if regression else 7
    return Case(build=build, data=_forest_frame, fit=fit, plan=plan, output=output,
                bad_data=((nan, SchemaError, "NaN"), (outside, SchemaError, "X column 0 has values outside"),
                          (unknown, SchemaError, "X column 2 has values outside its declared categories"),
                          *([(bad_y, SchemaError, "y has")] if bounded_target else [])))


FOREST_SETTINGS = {"max_depth": 3, "n_estimators": 4, "feature_bounds": FOREST_BOUNDS, "categories": FOREST_CATEGORIES}
CLASSES = {"classes": [0, 1]}
TARGET_BOUNDS = {"target_bounds": (0.0, 1.0)}

CASES: dict[str, Case] = {
    "dipreme_classifier": _forest_case(lambda: DiPriMeClassifier(epsilon=2.0, **FOREST_SETTINGS, **CLASSES),
                                       regression=False),
    "dipreme_regressor": _forest_case(lambda: DiPriMeRegressor(epsilon=2.0, max_features=2, **FOREST_SETTINGS,
                                                               **TARGET_BOUNDS), regression=True),
    "dpert_classifier": _forest_case(lambda: DPERTClassifier(epsilon=2.0, **FOREST_SETTINGS, **CLASSES),
                                     regression=False),
    "dpert_regressor": _forest_case(lambda: DPERTRegressor(epsilon=2.0, partition="full", **FOREST_SETTINGS,
                                                           **TARGET_BOUNDS), regression=True),
    "median_forest_classifier": _forest_case(lambda: MedianForestClassifier(**FOREST_SETTINGS, **CLASSES),
                                             regression=False),
    "median_forest_regressor": _forest_case(lambda: MedianForestRegressor(**FOREST_SETTINGS), regression=True,
                                            bounded_target=False),
    "dpdf_classifier": _forest_case(lambda: DPDFClassifier(epsilon=2.0, max_depth=2, n_estimators=3, **CLASSES,
                                                           feature_bounds=FOREST_BOUNDS,
                                                           categories=FOREST_CATEGORIES), regression=False),
    "privbayes": _tabular_case("privbayes", {"epsilon_split": 0.3, "degree": 1}),
    "independent_marginals": _tabular_case("independent_marginals", {}),
    "mst": _zcdp_case("mst", {"iters": 30}),
    "aim": _zcdp_case("aim", {"max_iters": 20, "rounds": 6, "workload_degree": 2}),
    "plausible_deniability_model": _plausible_deniability_case(),
    "dp_erm_classifier": _dp_erm_case(regularization=0.01, loss="huber", perturbation="output"),
    "bppd": _continuous_case(lambda: BPPDSynthesizer(BPPDParams(datasets=2)), bounded=False),
    "noisy_bppd": _continuous_case(
        lambda: NoisyBPPDSynthesizer(NoisyBPPDParams(epsilon=1.0, lower=LOWER, upper=UPPER, datasets=3)),
        bounded=True),
    "smooth_histogram": _continuous_case(
        lambda: SmoothHistogramSynthesizer(SmoothHistogramParams(epsilon=1.0, lower=LOWER, upper=UPPER, bins=4)),
        bounded=True),
    "functional_mechanism": _continuous_case(
        lambda: FunctionalMechanismSynthesizer(FunctionalMechanismParams(
            epsilon=1.0, lower=LOWER, upper=UPPER, marginal_fraction=0.4)),
        bounded=True),
    "pmse_mechanism": _continuous_case(
        lambda: PMSEMechanism(PMSEMechanismParams(epsilon=1.0, releases=2, burn_in=3, thinning=1, max_depth=2),
                              model=SequentialLinearGaussian(2)),
        bounded=False),
}
"""One case per concrete estimator class, keyed by its ``name``."""

NAMES = sorted(CASES)
DP_NAMES = [name for name in NAMES
            if name in ZCDP or CASES[name].plan(CASES[name].build(), CASES[name].data(), "data")]
# MST's and AIM's fits compile Private-PGM's JAX programs (seconds each): with the slow tests,
# and skipped without the pgm extra.
_PGM_MARKS = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("mbi") is None,
                                                   reason="MST and AIM need Private-PGM: pip install -e '.[pgm]'")]
CASE_PARAMS = [pytest.param(name, marks=_PGM_MARKS if name in ZCDP else ()) for name in NAMES]
DP_CASE_PARAMS = [pytest.param(name, marks=_PGM_MARKS if name in ZCDP else ()) for name in DP_NAMES]


def _conforms(spent: Any, plan: list[PrivacyEvent], *, exact_sensitivity: bool) -> None:
    """``spent`` is ``plan``: equal, or (a plan with a zCDP filter, AIM's rounds) conforming to it."""
    if any(event.mechanism == ZCDP_FILTER for event in plan):
        check_conforms(list(spent), plan, who="contract", exact_sensitivity=exact_sensitivity)
    else:
        assert list(spent) == plan


def _concrete_estimators() -> set[type[PrivateEstimator]]:
    for module in pkgutil.walk_packages(privlab.mechanisms.__path__, prefix="privlab.mechanisms."):
        importlib.import_module(module.name)
    found, stack = set(), list(PrivateEstimator.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if not inspect.isabstract(cls) and cls.__module__.startswith("privlab."):
            found.add(cls)
    return found


def _fit_scopes(ledger: Ledger, scope: str) -> set[str]:
    """``scope`` and the parts of the partitions of it that a fit declared (a disjoint forest's
    trees), recursively."""
    scopes = {scope}
    for parent, parts in ledger.partitions:
        if parent in scopes:
            scopes.update(parts)
    return scopes


def _output(name: str, estimator: PrivateEstimator, n: int, rng: np.random.Generator) -> pd.DataFrame:
    output = CASES[name].output
    return estimator.sample(n, rng=rng) if output is None else output(estimator, n, rng)


def _seeded(seed: int) -> SeededSource:
    return SeededSource(np.random.default_rng(seed))


def _fitted(name: str, *, seed: int = 3, data: Any = None, ledger: Ledger | None = None,
            scope: str = "data") -> tuple[PrivateEstimator, Ledger]:
    case = CASES[name]
    ledger = case.ledger(None) if ledger is None else ledger
    estimator = case.fit(case.build(), case.data() if data is None else data, ledger, _seeded(seed), scope)
    return estimator, ledger


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[TranscriptWriter]:
    with TranscriptWriter(tmp_path / "fit.transcript", context={"spec_sha256": "00", "data_sha256": "11"}) as w:
        yield w


# --- coverage ----------------------------------------------------------------------------------


def test_every_estimator_has_a_contract_case() -> None:
    classes = {cls.name: cls for cls in _concrete_estimators()}
    assert sorted(classes) == NAMES, "add a case to CASES for every concrete PrivateEstimator"
    for name in NAMES:
        if name in ZCDP and importlib.util.find_spec("mbi") is None:
            continue  # building one says to install the pgm extra (tests/test_pgm_synthesizers.py)
        assert type(CASES[name].build()) is classes[name]
    assert classes["privbayes"] is synthesizer_class("privbayes")


# --- protocol ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_an_unfitted_estimator_says_how_to_fit_it(name: str) -> None:
    estimator = CASES[name].build()
    assert not estimator.is_fitted and "not fitted" in repr(estimator)
    with pytest.raises(NotFittedError, match="not fitted; call fit"):
        _output(name, estimator, 10, np.random.default_rng(0))
    if estimator.Params is not None:
        assert estimator.get_params() == dataclasses.asdict(estimator.params)
    else:  # a keyword estimator: its __init__ arguments, as scikit-learn's get_params
        assert estimator.get_params(deep=False) == estimator.params
        assert sorted(estimator.get_params()) == sorted(inspect.signature(type(estimator)).parameters)
        assert set(estimator._parameter_constraints) == set(estimator.get_params())
    again = clone(estimator).set_params(**{k: v for k, v in estimator.get_params().items() if "__" not in k})
    assert type(again) is type(estimator) and again.get_params() == estimator.get_params()
    with pytest.raises(ValueError, match="Invalid parameter 'no_such_parameter'"):
        estimator.set_params(no_such_parameter=1)


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_the_ledger_receives_exactly_the_plan(name: str) -> None:
    case = CASES[name]
    estimator, ledger = _fitted(name, scope="births")
    plan = case.plan(estimator, case.data(), "births")
    _conforms(ledger.events, plan, exact_sensitivity=True)
    assert estimator.events_ == tuple(ledger.events)
    assert all(event.scope in _fit_scopes(ledger, "births") for event in plan)
    assert all(isinstance(ledger.split_of(parent, parts), PositionalSplit) for parent, parts in ledger.partitions)
    assert estimator.is_fitted and "not fitted" not in repr(estimator)
    # Public inputs only: the plan is the same for other data of the same shape.
    other = case.data().sample(frac=1.0, random_state=1).reset_index(drop=True)
    assert case.plan(case.build(), other, "births") == plan


@pytest.mark.parametrize("name", DP_CASE_PARAMS)
def test_a_plan_over_the_cap_is_refused_before_anything_is_drawn(name: str) -> None:
    case = CASES[name]
    total = _fitted(name)[1].total().epsilon  # the plan's total as the ledger composes it
    assert total > 0
    ledger = case.ledger(total)
    ledger.charge(name="earlier", mechanism="laplace", epsilon=total / 2)
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    estimator = case.build()
    with pytest.raises(BudgetExceededError, match="over the cap"):
        case.fit(estimator, case.data(), ledger, SeededSource(rng), "data")
    assert [e.name for e in ledger.events] == ["earlier"]
    assert rng.bit_generator.state == state
    assert not estimator.is_fitted


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_bad_data_is_refused_before_anything_is_charged(name: str) -> None:
    case = CASES[name]
    for data, error, fragment in case.bad_data:
        ledger = case.ledger(None)
        rng = np.random.default_rng(1)
        state = rng.bit_generator.state
        estimator = case.build()
        with pytest.raises(error, match=fragment):
            case.fit(estimator, data, ledger, SeededSource(rng), "data")
        assert not ledger.events and rng.bit_generator.state == state and not estimator.is_fitted


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_wrong_ledger_or_source_types_are_refused(name: str) -> None:
    case = CASES[name]
    with pytest.raises(TypeError, match="must be a RandomSource"):
        case.fit(case.build(), case.data(), Ledger(epsilon_cap=None), np.random.default_rng(0), "data")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a privlab Ledger"):
        case.fit(case.build(), case.data(), None, _seeded(0), "data")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_release_mode_is_refused_or_charges_the_plan_with_release_samplers(
    name: str, writer: TranscriptWriter
) -> None:
    case = CASES[name]
    estimator = case.build()
    ledger = case.ledger(None)
    source = SecureSource(writer)
    if not estimator.release_safe:
        with pytest.raises(ModeError, match="research-only"):
            case.fit(estimator, case.data(), ledger, source, "data")
        assert not ledger.events and writer.count == 0 and not estimator.is_fitted
        return
    case.fit(estimator, case.data(), ledger, source, "data")
    plan = case.plan(estimator, case.data(), "data")
    if any(event.mechanism == ZCDP_FILTER for event in plan):
        _conforms(ledger.events, plan, exact_sensitivity=False)
    else:
        assert [(e.name, e.epsilon, e.sensitivity, e.scope) for e in ledger.events] == \
            [(e.name, e.epsilon, e.sensitivity, e.scope) for e in plan]
    assert writer.count > 0  # every DP draw came from the CSPRNG and is in the transcript
    sample = _output(name, estimator, 20, source.generator(purpose="sample"))
    assert len(sample) >= 20


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_same_seed_same_output_other_seeds_other_output(name: str) -> None:
    first, _ = _fitted(name, seed=7)
    again, _ = _fitted(name, seed=7)
    other, _ = _fitted(name, seed=8)
    sample = _output(name, first, 300, np.random.default_rng(1))
    pd.testing.assert_frame_equal(sample, _output(name, again, 300, np.random.default_rng(1)))
    assert not sample.equals(_output(name, other, 300, np.random.default_rng(1)))
    assert not sample.equals(_output(name, first, 300, np.random.default_rng(2)))


def _reachable(root: object) -> Iterator[object]:
    """Every object reachable from ``root`` through attributes, containers and slots."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if type(obj).__module__.startswith(("jax", "jaxlib")) and hasattr(obj, "shape") and hasattr(obj, "__array__"):
            yield np.asarray(obj)  # a JAX array (Private-PGM's model): checked as the NumPy array it holds
            continue
        yield obj
        if isinstance(obj, (str, bytes, int, float, bool, type(None), np.ndarray, np.generic, type)):
            continue
        if isinstance(obj, Mapping):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        if hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())
        for slot in getattr(type(obj), "__slots__", ()):
            try:
                if hasattr(obj, slot):
                    stack.append(getattr(obj, slot))
            except TypeError:  # a slot descriptor of a base class that does not apply (C types)
                continue


def _holds_a_copy(array: np.ndarray, column: np.ndarray) -> bool:
    """Whether ``array`` holds ``column`` (length n) as a row or column, or, for real-valued
    data (whose values are distinct), most of its values anywhere."""
    n = len(column)
    if array.size < n:
        return False
    if np.issubdtype(column.dtype, np.floating) and np.issubdtype(array.dtype, np.floating):
        return float(np.isin(column, array).mean()) > 0.5
    lines = [array] if array.ndim == 1 else [*array, *array.T] if array.ndim == 2 else []
    return any(line.shape == column.shape and np.array_equal(line, column) for line in lines)


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_fit_leaves_its_input_alone_and_keeps_no_reference_to_it(name: str) -> None:
    frame = CASES[name].data()
    frame.index = pd.Index(np.arange(len(frame)) * 3 + 100)
    before = frame.copy(deep=True)
    columns = [frame[c].to_numpy() for c in frame.columns]
    estimator, _ = _fitted(name, data=frame)
    pd.testing.assert_frame_equal(frame, before)
    reachable = list(_reachable(estimator))
    assert not any(isinstance(obj, (pd.DataFrame, pd.Series, pd.Index)) for obj in reachable)
    arrays = [obj for obj in reachable if isinstance(obj, np.ndarray)]
    assert arrays, "the fitted estimator should hold its released state"
    assert not any(np.shares_memory(a, c) for a in arrays for c in columns)
    assert not any(_holds_a_copy(a, c) for a in arrays for c in columns), "a copy of the data is kept"
    gc.collect()
    reachable_ids = {id(obj) for obj in reachable}
    assert not any(id(ref) in reachable_ids for ref in gc.get_referrers(frame))
    for column in columns:
        assert not any(id(ref) in reachable_ids for ref in gc.get_referrers(column))


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_a_refit_replaces_the_previous_state(name: str) -> None:
    estimator, _ = _fitted(name, seed=5)
    first = _output(name, estimator, 100, np.random.default_rng(0))
    ledger = CASES[name].ledger(None)
    half = CASES[name].data().iloc[::2].reset_index(drop=True)
    CASES[name].fit(estimator, half, ledger, _seeded(6), "second")
    assert estimator.events_ == tuple(ledger.events)
    assert all(event.scope in _fit_scopes(ledger, "second") for event in estimator.events_)
    assert not first.equals(_output(name, estimator, 100, np.random.default_rng(0)))
