"""Tests of the faithfulness acceptance criterion (Hod & Canetti 2024, Sections 3.5.1, 4.5.5).

* The class-level maximum flow equals a brute-force row-level maximum bipartite matching
  (scipy's Hopcroft-Karp on the explicit row graph, built with a cost rule written here
  independently from the library) on many small random instances and spec variants.
* The cost rule of the paper, including the mother_age bin that has 37 in its interior.
* Sensitivity 1/n: the flow changes by at most one when one private row is replaced, on random
  and adversarial replacements (and the bound is attained).
* Ledger events and Laplace scale in research and release mode; ``true_value`` only in research.
* Spec errors name the offending key, column or label.
* The class graph has at most ``#S-classes × Σ_{i≤k} C(F, i)·2^i`` edges.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from scipy.sparse.csgraph import maximum_bipartite_matching

from privlab.mechanisms.acceptance.base import criterion_from_spec, criterion_kinds
from privlab.mechanisms.acceptance.faithfulness import FaithfulnessCriterion, bin_interval, value_in_interior
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter, read_records

CONTEXT = {"spec_sha256": "ab12", "data_sha256": "cd34"}


def _column(name: str, labels: Sequence[str], *, numeric: bool = True) -> ColumnDomain:
    values = tuple(float(i) for i in range(len(labels))) if numeric else None
    return ColumnDomain(name=name, labels=tuple(labels), values=values)


# --- the births domain of the paper (Section 4.7 binnings) ----------------------------------

AGE_35_39 = ("<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<")
AGE_37_39 = ("<18", "18-19", "20-24", "25-29", "30-34", "35-36", "37-39", "40-42", "43-44", "44<")
WEIGHT = ("<1500", *(f"{w}-{w + 99}" for w in range(1500, 4500, 100)), "4499<")


def births_domain(age_labels: Sequence[str] = AGE_35_39) -> Domain:
    return Domain.from_columns([
        _column("mother_age", age_labels),
        _column("parity", ("1", "2-3", "4-6", "7-10", "10<")),
        _column("gestation_week", ("<29", "29-31", "32-33", "34-36", "37-41", "41<")),
        _column("is_female", ("M", "F"), numeric=False),
        _column("birth_weight", WEIGHT),
        _column("date_of_birth", tuple(str(m) for m in range(1, 13)), numeric=False),
    ])


PAPER_SPEC: dict[str, Any] = {
    "kind": "faithfulness",
    "name": "faithfulness",
    "threshold": 0.05,
    "epsilon": 0.01,
    "exact": ["date_of_birth", "parity", "is_female"],
    "within_one_bin": ["mother_age", "gestation_week", "birth_weight"],
    "max_fuzzy_columns": 1,
    "exact_if_bin_contains": {"mother_age": [37]},
}


def paper_criterion(**changes: Any) -> FaithfulnessCriterion:
    criterion = criterion_from_spec({**PAPER_SPEC, **changes}, where="acceptance[0]")
    assert isinstance(criterion, FaithfulnessCriterion)
    return criterion


def births_sample(domain: Domain, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Births-like codes: skewed marginals, weight tied to gestation (many repeated records)."""
    ages = domain["mother_age"].size
    age_p = np.exp(-0.5 * ((np.arange(ages) - ages / 2) / 1.8) ** 2)
    gestation = rng.choice(6, n, p=[0.01, 0.01, 0.02, 0.06, 0.85, 0.05])
    weight = np.clip(np.round(rng.normal(18 + 3 * (gestation - 4), 5, n)), 0, len(WEIGHT) - 1)
    return pd.DataFrame({
        "mother_age": rng.choice(ages, n, p=age_p / age_p.sum()),
        "parity": rng.choice(5, n, p=[0.4, 0.35, 0.17, 0.06, 0.02]),
        "gestation_week": gestation,
        "is_female": rng.integers(0, 2, n),
        "birth_weight": weight.astype(np.int64),
        "date_of_birth": rng.integers(0, 12, n),
    })


def row(domain: Domain, **labels: str) -> dict[str, int]:
    """One record given by labels; unnamed columns take code 0."""
    return {c.name: c.labels.index(labels[c.name]) if c.name in labels else 0 for c in domain}


def frame(*rows: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


# --- a small random domain for brute force ---------------------------------------------------

SMALL = Domain.from_columns([
    _column("g", ("x", "y"), numeric=False),
    _column("h", ("1", "2", "3")),
    _column("a", ("0-4", "5-9", "10-14", "15-19")),
    _column("b", ("<2", "2-3", "4-5", "6-7", "7<")),
    _column("c", ("lo", "mid", "hi")),
    _column("z", ("p", "q", "r"), numeric=False),
])
SMALL_EXACT, SMALL_FUZZY = ("g", "h"), ("a", "b", "c")

# (spec changes, codes each fuzzy column pins) — pins written out by hand from the labels.
SMALL_VARIANTS: list[tuple[dict[str, Any], dict[str, set[int]]]] = [
    ({}, {}),
    ({"exact_if_bin_contains": {"a": [7]}}, {"a": {1}}),  # 7 inside "5-9"
    ({"exact_if_bin_contains": {"a": [10, 12]}}, {"a": {2}}),  # 10 is an edge; 12 inside "10-14"
    ({"exact_bins": {"b": ["4-5"]}}, {"b": {2}}),
    ({"exact_if_bin_contains": {"b": [1, 8]}, "exact_bins": {"c": ["mid"]}}, {"b": {0, 4}, "c": {1}}),
]


def small_criterion(k: int, changes: dict[str, Any]) -> FaithfulnessCriterion:
    return FaithfulnessCriterion(
        name="ff", threshold=0.05, epsilon=1.0, exact=SMALL_EXACT, within_one_bin=SMALL_FUZZY,
        ignore=("z",), max_fuzzy_columns=k, **changes,
    )


def reference_ok(s: dict[str, int], r: dict[str, int], *, k: int, pins: dict[str, set[int]]) -> bool:
    """The cost rule ``c(s, r) ≤ 1`` as written in the paper, one pair at a time."""
    if any(s[c] != r[c] for c in SMALL_EXACT):
        return False
    differing = 0
    for c in SMALL_FUZZY:
        if s[c] == r[c]:
            continue
        if abs(s[c] - r[c]) > 1 or s[c] in pins.get(c, set()) or r[c] in pins.get(c, set()):
            return False
        differing += 1
    return differing <= k


def brute_force_matching(s: pd.DataFrame, r: pd.DataFrame, *, k: int, pins: dict[str, set[int]]) -> int:
    """Maximum cardinality matching on the explicit row-level bipartite graph."""
    s_rows, r_rows = s.to_dict("records"), r.to_dict("records")
    adjacency = np.array([[reference_ok(a, b, k=k, pins=pins) for b in r_rows] for a in s_rows], dtype=np.int8)
    matched = maximum_bipartite_matching(sparse.csr_array(adjacency), perm_type="column")
    return int(np.count_nonzero(matched >= 0))


def small_sample(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Skewed codes over SMALL so that records repeat and many pairs are within cost 1."""
    def skewed(size: int, m: int) -> np.ndarray:
        p = rng.dirichlet(np.full(size, 0.7))
        return rng.choice(size, m, p=p)
    return pd.DataFrame({c.name: skewed(c.size, n) for c in SMALL})


def perturbed(data: pd.DataFrame, rng: np.random.Generator, rate: float) -> pd.DataFrame:
    """Move each record one step in one random fuzzy column with probability ``rate``."""
    codes = {c: data[c].to_numpy().copy() for c in data.columns}
    for i in np.flatnonzero(rng.random(len(data)) < rate):
        column = SMALL_FUZZY[rng.integers(len(SMALL_FUZZY))]
        codes[column][i] = np.clip(codes[column][i] + rng.choice([-1, 1]), 0, SMALL[column].size - 1)
    return pd.DataFrame(codes).iloc[rng.permutation(len(data))].reset_index(drop=True)


def small_instances(count: int, seed: int) -> Iterator[tuple[FaithfulnessCriterion, int, dict[str, set[int]],
                                                                pd.DataFrame, pd.DataFrame]]:
    rng = np.random.default_rng(seed)
    for i in range(count):
        changes, pins = SMALL_VARIANTS[i % len(SMALL_VARIANTS)]
        k = int(rng.integers(0, 4))
        n = int(rng.integers(1, 31))
        r = small_sample(n, rng)
        s = perturbed(r, rng, rate=float(rng.random())) if rng.random() < 0.6 else small_sample(n, rng)
        yield small_criterion(k, changes), k, pins, r, s


# --- the flow equals the row-level matching ----------------------------------------------


def test_class_flow_equals_brute_force_row_matching_on_random_instances() -> None:
    flows, sizes = [], []
    for criterion, k, pins, r, s in small_instances(200, seed=11):
        expected = brute_force_matching(s, r, k=k, pins=pins)
        graph = criterion.class_graph(r, s, domain=SMALL)
        assert graph.max_matching() == expected, (k, pins, r.to_dict("list"), s.to_dict("list"))
        flows.append(expected)
        sizes.append(len(r))
    flows_arr, sizes_arr = np.array(flows), np.array(sizes)
    # The instances are informative: full, partial and (nearly) empty matchings all occur.
    assert np.any(flows_arr == sizes_arr) and np.any((0 < flows_arr) & (flows_arr < sizes_arr))
    assert np.any(flows_arr < sizes_arr / 2)


def test_library_cost_rule_agrees_with_the_reference_on_all_pairs() -> None:
    for criterion, k, pins, r, s in small_instances(60, seed=3):
        pairs_s = s.loc[np.repeat(np.arange(len(s)), len(r))].reset_index(drop=True)
        pairs_r = r.loc[np.tile(np.arange(len(r)), len(s))].reset_index(drop=True)
        got = criterion.compatible(pairs_s, pairs_r, domain=SMALL)
        want = [reference_ok(a, b, k=k, pins=pins)
                for a, b in zip(pairs_s.to_dict("records"), pairs_r.to_dict("records"), strict=True)]
        np.testing.assert_array_equal(got, want)
        assert criterion.pinned_codes(domain=SMALL) == {c: tuple(sorted(pins.get(c, set()))) for c in SMALL_FUZZY}


def test_matching_identical_records_first_is_not_optimal_and_the_flow_is() -> None:
    # S = {A, X}, R = {A, Y}: X ~ A and A ~ Y, but X and Y differ in two fuzzy columns. Pairing
    # the identical A's first leaves X, Y unmatched (β = 1/2); the maximum matching is X–A, A–Y.
    domain = births_domain()
    a = row(domain, mother_age="25-29", birth_weight="3000-3099")
    x = {**a, "mother_age": a["mother_age"] + 1}
    y = {**a, "birth_weight": a["birth_weight"] + 1}
    criterion = paper_criterion()
    assert not criterion.compatible(frame(x), frame(y), domain=domain)[0]
    assert criterion.error(frame(a, y), frame(a, x), domain=domain) == 0.0


def test_identical_and_shuffled_data_have_zero_error_and_disjoint_data_has_one() -> None:
    domain = births_domain()
    rng = np.random.default_rng(2)
    data = births_sample(domain, 3000, rng)
    criterion = paper_criterion()
    shuffled = data.iloc[rng.permutation(len(data))].reset_index(drop=True)
    assert criterion.error(data, shuffled, domain=domain) == 0.0
    boys, girls = data.assign(is_female=0), data.assign(is_female=1)  # an exact column differs everywhere
    assert criterion.error(boys, girls, domain=domain) == 1.0
    # Every record moved one (unpinned) birth_weight bin: all still matched.
    heavier = data.assign(birth_weight=np.minimum(data["birth_weight"] + 1, len(WEIGHT) - 1))
    assert criterion.error(data, heavier, domain=domain) == 0.0


def test_error_does_not_mutate_its_inputs() -> None:
    domain = births_domain()
    rng = np.random.default_rng(8)
    r, s = births_sample(domain, 500, rng), births_sample(domain, 500, rng)
    r_copy, s_copy = r.copy(), s.copy()
    paper_criterion().error(r, s, domain=domain)
    pd.testing.assert_frame_equal(r, r_copy)
    pd.testing.assert_frame_equal(s, s_copy)


# --- the paper's cost rule -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("s_labels", "r_labels", "k", "expected"),
    [
        ({}, {}, 1, True),
        ({"parity": "1"}, {"parity": "2-3"}, 1, False),  # exact column
        ({"date_of_birth": "3"}, {"date_of_birth": "4"}, 1, False),
        ({"is_female": "M"}, {"is_female": "F"}, 1, False),
        ({"birth_weight": "3000-3099"}, {"birth_weight": "3100-3199"}, 1, True),  # one bin up
        ({"birth_weight": "3000-3099"}, {"birth_weight": "2900-2999"}, 1, True),  # one bin down
        ({"birth_weight": "3000-3099"}, {"birth_weight": "3200-3299"}, 1, False),  # two bins
        ({"birth_weight": "<1500"}, {"birth_weight": "1500-1599"}, 1, True),  # open end bin
        ({"gestation_week": "34-36"}, {"gestation_week": "37-41"}, 1, True),
        ({"gestation_week": "34-36", "birth_weight": "3000-3099"},
         {"gestation_week": "37-41", "birth_weight": "3100-3199"}, 1, False),  # two fuzzy columns
        ({"gestation_week": "34-36", "birth_weight": "3000-3099"},
         {"gestation_week": "37-41", "birth_weight": "3100-3199"}, 2, True),
        ({"birth_weight": "3000-3099"}, {"birth_weight": "3100-3199"}, 0, False),
        ({"mother_age": "25-29"}, {"mother_age": "30-34"}, 1, True),
        ({"mother_age": "30-34"}, {"mother_age": "35-39"}, 1, False),  # 37 inside 35-39: exact
        ({"mother_age": "35-39"}, {"mother_age": "40-42"}, 1, False),
        ({"mother_age": "35-39"}, {"mother_age": "35-39"}, 1, True),
        ({"mother_age": "35-39", "birth_weight": "3000-3099"},
         {"mother_age": "35-39", "birth_weight": "3100-3199"}, 1, True),  # pinned only in mother_age
    ],
)
def test_paper_cost_rule(s_labels: dict[str, str], r_labels: dict[str, str], k: int, expected: bool) -> None:
    domain = births_domain()
    criterion = paper_criterion(max_fuzzy_columns=k)
    s, r = frame(row(domain, **s_labels)), frame(row(domain, **r_labels))
    assert criterion.compatible(s, r, domain=domain)[0] == expected
    assert criterion.compatible(r, s, domain=domain)[0] == expected  # the rule is symmetric
    assert criterion.error(r, s, domain=domain) == (0.0 if expected else 1.0)


def test_the_37_exception_follows_the_binning_alternative() -> None:
    criterion = paper_criterion()
    assert criterion.pinned_codes(domain=births_domain(AGE_35_39)) == {
        "mother_age": (AGE_35_39.index("35-39"),), "gestation_week": (), "birth_weight": ()}
    # With 37-39, 37 is on an edge: no bin is pinned and 35-36 ~ 37-39 is allowed.
    domain = births_domain(AGE_37_39)
    assert criterion.pinned_codes(domain=domain)["mother_age"] == ()
    s, r = frame(row(domain, mother_age="35-36")), frame(row(domain, mother_age="37-39"))
    assert criterion.compatible(s, r, domain=domain)[0]
    # The same bin pinned by label instead of by value.
    by_label = paper_criterion(exact_if_bin_contains={}, exact_bins={"mother_age": ["35-39"]})
    assert by_label.pinned_codes(domain=births_domain()) == criterion.pinned_codes(domain=births_domain())


@pytest.mark.parametrize(
    ("label", "interval"),
    [
        ("35-39", (35.0, 39.0)), (" 35 - 39 ", (35.0, 39.0)), ("35–39", (35.0, 39.0)), ("1.5..2.5", (1.5, 2.5)),
        ("-5--1", (-5.0, -1.0)), ("[35, 40)", (35.0, 40.0)), ("(35,40]", (35.0, 40.0)),
        ("<18", (-math.inf, 18.0)), ("≤24", (-math.inf, 24.0)), ("<=24", (-math.inf, 24.0)),
        ("44<", (44.0, math.inf)), ("35≤", (35.0, math.inf)), (">44", (44.0, math.inf)),
        ("≥35", (35.0, math.inf)), ("45+", (45.0, math.inf)), ("37", (37.0, 37.0)),
        ("F", None), ("39-35", None), ("35-", None), ("", None), ("a-b", None),
    ],
)
def test_bin_interval(label: str, interval: tuple[float, float] | None) -> None:
    assert bin_interval(label) == interval


@pytest.mark.parametrize(
    ("label", "value", "inside"),
    [("35-39", 37, True), ("37-39", 37, False), ("35-37", 37, False), ("35-36", 37, False), ("37", 37, False),
     ("35≤", 37, True), ("<18", 37, False), ("44<", 37, False), ("[36.5, 37.5)", 37, True), ("M", 37, None)],
)
def test_value_in_interior(label: str, value: float, inside: bool | None) -> None:
    assert value_in_interior(label, value) is inside


# --- sensitivity ------------------------------------------------------------------------------


def _adversarial_rows(s: pd.DataFrame, rng: np.random.Generator) -> list[dict[str, int]]:
    """Replacement rows: random, copies of S rows, the row compatible with most of S, an isolated row."""
    rows = [{c.name: int(rng.integers(c.size)) for c in SMALL} for _ in range(3)]
    records = s.to_dict("records")
    rows += [records[int(rng.integers(len(records)))] for _ in range(2)]
    rows.append(max(records, key=lambda a: sum(reference_ok(a, b, k=1, pins={}) for b in records)))
    present = set(zip(s["g"], s["h"], strict=True))
    absent = [(g, h) for g in range(2) for h in range(3) if (g, h) not in present]
    if absent:  # exact columns no candidate record has: matches nothing
        rows.append({**records[0], "g": absent[0][0], "h": absent[0][1]})
    return rows


def test_sensitivity_is_one_over_n() -> None:
    criterion = paper_criterion()
    for n in (1, 7, 166_000):
        assert criterion.sensitivity(n) == 1 / n
    with pytest.raises(SchemaError, match=r"n \(0\) must be an int >= 1"):
        criterion.sensitivity(0)
    with pytest.raises(SchemaError, match=r"n \(2.0\) must be an int >= 1"):
        criterion.sensitivity(2.0)  # type: ignore[arg-type]


def test_replacing_one_private_row_changes_the_matching_by_at_most_one() -> None:
    changes = []
    rng = np.random.default_rng(21)
    for criterion, _, _, r, s in small_instances(40, seed=5):
        n = len(r)
        base = criterion.class_graph(r, s, domain=SMALL).max_matching()
        codes = r.to_numpy()
        for replacement in _adversarial_rows(s, rng):
            for i in rng.choice(n, min(n, 3), replace=False):
                neighbour = codes.copy()
                neighbour[i] = [replacement[c] for c in r.columns]
                graph = criterion.class_graph(pd.DataFrame(neighbour, columns=r.columns), s, domain=SMALL)
                changes.append(graph.max_matching() - base)
    changes_arr = np.array(changes)
    assert changes_arr.size > 250
    # |Δ error| = |Δ matching| / n <= 1/n, and the bound is attained in both directions.
    assert np.all(np.abs(changes_arr) <= 1)
    assert {-1, 0, 1} <= set(changes_arr.tolist())


def test_sensitivity_on_births_like_data_at_scale() -> None:
    domain = births_domain()
    rng = np.random.default_rng(13)
    n = 20_000
    r, s = births_sample(domain, n, rng), births_sample(domain, n, rng)
    criterion = paper_criterion()
    base = criterion.class_graph(r, s, domain=domain).max_matching()
    assert 0 < base < n
    changes = set()
    for trial in range(40):
        neighbour = r.copy()
        i = int(rng.integers(n))
        source = s.iloc[int(rng.integers(n))] if trial % 2 else births_sample(domain, 1, rng).iloc[0]
        neighbour.iloc[i] = source[neighbour.columns].to_numpy()
        delta = criterion.class_graph(neighbour, s, domain=domain).max_matching() - base
        assert abs(delta) <= 1
        changes.add(delta)
    assert len(changes) >= 2  # the replacements do move the matching


# --- graph size ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "moves"), [(0, 1), (1, 1 + 2 * 3), (2, 1 + 2 * 3 + 4 * 3), (3, 27)])
def test_class_graph_has_at_most_moves_edges_per_candidate_class(k: int, moves: int) -> None:
    domain = births_domain()
    rng = np.random.default_rng(17)
    r, s = births_sample(domain, 30_000, rng), births_sample(domain, 30_000, rng)
    graph = paper_criterion(max_fuzzy_columns=k).class_graph(r, s, domain=domain)
    assert graph.n_s_classes == len(s.drop_duplicates())
    assert graph.n_r_classes == len(r.drop_duplicates())
    assert graph.s_counts.sum() == graph.r_counts.sum() == 30_000
    assert 0 < graph.n_edges <= moves * graph.n_s_classes
    pairs = set(zip(graph.edge_s.tolist(), graph.edge_r.tolist(), strict=True))
    assert len(pairs) == graph.n_edges  # no duplicate edges


# --- release: ledger, scale, modes ---------------------------------------------------------------


def _release_data(n: int = 400) -> tuple[Domain, pd.DataFrame, pd.DataFrame]:
    domain = births_domain()
    rng = np.random.default_rng(31)
    return domain, births_sample(domain, n, rng), births_sample(domain, n, rng)


def test_research_release_charges_laplace_at_sensitivity_over_epsilon() -> None:
    domain, r, s = _release_data()
    criterion = paper_criterion(epsilon=0.25)
    ledger = Ledger(epsilon_cap=1.0)
    result = criterion.release(r, s, domain=domain, source=SeededSource(np.random.default_rng(5)),
                               ledger=ledger, scope="births")
    (event,) = ledger.events
    assert event.name == "acceptance:faithfulness" and event.scope == "births" and event.step == "acceptance"
    assert event.mechanism == "laplace" and event.epsilon == 0.25 and event.delta == 0.0
    assert event.sensitivity == 1 / 400 and event.noise_scale == (1 / 400) / 0.25
    assert ledger.total().epsilon == 0.25
    expected_error = criterion.error(r, s, domain=domain)
    assert 0.0 < expected_error < 1.0
    noise = float(SeededSource(np.random.default_rng(5)).laplace(scale=(1 / 400) / 0.25, size=()))
    assert result.true_value == expected_error
    assert result.dp_value == expected_error + noise
    assert result.passed == (result.dp_value < 0.05)
    assert (result.kind, result.name, result.mechanism) == ("faithfulness", "faithfulness", "laplace")
    assert result.sensitivity == 1 / 400 and result.noise_scale == event.noise_scale
    assert result.threshold == 0.05 and result.epsilon == 0.25 and result.bounds is None


def test_release_mode_hides_the_true_value_and_charges_the_lattice_scale(tmp_path: Path) -> None:
    domain, r, s = _release_data()
    criterion = paper_criterion(epsilon=0.5)
    ledger = Ledger(epsilon_cap=1.0)
    path = tmp_path / "release.transcript"
    with TranscriptWriter(path, context=CONTEXT) as writer:
        result = criterion.release(r, s, domain=domain, source=SecureSource(writer), ledger=ledger)
    assert result.true_value is None and "true_value" in result.to_dict()
    assert result.to_dict()["true_value"] is None
    (event,) = ledger.events
    k = int(dict(event.details)["lattice_exponent"])
    assert event.mechanism == result.mechanism == "laplace_lattice"
    assert event.sensitivity == result.sensitivity == 1 / 400
    assert Fraction(event.noise_scale) >= (Fraction(1 / 400) + Fraction(2) ** k) / Fraction(0.5)
    assert event.noise_scale < 1.01 * (1 / 400) / 0.5  # the lattice slack is small
    assert math.isfinite(result.dp_value)
    (record,) = read_records(path)
    assert record.op == "laplace" and record.params["scale"] == event.noise_scale


# --- spec and input errors ---------------------------------------------------------------------


def test_registered_and_built_from_toml() -> None:
    assert "faithfulness" in criterion_kinds()
    table = tomllib.loads("""
        kind = "faithfulness"
        name = "faithfulness"
        threshold = 0.05
        epsilon = 0.01
        exact = ["date_of_birth", "parity", "is_female"]
        within_one_bin = ["mother_age", "gestation_week", "birth_weight"]
        max_fuzzy_columns = 1
        exact_if_bin_contains = { mother_age = [37] }
    """)
    criterion = criterion_from_spec(table, where="acceptance[0]")
    assert criterion == paper_criterion()
    assert criterion.exact_if_bin_contains == {"mother_age": (37,)}
    assert criterion.exact == ("date_of_birth", "parity", "is_female")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"within_one_bins": ["mother_age"]}, r"acceptance\[0\]: unknown key\(s\) within_one_bins"),
        ({"exact": "parity"}, r"exact \('parity'\) must be a list of column names"),
        ({"exact": ["parity", "parity"]}, r"exact .* repeats 'parity'"),
        ({"exact": ["parity", ""]}, r"exact .* must hold non-empty column names"),
        ({"exact": ["parity", "mother_age"]}, r"'mother_age' are listed in both exact and within_one_bin"),
        ({"ignore": ["birth_weight"]}, r"'birth_weight' are listed in both within_one_bin and ignore"),
        ({"exact": [], "within_one_bin": [], "exact_if_bin_contains": {}}, r"both empty"),
        ({"max_fuzzy_columns": -1}, r"max_fuzzy_columns \(-1\) must be an int >= 0"),
        ({"max_fuzzy_columns": True}, r"max_fuzzy_columns \(True\) must be an int"),
        ({"max_fuzzy_columns": 1.5}, r"max_fuzzy_columns \(1.5\) must be an int"),
        ({"threshold": 5}, r"threshold \(5\) must be a finite real number in \(0, 1\]"),
        ({"threshold": 0}, r"threshold \(0\) must be a finite real number in \(0, 1\]"),
        ({"epsilon": 0}, r"epsilon \(0\) must be a finite real number > 0"),
        ({"exact_if_bin_contains": {"parity": [2]}}, r"exact_if_bin_contains column 'parity' is exact already"),
        ({"exact_if_bin_contains": {"mother_agee": [37]}},
         r"exact_if_bin_contains column 'mother_agee' is not a within_one_bin column"),
        ({"exact_if_bin_contains": {"mother_age": ["37"]}}, r"exact_if_bin_contains.mother_age \(\['37'\]\) must hold"),
        ({"exact_if_bin_contains": {"mother_age": []}},
         r"exact_if_bin_contains.mother_age \(\[\]\) must be a non-empty"),
        ({"exact_if_bin_contains": {"mother_age": 37}}, r"exact_if_bin_contains.mother_age \(37\) must be a non-empty"),
        ({"exact_if_bin_contains": [37]}, r"exact_if_bin_contains \(\[37\]\) must be a table"),
        ({"exact_bins": {"mother_age": [35]}}, r"exact_bins.mother_age \(\[35\]\) must hold bin labels"),
    ],
)
def test_bad_spec_raises_spec_error_naming_it(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        paper_criterion(**changes)


def test_missing_key_is_named() -> None:
    table = {k: v for k, v in PAPER_SPEC.items() if k != "within_one_bin"}
    with pytest.raises(SpecError, match=r"missing key\(s\) within_one_bin"):
        criterion_from_spec(table, where="acceptance[0]")


@pytest.mark.parametrize(
    ("changes", "domain", "message"),
    [
        ({"exact": ["date_of_birth", "parity", "is_female", "plurality"]}, births_domain(),
         r"column\(s\) 'plurality' are not in the domain; it has mother_age, parity"),
        ({"exact": ["date_of_birth", "parity"]}, births_domain(),
         r"domain column\(s\) 'is_female' are in none of exact, within_one_bin and ignore"),
        ({"exact": ["date_of_birth", "parity"], "within_one_bin": ["mother_age", "gestation_week", "birth_weight",
                                                                   "is_female"]},
         births_domain(), r"within_one_bin column 'is_female' is nominal"),
        ({"exact_bins": {"mother_age": ["35-40"]}}, births_domain(),
         r"exact_bins.mother_age label '35-40' is not a bin of 'mother_age'"),
        ({}, Domain.from_columns([*births_domain().columns[:-2], _column("birth_weight", ("low", "normal", "high")),
                                  births_domain()["date_of_birth"]]),
         None),
        ({"exact_if_bin_contains": {"birth_weight": [2500]}},
         Domain.from_columns([*births_domain().columns[:-2], _column("birth_weight", ("low", "normal", "high")),
                              births_domain()["date_of_birth"]]),
         r"exact_if_bin_contains.birth_weight needs interval labels, but 'low' is not one"),
    ],
)
def test_rule_that_does_not_fit_the_domain_raises_before_any_charge(
    changes: dict[str, Any], domain: Domain, message: str | None
) -> None:
    criterion = paper_criterion(**changes)
    rng = np.random.default_rng(0)
    data = pd.DataFrame({c.name: rng.integers(0, c.size, 50) for c in domain})
    ledger = Ledger(epsilon_cap=None)
    if message is None:  # unreadable labels are fine where no value needs them
        assert criterion.error(data, data, domain=domain) == 0.0
        return
    with pytest.raises(SpecError, match=message):
        criterion.release(data, data, domain=domain, source=SeededSource(np.random.default_rng(0)), ledger=ledger)
    assert list(ledger.events) == []


def test_bad_frames_raise() -> None:
    domain, r, s = _release_data(n=50)
    criterion = paper_criterion()
    with pytest.raises(SpecError, match=r"the candidate has 49 rows but the transformed data has 50"):
        criterion.error(r, s.iloc[:49], domain=domain)
    with pytest.raises(SpecError, match=r"the transformed dataset is empty"):
        criterion.error(r.iloc[:0], s.iloc[:0], domain=domain)
    bad = s.copy()
    bad.loc[3, "birth_weight"] = len(WEIGHT)
    with pytest.raises(SchemaError, match=r"candidate: column 'birth_weight' has .*row 3"):
        criterion.error(r, bad, domain=domain)
    with pytest.raises(SchemaError, match=r"missing column\(s\) parity"):
        criterion.error(r.drop(columns="parity"), s, domain=domain)
    with pytest.raises(SpecError, match=r"compatible\(\) compares aligned rows; got 50 and 49 rows"):
        criterion.compatible(s, r.iloc[:49], domain=domain)


def test_wide_exact_columns_are_reranked_instead_of_overflowing() -> None:
    # 8 exact columns of 1000 codes: 10**24 joint cells, past int64; the keys are re-ranked.
    wide = Domain.from_columns([
        *(_column(f"e{i}", tuple(str(v) for v in range(1000)), numeric=False) for i in range(8)),
        _column("f", tuple(str(v) for v in range(5))),
    ])
    criterion = FaithfulnessCriterion(name="wide", threshold=0.05, epsilon=1.0,
                                      exact=[f"e{i}" for i in range(8)], within_one_bin=["f"])
    rng = np.random.default_rng(9)
    base = pd.DataFrame({f"e{i}": rng.integers(0, 2, 30) * 999 for i in range(8)} | {"f": rng.integers(0, 5, 30)})
    other = base.assign(f=np.clip(base["f"] + rng.integers(-2, 3, 30), 0, 4))
    other = other.iloc[rng.permutation(30)].reset_index(drop=True)
    expected = maximum_bipartite_matching(sparse.csr_array(np.array([
        [all(a[f"e{i}"] == b[f"e{i}"] for i in range(8)) and abs(a["f"] - b["f"]) <= 1
         for b in base.to_dict("records")] for a in other.to_dict("records")], dtype=np.int8)), perm_type="column")
    assert criterion.class_graph(base, other, domain=wide).max_matching() == np.count_nonzero(expected >= 0)
    assert 0 < np.count_nonzero(expected >= 0) < 30


def test_too_many_joint_fuzzy_bins_is_a_clear_error() -> None:
    huge = Domain.from_columns([_column(f"f{i}", tuple(str(v) for v in range(1000))) for i in range(7)])
    criterion = FaithfulnessCriterion(name="huge", threshold=0.05, epsilon=1.0, exact=[],
                                      within_one_bin=[f"f{i}" for i in range(7)])
    data = pd.DataFrame({f"f{i}": np.arange(4) for i in range(7)})
    with pytest.raises(SpecError, match=r"within_one_bin columns have 10{21} joint bins, too many"):
        criterion.error(data, data, domain=huge)
