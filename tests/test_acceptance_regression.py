"""Linear-regression acceptance criteria (Hod & Canetti 2024, Section 4.5.4 and 4.14): the
coefficient distance with the functional mechanism and the clipped-MAE criterion with the
corrected sensitivity 2(U − L)/n (Proposition 9, Section 4.14.2)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privlab.mechanisms.acceptance.base import criterion_from_spec, criterion_kinds
from privlab.mechanisms.acceptance.linear_fit import (
    PrivateLinearFit,
    clipped_mae,
    fit_private_regression,
    ols_coefficients,
    regression_data,
    scaled_design,
    standardized_coefficients,
)
from privlab.mechanisms.acceptance.regression import RegressionCoefficientsError, RegressionMAEError, mae_sensitivity
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import BudgetExceededError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter

CONTEXT = {"spec_sha256": "ab12", "data_sha256": "cd34"}
N_PAPER = 165_915

DOMAIN = Domain.from_columns([
    ColumnDomain(name="x1", labels=("0", "1", "2", "3"), values=(0.0, 1.0, 2.0, 3.0)),
    ColumnDomain(name="x2", labels=("10", "20", "30"), values=(10.0, 20.0, 30.0)),
    ColumnDomain(name="y", labels=tuple(str(v) for v in range(100, 700, 100)),
                 values=(100.0, 200.0, 300.0, 400.0, 500.0, 600.0)),
    ColumnDomain(name="z", labels=("a", "b")),
])
BOUNDS = (100.0, 600.0)
COLUMNS = {"response": "y", "covariates": ["x1", "x2"], "response_bounds": BOUNDS}


def _frame(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """y rises with x1 (plus noise) so the regressions have signal."""
    x1 = rng.integers(0, 4, size=n)
    x2 = rng.integers(0, 3, size=n)
    y = np.clip(x1 + rng.integers(-1, 3, size=n), 0, 5)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y, "z": rng.integers(0, 2, size=n)})


def _coef(**kw: object) -> RegressionCoefficientsError:
    return RegressionCoefficientsError(**{"name": "coef", "threshold": 30.0, "epsilon": 0.43, **COLUMNS, **kw})


def _mae(**kw: object) -> RegressionMAEError:
    return RegressionMAEError(**{"name": "mae", "threshold": 5.0, "epsilon": 0.04, **COLUMNS, **kw})


def _fit(coefficients: tuple[float, ...], epsilon: float = 0.43) -> PrivateLinearFit:
    return PrivateLinearFit(response="y", covariates=("x1", "x2"), coefficients=coefficients, epsilon=epsilon,
                            sensitivity=32.0, noise_scale=32.0 / epsilon, mechanism="functional_mechanism/laplace")


def _objective_coefficients(features: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The functional mechanism's released vector, computed independently: Σy², −2Σx_k y,
    Σx_k² and 2Σx_k x_l (k < l)."""
    d = features.shape[1]
    quad = [(1.0 if k == l else 2.0) * float(features[:, k] @ features[:, l]) for k in range(d) for l in range(k, d)]
    return np.array([float(target @ target), *(-2.0 * features.T @ target), *quad])


# --- algebra -----------------------------------------------------------------------------------


def test_ols_standardisation_and_distance_by_hand() -> None:
    # y = 100 + 100·x1 exactly, x2 irrelevant
    frame = pd.DataFrame({"x1": [0, 1, 2, 3, 0, 1, 2, 3], "x2": [0, 0, 1, 1, 2, 2, 0, 1],
                          "y": [0, 1, 2, 3, 0, 1, 2, 3], "z": 0})
    x, y = regression_data(frame, domain=DOMAIN, response="y", covariates=["x1", "x2"],
                           response_bounds=BOUNDS, what="t")
    np.testing.assert_allclose(ols_coefficients(x, y), [100.0, 100.0, 0.0], atol=1e-9)
    sd1 = math.sqrt(1.25)  # population sd of (0, 1, 2, 3) twice
    np.testing.assert_allclose(standardized_coefficients(np.array([100.0, 100.0, 0.0]), x.mean(0), x.std(0)),
                               [100 + 100 * 1.5, 100 * sd1, 0.0])
    # distance of w = (100, 110, 1) to the candidate's OLS fit (100, 100, 0), standardised with
    # the candidate: intercept gap 10·1.5 + 1·mean(x2), slopes 10·sd1 and 1·sd2
    sd2 = float(x[:, 1].std())
    gaps = np.array([15 + x[:, 1].mean(), 10 * sd1, sd2])
    assert _coef().distance((100.0, 110.0, 1.0), frame, domain=DOMAIN) == pytest.approx(gaps.sum())
    assert _coef(norm="max").distance((100.0, 110.0, 1.0), frame, domain=DOMAIN) == pytest.approx(gaps.max())
    assert _coef(count_intercept=False).distance((100.0, 110.0, 1.0), frame, domain=DOMAIN) == pytest.approx(
        gaps[1:].sum())


def test_standardised_coefficients_equal_a_refit_on_standardised_covariates() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 3)) * [1, 5, 0.2] + [3, -1, 8]
    y = x @ [2.0, -1.0, 4.0] + rng.normal(size=300)
    means, sds = x.mean(0), x.std(0)
    np.testing.assert_allclose(standardized_coefficients(ols_coefficients(x, y), means, sds),
                               ols_coefficients((x - means) / sds, y), rtol=1e-9, atol=1e-9)


def test_clipped_mae_by_hand() -> None:
    x = np.array([[0.0, 10.0], [3.0, 30.0]])
    y = np.array([100.0, 600.0])
    # predictions 0·1000 → clipped 100 and 3000 → clipped 600: no error
    assert clipped_mae(np.array([0.0, 1000.0, 0.0]), x, y, BOUNDS) == 0.0
    # predictions 350 and 350: errors 250 and 250
    assert clipped_mae(np.array([350.0, 0.0, 0.0]), x, y, BOUNDS) == 250.0
    # the MAE criterion's gap: |MAE_R(w) − MAE_R(w_S)| with w_S = OLS on S
    frame = pd.DataFrame({"x1": [0, 3], "x2": [0, 2], "y": [0, 5], "z": 0})
    assert _mae().gap((350.0, 0.0, 0.0), frame, frame, domain=DOMAIN) == pytest.approx(250.0)


def test_functional_mechanism_fit_approaches_ols_at_large_epsilon() -> None:
    """Checks the scaling to [−1, 1] and back: at ε = 10⁸ the DP fit is the OLS fit."""
    rng = np.random.default_rng(2)
    r = _frame(rng, 3000)
    fit = fit_private_regression(r, domain=DOMAIN, response="y", covariates=["x1", "x2"], response_bounds=BOUNDS,
                                 epsilon=1e8, source=SeededSource(np.random.default_rng(0)),
                                 ledger=Ledger(epsilon_cap=None), name="t")
    x, y = regression_data(r, domain=DOMAIN, response="y", covariates=["x1", "x2"], response_bounds=BOUNDS, what="t")
    np.testing.assert_allclose(fit.coefficients, ols_coefficients(x, y), atol=1e-3)


# --- sensitivities -----------------------------------------------------------------------------


def test_sensitivity_formulas_by_hand() -> None:
    assert _coef().sensitivity(10) == 2 * (2 + 1 + 1) ** 2  # p = 2 covariates + intercept
    assert _coef(covariates=["x1"]).sensitivity(10) == 18.0
    assert _mae().sensitivity(250) == 2 * 500 / 250
    assert mae_sensitivity((1400.0, 4600.0), 100) == 64.0


def test_functional_mechanism_sensitivity_holds_on_random_and_extreme_neighbours() -> None:
    """The L1 change of the released objective coefficients stays within 2(p+1)² = 32.

    Replacing record a by b changes the vector by v(a) − v(b) (per-record contributions), so
    enumerating every pair of domain records is exhaustive for this domain: the largest change
    is (p+1)² = 16, reached by corner records. The stated bound is valid and conservative by a
    factor 2 (the squared terms never change sign). Random dataset pairs check the same through
    the public design function."""
    lower, upper = np.array([0.0, 10.0]), np.array([3.0, 30.0])
    delta = _coef().sensitivity(1)

    def vector(frame: pd.DataFrame) -> np.ndarray:
        x, y = regression_data(frame, domain=DOMAIN, response="y", covariates=["x1", "x2"],
                               response_bounds=BOUNDS, what="t")
        return _objective_coefficients(*scaled_design(x, y, lower=lower, upper=upper, response_bounds=BOUNDS))

    grid = np.array(np.meshgrid(range(4), range(3), range(6), indexing="ij")).reshape(3, -1).T
    records = pd.DataFrame({"x1": grid[:, 0], "x2": grid[:, 1], "y": grid[:, 2], "z": 0})
    per_record = np.array([vector(records.iloc[[i]]) for i in range(len(records))])
    pair_max = max(float(np.abs(per_record - v).sum(axis=1).max()) for v in per_record)
    assert pair_max == pytest.approx(16.0) and pair_max <= delta

    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(2, 30))
        r = _frame(rng, n)
        r2 = r.copy()
        row = (0, 0, 5) if trial % 2 else (rng.integers(4), rng.integers(3), rng.integers(6))
        r2.iloc[int(rng.integers(n)), :3] = row
        assert float(np.abs(vector(r) - vector(r2)).sum()) <= pair_max + 1e-9


def test_mae_sensitivity_holds_on_random_neighbours_with_any_public_fits() -> None:
    rng = np.random.default_rng(4)
    c = _mae()
    for trial in range(300):
        n = int(rng.integers(3, 40))
        r, s = _frame(rng, n), _frame(rng, n)
        r2 = r.copy()
        r2.iloc[int(rng.integers(n)), :3] = (rng.integers(4), rng.integers(3), (0, 5)[trial % 2])
        w_r = tuple(rng.normal(0, 300, size=3))
        change = abs(c.gap(w_r, r, s, domain=DOMAIN) - c.gap(w_r, r2, s, domain=DOMAIN))
        assert change <= c.sensitivity(n) + 1e-9


def test_mae_sensitivity_is_attained_so_the_production_value_was_half_the_truth() -> None:
    """Section 4.14.2: with w_R predicting U and w_S predicting L on the same x, replacing a
    y = U record by a y = L record moves the gap by exactly 2(U − L)/n, twice the (U − L)/n
    used in production."""
    n = 10
    c = _mae()
    s = pd.DataFrame({"x1": 0, "x2": 0, "y": [5] * n, "z": 0})  # OLS on S predicts 600 = U
    assert clipped_mae(ols_coefficients(*c.data(s, domain=DOMAIN, what="t")), *c.data(s, domain=DOMAIN, what="t"),
                       BOUNDS) == pytest.approx(0.0, abs=1e-9)
    w_r = (100.0, 0.0, 0.0)  # predicts L
    r = pd.DataFrame({"x1": 0, "x2": 0, "y": [5] * 3 + [0] * 7, "z": 0})
    r2 = r.copy()
    r2.loc[0, "y"] = 0  # a y = U record becomes y = L
    change = abs(c.gap(w_r, r, s, domain=DOMAIN) - c.gap(w_r, r2, s, domain=DOMAIN))
    assert change == pytest.approx(c.sensitivity(n)) == pytest.approx(2 * 500 / n)
    assert change > (BOUNDS[1] - BOUNDS[0]) / n


# --- releases: ledger, noise, modes ------------------------------------------------------------


def test_coefficient_release_charges_the_functional_mechanism() -> None:
    rng = np.random.default_rng(5)
    r, s = _frame(rng, 400), _frame(rng, 400)
    ledger = Ledger(epsilon_cap=1.0)
    result = _coef().release(r, s, domain=DOMAIN, source=SeededSource(np.random.default_rng(1)), ledger=ledger)
    (event,) = ledger.events
    assert (event.name, event.epsilon, event.sensitivity) == ("acceptance:coef", 0.43, 32.0)
    assert event.noise_scale == pytest.approx(32.0 / 0.43)
    assert (result.epsilon, result.sensitivity, result.noise_scale) == (0.43, 32.0, event.noise_scale)
    assert result.mechanism == "functional_mechanism/laplace"
    dp = [v for k, v in result.details if k.startswith("dp_coefficient:")]
    assert result.dp_value == pytest.approx(_coef().distance(dp, s, domain=DOMAIN))
    assert result.true_value == pytest.approx(_coef().error(r, s, domain=DOMAIN))
    assert result.passed == (result.dp_value < 30.0)


def test_mae_release_with_its_own_fit_charges_two_events_and_checks_the_budget_first() -> None:
    rng = np.random.default_rng(6)
    r, s = _frame(rng, 300), _frame(rng, 300)
    c = _mae(fit_epsilon=0.43)
    ledger = Ledger(epsilon_cap=0.5)
    result = c.release(r, s, domain=DOMAIN, source=SeededSource(np.random.default_rng(1)), ledger=ledger)
    fit_event, mae_event = ledger.events
    assert (fit_event.name, fit_event.epsilon, fit_event.sensitivity) == ("acceptance:mae:fit", 0.43, 32.0)
    assert (mae_event.name, mae_event.epsilon) == ("acceptance:mae", 0.04)
    assert mae_event.sensitivity == pytest.approx(2 * 500 / 300)
    assert mae_event.noise_scale == pytest.approx(2 * 500 / 300 / 0.04)
    assert (result.sensitivity, result.noise_scale, result.bounds) == (
        mae_event.sensitivity, mae_event.noise_scale, BOUNDS)
    planned = c.planned_events(300)
    assert [(e.name, e.epsilon, e.sensitivity) for e in planned] == [
        (e.name, e.epsilon, e.sensitivity) for e in ledger.events]
    tight = Ledger(epsilon_cap=0.45)  # fits the fit (0.43) but not the fit and the release
    with pytest.raises(BudgetExceededError):
        c.release(r, s, domain=DOMAIN, source=SeededSource(np.random.default_rng(1)), ledger=tight)
    assert tight.events == ()


def test_one_fit_serves_both_criteria_in_every_iteration() -> None:
    """Section 4.14.1: fit w^ε(R) once before the selection loop, reuse it in each iteration."""
    rng = np.random.default_rng(7)
    r = _frame(rng, 300)
    ledger = Ledger(epsilon_cap=None)
    source = SeededSource(np.random.default_rng(2))
    coef, mae = _coef(), _mae()
    fit = coef.fit_private(r, domain=DOMAIN, epsilon=coef.epsilon, source=source, ledger=ledger)
    for _ in range(3):
        candidate = _frame(rng, 300)
        a = coef.release(r, candidate, domain=DOMAIN, source=source, ledger=ledger, fit=fit)
        b = mae.release(r, candidate, domain=DOMAIN, source=source, ledger=ledger, fit=fit)
        assert a.dp_value == pytest.approx(coef.distance(fit.coefficients, candidate, domain=DOMAIN))
        assert b.true_value == pytest.approx(mae.gap(fit.coefficients, r, candidate, domain=DOMAIN))
    assert [e.name for e in ledger.events] == ["acceptance:coef"] + ["acceptance:mae"] * 3
    assert ledger.total().epsilon == pytest.approx(0.43 + 3 * 0.04)


@pytest.mark.statistical
def test_released_mae_noise_has_the_stated_laplace_scale() -> None:
    rng = np.random.default_rng(8)
    r, s = _frame(rng, 40), _frame(rng, 40)
    c = _mae(epsilon=1.0)
    fit = _fit((150.0, 90.0, 0.5))
    source = SeededSource(np.random.default_rng(9))
    noise = []
    for _ in range(1200):
        result = c.release(r, s, domain=DOMAIN, source=source, ledger=Ledger(epsilon_cap=None), fit=fit)
        noise.append(result.dp_value - result.true_value)
    scale = 2 * 500 / 40 / 1.0
    noise = np.array(noise)
    # E|X| = b, standard error b/√1200 ≈ 2.9%; tolerance ≈ 4 standard errors; plus a KS test.
    assert abs(np.mean(np.abs(noise)) / scale - 1) < 0.12
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3


def test_research_mode_attaches_the_true_value_and_release_mode_does_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    r, s = _frame(rng, 200), _frame(rng, 200)
    for c in (_coef(), _mae(fit_epsilon=0.43)):
        research = c.release(r, s, domain=DOMAIN, source=SeededSource(np.random.default_rng(1)),
                             ledger=Ledger(epsilon_cap=None))
        assert research.true_value is not None
        with TranscriptWriter(tmp_path / f"{c.name}.bin", context=CONTEXT) as writer:
            ledger = Ledger(epsilon_cap=None)
            released = c.release(r, s, domain=DOMAIN, source=SecureSource(writer), ledger=ledger)
        assert released.true_value is None
        assert all(e.mechanism == "laplace_lattice" for e in ledger.events)
        assert all(k == "fit_epsilon" or k.startswith("dp_coefficient:") for k, _ in released.details)


# --- configuration errors ----------------------------------------------------------------------


@pytest.mark.parametrize(("change", "key"), [
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": -0.4}, "epsilon"),
    ({"response_bounds": [600, 100]}, "response_bounds"),
    ({"response_bounds": [100, math.nan]}, "response_bounds"),
    ({"covariates": []}, "covariates"),
    ({"covariates": ["x1", "y"]}, "covariates"),
    ({"covariates": "x1"}, "covariates"),
    ({"response": ""}, "response"),
    ({"ridge": -1.0}, "ridge"),
    ({"norm": "l2"}, "norm"),
    ({"target": "y"}, "target"),
])
def test_bad_configs_raise_spec_errors_naming_the_key(change: dict[str, object], key: str) -> None:
    spec = {"kind": "regression_coefficients", "name": "coef", "threshold": 30.0, "epsilon": 0.43,
            "response": "y", "covariates": ["x1", "x2"], "response_bounds": [100, 600], **change}
    with pytest.raises(SpecError, match=key):
        criterion_from_spec(spec, where="acceptance[5]")
    with pytest.raises(SpecError, match=key):  # regression_mae has no norm: "unknown key(s) norm"
        criterion_from_spec({**spec, "kind": "regression_mae", "threshold": 5.0}, where="acceptance[6]")


def test_bad_fit_epsilon_raises_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"fit_epsilon \(0\) must be"):
        criterion_from_spec({"kind": "regression_mae", "name": "mae", "threshold": 5.0, "epsilon": 0.04,
                             "response": "y", "covariates": ["x1"], "response_bounds": [100, 600],
                             "fit_epsilon": 0}, where="acceptance[6]")


@pytest.mark.parametrize(("change", "message"), [
    ({"response": "zz"}, "response names column 'zz'"),
    ({"covariates": ["x1", "zz"]}, "covariates names column 'zz'"),
    ({"covariates": ["x1", "z"]}, "covariates column 'z' is nominal"),
])
def test_domain_mismatches_raise_spec_errors_naming_the_key(change: dict[str, object], message: str) -> None:
    r = _frame(np.random.default_rng(0), 20)
    for c in (_coef(**change), _mae(**change)):
        with pytest.raises(SpecError, match=message):
            c.error(r, r, domain=DOMAIN)


def test_mae_needs_a_fit_and_fits_must_match_the_criterion() -> None:
    r = _frame(np.random.default_rng(0), 20)
    source, ledger = SeededSource(np.random.default_rng(0)), Ledger(epsilon_cap=None)
    with pytest.raises(SpecError, match="set fit_epsilon"):
        _mae().release(r, r, domain=DOMAIN, source=source, ledger=ledger)
    other = PrivateLinearFit(response="y", covariates=("x1",), coefficients=(1.0, 2.0), epsilon=0.43,
                             sensitivity=18.0, noise_scale=1.0, mechanism="m")
    with pytest.raises(SpecError, match="declares 'y' on"):
        _mae().release(r, r, domain=DOMAIN, source=source, ledger=ledger, fit=other)
    with pytest.raises(SpecError, match="epsilon"):
        _coef().release(r, r, domain=DOMAIN, source=source, ledger=ledger, fit=_fit((1.0, 2.0, 3.0), epsilon=0.2))
    assert ledger.events == ()


# --- Table 2 -----------------------------------------------------------------------------------


def test_table2_regression_rows() -> None:
    """MAE row: ε = 0.04, [1400, 4600], Δ = 0.039, σ = 1.364 with n = 165,915 — the corrected
    Δ = 2(U − L)/n at the doubled ε. The production pair (Δ/2, ε = 0.02) had the same σ, which
    is why the correction left the table's σ and the release's noise unchanged."""
    mae = _mae(response_bounds=(1400.0, 4600.0), epsilon=0.04)
    delta = mae.sensitivity(N_PAPER)
    sigma = math.sqrt(2) * delta / 0.04
    assert (round(delta, 3), round(sigma, 3)) == (0.039, 1.364)
    assert math.sqrt(2) * (delta / 2) / 0.02 == pytest.approx(sigma)
    # Coefficients row: Table 2 prints no Δ or σ; with the five other birth columns as
    # covariates the functional mechanism's Δ is 2·(5 + 1 + 1)² = 98 (scaled units).
    five = RegressionCoefficientsError(name="c", threshold=30.0, epsilon=0.43, response="w",
                                       covariates=["a", "b", "c", "d", "e"], response_bounds=(1400.0, 4600.0))
    assert five.sensitivity(N_PAPER) == 98.0


# --- registry, budget, inputs ------------------------------------------------------------------


def test_kinds_are_registered_and_built_from_toml() -> None:
    assert {"regression_coefficients", "regression_mae"} <= set(criterion_kinds())
    spec = tomllib.loads("""
        [[acceptance]]
        kind = "regression_coefficients"
        name = "lr_coefficients"
        threshold = 30
        epsilon = 0.43
        response = "birth_weight"
        covariates = ["birth_month", "mother_age", "parity", "gestation_week", "birth_sex"]
        response_bounds = [1400, 4600]

        [[acceptance]]
        kind = "regression_mae"
        name = "lr_mae"
        threshold = 5
        epsilon = 0.04
        response = "birth_weight"
        covariates = ["birth_month", "mother_age", "parity", "gestation_week", "birth_sex"]
        response_bounds = [1400, 4600]
    """)
    coef, mae = (criterion_from_spec(t, where=f"acceptance[{i}]") for i, t in enumerate(spec["acceptance"]))
    assert isinstance(coef, RegressionCoefficientsError) and coef.norm == "l1" and coef.bounds == (1400.0, 4600.0)
    assert isinstance(mae, RegressionMAEError) and mae.fit_epsilon is None
    assert mae.covariates == coef.covariates == ("birth_month", "mother_age", "parity", "gestation_week", "birth_sex")


def test_a_categorical_covariate_with_declared_numbers_enters_the_regression() -> None:
    """Categorical covariates (issue 13 item 4): nominal is refused with a hint that works (a values
    key the transformation loader accepts); with declared numbers the criterion runs."""
    from privlab.mechanisms.tabular.schema import RawColumn
    from privlab.mechanisms.tabular.transform_specs import column_transform_from_spec

    education = RawColumn(name="education", type="categorical", categories=("HS-grad", "Bachelors", "Masters"))
    nominal = column_transform_from_spec({"kind": "categorical"}, name="z", column=education, where="t")
    domain = Domain.from_columns([*(c for c in DOMAIN if c.name != "z"), nominal.domain])
    spec = {**COLUMNS, "covariates": ["x1", "z"]}
    with pytest.raises(SpecError, match=r"covariates column 'z' is nominal; declare a public number per category "
                                        r"with values = \[\.\.\.\] in its transformation alternative"):
        _coef(**spec).check_domain(domain)
    numbered = column_transform_from_spec({"kind": "categorical", "values": [12, 16, 18]}, name="z", column=education,
                                          where="t")
    domain = Domain.from_columns([*(c for c in DOMAIN if c.name != "z"), numbered.domain])
    criterion = _coef(**spec)
    criterion.check_domain(domain)
    rng = np.random.default_rng(16)
    r, s = _frame(rng, 300), _frame(rng, 300)
    ledger = Ledger(epsilon_cap=None)
    result = criterion.release(r, s, domain=domain, source=SeededSource(np.random.default_rng(1)), ledger=ledger)
    assert np.isfinite(result.dp_value) and [e.epsilon for e in ledger.events] == [0.43]
    with pytest.raises(SpecError, match=r"values \(\[12, 16\]\) must be 3 finite numbers, one per code"):
        column_transform_from_spec({"kind": "categorical", "values": [12, 16]}, name="z", column=education, where="t")
