"""Soundness by construction (issue 41): no API path reports less ε than the truth.

Each of the five cases the audit found is a test here that failed before the fix, with the
truth computed independently where it is a number (the exact enumeration of the add/remove
counterexample). The property test over random ledgers is tests/test_ledger_property.py.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.plausible_deniability.model import PlausibleDeniabilityModel, PlausibleDeniabilityModelParams
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import BudgetExceededError, LedgerError, SequentialCompositionWarning
from privlab.platform.dp.dp_events import Composed, LaplaceEvent, ParallelByPosition
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import NeighbouringRelation, PositionalSplit, SplitPlan
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource

ROOT = Path(__file__).resolve().parents[1]


def _laplace(name: str, scope: str, epsilon: float = 1.0) -> PrivacyEvent:
    return PrivacyEvent(name=name, mechanism="laplace", epsilon=epsilon, sensitivity=1.0, noise_scale=1.0 / epsilon,
                        scope=scope)


# --- 1. a split by value is not a positional split ------------------------------------------------


def _census(n: int = 1200, seed: int = 0) -> tuple[pd.DataFrame, Domain]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    c = (a + rng.integers(0, 2, n)) % 2
    data = pd.DataFrame({"a": a, "b": (a + rng.integers(0, 3, n)) % 4, "c": c})
    return data, Domain(tuple(ColumnDomain(name=name, labels=tuple(f"{name}{i}" for i in range(size)))
                              for name, size in (("a", 3), ("b", 4), ("c", 2))))


def test_pd_halves_cut_by_value_compose_sequentially_and_say_so() -> None:
    data, domain = _census()
    by_value = data["c"] == 0  # the careless user's split: a changed c moves a record between the halves
    params = PlausibleDeniabilityModelParams(epsilon=1.0, accountant="basic", maxcost=8)
    ledger = Ledger(epsilon_cap=None)
    with pytest.warns(SequentialCompositionWarning, match="compose sequentially"):
        PlausibleDeniabilityModel(params).fit(data[by_value], parameter_data=data[~by_value], domain=domain,
                                              ledger=ledger, source=SeededSource(np.random.default_rng(1)))
    assert ledger.partitions == ()
    assert ledger.total().epsilon == pytest.approx(2.0, rel=1e-12)  # was 1.0: each half spends the model's ε
    # Cut by the model through a drawn split, the halves compose in parallel: ε = 1.
    split = PositionalSplit.permuted(len(data), [600, 600], rng=np.random.default_rng(2))
    parallel = Ledger(epsilon_cap=1.0)
    PlausibleDeniabilityModel(params).fit(data, split=split, domain=domain, ledger=parallel,
                                          source=SeededSource(np.random.default_rng(1)))
    assert parallel.total().epsilon == pytest.approx(1.0, rel=1e-12)
    assert parallel.split_of("data", ["data/structure", "data/parameters"]) is split
    # Pre-split halves on a ledger that already splits the data: refused, nothing charged.
    with pytest.raises(LedgerError, match="fit was given halves cut by the caller"):
        PlausibleDeniabilityModel(params).fit(data[by_value], parameter_data=data[~by_value], domain=domain,
                                              ledger=parallel, source=SeededSource(np.random.default_rng(1)))
    # A split drawn for other data is refused before anything is charged.
    other = Ledger(epsilon_cap=1.0)
    with pytest.raises(LedgerError, match=re.escape("split n (1200) must equal the number of records of data (1199)")):
        PlausibleDeniabilityModel(params).fit(data.iloc[:-1], split=split, domain=domain, ledger=other,
                                              source=SeededSource(np.random.default_rng(1)))
    assert len(other) == 0 and other.partitions == ()


def test_a_partition_needs_a_split_the_ledger_holds_on_every_path() -> None:
    ledger = Ledger(epsilon_cap=1.0)
    with pytest.raises(LedgerError, match="by_position=True is not accepted"):
        ledger.declare_partition("data", ["a", "b"], by_position=True)
    with pytest.raises(LedgerError, match="parallel composition needs the split that cut the parts"):
        ledger.declare_partition("data", ["a", "b"])
    with pytest.raises(TypeError, match="drawn with PositionalSplit.permuted"):
        PositionalSplit(_seal=None, kind="permuted", n=4, assignment=np.array([0, 0, 1, 1]),  # type: ignore[arg-type]
                        order=np.arange(4), record={})
    # A bare parallel block in a record: the ledger would have composed it as the worst part.
    with pytest.raises(LedgerError, match="parallel_by_position tree is not accepted"):
        PrivacyEvent.from_dp_event(ParallelByPosition((LaplaceEvent(1.0, 1.0), LaplaceEvent(1.0, 1.0))), name="p")
    with pytest.raises(LedgerError, match="parallel_by_position tree is not accepted"):
        PrivacyEvent.from_dp_event(Composed((LaplaceEvent(1.0, 1.0), ParallelByPosition(
            (LaplaceEvent(1.0, 1.0), LaplaceEvent(1.0, 1.0))))), name="p")
    assert len(ledger) == 0 and ledger.partitions == ()


def test_from_dict_redraws_a_partition_and_refuses_a_bare_basis() -> None:
    ledger = Ledger(epsilon_cap=1.0)
    split = PositionalSplit.permuted(10, [5, 5], rng=np.random.default_rng(3))
    ledger.declare_partition("data", ["a", "b"], split=split)
    ledger.spend(_laplace("x", "a"))
    ledger.spend(_laplace("y", "b"))
    record = ledger.to_dict()
    again = Ledger.from_dict(record)
    assert again.total().epsilon == 1.0
    assert np.array_equal(again.split_of("data", ["a", "b"]).positions(1), split.positions(1))
    # As privlab wrote it before splits were checked: a basis alone is a promise, not a split.
    legacy = {**record, "partitions": [{"parent": "data", "parts": ["a", "b"], "basis": "position"}]}
    with pytest.raises(LedgerError, match="cannot be re-derived and is not trusted"):
        Ledger.from_dict(legacy)
    # A split record the ledger cannot redraw (sizes that do not fit n, a forged stream).
    for bad in ({**record["partitions"][0]["split"], "sizes": [6, 6]},
                {**record["partitions"][0]["split"], "stream": {"bit_generator": "Made-up"}},
                {k: v for k, v in record["partitions"][0]["split"].items() if k != "stream"}):
        with pytest.raises(LedgerError):
            Ledger.from_dict({**record, "partitions": [{**record["partitions"][0], "split": bad}]})
    # A published ledger withholds n and the stream: it cannot be read back as a ledger.
    with pytest.raises(LedgerError, match="was published without the record count"):
        Ledger.from_dict(ledger.to_dict(published=True))
    assert '"stream"' not in ledger.to_json(published=True)


# --- 2. add/remove with a permutation cut at n-dependent sizes ------------------------------------


def _laplace_density(x: np.ndarray, centre: float, epsilon: float) -> np.ndarray:
    return epsilon / 2 * np.exp(-epsilon * np.abs(x - centre))


def _output_density(data: list[int], split_draws: list[list[int]], y: np.ndarray, epsilon: float) -> np.ndarray:
    """The exact density at y (points × 2) of releasing each part's count of ones with Laplace(1/ε),
    the parts drawn uniformly from ``split_draws`` (each a part index per position)."""
    total = np.zeros(len(y))
    for assignment in split_draws:
        counts = [sum(v for v, part in zip(data, assignment) if part == k) for k in (0, 1)]
        total += _laplace_density(y[:, 0], counts[0], epsilon) * _laplace_density(y[:, 1], counts[1], epsilon)
    return total / len(split_draws)


def _permuted_cuts(n: int) -> list[list[int]]:
    """Every assignment the permuted split draws: each permutation of n positions cut at
    array_split(n, 2)'s sizes (DiPriMe's tree_sizes), equally likely."""
    sizes = [len(p) for p in np.array_split(np.arange(n), 2)]
    out = []
    for order in itertools.permutations(range(n)):
        assignment = [0] * n
        for rank, position in enumerate(order):
            assignment[position] = 0 if rank < sizes[0] else 1
        out.append(assignment)
    return out


def _independent_draws(n: int) -> list[list[int]]:
    return [list(a) for a in itertools.product((0, 1), repeat=n)]


def _worst_loss(d: list[int], d_prime: list[int], draws: object, epsilon: float) -> float:
    grid = np.array([(u, v) for u in np.linspace(-4, 6, 41) for v in np.linspace(-4, 6, 41)])
    p = _output_density(d, draws(len(d)), grid, epsilon)  # type: ignore[operator]
    q = _output_density(d_prime, draws(len(d_prime)), grid, epsilon)  # type: ignore[operator]
    return float(np.max(np.abs(np.log(q / p))))


def test_a_permutation_cut_at_n_dependent_sizes_is_not_parallel_under_add_remove() -> None:
    epsilon = 1.0
    truth = _worst_loss([1, 1], [1, 1, 0], _permuted_cuts, epsilon)
    assert truth == pytest.approx(math.log(2 / 3 + math.exp(2) / 3), abs=1e-12)  # 1.141, not 1.0
    # The ledger now refuses the split under add/remove, before anything is recorded.
    ledger = Ledger(epsilon_cap=None, neighbouring="add_remove")
    with pytest.raises(LedgerError, match=re.escape("ln(2/3 + e²/3) = 1.141")):
        ledger.declare_partition("data", ["t0", "t1"], split=PositionalSplit.permuted(2, [1, 1],
                                                                                      rng=np.random.default_rng(0)))
    with pytest.raises(LedgerError, match="not a parallel split under add/remove"):
        ledger.preflight([_laplace("q", "t0")], partitions=[("data", ["t0", "t1"], SplitPlan("permuted"))])
    assert ledger.partitions == () and len(ledger) == 0
    # Under replace-one the same split composes in parallel, and 1.0 is the truth.
    assert _worst_loss([1, 1, 1], [1, 1, 0], _permuted_cuts, epsilon) <= epsilon + 1e-12
    # Independent per-record draws compose in parallel under add/remove: the worst loss is ε.
    assert _worst_loss([1, 1], [1, 1, 1], _independent_draws, epsilon) <= epsilon + 1e-12
    independent = Ledger(epsilon_cap=1.0, neighbouring=NeighbouringRelation.ADD_REMOVE)
    independent.declare_partition("data", ["t0", "t1"], split=PositionalSplit.independent(
        3, 2, rng=np.random.default_rng(0)))
    independent.spend(_laplace("q0", "t0"))
    independent.spend(_laplace("q1", "t1"))
    assert independent.total().epsilon == 1.0


def test_dipreme_standalone_default_is_the_relation_its_split_holds_for() -> None:
    from privlab.mechanisms.dipreme import DiPriMeRegressor

    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 1, (60, 2)), rng.uniform(0, 1, 60)
    forest = DiPriMeRegressor(epsilon=1.0, n_estimators=3, max_depth=2, feature_bounds=(0.0, 1.0),
                              target_bounds=(0.0, 1.0), random_state=0).fit(X, y)
    assert forest.ledger_.neighbouring == NeighbouringRelation.REPLACE_ONE
    assert forest.ledger_.total().epsilon == pytest.approx(1.0, rel=1e-12)
    [(parent, parts)] = forest.ledger_.partitions
    assert forest.ledger_.split_of(parent, parts).kind == "permuted"


# --- 3. best accepts an event only if one accountant composes the whole ledger --------------------


def test_best_refuses_an_event_no_accountant_composes_with_the_rest() -> None:
    from privlab.platform.dp.dp_events import GaussianEvent

    for cap in (None, 10.0):
        ledger = Ledger(epsilon_cap=cap, delta_cap=None, accountant="best", delta_slack=1e-6,
                        neighbouring="add_remove")
        ledger.spend(PrivacyEvent.from_dp_event(GaussianEvent(1.0, 2.0), name="g"))  # basic, advanced refuse it
        before = ledger.to_dict()
        subsampled_exponential = PrivacyEvent(name="x", mechanism="exponential", epsilon=0.5, sampling_rate=0.1)
        with pytest.raises(LedgerError, match="no accountant can account for this ledger with it"):
            ledger.spend(subsampled_exponential)  # the curve accountants refuse it
        assert ledger.to_dict() == before  # nothing recorded, with or without a cap
        assert ledger.total().epsilon > 0  # was: min() arg is an empty sequence


def test_a_spend_whose_total_raises_leaves_the_ledger_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-5, accountant="pld", delta_slack=1e-6)
    ledger.spend(_laplace("a", "data", 0.5))
    before = ledger.to_dict()

    def broken(*args: object, **kwargs: object) -> None:
        raise LedgerError("an accountant that cannot compose this ledger")

    from privlab.platform.dp import accountants

    monkeypatch.setattr(accountants, "compose", broken)
    with pytest.raises(LedgerError, match="cannot compose"):
        ledger.spend(_laplace("b", "data", 0.75))  # over the basic cap: the pld total is needed, and fails
    assert ledger.to_dict() == before


# --- 4. a preflight's clearance holds only for the partitions it composed -------------------------


def test_a_cleared_plan_spent_without_its_partition_is_checked_in_full() -> None:
    ledger = Ledger(epsilon_cap=1.0)
    plan = [_laplace("x", "data/a"), _laplace("y", "data/b")]
    split = PositionalSplit.permuted(10, [5, 5], rng=np.random.default_rng(4))
    ledger.preflight(plan, partitions=[("data", ["data/a", "data/b"], split)])
    ledger.spend(plan[0])
    with pytest.raises(BudgetExceededError, match="over the cap"):  # was: recorded, total 2.0 against a cap of 1
        ledger.spend(plan[1])
    assert [e.name for e in ledger.events] == ["x"] and ledger.total().epsilon == 1.0
    # Declared as the preflight assumed, the plan is spent at the preflight's price.
    declared = Ledger(epsilon_cap=1.0)
    declared.preflight(plan, partitions=[("data", ["data/a", "data/b"], split.plan)])
    declared.declare_partition("data", ["data/a", "data/b"], split=split)
    for event in plan:
        declared.spend(event)
    assert declared.total().epsilon == 1.0


def test_a_plan_ledger_is_never_charged_by_a_fit_and_its_trials_declare_their_splits() -> None:
    data, domain = _census(400)
    plan = Ledger(epsilon_cap=1.0)
    plan.declare_partition("data", ["data/structure", "data/parameters"], split=SplitPlan("permuted"))
    assert plan.is_plan and "plan" in repr(plan)
    params = PlausibleDeniabilityModelParams(epsilon=1.0, accountant="basic", maxcost=8)
    split = PositionalSplit.permuted(len(data), [200, 200], rng=np.random.default_rng(5))
    with pytest.raises(LedgerError, match="the ledger is a plan"):
        PlausibleDeniabilityModel(params).fit(data, split=split, domain=domain, ledger=plan,
                                              source=SeededSource(np.random.default_rng(1)))
    trial = plan.for_trial()
    assert not trial.is_plan and trial.partitions == ()
    PlausibleDeniabilityModel(params).fit(data, split=split, domain=domain, ledger=trial,
                                          source=SeededSource(np.random.default_rng(1)))
    assert trial.split_of("data", ["data/structure", "data/parameters"]) is split
    assert trial.total().epsilon == pytest.approx(1.0, rel=1e-12)


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda led: led.declare_partition("data", ["a", "b", "c"], split=PositionalSplit.permuted(
        9, [3, 3], rng=np.random.default_rng(0))), LedgerError, "one scope per part of the split"),
    (lambda led: led.declare_partition("data", ["a", "b"], split=SplitPlan("stratified")), LedgerError,
     "kind ('stratified') must be one of"),
    (lambda led: Ledger(epsilon_cap=1.0, neighbouring="swap"), LedgerError, "neighbouring ('swap') must be one of"),
    (lambda led: Ledger(epsilon_cap=1.0, neighbouring=1), TypeError, "must be a NeighbouringRelation"),
    (lambda led: Ledger(epsilon_cap=1.0, accountant="moments"), LedgerError, "accountant ('moments') must be one of"),
])
def test_bad_split_relation_or_accountant_is_refused_before_anything_is_recorded(call, error, message) -> None:  # type: ignore[no-untyped-def]
    ledger = Ledger(epsilon_cap=1.0)
    with pytest.raises(error, match=re.escape(message)):
        call(ledger)
    assert ledger.partitions == () and len(ledger) == 0


def test_a_partition_declared_twice_is_refused() -> None:
    ledger = Ledger(epsilon_cap=1.0)
    split = PositionalSplit.permuted(10, [5, 5], rng=np.random.default_rng(0))
    ledger.declare_partition("data", ["a", "b"], split=split)
    with pytest.raises(LedgerError, match="is already declared; declare it once"):
        ledger.declare_partition("data", ["a", "b"], split=split)
    assert len(ledger.partitions) == 1


# --- 5. what the pages say -----------------------------------------------------------------------


def test_the_pd_results_page_states_the_papers_scale_under_its_own_relation() -> None:
    page = (ROOT / "experiments" / "plausible_deniability" / "RESULTS.md").read_text(encoding="utf-8")
    # ε_p from ε_P = ε_p·sqrt(2m ln(1/δ_P)) + m·ε_p(e^ε_p − 1) = 1 with m = 11, δ_P = 2^-30:
    m, log_inv_delta = 11, 30 * math.log(2)
    low, high = 1e-6, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if mid * math.sqrt(2 * m * log_inv_delta) + m * mid * math.expm1(mid) > 1:
            high = mid
        else:
            low = mid
    assert low == pytest.approx(0.04566, abs=5e-6)
    assert f"{1 / low:.2f}" == "21.90" and "21.90" in page and "43.8" in page
    assert "under replace-one" not in page.split("21.9", 1)[1][:120]  # the scale is the paper's add/remove one
