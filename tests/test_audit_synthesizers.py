"""The synthesizers' distinguishing games (mechanisms/synthesizers/audit.py): registry coverage,
the white-box statistic's exact law, bad input, and end-to-end verdicts at tiny trial counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privlab.mechanisms.synthesizers import audit as game
from privlab.mechanisms.synthesizers import privbayes
from privlab.mechanisms.synthesizers.base import synthesizer_names
from privlab.platform.audit import audit_run
from privlab.platform.audit.auditables import auditable_names, get_auditable
from privlab.platform.core.errors import RegistryError, SpecError
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.run.runner import RunOptions


def test_every_registered_synthesizer_has_a_game():
    assert {f"synth_{name}" for name in synthesizer_names()} <= set(auditable_names())


def test_worst_case_pair_differs_in_one_record_in_every_outlier_column():
    params = get_auditable("synth_independent_marginals").Params(epsilon=1.0, n=10, columns=3, categories=4)
    d, d_prime = game.worst_case_pair(params)
    assert (d.to_numpy() == 0).all()
    assert (d_prime.to_numpy()[0] == 3).all() and (d_prime.to_numpy()[1:] == 0).all()
    params = get_auditable("synth_independent_marginals").Params(epsilon=1.0, n=10, columns=3, categories=4,
                                                                 outlier_columns=2)
    _, d_prime = game.worst_case_pair(params)
    assert d_prime.to_numpy()[0].tolist() == [0, 3, 3]


COMMON, TARGET = {"c0": 0, "c1": 0}, {"c0": 1, "c1": 1}


def test_gaussian_whitebox_statistic_is_standard_normal_under_d_and_shifted_under_d_prime():
    """Exact law, checked on simulated measurements: z ~ N(0,1) on D, N(sqrt(Σ 2/σ²), 1) on D′."""
    rng = np.random.default_rng(0)
    sizes = {"c0": 2, "c1": 2}
    sigmas = (3.0, 4.0, 2.5)
    cliques = (("c0",), ("c1",), ("c0", "c1"))
    shift = math.sqrt(sum(2 / s**2 for s in sigmas))

    def scores(moved: bool) -> np.ndarray:
        out = []
        for _ in range(4000):
            ms = []
            for clique, sigma in zip(cliques, sigmas, strict=True):
                exact = np.zeros(2 ** len(clique))
                exact[0] = 100 - moved
                exact[-1] = float(moved)
                ms.append((clique, exact + rng.normal(0, sigma, exact.size), sigma))
            out.append(game.whitebox_score(ms, gaussian=True, n=100, sizes=sizes, common=COMMON, target=TARGET))
        return np.array(out)

    on_d, on_d_prime = scores(False), scores(True)
    assert abs(on_d.mean()) < 0.07 and abs(on_d.std() - 1) < 0.05  # 4000 draws: > 4 sd margins
    assert abs(on_d_prime.mean() - shift) < 0.07


def test_laplace_whitebox_statistic_is_the_bounded_log_likelihood_ratio():
    sizes = {"c0": 2}
    b = 2.0
    far = [(("c0",), np.array([100.0 + 50, -50.0]), b)]  # both cells far on D's side
    assert game.whitebox_score(far, gaussian=False, n=100, sizes=sizes, common=COMMON, target=TARGET) == pytest.approx(-2 / b)
    near = [(("c0",), np.array([99.0 - 50, 51.0]), b)]
    assert game.whitebox_score(near, gaussian=False, n=100, sizes=sizes, common=COMMON, target=TARGET) == pytest.approx(2 / b)
    wrong_shape = [(("c0",), np.array([100.0]), b)]
    assert game.whitebox_score(wrong_shape, gaussian=False, n=100, sizes=sizes, common=COMMON, target=TARGET) == game.DOMAIN_MISMATCH_SCORE


def test_fitted_measurements_are_the_released_noisy_tables():
    auditable = get_auditable("synth_privbayes")
    params = auditable.Params(epsilon=1.0, hyperparameters='{"epsilon_split": 0.3, "degree": 1}')
    d, _ = auditable.neighbours(params, np.random.default_rng(0))
    fitted = game._fit(params, d, SeededSource(np.random.default_rng(1)))
    assert len(fitted.measurements_) == params.columns
    for clique, noisy, scale in fitted.measurements_:
        assert noisy.size == 2 ** len(clique) and scale > 0


@pytest.mark.parametrize(("name", "settings", "message"), [
    ("synth_mst", {"epsilon": 1.0}, "budgeted in zCDP: give the δ''"),
    ("synth_privbayes", {"epsilon": 1.0, "delta": 1e-3, "hyperparameters": '{"epsilon_split": 0.3, "degree": 1}'},
     "pure ε-DP: delta"),
    ("synth_independent_marginals", {"epsilon": 1.0, "columns": 13, "categories": 2}, "at most 4,096"),
    ("synth_independent_marginals", {"epsilon": 1.0, "threat": "greybox"}, "threat"),
    ("synth_independent_marginals", {"epsilon": 1.0, "hyperparameters": "[1]"}, "JSON object"),
])
def test_bad_parameters_are_refused_before_any_trial(name, settings, message):
    with pytest.raises(SpecError, match=message):
        get_auditable(name).Params(**settings)


def test_a_synthesizer_without_a_whitebox_view_is_told_to_run_blackbox(monkeypatch):
    monkeypatch.setattr(game, "declares_whitebox_view", lambda cls: False)
    with pytest.raises(SpecError, match="no white-box view.*threat=blackbox"):
        get_auditable("synth_independent_marginals").Params(epsilon=1.0)
    get_auditable("synth_independent_marginals").Params(epsilon=1.0, threat="blackbox")


def test_unknown_auditable_names_the_close_ones():
    with pytest.raises(RegistryError, match="synth_privbayes"):
        get_auditable("synth_privbays")


def test_too_few_trials_for_any_bound_are_refused_with_the_smallest_count():
    with pytest.raises(SpecError, match="smallest trial count that can give a bound is"):
        audit_run.prepare_audit("synth_independent_marginals", settings=["epsilon=1.0"], trials=5)


def _audit(uri: str, name: str, settings: list[str], trials: int, seed: int):
    request = audit_run.prepare_audit(name, settings=settings, trials=trials, seed=seed)
    result, _ = audit_run.run_audit(request, RunOptions(serial=True, tracking_uri=uri, progress=False))
    return result


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('synth-audit') / 'mlflow.db'}"


@pytest.mark.statistical
def test_correct_privbayes_is_not_flagged_and_its_bound_is_positive(uri):
    """One column: one table of ε, whose likelihood-ratio atoms at ±ε carry a quarter of the mass."""
    result = _audit(uri, "synth_privbayes", ["epsilon=1.0", "columns=1",
                                             'hyperparameters=\'{"epsilon_split": 0.1, "degree": 1}\''], 400, 3)
    assert not result.violation
    assert 0 < result.empirical <= 1.0


@pytest.mark.statistical
@pytest.mark.slow  # 4 s: kept under the default run's 6-minute budget
def test_privbayes_with_quarter_noise_is_flagged(uri, monkeypatch):
    """Tables released with a quarter of the Laplace scale the claim needs: ε_lb > ε."""
    monkeypatch.setattr(privbayes, "TABLE_SENSITIVITY", privbayes.TABLE_SENSITIVITY / 4)
    result = _audit(uri, "synth_privbayes", ["epsilon=1.0", 'hyperparameters=\'{"epsilon_split": 0.1, "degree": 1}\''],
                    400, 3)
    assert result.violation and result.empirical > 1.0


def test_privbayes_structure_ratio_is_zero_when_the_pair_moves_no_score_and_bounded_otherwise():
    """Replaying the exponential mechanism: the log ratio of the released network is within
    ±(structure ε) and is 0 when D and D′ give every candidate the same score."""
    auditable = get_auditable("synth_privbayes")
    hyper = '{"epsilon_split": 0.5, "degree": 1}'
    for outliers in (None, 2):
        params = auditable.Params(epsilon=1.0, columns=3, outlier_columns=outliers, hyperparameters=hyper)
        d, d_prime = game.worst_case_pair(params)
        ratios = []
        for seed in range(30):
            fitted = game._fit(params, d_prime, SeededSource(np.random.default_rng(seed)))
            ratios.append(game.privbayes_structure_llr(fitted, d, d_prime))
        assert all(abs(r) <= 0.5 + 1e-12 for r in ratios)
        if outliers is None:  # every pair of columns equally correlated by the outlier: no ratio
            assert all(abs(r) < 1e-12 for r in ratios)
        else:
            assert any(abs(r) > 1e-3 for r in ratios)


@pytest.mark.statistical
def test_pair_search_keeps_the_most_distinguishable_candidate():
    """One column puts all of ε on one table, whose likelihood-ratio atoms carry a quarter of the
    mass; three columns split it three ways: the pilot must prefer one column."""
    from privlab.platform.audit.pair_search import search_pairs

    result = search_pairs("synth_independent_marginals", {"epsilon": 2.0}, [{"columns": 3}, {"columns": 1}],
                          pilot_trials=300, seed=4)
    assert result.best["columns"] == 1
    assert result.candidates[1].epsilon_lower > result.candidates[0].epsilon_lower


def test_pair_search_refuses_bad_requests():
    from privlab.platform.audit.pair_search import search_pairs

    with pytest.raises(SpecError, match="not an ε audit"):
        search_pairs("pmse", {}, [{}], pilot_trials=10, seed=0)
    with pytest.raises(SpecError, match="at least one candidate"):
        search_pairs("synth_independent_marginals", {"epsilon": 1.0}, [], pilot_trials=10, seed=0)
    with pytest.raises(SpecError, match="columns"):
        search_pairs("synth_independent_marginals", {"epsilon": 1.0}, [{"columns": 0}], pilot_trials=10, seed=0)


def test_add_remove_pair_adds_the_target():
    params = get_auditable("synth_mst").Params(epsilon=1.0, delta=1e-2, n=10, columns=2, neighbouring="add-remove")
    d, d_prime = game.worst_case_pair(params)
    assert len(d) == 10 and len(d_prime) == 11
    assert d_prime.iloc[0].tolist() == [1, 1] and (d_prime.iloc[1:].to_numpy() == d.to_numpy()).all()
    with pytest.raises(SpecError, match="neighbouring"):
        get_auditable("synth_mst").Params(epsilon=1.0, delta=1e-2, neighbouring="swap")


def test_add_remove_gaussian_statistic_has_half_the_information():
    rng = np.random.default_rng(1)
    sizes = {"c0": 2}
    on_d_prime = []
    for _ in range(4000):
        exact = np.array([100.0, 1.0])  # D′ = D plus the target: x₀'s cell unchanged
        on_d_prime.append(game.whitebox_score([(("c0",), exact + rng.normal(0, 2.0, 2), 2.0)], gaussian=True, n=100,
                                              sizes=sizes, common={"c0": 0}, target={"c0": 1}, replace=False))
    assert np.mean(on_d_prime) == pytest.approx(0.5, abs=0.07)  # sqrt(1/σ²) = 1/2
