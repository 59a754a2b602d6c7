"""Plausible deniability, Section 6 (issue 10, evaluation): TVD, model accuracy, classifiers on
synthetics vs reals, the distinguishing game, and the DP ERM baselines of Table 4."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privlab.mechanisms.plausible_deniability.distinguishing_game import distinguishing_game
from privlab.mechanisms.plausible_deniability.dp_erm import (
    DPLinearClassifier, DPLinearClassifierParams, erm_features, fit_erm, loss_curvature,
    nonprivate_erm_accuracies, objective_perturbation_parameters, output_perturbation_sensitivity, sample_l2_laplace_noise)
from privlab.mechanisms.plausible_deniability.evaluation_classifiers import (
    CLASSIFIER_KINDS, agreement_rate, compare_classifiers)
from privlab.mechanisms.plausible_deniability.evaluation_data import coded_table, one_hot
from privlab.mechanisms.plausible_deniability.evaluation_model_accuracy import (
    empirical_marginals, generative_model_accuracy, marginal_accuracy, model_accuracy_table, random_forest_accuracy,
    random_guess_accuracy, relative_error_reduction)
from privlab.mechanisms.plausible_deniability.evaluation_statistics import (
    attribute_tvd, pairwise_tvd, tvd_summary, tvd_table)
from privlab.mechanisms.plausible_deniability.model import PlausibleDeniabilityModel, PlausibleDeniabilityModelParams
from privlab.mechanisms.plausible_deniability.structure import Bucketing, Structure
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import NotFittedError, SchemaError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.randomness import SeededSource

SIZES = (2, 3, 4, 2)


def domain_of(sizes: tuple[int, ...], names: str = "abcdefgh") -> Domain:
    return Domain(tuple(ColumnDomain(name=names[j], labels=tuple(f"{names[j]}{i}" for i in range(s)))
                        for j, s in enumerate(sizes)))


def random_table(n: int, sizes: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, s, n) for s in sizes])


# --- total variation distance ----------------------------------------------------------------


def brute_force_tvd(a: np.ndarray, b: np.ndarray, columns: tuple[int, ...]) -> float:
    ca = Counter(tuple(row[list(columns)]) for row in a)
    cb = Counter(tuple(row[list(columns)]) for row in b)
    return 0.5 * sum(abs(ca[k] / len(a) - cb[k] / len(b)) for k in set(ca) | set(cb))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tvd_agrees_with_a_brute_force_count_of_each_attribute_and_pair(seed: int) -> None:
    a, b = random_table(57, SIZES, seed), random_table(83, SIZES, seed + 10)
    b[:, 2] = np.minimum(b[:, 2], 1 + seed % 2)  # make the tables differ beyond sampling noise
    single = attribute_tvd(a, b, SIZES)
    np.testing.assert_allclose(single, [brute_force_tvd(a, b, (j,)) for j in range(4)], rtol=0, atol=1e-12)
    pairs = pairwise_tvd(pd.DataFrame(a), b, SIZES)
    assert pairs.pairs.tolist() == [list(p) for p in itertools.combinations(range(4), 2)]
    np.testing.assert_allclose(pairs.tvd, [brute_force_tvd(a, b, tuple(p)) for p in pairs.pairs], rtol=0, atol=1e-12)
    assert single.min() > 0 and pairs.tvd.max() <= 1


def test_tvd_is_zero_on_the_same_records_and_one_on_disjoint_supports() -> None:
    a = random_table(200, SIZES, 4)
    shuffled = a[np.random.default_rng(5).permutation(len(a))]
    np.testing.assert_array_equal(attribute_tvd(a, shuffled, SIZES), 0.0)
    np.testing.assert_array_equal(pairwise_tvd(a, np.vstack([a, a]), SIZES).tvd, 0.0)
    b = a.copy()
    a[:, 0], b[:, 0] = 0, 1
    single, pairs = attribute_tvd(a, b, SIZES), pairwise_tvd(a, b, SIZES)
    assert single[0] == 1.0 and (single[1:] == 0).all()
    assert (pairs.tvd[pairs.pairs[:, 0] == 0] == 1.0).all() and (pairs.tvd[pairs.pairs[:, 0] != 0] == 0.0).all()


def test_tvd_refuses_tables_that_are_not_codes_over_the_sizes() -> None:
    a = random_table(10, SIZES, 0)
    with pytest.raises(SchemaError, match=r"second \(3 columns\) must have one column per entry of sizes \(4\)"):
        attribute_tvd(a, a[:, :3], SIZES)
    bad = a.copy()
    bad[3, 2] = 4
    with pytest.raises(SchemaError, match="second column 2 has a code outside 0..3"):
        pairwise_tvd(a, bad, SIZES)
    with pytest.raises(SchemaError, match="must hold integer codes"):
        attribute_tvd(a.astype(float), a, SIZES)
    with pytest.raises(SchemaError, match="at least one record"):
        attribute_tvd(a[:0], a, SIZES)
    with pytest.raises(SchemaError, match=r"sizes\[1\] \(0\) must be an int >= 1"):
        attribute_tvd(a, a, (2, 0, 4, 2))
    with pytest.raises(SchemaError, match="at least two attributes"):
        pairwise_tvd(a[:, :1], a[:, :1], (2,))


def test_the_tvd_table_has_one_row_per_table_and_attribute_or_pair() -> None:
    reference, other = random_table(100, SIZES, 30), random_table(90, SIZES, 31)
    frame = tvd_table(reference, {"reals": other, "same": reference}, sizes=SIZES, names="abcd")
    assert len(frame) == 2 * (4 + 6) and frame["kind"].tolist() == ["attribute"] * 8 + ["pair"] * 12
    rows = frame.set_index(["table", "kind", "attributes"])["tvd"]
    assert rows[("reals", "attribute", "c")] == attribute_tvd(reference, other, SIZES)[2]
    assert rows[("reals", "pair", "b×d")] == pairwise_tvd(reference, other, SIZES).tvd[4]
    assert (frame[frame["table"] == "same"]["tvd"] == 0).all()
    with pytest.raises(SchemaError, match="must name each of the 4 attributes"):
        tvd_table(reference, {"x": other}, sizes=SIZES, names="abc")


def test_tvd_summary_gives_the_numbers_of_a_box_plot() -> None:
    summary = tvd_summary([0.0, 1.0, 2.0, 3.0, 4.0, 100.0])
    assert summary == {"count": 6.0, "mean": 110 / 6, "min": 0.0, "q25": 1.25, "median": 2.5, "q75": 3.75,
                       "max": 100.0, "whisker_low": 0.0, "whisker_high": 4.0}
    with pytest.raises(ValueError, match="non-empty array of finite numbers"):
        tvd_summary([])


# --- model accuracy ----------------------------------------------------------------------------


def chain_model() -> PlausibleDeniabilityModel:
    """A → B with Pr{A = 1} = 0.7 and B = A with probability 0.9, set by hand."""
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=1.0))
    model.domain_ = domain_of((2, 2))
    model.bucketing_ = Bucketing.build(model.domain_)
    model.structure_ = Structure(parents=((), (0,)), order=(0, 1))
    model.tables_ = (np.array([[0.3, 0.7]]), np.array([[0.9, 0.1], [0.1, 0.9]]))
    model.events_ = ()
    return model


def test_the_model_predicts_from_the_markov_blanket_not_just_the_parents() -> None:
    # Records (A, B): the posterior of A given B=0 is 0.27 : 0.07 → 0, given B=1 is 0.03 : 0.63 → 1.
    records = np.array([[0, 0], [1, 1], [1, 0], [0, 1], [1, 1]])
    accuracy = generative_model_accuracy(chain_model(), records)
    assert accuracy.tolist() == [3 / 5, 3 / 5]  # A guessed as B, B guessed as A
    parents_only = generative_model_accuracy(chain_model(), records, conditioning="parents")
    assert parents_only.tolist() == [3 / 5, 3 / 5]  # A always 1 (3 of 5), B guessed as A
    records = np.array([[0, 0], [0, 0], [1, 1]])
    assert generative_model_accuracy(chain_model(), records).tolist() == [1.0, 1.0]
    assert generative_model_accuracy(chain_model(), records, conditioning="parents").tolist() == [1 / 3, 1.0]


def test_the_model_accuracy_is_the_argmax_of_the_joint_probability_of_a_fitted_model() -> None:
    domain = domain_of((3, 4, 2))
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, 800)
    b = (a + rng.integers(0, 2, 800)) % 4
    c = ((b > 1) ^ (rng.random(800) < 0.2)).astype(np.int64)
    data = pd.DataFrame({"a": a, "b": b, "c": c})
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=50.0, accountant="basic", maxcost=8))
    split = PositionalSplit.permuted(len(data), [400, len(data) - 400], rng=np.random.default_rng(5))
    model.fit(data, split=split, domain=domain, ledger=Ledger(epsilon_cap=None), source=SeededSource(np.random.default_rng(4)))
    assert any(model.structure_.parents), "the test needs a model with edges"
    records = data.to_numpy()[:150]

    def joint(record: np.ndarray) -> float:
        return math.prod(float(model.conditional(i, record)[record[i]]) for i in range(3))

    expected = []
    for i, size in enumerate(domain.sizes):
        hits = 0
        for record in records:
            scores = []
            for v in range(size):
                changed = record.copy()
                changed[i] = v
                scores.append(joint(changed))
            hits += int(np.argmax(scores) == record[i])
        expected.append(hits / len(records))
    np.testing.assert_allclose(generative_model_accuracy(model, records), expected, rtol=0, atol=1e-12)
    with pytest.raises(NotFittedError, match="PlausibleDeniabilityModel is not fitted"):
        generative_model_accuracy(PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(epsilon=1.0)), records)
    with pytest.raises(ValueError, match=r"conditioning \('children'\) must be one of"):
        generative_model_accuracy(model, records, conditioning="children")
    with pytest.raises(SchemaError, match="records column 1 has a code outside 0..3"):
        generative_model_accuracy(model, records + np.array([0, 1, 0]))


def test_the_accuracy_table_gathers_every_predictor() -> None:
    model = chain_model()
    records = np.array([[0, 0], [0, 0], [1, 1], [1, 0]])
    train = np.array([[1, 1], [1, 1], [0, 1]])
    table = model_accuracy_table(model, records, train=train, rng=np.random.default_rng(0), n_estimators=3)
    assert table.index.tolist() == ["a", "b"]
    assert table["model"].tolist() == [0.75, 0.75] and table["model_parents"].tolist() == [0.5, 0.75]
    assert table["marginals"].tolist() == [0.5, 0.25] and table["random"].tolist() == [0.5, 0.5]
    np.testing.assert_allclose(table["model_error_reduction"], [0.5, 2 / 3])
    assert table["random_forest"].between(0, 1).all()
    without = model_accuracy_table(model, records, train=train, marginals=(np.array([0.9, 0.1]),) * 2)
    assert "random_forest" not in without and without["marginals"].tolist() == [0.5, 0.75]


def test_marginal_random_and_forest_baselines_on_constructed_data() -> None:
    train = np.array([[0, 1, 2], [1, 1, 2], [1, 0, 0], [1, 2, 2]])
    marginals = empirical_marginals(train, (2, 3, 3))
    np.testing.assert_allclose(marginals[1], [0.25, 0.5, 0.25])
    test = np.array([[1, 1, 0], [0, 1, 2], [0, 2, 2], [1, 1, 1]])
    assert marginal_accuracy(test, sizes=(2, 3, 3), marginals=marginals).tolist() == [0.5, 0.75, 0.5]
    with pytest.raises(SchemaError, match=r"marginals\[2\] \(shape \(2,\)\) must be 3 finite probabilities"):
        marginal_accuracy(test, sizes=(2, 3, 3), marginals=(*marginals[:2], np.ones(2)))
    np.testing.assert_array_equal(random_guess_accuracy((2, 4, 5)), [0.5, 0.25, 0.2])
    # Attribute 1 is attribute 0 plus one (mod 4), attribute 2 independent noise: the forest
    # predicts the first two exactly from each other and is not asked about the third.
    rng = np.random.default_rng(8)
    x0 = rng.integers(0, 4, 300)
    table = np.column_stack([x0, (x0 + 1) % 4, rng.integers(0, 3, 300)])
    forest = random_forest_accuracy(table[:200], table[200:], sizes=(4, 4, 3), rng=rng, n_estimators=5,
                                    attributes=[0, 1])
    assert forest[:2].tolist() == [1.0, 1.0] and np.isnan(forest[2])
    np.testing.assert_allclose(relative_error_reduction(np.array([0.9, 0.5, 1.0]), np.array([0.8, 0.5, 1.0])),
                               [0.5, 0.0, np.nan])


# --- classifiers on synthetics vs reals ------------------------------------------------------------


def test_agreement_rate_counts_equal_predictions() -> None:
    assert agreement_rate(np.array([1, 0, 1, 1]), np.array([1, 1, 1, 0])) == 0.5
    with pytest.raises(ValueError, match="equal length"):
        agreement_rate(np.array([1, 0]), np.array([1, 0, 1]))


def test_classifiers_on_copied_and_flipped_targets_have_known_accuracy_and_agreement() -> None:
    sizes = (3, 2, 2)
    rng = np.random.default_rng(11)

    def table(n: int, flip: bool) -> np.ndarray:
        x0, noise = rng.integers(0, 3, n), rng.integers(0, 2, n)
        target = (x0 == 2).astype(np.int64)
        return np.column_stack([x0, noise, 1 - target if flip else target])

    result = compare_classifiers(table(300, False), {"other reals": table(300, False), "flipped": table(300, True)},
                                 table(200, False), sizes=sizes, target=2, rng=np.random.default_rng(0))
    assert result["training"].tolist() == ["reals"] * 5 + ["other reals"] * 5 + ["flipped"] * 5
    assert result["classifier"].tolist() == list(CLASSIFIER_KINDS) * 3
    by = result.set_index(["training", "classifier"])
    for kind in CLASSIFIER_KINDS:
        assert by.loc[("reals", kind), "accuracy"] == 1.0 and np.isnan(by.loc[("reals", kind), "agreement"])
        assert by.loc[("other reals", kind)].tolist() == [1.0, 1.0]
        assert by.loc[("flipped", kind)].tolist() == [0.0, 0.0]
    one_class = table(100, False)
    one_class[:, 2] = 1
    constant = compare_classifiers(table(300, False), {"one class": one_class}, table(200, False), sizes=sizes,
                                   target=2, rng=np.random.default_rng(0), kinds=["LR", "Tree"])
    share = constant.set_index(["training", "classifier"]).loc[("one class", "LR"), "accuracy"]
    assert 0 < share < 1 and (constant[constant["training"] == "one class"]["accuracy"] == share).all()
    with pytest.raises(ValueError, match="must not use the reference's name 'reals'"):
        compare_classifiers(table(50, False), {"reals": table(50, False)}, table(50, False), sizes=sizes, target=2,
                            rng=rng)
    with pytest.raises(ValueError, match=r"kind \('KNN'\) must be one of"):
        compare_classifiers(table(50, False), {}, table(50, False), sizes=sizes, target=2, rng=rng, kinds=["KNN"])
    with pytest.raises(ValueError, match=r"target \(3\) must be an attribute index in 0..2"):
        compare_classifiers(table(50, False), {}, table(50, False), sizes=sizes, target=3, rng=rng)


# --- distinguishing game -----------------------------------------------------------------------


def test_the_distinguishing_game_wins_on_disjoint_supports_and_guesses_on_the_same_distribution() -> None:
    sizes = (3, 4, 2)
    reals = random_table(3000, sizes, 20)
    others = random_table(3000, sizes, 21)
    assert others[:, 0].max() == 2
    marked = others.copy()
    marked[:, 0] = 2
    reals_no2 = reals.copy()
    reals_no2[:, 0] = reals_no2[:, 0] % 2
    won = distinguishing_game(reals_no2, marked, sizes=sizes, n_train=500, n_test=500, rng=np.random.default_rng(1))
    assert won == {"RF": 1.0, "Tree": 1.0}
    # Same distribution: the held-out accuracy is a fair coin's up to sampling (sd ≈ 0.011 at
    # 2,000 test records); the seed is fixed, so this cannot flake.
    guess = distinguishing_game(reals, others, sizes=sizes, n_train=1000, n_test=1000, rng=np.random.default_rng(2))
    assert all(abs(accuracy - 0.5) < 0.05 for accuracy in guess.values())
    with pytest.raises(SchemaError, match=r"others \(2998 records\) must hold at least n_train \+ n_test = 2999"):
        distinguishing_game(reals, others[:2998], sizes=sizes, n_train=2998, n_test=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"n_test \(0\) must be an int >= 1"):
        distinguishing_game(reals, others, sizes=sizes, n_train=10, n_test=0, rng=np.random.default_rng(0))


# --- DP ERM (Table 4 baselines) ----------------------------------------------------------------


@pytest.mark.statistical
def test_the_noise_vector_has_a_gamma_norm_and_a_uniform_direction() -> None:
    d, beta, draws = 7, 2.5, 20000
    noise = sample_l2_laplace_noise(d, beta, np.random.default_rng(2024), size=draws)
    norms = np.linalg.norm(noise, axis=1)
    assert stats.kstest(norms, stats.gamma(a=d, scale=1 / beta).cdf).pvalue > 0.01
    # A Gamma(d, 1/β) with a wrong shape or scale is rejected at this sample size.
    assert stats.kstest(norms, stats.gamma(a=d, scale=1.1 / beta).cdf).pvalue < 1e-6
    assert stats.kstest(norms, stats.gamma(a=d - 1, scale=1 / beta).cdf).pvalue < 1e-6
    directions = noise / norms[:, None]
    assert np.abs(directions.mean(axis=0)).max() < 5 / math.sqrt(d * draws)
    np.testing.assert_allclose(directions.T @ directions / draws, np.eye(d) / d, atol=5 / (d * math.sqrt(draws)))


def binary_task(n: int, seed: int) -> tuple[Domain, pd.DataFrame]:
    sizes = (3, 4, 5, 2)
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.integers(0, s, n) for s in sizes[:3]])
    logit = 2.0 * (x[:, 0] == 1) - 1.5 * (x[:, 1] == 2) + 0.3 * x[:, 2] - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    domain = domain_of(sizes)
    return domain, pd.DataFrame(np.column_stack([x, y]), columns=list(domain.names))


def fit_dp(data: pd.DataFrame, domain: Domain, seed: int = 5, **params: object) -> tuple[DPLinearClassifier, Ledger]:
    ledger = Ledger(epsilon_cap=None)
    estimator = DPLinearClassifier(DPLinearClassifierParams(**params))  # type: ignore[arg-type]
    estimator.fit(data, domain=domain, target="d", ledger=ledger, source=SeededSource(np.random.default_rng(seed)))
    return estimator, ledger


def test_features_have_unit_norm_from_the_public_domain() -> None:
    domain, data = binary_task(50, 0)
    features, labels = erm_features(data.to_numpy(), domain.sizes, 3)
    assert features.shape == (50, 3 + 4 + 5 + 1)
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(labels, np.where(data["d"] == 1, 1.0, -1.0))


def test_the_nonprivate_fit_is_scikit_learns_logistic_regression() -> None:
    from sklearn.linear_model import LogisticRegression

    domain, data = binary_task(1500, 1)
    features, labels = erm_features(data.to_numpy(), domain.sizes, 3)
    lam = 1e-3
    ours, gradient = fit_erm(features, labels, loss="logistic", regularization=lam)
    theirs = LogisticRegression(C=1 / (lam * len(labels)), fit_intercept=False, tol=1e-12, max_iter=10000)
    theirs.fit(features, labels)
    assert gradient < 1e-8
    np.testing.assert_allclose(ours, theirs.coef_[0], atol=1e-4)


def test_nonprivate_accuracies_over_the_lambda_grid() -> None:
    domain, data = binary_task(1200, 9)
    codes = data.to_numpy()
    accuracies = nonprivate_erm_accuracies(codes[:800], codes[800:], sizes=domain.sizes, target=3, loss="huber",
                                           regularizations=(1e-2, 10.0))
    features, labels = erm_features(codes, domain.sizes, 3)
    coef, _ = fit_erm(features[:800], labels[:800], loss="huber", regularization=1e-2)
    assert accuracies[1e-2] == np.mean((features[800:] @ coef > 0) == (labels[800:] > 0))
    # At λ = 10 every margin is below 1 − h, where the Huber loss is linear, so the minimiser is
    # f = Σ y_i x_i / (nλ): the class-mean-difference classifier, exactly.
    mean_difference = features[:800].T @ labels[:800]
    assert accuracies[10.0] == np.mean((features[800:] @ mean_difference > 0) == (labels[800:] > 0))
    assert accuracies[10.0] != accuracies[1e-2]
    with pytest.raises(SchemaError, match=r"target \(1\) must be the index of an attribute with exactly 2"):
        nonprivate_erm_accuracies(codes, codes, sizes=domain.sizes, target=1, loss="huber")


@pytest.mark.parametrize("loss", ["logistic", "huber"])
def test_output_perturbation_adds_exactly_the_recorded_noise(loss: str) -> None:
    domain, data = binary_task(800, 2)
    epsilon, lam = 0.7, 0.02
    estimator, ledger = fit_dp(data, domain, epsilon=epsilon, regularization=lam, loss=loss, perturbation="output")
    [event] = ledger.events
    n, d = 800, 3 + 4 + 5 + 1
    assert (event.mechanism, event.epsilon, event.delta) == ("erm_output_perturbation", epsilon, 0.0)
    assert event.sensitivity == 2 / (n * lam) == output_perturbation_sensitivity(n, lam)
    assert event.noise_scale == 2 / (n * lam) / epsilon
    details = dict(event.details)
    assert (details["dimension"], details["loss"], details["regularization"]) == (d, loss, lam)
    assert details["beta"] == pytest.approx(n * lam * epsilon / 2, rel=1e-12)
    features, labels = erm_features(data.to_numpy(), domain.sizes, 3)
    exact, _ = fit_erm(features, labels, loss=loss, regularization=lam)
    noise = sample_l2_laplace_noise(d, details["beta"],
                                    SeededSource(np.random.default_rng(5)).dp_generator(purpose="dp_erm.noise"))
    np.testing.assert_allclose(estimator.coef_ - exact, noise, atol=1e-6)
    assert estimator.events_ == ledger.events


@pytest.mark.parametrize("loss", ["logistic", "huber"])
def test_objective_perturbation_solves_the_objective_with_exactly_the_recorded_noise(loss: str) -> None:
    # The first-order condition of J(f) + bᵀf/n + (Δ/2)‖f‖²: ∇J_{λ+Δ}(f_priv) = −b/n, with b
    # the dp_generator's draw of density ∝ exp(−(ε'/2)‖b‖); small n, λ put Δ > 0 for logistic.
    domain, data = binary_task(300, 12)
    estimator, ledger = fit_dp(data, domain, seed=9, epsilon=0.8, regularization=1e-3, loss=loss,
                               perturbation="objective")
    details = dict(ledger.events[0].details)
    d, n = int(details["dimension"]), 300
    noise = sample_l2_laplace_noise(d, details["beta"],
                                    SeededSource(np.random.default_rng(9)).dp_generator(purpose="dp_erm.noise"))
    assert details["beta"] == pytest.approx(estimator.epsilon_prime_ / 2, rel=1e-12)
    features, labels = erm_features(data.to_numpy(), domain.sizes, 3)
    total = 1e-3 + details["delta_regularization"]
    f = estimator.coef_
    z = labels * (features @ f)
    slope = -1 / (1 + np.exp(z)) if loss == "logistic" else np.where(z > 1.5, 0.0, np.where(z < 0.5, -1.0, -(1.5 - z)))
    gradient = features.T @ (slope * labels) / n + total * f
    np.testing.assert_allclose(gradient, -noise / n, atol=1e-6)


def test_objective_perturbation_records_epsilon_prime_and_the_delta_branch() -> None:
    domain, data = binary_task(400, 3)
    epsilon, lam = 1.0, 0.05
    _, ledger = fit_dp(data, domain, epsilon=epsilon, regularization=lam, loss="huber", perturbation="objective",
                       huber_h=0.5)
    [event] = ledger.events
    c = 1 / (2 * 0.5)
    epsilon_prime = epsilon - math.log(1 + 2 * c / (400 * lam) + c**2 / (400 * lam) ** 2)
    assert epsilon_prime > 0
    details = dict(event.details)
    assert (event.epsilon, event.sensitivity) == (epsilon, 2.0)
    assert details["epsilon_prime"] == pytest.approx(epsilon_prime, rel=1e-12)
    assert event.noise_scale == pytest.approx(2 / epsilon_prime, rel=1e-12)
    assert (details["delta_regularization"], details["curvature"], details["beta"]) == \
        (0.0, 1.0, pytest.approx(epsilon_prime / 2, rel=1e-12))
    # ε' ≤ 0 (small nλ): Δ tops λ up so that the Jacobian term is exactly ε/2 and ε' = ε/2.
    n, lam, c = 100, 1e-4, loss_curvature("logistic")
    assert c == 0.25 and loss_curvature("huber", 0.25) == 2.0
    epsilon_prime, delta = objective_perturbation_parameters(1.0, n, lam, c)
    assert epsilon_prime == 0.5 and delta == pytest.approx(c / (n * math.expm1(0.25)) - lam, rel=1e-12) and delta > 0
    total = lam + delta
    assert math.log(1 + 2 * c / (n * total) + (c / (n * total)) ** 2) == pytest.approx(0.5, rel=1e-12)
    small_domain, small = binary_task(n, 4)
    estimator, ledger = fit_dp(small, small_domain, epsilon=1.0, regularization=lam, perturbation="objective")
    assert dict(ledger.events[0].details)["delta_regularization"] == delta
    assert (estimator.epsilon_prime_, estimator.delta_regularization_) == (0.5, delta)


@pytest.mark.parametrize("loss", ["logistic", "huber"])
@pytest.mark.parametrize("perturbation", ["output", "objective"])
def test_at_large_epsilon_the_dp_fit_approaches_the_nonprivate_fit(loss: str, perturbation: str) -> None:
    domain, data = binary_task(1000, 6)
    features, labels = erm_features(data.to_numpy(), domain.sizes, 3)
    exact, _ = fit_erm(features, labels, loss=loss, regularization=0.01)
    estimator, _ = fit_dp(data, domain, epsilon=1e5, regularization=0.01, loss=loss, perturbation=perturbation)
    assert np.linalg.norm(estimator.coef_ - exact) < 1e-3 * max(1.0, np.linalg.norm(exact))
    assert agreement_rate(estimator.predict(data), (features @ exact > 0).astype(np.int64)) >= 0.99
    # ... and at ε = 0.01 it does not (the noise dominates), so the first check can fail.
    noisy, _ = fit_dp(data, domain, epsilon=0.01, regularization=0.01, loss=loss, perturbation=perturbation)
    assert np.linalg.norm(noisy.coef_ - exact) > 0.5 * np.linalg.norm(exact)


def test_bad_dp_erm_input_is_refused_before_anything_is_charged() -> None:
    for params, message in (({"epsilon": 0.0, "regularization": 0.1}, r"epsilon \(0.0\) must be a finite real number > 0"),
                            ({"epsilon": -1.0, "regularization": 0.1}, r"epsilon \(-1.0\) must be"),
                            ({"epsilon": 1.0, "regularization": 0.0},
                             r"regularization \(0.0\) must be a finite real number > 0"),
                            ({"epsilon": 1.0, "regularization": 0.1, "loss": "hinge"}, r"loss \('hinge'\) must be one of"),
                            ({"epsilon": 1.0, "regularization": 0.1, "perturbation": "input"},
                             r"perturbation \('input'\) must be one of"),
                            ({"epsilon": 1.0, "regularization": 0.1, "loss": "huber", "huber_h": 0.0},
                             r"huber_h \(0.0\) must be a finite real number > 0")):
        with pytest.raises(SpecError, match=message):
            DPLinearClassifierParams(**params)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"epsilon \('1'\) must be a finite real number > 0"):
        DPLinearClassifierParams(epsilon="1", regularization=0.1)  # type: ignore[arg-type]
    domain, data = binary_task(100, 7)
    estimator = DPLinearClassifier(DPLinearClassifierParams(epsilon=1.0, regularization=0.1))
    ledger = Ledger(epsilon_cap=None)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(SchemaError, match=r"target \('b', 4 categories\) must have exactly 2 categories"):
        estimator.fit(data, domain=domain, target="b", ledger=ledger, source=SeededSource(rng))
    with pytest.raises(SchemaError, match=r"target \('income'\) must be an attribute of the domain"):
        estimator.fit(data, domain=domain, target="income", ledger=ledger, source=SeededSource(rng))
    with pytest.raises(SchemaError, match="missing column"):
        estimator.fit(data.drop(columns="a"), domain=domain, target="d", ledger=ledger, source=SeededSource(rng))
    assert not ledger.events and rng.bit_generator.state == state and not estimator.is_fitted
    with pytest.raises(SpecError, match=r"n \(0\) must be an int >= 1"):
        estimator.planned_events(domain, 0, target="d")


def test_coded_tables_and_one_hot_rows() -> None:
    frame = pd.DataFrame({"x": [0, 2, 1], "y": [1, 0, 1]})
    codes = coded_table(frame, (3, 2))
    assert codes.dtype == np.int64 and codes.tolist() == [[0, 1], [2, 0], [1, 1]]
    assert one_hot(codes, (3, 2)).toarray().tolist() == [[1, 0, 0, 0, 1], [0, 0, 1, 1, 0], [0, 1, 0, 0, 1]]
    with pytest.raises(SchemaError, match="table column 'y' has a code outside 0..0"):
        coded_table(frame, (3, 1))
    with pytest.raises(SchemaError, match=r"table column 'x' \(float64\) must hold integer codes"):
        coded_table(frame.astype(float), (3, 2))
