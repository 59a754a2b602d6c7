"""The pMSE utility studies (Table 2 / Figure 3 and Section 6): method variants, exact
accounting against the declared plan, public bounds, the ℓ∞ functional mechanism, the
regression and pMSE metrics, reproducible spec runs and their results pages.

Every random quantity is a deterministic function of a fixed seed; statistical checks have
tolerances several times the Monte Carlo spread they guard, so none can flake.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privlab.mechanisms.pmse.functional_mechanism import (
    LINF_SENSITIVITY,
    functional_mechanism_event,
    functional_mechanism_regression,
)
from privlab.mechanisms.pmse.mechanism import PMSEMechanism, PMSEMechanismParams
from privlab.mechanisms.pmse.reports_utility import PAPER_TABLE2, section6_findings
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian
from privlab.mechanisms.pmse.utility_methods import Method
from privlab.mechanisms.pmse.utility_studies import (
    ComparisonParams,
    PMSEComparison,
    PMSERegression,
    RegressionParams,
    coefficients_in_data_units,
    ols,
    planned_events,
    release,
)
from privlab.platform.core.errors import BudgetExceededError, ModeError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter
from privlab.platform.experiment.spec import load_spec
from privlab.platform.results.reports import StudyResults
from privlab.platform.run.configuration_state import cost_class_of
from privlab.platform.run.runner import RunOptions, run_experiment

ROOT = Path(__file__).resolve().parents[1]
COMPARISON = ROOT / "experiments" / "pmse" / "comparison.toml"
REGRESSION = ROOT / "experiments" / "pmse" / "regression.toml"
SHORT_CHAIN = {"burn_in": 10, "thinning": 2}

VARIANTS: list[dict[str, Any]] = [
    {"name": "non_dp"},
    {"name": "pmse_mechanism", "max_depth": 2},
    {"name": "pmse_mechanism", "max_depth": "unlimited"},
    {"name": "noisy_bppd", "bound_sd": 4},
    {"name": "smooth_histogram", "bound_sd": 2},
    {"name": "functional_mechanism", "bound_sd": 5, "norm": "l1"},
    {"name": "functional_mechanism", "bound_sd": 10, "norm": "linf"},
]


def regression_params(method: dict[str, Any], epsilon: float = 0.9, n: int = 300) -> RegressionParams:
    return RegressionParams(method=method, epsilon=epsilon, n=n, **SHORT_CHAIN)


# --- method variants ---------------------------------------------------------------------------


def test_variants_are_stored_canonically() -> None:
    assert regression_params({"name": "pmse_mechanism", "max_depth": 5}).method == {
        "name": "pmse_mechanism", "max_depth": 5}
    assert regression_params({"name": "functional_mechanism", "bound_sd": 4.0}).method == {
        "name": "functional_mechanism", "bound_sd": 4, "norm": "l1"}
    variant = regression_params({"name": "smooth_histogram", "bound_sd": 2.5}).variant
    assert (variant.bound_sd, variant.label) == (2.5, "smooth histogram (2.5 sd)")
    assert Method.from_table({"name": "pmse_mechanism", "max_depth": "unlimited"},
                             allowed=("pmse_mechanism",)).label == "pMSE mechanism (depth unlimited)"


@pytest.mark.parametrize(("method", "message"), [
    ({"name": "pmse_mechanism", "max_depth": 5, "bound_sd": 4}, r"key\(s\) 'bound_sd' do not apply"),
    ({"name": "noisy_bppd", "bound_sd": 4, "max_depth": 2}, r"key\(s\) 'max_depth' do not apply"),
    ({"name": "non_dp", "bound_sd": 4}, r"key\(s\) 'bound_sd' do not apply"),
    ({"name": "smooth_histogram"}, r"^bound_sd \(None\) must be a finite real number > 0"),
    ({"name": "noisy_bppd", "bound_sd": -2}, r"^bound_sd \(-2\) must be a finite real number > 0"),
    ({"name": "pmse_mechanism"}, r"^max_depth \(None\) must be 'unlimited' or an int >= 1"),
    ({"name": "pmse_mechanism", "max_depth": 0}, r"^max_depth \(0\) must be"),
    ({"name": "functional_mechanism", "bound_sd": 4, "norm": "l2"}, r"^norm \('l2'\) must be one of \['l1', 'linf'\]$"),
    ({"name": "laplace"}, r"^method name \('laplace'\) must be one of \['non_dp', 'pmse_mechanism'"),
])
def test_invalid_variants_are_rejected(method: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        regression_params(method)


def test_table2_rejects_the_functional_mechanism_and_bad_params() -> None:
    with pytest.raises(ValueError, match=r"^method name \('functional_mechanism'\) must be one of \['non_dp', "):
        ComparisonParams(method={"name": "functional_mechanism", "bound_sd": 4}, epsilon=1.0)
    with pytest.raises(TypeError, match="must be a table"):
        ComparisonParams(method="non_dp", epsilon=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^epsilon \(0\.0\) must be a finite real number > 0$"):
        ComparisonParams(method={"name": "non_dp"}, epsilon=0.0)
    with pytest.raises(ValueError, match=r"^burn_in \(-1\) must be an int >= 0$"):
        ComparisonParams(method={"name": "pmse_mechanism", "max_depth": 1}, epsilon=1.0, burn_in=-1)


def test_specs_reject_invalid_combinations_at_load() -> None:
    with pytest.raises(SpecError, match="'bound_sd' do not apply"):
        load_spec(REGRESSION, ['grid.method=[{name = "pmse_mechanism", max_depth = 5, bound_sd = 4}]'])
    with pytest.raises(SpecError, match="method name"):
        load_spec(COMPARISON, ['grid.method=[{name = "functional_mechanism", bound_sd = 4}]'])
    with pytest.raises(BudgetExceededError, match="configuration"):  # ε = 2 exceeds the regression's cap of 1
        load_spec(REGRESSION, ["grid.epsilon=[2.0]"])


def test_the_shipped_specs_declare_the_papers_grids() -> None:
    comparison = load_spec(COMPARISON)
    assert len(comparison.configurations) == 4 * 5
    assert {c.params["epsilon"] for c in comparison.configurations} == {0.25, 0.5, 1.0, 2.0, 4.0}
    assert {ComparisonParams(**c.params).variant.label for c in comparison.configurations} == {
        "non-DP synthesis", "pMSE mechanism (depth unlimited)", "noisy BPPD (4 sd)", "smooth histogram (4 sd)"}
    regression = load_spec(REGRESSION)
    assert len(regression.configurations) == 21 * 3
    labels = {RegressionParams(**c.params).variant.label for c in regression.configurations}
    assert {f"pMSE mechanism (depth {d})" for d in (1, 2, 5, "unlimited")} <= labels
    for family in ("noisy BPPD", "smooth histogram", "functional mech. ℓ1", "functional mech. ℓ∞"):
        assert {f"{family} ({b} sd)" for b in (2, 4, 5, 10)} <= labels
    assert all(c.params["cp"] == 0.01 and c.params["releases"] == 10 for c in regression.configurations)


def test_section6_prices_each_depth_of_the_mechanism_apart_from_the_closed_form_methods() -> None:
    # The runner sizes batches and estimates the time left per cost class: a Metropolis
    # simulation costs seconds (more for deeper trees), a bounded method's milliseconds.
    classes = {cost_class_of(c) for c in load_spec(REGRESSION).configurations}
    assert classes == {f"pmse-regression/pmse_mechanism depth {d}" for d in (1, 2, 5, "unlimited")} | {
        f"pmse-regression/{family}" for family in (
            "non_dp", "noisy_bppd", "smooth_histogram", "functional_mechanism_l1", "functional_mechanism_linf")}


# --- public bounds ------------------------------------------------------------------------------


def test_bounds_are_population_moments_from_the_configuration() -> None:
    params = regression_params({"name": "noisy_bppd", "bound_sd": 4})
    lower, upper = params.bounds(4.0)
    sd1, sd2 = math.sqrt(10.0), math.sqrt(0.25 * 10.0 + 3.0)
    np.testing.assert_allclose(lower, (2.0 - 4 * sd1, -1.5 - 4 * sd2))
    np.testing.assert_allclose(upper, (2.0 + 4 * sd1, -1.5 + 4 * sd2))
    assert params.noisy_bppd_params(params.variant).lower == lower


def test_bounded_releases_use_the_configured_bounds_whatever_the_data() -> None:
    # Data far outside the model's range: the smooth histogram still samples inside the
    # configured box (the bounds never come from the sample).
    params = regression_params({"name": "smooth_histogram", "bound_sd": 2})
    shifted = params.draw_private(np.random.default_rng(0)) * 3.0 + 40.0
    released = release(params, shifted, ledger=Ledger(epsilon_cap=None), source=SeededSource(np.random.default_rng(1)))
    lower, upper = params.bounds(2.0)
    (synthetic,) = released.datasets
    assert synthetic.shape == (300, 2)
    assert np.all(synthetic >= np.array(lower)) and np.all(synthetic <= np.array(upper))


# --- accounting -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", VARIANTS, ids=lambda m: "-".join(str(v) for v in m.values()))
def test_each_simulation_charges_exactly_its_plan(method: dict[str, Any]) -> None:
    params = regression_params(method, epsilon=0.9)  # 0.9 / 10 summed ten times is not 0.9 in floats
    for workload in (PMSERegression(), PMSEComparison()):
        if method["name"] == "functional_mechanism" and isinstance(workload, PMSEComparison):
            continue
        typed = params if isinstance(workload, PMSERegression) else ComparisonParams(**vars(params))
        ledger = Ledger(epsilon_cap=0.9)
        metrics = workload.run_trial(typed, data=None, source=SeededSource(np.random.default_rng(3)), ledger=ledger)
        assert list(ledger.events) == workload.plan(typed) == planned_events(typed)
        assert ledger.total().epsilon == (0.0 if method["name"] == "non_dp" else 0.9)
        assert set(metrics) == set(workload.metrics)
        assert all(math.isfinite(v) and v >= 0 for v in metrics.values())


def test_plans_carry_sensitivity_and_noise_scale() -> None:
    n = 300
    pmse_plan = planned_events(regression_params({"name": "pmse_mechanism", "max_depth": 1}, epsilon=1.0))
    assert len(pmse_plan) == 10 and math.fsum(e.epsilon for e in pmse_plan) == 1.0
    assert all(e.sensitivity == 1 / n and e.noise_scale == 2 * (1 / n) / e.epsilon for e in pmse_plan)
    bppd_plan = planned_events(regression_params({"name": "noisy_bppd", "bound_sd": 4}, epsilon=1.0))
    assert [(e.mechanism, e.sensitivity) for e in bppd_plan] == [("laplace", 8.0)] * 10
    (l1,) = planned_events(regression_params({"name": "functional_mechanism", "bound_sd": 4}, epsilon=0.5))
    assert (l1.mechanism, l1.epsilon, l1.sensitivity, l1.noise_scale) == ("laplace", 0.5, 18.0, 36.0)
    (linf,) = planned_events(regression_params({"name": "functional_mechanism", "bound_sd": 4, "norm": "linf"},
                                               epsilon=0.5))
    assert (linf.mechanism, linf.sensitivity, linf.noise_scale) == ("k_norm_linf", LINF_SENSITIVITY, 8.0)
    (histogram,) = planned_events(regression_params({"name": "smooth_histogram", "bound_sd": 4}, epsilon=0.5))
    details = dict(histogram.details)
    assert (histogram.epsilon, details["cells"], details["records"], details["draws"]) == (0.5, 64, n, n)
    assert planned_events(regression_params({"name": "non_dp"})) == []


def test_pmse_mechanism_ledger_total_is_exactly_epsilon() -> None:
    quality = lambda real, synthetic: float(abs(real.mean() - synthetic.mean()))  # noqa: E731
    for epsilon, releases in ((0.9, 10), (0.1, 11), (0.7, 3)):
        mechanism = PMSEMechanism(PMSEMechanismParams(epsilon=epsilon, releases=releases, burn_in=1, thinning=1),
                                  model=SequentialLinearGaussian(1), quality=quality)
        ledger = Ledger(epsilon_cap=epsilon)
        mechanism.fit(np.random.default_rng(0).normal(size=(40, 1)), ledger=ledger,
                      source=SeededSource(np.random.default_rng(1)))
        assert ledger.total().epsilon == epsilon and len(ledger.events) == releases


# --- the ℓ∞ functional mechanism ------------------------------------------------------------------


@pytest.mark.statistical
def test_linf_noise_has_the_k_norm_radius_law() -> None:
    # Under density ∝ exp(−ε‖z‖∞/Δ) in k dimensions, ‖z‖∞ ~ Gamma(k, Δ/ε): mean kΔ/ε, and
    # every coordinate is symmetric. k = 6 coefficients for one feature plus the intercept.
    rng = np.random.default_rng(21)
    n, epsilon, draws = 50, 0.8, 4000
    features = np.column_stack([np.ones(n), rng.uniform(-1, 1, n)])
    target = rng.uniform(-1, 1, n)
    k = 6
    radii, signs = [], []
    source = SeededSource(np.random.default_rng(22))
    event = functional_mechanism_event(2, epsilon=epsilon, norm="linf")
    from privlab.mechanisms.pmse.functional_mechanism import _linf_mechanism

    exact = np.zeros(k)
    for _ in range(draws):
        noise = _linf_mechanism(exact, event, source=source, ledger=Ledger(epsilon_cap=None))
        radii.append(np.abs(noise).max())
        signs.append(np.sign(noise))
    radii_array = np.array(radii)
    expected_mean, expected_sd = k * LINF_SENSITIVITY / epsilon, math.sqrt(k) * LINF_SENSITIVITY / epsilon
    assert abs(radii_array.mean() - expected_mean) < 5 * expected_sd / math.sqrt(draws)
    assert radii_array.std() == pytest.approx(expected_sd, rel=0.1)
    assert np.all(np.abs(np.mean(signs, axis=0)) < 5 / math.sqrt(draws))
    # The regression with this noise is charged once, at Δ∞ = 4.
    ledger = Ledger(epsilon_cap=None)
    functional_mechanism_regression(features, target, epsilon=epsilon, source=source, ledger=ledger, norm="linf")
    assert list(ledger.events) == [event]


def test_linf_functional_mechanism_is_refused_in_release_mode(tmp_path: Path) -> None:
    features = np.column_stack([np.ones(10), np.linspace(-1, 1, 10)])
    with TranscriptWriter(tmp_path / "t", context={"run": "fm"}) as writer:
        ledger = Ledger(epsilon_cap=None)
        with pytest.raises(ModeError, match="release mode"):
            functional_mechanism_regression(features, np.zeros(10), epsilon=1.0, source=SecureSource(writer),
                                            ledger=ledger, norm="linf")
        assert ledger.events == ()
    with pytest.raises(ValueError, match=r"^norm \('l2'\) must be one of l1, linf$"):
        functional_mechanism_event(2, epsilon=1.0, norm="l2")


# --- metrics ----------------------------------------------------------------------------------------


def test_ols_and_the_change_of_units() -> None:
    rng = np.random.default_rng(5)
    x1 = rng.normal(2.0, 3.0, 500)
    data = np.column_stack([x1, -2.5 + 0.5 * x1 + rng.normal(0.0, 1.0, 500)])
    slope, intercept = np.polyfit(data[:, 0], data[:, 1], 1)
    np.testing.assert_allclose(ols(data), [intercept, slope], rtol=1e-10)
    lower, upper = (-20.0, -15.0), (24.0, 12.0)
    c, h = (np.array(lower) + upper) / 2, (np.array(upper) - lower) / 2
    scaled = (data - c) / h
    omega = ols(scaled)  # the regression in scaled units, mapped back, is the regression in data units
    np.testing.assert_allclose(coefficients_in_data_units(omega, lower=lower, upper=upper), ols(data), rtol=1e-10)


@pytest.mark.statistical
def test_large_epsilon_gives_small_regression_errors_and_non_dp_is_accurate() -> None:
    # At ε = 10⁵ the functional mechanism's and the noisy BPPD's noise is negligible; with 4-sd
    # bounds only a few records are clipped, so β̂priv is close to β̂ (the OLS slope's sd is
    # about 0.008 at n = 5000). Non-DP synthesis averages 10 posterior draws around β̂.
    workload = PMSERegression()
    for method, tolerance in (({"name": "functional_mechanism", "bound_sd": 4}, 0.01),
                              ({"name": "functional_mechanism", "bound_sd": 4, "norm": "linf"}, 0.01),
                              ({"name": "noisy_bppd", "bound_sd": 4}, 0.02),
                              ({"name": "non_dp"}, 0.02)):
        params = RegressionParams(method=method, epsilon=1e5)
        errors = workload.run_trial(params, data=None, source=SeededSource(np.random.default_rng(8)), ledger=Ledger(epsilon_cap=None))
        assert errors["slope_error"] < tolerance, (method, errors)
        assert errors["intercept_error"] < 5 * tolerance, (method, errors)


def test_pmse_metrics_are_in_range_and_reproducible() -> None:
    workload = PMSEComparison()
    params = ComparisonParams(method={"name": "noisy_bppd", "bound_sd": 4}, epsilon=0.25, n=400, releases=3)

    def run(seed: int) -> dict[str, float]:
        return dict(workload.run_trial(params, data=None, source=SeededSource(np.random.default_rng(seed)), ledger=Ledger(epsilon_cap=None)))

    first = run(11)
    assert first == run(11) and first != run(12)
    assert all(0.0 <= v <= 0.25 for v in first.values())
    assert first["pmse_cp0001"] >= first["pmse"]  # the cp = 0.001 tree refines the cp = 0.01 tree


# --- spec runs and results pages --------------------------------------------------------------------


SMALL = ["repetitions=2", "params.n=200", "params.burn_in=6", "params.thinning=2", "params.releases=2"]


def test_comparison_spec_runs_reproducibly_and_reports_table2(tmp_path: Path, tracking_uri: str) -> None:
    uri = tracking_uri
    overrides = [*SMALL, "grid.epsilon=[0.5, 4.0]"]
    report_dir = tmp_path / "report"
    first = run_experiment(load_spec(COMPARISON, overrides),
                           RunOptions(serial=True, tracking_uri=uri, progress=False, report_dir=report_dir,
                                      command="privlab run comparison.toml"))
    second = run_experiment(load_spec(COMPARISON, overrides), RunOptions(serial=True, tracking_uri=uri, progress=False))
    assert [c["metrics"] for c in first["configurations"]] == [c["metrics"] for c in second["configurations"]]
    assert len(first["configurations"]) == 8
    epsilons = {(c["params"]["params.method"]["name"], c["params"]["params.epsilon"]): c["metrics"]["eps_total"]
                for c in first["configurations"]}
    assert epsilons[("non_dp", 0.5)] == 0.0 and epsilons[("pmse_mechanism", 4.0)] == 4.0
    table = (report_dir / "pmse-comparison" / "table2.md").read_text()
    assert first["run_id"] in table and "2 simulations (repetitions) per configuration" in table
    assert "Command: `privlab run comparison.toml`" in table
    assert table.count("\n| 0.5 | ") == 4 and table.count("\n| 4 | ") == 4
    assert "| 0.09281 |" not in table and "| 0.0361 |" in table  # the paper's ε = 0.5 pMSE-mechanism mean
    png = (report_dir / "pmse-comparison" / "figure3.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_regression_spec_reports_tables_lines_and_boxes(tmp_path: Path, tracking_uri: str) -> None:
    uri = tracking_uri
    methods = ('grid.method=[{name = "non_dp"}, {name = "pmse_mechanism", max_depth = 1}, '
               '{name = "noisy_bppd", bound_sd = 2}, {name = "functional_mechanism", bound_sd = 10, norm = "linf"}]')
    report_dir = tmp_path / "report"
    summary = run_experiment(load_spec(REGRESSION, [*SMALL, "grid.epsilon=[0.25, 1.0]", methods]),
                             RunOptions(serial=True, tracking_uri=uri, progress=False, report_dir=report_dir))
    assert len(summary["configurations"]) == 8
    page = (report_dir / "pmse-regression" / "section6.md").read_text()
    assert "| pMSE mechanism (depth 1) |" in page and "| functional mech. ℓ∞ (10 sd) |" in page
    assert page.count("\n| non-DP synthesis |") == 3  # intercept, slope and timing tables
    for name in ("figure2.png", "figure4_lines.png", "figure4_boxes.png"):
        png = (report_dir / "pmse-regression" / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000, name


def _entry(index: int, method: dict[str, Any], epsilon: float, slope: float, intercept: float) -> dict[str, Any]:
    metrics = {}
    for name, value in (("slope_error", slope), ("intercept_error", intercept)):
        metrics |= {f"{name}_mean": value, f"{name}_ci_low": value * 0.95, f"{name}_ci_high": value * 1.05}
    return {"id": f"c{index}", "units": 100, "params": {"params.method": method, "params.epsilon": epsilon},
            "metrics": metrics}


def test_section6_findings_are_judged_on_the_means() -> None:
    # Depth 2 beats depth 1 but depth 5 does not beat depth 2 ("partly"); depth 5 and unlimited
    # are far apart ("no"); the 2-sd noisy BPPD beats its 4-sd one only on the slope.
    entries = [
        _entry(0, {"name": "pmse_mechanism", "max_depth": 1}, 1.0, 0.5, 1.0),
        _entry(1, {"name": "pmse_mechanism", "max_depth": 2}, 1.0, 0.2, 0.4),
        _entry(2, {"name": "pmse_mechanism", "max_depth": 5}, 1.0, 0.3, 0.6),
        _entry(3, {"name": "pmse_mechanism", "max_depth": "unlimited"}, 1.0, 0.1, 0.2),
        _entry(4, {"name": "noisy_bppd", "bound_sd": 2}, 1.0, 0.05, 0.5),
        _entry(5, {"name": "noisy_bppd", "bound_sd": 4}, 1.0, 0.06, 0.3),
    ]
    results = StudyResults(study="s", workload="pmse_regression", run_id="r", experiment="e", spec_name="s",
                           root_seed=1, command=None, entries=tuple(entries), reservoirs={}, timing={})
    rows = {finding: (verdict, evidence) for finding, _, verdict, evidence in section6_findings(results)}
    assert rows["pMSE mechanism: depth 2 beats depth 1, depth 5 beats depth 2"][0] == "partly"
    assert rows["pMSE mechanism: little change from depth 5 to unlimited (95% CIs overlap)"][0] == "no"
    assert "pMSE mechanism depth 2 beats noisy BPPD and smooth histogram at 4 sd" not in rows  # no histogram here
    assert set(PAPER_TABLE2) == {0.25, 0.5, 1.0, 2.0, 4.0}
