"""What every registered synthesizer keeps beyond the estimator contract (CONVENTIONS §5).

The protocol every estimator keeps (budget refused before anything is drawn, no reference to
the data, refits, release mode) is tested once for all of them in
``test_estimator_contract.py``. Here, parametrised over :func:`synthesizer_names`, each with the
example hyperparameters below (a new synthesizer must add its examples here, or
``test_every_registered_synthesizer_has_examples`` fails): the registry and spec
configuration; same seed → same model; the ledger is charged exactly the declared ε for any ε,
with research-mode scales; bad inputs over a domain raise clear errors; samples are valid codes
over the domain; release mode records the release samplers; sensitivities and noise scales
equal hand-derived values. Every random quantity is a deterministic function of a fixed seed.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.synthesizers.base import (
    NotFittedError,
    Synthesizer,
    register_synthesizer,
    synthesizer_class,
    synthesizer_from_spec,
    synthesizer_names,
)
from privlab.mechanisms.synthesizers.network_model import BayesianNetworkModel
from privlab.mechanisms.synthesizers.privbayes_scores import mutual_information, r_score
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import RegistryError, SchemaError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter

EXAMPLES: dict[str, list[dict[str, Any]]] = {
    "privbayes": [
        {"epsilon_split": 0.3, "degree": 2},
        {"epsilon_split": 0.5, "theta": 4.0, "score": "r"},
    ],
    "independent_marginals": [{}],
    "mst": [{"iters": 50}],
    "aim": [{"max_iters": 30, "rounds": 6, "workload_degree": 2}],
}

BAD_CONFIGS: dict[str, list[dict[str, Any]]] = {
    "privbayes": [
        {"epsilon_split": 0.3},  # neither theta nor degree
        {"epsilon_split": 0.3, "degree": 2, "theta": 4.0},  # both
        {"degree": 2},  # epsilon_split missing
        {"epsilon_split": 0.0, "degree": 2},
        {"epsilon_split": 1.0, "degree": 2},
        {"epsilon_split": float("nan"), "degree": 2},
        {"epsilon_split": True, "degree": 2},
        {"epsilon_split": 0.5, "degree": 0},
        {"epsilon_split": 0.5, "degree": 2.5},
        {"epsilon_split": 0.5, "theta": -1.0},
        {"epsilon_split": 0.5, "theta": float("inf")},
        {"epsilon_split": 0.5, "degree": 2, "score": "bic"},
        {"epsilon_split": 0.5, "degree": 2, "max_candidates": 0},
        {"epsilon_split": 0.5, "degree": 2, "max_table_cells": 0},
        {"epsilon_split": 0.5, "degree": 2, "epsilon": 1.0},  # unknown key (ε is a fit argument)
        {"epsilon_split": 0.5, "degre": 2},  # typo
    ],
    "independent_marginals": [{"epsilon": 1.0}, {"epsilon_split": 0.5}],
    "mst": [{"iters": 0}, {"max_model_size": 0.0}, {"iters": 1.5}, {"degree": 2}],
    "aim": [{"rounds": 1}, {"max_model_size": -1.0}, {"max_iters": 0}, {"workload_degree": 0},
            {"workload": "a,,;"}, {"workload": "a,a"}, {"epsilon": 1.0}],
}

ZCDP = {"mst", "aim"}
"""Synthesizers budgeted in zCDP (Gaussian noise): fitted on a zcdp ledger read at DELTA."""
DELTA = 1e-6


def _has_mbi() -> bool:
    from privlab.mechanisms.synthesizers import pgm

    return pgm.installed()


# A zCDP synthesizer's fit compiles Private-PGM's JAX programs (seconds each): those cases run
# with the slow tests, and are skipped without the pgm extra.
_PGM_MARKS = [pytest.mark.slow, pytest.mark.skipif(not _has_mbi(), reason="MST and AIM need Private-PGM: "
                                                   "pip install -e '.[pgm]' (CI installs it with [dev])")]

CASES = [
    pytest.param(name, params, id=f"{name}-{i}", marks=_PGM_MARKS if name in ZCDP else [])
    for name in synthesizer_names()
    for i, params in enumerate(EXAMPLES.get(name, []))
]
BAD_CASES = [
    pytest.param(name, params, id=f"{name}-bad{i}")
    for name in synthesizer_names()
    for i, params in enumerate(BAD_CONFIGS.get(name, []))
]
CONTEXT = {"spec_sha256": "00", "data_sha256": "11"}
N = 1500
EPSILON = 1.3


def _domain() -> Domain:
    def column(name: str, size: int) -> ColumnDomain:
        return ColumnDomain(name=name, labels=tuple(f"{name}{i}" for i in range(size)))

    return Domain((column("a", 3), column("b", 4), column("c", 2), column("d", 5)))


def _truth(domain: Domain) -> BayesianNetworkModel:
    """a → b → d, c | a: strong dependencies, every cell reachable."""
    rng = np.random.default_rng(2024)

    def table(rows: int, k: int) -> np.ndarray:
        return rng.dirichlet(np.full(k, 0.6), size=rows)

    return BayesianNetworkModel(
        domain=domain,
        network=(("a", ()), ("b", ("a",)), ("c", ("a",)), ("d", ("b",))),
        conditionals=(table(1, 3), table(3, 4), table(3, 2), table(4, 5)),
    )


@pytest.fixture(scope="module")
def domain() -> Domain:
    return _domain()


@pytest.fixture(scope="module")
def data(domain: Domain) -> pd.DataFrame:
    codes = _truth(domain).sample_codes(N, np.random.default_rng(7))
    return pd.DataFrame({name: codes[j] for j, name in enumerate(domain.names)})


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[TranscriptWriter]:
    with TranscriptWriter(tmp_path / "fit.transcript", context=CONTEXT) as w:
        yield w


def _ledger(name: str, epsilon: float | None) -> Ledger:
    """A ledger capped at ``epsilon``: basic for pure-ε synthesizers, zcdp at DELTA for zCDP ones."""
    if name in ZCDP:
        return Ledger(epsilon_cap=epsilon, delta_cap=None if epsilon is None else DELTA, accountant="zcdp",
                      delta_slack=DELTA)
    return Ledger(epsilon_cap=epsilon)


def _model_arrays(synth: Synthesizer) -> list[np.ndarray]:
    """What a fit learned, as arrays: PrivBayes' conditionals, or the noisy measurements."""
    if hasattr(synth, "measurements_"):
        return [np.asarray(y) for _, y, _ in synth.measurements_]
    return list(synth.model_.conditionals)


def _build(name: str, params: Mapping[str, Any]) -> Synthesizer:
    return synthesizer_from_spec(name, params, where="test")


def _fit(
    name: str,
    params: Mapping[str, Any],
    data: pd.DataFrame,
    domain: Domain,
    *,
    seed: int = 11,
    epsilon: float = EPSILON,
    ledger: Ledger | None = None,
) -> tuple[Synthesizer, Ledger]:
    ledger = _ledger(name, epsilon) if ledger is None else ledger
    synth = _build(name, params).fit(
        data, domain=domain, epsilon=epsilon, ledger=ledger, source=SeededSource(np.random.default_rng(seed))
    )
    return synth, ledger


# --- registry and configuration -------------------------------------------------------------


def test_every_registered_synthesizer_has_examples() -> None:
    names = synthesizer_names()
    assert {"privbayes", "independent_marginals"} <= set(names)
    assert {"mst", "aim"} <= set(names)
    assert set(names) == set(EXAMPLES), "add example hyperparameters for every registered synthesizer"
    assert set(names) == set(BAD_CONFIGS), "add bad configurations for every registered synthesizer"


def test_unknown_name_is_a_spec_error_listing_the_registered_names() -> None:
    with pytest.raises(SpecError, match=r"configuration x: synthesizer \('privbays'\).*aim, independent_marginals, mst, privbayes"):
        synthesizer_from_spec("privbays", {}, where="configuration x")
    with pytest.raises(RegistryError, match="registered synthesizers: aim, independent_marginals, mst, privbayes"):
        synthesizer_class("privbays")


@pytest.mark.parametrize(("name", "params"), BAD_CASES)
def test_bad_configs_raise_spec_errors(name: str, params: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match=r"^study s \(synthesizer '\w+'\): \w"):
        synthesizer_from_spec(name, params, where="study s")


def test_unknown_key_lists_the_allowed_keys() -> None:
    with pytest.raises(SpecError, match=r"unknown key\(s\) 'degre'; allowed keys: degree, epsilon_split, "
                                        r"max_candidates, max_table_cells, score, theta"):
        synthesizer_from_spec("privbayes", {"epsilon_split": 0.5, "degre": 2}, where="s")
    with pytest.raises(SpecError, match="must be a table"):
        synthesizer_from_spec("privbayes", [("degree", 2)], where="s")  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "params"), CASES)
def test_params_are_frozen_and_round_trip(name: str, params: dict[str, Any]) -> None:
    synth = _build(name, params)
    assert dataclasses.is_dataclass(synth.params)
    with pytest.raises(dataclasses.FrozenInstanceError):
        synth.params.anything = 1  # type: ignore[misc]
    logged = synth.get_params()
    assert all(isinstance(v, (int, float, str, type(None))) for v in logged.values())
    assert {k: logged[k] for k in params} == params
    assert _build(name, logged).params == synth.params
    with pytest.raises(TypeError, match="must be a"):
        type(synth)(dict(params))  # a plain dict is not the Params dataclass


def test_register_refuses_a_second_class_under_a_taken_name() -> None:
    existing = synthesizer_class("independent_marginals")

    class Impostor(existing):  # type: ignore[valid-type, misc]
        pass

    with pytest.raises(RegistryError, match="already registered"):
        register_synthesizer(Impostor)

    class NoParams(existing):  # type: ignore[valid-type, misc]
        name = "no_params_synth"
        Params = dict

    with pytest.raises(TypeError, match="frozen keyword-only dataclass"):
        register_synthesizer(NoParams)
    assert "no_params_synth" not in synthesizer_names()


# --- reproducibility ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "params"), CASES)
def test_same_seed_same_output_and_different_seeds_differ(
    name: str, params: dict[str, Any], data: pd.DataFrame, domain: Domain
) -> None:
    first, _ = _fit(name, params, data, domain, seed=11)
    again, _ = _fit(name, params, data, domain, seed=11)
    other, _ = _fit(name, params, data, domain, seed=12)
    for a, b in zip(_model_arrays(first), _model_arrays(again), strict=True):
        np.testing.assert_array_equal(a, b)
    sample = first.sample(400, rng=np.random.default_rng(5))
    pd.testing.assert_frame_equal(sample, again.sample(400, rng=np.random.default_rng(5)))
    # A different fit seed changes the noise, hence the model and (same sampling seed) the sample.
    assert any(
        a.shape != b.shape or not np.array_equal(a, b)
        for a, b in zip(_model_arrays(first), _model_arrays(other), strict=False)
    )
    assert not sample.equals(other.sample(400, rng=np.random.default_rng(5)))
    # A different sampling seed changes the sample of the same model.
    assert not sample.equals(first.sample(400, rng=np.random.default_rng(6)))


# --- accounting ----------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.1, 1.3, 4.0, 9.98])
@pytest.mark.parametrize(("name", "params"), CASES)
def test_ledger_is_charged_exactly_epsilon_as_planned(
    name: str, params: dict[str, Any], epsilon: float, data: pd.DataFrame, domain: Domain
) -> None:
    ledger = _ledger(name, epsilon)
    synth = _build(name, params).fit(
        data, domain=domain, epsilon=epsilon, ledger=ledger, source=SeededSource(np.random.default_rng(3)),
        scope="births",
    )
    if name in ZCDP:
        _check_zcdp_charge(synth, ledger, epsilon, data, domain)
        return
    plan = synth.planned_events(epsilon, domain, len(data), scope="births")
    assert list(ledger.events) == plan
    assert ledger.total().epsilon == epsilon
    assert math.fsum(e.epsilon for e in ledger.events) == epsilon
    assert synth.events_ == tuple(plan)
    assert synth.epsilon_ == epsilon and synth.n_records_ == len(data) and synth.domain_ is domain
    for event in ledger.events:
        assert event.scope == "births" and event.delta == 0.0
        assert event.sensitivity is not None and event.sensitivity > 0
        scale = event.sensitivity / event.epsilon
        assert event.noise_scale == (scale if event.mechanism == "laplace" else 2 * event.sensitivity / event.epsilon)
    # The plan is a function of public inputs only: the same on other data of the same size.
    shuffled = data.sample(frac=1.0, random_state=0).reset_index(drop=True)
    assert synth.planned_events(epsilon, domain, len(shuffled), scope="births") == plan


def _check_zcdp_charge(synth: Synthesizer, ledger: Ledger, epsilon: float, data: pd.DataFrame,
                       domain: Domain) -> None:
    """A zCDP fit spends its ρ: the zcdp total is ε to the conversion's margin, the events are
    the plan's (a filter's steps within its ρ), every one Gaussian or an exponential choice."""
    from privlab.platform.dp.zcdp_conversion import zcdp_rho_for_epsilon
    from privlab.platform.dp.plan_conformance import check_conforms, zcdp_cost

    rho = zcdp_rho_for_epsilon(epsilon, DELTA)
    plan = synth.planned_events(epsilon, domain, len(data), scope="births", delta=DELTA)  # type: ignore[call-arg]
    check_conforms(ledger.events, plan, who="test", exact_sensitivity=True)
    assert synth.rho_ == pytest.approx(rho, rel=1e-9) and synth.delta_ == DELTA
    assert math.fsum(zcdp_cost(e) for e in ledger.events) == pytest.approx(rho, rel=1e-9)
    total = ledger.total()
    assert epsilon * (1 - 1e-6) <= total.epsilon <= epsilon and total.delta == DELTA
    for event in ledger.events:
        assert event.scope == "births" and event.mechanism in ("gaussian", "exponential_bounded_range")
        if event.mechanism == "gaussian":
            assert event.sensitivity == math.sqrt(2) and event.typed.sigma == event.noise_scale
    assert synth.planned_events(epsilon, domain, len(data), scope="births", delta=DELTA) == plan  # type: ignore[call-arg]


@pytest.mark.parametrize(("name", "params"), CASES)
def test_release_mode_charges_the_same_epsilon(
    name: str, params: dict[str, Any], data: pd.DataFrame, domain: Domain, writer: TranscriptWriter
) -> None:
    ledger = _ledger(name, EPSILON)
    synth = _build(name, params).fit(
        data, domain=domain, epsilon=EPSILON, ledger=ledger, source=SecureSource(writer)
    )
    if name in ZCDP:  # discrete Gaussian measurements, exact bounded-range choices, all in the transcript
        assert {e.mechanism for e in ledger.events} == {"discrete_gaussian", "exponential_rejection"}
        assert ledger.total().epsilon <= EPSILON
        for _, noisy, _ in synth.measurements_:
            assert np.array_equal(noisy, np.round(noisy))  # integer counts + integer noise
        sample = synth.sample(300, rng=SecureSource(writer).generator(purpose="sample"))
        assert domain.validate(sample, what="release sample").shape == (300, len(domain))
        return
    plan = synth.planned_events(EPSILON, domain, len(data))
    assert ledger.total().epsilon == EPSILON
    assert len(ledger.events) == len(plan)
    release_names = {"laplace": "laplace_lattice", "exponential": "permute_and_flip"}
    for event, planned in zip(ledger.events, plan, strict=True):
        assert (event.name, event.epsilon, event.sensitivity, event.scope) == (
            planned.name, planned.epsilon, planned.sensitivity, planned.scope
        )
        assert event.mechanism == release_names[planned.mechanism]
        assert event.noise_scale >= planned.noise_scale  # lattice padding only adds noise
    sample = synth.sample(300, rng=SecureSource(writer).generator(purpose="sample"))
    assert domain.validate(sample, what="release sample").shape == (300, len(domain))


# --- inputs and state ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "params"), CASES)
def test_fit_does_not_mutate_its_input(name: str, params: dict[str, Any], data: pd.DataFrame, domain: Domain) -> None:
    # Columns out of domain order, a non-default index and int32 codes: all accepted, none changed.
    frame = data[list(reversed(domain.names))].astype("int32")
    frame.index = pd.Index(np.arange(len(frame)) * 3 + 100)
    before = frame.copy(deep=True)
    _fit(name, params, frame, domain)
    pd.testing.assert_frame_equal(frame, before)


@pytest.mark.parametrize(("name", "params"), CASES)
def test_samples_are_valid_codes_over_the_domain(
    name: str, params: dict[str, Any], data: pd.DataFrame, domain: Domain
) -> None:
    synth, _ = _fit(name, params, data, domain)
    sample = synth.sample(2345, rng=np.random.default_rng(0))
    assert list(sample.columns) == list(domain.names)
    assert all(dtype == np.int64 for dtype in sample.dtypes)
    assert sample.index.equals(pd.RangeIndex(2345))
    pd.testing.assert_frame_equal(domain.validate(sample, what="sample"), sample)
    empty = synth.sample(0, rng=np.random.default_rng(0))
    assert empty.shape == (0, len(domain)) and list(empty.columns) == list(domain.names)
    assert all(dtype == np.int64 for dtype in empty.dtypes)


@pytest.mark.parametrize(("name", "params"), CASES)
def test_bad_inputs_raise_clear_errors(name: str, params: dict[str, Any], data: pd.DataFrame, domain: Domain) -> None:
    synth = _build(name, params)
    source = SeededSource(np.random.default_rng(0))

    def fit(frame: Any = data, **overrides: Any) -> None:
        kwargs: dict[str, Any] = {"domain": domain, "epsilon": 1.0, "ledger": _ledger(name, None), "source": source}
        synth.fit(frame, **(kwargs | overrides))

    with pytest.raises(NotFittedError, match="not fitted; call fit"):
        synth.sample(10, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="must be a pandas DataFrame"):
        fit(data.to_numpy())
    bad = data.copy()
    bad.loc[17, "b"] = 4  # b has codes 0..3
    with pytest.raises(SchemaError, match=r"column 'b' has a code at row 17 outside 0\.\.3"):
        fit(bad)
    with pytest.raises(SchemaError, match="missing column"):
        fit(data.drop(columns="c"))
    with pytest.raises(SchemaError, match="must hold integer codes"):
        fit(data.astype(float))
    with pytest.raises(SchemaError, match="empty"):
        fit(data.iloc[:0])
    for epsilon in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"epsilon \(.*\) must be positive and finite"):
            fit(epsilon=epsilon)
    with pytest.raises(TypeError, match="epsilon"):
        fit(epsilon=True)
    with pytest.raises(TypeError, match="must be a RandomSource"):
        fit(source=np.random.default_rng(0))
    with pytest.raises(TypeError, match="must be a Domain"):
        fit(domain=domain.as_mapping())
    with pytest.raises(ValueError, match="scope"):
        fit(scope=" ")
    assert not synth.is_fitted
    fit()
    with pytest.raises(ValueError, match=r"n \(-1\) must be >= 0"):
        synth.sample(-1, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match=r"n \(1\.5\) must be an int"):
        synth.sample(1.5, rng=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        synth.sample(5, rng=source)  # type: ignore[arg-type]


# --- sensitivities pinned to independent values ---------------------------------------------
#
# The accounting test above only sees ``sensitivity > 0`` and a scale computed from the event's
# own sensitivity, so a halved sensitivity would pass it. Here every step's Δ is derived in the
# test — by brute force over all datasets and replace-one neighbours of a small domain, or by a
# formula written out here from the paper's derivation — and the Laplace scales *requested from
# the random source* (what the noise really is, not only what the ledger says) must be Δ/ε.


def _count_table(records: tuple[tuple[int, ...], ...], sizes: tuple[int, ...]) -> np.ndarray:
    table = np.zeros(sizes, dtype=np.int64)
    for record in records:
        table[record] += 1
    return table


def brute_force_sensitivity(statistic: Any, sizes: tuple[int, ...], n: int, *, norm: str = "l1") -> float:
    """``max |f(D) − f(D')|`` over every dataset ``D`` of ``n`` records on the cells of ``sizes``
    and every replace-one neighbour ``D'`` (L1 over the output vector, or the absolute change of
    a scalar)."""
    cells = list(itertools.product(*(range(k) for k in sizes)))
    worst = 0.0
    for data in itertools.combinations_with_replacement(cells, n):
        base = np.asarray(statistic(_count_table(data, sizes)), dtype=np.float64)
        for i, replacement in itertools.product(range(n), cells):
            neighbour = data[:i] + (replacement,) + data[i + 1:]
            moved = np.asarray(statistic(_count_table(neighbour, sizes)), dtype=np.float64)
            worst = max(worst, float(np.abs(moved - base).sum()))
    return worst


def mi_sensitivity_by_hand(n: int) -> float:
    """Replace-one sensitivity of the empirical mutual information (nats): ``2·g((n−1)/2)/n``
    with ``g(t) = (t+1)ln(t+1) − t ln t`` — the worst case puts the replaced record's x and π
    in two classes of (n−1)/2 records each (PrivBayes, Zhang et al. 2017, the sensitivity
    lemma for I, extended to non-binary domains)."""
    t = (n - 1) / 2
    g = math.log1p(t) + (t * math.log1p(1 / t) if t > 0 else 0.0)  # = (t+1)ln(t+1) − t ln t, stably
    return 2 * g / n


def r_sensitivity_by_hand(n: int) -> float:
    """``3/n``: one replaced record moves ``1/n`` of mass in P(X, Π), P(X) and P(Π) (L1 2/n
    each, 4/n for the product), so ½·‖·‖₁ moves by at most ½·(2 + 4)/n (Zhang et al. 2017)."""
    return 3 / n


def test_brute_force_sensitivities_of_the_released_statistics() -> None:
    """The values the pinned table below uses, recomputed from the statistics' definitions."""
    # A count table (a 1-way histogram or a PrivBayes conditional table over child × parents):
    # one record leaves one cell and enters another, L1 change 2, on any table shape.
    assert brute_force_sensitivity(lambda t: t.ravel(), (3,), 3) == 2.0
    assert brute_force_sensitivity(lambda t: t.ravel(), (2, 3), 3) == 2.0
    assert brute_force_sensitivity(lambda t: t.ravel(), (2, 2, 2), 2) == 2.0
    # Mutual information: the hand formula is the exact worst case for odd n, 3 × 3 tables.
    for n in (3, 5):
        assert brute_force_sensitivity(mutual_information, (3, 3), n) == pytest.approx(mi_sensitivity_by_hand(n),
                                                                                        rel=1e-12)
    # R score: the hand bound 3/n holds (it is not attained; the pinned value is the bound).
    for n in (3, 4):
        assert 0 < brute_force_sensitivity(r_score, (3, 3), n) <= r_sensitivity_by_hand(n)


def expected_step(name: str, params: Mapping[str, Any], event: PrivacyEvent, *, n: int) -> tuple[str, float]:
    """(mechanism, Δ) of one ledger step, from the test's own derivations."""
    if name == "independent_marginals" and event.name.startswith("independent_marginals/"):
        return "laplace", 2.0  # a 1-way count histogram
    if name == "privbayes" and event.name.startswith("privbayes/table/"):
        return "laplace", 2.0  # a count table over child × parents
    if name == "privbayes" and event.name.startswith("privbayes/structure/"):
        score = params.get("score", "mi")
        return "exponential", mi_sensitivity_by_hand(n) if score == "mi" else r_sensitivity_by_hand(n)
    if name in ZCDP and "/select" in event.name:
        # ‖M(D) − M̂‖₁ (weighted by AIM's workload weight c_r = Σ_s |r ∩ s|): one replaced record
        # moves the count vector by 2 in ℓ1. In the all-pairs workload over a, b, c, d the largest
        # weight is a pair's: 2 (itself) + 4 × 1 (the pairs sharing one column) = 6.
        return "exponential_bounded_range", 2.0 * (6.0 if name == "aim" else 1.0)
    if name in ZCDP:
        return "gaussian", math.sqrt(2.0)  # a count vector: one cell −1, another +1
    raise AssertionError(f"{name}: no hand-derived sensitivity for step {event.name!r}; add one here")


class RecordingSource(SeededSource):
    """A seeded source that records the scale of every Laplace draw it is asked for."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.default_rng(seed))
        self.laplace_scales: list[float] = []
        self.gaussian_sigmas: list[float] = []

    def _draw_gaussian(self, sigma: float, shape: Any) -> Any:
        self.gaussian_sigmas.append(sigma)
        return super()._draw_gaussian(sigma, shape)

    def _draw_laplace(self, scale: float, shape: Any) -> Any:
        self.laplace_scales.append(scale)
        return super()._draw_laplace(scale, shape)


@pytest.mark.parametrize("epsilon", [0.7, 4.0])
@pytest.mark.parametrize(("name", "params"), CASES)
def test_sensitivities_and_noise_scales_match_hand_derived_values(
    name: str, params: dict[str, Any], epsilon: float, data: pd.DataFrame, domain: Domain
) -> None:
    ledger = _ledger(name, None)
    source = RecordingSource(3)
    synth = _build(name, params).fit(data, domain=domain, epsilon=epsilon, ledger=ledger, source=source)
    d, n = len(domain), len(data)
    if name in ZCDP:
        rho = synth.rho_
        for event in ledger.events:
            mechanism, delta = expected_step(name, params, event, n=n)
            assert (event.mechanism, event.sensitivity) == (mechanism, pytest.approx(delta, rel=1e-12)), event
        gaussians = [e for e in ledger.events if e.mechanism == "gaussian"]
        # The noise actually drawn: one request per measurement at σ = Δ/sqrt(2ρ_step).
        assert source.gaussian_sigmas == pytest.approx([math.sqrt(2.0) / math.sqrt(2 * e.typed.rho)
                                                        for e in gaussians], rel=1e-12)
        if name == "mst":  # ρ/3 over d one-ways, ρ/3 over d − 1 choices (bounded range: ε = sqrt(8ρ)), ρ/3 over d − 1 pairs
            assert [e.typed.rho for e in gaussians] == pytest.approx([rho / (3 * d)] * d + [rho / (3 * (d - 1))] * (d - 1))
            assert [e.epsilon for e in ledger.events if e.mechanism == "exponential_bounded_range"] == pytest.approx(
                [math.sqrt(8 * rho / (3 * (d - 1)))] * (d - 1))
        else:  # AIM: each one-way gets 0.9ρ/T; the first round's σ and ε are those of ρ/T
            rounds = params["rounds"]
            assert [e.typed.rho for e in gaussians[:d]] == pytest.approx([0.9 * rho / rounds] * d)
            first = next(e for e in ledger.events if e.mechanism == "exponential_bounded_range")
            assert first.epsilon == pytest.approx(math.sqrt(8 * 0.1 * rho / rounds))  # bounded range: ε²/8 = ρ
        return
    laplace_events = []
    for event in ledger.events:
        mechanism, delta = expected_step(name, params, event, n=n)
        assert event.mechanism == mechanism, event
        assert event.sensitivity == pytest.approx(delta, rel=1e-12), (
            f"{event.name}: the ledger records sensitivity {event.sensitivity!r}; the hand-derived value is {delta!r}"
        )
        if mechanism == "laplace":
            assert event.noise_scale == pytest.approx(delta / event.epsilon, rel=1e-12), event
            laplace_events.append(event)
        else:  # the exponential mechanism's Gumbel/“noise” scale is 2Δ/ε
            assert event.noise_scale == pytest.approx(2 * delta / event.epsilon, rel=1e-12), event
    # The noise actually drawn: one Laplace request per table, at the hand-derived Δ/ε.
    assert source.laplace_scales == pytest.approx([expected_step(name, params, e, n=n)[1] / e.epsilon
                                                   for e in laplace_events], rel=1e-12)
    # The budget split, from the synthesizers' documented rules.
    if name == "independent_marginals":
        assert [e.epsilon for e in ledger.events] == pytest.approx([epsilon / d] * d, rel=1e-12)
        assert len(laplace_events) == d
    else:
        split = params["epsilon_split"]
        assert [e.epsilon for e in ledger.events] == pytest.approx(
            [epsilon * split / (d - 1)] * (d - 1) + [epsilon * (1 - split) / d] * d, rel=1e-12)
        assert len(laplace_events) == d
