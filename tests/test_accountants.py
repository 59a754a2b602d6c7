"""Typed DP events and the accountants, held to dp_accounting and OpenDP as oracles (issue 29).

The oracles are the field's reference implementations: Google's dp_accounting (privacy-loss
distributions and Rényi DP) and OpenDP (zCDP composition and its conversion to (ε, δ), pure-DP
composition). Each fixed composition is computed by both and must agree to the stated relative
tolerance (PLD: 1e-6, the two compose the same discretized distributions in another order;
RDP, zCDP and basic: 1e-9).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from privlab.platform.core.errors import BudgetExceededError, LedgerError
from privlab.platform.dp import accountants
from privlab.platform.dp.accountants import ScopeNode, compose, largest_step_epsilon
from privlab.platform.dp.dp_events import (
    Composed,
    DiscreteGaussianEvent,
    DpEvent,
    EpsilonDeltaEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    ParallelByPosition,
    PrivateSelectionEvent,
    SelfComposed,
    Subsampled,
    basic_guarantee,
    event_from_dict,
)
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.zcdp_conversion import zcdp_to_epsilon

DELTA = 2.0**-30


def ours(event: DpEvent, accountant: str, delta: float = DELTA, neighbouring: str = "replace_one") -> float:
    return compose([ScopeNode("data", (event,))], accountant=accountant, delta_slack=delta,
                   neighbouring=neighbouring).epsilon


def kept(oracle: float, event: DpEvent) -> float:
    """What our accountants report for an oracle's ε: the oracle's, or the basic ε where that is
    no larger (every accountant keeps the basic guarantee then; module docstring of accountants)."""
    basic = basic_guarantee(event)
    return oracle if basic is None else min(oracle, basic[0])


def _to_dp_accounting(event: DpEvent):  # type: ignore[no-untyped-def]
    import dp_accounting

    if isinstance(event, LaplaceEvent):
        return dp_accounting.LaplaceDpEvent(event.scale / event.sensitivity)
    if isinstance(event, GaussianEvent):
        return dp_accounting.GaussianDpEvent(event.sigma / event.sensitivity)
    if isinstance(event, SelfComposed):
        return dp_accounting.SelfComposedDpEvent(_to_dp_accounting(event.event), event.count)
    if isinstance(event, Composed):
        return dp_accounting.ComposedDpEvent([_to_dp_accounting(e) for e in event.events])
    raise AssertionError(f"no oracle event for {event!r}")


def dp_accounting_pld(event: DpEvent, delta: float = DELTA) -> float:
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(_to_dp_accounting(event))
    return accountant.get_epsilon(delta)


def dp_accounting_rdp(event: DpEvent, delta: float = DELTA) -> float:
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(_to_dp_accounting(event))
    return accountant.get_epsilon(delta)


LAPLACE_AND_GAUSSIAN = {
    "laplace x1": SelfComposed(LaplaceEvent(1.0, 2.0), 1),
    "laplace x10": SelfComposed(LaplaceEvent(1.0, 10.0), 10),
    "laplace x135 (the PD model)": SelfComposed(LaplaceEvent(2.0, 270.0), 135),
    "laplace x1000 small eps": SelfComposed(LaplaceEvent(1.0, 100.0), 1000),
    "laplace two scales": Composed((SelfComposed(LaplaceEvent(1.0, 5.0), 20), SelfComposed(LaplaceEvent(0.5, 1.0), 3))),
    "gaussian x1": SelfComposed(GaussianEvent(1.0, 2.0), 1),
    "gaussian x50": SelfComposed(GaussianEvent(1.0, 20.0), 50),
    "gaussian sensitivity 3": SelfComposed(GaussianEvent(3.0, 15.0), 8),
    "laplace + gaussian": Composed((SelfComposed(LaplaceEvent(1.0, 20.0), 30), SelfComposed(GaussianEvent(1.0, 8.0), 12))),
    "three families": Composed((LaplaceEvent(1.0, 4.0), GaussianEvent(2.0, 9.0), SelfComposed(LaplaceEvent(1.0, 50.0), 60))),
}


@pytest.mark.parametrize("name", list(LAPLACE_AND_GAUSSIAN))
def test_pld_agrees_with_dp_accounting(name: str) -> None:
    event = LAPLACE_AND_GAUSSIAN[name]
    assert ours(event, "pld") == pytest.approx(kept(dp_accounting_pld(event), event), rel=1e-6)


@pytest.mark.parametrize("name", list(LAPLACE_AND_GAUSSIAN))
def test_rdp_agrees_with_dp_accounting(name: str) -> None:
    event = LAPLACE_AND_GAUSSIAN[name]
    assert ours(event, "rdp") == pytest.approx(kept(dp_accounting_rdp(event), event), rel=1e-9)


def _opendp():  # type: ignore[no-untyped-def]
    dp = pytest.importorskip("opendp.prelude", reason="OpenDP (the [dev] extra) is the zCDP oracle")
    dp.enable_features("contrib")
    return dp


ZCDP_CASES = {
    "gaussian x10": [("gaussian", 1.0, 3.0)] * 10,
    "gaussian x200": [("gaussian", 1.0, 40.0)] * 200,
    "laplace x25 as zCDP": [("laplace", 1.0, 30.0)] * 25,
    "gaussian + laplace": [("gaussian", 1.0, 5.0)] * 4 + [("laplace", 1.0, 10.0)] * 6,
}


def _opendp_measurement(dp, kind: str, scale: float):  # type: ignore[no-untyped-def]
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    if kind == "gaussian":
        return dp.m.make_gaussian(*space, scale=scale)
    return dp.c.make_pureDP_to_zCDP(dp.m.make_laplace(*space, scale=scale))


@pytest.mark.parametrize("name", list(ZCDP_CASES))
@pytest.mark.parametrize("delta", [1e-6, DELTA])
def test_zcdp_agrees_with_opendp(name: str, delta: float) -> None:
    dp = _opendp()
    steps = ZCDP_CASES[name]
    composed = dp.c.make_composition([_opendp_measurement(dp, kind, scale) for kind, _, scale in steps])
    expected = dp.c.make_zCDP_to_approxDP(composed).map(1.0).epsilon(delta)
    tree = Composed(tuple(GaussianEvent(s, scale) if kind == "gaussian" else LaplaceEvent(s, scale)
                          for kind, s, scale in steps))
    assert ours(tree, "zcdp", delta) == pytest.approx(kept(expected, tree), rel=1e-9)


@pytest.mark.parametrize("scales", [[1.0, 2.0, 5.0], [10.0] * 30, [0.5, 0.25]])
def test_basic_agrees_with_opendp_pure_composition(scales: list[float]) -> None:
    dp = _opendp()
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    expected = dp.c.make_composition([dp.m.make_laplace(*space, scale=s) for s in scales]).map(1.0)
    tree = Composed(tuple(LaplaceEvent(1.0, s) for s in scales))
    assert compose([ScopeNode("data", (tree,))], accountant="basic", delta_slack=None,
                   neighbouring="replace_one").epsilon == pytest.approx(expected, rel=1e-12)


PARALLEL_CASES = {
    "two halves": (None, [SelfComposed(LaplaceEvent(1.0, 50.0), 124), SelfComposed(LaplaceEvent(2.0, 22.0), 11)]),
    "prefix then halves": (SelfComposed(LaplaceEvent(1.0, 10.0), 5),
                           [SelfComposed(LaplaceEvent(1.0, 20.0), 40), SelfComposed(GaussianEvent(1.0, 6.0), 3)]),
    "identical trees": (None, [SelfComposed(LaplaceEvent(1.0, 8.0), 6)] * 7),
    "worst part last": (None, [SelfComposed(LaplaceEvent(1.0, 100.0), 5), SelfComposed(LaplaceEvent(1.0, 5.0), 30),
                               SelfComposed(GaussianEvent(1.0, 30.0), 2)]),
}


@pytest.mark.parametrize("name", list(PARALLEL_CASES))
def test_parallel_by_position_is_the_worst_part_under_every_curve_accountant(name: str) -> None:
    prefix, parts = PARALLEL_CASES[name]
    tree: DpEvent = ParallelByPosition(tuple(parts))
    if prefix is not None:
        tree = Composed((prefix, tree))
    alternatives = [part if prefix is None else Composed((prefix, part)) for part in parts]
    assert ours(tree, "pld") == pytest.approx(max(kept(dp_accounting_pld(a), a) for a in alternatives), rel=1e-6)
    assert ours(tree, "rdp") == pytest.approx(max(kept(dp_accounting_rdp(a), a) for a in alternatives), rel=1e-9)


# --- what every accountant keeps and refuses -----------------------------------------------------------


def test_curve_accountants_never_report_more_than_basic() -> None:
    few_large = SelfComposed(LaplaceEvent(1.0, 0.5), 3)  # 3 steps at ε = 2: the curves lose to Σε = 6
    for name in ("rdp", "zcdp"):
        assert ours(few_large, name) == 6.0
    assert 6.0 - 1e-6 < ours(few_large, "pld") <= 6.0  # PLD is exact here, to its discretization
    many_small = SelfComposed(LaplaceEvent(1.0, 100.0), 1000)  # Σε = 10: every curve is far below
    assert ours(many_small, "pld") < ours(many_small, "rdp") < ours(many_small, "advanced") < 10.0


def test_advanced_counts_each_run_of_a_self_composed_step() -> None:
    event = SelfComposed(EpsilonDeltaEvent(0.001, 1e-12, "a theorem"), 10**5)
    expected = 0.001 * math.sqrt(2 * 10**5 * math.log(1 / DELTA)) + 10**5 * 0.001 * math.expm1(0.001)
    assert expected < 100.0
    result = compose([ScopeNode("data", (event,))], accountant="advanced", delta_slack=DELTA, neighbouring="replace_one")
    assert result.epsilon == pytest.approx(expected, rel=1e-12)
    assert result.delta == pytest.approx(10**5 * 1e-12 + DELTA, rel=1e-12)


def test_pure_steps_and_proven_guarantees_under_the_curves() -> None:
    # A pure ε-DP step is composed through the randomized-response pair that dominates it; its
    # k-fold composition is what Kairouz, Oh & Viswanath's optimal composition gives, below Thm 3.20.
    pure = SelfComposed(ExponentialEvent(0.05), 200)
    assert ours(pure, "pld") < ours(pure, "advanced") < 10.0
    # A proven (ε, δ) with δ > 0: RDP and zCDP add it outside their curve, PLD composes it inside.
    proven = Composed((SelfComposed(LaplaceEvent(1.0, 20.0), 50), EpsilonDeltaEvent(0.3, 1e-12, "Thm X")))
    alone = ours(SelfComposed(LaplaceEvent(1.0, 20.0), 50), "rdp")
    assert ours(proven, "rdp") == pytest.approx(alone + 0.3, rel=1e-12)
    assert ours(proven, "pld") < ours(proven, "rdp")


def test_an_accountant_refuses_what_it_cannot_account_for_naming_both() -> None:
    gaussian = ScopeNode("data", (GaussianEvent(1.0, 4.0),))
    for name in ("basic", "advanced"):
        with pytest.raises(LedgerError, match=rf"scope 'data': the {name} accountant refuses gaussian\(.*no pure-ε"):
            compose([gaussian], accountant=name, delta_slack=DELTA, neighbouring="replace_one")
    subsampled = ScopeNode("data", (Subsampled(LaplaceEvent(1.0, 1.0), 0.1),))
    with pytest.raises(LedgerError, match="amplification by subsampling does not hold as computed for replace_one"):
        compose([subsampled], accountant="pld", delta_slack=DELTA, neighbouring="replace_one")
    with pytest.raises(LedgerError, match="the zcdp accountant has no amplification by subsampling"):
        compose([subsampled], accountant="zcdp", delta_slack=DELTA, neighbouring="add_remove")
    with pytest.raises(LedgerError, match=r"accountant \('moments'\) must be one of"):
        compose([gaussian], accountant="moments", delta_slack=DELTA, neighbouring="replace_one")
    with pytest.raises(LedgerError, match="the pld accountant needs delta_slack"):
        compose([gaussian], accountant="pld", delta_slack=None, neighbouring="replace_one")


def test_subsampled_steps_under_add_remove_agree_with_dp_accounting() -> None:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    laplace = SelfComposed(Subsampled(LaplaceEvent(1.0, 2.0), 0.05), 100)
    pld = pld_privacy_accountant.PLDAccountant()
    pld.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.LaplaceDpEvent(2.0)), 100))
    assert ours(laplace, "pld", neighbouring="add_remove") == pytest.approx(pld.get_epsilon(DELTA), rel=1e-6)
    gaussian = SelfComposed(Subsampled(GaussianEvent(1.0, 1.5), 0.05), 100)
    rdp = rdp_privacy_accountant.RdpAccountant()
    rdp.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.5)), 100))
    assert ours(gaussian, "rdp", neighbouring="add_remove") == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-9)
    with pytest.raises(LedgerError, match="the rdp accountant amplifies subsampled Gaussian steps only"):
        ours(laplace, "rdp", neighbouring="add_remove")


@pytest.mark.parametrize(("epsilon", "count"), [(0.05, 200), (0.5, 20), (2.0, 3)])
def test_rdp_of_pure_steps_is_randomized_response_as_dp_accounting_computes_it(epsilon: float, count: int) -> None:
    """A pure ε-DP step's RDP curve is binary randomized response's at ε, which dominates every
    ε-DP mechanism (Mironov 2017, Prop. 10); dp_accounting's RR keeps the truth with probability
    1 − p/2, so p = 2/(1 + e^ε)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    oracle = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    oracle.compose(dp_accounting.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(epsilon)), 2), count)
    event = SelfComposed(ExponentialEvent(epsilon), count)
    assert ours(event, "rdp") == pytest.approx(kept(oracle.get_epsilon(DELTA), event), rel=1e-9)


def test_a_privacy_loss_grid_too_large_keeps_its_basic_guarantee_or_is_refused() -> None:
    # Theorem 1 over 30,000 candidates at ε_T ≈ 2.7: a grid of ~3·10⁸ points, hours to compose.
    huge = PrivacyEvent.from_dp_event(SelfComposed(EpsilonDeltaEvent(2.68, 1e-18, "Theorem 1"), 30_000), name="t",
                                      scope="data/seeds")
    entropies = [PrivacyEvent(name=f"h{i}", mechanism="laplace", epsilon=0.0167, sensitivity=1.0,
                              noise_scale=1.0 / 0.0167, scope="data/structure") for i in range(124)]
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="pld", delta_slack=DELTA)
    ledger.declare_partition("data", ["data/structure", "data/seeds"],
                             split=PositionalSplit.permuted(10, [5, 5], rng=np.random.default_rng(0)))
    for event in entropies:
        ledger.spend(event)
    structure = ledger.total()
    assert structure.epsilon < 1.0 < ledger.total("basic").epsilon  # the PLD of 124 small steps
    ledger.spend(huge)  # the seeds' part alone is too large for a grid: it keeps its basic total
    assert ledger.total().epsilon == pytest.approx(30_000 * 2.68, rel=1e-12)
    gaussian = PrivacyEvent.from_dp_event(SelfComposed(GaussianEvent(1.0, 0.01), 10**6), name="g")
    with pytest.raises(LedgerError, match=r"the pld accountant refuses .* would span about"):
        Ledger(epsilon_cap=None, delta_cap=None, accountant="pld", delta_slack=DELTA).spend(gaussian)


def test_zcdp_conversion_is_below_bun_steinke() -> None:
    for rho in (1e-4, 0.01, 0.5, 3.0):
        simple = rho + 2 * math.sqrt(rho * math.log(1 / DELTA))
        assert 0.0 < zcdp_to_epsilon(rho, DELTA) < simple


def test_largest_step_epsilon_is_the_largest_that_fits() -> None:
    for name in ("pld", "rdp", "zcdp", "advanced"):
        step = largest_step_epsilon(1.0, 135, accountant=name, delta_slack=DELTA)
        assert 1.0 / 135 < step
        fits = SelfComposed(LaplaceEvent(1.0, 1.0 / step), 135)
        over = SelfComposed(LaplaceEvent(1.0, 1.0 / (step * (1 + 1e-5))), 135)
        assert ours(fits, name) <= 1.0 < ours(over, name)
    assert largest_step_epsilon(1.0, 11, accountant="pld", delta_slack=DELTA) == 1.0 / 11  # no gain for 11
    best = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant="best", delta_slack=DELTA)
    assert best.largest_step_epsilon(1.0, 135) == largest_step_epsilon(1.0, 135, accountant="pld", delta_slack=DELTA)
    assert Ledger(epsilon_cap=1.0).largest_step_epsilon(1.0, 135) == 1.0 / 135
    with pytest.raises(LedgerError, match=r"count \(0\) must be an int >= 1"):
        largest_step_epsilon(1.0, 0, accountant="pld", delta_slack=DELTA)


# --- typed events in the ledger ---------------------------------------------------------------------------


def test_flat_records_become_typed_leaves() -> None:
    laplace = PrivacyEvent(name="q", mechanism="laplace", epsilon=0.5, sensitivity=2.0, noise_scale=4.0)
    assert laplace.typed == LaplaceEvent(2.0, 4.0)
    assert PrivacyEvent(name="c", mechanism="exponential", epsilon=0.3).typed == ExponentialEvent(0.3)
    other = PrivacyEvent(name="f", mechanism="functional_mechanism", epsilon=0.7, delta=1e-9)
    assert other.typed == EpsilonDeltaEvent(0.7, 1e-9, "the functional_mechanism step's own guarantee")
    selection = Ledger(epsilon_cap=None).record_private_selection(name="s", epsilon1=0.2, epsilon0=0.1, gamma=0.1,
                                                                  steps=50)
    assert selection.typed == PrivateSelectionEvent(0.2, 0.1)
    over_noised = PrivacyEvent(name="q", mechanism="laplace", epsilon=0.5, sensitivity=1.0, noise_scale=4.0)
    assert over_noised.typed == EpsilonDeltaEvent(0.5, 0.0, "the laplace step's own guarantee")


def test_a_typed_record_round_trips_and_keeps_its_basic_guarantee() -> None:
    tree = Composed((SelfComposed(EpsilonDeltaEvent(0.1, 1e-9, "Thm 1"), 40), ParallelByPosition(
        (LaplaceEvent(1.0, 5.0), Subsampled(LaplaceEvent(1.0, 2.0), 0.5)))))
    assert event_from_dict(tree.to_dict()) == tree
    # A record may not carry a parallel block: only the ledger composes in parallel, over a split it holds.
    with pytest.raises(LedgerError, match="parallel_by_position tree is not accepted in a record"):
        PrivacyEvent.from_dp_event(tree, name="t", scope="s")
    sequential = Composed((SelfComposed(EpsilonDeltaEvent(0.1, 1e-9, "Thm 1"), 40), LaplaceEvent(1.0, 5.0),
                           Subsampled(LaplaceEvent(1.0, 2.0), 0.5)))
    record = PrivacyEvent.from_dp_event(sequential, name="t", scope="s")
    assert (record.epsilon, record.delta) == basic_guarantee(sequential) and record.mechanism == "composed"
    assert PrivacyEvent.from_dict(record.to_dict()) == record
    gaussian = PrivacyEvent.from_dp_event(GaussianEvent(1.0, 5.0), name="g")
    assert gaussian.epsilon is None and PrivacyEvent.from_dict(gaussian.to_dict()) == gaussian
    with pytest.raises(LedgerError, match="must be the basic guarantee"):
        PrivacyEvent(name="t", mechanism="x", epsilon=1.0, dp_event=LaplaceEvent(1.0, 2.0))


def test_gaussian_steps_need_a_curve_accountant_and_compose_under_best() -> None:
    basic = Ledger(epsilon_cap=10.0, delta_cap=1e-5)
    with pytest.raises(LedgerError, match="the basic accountant refuses gaussian"):
        basic.spend(PrivacyEvent.from_dp_event(GaussianEvent(1.0, 4.0), name="g"))
    assert len(basic) == 0
    best = Ledger(epsilon_cap=10.0, delta_cap=1e-5, accountant="best", delta_slack=1e-6)
    for i in range(20):
        best.spend(PrivacyEvent.from_dp_event(DiscreteGaussianEvent(1, 4.0), name=f"g{i}"))
    totals = best.totals_by_accountant()
    assert set(totals) == {"pld", "rdp", "zcdp"}
    assert best.total() == min(totals.values(), key=lambda b: b.epsilon)
    assert best.total().epsilon < totals["zcdp"].epsilon
    before = best.total()
    with pytest.raises(BudgetExceededError, match="run's best total ε"):
        for i in range(40):
            best.spend(PrivacyEvent.from_dp_event(GaussianEvent(1.0, 1.0), name=f"more{i}"))
    assert best.total().epsilon <= 10.0 < best.total().epsilon + 2.0 and best.total() != before


def test_the_ledger_basic_total_is_the_reference_composition_bit_for_bit() -> None:
    rng = np.random.default_rng(29)
    for _ in range(20):
        ledger = Ledger(epsilon_cap=None, delta_cap=None, neighbouring="add_remove")
        split_rng = np.random.default_rng(0)
        ledger.declare_partition("data", ["a", "b", "c"], split=PositionalSplit.independent(9, 3, rng=split_rng))
        ledger.declare_partition("a", ["a1", "a2"], split=PositionalSplit.independent(9, 2, rng=split_rng))
        ledger.declare_partition("data", ["x", "y"], split=PositionalSplit.independent(9, 2, rng=split_rng))
        scopes = ["data", "a", "b", "c", "a1", "a2", "x", "y", "other"]
        for i in range(int(rng.integers(1, 60))):
            ledger.charge(name=f"q{i}", mechanism="laplace", epsilon=float(rng.uniform(1e-3, 0.3)),
                          delta=float(rng.choice([0.0, 1e-9])), scope=str(rng.choice(scopes)))
        reference = compose(ledger._scope_nodes(), accountant="basic", delta_slack=None, neighbouring="add_remove")
        assert (ledger.total().epsilon, ledger.total().delta) == (reference.epsilon, reference.delta)


def test_a_preflighted_plan_is_spent_without_a_second_composition(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant="pld", delta_slack=DELTA)
    step = largest_step_epsilon(1.0, 200, accountant="pld", delta_slack=DELTA)
    plan = [PrivacyEvent(name=f"q{i}", mechanism="laplace", epsilon=step, sensitivity=1.0, noise_scale=1.0 / step)
            for i in range(200)]
    ledger.preflight(plan)
    calls = []
    real = accountants.compose
    monkeypatch.setattr(accountants, "compose", lambda *a, **k: calls.append(1) or real(*a, **k))
    for event in plan:
        ledger.spend(event)
    assert calls == [] and ledger.total().epsilon <= 1.0 and len(calls) == 1
    with pytest.raises(BudgetExceededError, match=re.escape("run's pld total ε")):
        ledger.spend(plan[0])  # not in a cleared plan: checked, and over the cap


# --- parallel composition by position --------------------------------------------------------------------


def _neighbour(data: np.ndarray, position: int, rng: np.random.Generator) -> np.ndarray:
    other = data.copy()
    other[position] = data[position] + rng.integers(1, 50)
    return other


def test_a_positional_split_puts_a_replaced_record_in_one_part_only() -> None:
    """Statistical neighbour test: over many random datasets, neighbours and seeded splits, the
    parts of D and D' differ in exactly one part, the one holding the replaced position."""
    rng = np.random.default_rng(4)
    for trial in range(300):
        n = int(rng.integers(10, 200))
        data = rng.integers(0, 100, size=n)
        position = int(rng.integers(0, n))
        neighbour = _neighbour(data, position, rng)
        sizes = [n // 3, n // 3, n - 2 * (n // 3)]
        seed = int(rng.integers(2**32))
        split_d = PositionalSplit.permuted(n, sizes, rng=np.random.default_rng(seed))
        split_n = PositionalSplit.permuted(n, sizes, rng=np.random.default_rng(seed))  # drawn without the data
        changed = [k for k in range(3)
                   if not np.array_equal(data[split_d.positions(k)], neighbour[split_n.positions(k)])]
        assert changed == [split_d.part_of(position)], trial


def test_a_split_by_value_moves_a_replaced_record_and_is_refused() -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 100, size=50)
    by_value = lambda x: [x[x < 50], x[x >= 50]]  # noqa: E731 - the split a careless user writes
    position = int(np.flatnonzero(data < 40)[0])
    neighbour = data.copy()
    neighbour[position] = 90  # the record moves from the first part to the second
    changed = [k for k, (p, q) in enumerate(zip(by_value(data), by_value(neighbour))) if not np.array_equal(p, q)]
    assert changed == [0, 1]  # both parts change: max over parts would under-count
    ledger = Ledger(epsilon_cap=1.0)
    with pytest.raises(LedgerError, match="parallel composition needs the split that cut the parts"):
        ledger.declare_partition("data", ["low", "high"])
    with pytest.raises(TypeError, match="split .* must be a PositionalSplit"):
        ledger.declare_partition("data", ["low", "high"], split=by_value)  # type: ignore[arg-type]
    with pytest.raises(LedgerError, match="one scope per part of the split"):
        ledger.declare_partition("data", ["low", "high"],
                                 split=PositionalSplit.permuted(9, [3, 3, 3], rng=np.random.default_rng(0)))
    assert ledger.partitions == ()


def test_positional_parts_compose_in_parallel_under_replace_one() -> None:
    ledger = Ledger(epsilon_cap=1.0, accountant="basic")
    ledger.declare_partition("data", ["data/a", "data/b"], split=PositionalSplit.permuted(
        100, [50, 50], rng=np.random.default_rng(1)))
    for scope in ("data/a", "data/b"):
        for i in range(4):
            ledger.charge(name=f"{scope}{i}", mechanism="laplace", epsilon=0.25, scope=scope)
    assert ledger.total().epsilon == 1.0
    again = Ledger.from_json(ledger.to_json())
    assert again.total() == ledger.total() and again.to_dict() == ledger.to_dict()
    redrawn = again.split_of("data", ["data/a", "data/b"])
    assert np.array_equal(redrawn.positions(0), ledger.split_of("data", ["data/a", "data/b"]).positions(0))
    text = ledger.render_table()
    assert "partition data (permuted split): data/a | data/b" in text
    assert "parallel over 2 parts:" in text and "laplace" in text
