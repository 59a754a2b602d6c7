"""Exact-accounting tests of privlab.platform.dp.composition and privlab.platform.dp.ledger.

Every formula is checked against numbers worked out here from the textbook statement, and
against a hard literal computed to 40 digits with :mod:`decimal` (see the comments).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest

from privlab.platform.core.errors import BudgetExceededError, LedgerError
from privlab.platform.dp import composition
from privlab.platform.dp.accountant_base import accountant_named, accountant_names
from privlab.platform.dp.basic_totals import Budget
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import check_conforms
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.privacy_event import PrivacyEvent


def _split(parts: int = 2, n: int = 10) -> PositionalSplit:
    """A split drawn from a seeded stream, valid under both relations (independent draws)."""
    return PositionalSplit.independent(n, parts, rng=np.random.default_rng(0))


def _laplace(epsilon: float, **kw: object) -> PrivacyEvent:
    return PrivacyEvent(name=kw.pop("name", "q"), mechanism="laplace", epsilon=epsilon, **kw)


# --- composition: sequential -------------------------------------------------------------------


def test_sequential_sums_exactly_with_fsum() -> None:
    # ten 0.1's: a naive left-to-right sum gives 0.9999999999999999, fsum the exact 1.0.
    assert composition.sequential([0.1] * 10, [1e-7] * 10) == (1.0, math.fsum([1e-7] * 10))
    assert composition.sequential([], []) == (0.0, 0.0)


def test_sequential_rejects_bad_terms() -> None:
    with pytest.raises(LedgerError, match="must have as many terms"):
        composition.sequential([0.1, 0.2], [0.0])
    with pytest.raises(LedgerError, match=re.escape("epsilons[1] (-0.5) must be")):
        composition.sequential([0.1, -0.5], [0.0, 0.0])


# --- composition: advanced (Dwork & Roth 3.20) -------------------------------------------------


def test_advanced_matches_textbook_formula_and_literal() -> None:
    # ε' = ε·sqrt(2k ln(1/δ'')) + kε(e^ε − 1) with ε = 0.1, k = 10, δ'' = 1e-5:
    #    = 0.1·sqrt(20·ln(1e5)) + 10·0.1·(e^0.1 − 1)
    #    = 0.1·sqrt(20·11.512925464970229) + 1.0·0.10517091807564762
    #    = 1.5174271293851465 + 0.10517091807564762
    #    = 1.622598047460793975674680220040125 (decimal, 40 digits)
    # δ' = kδ + δ'' = 10·1e-6 + 1e-5 = 2e-5.
    eps, delta = composition.advanced(epsilon=0.1, delta=1e-6, k=10, delta_slack=1e-5)
    by_hand = 0.1 * math.sqrt(20 * math.log(1e5)) + 10 * 0.1 * (math.exp(0.1) - 1)
    assert eps == pytest.approx(by_hand, rel=1e-12)
    assert eps == pytest.approx(1.622598047460793975674680220040125, rel=1e-12)
    assert delta == pytest.approx(2e-5, rel=1e-12)


def test_advanced_at_k1_is_looser_than_basic() -> None:
    # k = 1: ε' = ε·sqrt(2 ln(1/δ'')) + ε(e^ε − 1)
    #          = 0.1·sqrt(2·11.512925464970229) + 0.1·0.10517091807564762
    #          = 0.4903696830263728832379076695395048 (decimal) > 0.1 = basic.
    eps, delta = composition.advanced(epsilon=0.1, delta=0.0, k=1, delta_slack=1e-5)
    assert eps == pytest.approx(0.4903696830263728832379076695395048, rel=1e-12)
    assert eps == pytest.approx(
        0.1 * math.sqrt(2 * math.log(1 / 1e-5)) + 0.1 * (math.exp(0.1) - 1), rel=1e-12
    )
    basic_eps, basic_delta = composition.sequential([0.1], [0.0])
    assert basic_eps == 0.1 < eps
    assert basic_delta == 0.0 < delta == 1e-5


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"k": 0}, LedgerError, "k (0) must be >= 1"),
        ({"k": 2.0}, TypeError, "k (2.0) must be an integer"),
        ({"k": True}, TypeError, "k (True) must be an integer"),
        ({"delta_slack": 0.0}, LedgerError, "delta_slack (0.0) must be in (0, 1)"),
        ({"delta_slack": 1.0}, LedgerError, "delta_slack (1.0) must be in (0, 1)"),
        ({"epsilon": -0.1}, LedgerError, "epsilon (-0.1) must be finite and >= 0"),
        ({"delta": 1.0}, LedgerError, "delta (1.0) must be in [0, 1)"),
    ],
)
def test_advanced_validates(kwargs: dict, error: type, message: str) -> None:
    args = {"epsilon": 0.1, "delta": 0.0, "k": 3, "delta_slack": 1e-5} | kwargs
    with pytest.raises(error, match=re.escape(message)):
        composition.advanced(**args)


# --- composition: amplification by subsampling -------------------------------------------------


def test_amplification_rate_one_is_identity() -> None:
    assert composition.amplify_by_subsampling(epsilon=0.7, delta=1e-6, rate=1.0) == (0.7, 1e-6)


def test_amplification_value() -> None:
    # ε' = ln(1 + p(e^ε − 1)) with ε = 1, p = 0.01:
    #    = ln(1 + 0.01·1.718281828459045) = ln(1.01718281828459045)
    #    = 0.01703686323617654978638525276352 (decimal); δ' = pδ = 0.01·1e-6 = 1e-8.
    eps, delta = composition.amplify_by_subsampling(epsilon=1.0, delta=1e-6, rate=0.01)
    assert eps == pytest.approx(math.log(1 + 0.01 * (math.e - 1)), rel=1e-12)
    assert eps == pytest.approx(0.01703686323617654978638525276352, rel=1e-12)
    assert delta == pytest.approx(1e-8, rel=1e-12)


@pytest.mark.parametrize(
    ("rate", "delta", "message"),
    [
        (0.0, 0.0, "rate (0.0) must be in (0, 1]"),
        (1.5, 0.0, "rate (1.5) must be in (0, 1]"),
        (1e-3, 1e-3, "rate (0.001) must be greater than delta (0.001)"),
    ],
)
def test_amplification_validates(rate: float, delta: float, message: str) -> None:
    with pytest.raises(LedgerError, match=re.escape(message)):
        composition.amplify_by_subsampling(epsilon=1.0, delta=delta, rate=rate)


# --- composition: parallel ---------------------------------------------------------------------


def test_parallel_takes_max_of_each() -> None:
    assert composition.parallel([]) == (0.0, 0.0)
    assert composition.parallel([(1.0, 1e-6), (2.0, 0.0), (0.5, 1e-7)]) == (2.0, 1e-6)


# --- composition: private selection with a known threshold -------------------------------------


def test_private_selection_epsilon() -> None:
    assert composition.private_selection_known_threshold(epsilon1=0.3, epsilon0=0.1) == (
        2 * 0.3 + 0.1
    )
    with pytest.raises(LedgerError, match="pure-DP"):
        composition.private_selection_known_threshold(epsilon1=0.3, epsilon0=0.1, delta1=1e-6)
    with pytest.raises(LedgerError, match=re.escape("epsilon0 (1.5) must be in [0, 1]")):
        composition.private_selection_known_threshold(epsilon1=0.3, epsilon0=1.5)


def test_private_selection_step_bound() -> None:
    # γ = 0.1, ε₀ = 0.1: T ≥ max{ln(2/0.1)/0.1, 1 + 1/(0.1·e)}
    #                      = max{2.995732273553991/0.1, 1 + 3.678794411714423}
    #                      = max{29.9573227355399, 4.678794411714423} → smallest integer T = 30.
    bound = max(math.log(20) / 0.1, 1 + 1 / (0.1 * math.e))
    assert bound == pytest.approx(29.95732273553990993435, rel=1e-12)
    assert math.ceil(bound) == 30
    with pytest.raises(LedgerError, match=r"steps \(29\) must be >= 30"):
        composition.validate_private_selection(steps=29, gamma=0.1, epsilon0=0.1)
    composition.validate_private_selection(steps=30, gamma=0.1, epsilon0=0.1)
    composition.validate_private_selection(steps=math.inf, gamma=0.1, epsilon0=0.1)


def test_private_selection_infinite_horizon() -> None:
    composition.validate_private_selection(steps=math.inf, gamma=0.0, epsilon0=0.0)
    with pytest.raises(LedgerError, match=r"steps \(100\) must be math.inf"):
        composition.validate_private_selection(steps=100, gamma=0.0, epsilon0=0.0)
    with pytest.raises(LedgerError, match="epsilon0"):
        composition.validate_private_selection(steps=math.inf, gamma=0.0, epsilon0=0.1)
    # γ > 0 with ε₀ = 0: ln(2/ε₀) is infinite, so only T = ∞ satisfies the bound.
    with pytest.raises(LedgerError, match=r"steps \(1000\) must be >= math.inf"):
        composition.validate_private_selection(steps=1000, gamma=0.5, epsilon0=0.0)


@pytest.mark.parametrize("steps", [0, 2.5, -math.inf, math.nan])
def test_private_selection_steps_must_be_positive_integer(steps: float) -> None:
    with pytest.raises(LedgerError, match="must be a positive integer or math.inf"):
        composition.validate_private_selection(steps=steps, gamma=0.5, epsilon0=0.5)


# --- events ------------------------------------------------------------------------------------


def test_event_effective_budget_after_amplification() -> None:
    event = _laplace(1.0, delta=1e-6, sampling_rate=0.01)
    assert event.effective_epsilon == pytest.approx(math.log(1 + 0.01 * (math.e - 1)), rel=1e-12)
    assert event.effective_delta == pytest.approx(1e-8, rel=1e-12)
    plain = _laplace(1.0)
    assert (plain.effective_epsilon, plain.effective_delta) == (1.0, 0.0)


def test_event_normalizes_numbers_and_details() -> None:
    event = _laplace(np.float32(0.5), sensitivity=1, details=[["k", np.int64(3)], ("s", "x")])
    assert type(event.epsilon) is float and type(event.sensitivity) is float
    assert event.details == (("k", 3), ("s", "x"))
    assert type(event.details[0][1]) is int
    hash(event)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"epsilon": 0.0}, LedgerError, "epsilon (0.0) must be finite and > 0"),
        ({"epsilon": -1.0}, LedgerError, "epsilon (-1.0) must be finite and > 0"),
        ({"epsilon": math.nan}, LedgerError, "epsilon (nan) must be finite and > 0"),
        ({"epsilon": math.inf}, LedgerError, "epsilon (inf) must be finite and > 0"),
        ({"epsilon": "1"}, TypeError, "epsilon ('1') must be a real number"),
        ({"epsilon": True}, TypeError, "epsilon (True) must be a real number"),
        ({"delta": 1.0}, LedgerError, "delta (1.0) must be in [0, 1)"),
        ({"delta": -1e-9}, LedgerError, "delta (-1e-09) must be in [0, 1)"),
        ({"scope": ""}, LedgerError, "scope ('') must be a non-empty string"),
        ({"name": "  "}, LedgerError, "name ('  ') must be a non-empty string"),
        ({"mechanism": None}, TypeError, "mechanism (None) must be a str"),
        ({"step": 3}, TypeError, "step (3) must be a str"),
        ({"sensitivity": -1.0}, LedgerError, "sensitivity (-1.0) must be finite and >= 0"),
        ({"noise_scale": math.inf}, LedgerError, "noise_scale (inf) must be finite and >= 0"),
        ({"sampling_rate": 0.0}, LedgerError, "sampling_rate (0.0) must be in (0, 1]"),
        ({"sampling_rate": 1.5}, LedgerError, "sampling_rate (1.5) must be in (0, 1]"),
        (
            {"delta": 0.1, "sampling_rate": 0.05},
            LedgerError,
            "sampling_rate (0.05) must be greater than delta (0.1)",
        ),
        ({"details": {"a": 1}}, TypeError, "details ({'a': 1}) must be a tuple"),
        ({"details": (("a", None),)}, TypeError, "details['a'] (None) must be a number or a str"),
        ({"details": (("a", 1), ("a", 2))}, LedgerError, "details key ('a') must be unique"),
        ({"details": (("a", math.inf),)}, LedgerError, "details['a'] (inf) must be finite"),
    ],
)
def test_bad_events_raise_in_the_message_format(kwargs: dict, error: type, message: str) -> None:
    args = {"name": "q", "mechanism": "laplace", "epsilon": 1.0} | kwargs
    with pytest.raises(error, match="^" + re.escape(message)):
        PrivacyEvent(**args)


def test_event_dict_round_trip_and_unknown_keys() -> None:
    event = _laplace(0.1 + 0.2, delta=1 / 3 * 1e-6, sampling_rate=0.25, details=(("a", 1.5),))
    assert PrivacyEvent.from_dict(event.to_dict()) == event
    with pytest.raises(LedgerError, match="event keys"):
        PrivacyEvent.from_dict(event.to_dict() | {"epsilonn": 1.0})
    with pytest.raises(LedgerError, match="must have keys"):
        PrivacyEvent.from_dict({"name": "q", "mechanism": "laplace"})


# --- ledger: totals ----------------------------------------------------------------------------


def test_basic_total_is_exact() -> None:
    eps1, eps0 = 0.37, 0.11
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None)
    ledger.charge(name="a", mechanism="laplace", epsilon=eps1)
    ledger.charge(name="b", mechanism="laplace", epsilon=eps1)
    ledger.charge(name="c", mechanism="laplace", epsilon=eps0)
    assert ledger.total() == Budget(2 * eps1 + eps0, 0.0)
    assert len(ledger) == 3


def test_private_selection_is_charged_once() -> None:
    eps1, eps0 = 0.4, 0.1
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    event = ledger.record_private_selection(
        name="candidate", epsilon1=eps1, epsilon0=eps0, gamma=0.1, steps=30, step="select"
    )
    assert len(ledger) == 1
    assert ledger.total().epsilon == 2 * eps1 + eps0
    assert event.mechanism == "private_selection_known_threshold"
    assert dict(event.details) == {"epsilon1": 0.4, "epsilon0": 0.1, "gamma": 0.1, "steps": 30}
    with pytest.raises(LedgerError, match=r"steps \(29\) must be >= 30"):
        ledger.record_private_selection(name="c", epsilon1=eps1, epsilon0=0.1, gamma=0.1, steps=29)
    with pytest.raises(LedgerError, match="pure-DP"):
        ledger.record_private_selection(name="c", epsilon1=eps1, epsilon0=0.0, delta1=1e-6)
    assert len(ledger) == 1


def test_private_selection_live_births_example() -> None:
    # Hod & Canetti: ε₁ = ε_x + ε_q = 4 + 0.99, infinite horizon (γ = 0, T = ∞, ε₀ = 0):
    # total = 2·4.99 = 9.98.
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=10.0)
    event = ledger.record_private_selection(name="release", epsilon1=4 + 0.99, epsilon0=0.0)
    assert ledger.total().epsilon == 2 * (4 + 0.99) == pytest.approx(9.98, rel=1e-12)
    assert dict(event.details)["steps"] == "inf"


def test_parallel_partition_plus_parent() -> None:
    # parts a, b disjoint: max(1, 2) = 2; plus the parent's own 0.5 sequentially: 2.5.
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=3.0)
    ledger.declare_partition("data", ["a", "b"], split=_split())
    ledger.charge(name="x", mechanism="laplace", epsilon=1.0, scope="a")
    ledger.charge(name="y", mechanism="laplace", epsilon=2.0, scope="b")
    assert ledger.total() == Budget(2.0, 0.0)
    ledger.charge(name="z", mechanism="laplace", epsilon=0.5, scope="data")
    assert ledger.total() == Budget(2.5, 0.0)


def test_nested_partitions() -> None:
    # data → {a, b}; a → {a1, a2}.
    # a    = own 0.25 + max(a1 = 1.0, a2 = 0.25) = 1.25
    # data = own 0.5 + max(a = 1.25, b = 1.125) = 1.75; raising b to 1.5 makes it 0.5 + 1.5.
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None)
    ledger.declare_partition("data", ["a", "b"], split=_split())
    ledger.declare_partition("a", ["a1", "a2"], split=_split())
    for scope, eps in [("a1", 1.0), ("a2", 0.25), ("a", 0.25), ("b", 1.125), ("data", 0.5)]:
        ledger.charge(name=scope, mechanism="laplace", epsilon=eps, scope=scope)
    assert ledger.total().epsilon == 1.75
    ledger.charge(name="b2", mechanism="laplace", epsilon=0.375, scope="b")
    assert ledger.total().epsilon == 2.0


def test_two_partitions_of_one_scope_add_up() -> None:
    # by age {young, old}: max(1, 0.5) = 1; by region {north, south}: max(0.25, 0.75) = 0.75.
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None)
    ledger.declare_partition("data", ["young", "old"], split=_split())
    ledger.declare_partition("data", ["north", "south"], split=_split())
    for scope, eps in [("young", 1.0), ("old", 0.5), ("north", 0.25), ("south", 0.75)]:
        ledger.charge(name=scope, mechanism="laplace", epsilon=eps, scope=scope)
    assert ledger.total().epsilon == 1.75


def test_top_level_scopes_compose_sequentially() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=None)
    ledger.charge(name="x", mechanism="laplace", epsilon=1.0, scope="persons")
    ledger.charge(name="y", mechanism="gaussian", epsilon=0.5, delta=1e-6, scope="households")
    assert ledger.total() == Budget(1.5, 1e-6)


@pytest.mark.parametrize(
    ("parts", "error", "message"),
    [
        (["a"], LedgerError, "must name at least 2 scopes"),
        (["a", "a"], LedgerError, "must be distinct"),
        (["data", "a"], LedgerError, "must not contain the parent"),
        (["used", "a"], LedgerError, "parts (['used']) must be new scope names"),
        ("ab", TypeError, "must be a sequence of scope names"),
        (["a", 2], TypeError, "part (2) must be a str"),
    ],
)
def test_declare_partition_validates(parts: object, error: type, message: str) -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None)
    ledger.charge(name="x", mechanism="laplace", epsilon=1.0, scope="used")
    with pytest.raises(error, match=re.escape(message)):
        ledger.declare_partition("data", parts, split=_split())  # type: ignore[arg-type]
    assert ledger.partitions == ()


def test_advanced_accountant_total() -> None:
    # A thousand ε = 0.01 events in one scope: the Dwork–Roth value, δ = 1000·0 + 1e-5, beats Σε = 10.
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=1e-4, accountant="advanced", delta_slack=1e-5)
    for i in range(1000):
        ledger.charge(name=f"q{i}", mechanism="laplace", epsilon=0.01)
    total = ledger.total()
    expected = 0.01 * math.sqrt(2 * 1000 * math.log(1e5)) + 1000 * 0.01 * math.expm1(0.01)
    assert total.epsilon == pytest.approx(expected, rel=1e-12) and expected < 1.7
    assert total.delta == 1e-5
    assert ledger.total("basic") == Budget(math.fsum([0.01] * 1000), 0.0)
    totals = ledger.totals_by_accountant()
    assert list(totals) == list(accountant_names())  # every registered accountant accounts for Laplace steps
    assert totals["basic"] == ledger.total("basic") and totals["advanced"] == total
    # The curve accountants are tighter than Theorem 3.20 here (1000 equal pure-DP steps).
    assert totals["pld"].epsilon < totals["rdp"].epsilon < total.epsilon
    assert all(t.delta == 1e-5 for name, t in totals.items() if name != "basic")


def test_advanced_accountant_keeps_the_basic_total_where_it_dominates() -> None:
    # Ten ε = 0.1 events: Theorem 3.20 gives 1.6226 > Σε = 1.0, so the scope's basic total
    # (ε = 1.0, δ = 0, no δ'') is valid and better in both; one composed event stays itself.
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=1e-4, accountant="advanced", delta_slack=1e-5)
    for i in range(10):
        ledger.charge(name=f"q{i}", mechanism="laplace", epsilon=0.1)
    assert composition.advanced(epsilon=0.1, delta=0.0, k=10, delta_slack=1e-5)[0] == pytest.approx(1.6225980474607940)
    assert ledger.total() == Budget(math.fsum([0.1] * 10), 0.0)
    ledger.charge(name="block", mechanism="composed", epsilon=40.0, delta=1e-7, scope="other")
    assert ledger.total() == Budget(1.0 + 40.0, 1e-7)


def test_advanced_composition_of_a_huge_epsilon_is_infinite_not_an_overflow() -> None:
    assert composition.advanced(epsilon=800.0, delta=0.0, k=2, delta_slack=1e-5)[0] == math.inf
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=None, accountant="advanced", delta_slack=1e-5)
    ledger.charge(name="composed", mechanism="composed", epsilon=8000.0)
    assert ledger.total() == Budget(8000.0, 0.0)


def test_advanced_accountant_uses_max_for_heterogeneous_events() -> None:
    # ε = max(0.01, 0.005) = 0.01, k = 1000: 0.01·sqrt(2000 ln 1e5) + 1000·0.01·(e^0.01 − 1).
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=1e-4, accountant="advanced", delta_slack=1e-5)
    for i in range(500):
        ledger.charge(name=f"a{i}", mechanism="laplace", epsilon=0.01)
        ledger.charge(name=f"b{i}", mechanism="laplace", epsilon=0.005)
    expected = 0.01 * math.sqrt(2000 * math.log(1e5)) + 1000 * 0.01 * (math.exp(0.01) - 1)
    assert ledger.total().epsilon == pytest.approx(expected, rel=1e-12)


def test_accountant_validation() -> None:
    with pytest.raises(LedgerError, match=re.escape("accountant ('moments') must be one of")) as info:
        Ledger(neighbouring="add_remove", epsilon_cap=1.0, accountant="moments")
    assert all(f"'{name}'" in str(info.value) for name in (*accountant_names(), "best"))
    for name in [n for n in accountant_names() if accountant_named(n).needs_delta_slack] + ["best"]:
        with pytest.raises(LedgerError, match=re.escape(f"delta_slack (None) must be set for the {name} accountant")):
            Ledger(epsilon_cap=1.0, delta_cap=1e-5, accountant=name)
    with pytest.raises(LedgerError, match="delta_slack"):
        Ledger(neighbouring="add_remove", epsilon_cap=1.0, accountant="advanced")
    with pytest.raises(LedgerError, match=re.escape("delta_slack (1e-05) must be <= delta_cap")):
        Ledger(neighbouring="add_remove", epsilon_cap=1.0, accountant="advanced", delta_slack=1e-5)
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    with pytest.raises(LedgerError, match="must be set on the ledger"):
        ledger.total("advanced")
    with pytest.raises(LedgerError, match="must be set on the ledger for the zcdp accountant"):
        ledger.total("zcdp")
    with pytest.raises(LedgerError, match="must be one of"):
        ledger.total("moments")
    assert list(ledger.totals_by_accountant()) == ["basic"]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"epsilon_cap": 0.0}, LedgerError, "epsilon_cap (0.0) must be finite and > 0"),
        ({"epsilon_cap": math.inf}, LedgerError, "epsilon_cap (inf) must be finite and > 0"),
        ({"epsilon_cap": "1"}, TypeError, "epsilon_cap ('1') must be a real number"),
        ({"delta_cap": 1.0}, LedgerError, "delta_cap (1.0) must be in [0, 1)"),
    ],
)
def test_cap_validation(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        Ledger(**({"epsilon_cap": 1.0} | kwargs))


# --- ledger: caps ------------------------------------------------------------------------------


def test_epsilon_cap_raises_before_recording() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    ledger.charge(name="marginals", mechanism="laplace", epsilon=0.6, step="fit_marginals")
    with pytest.raises(BudgetExceededError) as info:
        ledger.charge(name="noisy_count", mechanism="laplace", epsilon=0.5, step="sample_noise")
    message = str(info.value)
    assert "'sample_noise'" in message and "laplace" in message
    assert "1.1" in message and "cap of 1" in message
    assert "lower the step's ε or raise [budget] epsilon in the spec" in message
    assert len(ledger) == 1
    assert ledger.total().epsilon == 0.6


def test_cap_tolerates_float_summation() -> None:
    # 0.1 + 0.2 = 0.30000000000000004 > 0.3 by 5.6e-17 (relative 1.9e-16 < 1e-12).
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=0.3)
    ledger.charge(name="a", mechanism="laplace", epsilon=0.1)
    ledger.charge(name="b", mechanism="laplace", epsilon=0.2)
    assert len(ledger) == 2
    with pytest.raises(BudgetExceededError):
        Ledger(neighbouring="add_remove", epsilon_cap=0.3).charge(name="c", mechanism="laplace", epsilon=0.3 + 1e-9)


def test_delta_cap() -> None:
    pure = Ledger(neighbouring="add_remove", epsilon_cap=1.0)  # delta_cap defaults to 0: pure DP
    with pytest.raises(BudgetExceededError, match=r"δ to 1e-06, over the cap of 0") as info:
        pure.charge(name="g", mechanism="gaussian", epsilon=0.5, delta=1e-6, step="gauss")
    assert "raise [budget] delta" in str(info.value)
    assert len(pure) == 0
    approx_dp = Ledger(neighbouring="add_remove", epsilon_cap=1.0, delta_cap=1.5e-6)
    approx_dp.charge(name="g1", mechanism="gaussian", epsilon=0.1, delta=1e-6)
    with pytest.raises(BudgetExceededError, match="δ to 2e-06"):
        approx_dp.charge(name="g2", mechanism="gaussian", epsilon=0.1, delta=1e-6)
    assert len(approx_dp) == 1


def test_uncapped_ledger_records_anything() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=None)
    ledger.charge(name="big", mechanism="laplace", epsilon=1e3, delta=0.5)
    assert ledger.total() == Budget(1e3, 0.5)


def test_spend_rejects_non_events() -> None:
    with pytest.raises(TypeError, match="must be a PrivacyEvent"):
        Ledger(neighbouring="add_remove", epsilon_cap=1.0).spend({"epsilon": 0.1})  # type: ignore[arg-type]


def test_check_plan_does_not_mutate() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    ledger.declare_partition("data", ["a", "b"], split=_split())
    ledger.charge(name="spent", mechanism="laplace", epsilon=0.9)
    before = ledger.to_json()
    plan = [_laplace(0.5, scope="a"), _laplace(0.75, scope="b"), _laplace(0.25)]
    # A fresh copy: max(0.5, 0.75) + 0.25 = 1.0; the 0.9 already spent is not counted.
    assert ledger.check_plan(plan) == Budget(1.0, 0.0)
    with pytest.raises(BudgetExceededError):
        ledger.check_plan([*plan, _laplace(0.5)])
    assert ledger.to_json() == before
    assert len(ledger) == 1


def test_fresh_keeps_configuration_only() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=2.0, delta_cap=1e-5, accountant="advanced", delta_slack=1e-6)
    ledger.declare_partition("data", ["a", "b"], split=_split())
    ledger.charge(name="x", mechanism="laplace", epsilon=0.1, scope="a")
    fresh = ledger.fresh()
    assert len(fresh) == 0
    assert fresh.partitions == ledger.partitions
    assert (fresh.epsilon_cap, fresh.delta_cap, fresh.accountant, fresh.delta_slack) == (
        2.0, 1e-5, "advanced", 1e-6,
    )
    fresh.declare_partition("a", ["a1", "a2"], split=_split())
    assert len(ledger.partitions) == 1


# --- ledger: serialization, equality, display -------------------------------------------------


def _full_ledger() -> Ledger:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=5.0, delta_cap=1e-4, accountant="advanced", delta_slack=1e-6)
    ledger.declare_partition("data", ["a", "b"], split=_split())
    ledger.declare_partition("a", ["a1", "a2"], split=_split())
    ledger.charge(
        name="mean", mechanism="laplace", epsilon=0.1 + 0.2, sensitivity=1 / 3,
        noise_scale=1 / 0.3, scope="a1", step="fit",
    )
    ledger.charge(
        name="grad", mechanism="gaussian", epsilon=1 / 7, delta=1e-7, scope="b",
        sampling_rate=0.013, step="train",
    )
    ledger.record_private_selection(name="select", epsilon1=0.2, epsilon0=0.05, gamma=0.25,
                                     steps=64, step="select")
    return ledger


def test_json_round_trip_is_exact() -> None:
    ledger = _full_ledger()
    text = ledger.to_json()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    again = Ledger.from_json(text)
    assert again == ledger
    assert again.events == ledger.events
    assert again.partitions == ledger.partitions
    assert again.total() == ledger.total()
    assert again.to_json() == text
    assert Ledger.from_json(Ledger(neighbouring="add_remove", epsilon_cap=None).to_json()) == Ledger(neighbouring="add_remove", epsilon_cap=None)


def test_from_json_rejects_unknown_keys_and_overspent_files() -> None:
    data = _full_ledger().to_dict()
    with pytest.raises(LedgerError, match="ledger keys"):
        Ledger.from_dict(data | {"owner": "me"})
    with pytest.raises(BudgetExceededError):
        Ledger.from_dict(data | {"epsilon_cap": 0.5})


def test_equality() -> None:
    assert _full_ledger() == _full_ledger()
    other = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    assert other != Ledger(neighbouring="add_remove", epsilon_cap=2.0)
    assert other != Ledger(neighbouring="add_remove", epsilon_cap=1.0, delta_cap=1e-6)
    partitioned = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    partitioned.declare_partition("data", ["a", "b"], split=_split())
    assert other != partitioned
    spent = Ledger(neighbouring="add_remove", epsilon_cap=1.0)
    spent.charge(name="x", mechanism="laplace", epsilon=0.1)
    assert other != spent
    assert other != "ledger"


def test_render_table_contains_events_and_totals() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=3.0, delta_slack=1e-5)
    ledger.declare_partition("data", ["a", "b"], split=_split())
    ledger.charge(name="x", mechanism="laplace", epsilon=1.0, scope="a", step="s1",
                  sensitivity=1.0, noise_scale=1.0)
    ledger.charge(name="y", mechanism="laplace", epsilon=2.0, scope="b", step="s2")
    ledger.charge(name="z", mechanism="laplace", epsilon=0.5, step="s3", sampling_rate=0.5)
    table = ledger.render_table()
    # z effective ε = ln(1 + 0.5(e^0.5 − 1)) = ln(1.324360635350064) = 0.2809298…, shown as
    # 0.28093 (6 significant digits); total = max(1, 2) + 0.2809298 = 2.28093.
    assert "0.28093 (p=0.5)" in table
    assert "total (basic, enforced): ε = 2.28093, δ = 0" in table
    assert "total (advanced, δ''=1e-05)" in table
    assert "cap: ε = 3, δ = 0" in table
    assert "partition data (independent split): a | b" in table
    lines = table.splitlines()
    assert lines[0].split()[:5] == ["#", "step", "name", "mechanism", "scope"]
    assert "(no events)" in Ledger(neighbouring="add_remove", epsilon_cap=None).render_table()


# --- property check ----------------------------------------------------------------------------


def test_basic_total_equals_fsum_of_effective_epsilon() -> None:
    rng = np.random.default_rng(20240611)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        events = []
        for i in range(n):
            subsampled = rng.random() < 0.3
            events.append(
                PrivacyEvent(
                    name=f"q{i}",
                    mechanism="laplace",
                    epsilon=float(rng.uniform(1e-3, 2.0)),
                    delta=float(rng.choice([0.0, 1e-8])),
                    scope=str(rng.choice(["persons", "households", "trips"])),
                    sampling_rate=float(rng.uniform(0.01, 1.0)) if subsampled else None,
                )
            )
        ledger = Ledger(neighbouring="add_remove", epsilon_cap=None, delta_cap=None)
        for event in events:
            ledger.spend(event)
        # Independent amplification: ln(1 + p(e^ε − 1)) per event, identity when p is unset.
        for e in events:
            if e.sampling_rate is not None:
                expected = math.log(1 + e.sampling_rate * (math.exp(e.epsilon) - 1))
                assert e.effective_epsilon == pytest.approx(expected, rel=1e-12)
        total = ledger.total()
        assert total.epsilon == math.fsum(e.effective_epsilon for e in events)
        assert total.delta == math.fsum(e.effective_delta for e in events)


def test_render_table_fills_effective_epsilon_for_every_event() -> None:
    ledger = Ledger(neighbouring="add_remove", epsilon_cap=None)
    ledger.charge(name="x", mechanism="laplace", epsilon=0.75, step="s1")
    ledger.charge(name="z", mechanism="laplace", epsilon=0.5, step="s2", sampling_rate=0.5)
    header, _, plain, subsampled = ledger.render_table().splitlines()[:4]
    assert header.rstrip().endswith("effective ε")
    assert plain.rstrip().endswith("0.75")  # not subsampled: the step's own ε is what it costs
    assert subsampled.rstrip().endswith("0.28093 (p=0.5)")


# --- the neighbouring relation is the ledger's (issue 9 item 3) ----------------------------------


def test_replace_one_is_the_default_and_refuses_rules_that_do_not_hold_for_it() -> None:
    ledger = Ledger(epsilon_cap=2.0)
    assert ledger.neighbouring == "replace_one" and ledger.fresh().neighbouring == "replace_one"
    with pytest.raises(LedgerError, match="parallel composition needs the split that cut the parts"):
        ledger.declare_partition("data", ["a", "b"])
    with pytest.raises(LedgerError, match="amplification by subsampling does not hold"):
        ledger.spend(PrivacyEvent(name="z", mechanism="laplace", epsilon=1.0, sampling_rate=0.1))
    assert len(ledger) == 0 and ledger.partitions == ()
    with pytest.raises(LedgerError, match="neighbouring .* must be one of"):
        Ledger(epsilon_cap=1.0, neighbouring="swap")
    # Sequential composition holds for both relations and is computed the same way.
    for relation in ("replace_one", "add_remove"):
        sequential = Ledger(epsilon_cap=2.0, neighbouring=relation)
        sequential.charge(name="a", mechanism="laplace", epsilon=0.5)
        sequential.charge(name="b", mechanism="laplace", epsilon=0.75)
        assert sequential.total().epsilon == 1.25
        assert Ledger.from_json(sequential.to_json()).neighbouring == relation


def test_a_ledger_written_before_the_relation_was_recorded_reads_as_add_remove() -> None:
    old = Ledger(neighbouring="add_remove", epsilon_cap=1.0).to_dict()
    del old["neighbouring"]
    assert Ledger.from_dict(old).neighbouring == "add_remove"


def test_preflight_refuses_a_plan_that_does_not_fit_on_top_of_what_is_spent() -> None:
    ledger = Ledger(epsilon_cap=1.0)
    ledger.charge(name="first", mechanism="laplace", epsilon=0.6)
    plan = [PrivacyEvent(name="x", mechanism="laplace", epsilon=0.3),
            PrivacyEvent(name="y", mechanism="laplace", epsilon=0.3)]
    with pytest.raises(BudgetExceededError):
        ledger.preflight(plan)  # 0.6 + 0.3 + 0.3 > 1, though the plan alone fits
    assert ledger.check_plan(plan).epsilon == pytest.approx(0.6)
    assert [e.name for e in ledger.events] == ["first"]  # nothing charged
    ledger.preflight(plan[:1])


def test_conformance_is_one_rule_for_plans_and_spends() -> None:
    planned = PrivacyEvent(name="m", mechanism="laplace", epsilon=1.0, sensitivity=2.0, noise_scale=2.0)
    check_conforms([planned], [planned], who="x", exact_sensitivity=True)
    release = dataclasses.replace(planned, mechanism="laplace_lattice", noise_scale=2.0000001)
    check_conforms([release], [planned], who="x", exact_sensitivity=True)  # the exact counterpart, more noise
    with pytest.raises(LedgerError, match="x charged 1 DP step"):
        check_conforms([dataclasses.replace(release, noise_scale=1.9)], [planned], who="x", exact_sensitivity=True)
    smaller = dataclasses.replace(planned, sensitivity=1.0, noise_scale=1.0)  # a public run-time improvement
    check_conforms([smaller], [planned], who="x", exact_sensitivity=False)
    with pytest.raises(LedgerError):
        check_conforms([smaller], [planned], who="x", exact_sensitivity=True)
    with pytest.raises(LedgerError):
        check_conforms([dataclasses.replace(planned, epsilon=0.5)], [planned], who="x", exact_sensitivity=False)
    with pytest.raises(LedgerError):
        check_conforms([], [planned], who="x", exact_sensitivity=False)
