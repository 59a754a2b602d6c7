"""PrivBayes and its building blocks: sensitivities, scores, candidates, budget, model, sampling.

Tiers (CONVENTIONS §5): the score sensitivities are checked against a brute-force worst case
over every dataset and every replace-one neighbour of small ``n``; exact accounting (the split,
the Laplace scale ``2/ε_t`` and the exponential-mechanism scale ``2Δ/ε_s`` of every step);
agreement with scikit-learn's mutual information; seeded statistical checks marked
``statistical`` (a known network is recovered at large ε, sampling reproduces a known model,
PrivBayes on the public NVSS sample keeps the 1-way marginals). Every random quantity is a
deterministic function of a fixed seed, and tolerances are several times the spread they guard.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import mutual_info_score

from privlab.mechanisms.synthesizers.independent import IndependentMarginals, IndependentMarginalsParams
from privlab.mechanisms.synthesizers.network_model import BayesianNetworkModel
from privlab.mechanisms.synthesizers.privbayes import PrivBayes, PrivBayesParams, maximal_parent_sets
from privlab.mechanisms.synthesizers.privbayes_scores import (
    mutual_information,
    mutual_information_sensitivity,
    r_score,
    r_score_sensitivity,
)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

BIRTHS_SIZES = {"birth_month": 12, "mother_age": 9, "parity": 5, "gestation_week": 6, "is_female": 2,
                "birth_weight": 32}


def _domain(sizes: dict[str, int]) -> Domain:
    return Domain(tuple(ColumnDomain(name=c, labels=tuple(f"{c}{i}" for i in range(k))) for c, k in sizes.items()))


def _frame(domain: Domain, codes: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({name: codes[j] for j, name in enumerate(domain.names)})


def _source(seed: int) -> SeededSource:
    return SeededSource(np.random.default_rng(seed))


def _peaked(rows: int, k: int, peak: float) -> np.ndarray:
    """Row r puts ``peak`` on code ``(7r + 1) mod k`` and spreads the rest evenly."""
    table = np.full((rows, k), (1.0 - peak) / (k - 1))
    table[np.arange(rows), (7 * np.arange(rows) + 1) % k] = peak
    return table


CHAIN_DOMAIN = _domain({"a": 4, "b": 3, "c": 5, "d": 4})
CHAIN = BayesianNetworkModel(
    domain=CHAIN_DOMAIN,
    network=(("a", ()), ("b", ("a",)), ("c", ("b",)), ("d", ("c",))),
    conditionals=(np.array([[0.1, 0.2, 0.3, 0.4]]), _peaked(4, 3, 0.8), _peaked(3, 5, 0.7), _peaked(5, 4, 0.75)),
)


# --- sensitivities -------------------------------------------------------------------------


def _worst_changes(n: int, rows: int, cols: int) -> tuple[float, float]:
    """max |ΔI| and max |ΔR| over every dataset of n records on a rows × cols table and every
    replace-one neighbour (one record moved from one cell to another)."""
    cells = rows * cols
    tables = np.array([np.bincount(c, minlength=cells) for c in
                       itertools.combinations_with_replacement(range(cells), n)])
    index = {t.tobytes(): i for i, t in enumerate(tables)}
    mi = np.array([mutual_information(t.reshape(rows, cols)) for t in tables])
    r = np.array([r_score(t.reshape(rows, cols)) for t in tables])
    worst_mi = worst_r = 0.0
    for src, dst in itertools.permutations(range(cells), 2):
        has = np.nonzero(tables[:, src] > 0)[0]
        moved = tables[has].copy()
        moved[:, src] -= 1
        moved[:, dst] += 1
        other = np.array([index[t.tobytes()] for t in moved])
        worst_mi = max(worst_mi, float(np.abs(mi[other] - mi[has]).max()))
        worst_r = max(worst_r, float(np.abs(r[other] - r[has]).max()))
    return worst_mi, worst_r


@pytest.mark.parametrize(("n", "rows", "cols", "tight"), [(5, 3, 3, True), (4, 3, 3, False), (5, 2, 3, False),
                                                          (6, 2, 2, False)])
def test_score_sensitivities_bound_the_brute_force_worst_case(n: int, rows: int, cols: int, tight: bool) -> None:
    worst_mi, worst_r = _worst_changes(n, rows, cols)
    bound = mutual_information_sensitivity(n)
    assert worst_mi <= bound * (1 + 1e-12)
    if tight:  # odd n, both domains of size >= 3: the bound is attained
        assert worst_mi == pytest.approx(bound, rel=1e-12)
    else:
        assert worst_mi < bound
    assert 0 < worst_r <= r_score_sensitivity(n)


def test_mutual_information_sensitivity_formula() -> None:
    def g(t: float) -> float:  # f(t+1) − f(t), f(t) = t ln t
        return (t + 1) * math.log(t + 1) - (t * math.log(t) if t > 0 else 0.0)

    for n in (2, 3, 10, 1001, 160_000):
        expected = (2 / n) * math.log((n + 1) / 2) + ((n - 1) / n) * math.log((n + 1) / (n - 1))
        assert mutual_information_sensitivity(n) == pytest.approx(expected, rel=1e-12)
        assert mutual_information_sensitivity(n) == pytest.approx(2 * g((n - 1) / 2) / n, rel=1e-12)
    n = 160_000  # ≈ 2 ln(n/2)/n + 2/n for large n
    assert mutual_information_sensitivity(n) == pytest.approx(2 * math.log(n / 2) / n + 2 / n, rel=1e-4)
    assert r_score_sensitivity(7) == 3 / 7
    for bad, error in ((1, ValueError), (0, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(error, match="n"):
            mutual_information_sensitivity(bad)  # type: ignore[arg-type]


def test_mutual_information_agrees_with_scikit_learn() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, 5000)
    y = (x + rng.integers(0, 3, 5000)) % 7
    counts = np.zeros((7, 6))
    np.add.at(counts, (y, x), 1)
    assert mutual_information(counts) == pytest.approx(mutual_info_score(x, y), rel=1e-10)
    assert mutual_information(np.outer([1, 2, 3], [4, 5])) == pytest.approx(0.0, abs=1e-12)
    assert mutual_information(np.zeros((2, 3))) == 0.0
    # Perfect dependence: I = H(X); R = 1 − Σ p² for the uniform 2 × 2 diagonal = 1/2.
    assert mutual_information(np.diag([5.0, 5.0])) == pytest.approx(math.log(2), rel=1e-12)
    assert r_score(np.diag([5.0, 5.0])) == pytest.approx(0.5, rel=1e-12)
    assert r_score(np.outer([1, 2, 3], [4, 5])) == pytest.approx(0.0, abs=1e-12)


# --- candidates ----------------------------------------------------------------------------


def test_maximal_parent_sets_match_brute_force() -> None:
    rng = np.random.default_rng(8)
    for _ in range(60):
        sizes = [int(s) for s in rng.integers(1, 9, size=int(rng.integers(0, 7)))]
        cap = float(rng.choice([0.5, 1, 3, 7, 20, 64, 300, 5000]))
        fits = [s for r in range(len(sizes) + 1) for s in itertools.combinations(range(len(sizes)), r)
                if math.prod(sizes[i] for i in s) <= cap]
        expected = sorted(s for s in fits if not any(set(s) < set(t) for t in fits))
        assert sorted(maximal_parent_sets(sizes, cap)) == expected, (sizes, cap)


def test_theta_candidates_are_the_maximal_theta_useful_sets() -> None:
    pb = PrivBayes(PrivBayesParams(epsilon_split=0.3, theta=4.0))
    sizes = BIRTHS_SIZES
    names = list(sizes)
    available = {j: sizes[names[j]] for j in (0, 1, 3, 5)}  # month, age, gestation, weight
    n, table_epsilon = 160_000, 0.7 * 4.0 / 6
    max_cells = n * table_epsilon / (2 * 4.0)  # n·ε_t/(2θ) ≥ |dom(X, Π)|
    assert pb.theta_max_cells(n, table_epsilon) == pytest.approx(max_cells, rel=1e-15)
    child = sizes["is_female"]
    candidates = pb.candidate_parent_sets(child, available, n=n, table_epsilon=table_epsilon)
    assert candidates and all(set(c) <= set(available) for c in candidates)
    for parents in candidates:
        cells = child * math.prod(available[j] for j in parents)
        assert n * table_epsilon / (2 * cells) >= 4.0  # θ-useful
        for extra in set(available) - set(parents):  # maximal
            assert n * table_epsilon / (2 * cells * available[extra]) < 4.0
    # When not even the attribute alone is θ-useful, its only candidate is the empty set.
    assert pb.candidate_parent_sets(child, available, n=10, table_epsilon=0.1) == [()]


def test_degree_candidates_have_min_degree_parents_and_fit_the_cell_cap() -> None:
    pb = PrivBayes(PrivBayesParams(epsilon_split=0.3, degree=3))
    available = {0: 12, 1: 9, 3: 6, 5: 32}
    got = pb.candidate_parent_sets(2, available, n=1000, table_epsilon=1.0)
    assert got == list(itertools.combinations([0, 1, 3, 5], 3))
    assert pb.candidate_parent_sets(2, {4: 2}, n=1000, table_epsilon=1.0) == [(4,)]
    # With a small cell cap, sets that do not fit are dropped, then smaller sizes are used.
    small = PrivBayes(PrivBayesParams(epsilon_split=0.3, degree=3, max_table_cells=2 * 12 * 9))
    assert small.candidate_parent_sets(2, available, n=1000, table_epsilon=1.0) == [(0, 1), (0, 3), (1, 3)]
    tiny = PrivBayes(PrivBayesParams(epsilon_split=0.3, degree=3, max_table_cells=5))
    assert tiny.candidate_parent_sets(2, available, n=1000, table_epsilon=1.0) == [()]


# --- budget and accounting -----------------------------------------------------------------


@pytest.mark.parametrize("score", ["mi", "r"])
@pytest.mark.parametrize(("epsilon", "split"), [(4.0, 0.1), (4.0, 0.25), (0.9, 0.5), (9.98, 0.7), (1e-3, 0.3)])
def test_budget_split_and_noise_scales(epsilon: float, split: float, score: str) -> None:
    domain = _domain(BIRTHS_SIZES)
    d, n = len(domain), 160_000
    pb = PrivBayes(PrivBayesParams(epsilon_split=split, degree=2, score=score))
    events = pb.planned_events(epsilon, domain, n)
    structure, tables = events[: d - 1], events[d - 1 :]
    assert [e.name for e in structure] == [f"privbayes/structure/{i}" for i in range(2, d + 1)]
    assert [e.name for e in tables] == [f"privbayes/table/{i}" for i in range(1, d + 1)]
    # Hand-derived, not read from the implementation: 2·g((n−1)/2)/n with g(t) = (t+1)ln(t+1) − t ln t
    # = ln(t+1) + t·ln(1 + 1/t) (the sensitivity lemma for I, exact by brute force for odd n in
    # test_score_sensitivities_bound_the_brute_force_worst_case), or 3/n for R.
    t = (n - 1) / 2
    delta = 2 * (math.log1p(t) + t * math.log1p(1 / t)) / n if score == "mi" else 3 / n
    for e in structure:
        assert e.mechanism == "exponential" and e.sensitivity == pytest.approx(delta, rel=1e-12)
        assert e.epsilon == pytest.approx(epsilon * split / (d - 1), rel=1e-12)
        assert e.noise_scale == pytest.approx(2 * delta / e.epsilon, rel=1e-12)
    for e in tables:
        assert e.mechanism == "laplace" and e.sensitivity == 2.0
        assert e.epsilon == pytest.approx(epsilon * (1 - split) / d, rel=1e-12)
        assert e.noise_scale == 2.0 / e.epsilon
    assert math.fsum(e.epsilon for e in events) == epsilon
    assert Ledger(epsilon_cap=epsilon).check_plan(events).epsilon == epsilon


def test_fit_records_the_planned_scales_on_births_like_data() -> None:
    domain = _domain(BIRTHS_SIZES)
    codes = np.stack([np.random.default_rng(j).integers(0, k, 3000) for j, k in enumerate(domain.sizes)])
    ledger = Ledger(epsilon_cap=4.0)
    pb = PrivBayes(PrivBayesParams(epsilon_split=0.25, theta=4.0))
    pb.fit(_frame(domain, codes), domain=domain, epsilon=4.0, ledger=ledger, source=_source(1))
    assert list(ledger.events) == pb.planned_events(4.0, domain, 3000)
    assert [e.noise_scale for e in ledger.events[5:]] == [2.0 / e.epsilon for e in ledger.events[5:]]
    assert ledger.total().epsilon == 4.0
    # Each learned table has the shape its (column, parents) pair implies.
    for (child, parents), table in zip(pb.network_, pb.model_.conditionals, strict=True):
        assert table.shape == (domain.size_of(parents), domain[child].size)


def test_single_column_spends_everything_on_its_table() -> None:
    domain = _domain({"x": 7})
    data = _frame(domain, np.random.default_rng(0).integers(0, 7, (1, 400)))
    ledger = Ledger(epsilon_cap=1.5)
    pb = PrivBayes(PrivBayesParams(epsilon_split=0.5, degree=2)).fit(
        data, domain=domain, epsilon=1.5, ledger=ledger, source=_source(0))
    (event,) = ledger.events
    assert (event.name, event.epsilon, event.noise_scale) == ("privbayes/table/1", 1.5, 2 / 1.5)
    assert pb.network_ == (("x", ()),)


def test_domains_and_sizes_it_cannot_handle_are_refused() -> None:
    domain = _domain({"x": 3, "y": 4})
    pb = PrivBayes(PrivBayesParams(epsilon_split=0.5, degree=1))
    with pytest.raises(SchemaError, match="at least 2 records"):
        pb.planned_events(1.0, domain, 1)
    with pytest.raises(SchemaError, match="empty"):
        pb.planned_events(1.0, domain, 0)
    narrow = PrivBayes(PrivBayesParams(epsilon_split=0.5, degree=1, max_table_cells=3))
    with pytest.raises(SchemaError, match=r"column\(s\) y have more codes than max_table_cells \(3\)"):
        narrow.planned_events(1.0, domain, 100)
    with pytest.raises(SpecError, match="exactly one set"):
        PrivBayesParams(epsilon_split=0.5)


def test_candidate_subsampling_keeps_the_plan_and_is_reproducible() -> None:
    codes = CHAIN.sample_codes(800, np.random.default_rng(3))
    data = _frame(CHAIN_DOMAIN, codes)
    nets = []
    for _ in range(2):
        ledger = Ledger(epsilon_cap=2.0)
        pb = PrivBayes(PrivBayesParams(epsilon_split=0.5, degree=1, max_candidates=1))
        pb.fit(data, domain=CHAIN_DOMAIN, epsilon=2.0, ledger=ledger, source=_source(9))
        assert list(ledger.events) == pb.planned_events(2.0, CHAIN_DOMAIN, 800)
        nets.append(pb.network_)
    assert nets[0] == nets[1]
    assert all(len(parents) == (0 if i == 0 else 1) for i, (_, parents) in enumerate(nets[0]))


def test_first_attribute_is_drawn_from_the_source_and_covers_every_column() -> None:
    data = _frame(CHAIN_DOMAIN, CHAIN.sample_codes(300, np.random.default_rng(4)))
    firsts = set()
    for seed in range(40):
        pb = PrivBayes(PrivBayesParams(epsilon_split=0.5, degree=2)).fit(
            data, domain=CHAIN_DOMAIN, epsilon=1.0, ledger=Ledger(epsilon_cap=None), source=_source(seed))
        assert pb.network_[0][1] == ()
        firsts.add(pb.network_[0][0])
    assert firsts == set(CHAIN_DOMAIN.names)


# --- the model and sampling ----------------------------------------------------------------


def test_model_validation_names_the_problem() -> None:
    tables = CHAIN.conditionals
    with pytest.raises(SchemaError, match=r"parent \('c'\) of 'b' must be a column placed earlier"):
        BayesianNetworkModel(domain=CHAIN_DOMAIN, network=(("a", ()), ("b", ("c",)), ("c", ("b",)), ("d", ("c",))),
                             conditionals=tables)
    with pytest.raises(SchemaError, match="must cover every column; missing: d"):
        BayesianNetworkModel(domain=CHAIN_DOMAIN, network=(("a", ()), ("b", ("a",)), ("c", ("b",))),
                             conditionals=tables[:3])
    with pytest.raises(SchemaError, match=r"conditional of 'b' has shape \(3, 3\), expected \(4, 3\)"):
        BayesianNetworkModel(domain=CHAIN_DOMAIN, network=CHAIN.network,
                             conditionals=(tables[0], tables[1][:3], tables[2], tables[3]))
    with pytest.raises(SchemaError, match="must sum to 1"):
        BayesianNetworkModel(domain=CHAIN_DOMAIN, network=CHAIN.network,
                             conditionals=(tables[0] * 0.5, *tables[1:]))
    with pytest.raises(SchemaError, match="must be a tuple of column names"):
        BayesianNetworkModel(domain=CHAIN_DOMAIN, network=(("a", "b"), *CHAIN.network[1:]), conditionals=tables)
    with pytest.raises(SchemaError, match="must be one of a, b, c, d"):
        BayesianNetworkModel(domain=CHAIN_DOMAIN, network=(("z", ()), *CHAIN.network[1:]), conditionals=tables)
    assert not CHAIN.conditionals[1].flags.writeable


def test_probabilities_is_the_product_of_the_conditionals() -> None:
    joint = CHAIN.probabilities()
    assert joint.shape == CHAIN_DOMAIN.sizes and joint.sum() == pytest.approx(1.0, abs=1e-12)
    a, b, c, d = 2, 1, 4, 3
    tables = CHAIN.conditionals
    assert joint[a, b, c, d] == pytest.approx(tables[0][0, a] * tables[1][a, b] * tables[2][b, c] * tables[3][c, d])
    # A child listed before its parent's column index (c | d with d earlier in the network).
    reversed_model = BayesianNetworkModel(
        domain=CHAIN_DOMAIN, network=(("d", ()), ("c", ("d",)), ("b", ("c",)), ("a", ("b",))),
        conditionals=_conditionals_of(joint, [("d", ()), ("c", ("d",)), ("b", ("c",)), ("a", ("b",))]),
    )
    np.testing.assert_allclose(reversed_model.probabilities(), joint, atol=1e-12)


def _conditionals_of(joint: np.ndarray, network: list[tuple[str, tuple[str, ...]]]) -> tuple[np.ndarray, ...]:
    """Pr[child | parents] tables of ``joint`` over CHAIN_DOMAIN, in the model's layout."""
    names = CHAIN_DOMAIN.names
    out = []
    for child, parents in network:
        axes = [names.index(p) for p in parents] + [names.index(child)]
        other = tuple(i for i in range(len(names)) if i not in axes)
        marginal = np.transpose(joint.sum(axis=other), np.argsort(np.argsort(axes)))
        marginal = marginal.reshape(-1, CHAIN_DOMAIN[child].size)
        out.append(marginal / marginal.sum(axis=1, keepdims=True))
    return tuple(out)


@pytest.mark.statistical
def test_sampling_reproduces_a_known_model() -> None:
    n = 200_000
    codes = CHAIN.sample_codes(n, np.random.default_rng(12))
    observed = np.zeros(CHAIN_DOMAIN.sizes)
    np.add.at(observed, tuple(codes), 1)
    expected = CHAIN.probabilities() * n
    assert expected.min() > 5  # every cell has enough mass for the chi-square approximation
    p_value = stats.chisquare(observed.ravel(), expected.ravel()).pvalue
    assert p_value > 1e-6
    # Codes of zero probability are never drawn, whatever the uniform.
    sparse = BayesianNetworkModel(
        domain=CHAIN_DOMAIN, network=CHAIN.network,
        conditionals=(np.array([[0.0, 0.5, 0.0, 0.5]]), np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]),
                      CHAIN.conditionals[2], np.array([[0, 0, 0, 1.0]] * 5)),
    )
    drawn = sparse.sample_codes(50_000, np.random.default_rng(1))
    assert set(np.unique(drawn[0])) == {1, 3}
    assert np.all(drawn[1] == np.where(drawn[0] == 1, 1, 0))
    assert np.all(drawn[3] == 3)


@pytest.mark.statistical
def test_large_epsilon_recovers_a_known_network_and_its_conditionals() -> None:
    n = 20_000
    codes = CHAIN.sample_codes(n, np.random.default_rng(1))
    data = _frame(CHAIN_DOMAIN, codes)
    truth = CHAIN.probabilities()
    chain_edges = {frozenset("ab"), frozenset("bc"), frozenset("cd")}
    for seed in range(4):
        pb = PrivBayes(PrivBayesParams(epsilon_split=0.5, degree=1)).fit(
            data, domain=CHAIN_DOMAIN, epsilon=50.0, ledger=Ledger(epsilon_cap=None), source=_source(seed))
        # Greedy MI selection builds the maximum-weight spanning tree: the chain's skeleton,
        # from whichever root was drawn (edge directions follow the selection order).
        assert {frozenset((child, parent)) for child, parents in pb.network_ for parent in parents} == chain_edges
        # Each learned conditional matches the truth within 6 binomial sds plus 10 noise scales.
        true_tables = _conditionals_of(truth, list(pb.network_))
        table_scale = 2.0 / (50.0 * 0.5 / 4)
        for (child, parents), learned, true in zip(pb.network_, pb.model_.conditionals, true_tables, strict=True):
            rows = n * _conditionals_of(truth, [(parents[0], ())])[0][0] if parents else np.array([n])
            tolerance = 6 * np.sqrt(true * (1 - true) / rows[:, None]) + 10 * table_scale / rows[:, None]
            assert np.all(np.abs(learned - true) <= tolerance), (child, parents)
        # The joint is as close to the truth as the data's own sampling error allows (≈ 0.016).
        assert 0.5 * np.abs(pb.model_.probabilities() - truth).sum() < 0.04


# --- the public NVSS stand-in --------------------------------------------------------------


def _nvss_10k(path: Path) -> tuple[pd.DataFrame, Domain]:
    raw = pd.read_csv(path)
    edges = {"mother_age": [18, 20, 25, 30, 35, 40, 43, 45], "parity": [2, 3, 4, 7, 11],
             "gestation_week": [29, 32, 34, 37, 42], "birth_weight": list(range(1500, 4600, 250))}
    columns = {"birth_month": pd.to_datetime(raw["date_of_birth"]).dt.month.to_numpy() - 1}
    columns |= {c: np.digitize(raw[c].to_numpy(), e) for c, e in edges.items()}
    columns["is_female"] = raw["is_female"].astype("int64").to_numpy()
    sizes = {"birth_month": 12, **{c: len(e) + 1 for c, e in edges.items()}, "is_female": 2}
    return pd.DataFrame(columns).astype("int64"), _domain(sizes)


@pytest.mark.statistical
def test_nvss_sample_keeps_one_way_marginals_at_epsilon_4(nvss_10k: Path) -> None:
    data, domain = _nvss_10k(nvss_10k)  # the fixture skips with a reason if absent (an error under CI=true)
    ledger = Ledger(epsilon_cap=4.0)
    pb = PrivBayes(PrivBayesParams(epsilon_split=0.5, theta=4.0)).fit(
        data, domain=domain, epsilon=4.0, ledger=ledger, source=_source(2))
    assert ledger.total().epsilon == 4.0
    synthetic = pb.sample(len(data), rng=np.random.default_rng(3))
    for column in domain:
        real = np.bincount(data[column.name], minlength=column.size) / len(data)
        fake = np.bincount(synthetic[column.name], minlength=column.size) / len(synthetic)
        # Ten seeds gave at most 0.03; sampling alone accounts for about 0.015.
        assert 0.5 * np.abs(real - fake).sum() < 0.06, column.name
    # The strongest dependence (weight on gestation) survives; independent marginals lose it.
    real_corr = np.corrcoef(data["gestation_week"], data["birth_weight"])[0, 1]
    assert abs(np.corrcoef(synthetic["gestation_week"], synthetic["birth_weight"])[0, 1] - real_corr) < 0.15
    baseline = IndependentMarginals(IndependentMarginalsParams()).fit(
        data, domain=domain, epsilon=4.0, ledger=Ledger(epsilon_cap=4.0), source=_source(2))
    independent = baseline.sample(len(data), rng=np.random.default_rng(3))
    assert abs(np.corrcoef(independent["gestation_week"], independent["birth_weight"])[0, 1]) < 0.05 < real_corr
