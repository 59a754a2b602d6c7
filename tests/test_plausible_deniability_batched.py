"""Plausible deniability (issue 10, throughput): the batched path equals the per-candidate references.

Bit-identity, not closeness: every field of :class:`CandidateResults` must be equal between
``method="batched"`` and the references ``"fast"`` / ``"literal"`` for the same source seed,
on many parameter combinations and for every batch size.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.plausible_deniability import batched
from privlab.mechanisms.plausible_deniability.batched import (
    draw_batch, draw_candidate, laplace_from_uniform, partition_indices)
from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams, generate_candidates, record_generation
from privlab.mechanisms.plausible_deniability.probability import partition_index
from privlab.mechanisms.plausible_deniability.streams import (
    CandidateStream, bounded, bounded_batch, lane_words)
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams
from privlab.platform import composition
from privlab.platform.errors import BudgetExceededError, SpecError
from privlab.platform.randomness import SeededSource

from privlab.mechanisms.plausible_deniability.model import (
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.ledger import Ledger

DOMAIN = Domain(tuple(ColumnDomain(name=n, labels=tuple(f"{n}{i}" for i in range(k)))
                      for n, k in (("a", 3), ("b", 4), ("c", 2), ("d", 5))))
M = len(DOMAIN)


def coded(n: int, seed: int):
    """As in test_plausible_deniability_tests.py: dependent attributes, many repeated records."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = ((b > 1) ^ (rng.random(n) < 0.1)).astype(np.int64)
    d = (a + b + rng.integers(0, 2, n)) % 5
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def fitted(seed: int) -> PlausibleDeniabilityModel:
    data = coded(1200, 0)
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant="advanced", delta_slack=2.0**-30)
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=20))
    return model.fit(data.iloc[:500], parameter_data=data.iloc[500:], domain=DOMAIN, ledger=ledger,
                     source=SeededSource(np.random.default_rng(seed)), buckets={"d": [0, 0, 1, 1, 2]})

FIELDS = ("candidates", "seed_rows", "omegas", "plausible", "thresholds", "passed")
KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


@pytest.fixture(scope="module")
def model():
    return fitted(3)


@pytest.fixture(scope="module")
def seeds():
    return coded(150, seed=9)


def _same(a, b) -> None:
    for field in FIELDS:
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


def test_vectorized_philox_is_numpys_philox() -> None:
    index = np.array([0, 1, 2, 77, 2**31 + 5, 2**40])
    for lane in (0, 1, 2, 16, 19):
        batch = lane_words(KEY, index, lane, 11)
        for row, j in enumerate(index):
            assert np.array_equal(batch[row], CandidateStream(KEY, int(j)).words(lane, 11))


def test_bounded_draws_match_lemire_exactly_including_rejections() -> None:
    words = np.random.default_rng(1).integers(0, 2**64, size=3000, dtype=np.uint64)
    words[:3] = [0, 1, 2**64 - 1]  # 0 is rejected for r = 3: 0·3 mod 2^64 = 0 < (2^64 − 3) mod 3 = 1
    for r in (1, 2, 3, 5, 150, 2**31 + 11, 2**32 - 1):
        draws, rejected = bounded_batch(words, r)
        for w, d, rej in zip(words, draws, rejected):
            ref = bounded(int(w), r)
            assert (ref is None) == bool(rej)
            if ref is not None:
                assert ref == d and 0 <= d < r
    assert bounded(0, 3) is None


def test_laplace_noise_is_elementwise_whatever_the_array() -> None:
    """k̃'s bit-identity across batch sizes rests on np.log not depending on neighbours or length."""
    u = (np.random.default_rng(2).integers(0, 2**53, size=4099) + 0.5) * 2.0**-53
    whole = laplace_from_uniform(u, 0.7)
    for size in (1, 3, 8, 17, 1000):
        parts = np.concatenate([laplace_from_uniform(u[a:a + size], 0.7) for a in range(0, len(u), size)])
        assert np.array_equal(parts, whole)
    assert laplace_from_uniform(np.array([0.75]), 1.0)[0] == pytest.approx(-np.log(0.5))
    assert np.all(np.sign(laplace_from_uniform(u, 1.0)) == np.where(u > 0.5, 1, -1) * (u != 0.5))


@pytest.mark.parametrize("gamma", [1.01, 1.3, 1.5, 2.0, 4.0, 10.0])
def test_partition_table_equals_the_scalar_rule(gamma: float) -> None:
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.random(2000) ** 12, [0.0, 1.0, 1.0 + 1e-12, 5e-324, 1e-300],
                        [gamma ** -i for i in range(40)], [np.nextafter(gamma ** -i, 0) for i in range(1, 40)]])
    expected = [-1 if (i := partition_index(float(x), gamma)) is None else i for x in p]
    assert partition_indices(p, gamma).tolist() == expected


def test_draws_of_a_batch_are_the_reference_draws() -> None:
    synthesis = SynthesisParams(omega_min=2, omega_max=M)
    options = {"n_seeds": 150, "m": M, "synthesis": synthesis, "test_noise": True, "check": 40}
    batch = draw_batch(KEY, 5, 45, **options)
    for i, j in enumerate(range(5, 45)):
        one = draw_candidate(KEY, j, **options)
        for field in ("rows", "omegas", "uniforms", "noise", "orders"):
            assert np.array_equal(getattr(batch, field)[i], getattr(one, field)[0]), field
        assert sorted(set(one.orders[0])) == sorted(one.orders[0])  # without replacement


def test_a_rejected_word_falls_back_to_the_reference(monkeypatch) -> None:
    """Rejections have probability < n/2^64, so one is forced: the batch recomputes that candidate
    with the reference stream, whose retry lane gives a different (but reference) draw."""
    real = batched.bounded_batch

    def forced(words, r):
        draws, rejected = real(words, r)
        rejected = rejected.copy()
        rejected.flat[3] = True
        return draws, rejected

    monkeypatch.setattr(batched, "bounded_batch", forced)
    options = {"n_seeds": 150, "m": M, "synthesis": SynthesisParams(omega_min=1, omega_max=3), "test_noise": False,
               "check": 20}
    batch = draw_batch(KEY, 0, 10, **options)
    monkeypatch.undo()
    for j in range(10):
        one = draw_candidate(KEY, j, **options)
        assert batch.rows[j] == one.rows[0] and batch.omegas[j] == one.omegas[0]
        assert np.array_equal(batch.orders[j], one.orders[0])
    stream = CandidateStream(KEY, 0)
    assert stream.bounded(0, 3, slot=0) == bounded(int(stream.words(16, 1)[0]), 3)  # word 0 rejected, retry


SYNTHESES = [SynthesisParams.fixed(1), SynthesisParams.fixed(2), SynthesisParams.fixed(M),
             SynthesisParams(omega_min=1, omega_max=M), SynthesisParams(omega_min=2, omega_max=3)]
STOPPING = [(None, None), (4, None), (10, None), (None, 40), (12, 60), (None, 150), (3, 1000), (2, 149)]


@pytest.mark.parametrize("epsilon0", [None, 1.0, 0.1], ids=["test1", "test2", "test2-eps0.1"])
@pytest.mark.parametrize(("max_plausible", "max_check"), STOPPING)
@pytest.mark.parametrize("synthesis", SYNTHESES, ids=lambda s: f"omega{s.omega_min}-{s.omega_max}")
def test_batched_equals_the_per_candidate_reference(model, seeds, synthesis, max_plausible, max_check,
                                                    epsilon0) -> None:
    test = PrivacyTestParams(k=8, gamma=1.5, epsilon0=epsilon0, max_plausible=max_plausible,
                             max_check_plausible=max_check)

    def run(method: str, batch_size: int = 4096):
        return generate_candidates(model, seeds, synthesis=synthesis, test=test, n=30, method=method,
                                   batch_size=batch_size, source=SeededSource(np.random.default_rng(21)))

    reference = run("fast")
    for batch_size in (1, 7, 4096):
        _same(run("batched", batch_size), reference)


@pytest.mark.parametrize("gamma", [1.2, 4.0])
def test_batched_equals_the_literal_loop_over_seeds(model, seeds, gamma: float) -> None:
    synthesis = SynthesisParams(omega_min=1, omega_max=M)
    for stopping in ((None, None), (6, 70)):
        test = PrivacyTestParams(k=5, gamma=gamma, epsilon0=0.5, max_plausible=stopping[0],
                                 max_check_plausible=stopping[1])
        kwargs = {"synthesis": synthesis, "test": test, "n": 40}
        _same(generate_candidates(model, seeds, source=SeededSource(np.random.default_rng(4)), **kwargs),
              generate_candidates(model, seeds, source=SeededSource(np.random.default_rng(4)), method="literal",
                                  **kwargs))


def test_output_does_not_depend_on_the_batch_size(model, seeds) -> None:
    synthesis = SynthesisParams(omega_min=1, omega_max=M)
    test = PrivacyTestParams(k=10, gamma=2.0, epsilon0=1.0, max_plausible=50, max_check_plausible=120)
    runs = [generate_candidates(model, seeds, synthesis=synthesis, test=test, n=1000, batch_size=size,
                                source=SeededSource(np.random.default_rng(8))) for size in (1000, 1, 3, 64, 999)]
    for other in runs[1:]:
        _same(other, runs[0])
    assert runs[0].passed.any() and not runs[0].passed.all()
    # a prefix of the run is the run of the prefix: candidate j's stream is keyed by j alone
    _same(generate_candidates(model, seeds, synthesis=synthesis, test=test, n=300, batch_size=77,
                              source=SeededSource(np.random.default_rng(8))),
          type(runs[0])(*(getattr(runs[0], f)[:300] for f in FIELDS)))


def test_bad_batch_size_is_refused(model, seeds) -> None:
    with pytest.raises(SpecError, match=r"batch_size \(0\) must be an int >= 1"):
        generate_candidates(model, seeds, synthesis=SynthesisParams.fixed(1), test=PrivacyTestParams(k=5, gamma=2.0),
                            n=3, source=SeededSource(np.random.default_rng(0)), batch_size=0)


# --- the generation run's (ε, δ) in the ledger ------------------------------------------------


def _fitted_with(ledger: Ledger, accountant: str) -> PlausibleDeniabilityModel:
    data = coded(1200, 0)
    params = PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=20, accountant=accountant)
    return PlausibleDeniabilityModel(params).fit(
        data.iloc[:500], parameter_data=data.iloc[500:], domain=DOMAIN, ledger=ledger,
        source=SeededSource(np.random.default_rng(1)), buckets={"d": [0, 0, 1, 1, 2]})


def test_ledger_total_is_model_plus_theorem1_basic() -> None:
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="basic")
    _fitted_with(ledger, "basic")
    model_events = ledger.events
    test = PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0)
    total = record_generation(ledger, test, t=10, released=3)
    eps_t, delta_t = 1.0 + math.log1p(4.0 / 10), math.exp(-1.0 * 40)  # Theorem 1, add/remove-one
    eps_r, delta_r = 2 * eps_t, (1 + math.exp(eps_t)) * delta_t          # replace-one: group of 2
    assert total.epsilon == pytest.approx(math.fsum(e.epsilon for e in model_events) + 3 * eps_r, rel=1e-15)
    assert total.epsilon == pytest.approx(1.0 + 3 * eps_r, rel=1e-12)  # the model's declared ε is 1
    assert total.delta == pytest.approx(3 * delta_r, rel=1e-12)
    new = ledger.events[len(model_events):]
    assert len(new) == 3 and all(e.scope == "seeds" and e.step == "pd.test" for e in new)
    assert dict(new[0].details) == {"k": 50, "gamma": 4.0, "epsilon0": 1.0, "t": 10, "neighbouring": "replace_one"}


def test_ledger_total_is_model_plus_theorem1_advanced_add_remove() -> None:
    slack = 2.0**-30
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="advanced", delta_slack=slack,
                    neighbouring="add_remove")
    _fitted_with(ledger, "advanced")
    k_model = len(ledger.events)
    step = ledger.events[0].epsilon
    test = PrivacyTestParams(k=30, gamma=2.0, epsilon0=0.5)
    total = record_generation(ledger, test, t=5, released=2)
    eps_t, delta_t = 0.5 + math.log1p(2.0 / 5), math.exp(-0.5 * 25)
    model = composition.advanced(epsilon=step, delta=0.0, k=k_model, delta_slack=slack)
    tests = composition.advanced(epsilon=eps_t, delta=delta_t, k=2, delta_slack=slack)
    assert total.epsilon == pytest.approx(model[0] + tests[0], rel=1e-12)
    assert total.delta == pytest.approx(model[1] + tests[1], rel=1e-12)
    assert model[0] <= 1.0 + 1e-12


def test_ledger_statement_refuses_before_recording() -> None:
    ledger = Ledger(epsilon_cap=3.0, delta_cap=1e-3, accountant="basic")
    _fitted_with(ledger, "basic")
    before = ledger.events
    with pytest.raises(SpecError, match="Theorem 1 holds for Privacy Test 2 only"):
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0), t=10)
    with pytest.raises(ValueError, match=r"t \(50\) must be < k \(50\)"):
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=50)
    with pytest.raises(SpecError, match=r"released \(0\) must be an int >= 1"):
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=10, released=0)
    with pytest.raises(BudgetExceededError):  # 1 + 2 · 2·(1 + ln 1.4) > 3
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=10, released=2)
    assert ledger.events == before
