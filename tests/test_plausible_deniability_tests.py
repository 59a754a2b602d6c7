"""Plausible deniability (issue 10 items 4–6): synthesis, exact Pr{y = M(d)}, Privacy Tests 1–2."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams, generate_candidates
from privlab.mechanisms.plausible_deniability.probability import (
    SeedIndex, generation_probability, partition_index, prefix_probabilities)
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams, synthesize
from privlab.platform.errors import ModeError, SpecError
from privlab.platform.randomness import SecureSource, SeededSource
from privlab.platform.transcript import TranscriptWriter

from privlab.mechanisms.plausible_deniability.model import (
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.ledger import Ledger

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


def fitted(seed: int) -> PlausibleDeniabilityModel:
    data = coded(1200, 0)
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant="advanced", delta_slack=2.0**-30)
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=20))
    return model.fit(data.iloc[:500], parameter_data=data.iloc[500:], domain=DOMAIN, ledger=ledger,
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
def test_synthesis_frequencies_match_the_exact_probability(model, seeds) -> None:
    """20,000 seeded syntheses from one seed with ω ∈R [1, m]: every outcome's frequency is
    within 5 standard errors (plus 1e-3) of its exact probability."""
    synthesis = SynthesisParams(omega_min=1, omega_max=M)
    seed = seeds.to_numpy()[1]
    rng = np.random.default_rng(12)
    n = 20_000
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(n):
        omega = int(rng.integers(1, M + 1))
        y = tuple(synthesize(model, seed, omega, rng.random(M)).tolist())
        counts[y] = counts.get(y, 0) + 1
    for y in _universe():
        p = generation_probability(model, seed, y, synthesis)
        freq = counts.get(tuple(y.tolist()), 0) / n
        assert abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-3, (y, p, freq)


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
             SynthesisParams(omega_min=1, omega_max=M), SynthesisParams(omega_min=2, omega_max=3)]
STOPPING = [(None, None), (4, None), (10, None), (None, 40), (12, 60), (None, 150), (3, 1000)]


@pytest.mark.parametrize("epsilon0", [None, 1.0], ids=["test1", "test2"])
@pytest.mark.parametrize(("max_plausible", "max_check"), STOPPING)
@pytest.mark.parametrize("synthesis", SYNTHESES, ids=lambda s: f"omega{s.omega_min}-{s.omega_max}")
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
