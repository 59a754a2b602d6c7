"""The exponential mechanism recorded as ε-bounded range: ε²/8 in zCDP (Cesar & Rogers 2021).

Exact accounting (the zcdp accountant, the zCDP filter's cost, the event's round trip) and the
two samplers' laws (research: Gumbel-max, seeded; release: rejection sampling on the OS CSPRNG),
each checked against the softmax ``exp(ε·u/(2Δ))`` the privacy argument assumes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from privlab.mechanisms.basic.exponential import exponential_mechanism
from privlab.platform.dp.dp_events import BoundedRangeEvent, ExponentialEvent, event_from_dict
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import zcdp_cost
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter
from privlab.platform.dp.zcdp_conversion import zcdp_to_epsilon

DELTA = 1e-9
UTILITIES = np.array([0.0, 1.0, 2.0, 3.0])


def _ledger(steps: int, epsilon: float, mechanism: str) -> Ledger:
    ledger = Ledger(epsilon_cap=None, delta_cap=DELTA, accountant="zcdp", delta_slack=DELTA)
    for i in range(steps):
        ledger.charge(name=f"select/{i}", mechanism=mechanism, epsilon=epsilon, sensitivity=1.0,
                      noise_scale=2.0 / epsilon)
    return ledger


def test_the_zcdp_accountant_charges_a_bounded_range_choice_a_quarter_of_a_pure_steps_rho() -> None:
    steps, epsilon = 50, 0.1
    bounded, pure = _ledger(steps, epsilon, "exponential_bounded_range"), _ledger(steps, epsilon, "exponential")
    assert all(isinstance(e.typed, BoundedRangeEvent) for e in bounded.events)
    assert all(isinstance(e.typed, ExponentialEvent) for e in pure.events)
    assert bounded.total("zcdp").epsilon == pytest.approx(zcdp_to_epsilon(steps * epsilon**2 / 8, DELTA), rel=1e-12)
    assert pure.total("zcdp").epsilon == pytest.approx(zcdp_to_epsilon(steps * epsilon**2 / 2, DELTA), rel=1e-12)
    # Still ε-DP per step for every other accountant: basic composition adds the ε.
    assert bounded.total("basic").epsilon == pytest.approx(steps * epsilon, rel=1e-12)


def test_a_bounded_range_event_round_trips_and_costs_eps_squared_over_8_in_a_zcdp_filter() -> None:
    event = PrivacyEvent(name="s", mechanism="exponential_rejection", epsilon=0.4, sensitivity=2.0, noise_scale=10.0)
    assert PrivacyEvent.from_dict(event.to_dict()).typed == BoundedRangeEvent(0.4)
    assert event_from_dict(BoundedRangeEvent(0.4).to_dict()) == BoundedRangeEvent(0.4)
    assert zcdp_cost(event) == pytest.approx(0.4**2 / 8, rel=1e-15)
    generic = PrivacyEvent(name="s", mechanism="permute_and_flip", epsilon=0.4, sensitivity=2.0, noise_scale=10.0)
    assert zcdp_cost(generic) == pytest.approx(0.4**2 / 2, rel=1e-15)


def _expected(epsilon: float, sensitivity: float, n: int) -> np.ndarray:
    weights = np.exp(epsilon * UTILITIES / (2 * sensitivity))
    return n * weights / weights.sum()


@pytest.mark.statistical
def test_research_bounded_range_choice_is_the_exponential_mechanism() -> None:
    """Fixed seed, 20,000 choices: the counts match softmax(ε·u/(2Δ)) (chi-square p > 1e-4,
    deterministic); at 2ε the p-value would be below 1e-300."""
    n, epsilon, sensitivity = 20_000, 1.0, 2.0
    source, ledger = SeededSource(np.random.default_rng(47)), Ledger(epsilon_cap=None)
    picks = [exponential_mechanism(UTILITIES, sensitivity=sensitivity, epsilon=epsilon, source=source, ledger=ledger,
                                   name="pick", bounded_range=True) for _ in range(n)]
    assert stats.chisquare(np.bincount(picks, minlength=4), _expected(epsilon, sensitivity, n)).pvalue > 1e-4
    assert {e.mechanism for e in ledger.events} == {"exponential_bounded_range"}
    assert all(e.noise_scale == 2 * sensitivity / epsilon for e in ledger.events)


@pytest.mark.statistical
def test_release_bounded_range_choice_is_the_exponential_mechanism(tmp_path: Path) -> None:
    """OS CSPRNG (not seedable), 3,000 choices: the counts match softmax(ε·u/(2Δ)) at
    chi-square p > 1e-9 (a false failure once in 10⁹ runs); at 2ε the expected statistic is
    about 900, p ~ 1e-190. Permute-and-flip, not bounded range, is not used for such a step."""
    n, epsilon, sensitivity = 3_000, 1.0, 1.0
    with TranscriptWriter(tmp_path / "t.transcript", context={"spec_sha256": "0", "data_sha256": "1"}) as writer:
        source, ledger = SecureSource(writer), Ledger(epsilon_cap=None)
        picks = [exponential_mechanism(UTILITIES, sensitivity=sensitivity, epsilon=epsilon, source=source,
                                       ledger=ledger, name="pick", bounded_range=True) for _ in range(n)]
    assert stats.chisquare(np.bincount(picks, minlength=4), _expected(epsilon, sensitivity, n)).pvalue > 1e-9
    assert {e.mechanism for e in ledger.events} == {"exponential_rejection"}
    assert all(isinstance(e.typed, BoundedRangeEvent) for e in ledger.events)
    assert math.isclose(ledger.total("basic").epsilon, n * epsilon)
