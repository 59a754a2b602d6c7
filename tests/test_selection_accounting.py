"""Private selection over flows that are not pure ε-DP: random stopping in Rényi DP.

The accounting (Papernot & Steinke 2022, Theorem 2, geometric number of runs) is held to an
independent computation, dp_accounting's ``RepeatAndSelectDpEvent`` under its RDP accountant, and
to the theorem's closed form for a ρ-zCDP base mechanism; the search itself to its stopping rule
and its per-flow checks. Everything here is fast: no data and no Private-PGM fit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event as dpe
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from privlab.mechanisms.selection.private_selection import (
    RANDOM_STOPPING,
    PrivateSelectionParams,
    RenyiBase,
    private_selection,
)
from privlab.platform.core.errors import LedgerError
from privlab.platform.dp.accountant_rdp import RDP_ORDERS
from privlab.platform.dp.dp_events import (
    Composed,
    GaussianEvent,
    LaplaceEvent,
    RandomStoppingEvent,
    event_from_dict,
)
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.dp.selection_accounting import check_random_stopping, flow_event, random_stopping_rdp


def _ours(flows: tuple, gamma: float, delta: float, epsilon_count: float = 0.02) -> float:
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="rdp", delta_slack=delta)
    ledger.spend(PrivacyEvent(name="record_count", mechanism="laplace", epsilon=epsilon_count, sensitivity=1.0,
                              noise_scale=1.0 / epsilon_count))
    ledger.spend(PrivacyEvent.from_dp_event(RandomStoppingEvent(flows, gamma), name="selection",
                                            mechanism=RANDOM_STOPPING))
    total = ledger.total()
    assert total.delta == delta
    return total.epsilon


def _dp_accounting(flow: dpe.DpEvent, gamma: float, delta: float, epsilon_count: float = 0.02) -> float:
    accountant = rdp.RdpAccountant(list(RDP_ORDERS))
    accountant.compose(dpe.LaplaceDpEvent(1.0 / epsilon_count))
    accountant.compose(dpe.RepeatAndSelectDpEvent(flow, mean=1.0 / gamma, shape=1.0))  # shape 1: geometric
    return accountant.get_epsilon(delta)


SIGMA = 1.0 / math.sqrt(2.0 * 0.2)  # ρ = 0.2, about an MST fit at ε = 4, δ'' = 1e-9


@pytest.mark.parametrize(("ours", "theirs"), [
    ((GaussianEvent(1.0, SIGMA),), dpe.GaussianDpEvent(SIGMA)),
    ((Composed((GaussianEvent(1.0, SIGMA), LaplaceEvent(1.0, 1 / 0.99))),),
     dpe.ComposedDpEvent([dpe.GaussianDpEvent(SIGMA), dpe.LaplaceDpEvent(1 / 0.99)])),
    ((LaplaceEvent(1.0, 1 / 4.99),), dpe.LaplaceDpEvent(1 / 4.99)),
], ids=["gaussian", "gaussian+laplace", "laplace"])
@pytest.mark.parametrize("gamma", [0.05, 0.2])
@pytest.mark.parametrize("delta", [1e-9, 1e-6])
def test_the_release_total_is_dp_accountings_repeat_and_select(ours: tuple, theirs: dpe.DpEvent, gamma: float,
                                                                delta: float) -> None:
    mine, reference = _ours(ours, gamma, delta), _dp_accounting(theirs, gamma, delta)
    assert mine == pytest.approx(reference, rel=1e-9), (mine, reference)


def test_the_curve_is_the_theorem_for_a_zcdp_base_mechanism() -> None:
    """ρ-zCDP is (λ, ρλ)-RDP; over λ̂ ≥ 1 the theorem's middle term is minimized at λ̂ = sqrt(ln(1/γ)/ρ),
    where 2·[ρ(λ̂ − 1) + ln(1/γ)/λ̂] = 4·sqrt(ρ ln(1/γ)) − 2ρ. On the accountant's orders the
    minimum can only be larger, by little (the orders are dense near λ̂ ≈ 4.8)."""
    rho, gamma = 0.2, 0.05
    log_inv = math.log(1 / gamma)
    curve = random_stopping_rdp(rho * RDP_ORDERS, RDP_ORDERS, gamma)
    closed = rho * RDP_ORDERS + 4 * math.sqrt(rho * log_inv) - 2 * rho + log_inv / (RDP_ORDERS - 1)
    closed = np.minimum.accumulate(closed[::-1])[::-1]
    assert np.all(curve >= closed - 1e-12)
    assert np.all(curve <= closed + 0.01)
    # A worked value at λ = 8: 1.6 + (4·sqrt(0.2·ln 20) − 0.4) + ln(20)/7 = 1.6 + 2.6962 + 0.4280 ≈ 4.7242.
    at8 = float(curve[list(RDP_ORDERS).index(8.0)])
    assert at8 == pytest.approx(1.6 + 4 * math.sqrt(0.2 * log_inv) - 0.4 + log_inv / 7, abs=0.01)
    assert 4.72 < at8 < 4.73


def test_the_base_mechanism_is_the_worst_flow_at_every_order() -> None:
    mst, privbayes = flow_event(rho=0.2, epsilon=0.99), flow_event(rho=0.0, epsilon=4.99)
    both = _ours((mst, privbayes), 0.05, 1e-9)
    assert both >= max(_ours((mst,), 0.05, 1e-9), _ours((privbayes,), 0.05, 1e-9))
    assert _ours((mst, mst), 0.05, 1e-9) == _ours((mst,), 0.05, 1e-9)


def test_random_stopping_has_no_guarantee_outside_renyi_dp() -> None:
    event = PrivacyEvent.from_dp_event(RandomStoppingEvent((flow_event(rho=0.2, epsilon=0.99),), 0.05),
                                       name="selection", mechanism=RANDOM_STOPPING)
    assert event.epsilon is None
    for accountant in ("basic", "zcdp", "pld"):
        ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant=accountant,
                        delta_slack=None if accountant == "basic" else 1e-9)
        with pytest.raises(LedgerError, match="rdp accountant|Rényi"):
            ledger.spend(event)
    assert event_from_dict(event.typed.to_dict()) == event.typed  # ledger.json round-trips


@pytest.mark.parametrize(("gamma", "steps", "epsilon0"), [(0.0, math.inf, 0.0), (0.05, 1000, 0.1), (1.0, math.inf, 0.0)])
def test_stopping_rules_the_theorem_does_not_cover_are_refused(gamma: float, steps: float, epsilon0: float) -> None:
    with pytest.raises(LedgerError, match="gamma in \\(0, 1\\)"):
        check_random_stopping(gamma=gamma, steps=steps, epsilon0=epsilon0)


class _Flow:
    """A fake flow: one Laplace step of ε on its scratch ledger; accepted on the ``accept_at``-th call."""

    def __init__(self, epsilon: float, accept_at: int) -> None:
        self.epsilon, self.accept_at, self.calls, self.ledgers = epsilon, accept_at, 0, []

    def __call__(self, candidate: str, iteration: int, *, source: object, ledger: Ledger) -> tuple[str, bool]:
        self.calls += 1
        self.ledgers.append(ledger)
        ledger.charge(name="step", mechanism="laplace", epsilon=self.epsilon, sensitivity=1.0,
                      noise_scale=1.0 / self.epsilon)
        return f"{candidate}@{iteration}", self.calls == self.accept_at


def _renyi(checked: list) -> RenyiBase[str]:
    return RenyiBase(flow_events=(flow_event(rho=0.0, epsilon=0.5),),
                     scratch_ledger=lambda candidate: Ledger(epsilon_cap=0.5, delta_cap=0.0),
                     check_spent=lambda candidate, ledger: checked.append((candidate, len(ledger))))


def test_a_renyi_search_charges_one_random_stopping_event_and_checks_every_flow() -> None:
    ledger = Ledger(epsilon_cap=20.0, delta_cap=1e-9, accountant="rdp", delta_slack=1e-9)
    flow, checked = _Flow(0.5, accept_at=3), []
    params = PrivateSelectionParams(gamma=1e-9, steps=math.inf, epsilon0=0.0)
    outcome = private_selection(flow, candidates=["a", "b"], params=params, source=SeededSource(np.random.default_rng(1)), ledger=ledger,
                                renyi=_renyi(checked), name="release_candidate")
    assert outcome.stop_reason == "accepted" and outcome.iterations == 3 and len(checked) == 3
    assert [e.mechanism for e in ledger.events] == [RANDOM_STOPPING]
    assert isinstance(ledger.events[0].typed, RandomStoppingEvent) and ledger.total().delta == 1e-9
    assert all(scratch.epsilon_cap == 0.5 for scratch in flow.ledgers)


def test_a_renyi_search_stops_with_bottom_by_the_gamma_coin() -> None:
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="rdp", delta_slack=1e-9)
    flow = _Flow(0.5, accept_at=10**9)
    params = PrivateSelectionParams(gamma=0.5, steps=math.inf, epsilon0=0.0)
    outcome = private_selection(flow, candidates=["a"], params=params, source=SeededSource(np.random.default_rng(3)), ledger=ledger,
                                renyi=_renyi([]))
    assert outcome.is_bottom and outcome.stop_reason == "gamma" and outcome.iterations == flow.calls < 60


def test_a_flow_that_overspends_stops_the_search() -> None:
    def refuse(candidate: str, ledger: Ledger) -> None:
        raise LedgerError("spent more than planned")

    base = RenyiBase(flow_events=(flow_event(rho=0.0, epsilon=0.5),),
                     scratch_ledger=lambda c: Ledger(epsilon_cap=None, delta_cap=None), check_spent=refuse)
    with pytest.raises(LedgerError, match="more than planned"):
        private_selection(_Flow(0.5, accept_at=1), candidates=["a"], source=SeededSource(np.random.default_rng(0)),
                          params=PrivateSelectionParams(gamma=0.1, steps=math.inf, epsilon0=0.0),
                          ledger=Ledger(epsilon_cap=None, delta_cap=None, accountant="rdp", delta_slack=1e-9),
                          renyi=base)


@pytest.mark.parametrize("case", ["infinite_horizon", "capped", "guard", "both", "neither"])
def test_a_renyi_search_refuses_what_it_cannot_account_for_before_charging(case: str) -> None:
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="rdp", delta_slack=1e-9)
    flow = _Flow(0.5, accept_at=1)
    kwargs: dict = {"renyi": _renyi([]), "params": PrivateSelectionParams(gamma=0.1, steps=math.inf, epsilon0=0.0)}
    if case == "infinite_horizon":
        kwargs["params"] = PrivateSelectionParams.infinite_horizon()
    elif case == "capped":
        kwargs["params"] = PrivateSelectionParams.capped(steps=1000, epsilon0=0.1)
    elif case == "guard":
        kwargs["max_iterations"] = 10
    elif case == "both":
        kwargs["epsilon1"] = 0.5
    else:
        del kwargs["renyi"]
    with pytest.raises((LedgerError, TypeError)):
        private_selection(flow, candidates=["a"], source=SeededSource(np.random.default_rng(0)), ledger=ledger, **kwargs)
    assert len(ledger) == 0 and flow.calls == 0
