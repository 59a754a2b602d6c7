"""Conditional-means acceptance criterion (Hod & Canetti 2024, Section 4.5.3): the exact and
resized measures, Algorithm 2, the resize parameters, the sensitivity of Proposition 7, the
ledger event, the noise scale, the modes, configuration errors and Table 2."""

from __future__ import annotations

import math
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privlab.mechanisms.acceptance import conditional_means
from privlab.mechanisms.acceptance.base import criterion_from_spec, criterion_kinds
from privlab.mechanisms.acceptance.conditional_means import (
    ConditionalMeanError,
    resize_sizes,
    resized_group_means,
)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter, read_records

CONTEXT = {"spec_sha256": "ab12", "data_sha256": "cd34"}
N_PAPER = 165_915

DOMAIN = Domain.from_columns([
    ColumnDomain(name="w", labels=("w0", "w1", "w2", "w3", "w4"), values=(1.0, 2.0, 4.0, 8.0, 12.0)),
    ColumnDomain(name="g", labels=("g0", "g1", "g2")),
    ColumnDomain(name="h", labels=("h0", "h1", "h2", "h3"), values=(0.0, 1.0, 2.0, 3.0)),
])
BOUNDS = (0.0, 10.0)  # w4 = 12 is clipped to 10


def _frame(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame({c.name: rng.integers(0, c.size, size=n) for c in DOMAIN})


def _criterion(**kw: object) -> ConditionalMeanError:
    base = {"name": "cm", "threshold": 1.0, "epsilon": 0.5, "target": "w", "target_bounds": BOUNDS,
            "by": ["g", "h"], "groups": {"h": [["h0", "h1"], [2, 3]]}, "resize_margin": 0.05}
    return ConditionalMeanError(**{**base, **kw})


def _brute_exact(r: pd.DataFrame, s: pd.DataFrame, by: dict[str, dict[int, int]], overall: bool) -> float:
    """Plain conditional means with pandas groupby (the reference)."""
    values = np.clip(DOMAIN["w"].value_array(), *BOUNDS)
    rv, sv = r.assign(x=values[r["w"]]), s.assign(x=values[s["w"]])
    worst = abs(rv.x.mean() - sv.x.mean()) if overall else 0.0
    for column, mapping in by.items():
        mr = rv.groupby(rv[column].map(mapping)).x.mean()
        ms = sv.groupby(sv[column].map(mapping)).x.mean()
        common = mr.index.intersection(ms.index)
        if len(common):
            worst = max(worst, float((mr[common] - ms[common]).abs().max()))
    return worst


def _brute_resized(groups: np.ndarray, values: np.ndarray, sizes: np.ndarray, order: np.ndarray,
                   fill: float) -> np.ndarray:
    """Algorithm 2 group by group (a record's priority is its position in ``order``)."""
    priority = np.empty(len(order), dtype=np.int64)
    priority[order] = np.arange(len(order))
    out = []
    for v, m in enumerate(sizes):
        idx = np.flatnonzero(groups == v)
        if len(idx) == m:
            total = values[idx].sum()
        elif len(idx) < m:
            total = values[idx].sum() + (m - len(idx)) * fill
        else:
            total = values[idx[np.argsort(priority[idx])[:m]]].sum()
        out.append(total / m)
    return np.array(out)


# --- the measures ------------------------------------------------------------------------------


def test_exact_error_by_hand() -> None:
    r = pd.DataFrame({"w": [0, 1, 2, 3], "g": [0, 0, 1, 1], "h": [0, 0, 0, 0]})  # x = 1, 2, 4, 8
    s = pd.DataFrame({"w": [1, 1, 4, 1], "g": [0, 0, 1, 2], "h": [0, 0, 0, 0]})  # x = 2, 2, 10, 2
    # overall 3.75 vs 4.0; g0: 1.5 vs 2 (0.5); g1: 6 vs 10 (4); g2 empty in R: skipped
    assert _criterion(groups={}).error(r, s, domain=DOMAIN) == pytest.approx(4.0)
    assert _criterion(by=[], groups={}).error(r, s, domain=DOMAIN) == pytest.approx(0.25)


@pytest.mark.parametrize("seed", range(5))
def test_exact_error_matches_pandas_groupby(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r, s = _frame(rng, 40), _frame(rng, 40)
    by = {"g": {0: 0, 1: 1, 2: 2}, "h": {0: 0, 1: 0, 2: 1, 3: 1}}
    assert _criterion().error(r, s, domain=DOMAIN) == pytest.approx(_brute_exact(r, s, by, True))
    assert _criterion(overall=False).error(r, s, domain=DOMAIN) == pytest.approx(_brute_exact(r, s, by, False))


def test_resize_sizes_by_hand() -> None:
    assert resize_sizes(np.array([100, 30, 0]), n=1000, margin=0.01).tolist() == [90, 20, 1]
    assert resize_sizes(np.array([100, 30, 0]), n=1000, margin=0.05).tolist() == [50, 1, 1]
    assert resize_sizes(np.array([7]), n=100, margin=0.0).tolist() == [7]


def test_resized_means_follow_algorithm_2() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, k = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        groups = rng.integers(0, k, size=n)
        values = rng.uniform(0, 10, size=n)
        sizes = rng.integers(1, 20, size=k)
        order = rng.permutation(n)
        np.testing.assert_allclose(
            resized_group_means(groups, values, sizes, order, fill=3.0),
            _brute_resized(groups, values, sizes, order, 3.0))
    # hand: group 0 = (4, 6) with m = 1 keeps record 1 (first in order); group 1 = (5) with m = 3
    # is padded with 2 × 1.0
    out = resized_group_means(np.array([0, 0, 1]), np.array([4.0, 6.0, 5.0]), np.array([1, 3]),
                              np.array([1, 2, 0]), fill=1.0)
    np.testing.assert_allclose(out, [6.0, 7.0 / 3])


def test_resized_mean_is_unbiased_when_subsampling() -> None:
    """m < n_v: a uniform random order samples without replacement, so the mean is unbiased."""
    rng = np.random.default_rng(4)
    values = rng.uniform(0, 10, size=40)
    groups = np.zeros(40, dtype=np.int64)
    estimates = [resized_group_means(groups, values, np.array([10]), rng.permutation(40), fill=0.0)[0]
                 for _ in range(4000)]
    # standard error of the average: sd(values)·√((40−10)/(39·10))/√4000 ≈ 0.013
    assert np.mean(estimates) == pytest.approx(values.mean(), abs=0.06)


def test_resized_error_with_large_sizes_equals_the_exact_error_plus_padding() -> None:
    """With margin 0 and R = S, every resize parameter equals the group count: Ê = E = 0."""
    rng = np.random.default_rng(5)
    r = _frame(rng, 50)
    c = _criterion(resize_margin=0.0)
    assert c.resized_error(r, r, domain=DOMAIN, rng=np.random.default_rng(0)) == pytest.approx(0.0, abs=1e-12)


# --- sensitivity -------------------------------------------------------------------------------


def test_sensitivity_by_hand() -> None:
    c = _criterion()
    # n = 100, margin 0.05 → 5; g counts (60, 30, 10) → (55, 25, 5); h groups (50, 50) → (45, 45)
    s = pd.DataFrame({"w": 0, "g": [0] * 60 + [1] * 30 + [2] * 10, "h": [0, 2] * 50})
    sizes = c.resize_parameters(s, domain=DOMAIN)
    assert [x.tolist() for x in sizes] == [[100], [55, 25, 5], [45, 45]]
    assert c.candidate_sensitivity(s, domain=DOMAIN) == pytest.approx(10 / 5)
    assert c.sensitivity(100) == 10.0  # candidate-free worst case, m̂ ≥ 1
    # a group missing from the candidate is skipped, not given m̂ = 1
    s2 = s.assign(g=np.where(s.g == 2, 1, s.g))
    assert c.candidate_sensitivity(s2, domain=DOMAIN) == pytest.approx(10 / 35)  # g: (60, 40, 0)
    assert _criterion(by=[], groups={}).candidate_sensitivity(s, domain=DOMAIN) == pytest.approx(10 / 100)


def test_sensitivity_holds_on_random_and_adversarial_neighbours() -> None:
    """|Ê(R) − Ê(R')| ≤ (U − L)/min m̂ for a fixed order, over random pairs and pairs whose
    replaced record is extreme (value L or U) and moves into or out of the smallest group,
    including group sizes at m̂ − 1, m̂ and m̂ + 1."""
    rng = np.random.default_rng(6)
    extremes = [(0, 2, 0), (4, 2, 3), (0, 0, 3), (4, 1, 0)]  # w = 1 (near L) or 12 → 10 (= U)
    worst = 0.0
    for trial in range(500):
        c = _criterion(resize_margin=(0.0, 0.02, 0.1)[trial % 3], fill=(0.0, 10.0, 5.0)[trial % 3])
        n = int(rng.integers(8, 40))
        r, s = _frame(rng, n), _frame(rng, n)
        if trial % 5 == 0:  # R's group sizes straddle the candidate's
            r = s.copy()
            r.loc[r.index[: int(rng.integers(0, 3))], "g"] = 2
        r2 = r.copy()
        r2.iloc[int(rng.integers(n))] = extremes[trial % 4] if trial % 2 else rng.integers(0, (5, 3, 4))
        delta = c.candidate_sensitivity(s, domain=DOMAIN)
        e1 = c.resized_error(r, s, domain=DOMAIN, rng=np.random.default_rng(trial))
        e2 = c.resized_error(r2, s, domain=DOMAIN, rng=np.random.default_rng(trial))
        assert abs(e1 - e2) <= delta + 1e-9
        worst = max(worst, abs(e1 - e2) / delta)
    assert worst > 0.5  # the pairs do reach the bound's order of magnitude


def test_sensitivity_is_attained_when_an_extreme_record_replaces_a_sampled_one() -> None:
    """One group, R = all L, m̂ = n: replacing a record by U moves the mean by (U − L)/m̂."""
    domain = Domain.from_columns([ColumnDomain(name="w", labels=("lo", "hi"), values=(0.0, 10.0)),
                                  ColumnDomain(name="g", labels=("g0",))])
    c = ConditionalMeanError(name="cm", threshold=1.0, epsilon=1.0, target="w", target_bounds=(0.0, 10.0),
                             by=["g"], resize_margin=0.0, overall=False)
    r = pd.DataFrame({"w": [0] * 20, "g": 0})
    r2 = r.copy()
    r2.loc[7, "w"] = 1
    e1 = c.resized_error(r, r, domain=domain, rng=np.random.default_rng(0))
    e2 = c.resized_error(r2, r, domain=domain, rng=np.random.default_rng(0))
    assert abs(e2 - e1) == pytest.approx(c.candidate_sensitivity(r, domain=domain)) == pytest.approx(0.5)


# --- release: ledger, noise, modes -------------------------------------------------------------


def test_ledger_event_records_epsilon_sensitivity_and_scale() -> None:
    rng = np.random.default_rng(7)
    r, s = _frame(rng, 200), _frame(rng, 200)
    c = _criterion(epsilon=0.17)
    ledger = Ledger(epsilon_cap=1.0)
    result = c.release(r, s, domain=DOMAIN, source=SeededSource(np.random.default_rng(1)), ledger=ledger)
    (event,) = ledger.events
    # Δ by hand (Proposition 7): (U − L)/min m̂, m̂ = max{1, ⌊q(S) − 0.05·200⌋} over g's codes and h's
    # two groups {h0, h1}, {h2, h3} present in S, and m̂ = n for the ⊥ term.
    counts = [*np.bincount(s["g"], minlength=3), *np.bincount(s["h"] // 2, minlength=2)]
    delta = (BOUNDS[1] - BOUNDS[0]) / min([max(1, math.floor(q - 0.05 * 200)) for q in counts if q > 0] + [200])
    assert delta == pytest.approx(c.candidate_sensitivity(s, domain=DOMAIN))
    assert (event.name, event.mechanism, event.epsilon) == ("acceptance:cm", "laplace", 0.17)
    assert event.sensitivity == pytest.approx(delta) and event.noise_scale == pytest.approx(delta / 0.17)
    assert (result.sensitivity, result.noise_scale, result.bounds) == (event.sensitivity, event.noise_scale, BOUNDS)
    details = dict(result.details)
    assert details["min_resize"] == pytest.approx(10.0 / delta)
    assert details["exact_error"] == pytest.approx(c.error(r, s, domain=DOMAIN))
    (plan,) = c.planned_events(200)  # the candidate-free worst case U − L bounds the charged Δ
    assert (plan.name, plan.epsilon) == (event.name, event.epsilon) and plan.sensitivity >= event.sensitivity


@pytest.mark.statistical
def test_released_noise_has_the_stated_laplace_scale() -> None:
    rng = np.random.default_rng(8)
    r, s = _frame(rng, 60), _frame(rng, 60)
    c = _criterion(epsilon=1.0)
    source = SeededSource(np.random.default_rng(9))
    noise = []
    for _ in range(1200):
        result = c.release(r, s, domain=DOMAIN, source=source, ledger=Ledger(epsilon_cap=None))
        noise.append(result.dp_value - result.true_value)
    # The scale derived here, not read from the code: Proposition 7 with Proposition 3,
    # Δ = (U − L)/min m̂ over the groups present in S, m̂ = max{1, ⌊q(S) − 0.05·n⌋}; the ⊥ term has m̂ = n.
    counts = [*np.bincount(s["g"], minlength=3), *np.bincount(s["h"] // 2, minlength=2)]
    sizes = [max(1, math.floor(q - 0.05 * 60)) for q in counts if q > 0] + [60]
    scale = (BOUNDS[1] - BOUNDS[0]) / min(sizes) / 1.0
    assert scale == pytest.approx(c.candidate_sensitivity(s, domain=DOMAIN) / 1.0, rel=1e-12)
    noise = np.array(noise)
    # E|X| = b, standard error b/√1200 ≈ 2.9%; tolerance ≈ 4 standard errors; plus a KS test.
    assert abs(np.mean(np.abs(noise)) / scale - 1) < 0.12
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3


def test_research_mode_attaches_the_true_value_and_release_mode_does_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    r, s = _frame(rng, 50), _frame(rng, 50)
    c = _criterion()
    research = c.release(r, s, domain=DOMAIN, source=SeededSource(np.random.default_rng(1)),
                         ledger=Ledger(epsilon_cap=None))
    assert research.true_value is not None and "exact_error" in dict(research.details)
    path = tmp_path / "t.bin"
    with TranscriptWriter(path, context=CONTEXT) as writer:
        released = c.release(r, s, domain=DOMAIN, source=SecureSource(writer), ledger=Ledger(epsilon_cap=None))
    assert released.true_value is None
    assert set(dict(released.details)) == {"min_resize"}
    assert released.mechanism == "laplace_lattice"
    assert [rec.op for rec in read_records(path)] == ["seed", "laplace"]  # the resize order, then the noise


# --- configuration errors ----------------------------------------------------------------------


@pytest.mark.parametrize(("change", "key"), [
    ({"epsilon": 0}, "epsilon"),
    ({"target_bounds": [5, 5]}, "target_bounds"),
    ({"target_bounds": [0, math.inf]}, "target_bounds"),
    ({"target_bounds": [0]}, "target_bounds"),
    ({"target_bounds": "0,10"}, "target_bounds"),
    ({"by": ["g", "g"]}, "by"),
    ({"by": ["w"]}, "by"),
    ({"by": [], "overall": False}, "by"),
    ({"resize_margin": 1.0}, "resize_margin"),
    ({"resize_margin": -0.1}, "resize_margin"),
    ({"fill": 11.0}, "fill"),
    ({"groups": {"zz": [[0]]}}, "groups"),
    ({"groups": {"h": [[]]}}, "groups"),
    ({"groups": {"h": [[0.5]]}}, "groups"),
    ({"bounds": [0, 10]}, "bounds"),
])
def test_bad_configs_raise_spec_errors_naming_the_key(change: dict[str, object], key: str) -> None:
    spec = {"kind": "conditional_mean", "name": "cm", "threshold": 1.0, "epsilon": 0.5, "target": "w",
            "target_bounds": [0, 10], "by": ["g", "h"], "resize_margin": 0.01, **change}
    with pytest.raises(SpecError, match=key):
        criterion_from_spec(spec, where="acceptance[2]")


@pytest.mark.parametrize(("change", "message"), [
    ({"target": "zz"}, "target names column 'zz'"),
    ({"target": "g", "by": ["h"], "groups": {}}, "target column 'g' is nominal"),
    ({"by": ["g", "zz"], "groups": {}}, "by names column 'zz'"),
    ({"groups": {"h": [["h0", "h9"], [2, 3]]}}, r"groups\['h'\] label 'h9'"),
    ({"groups": {"h": [[0, 1], [2, 7]]}}, r"groups\['h'\] code 7"),
    ({"groups": {"h": [[0, 1], [1, 2, 3]]}}, "in two groups"),
    ({"groups": {"h": [[0, 1], [2]]}}, "missing h3"),
])
def test_domain_mismatches_raise_spec_errors_naming_the_key(change: dict[str, object], message: str) -> None:
    rng = np.random.default_rng(0)
    r = _frame(rng, 10)
    with pytest.raises(SpecError, match=message):
        _criterion(**change).error(r, r, domain=DOMAIN)


# --- Table 2 -----------------------------------------------------------------------------------


def test_table2_conditional_mean_rows() -> None:
    """Δ = (U − L)/min m̂ and σ = √2·Δ/ε. Table 2 does not print min m̂ (it comes from the
    candidate), so the test recovers it from σ and checks that one value reproduces both
    printed digits of each row; parity and gestation week share their smallest group
    (mother_age ≤ 24 is the only common group-by column) and indeed imply the same m̂."""

    def row(bounds: tuple[float, float], eps: float, m: int) -> tuple[float, float]:
        c = ConditionalMeanError(name="t", threshold=1.0, epsilon=eps, target="w", target_bounds=bounds,
                                 by=[], resize_margin=0.01)
        delta = (c.bounds[1] - c.bounds[0]) / m
        return delta, math.sqrt(2) * delta / eps

    def implied_m(bounds: tuple[float, float], eps: float, sigma: float) -> float:
        return math.sqrt(2) * (bounds[1] - bounds[0]) / (eps * sigma)

    m_parity = implied_m((1, 11), 0.01, 0.044)
    m_gestation = implied_m((28, 43), 0.02, 0.033)
    assert m_parity == pytest.approx(m_gestation, rel=1e-9)  # 32,141 in both rows
    m_young = round(m_parity)
    delta, sigma = row((1, 11), 0.01, m_young)
    assert delta < 0.001 and round(sigma, 3) == 0.044
    delta, sigma = row((28, 43), 0.02, m_young)
    assert delta < 0.001 and round(sigma, 3) == 0.033
    m_weight = round(implied_m((1400, 4600), 0.17, 3.821))  # 6,967: a small group (gestation < 37)
    delta, sigma = row((1400, 4600), 0.17, m_weight)
    assert (round(delta, 3), round(sigma, 3)) == (0.459, 3.821)
    # m̂ = q(S) − n·T_abs: the smallest groups held m̂ + 1,659 candidate records
    assert resize_sizes(np.array([m_young + 1660]), n=N_PAPER, margin=0.01).tolist() == [m_young]


# --- registry, budget, inputs ------------------------------------------------------------------


def test_the_docstring_spec_builds_and_resolves_against_a_births_domain() -> None:
    """The TOML example of the module docstring, on Table 1's birth columns."""
    doc = conditional_means.__doc__ or ""
    example = doc[doc.index("[[acceptance]]"): doc.index("``groups`` maps")]
    table = tomllib.loads(textwrap.dedent(example))["acceptance"][0]
    assert "conditional_mean" in criterion_kinds()
    c = criterion_from_spec(table, where="acceptance[3]")
    assert isinstance(c, ConditionalMeanError) and c.bounds == (1400.0, 4600.0)
    births = Domain.from_columns([
        ColumnDomain(name="birth_weight", labels=("<1500", "1500-2999", "3000+"), values=(1500.0, 2250.0, 3500.0)),
        ColumnDomain(name="birth_sex", labels=("M", "F")),
        ColumnDomain(name="parity", labels=("1", "2-3", "4-6", "7-10", "10<")),
        ColumnDomain(name="gestation_week", labels=("<29", "29-31", "32-33", "34-36", "37-41", "41<")),
        ColumnDomain(name="mother_age", labels=("<18", "18-19", "20-24", "25-29", "30-34", "35-36", "37-39",
                                                "40-42", "43-44", "44<")),
    ])
    terms = {t.column: t.group_of_code.tolist() for t in c.terms(births)}
    assert terms == {None: [0], "birth_sex": [0, 1], "parity": [0, 1, 2, 2, 2],
                     "gestation_week": [0, 0, 0, 0, 1, 1], "mother_age": [0, 0, 0, 1, 2, 3, 3, 3, 3, 3]}
