"""Plausible deniability (issue 10 items 1–3): split, sensitivities, accounting, the DP model."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.plausible_deniability.accounting import (
    paper_parameter_epsilon, paper_structure_epsilon, step_epsilons, theorem1, theorem1_replace_one)
from privlab.mechanisms.plausible_deniability.entropy import (
    empirical_entropy, entropy_sensitivity, paper_entropy_bound_bits)
from privlab.mechanisms.plausible_deniability.model import (
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.plausible_deniability.parameters import COUNT_SENSITIVITY
from privlab.mechanisms.plausible_deniability.split import SplitSizes, split_dataset
from privlab.mechanisms.plausible_deniability.structure import Bucketing, entropy_queries, merit
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import BudgetExceededError, SchemaError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.randomness import SeededSource

DOMAIN = Domain(tuple(ColumnDomain(name=n, labels=tuple(f"{n}{i}" for i in range(k)))
                      for n, k in (("a", 3), ("b", 4), ("c", 2), ("d", 5))))
BUCKETS = {"d": [0, 0, 1, 1, 2]}
SLACK = 2.0**-30


def coded(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = ((b > 1) ^ (rng.random(n) < 0.1)).astype(np.int64)
    d = (a + b + rng.integers(0, 2, n)) % 5
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


class RecordingSource(SeededSource):
    """Records the scale and shape of every Laplace request (as tests/test_pmse_baselines.py)."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.default_rng(seed))
        self.requests: list[tuple[float, tuple[int, ...]]] = []

    def _draw_laplace(self, scale: float, shape: Any) -> Any:
        out = super()._draw_laplace(scale, shape)
        self.requests.append((scale, tuple(np.shape(out))))
        return out



def halves(n: int) -> PositionalSplit:
    """D_T (500 records) and D_P (the rest), cut by a seeded permutation of the positions."""
    return PositionalSplit.permuted(n, [500, n - 500], rng=np.random.default_rng(0))

def fitted(seed: int = 2, *, epsilon: float = 1.0, source: SeededSource | None = None,
           estimator: str = "posterior_sample") -> tuple[PlausibleDeniabilityModel, Ledger]:
    data = coded()
    ledger = Ledger(epsilon_cap=epsilon, delta_cap=1e-6, accountant="best", delta_slack=SLACK)
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=epsilon, maxcost=20,
                                                                       estimator=estimator))
    model.fit(data, split=halves(len(data)), domain=DOMAIN, ledger=ledger,
              source=source or SeededSource(np.random.default_rng(seed)), buckets=BUCKETS)
    return model, ledger


# --- sensitivities ---------------------------------------------------------------------------


def _histograms(n: int, cells: int):
    for cut in itertools.combinations(range(n + cells - 1), cells - 1):
        bounds = (-1, *cut, n + cells - 1)
        yield np.array([bounds[i + 1] - bounds[i] - 1 for i in range(cells)])


@pytest.mark.parametrize(("n", "cells"), [(2, 2), (3, 3), (5, 3), (7, 4), (10, 2), (12, 3)])
def test_entropy_sensitivity_is_the_brute_force_maximum_over_replacements(n: int, cells: int) -> None:
    worst = 0.0
    for h in _histograms(n, cells):
        for src, dst in itertools.permutations(range(cells), 2):
            if h[src] == 0:
                continue
            moved = h.copy()
            moved[src] -= 1
            moved[dst] += 1
            worst = max(worst, abs(empirical_entropy(h) - empirical_entropy(moved)))
    assert worst == pytest.approx(entropy_sensitivity(n), rel=1e-12)
    # the paper's eq. (9) (bits) is a valid but looser bound: convert ours to bits
    assert entropy_sensitivity(n) / math.log(2) <= paper_entropy_bound_bits(n)


def test_entropy_sensitivity_is_the_binary_entropy_of_one_over_n() -> None:
    for n in (2, 10, 1000, 280_000):
        p = 1.0 / n
        assert entropy_sensitivity(n) == pytest.approx(-p * math.log(p) - (1 - p) * math.log(1 - p), rel=1e-12)
        assert entropy_sensitivity(n) <= (math.log(n) + 1) / n
    with pytest.raises(ValueError, match=r"n \(1\) must be >= 2"):
        entropy_sensitivity(1)


def test_count_table_sensitivity_is_two_under_replace_one_by_brute_force() -> None:
    """Every replacement of one record of a tiny D_P moves the attribute's table by L1 ≤ 2,
    and some replacement moves it by exactly 2."""
    records = list(itertools.product(range(2), range(3)))  # (parent, child)
    worst = 0
    for data in itertools.combinations_with_replacement(records, 3):
        base = np.zeros((2, 3), int)
        for p, c in data:
            base[p, c] += 1
        for position, replacement in itertools.product(range(3), records):
            other = base.copy()
            p, c = data[position]
            other[p, c] -= 1
            other[replacement] += 1
            worst = max(worst, int(np.abs(other - base).sum()))
    assert worst == COUNT_SENSITIVITY == 2


# --- accounting --------------------------------------------------------------------------------


def test_advanced_step_epsilon_is_the_largest_that_composes_within_epsilon() -> None:
    from privlab.platform.dp.composition import advanced
    (e, *rest) = step_epsilons(1.0, 1000, accountant="advanced", delta_slack=SLACK)
    assert all(r == e for r in rest) and e > 1.0 / 1000
    assert advanced(epsilon=e, delta=0.0, k=1000, delta_slack=SLACK)[0] <= 1.0
    assert advanced(epsilon=math.nextafter(e, 1.0), delta=0.0, k=1000, delta_slack=SLACK)[0] > 1.0
    # 21 steps: Theorem 3.20 would give each less than 1/21, so the basic split is used.
    few = step_epsilons(1.0, 21, accountant="advanced", delta_slack=SLACK)
    assert math.fsum(few) == 1.0 and advanced(epsilon=max(few), delta=0.0, k=21, delta_slack=SLACK)[0] > 1.0
    e = few[0]
    assert math.fsum(step_epsilons(1.3, 12, accountant="basic", delta_slack=SLACK)) == 1.3
    # the paper's Section 3.5 formulas, at the same per-step ε, for comparison
    assert paper_structure_epsilon(epsilon_h=e, epsilon_nt=0.0, m=4, delta_l=SLACK) == pytest.approx(
        advanced(epsilon=e, delta=0.0, k=20, delta_slack=SLACK)[0])
    assert paper_parameter_epsilon(epsilon_p=e, m=4, delta_p=SLACK) > 0


def test_theorem1_values_and_bad_parameters() -> None:
    eps, delta = theorem1(k=50, gamma=4.0, epsilon0=1.0, t=10)
    assert eps == pytest.approx(1.0 + math.log(1.4)) and delta == pytest.approx(math.exp(-40))
    eps2, delta2 = theorem1_replace_one(k=50, gamma=4.0, epsilon0=1.0, t=10)
    assert eps2 == 2 * eps and delta2 == pytest.approx((1 + math.exp(eps)) * delta)
    for kwargs, fragment in [({"t": 50}, r"t \(50\) must be < k \(50\)"), ({"gamma": 1.0}, "gamma"),
                             ({"epsilon0": 0.0}, "epsilon0"), ({"t": 0}, "t")]:
        with pytest.raises(ValueError, match=fragment):
            theorem1(**{"k": 50, "gamma": 4.0, "epsilon0": 1.0, "t": 10, **kwargs})


# --- the ledger, the plan and the noise actually drawn -----------------------------------------


def test_ledger_equals_plan_and_composes_to_exactly_the_declared_budget() -> None:
    model, ledger = fitted()
    plan = model.planned_events(DOMAIN, 500, 700, buckets=BUCKETS)
    assert list(ledger.events) == plan == list(model.events_)
    m = len(DOMAIN)
    assert len(plan) == m + 1 + m * (m - 1) + m  # H(x_i), H(bkt d), H(x_i, bkt x_j), count tables
    # D_T and D_P are a positional split: each half composes to at most ε (to 1e-6 here: the
    # structure's steps are the largest PLD allows, and the best accountant reads both halves by
    # their privacy-loss distribution at δ''), and the run is the worse half.
    assert 1.0 - 1e-6 <= ledger.total().epsilon <= 1.0 * (1 + 1e-12)
    assert ledger.total().delta == SLACK
    assert ledger.has_partition("data", ("data/structure", "data/parameters"))
    assert {e.scope for e in plan} == {"data/structure", "data/parameters"}
    assert ledger.total("basic").epsilon > 1.0  # sequential composition of the two halves would not fit
    assert {e.sensitivity for e in plan[:-m]} == {entropy_sensitivity(500)}
    assert {e.sensitivity for e in plan[-m:]} == {2.0}


def test_the_noise_scales_drawn_are_the_planned_ones() -> None:
    source = RecordingSource(5)
    model, ledger = fitted(source=source)
    assert [s for s, _ in source.requests] == [e.noise_scale for e in ledger.events]
    tables = [shape for _, shape in source.requests[-len(DOMAIN):]]
    assert tables == [t.shape for t in model.tables_]
    assert all(shape == () for _, shape in source.requests[:-len(DOMAIN)])


@pytest.mark.statistical
def test_count_noise_has_the_planned_laplace_scale() -> None:
    """Seeded Monte Carlo: every noise value drawn (entropies and count cells), divided by the
    scale it was requested with, is Lap(1): mean |z| = 1 within 5% (≈ 7 standard errors) and
    median ≈ 0, over ≥ 20,000 draws."""
    source = RecordingSource(11)
    draws: list[float] = []
    original = source._draw_laplace

    def keep(scale: float, shape: Any) -> Any:
        out = original(scale, shape)
        draws.extend((np.asarray(out) / scale).ravel().tolist())
        return out

    source._draw_laplace = keep  # type: ignore[method-assign]
    for _ in range(350):
        fitted(source=source)
    assert len(draws) > 20_000
    assert np.mean(np.abs(draws)) == pytest.approx(1.0, rel=0.05)
    assert abs(np.median(draws)) < 0.05


def test_same_seed_same_model_other_seed_other_model() -> None:
    first, _ = fitted(3)
    again, _ = fitted(3)
    other, _ = fitted(4)
    assert first.structure_ == again.structure_
    assert all(np.array_equal(a, b) for a, b in zip(first.tables_, again.tables_))
    assert not all(np.array_equal(a, b) for a, b in zip(first.tables_, other.tables_))


def test_the_model_learns_the_dependencies_of_the_data() -> None:
    model, _ = fitted(3, epsilon=50.0, estimator="posterior_mean")
    parents = model.describe()["parents"]
    assert "a" in parents["b"] or "b" in parents["a"]
    for i, table in enumerate(model.tables_):
        assert np.allclose(table.sum(axis=1), 1.0) and (table > 0).all()
    assert set(model.structure_.order) == set(range(len(DOMAIN)))


def test_cfs_merit_by_hand() -> None:
    r = np.array([[0.0, 0.6, 0.3], [0.6, 0.0, 0.2], [0.3, 0.4, 0.0]])
    assert merit(0, [], r) == 0.0
    assert merit(0, [1], r) == pytest.approx(0.6)
    assert merit(0, [1, 2], r) == pytest.approx(0.9 / math.sqrt(2 + 2 * 0.3))  # mean of r[1,2], r[2,1]


def test_entropy_queries_are_m_times_m_plus_one_at_most() -> None:
    identity = Bucketing.build(DOMAIN)
    assert len(entropy_queries(4, identity)) == 4 + 12
    assert len(entropy_queries(4, Bucketing.build(DOMAIN, BUCKETS))) == 4 + 1 + 12
    every = Bucketing.build(DOMAIN, {"a": [0, 0, 1], "b": [0, 0, 1, 1], "c": [0, 0], "d": BUCKETS["d"]})
    assert len(entropy_queries(4, every)) == 4 * 5


# --- the split -----------------------------------------------------------------------------------


def test_split_is_by_position_a_replaced_record_changes_one_part() -> None:
    """The neighbour test behind the ledger's positional partition of D_T, D_P and D_S: for many
    neighbours (one record replaced by another value), the same seed gives the same parts but
    the one that holds the replaced position."""
    data = coded(200, 3)
    rng = np.random.default_rng(8)
    parts = ("structure", "parameters", "seeds", "test")
    for trial in range(60):
        position = int(rng.integers(0, len(data)))
        neighbour = data.copy()
        column = str(rng.choice(list(DOMAIN.names)))
        neighbour.loc[position, column] = (data.loc[position, column] + 1) % DOMAIN[column].size
        seed = int(rng.integers(2**32))
        sizes = SplitSizes(structure=38, parameters=38, seeds=98)
        left = split_dataset(data, sizes=sizes, domain=DOMAIN, rng=np.random.default_rng(seed))
        right = split_dataset(neighbour, sizes=sizes, domain=DOMAIN, rng=np.random.default_rng(seed))
        changed = [p for p in parts if not getattr(left, p).equals(getattr(right, p))]
        assert len(changed) == 1, (trial, changed)


def test_split_is_seeded_disjoint_and_sized() -> None:
    data = coded(100).assign(row=None).drop(columns="row")
    split = split_dataset(data, sizes=SplitSizes(structure=19, parameters=19, seeds=49), domain=DOMAIN,
                          rng=np.random.default_rng(1))
    assert split.sizes == {"structure": 19, "parameters": 19, "seeds": 49, "test": 13}
    again = split_dataset(data, sizes=SplitSizes(structure=19, parameters=19, seeds=49), domain=DOMAIN,
                          rng=np.random.default_rng(1))
    pd.testing.assert_frame_equal(split.seeds, again.seeds)
    # disjoint: tag rows and check that each appears exactly once
    tagged = Domain((*DOMAIN.columns, ColumnDomain(name="id", labels=tuple(str(i) for i in range(100)))))
    parts = split_dataset(data.assign(id=np.arange(100)), sizes=SplitSizes(structure=19, parameters=19, seeds=49),
                          domain=tagged, rng=np.random.default_rng(1))
    ids = np.concatenate([getattr(parts, p)["id"].to_numpy() for p in ("structure", "parameters", "seeds", "test")])
    assert sorted(ids) == list(range(100))
    assert SplitSizes.from_fractions(1000, structure=0.19, parameters=0.19, seeds=0.49).seeds == 490


# --- bad input: clear errors before any work -------------------------------------------------------


def _untouched(call, error: type[Exception], fragment: str) -> None:
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant="best", delta_slack=SLACK)
    with pytest.raises(error, match=fragment):
        call(ledger, SeededSource(rng))
    assert not ledger.events and rng.bit_generator.state == state


def test_bad_input_is_refused_before_any_work() -> None:
    data = coded()

    def fit(params: dict[str, Any], buckets: Any = BUCKETS):
        def call(ledger: Ledger, source: SeededSource) -> None:
            model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(**{"epsilon": 1.0, **params}))
            model.fit(data, split=halves(len(data)), domain=DOMAIN, ledger=ledger,
                      source=source, buckets=buckets)
        return call

    _untouched(fit({}, {"zz": [0]}), SchemaError, r"buckets \(\['zz'\]\) must name attributes")
    _untouched(fit({}, {"d": [0, 0, 2, 2, 2]}), SchemaError, "must use every bucket")
    _untouched(fit({"epsilon": 2.0}), BudgetExceededError, "over the cap")
    _untouched(fit({"accountant": "basic"}), SpecError, r"accountant \('basic'\) must be the ledger's")
    _untouched(fit({"delta_slack": 1e-6}), SpecError, "delta_slack")
    with pytest.raises(SpecError, match=r"epsilon \(0\) must be a finite real number > 0"):
        PlausibleDeniabilityModelParams(epsilon=0)
    with pytest.raises(SpecError, match=r"split sizes \(1300 records"):
        split_dataset(data, sizes=SplitSizes(structure=500, parameters=500, seeds=300), domain=DOMAIN,
                      rng=np.random.default_rng(0))
    with pytest.raises(SpecError, match=r"seeds \(0\) must be an int >= 1"):
        SplitSizes(structure=1, parameters=1, seeds=0)
