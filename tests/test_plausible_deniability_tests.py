"""Plausible deniability (issue 10 items 4–6 and throughput): synthesis, exact Pr{y = M(d)},
Privacy Tests 1–2, and the batched path.

The batched path is held to bit-identity, not closeness: every field of
:class:`CandidateResults` must be equal between ``method="batched"`` and the references
``"fast"`` / ``"literal"`` for the same source seed, on many parameter combinations and for
every batch size (second half of this file).
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.plausible_deniability import batched
from privlab.mechanisms.plausible_deniability.batched import (
    draw_batch, draw_candidate, laplace_from_uniform, partition_indices)
from privlab.mechanisms.plausible_deniability.generation_params import SPLIT_PARTITION
from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams, generate_candidates, record_generation
from privlab.mechanisms.plausible_deniability.probability import (
    SeedIndex, generation_probability, partition_index, prefix_probabilities)
from privlab.mechanisms.plausible_deniability.streams import (
    CandidateStream, bounded, bounded_batch, lane_words)
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams, synthesize
from privlab.platform.core.errors import BudgetExceededError, LedgerError, ModeError, SpecError
from privlab.platform.dp import composition
from privlab.platform.dp.dp_events import EpsilonDeltaEvent, SelfComposed
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter

from privlab.mechanisms.plausible_deniability.model import (
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit

DOMAIN = Domain(tuple(ColumnDomain(name=n, labels=tuple(f"{n}{i}" for i in range(k)))
                      for n, k in (("a", 3), ("b", 4), ("c", 2), ("d", 5))))


def coded(n: int, seed: int) -> pd.DataFrame:
    """Dependent attributes (as in test_plausible_deniability_model.py), many repeated records."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = ((b > 1) ^ (rng.random(n) < 0.1)).astype(np.int64)
    d = (a + b + rng.integers(0, 2, n)) % 5
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})



def halves(n: int) -> PositionalSplit:
    """D_T (500 records) and D_P (the rest), cut by a seeded permutation of the positions."""
    return PositionalSplit.permuted(n, [500, n - 500], rng=np.random.default_rng(0))

def fitted(seed: int) -> PlausibleDeniabilityModel:
    data = coded(1200, 0)
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant="best", delta_slack=2.0**-30)
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=20))
    return model.fit(data, split=halves(len(data)), domain=DOMAIN, ledger=ledger,
                     source=SeededSource(np.random.default_rng(seed)), buckets={"d": [0, 0, 1, 1, 2]})

M = len(DOMAIN)


@pytest.fixture(scope="module")
def model():
    return fitted(3)


@pytest.fixture(scope="module")
def seeds():
    return coded(150, seed=9)


def _universe():
    return [np.array(y) for y in itertools.product(*(range(s) for s in DOMAIN.sizes))]


@pytest.mark.parametrize("synthesis", [SynthesisParams.fixed(1), SynthesisParams.fixed(3), SynthesisParams.fixed(M),
                                       SynthesisParams(omega_min=1, omega_max=M),
                                       SynthesisParams(omega_min=2, omega_max=3)])
def test_generation_probabilities_of_a_seed_sum_to_one(model, seeds, synthesis: SynthesisParams) -> None:
    seed = seeds.to_numpy()[0]
    total = sum(generation_probability(model, seed, y, synthesis) for y in _universe())
    assert total == pytest.approx(1.0, abs=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("omega_rule", ["mixture", "per_candidate"])
def test_synthesis_frequencies_match_the_exact_probability(model, seeds, omega_rule: str) -> None:
    """20,000 seeded syntheses from one seed with ω ∈R [1, m]: every outcome's frequency is
    within 5 standard errors (plus 1e-3) of the probability the test scores it with — of y
    under the mixture, of (ω, y) as π(ω)·Pr{y = M_ω(d)} under the fixed-ω model of its own ω."""
    synthesis = SynthesisParams(omega_min=1, omega_max=M, omega_rule=omega_rule)
    seed = seeds.to_numpy()[1]
    rng = np.random.default_rng(12)
    n = 20_000
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(n):
        omega = int(rng.integers(1, M + 1))
        y = tuple(synthesize(model, seed, omega, rng.random(M)).tolist())
        key = y if omega_rule == "mixture" else (omega, *y)
        counts[key] = counts.get(key, 0) + 1
    outcomes = [(None, y) for y in _universe()] if omega_rule == "mixture" else \
        [(omega, y) for omega in synthesis.omegas() for y in _universe()]
    for omega, y in outcomes:
        if omega is None:
            p, key = generation_probability(model, seed, y, synthesis), tuple(y.tolist())
        else:
            p = synthesis.weight() * generation_probability(model, seed, y, synthesis.tested_with(omega))
            key = (omega, *y.tolist())
        freq = counts.get(key, 0) / n
        assert abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-3, (omega, y, p, freq)


def _brute_force_plausible(model, codes: np.ndarray, row: int, y: np.ndarray, synthesis: SynthesisParams,
                           gamma: float) -> int:
    """k' of candidate y from seed ``row`` with no stopping rule: a loop over every seed."""
    own = partition_index(generation_probability(model, codes[row], y, synthesis), gamma)
    found = 0
    for d in codes:
        p = generation_probability(model, d, y, synthesis)
        found += int(p > 0.0 and partition_index(p, gamma) == own)
    return found


def test_the_two_omega_rules_score_the_same_candidates_as_their_models_say(model, seeds) -> None:
    """Same draws, two scores: under "per_candidate" a candidate's k' is the fixed-ω run's of its
    own ω, under "mixture" the mixture's; the rules agree for a fixed ω and differ on a range."""
    codes = seeds.to_numpy()
    test = PrivacyTestParams(k=8, gamma=1.5)
    runs = {}
    for rule in ("per_candidate", "mixture"):
        synthesis = SynthesisParams(omega_min=1, omega_max=M, omega_rule=rule)
        run = runs[rule] = generate_candidates(model, seeds, synthesis=synthesis, test=test, n=40,
                                               source=SeededSource(np.random.default_rng(31)))
        for j in range(0, 40, 4):
            scored_with = synthesis.tested_with(int(run.omegas[j]))
            assert scored_with == (SynthesisParams.fixed(int(run.omegas[j])) if rule == "per_candidate" else synthesis)
            assert run.plausible[j] == _brute_force_plausible(model, codes, int(run.seed_rows[j]), run.candidates[j],
                                                              scored_with, test.gamma)
    for field in ("candidates", "seed_rows", "omegas", "thresholds"):
        assert np.array_equal(getattr(runs["per_candidate"], field), getattr(runs["mixture"], field)), field
    assert not np.array_equal(runs["per_candidate"].plausible, runs["mixture"].plausible)
    fixed = [generate_candidates(model, seeds, synthesis=SynthesisParams(omega_min=2, omega_max=2, omega_rule=rule),
                                 test=test, n=40, source=SeededSource(np.random.default_rng(31)))
             for rule in ("per_candidate", "mixture")]
    _same(*fixed)


def test_an_unknown_omega_rule_is_refused() -> None:
    with pytest.raises(SpecError, match=r"omega_rule \('pooled'\) must be one of \['per_candidate', 'mixture'\]"):
        SynthesisParams(omega_min=1, omega_max=3, omega_rule="pooled")


def test_partition_index_follows_the_gamma_rule_exactly() -> None:
    gamma = 2.0
    assert partition_index(1.0, gamma) == 0
    assert partition_index(0.5, gamma) == 1            # γ^-2 < 0.5 ≤ γ^-1
    assert partition_index(np.nextafter(0.5, 1), gamma) == 0
    assert partition_index(0.25, gamma) == 2
    assert partition_index(0.0, gamma) is None
    for p in np.random.default_rng(0).random(1000) ** 8:
        i = partition_index(float(p), 1.3)
        assert 1.3 ** -(i + 1) < p <= 1.3 ** -i


def test_seed_index_counts_prefixes_like_brute_force(model, seeds) -> None:
    codes = seeds.to_numpy()
    order = model.structure_.order
    index = SeedIndex(codes, order, DOMAIN.sizes)
    for y in _universe()[::7]:
        agree = codes[:, order] == y[list(order)]
        lengths = np.cumprod(agree, axis=1).sum(axis=1)
        assert index.exactly(y).tolist() == np.bincount(lengths, minlength=M + 1).tolist()
        assert index.prefix_lengths(np.arange(len(codes)), y).tolist() == lengths.tolist()


def test_prefix_probabilities_are_the_literal_probabilities_bit_for_bit(model, seeds) -> None:
    synthesis = SynthesisParams(omega_min=1, omega_max=M)
    codes = seeds.to_numpy()
    index = SeedIndex(codes, model.structure_.order, DOMAIN.sizes)
    for y in _universe()[::5]:
        by_length = prefix_probabilities(model, y, synthesis)
        lengths = index.prefix_lengths(np.arange(len(codes)), y)
        literal = np.array([generation_probability(model, d, y, synthesis) for d in codes])
        assert np.array_equal(by_length[lengths], literal)


SYNTHESES = [SynthesisParams.fixed(1), SynthesisParams.fixed(2), SynthesisParams.fixed(M),
             SynthesisParams(omega_min=1, omega_max=M), SynthesisParams(omega_min=2, omega_max=3),
             SynthesisParams(omega_min=1, omega_max=M, omega_rule="mixture")]  # the mixture's literal path:
# test_batched_equals_the_literal_loop_over_seeds and the two-rules test
STOPPING = [(None, None), (4, None), (10, None), (None, 40), (12, 60), (None, 150), (3, 1000)]


@pytest.mark.parametrize("epsilon0", [None, 1.0], ids=["test1", "test2"])
@pytest.mark.parametrize(("max_plausible", "max_check"), STOPPING)
@pytest.mark.parametrize("synthesis", SYNTHESES[:-1], ids=lambda s: f"omega{s.omega_min}-{s.omega_max}-{s.omega_rule}")
def test_fast_path_agrees_with_the_literal_reference(model, seeds, synthesis, max_plausible, max_check,
                                                     epsilon0) -> None:
    test = PrivacyTestParams(k=8, gamma=1.5, epsilon0=epsilon0, max_plausible=max_plausible,
                             max_check_plausible=max_check)
    fast = generate_candidates(model, seeds, synthesis=synthesis, test=test, n=25,
                               source=SeededSource(np.random.default_rng(21)), method="fast")
    literal = generate_candidates(model, seeds, synthesis=synthesis, test=test, n=25,
                                  source=SeededSource(np.random.default_rng(21)), method="literal")
    for field in ("candidates", "seed_rows", "omegas", "plausible", "thresholds", "passed"):
        assert np.array_equal(getattr(fast, field), getattr(literal, field)), field
    if max_plausible is not None and max_plausible < test.k and epsilon0 is None:
        assert not fast.passed.any()  # k' is capped below k
    elif synthesis.omega_max < M and max_check is None and (max_plausible or test.k) >= test.k:
        assert fast.passed.any() and not fast.passed.all()  # the grid exercises both verdicts
    if max_plausible is not None:
        assert fast.plausible.max() <= max_plausible
    if max_check is not None and max_check < len(seeds):
        assert fast.plausible.max() <= max_check


def test_verdicts_follow_the_tests(model, seeds) -> None:
    synthesis = SynthesisParams(omega_min=1, omega_max=3)
    one = generate_candidates(model, seeds, synthesis=synthesis, test=PrivacyTestParams(k=8, gamma=2.0), n=60,
                              source=SeededSource(np.random.default_rng(5)))
    assert np.array_equal(one.passed, one.plausible >= 8) and (one.thresholds == 8).all()
    two = generate_candidates(model, seeds, synthesis=synthesis,
                              test=PrivacyTestParams(k=8, gamma=2.0, epsilon0=0.5), n=60,
                              source=SeededSource(np.random.default_rng(5)))
    assert np.array_equal(two.plausible, one.plausible)  # same stream: same seeds and candidates
    assert np.array_equal(two.passed, two.plausible >= two.thresholds) and (two.thresholds != 8).any()
    assert two.released(DOMAIN.names).shape == (int(two.passed.sum()), M)
    # the seed itself is always plausible: k' ≥ 1
    assert (one.plausible >= 1).all()


def test_same_seed_same_candidates_other_seed_other_candidates(model, seeds) -> None:
    def run(seed: int):
        return generate_candidates(model, seeds, synthesis=SynthesisParams(omega_min=1, omega_max=M),
                                   test=PrivacyTestParams(k=5, gamma=2.0, epsilon0=1.0, max_check_plausible=50),
                                   n=40, source=SeededSource(np.random.default_rng(seed)))
    a, b, c = run(1), run(1), run(2)
    assert np.array_equal(a.candidates, b.candidates) and np.array_equal(a.thresholds, b.thresholds)
    assert not np.array_equal(a.candidates, c.candidates)


def test_theorem1_guarantee_for_the_users_t() -> None:
    test = PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0)
    eps, delta = test.guarantee(10)
    assert eps == pytest.approx(1.0 + np.log(1.4)) and delta == pytest.approx(np.exp(-40.0))
    with pytest.raises(SpecError, match="Theorem 1 holds for Privacy Test 2 only"):
        PrivacyTestParams(k=50, gamma=4.0).guarantee(10)


def test_bad_parameters_are_refused_before_any_work(model, seeds, tmp_path: Path) -> None:
    for kwargs, fragment in [({"k": 0}, r"k \(0\) must be an int >= 1"), ({"gamma": 1.0}, r"gamma \(1.0\) must be"),
                             ({"epsilon0": 0.0}, r"epsilon0 \(0.0\) must be"),
                             ({"max_plausible": 0}, "max_plausible"), ({"max_check_plausible": 0}, "max_check")]:
        with pytest.raises(SpecError, match=fragment):
            PrivacyTestParams(**{"k": 5, "gamma": 2.0, **kwargs})
    with pytest.raises(SpecError, match=r"omega_min \(0\) must be an int >= 1"):
        SynthesisParams.fixed(0)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(SpecError, match=rf"omega_max \({M + 1}\) must be <= m \({M}\)"):
        generate_candidates(model, seeds, synthesis=SynthesisParams.fixed(M + 1), test=PrivacyTestParams(k=5, gamma=2.0),
                            n=3, source=SeededSource(rng))
    with pytest.raises(SpecError, match="method"):
        generate_candidates(model, seeds, synthesis=SynthesisParams.fixed(1), test=PrivacyTestParams(k=5, gamma=2.0),
                            n=3, source=SeededSource(rng), method="quick")
    assert rng.bit_generator.state == state
    with TranscriptWriter(tmp_path / "t", context={"spec_sha256": "0", "data_sha256": "1"}) as writer:
        with pytest.raises(ModeError, match="not release-safe"):
            generate_candidates(model, seeds, synthesis=SynthesisParams.fixed(1),
                                test=PrivacyTestParams(k=5, gamma=2.0), n=3, source=SecureSource(writer))


# --- the batched path (issue 10, throughput) --------------------------------------------------

FIELDS = ("candidates", "seed_rows", "omegas", "plausible", "thresholds", "passed")
KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


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


BATCHED_STOPPING = [*STOPPING, (2, 149)]


@pytest.mark.parametrize("epsilon0", [None, 1.0, 0.1], ids=["test1", "test2", "test2-eps0.1"])
@pytest.mark.parametrize(("max_plausible", "max_check"), BATCHED_STOPPING)
@pytest.mark.parametrize("synthesis", SYNTHESES, ids=lambda s: f"omega{s.omega_min}-{s.omega_max}-{s.omega_rule}")
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


@pytest.mark.parametrize("omega_rule", ["per_candidate", "mixture"])
@pytest.mark.parametrize("gamma", [1.2, 4.0])
def test_batched_equals_the_literal_loop_over_seeds(model, seeds, gamma: float, omega_rule: str) -> None:
    synthesis = SynthesisParams(omega_min=1, omega_max=M, omega_rule=omega_rule)
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


def _fitted_with(ledger: Ledger, accountant: str, split: PositionalSplit | None = None) -> PlausibleDeniabilityModel:
    data = coded(1200, 0)
    params = PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=20, accountant=accountant)
    return PlausibleDeniabilityModel(params).fit(
        data, split=split or halves(len(data)), domain=DOMAIN, ledger=ledger,
        source=SeededSource(np.random.default_rng(1)), buckets={"d": [0, 0, 1, 1, 2]})


def test_ledger_total_is_model_plus_theorem1_basic() -> None:
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="basic")
    _fitted_with(ledger, "basic")
    model_events = ledger.events
    assert ledger.total().epsilon == 1.0  # D_T and D_P are a positional split: each half is ε = 1
    test = PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0)
    total = record_generation(ledger, test, t=10, invocations=3)
    eps_t, delta_t = 1.0 + math.log1p(4.0 / 10), math.exp(-1.0 * 40)  # Theorem 1, add/remove-one
    eps_r, delta_r = 2 * eps_t, (1 + math.exp(eps_t)) * delta_t          # replace-one: group of 2
    # Without the three-way split declared, D_S's scope composes sequentially with the model.
    assert total.epsilon == pytest.approx(1.0 + 3 * eps_r, rel=1e-12)
    assert total.delta == pytest.approx(3 * delta_r, rel=1e-12)
    new = ledger.events[len(model_events):]
    assert len(new) == 1 and new[0].scope == "data/seeds" and new[0].step == "pd.test"
    assert new[0].typed == SelfComposed(EpsilonDeltaEvent(eps_r, delta_r, new[0].typed.event.theorem), 3)
    assert "Theorem 1" in new[0].typed.event.theorem and "replace-one" in new[0].typed.event.theorem
    assert dict(new[0].details) == {"k": 50, "gamma": 4.0, "epsilon0": 1.0, "t": 10, "neighbouring": "replace_one",
                                    "invocations": 3, "per_candidate_epsilon": eps_r,
                                    "per_candidate_delta": delta_r}


def test_with_the_three_way_positional_split_the_run_is_its_worst_part() -> None:
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="basic")
    split = PositionalSplit.permuted(1200, [500, 500, 200], rng=np.random.default_rng(7))
    ledger.declare_partition(*SPLIT_PARTITION, split=split)
    _fitted_with(ledger, "basic", split)
    assert len(ledger.partitions) == 1  # the fit found the split and declared no other
    total = record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=10, invocations=3)
    eps_t, delta_t = 1.0 + math.log1p(4.0 / 10), math.exp(-1.0 * 40)
    assert total.epsilon == pytest.approx(max(1.0, 3 * 2 * eps_t), rel=1e-12)
    assert total.delta == pytest.approx(3 * (1 + math.exp(eps_t)) * delta_t, rel=1e-12)


def test_ledger_total_is_model_plus_theorem1_advanced() -> None:
    slack = 2.0**-30
    # The model's halves are a permutation cut at n-dependent sizes: not a parallel split under
    # add/remove neighbours, so an add/remove ledger refuses the fit before anything is drawn.
    refusing = Ledger(epsilon_cap=None, delta_cap=None, accountant="advanced", delta_slack=slack,
                      neighbouring="add_remove")
    with pytest.raises(LedgerError, match=re.escape("ln(2/3 + e²/3) = 1.141")):
        _fitted_with(refusing, "advanced")
    assert len(refusing) == 0 and refusing.partitions == ()
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="advanced", delta_slack=slack)
    _fitted_with(ledger, "advanced")
    # Theorem 1 under replace-one is its add/remove guarantee for a group of 2: (2ε_T, (1 + e^ε_T)δ_T).
    eps_t, delta_t = 0.5 + math.log1p(2.0 / 5), math.exp(-0.5 * 25)
    model = ledger.total()  # this small model's K steps: the basic split ε/K beats Theorem 3.20
    assert (model.epsilon, model.delta) == (1.0, 0.0)
    # Two candidates: 2·ε per candidate beats Theorem 3.20, so the scope keeps its basic total.
    few = ledger.fresh()
    for event in ledger.events:
        few.spend(event)
    total = record_generation(few, PrivacyTestParams(k=30, gamma=2.0, epsilon0=0.5), t=5, invocations=2)
    assert total.epsilon == pytest.approx(1.0 + 2 * (2 * eps_t), rel=1e-12)
    assert total.delta == pytest.approx(2 * (1 + math.exp(eps_t)) * delta_t, rel=1e-12)
    # A million candidates at a small ε_T: the accountant composes the N = 10⁶ runs by Theorem 3.20.
    test = PrivacyTestParams(k=3000, gamma=1.01, epsilon0=0.01)
    base, base_delta = 0.01 + math.log1p(1.01 / 1000), math.exp(-0.01 * 2000)
    eps_s, delta_s = 2 * base, (1 + math.exp(base)) * base_delta
    advanced = composition.advanced(epsilon=eps_s, delta=delta_s, k=10**6, delta_slack=slack)
    assert advanced[0] < 10**6 * eps_s
    total = record_generation(ledger, test, t=1000, invocations=10**6)
    assert total.epsilon == pytest.approx(1.0 + advanced[0], rel=1e-12)
    assert total.delta == pytest.approx(advanced[1], rel=1e-12)
    assert ledger.events[-1].epsilon == pytest.approx(10**6 * eps_s)  # the record keeps the basic guarantee


def test_ledger_statement_refuses_before_recording() -> None:
    ledger = Ledger(epsilon_cap=3.0, delta_cap=1e-3, accountant="basic")
    _fitted_with(ledger, "basic")
    before = ledger.events
    with pytest.raises(SpecError, match="Theorem 1 holds for Privacy Test 2 only"):
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0), t=10, invocations=1)
    with pytest.raises(ValueError, match=r"t \(50\) must be < k \(50\)"):
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=50, invocations=1)
    with pytest.raises(SpecError, match=r"invocations \(0\) must be an int >= 1"):
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=10, invocations=0)
    with pytest.raises(BudgetExceededError):  # 1 + 2 · 2·(1 + ln 1.4) > 3
        record_generation(ledger, PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0), t=10, invocations=2)
    with pytest.raises(SpecError, match="reach 1"):  # δ_T·N ≥ 1
        record_generation(ledger, PrivacyTestParams(k=3, gamma=4.0, epsilon0=0.1), t=1, invocations=100)
    assert ledger.events == before
