"""Tests of private selection with a known threshold (Liu & Talwar; Hod & Canetti, Theorem 3).

Three tiers: exact accounting (one ledger event of 2ε₁ + ε₀, nothing per iteration, refused
before anything runs), deterministic control flow with a scripted random source (γ-coin, T
cutoff, guard), and seeded Monte Carlo checks of Theorem 3's output distribution, iteration
count and ⊥ probability. Every Monte Carlo tolerance is 6 standard errors computed from the
sample size and the exact variance, so a different seed would fail with probability < 1e-8
per comparison.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.selection.private_selection import (
    PrivateSelectionParams,
    SelectionIteration,
    SelectionOutcome,
    private_selection,
)
from privlab.platform.core.errors import BudgetExceededError, LedgerError
from privlab.platform.dp import composition
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource, ReplaySource, SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptReader, TranscriptWriter, read_records

CONTEXT = {"spec_sha256": "ab12", "data_sha256": "cd34"}
CANDIDATES = (0, 1, 2, 3, 4)
ACCEPTANCE = (0.05, 0.1, 0.2, 0.3, 0.6)  # p_c of the toy flow below; mean 0.25
THRESHOLD = 0.0
EPSILON1 = 1.0  # Laplace scale b = 1/ε₁ = 1


def _quality(p: float) -> float:
    """s with Pr[s + Lap(1) ≥ 0] = p: 0.5·e^s for s ≤ 0, 1 − 0.5·e^(−s) for s > 0."""
    return math.log(2 * p) if p <= 0.5 else -math.log(2 * (1 - p))


@dataclasses.dataclass(frozen=True)
class NoisyThresholdFlow:
    """A genuine ε₁-DP toy flow: release s_c + Lap(1/ε₁) and accept when it is ≥ 0."""

    qualities: tuple[float, ...] = tuple(_quality(p) for p in ACCEPTANCE)

    def __call__(
        self, candidate: int, iteration: int, *, source: RandomSource, ledger: Ledger
    ) -> tuple[float, bool]:
        noisy = float(laplace_mechanism(self.qualities[candidate], sensitivity=1.0,
                                        epsilon=EPSILON1, source=source, ledger=ledger,
                                        name="quality", step="acceptance"))
        return noisy, noisy >= THRESHOLD


class ScriptedSource(RandomSource):
    """A test double: integers and coins come from scripts; every request is logged."""

    mode: ClassVar[str] = "research"

    def __init__(self, *, indices: Iterator[int], coins: Iterator[bool]) -> None:
        self._indices, self._coins = indices, coins
        self.requests: list[tuple[str, Any]] = []

    def noise_lattice(self, scale: float) -> None:
        return None

    def _draw_laplace(self, scale: float, shape: Any) -> Any:
        raise AssertionError("the selection itself draws no Laplace noise")

    def _draw_integers(self, low: int, high: int, shape: Any) -> Any:
        self.requests.append(("integers", (low, high)))
        return next(self._indices)

    def _draw_uniform(self, shape: Any) -> Any:
        raise AssertionError("the selection draws no uniforms")

    def _draw_bernoulli(self, p: float, shape: Any) -> Any:
        self.requests.append(("bernoulli", p))
        return next(self._coins)

    def _generator(self, purpose: str) -> np.random.Generator:
        raise AssertionError("the selection needs no post-processing stream")


class CountingFlow:
    """Accepts exactly at iteration ``accept_at`` (never if None); charges ε₁ each time."""

    def __init__(self, *, accept_at: int | None, outer: Ledger | None = None) -> None:
        self.accept_at, self.outer = accept_at, outer
        self.calls: list[tuple[int, int]] = []
        self.outer_sizes: list[int] = []

    def __call__(
        self, candidate: int, iteration: int, *, source: RandomSource, ledger: Ledger
    ) -> tuple[str, bool]:
        self.calls.append((candidate, iteration))
        if self.outer is not None:
            self.outer_sizes.append(len(self.outer))
        ledger.charge(name="fit", mechanism="laplace", epsilon=0.6 * EPSILON1, step="fit")
        ledger.charge(name="accept", mechanism="laplace", epsilon=0.4 * EPSILON1, step="accept")
        return f"dataset-{candidate}-{iteration}", iteration == self.accept_at


def _never() -> Iterator[bool]:
    while True:
        yield False


def _cycle(values: tuple[int, ...]) -> Iterator[int]:
    while True:
        yield from values


def _seeded(seed: int) -> SeededSource:
    return SeededSource(np.random.default_rng(seed))


# --- parameters ----------------------------------------------------------------------------


def test_params_enforce_the_T_bound() -> None:
    # γ = ε₀ = 0.1: T ≥ max{ln(2/0.1)/0.1, 1 + 1/(0.1e)} = max{29.957, 4.679} → T = 30.
    with pytest.raises(LedgerError, match=r"steps \(29\) must be >= 30"):
        PrivateSelectionParams(gamma=0.1, steps=29, epsilon0=0.1)
    params = PrivateSelectionParams(gamma=0.1, steps=30.0, epsilon0=0.1)
    assert params == PrivateSelectionParams(gamma=0.1, steps=30, epsilon0=0.1)
    assert type(params.steps) is int and params.steps == 30
    assert not params.is_infinite_horizon
    # γ = 0.1, ε₀ = 1: max{ln 2/0.1, 1 + 1/(0.1e)} = max{6.93, 4.68} → T = 7.
    with pytest.raises(LedgerError, match=r"steps \(6\) must be >= 7"):
        PrivateSelectionParams(gamma=0.1, steps=6, epsilon0=1.0)
    # γ > 0 with ε₀ = 0: ln(2/ε₀) is infinite, so only T = ∞ is valid (the γ-coin ends it).
    with pytest.raises(LedgerError, match=r"steps \(1000\) must be >= math.inf"):
        PrivateSelectionParams(gamma=0.5, steps=1000, epsilon0=0.0)
    assert PrivateSelectionParams(gamma=0.5, steps=math.inf, epsilon0=0.0).steps == math.inf


def test_params_infinite_horizon() -> None:
    params = PrivateSelectionParams.infinite_horizon()
    assert (params.gamma, params.steps, params.epsilon0) == (0.0, math.inf, 0.0)
    assert params.is_infinite_horizon
    with pytest.raises(LedgerError, match=r"steps \(100\) must be math.inf"):
        PrivateSelectionParams(gamma=0.0, steps=100, epsilon0=0.0)
    with pytest.raises(LedgerError, match=r"epsilon0 \(0.1\) must be 0 when gamma is 0"):
        PrivateSelectionParams(gamma=0.0, steps=math.inf, epsilon0=0.1)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"gamma": True}, TypeError, r"gamma \(True\) must be a real number"),
        ({"steps": "30"}, TypeError, r"steps \('30'\) must be a real number"),
        ({"epsilon0": None}, TypeError, r"epsilon0 \(None\) must be a real number"),
        ({"gamma": 1.5}, LedgerError, r"gamma \(1.5\) must be in \[0, 1\]"),
        ({"gamma": math.nan}, LedgerError, r"gamma \(nan\) must be in \[0, 1\]"),
        ({"epsilon0": -0.1}, LedgerError, r"epsilon0 \(-0.1\) must be in \[0, 1\]"),
        ({"epsilon0": 1.5}, LedgerError, r"epsilon0 \(1.5\) must be in \[0, 1\]"),
        ({"steps": 0}, LedgerError, r"steps \(0\) must be a positive integer or math.inf"),
        ({"steps": 30.5}, LedgerError, r"steps \(30.5\) must be a positive integer"),
        ({"steps": math.nan}, LedgerError, r"steps \(nan\) must be a positive integer"),
    ],
)
def test_params_reject_bad_values(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        PrivateSelectionParams(**{"gamma": 0.1, "steps": 30, "epsilon0": 0.1, **kwargs})


def test_params_are_frozen_and_keyword_only() -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=30, epsilon0=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.gamma = 0.2  # type: ignore[misc]
    with pytest.raises(TypeError):
        PrivateSelectionParams(0.1, 30, 0.1)  # type: ignore[misc]
    assert dataclasses.asdict(params) == {"gamma": 0.1, "steps": 30, "epsilon0": 0.1}


def test_capped_picks_the_smallest_gamma() -> None:
    # T = 10000, ε₀ = 0.01: γ = max{ln(200)/10000, 1/(e·9999)} = max{5.298e-4, 3.68e-5}.
    params = PrivateSelectionParams.capped(steps=10_000, epsilon0=0.01)
    assert params.steps == 10_000 and params.epsilon0 == 0.01
    assert params.gamma == pytest.approx(math.log(200) / 10_000, rel=1e-12)
    with pytest.raises(LedgerError, match=r"must be >= 10001"):  # a hair smaller γ: T too small
        composition.validate_private_selection(steps=10_000, gamma=params.gamma * (1 - 1e-9),
                                               epsilon0=0.01)
    # Small T where 1 + 1/(eγ) binds: T = 3, ε₀ = 1 → γ = max{ln 2/3, 1/(2e)} = 0.2310 vs 0.1839.
    assert PrivateSelectionParams.capped(steps=3, epsilon0=1.0).gamma == pytest.approx(
        math.log(2) / 3, rel=1e-12)
    with pytest.raises(LedgerError, match=r"steps \(1\) must be >= 2"):
        PrivateSelectionParams.capped(steps=1, epsilon0=1.0)
    with pytest.raises(LedgerError, match=r"smallest γ that covers it .* exceeds 1"):
        PrivateSelectionParams.capped(steps=2, epsilon0=0.01)  # ln(200)/2 = 2.65
    with pytest.raises(LedgerError, match=r"epsilon0 \(0.0\) must be in \(0, 1\]"):
        PrivateSelectionParams.capped(steps=100, epsilon0=0.0)
    with pytest.raises(TypeError, match=r"steps \(100.0\) must be an int"):
        PrivateSelectionParams.capped(steps=100.0, epsilon0=0.5)  # type: ignore[arg-type]


def _iteration_pmf(p: float, gamma: float, steps: int) -> list[float]:
    """Pr[N = j] for j = 1..T straight from Algorithm 1: continue with q = (1 − p)(1 − γ)."""
    q = (1 - p) * (1 - gamma)
    return [q ** (j - 1) * (1 - q) for j in range(1, steps)] + [q ** (steps - 1)]


@pytest.mark.parametrize("gamma", [0.01, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("epsilon0", [0.01, 0.3, 1.0])
@pytest.mark.parametrize("p", [0.0, 0.01, 0.25, 0.9, 1.0])
def test_closed_forms_follow_algorithm_1_and_meet_theorem_3(
    gamma: float, epsilon0: float, p: float
) -> None:
    bound = max(math.log(2 / epsilon0) / gamma, 1 + 1 / (math.e * gamma))
    params = PrivateSelectionParams(gamma=gamma, steps=math.ceil(bound), epsilon0=epsilon0)
    pmf = _iteration_pmf(p, gamma, params.steps)
    assert math.fsum(pmf) == pytest.approx(1.0, rel=1e-12)
    expected = math.fsum(j * w for j, w in enumerate(pmf, start=1))
    accepted = math.fsum(p * (1 - p) ** (j - 1) * (1 - gamma) ** (j - 1)
                         for j in range(1, params.steps + 1))
    assert params.expected_iterations(p) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert params.bottom_probability(p) == pytest.approx(1 - accepted, rel=1e-9, abs=1e-12)
    # Theorem 3, item 3: E[T̃] ≤ 1/(p(1 − γ) + γ); item 4: Pr[⊥] ≤ (1 − p)(1 + ε₀/2)γ/p.
    assert params.expected_iterations(p) <= 1 / (p * (1 - gamma) + gamma) * (1 + 1e-12)
    if p > 0:
        assert params.bottom_probability(p) <= (1 - p) * (1 + epsilon0 / 2) * gamma / p + 1e-15


def test_closed_forms_for_the_infinite_horizon() -> None:
    params = PrivateSelectionParams.infinite_horizon()
    assert params.expected_iterations(0.1) == pytest.approx(10.0, rel=1e-15)
    assert params.expected_iterations(0.25) == 4.0
    assert params.bottom_probability(0.25) == 0.0
    assert params.expected_iterations(0.0) == math.inf  # never ends
    # γ > 0, T = ∞: E = 1/(p(1 − γ) + γ) exactly (item 3 with equality).
    coin = PrivateSelectionParams(gamma=0.1, steps=math.inf, epsilon0=0.0)
    assert coin.expected_iterations(0.25) == pytest.approx(1 / (0.25 * 0.9 + 0.1), rel=1e-15)
    with pytest.raises(ValueError, match=r"acceptance_probability \(1.5\) must be in \[0, 1\]"):
        params.expected_iterations(1.5)
    with pytest.raises(TypeError, match=r"acceptance_probability \('0.5'\) must be a real"):
        params.bottom_probability("0.5")  # type: ignore[arg-type]


# --- accounting ----------------------------------------------------------------------------


@pytest.mark.parametrize("accept_at", [1, 7, 40])
def test_the_ledger_is_charged_once_before_the_first_iteration(accept_at: int) -> None:
    epsilon0 = 0.1
    ledger = Ledger(epsilon_cap=2 * EPSILON1 + epsilon0)  # exactly the selection's price
    params = PrivateSelectionParams(gamma=0.1, steps=math.inf, epsilon0=epsilon0)
    flow = CountingFlow(accept_at=accept_at, outer=ledger)
    source = ScriptedSource(indices=_cycle((3, 1, 4)), coins=_never())
    outcome = private_selection(flow, candidates=CANDIDATES, params=params, epsilon1=EPSILON1,
                                source=source, ledger=ledger, name="release", step="select")
    assert outcome.iterations == accept_at == len(flow.calls)
    assert flow.outer_sizes == [1] * accept_at  # charged before iteration 1, never again
    assert len(ledger) == 1
    assert ledger.total().epsilon == 2 * EPSILON1 + epsilon0
    (event,) = ledger.events
    assert outcome.event is event
    assert (event.name, event.mechanism, event.step, event.scope) == (
        "release", "private_selection_known_threshold", "select", "data")
    assert dict(event.details) == {"epsilon1": 1.0, "epsilon0": 0.1, "gamma": 0.1,
                                   "steps": "inf"}
    # The accepted flow's own split of ε₁ is reported, not charged.
    assert [(e.name, e.epsilon) for e in outcome.accepted_events] == [("fit", 0.6), ("accept", 0.4)]
    assert all(it.epsilon_spent == pytest.approx(EPSILON1, rel=1e-15) for it in outcome.trace)


def test_live_births_accounting_is_two_epsilon1() -> None:
    # Hod & Canetti §4.9: ε₁ = ε_x + ε_q = 4 + 0.99, infinite horizon → 2·4.99 = 9.98.
    ledger = Ledger(epsilon_cap=9.98)
    flow_epsilon = 4 + 0.99

    def flow(candidate: int, iteration: int, *, source: RandomSource,
             ledger: Ledger) -> tuple[int, bool]:
        ledger.charge(name="privbayes", mechanism="exponential", epsilon=4.0)
        ledger.charge(name="criteria", mechanism="laplace", epsilon=0.99)
        return candidate, iteration == 3

    outcome = private_selection(flow, candidates=CANDIDATES,
                                params=PrivateSelectionParams.infinite_horizon(),
                                epsilon1=flow_epsilon, source=_seeded(5), ledger=ledger)
    assert outcome.iterations == 3 and len(ledger) == 1
    assert ledger.total().epsilon == 2 * flow_epsilon == pytest.approx(9.98, rel=1e-12)


@pytest.mark.parametrize("kind", ["seeded", "secure"])
def test_a_selection_over_budget_runs_nothing(kind: str, tmp_path: Path) -> None:
    ledger = Ledger(epsilon_cap=1.0)
    ledger.charge(name="earlier", mechanism="laplace", epsilon=0.2)
    flow = CountingFlow(accept_at=1)
    params = PrivateSelectionParams(gamma=0.1, steps=30, epsilon0=0.1)  # 2·0.4 + 0.1 = 0.9
    with TranscriptWriter(tmp_path / "t.bin", context=CONTEXT) as writer:
        rng = np.random.default_rng(3)
        state = rng.bit_generator.state
        source = SeededSource(rng) if kind == "seeded" else SecureSource(writer)
        with pytest.raises(BudgetExceededError, match=r"ε to 1.1, over the cap of 1"):
            private_selection(flow, candidates=CANDIDATES, params=params, epsilon1=0.4,
                              source=source, ledger=ledger)
        assert flow.calls == [] and len(ledger) == 1
        assert rng.bit_generator.state == state and writer.count == 0  # not one draw was made


def test_each_flow_is_capped_at_epsilon1() -> None:
    ledger = Ledger(epsilon_cap=None)

    def greedy(candidate: int, iteration: int, *, source: RandomSource,
               ledger: Ledger) -> tuple[int, bool]:
        ledger.charge(name="fit", mechanism="laplace", epsilon=0.5)
        ledger.charge(name="accept", mechanism="laplace", epsilon=0.5 + 1e-9)  # ε₁ + 1e-9
        raise AssertionError("the over-budget step must be refused before it runs")

    with pytest.raises(BudgetExceededError, match=r"'accept'.*over the cap of 1"):
        private_selection(greedy, candidates=CANDIDATES,
                          params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                          source=_seeded(0), ledger=ledger)
    assert len(ledger) == 1  # the search stays charged: a flow had already read the data


def test_a_flow_may_not_charge_the_outer_ledger() -> None:
    ledger = Ledger(epsilon_cap=None)

    def leaky(candidate: int, iteration: int, *, source: RandomSource,
              ledger: Ledger) -> tuple[int, bool]:
        outer.charge(name="oops", mechanism="laplace", epsilon=0.1)
        ledger.charge(name="ok", mechanism="laplace", epsilon=0.1)
        return candidate, True

    outer = ledger
    with pytest.raises(LedgerError, match="run_once charged the outer ledger in iteration 1"):
        private_selection(leaky, candidates=CANDIDATES,
                          params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                          source=_seeded(0), ledger=ledger)


def test_a_flow_must_charge_its_scratch_ledger() -> None:
    def free(candidate: int, iteration: int, *, source: RandomSource,
             ledger: Ledger) -> tuple[int, bool]:
        return candidate, True

    with pytest.raises(LedgerError, match="run_once charged nothing to its scratch ledger"):
        private_selection(free, candidates=CANDIDATES,
                          params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                          source=_seeded(0), ledger=Ledger(epsilon_cap=None))


@pytest.mark.parametrize("verdict", [1, 0.7, "yes", None])
def test_the_acceptance_decision_must_be_a_bool(verdict: object) -> None:
    def scoring(candidate: int, iteration: int, *, source: RandomSource,
                ledger: Ledger) -> tuple[int, object]:
        ledger.charge(name="accept", mechanism="laplace", epsilon=1.0)
        return candidate, verdict

    with pytest.raises(TypeError, match=r"accepted \(.*\) must be a bool"):
        private_selection(scoring, candidates=CANDIDATES,  # type: ignore[arg-type]
                          params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                          source=_seeded(0), ledger=Ledger(epsilon_cap=None))


def test_numpy_bools_are_accepted_decisions() -> None:
    def flow(candidate: int, iteration: int, *, source: RandomSource,
             ledger: Ledger) -> tuple[int, bool]:
        ledger.charge(name="accept", mechanism="laplace", epsilon=1.0)
        return candidate, np.bool_(True)  # type: ignore[return-value]

    outcome = private_selection(flow, candidates=CANDIDATES,
                                params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                                source=_seeded(0), ledger=Ledger(epsilon_cap=None))
    assert outcome.stop_reason == "accepted" and outcome.trace[0].accepted is True


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"candidates": ()}, LedgerError, r"candidates \(\(\)\) must be non-empty"),
        ({"candidates": "abc"}, TypeError, r"candidates \('abc'\) must be a sequence"),
        ({"candidates": {1, 2}}, TypeError, r"must be a sequence of configurations"),
        ({"params": {"gamma": 0.0}}, TypeError, r"params .* must be a PrivateSelectionParams"),
        ({"source": np.random.default_rng(0)}, TypeError, r"source .* must be a RandomSource"),
        ({"ledger": None}, TypeError, r"ledger \(None\) must be a Ledger"),
        ({"epsilon1": 0.0}, LedgerError, r"epsilon1 \(0.0\) must be finite and > 0"),
        ({"epsilon1": math.inf}, LedgerError, r"epsilon1 \(inf\) must be finite and > 0"),
        ({"on_iteration": 3}, TypeError, r"on_iteration \(3\) must be callable or None"),
        ({"max_iterations": True}, TypeError, r"max_iterations \(True\) must be an int"),
        ({"max_iterations": 0}, LedgerError, r"max_iterations \(0\) must be >= 1"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(
    kwargs: dict[str, Any], error: type, message: str
) -> None:
    ledger = Ledger(epsilon_cap=None)
    flow = CountingFlow(accept_at=1)
    arguments: dict[str, Any] = {
        "candidates": CANDIDATES, "params": PrivateSelectionParams.infinite_horizon(),
        "epsilon1": 1.0, "source": _seeded(0), "ledger": ledger, **kwargs,
    }
    with pytest.raises(error, match=message):
        private_selection(flow, **arguments)
    assert flow.calls == [] and len(ledger) == 0


# --- control flow: the γ-coin, the T cutoff and the guard ----------------------------------


def test_the_gamma_coin_stops_with_bottom() -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=30, epsilon0=0.1)
    flow = CountingFlow(accept_at=None)
    source = ScriptedSource(indices=_cycle((2, 0)), coins=iter([False, False, True]))
    outcome = private_selection(flow, candidates=("a", "b", "c"), params=params, epsilon1=1.0,
                                source=source, ledger=Ledger(epsilon_cap=None))
    assert outcome.is_bottom and outcome.stop_reason == "gamma"
    assert (outcome.candidate, outcome.candidate_index, outcome.output) == (None, None, None)
    assert outcome.iterations == 3 and outcome.accepted_events == ()
    assert source.requests == [("integers", (0, 3)), ("bernoulli", 0.1)] * 3
    assert flow.calls == [("c", 1), ("a", 2), ("c", 3)]


def test_the_horizon_stops_with_bottom_without_a_last_coin() -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=7, epsilon0=1.0)
    flow = CountingFlow(accept_at=None)
    source = ScriptedSource(indices=_cycle((1,)), coins=_never())
    outcome = private_selection(flow, candidates=CANDIDATES, params=params, epsilon1=1.0,
                                source=source, ledger=Ledger(epsilon_cap=None))
    assert outcome.is_bottom and outcome.stop_reason == "horizon" and outcome.iterations == 7
    assert [r for r in source.requests if r[0] == "bernoulli"] == [("bernoulli", 0.1)] * 6
    assert [it.iteration for it in outcome.trace] == list(range(1, 8))


def test_acceptance_on_the_last_allowed_iteration_is_released() -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=7, epsilon0=1.0)
    source = ScriptedSource(indices=_cycle((4, 2)), coins=_never())
    outcome = private_selection(CountingFlow(accept_at=7), candidates=CANDIDATES, params=params,
                                epsilon1=1.0, source=source, ledger=Ledger(epsilon_cap=None))
    assert outcome.stop_reason == "accepted" and not outcome.is_bottom
    assert (outcome.candidate, outcome.output, outcome.iterations) == (4, "dataset-4-7", 7)


def test_gamma_one_gives_up_after_the_first_rejection() -> None:
    # γ = 1, ε₀ = 1: T ≥ max{ln 2, 1 + 1/e} = 1.37 → T = 2; the coin always lands.
    params = PrivateSelectionParams(gamma=1.0, steps=2, epsilon0=1.0)
    outcome = private_selection(CountingFlow(accept_at=None), candidates=CANDIDATES,
                                params=params, epsilon1=1.0, source=_seeded(1),
                                ledger=Ledger(epsilon_cap=None))
    assert (outcome.stop_reason, outcome.iterations) == ("gamma", 1)


def test_the_infinite_horizon_flips_no_coin_and_runs_until_accepted() -> None:
    indices = (3, 0, 4, 4, 1)
    source = ScriptedSource(indices=_cycle(indices), coins=iter([]))
    seen: list[SelectionIteration] = []
    outcome = private_selection(CountingFlow(accept_at=250), candidates=CANDIDATES,
                                params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                                source=source, ledger=Ledger(epsilon_cap=None),
                                on_iteration=seen.append)
    assert outcome.iterations == 250 and outcome.stop_reason == "accepted"
    assert source.requests == [("integers", (0, 5))] * 250  # no γ-coin at γ = 0
    assert outcome.candidate == outcome.candidate_index == indices[249 % 5]
    assert tuple(seen) == outcome.trace
    assert [it.candidate_index for it in seen] == [indices[j % 5] for j in range(250)]
    assert [it.accepted for it in seen] == [False] * 249 + [True]


def test_a_guard_on_the_infinite_horizon_is_refused_before_anything_runs() -> None:
    ledger = Ledger(epsilon_cap=None)
    flow = CountingFlow(accept_at=1)
    message = (r"max_iterations \(5000\) must be None with the infinite-horizon parameters.*"
               r"PrivateSelectionParams.capped\(steps=5000, epsilon0=...\)")
    with pytest.raises(LedgerError, match=message):
        private_selection(flow, candidates=CANDIDATES,
                          params=PrivateSelectionParams.infinite_horizon(), epsilon1=1.0,
                          source=_seeded(0), ledger=ledger, max_iterations=5000)
    assert flow.calls == [] and len(ledger) == 0


def test_a_guard_below_the_T_bound_is_refused() -> None:
    ledger = Ledger(epsilon_cap=None)
    params = PrivateSelectionParams(gamma=0.1, steps=math.inf, epsilon0=0.1)  # bound: 30
    with pytest.raises(LedgerError, match=re.escape("max_iterations (29) must itself satisfy "
                                                    "Theorem 3") + r".*must be >= 30"):
        private_selection(CountingFlow(accept_at=1), candidates=CANDIDATES, params=params,
                          epsilon1=1.0, source=_seeded(0), ledger=ledger, max_iterations=29)
    assert len(ledger) == 0


def test_a_guard_within_the_theorem_is_the_recorded_horizon() -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=math.inf, epsilon0=0.1)
    ledger = Ledger(epsilon_cap=None)
    source = ScriptedSource(indices=_cycle((0,)), coins=_never())
    outcome = private_selection(CountingFlow(accept_at=None), candidates=CANDIDATES,
                                params=params, epsilon1=1.0, source=source, ledger=ledger,
                                max_iterations=30)
    assert (outcome.stop_reason, outcome.iterations) == ("horizon", 30)
    assert dict(ledger.events[0].details)["steps"] == 30
    assert ledger.total().epsilon == 2.1
    # A guard at or above a finite T never binds and changes nothing.
    finite = PrivateSelectionParams(gamma=0.1, steps=30, epsilon0=0.1)
    ledger = Ledger(epsilon_cap=None)
    source = ScriptedSource(indices=_cycle((0,)), coins=_never())
    outcome = private_selection(CountingFlow(accept_at=None), candidates=CANDIDATES,
                                params=finite, epsilon1=1.0, source=source, ledger=ledger,
                                max_iterations=1000)
    assert outcome.iterations == 30 and dict(ledger.events[0].details)["steps"] == 30


# --- randomness: seeded, secure and replayed ------------------------------------------------


def _summary(outcome: SelectionOutcome[int, float]) -> tuple[Any, ...]:
    return (outcome.candidate_index, outcome.output, outcome.iterations, outcome.stop_reason,
            outcome.trace)


def test_seeded_runs_are_reproducible() -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=7, epsilon0=1.0)

    def run(seed: int) -> list[tuple[Any, ...]]:
        source, flow = _seeded(seed), NoisyThresholdFlow()
        return [_summary(private_selection(flow, candidates=CANDIDATES, params=params,
                                           epsilon1=EPSILON1, source=source,
                                           ledger=Ledger(epsilon_cap=None)))
                for _ in range(20)]

    first = run(11)
    assert run(11) == first
    assert run(12) != first  # continuous Laplace outputs: a tie has probability 0
    assert any(s[3] == "accepted" for s in first) and any(s[3] != "accepted" for s in first)


def test_release_mode_runs_on_the_csprng_and_replays_from_the_transcript(tmp_path: Path) -> None:
    params = PrivateSelectionParams(gamma=0.1, steps=7, epsilon0=1.0)
    path = tmp_path / "release.transcript"
    flow = NoisyThresholdFlow()

    def run(source: RandomSource) -> list[SelectionOutcome[int, float]]:
        return [private_selection(flow, candidates=CANDIDATES, params=params,
                                  epsilon1=EPSILON1, source=source,
                                  ledger=Ledger(epsilon_cap=3.0))  # 2·1 + 1
                for _ in range(6)]

    with TranscriptWriter(path, context=CONTEXT) as writer:
        recorded = run(SecureSource(writer))
    replay = ReplaySource(TranscriptReader(path, expected_context=CONTEXT))
    replayed = run(replay)
    replay.finish()  # every recorded draw was consumed, in order
    assert [_summary(o) for o in replayed] == [_summary(o) for o in recorded]
    assert all(e.mechanism == "laplace_lattice" for o in recorded for e in o.accepted_events)

    # The transcript holds exactly: per iteration a uniform index on [0, 5) and the flow's
    # lattice Laplace draw, then a γ-coin after each rejection except at T.
    ops = [(r.op, r.params) for r in read_records(path)]
    expected: list[str] = []
    for outcome in recorded:
        for it in outcome.trace:
            expected += ["integers", "laplace"]
            if not it.accepted and it.iteration < params.steps:
                expected.append("bernoulli")
    assert [op for op, _ in ops] == expected
    assert all(p == {"low": 0, "high": 5} for op, p in ops if op == "integers")
    assert all(p == {"p": 0.1} for op, p in ops if op == "bernoulli")


# --- Theorem 3 by Monte Carlo ---------------------------------------------------------------


REGIMES = {
    "infinite-horizon": PrivateSelectionParams.infinite_horizon(),
    "gamma-and-cutoff": PrivateSelectionParams(gamma=0.1, steps=7, epsilon0=1.0),
}


@pytest.mark.statistical
@pytest.mark.parametrize("regime", [pytest.param("infinite-horizon", marks=pytest.mark.slow),  # 8 s: slow suite
                                    "gamma-and-cutoff"])
def test_theorem_3_output_distribution_iterations_and_bottom(regime: str) -> None:
    """20,000 selections of the toy flow (p_c = 0.05, 0.1, 0.2, 0.3, 0.6; uniform draw).

    Item 1: conditioned on acceptance, the configuration is c with probability p_c/Σp
    whatever γ and T, and the released value is distributed as the flow's output given
    acceptance: for s_c ≤ 0, s_c + Lap(1) given ≥ 0 is Exp(1) (memorylessness), mean 1.
    Item 3 and the ⊥ probability: the iteration count N has the law of Algorithm 1 (see
    ``_iteration_pmf``; for the infinite horizon Geometric(p̄), mean 1/p̄ = 4).
    Tolerances: 6 standard errors of each estimate, from its exact variance.
    """
    params = REGIMES[regime]
    runs = 20_000
    source, flow = _seeded(20240), NoisyThresholdFlow()
    outcomes = [private_selection(flow, candidates=CANDIDATES, params=params,
                                  epsilon1=EPSILON1, source=source,
                                  ledger=Ledger(epsilon_cap=None))
                for _ in range(runs)]
    p_bar = float(np.mean(ACCEPTANCE))
    assert p_bar == 0.25

    # Item 1: the accepted configuration, per-cell binomial standard errors.
    accepted = [o for o in outcomes if not o.is_bottom]
    n = len(accepted)
    counts = np.bincount([o.candidate_index for o in accepted], minlength=5)
    share = np.array(ACCEPTANCE) / sum(ACCEPTANCE)
    se = np.sqrt(share * (1 - share) / n)
    assert np.all(np.abs(counts / n - share) <= 6 * se), (counts / n, share, se)
    # Item 1 on the output itself: Exp(1) excess over the threshold, sd 1.
    excess = np.array([o.output - THRESHOLD for o in accepted if o.candidate_index <= 3])
    assert np.all(excess >= 0.0)
    assert abs(excess.mean() - 1.0) <= 6 / math.sqrt(len(excess))

    # Item 3 and ⊥: compare with the law of N straight from Algorithm 1.
    iterations = np.array([o.iterations for o in outcomes])
    bottom = np.array([o.is_bottom for o in outcomes])
    if params.is_infinite_horizon:
        mean, var = 1 / p_bar, (1 - p_bar) / p_bar**2
        p_bottom, p_horizon = 0.0, 0.0
        assert not bottom.any()
    else:
        pmf = np.array(_iteration_pmf(p_bar, params.gamma, params.steps))
        j = np.arange(1, params.steps + 1)
        mean = float(pmf @ j)
        var = float(pmf @ j**2) - mean**2
        q = (1 - p_bar) * (1 - params.gamma)
        p_accept = p_bar * (1 - q**params.steps) / (1 - q)
        p_bottom = 1 - p_accept  # 0.2799
        p_horizon = q ** (params.steps - 1) * (1 - p_bar)  # reached T and rejected: 0.0711
        assert params.bottom_probability(p_bar) == pytest.approx(p_bottom, rel=1e-12)
        assert abs(bottom.mean() - p_bottom) <= 6 * math.sqrt(p_bottom * (1 - p_bottom) / runs)
        horizon = np.mean([o.stop_reason == "horizon" for o in outcomes])
        assert abs(horizon - p_horizon) <= 6 * math.sqrt(p_horizon * (1 - p_horizon) / runs)
        # Theorem 3, item 4's bound holds for the exact ⊥ probability.
        assert p_bottom <= (1 - p_bar) * (1 + params.epsilon0 / 2) * params.gamma / p_bar
        assert iterations.max() == params.steps
    assert params.expected_iterations(p_bar) == pytest.approx(mean, rel=1e-12)
    assert mean <= 1 / (p_bar * (1 - params.gamma) + params.gamma) + 1e-12  # item 3
    assert abs(iterations.mean() - mean) <= 6 * math.sqrt(var / runs)
