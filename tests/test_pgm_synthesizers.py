"""MST and AIM beyond the synthesizer contract: their budgets in zCDP, their bad inputs (each
refused before any budget is spent), the Gaussian mechanism's noise scale, and the zCDP filter.

The fits themselves (seconds of JAX compilation each) are in the contract suite's slow cases;
everything here reads plans, ledgers and noise without fitting Private-PGM, so it is fast.
Noise-scale checks are seeded: each is a deterministic function of its seed, with tolerances
of several standard errors (the value a seed gives is printed in the assertion).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.basic.gaussian import gaussian_mechanism, gaussian_sigma
from privlab.mechanisms.synthesizers import pgm
from privlab.mechanisms.synthesizers.base import synthesizer_from_spec
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.core.errors import BudgetExceededError, LedgerError, SchemaError, SpecError
from privlab.platform.dp import secure_sampling
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import check_conforms, zcdp_filter_event
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter
from privlab.platform.dp.zcdp_conversion import zcdp_rho_for_epsilon, zcdp_to_epsilon

needs_mbi = pytest.mark.skipif(not pgm.installed(), reason="MST and AIM need Private-PGM: pip install -e '.[pgm]'")
DELTA = 1e-6


def _domain(*sizes: int) -> Domain:
    return Domain(tuple(ColumnDomain(name=f"c{i}", labels=tuple(f"v{j}" for j in range(k)))
                        for i, k in enumerate(sizes)))


def _data(domain: Domain, n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({c.name: rng.integers(0, c.size, n) for c in domain})


def _zcdp_ledger(epsilon: float | None = 1.0) -> Ledger:
    return Ledger(epsilon_cap=epsilon, delta_cap=DELTA, accountant="zcdp", delta_slack=DELTA)


# --- the budget in zCDP ---------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 8.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6])
def test_rho_for_epsilon_is_the_largest_rho_the_conversion_allows(epsilon: float, delta: float) -> None:
    rho = zcdp_rho_for_epsilon(epsilon, delta)
    assert zcdp_to_epsilon(rho, delta) <= epsilon * (1 - 1e-9)
    assert zcdp_to_epsilon(rho * (1 + 1e-6), delta) > epsilon * (1 - 1e-9)
    # Bun & Steinke's simple bound ρ + 2·sqrt(ρ log 1/δ) ≥ ε at the answer (the conversion is tighter).
    assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) >= epsilon * (1 - 1e-9)
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="epsilon"):
            zcdp_rho_for_epsilon(bad, delta)


@needs_mbi
@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_mst_plan_pins_sensitivities_noise_scales_and_the_three_thirds(epsilon: float) -> None:
    domain = _domain(3, 4, 2, 5)
    d = len(domain)
    plan = synthesizer_from_spec("mst", {}, where="t").planned_events(epsilon, domain, 500, delta=DELTA)
    rho = zcdp_rho_for_epsilon(epsilon, DELTA)
    assert [e.name for e in plan] == ([f"mst/oneway/c{i}" for i in range(d)] + [f"mst/select/{i}" for i in range(1, d)]
                                      + [f"mst/twoway/{i}" for i in range(1, d)])
    oneway, select, twoway = plan[:d], plan[d:2 * d - 1], plan[2 * d - 1:]
    for event, share in [*((e, rho / (3 * d)) for e in oneway), *((e, rho / (3 * (d - 1))) for e in twoway)]:
        # a count vector under replace-one: ℓ2 sensitivity √2, so σ = √2/sqrt(2ρ) = 1/sqrt(ρ)
        assert event.mechanism == "gaussian" and event.sensitivity == pytest.approx(math.sqrt(2), rel=1e-15)
        assert event.noise_scale == pytest.approx(1 / math.sqrt(share), rel=1e-12)
        assert event.typed.rho == pytest.approx(share, rel=1e-12)
    for event in select:  # ‖M(D) − M̂‖₁ moves by 2; bounded range: ε²/8 = ρ/(3(d−1))
        assert (event.mechanism, event.sensitivity) == ("exponential_bounded_range", 2.0)
        assert event.epsilon == pytest.approx(math.sqrt(8 * rho / (3 * (d - 1))), rel=1e-12)
        assert event.typed.rho == pytest.approx(rho / (3 * (d - 1)), rel=1e-12)
    total = _zcdp_ledger(epsilon).check_plan(plan)
    assert epsilon * (1 - 1e-6) <= total.epsilon <= epsilon


@needs_mbi
def test_aim_plan_is_the_one_way_measurements_then_a_filter_of_the_rest() -> None:
    domain = _domain(3, 4, 2, 5)
    aim = synthesizer_from_spec("aim", {"rounds": 40}, where="t")
    plan = aim.planned_events(1.0, domain, 500, delta=DELTA)
    rho = zcdp_rho_for_epsilon(1.0, DELTA)
    assert [e.name for e in plan] == [*(f"aim/oneway/c{i}" for i in range(4)), "aim/round/*"]
    for event in plan[:4]:  # each one-way gets α·ρ/T with α = 0.9
        assert event.typed.rho == pytest.approx(0.9 * rho / 40, rel=1e-12)
        assert event.sensitivity == pytest.approx(math.sqrt(2), rel=1e-15)
    assert plan[4].mechanism == "zcdp_filter"
    assert dict(plan[4].details)["rho"] == pytest.approx(rho * (1 - 4 * 0.9 / 40), rel=1e-12)
    assert dict(plan[4].details)["prefix"] == "aim/round/"


@needs_mbi
@pytest.mark.parametrize("name", ["mst", "aim"])
def test_an_add_remove_ledger_is_refused_before_anything_is_spent(name: str) -> None:
    """Replace-one sensitivities and the public n as the model's total: no add/remove guarantee."""
    domain = _domain(3, 4, 2)
    ledger = Ledger(epsilon_cap=1.0, delta_cap=DELTA, accountant="zcdp", delta_slack=DELTA, neighbouring="add_remove")
    with pytest.raises(LedgerError, match="replace-one"):
        synthesizer_from_spec(name, {}, where="t").fit(_data(domain), domain=domain, epsilon=1.0, ledger=ledger,
                                                       source=SeededSource(np.random.default_rng(0)))
    assert ledger.events == ()


def test_a_zcdp_filter_accepts_steps_within_its_rho_and_refuses_more() -> None:
    plan = [zcdp_filter_event(prefix="m/round/", rho=0.5, scope="data", step="m.fit")]

    def gaussian(name: str, rho: float) -> PrivacyEvent:
        from privlab.platform.dp.dp_events import GaussianEvent

        sigma = 1 / math.sqrt(2 * rho)
        return PrivacyEvent.from_dp_event(GaussianEvent(1.0, sigma), name=name, mechanism="gaussian", step="m.fit",
                                          sensitivity=1.0, noise_scale=sigma)

    select = PrivacyEvent(name="m/round/1/select", mechanism="exponential", epsilon=math.sqrt(2 * 0.1), step="m.fit")
    check_conforms([select, gaussian("m/round/1/measure", 0.4)], plan, who="m", exact_sensitivity=True)
    with pytest.raises(LedgerError, match="more than their zCDP filter"):
        check_conforms([select, gaussian("m/round/1/measure", 0.41)], plan, who="m", exact_sensitivity=True)
    # A bounded-range choice at the same ε costs a quarter: ε²/8 = 0.025, so 0.475 fits and 0.48 does not.
    bounded = PrivacyEvent(name="m/round/1/select", mechanism="exponential_bounded_range", epsilon=math.sqrt(2 * 0.1),
                           step="m.fit")
    check_conforms([bounded, gaussian("m/round/1/measure", 0.475)], plan, who="m", exact_sensitivity=True)
    with pytest.raises(LedgerError, match="more than their zCDP filter"):
        check_conforms([bounded, gaussian("m/round/1/measure", 0.48)], plan, who="m", exact_sensitivity=True)
    with pytest.raises(LedgerError, match="planned"):
        check_conforms([select, gaussian("other/1", 0.1)], plan, who="m", exact_sensitivity=True)


# --- bad input: refused before any budget is spent -------------------------------------------


@needs_mbi
@pytest.mark.parametrize("name", ["mst", "aim"])
def test_a_ledger_that_cannot_account_for_gaussian_noise_is_refused_before_spending(name: str) -> None:
    domain = _domain(3, 4)
    for ledger in (Ledger(epsilon_cap=1.0), Ledger(epsilon_cap=1.0, delta_cap=DELTA, accountant="rdp",
                                                   delta_slack=DELTA)):
        with pytest.raises(LedgerError, match=r'accountant = "zcdp"'):
            synthesizer_from_spec(name, {}, where="t").fit(_data(domain), domain=domain, epsilon=1.0, ledger=ledger,
                                                           source=SeededSource(np.random.default_rng(0)))
        assert ledger.events == ()


@needs_mbi
@pytest.mark.parametrize("name", ["mst", "aim"])
def test_a_budget_overrun_is_refused_before_spending(name: str) -> None:
    domain = _domain(3, 4)
    ledger = _zcdp_ledger(0.5)
    with pytest.raises(BudgetExceededError):
        synthesizer_from_spec(name, {}, where="t").fit(_data(domain), domain=domain, epsilon=1.0, ledger=ledger,
                                                       source=SeededSource(np.random.default_rng(0)))
    assert ledger.events == ()
    for epsilon in (0.0, -1.0):
        with pytest.raises(ValueError, match="epsilon"):
            synthesizer_from_spec(name, {}, where="t").fit(_data(domain), domain=domain, epsilon=epsilon,
                                                           ledger=ledger, source=SeededSource(np.random.default_rng(0)))
    assert ledger.events == ()


@needs_mbi
def test_a_domain_too_large_for_the_model_size_cap_is_refused_before_spending() -> None:
    # Two columns of 2,000 codes: their two-way table has 4·10⁶ cells, 30.5 MB > 1 MB.
    domain = _domain(2000, 2000)
    ledger = _zcdp_ledger()
    with pytest.raises(SchemaError, match=r"no spanning tree of the columns fits max_model_size \(1\.0 MB\)"):
        synthesizer_from_spec("mst", {"max_model_size": 1.0}, where="t").fit(
            _data(domain), domain=domain, epsilon=1.0, ledger=ledger, source=SeededSource(np.random.default_rng(0)))
    # AIM: 200,000 one-way cells alone are 1.5 MB.
    wide = _domain(100_000, 100_000)
    with pytest.raises(SchemaError, match=r"too large for max_model_size \(1\.0 MB\).*1\.53 MB"):
        synthesizer_from_spec("aim", {"max_model_size": 1.0}, where="t").fit(
            _data(wide), domain=wide, epsilon=1.0, ledger=ledger, source=SeededSource(np.random.default_rng(0)))
    assert ledger.events == ()


@needs_mbi
def test_a_workload_marginal_over_a_column_not_in_the_schema_is_refused_before_spending() -> None:
    domain = _domain(3, 4, 2)
    ledger = _zcdp_ledger()
    aim = synthesizer_from_spec("aim", {"workload": "c0,c1; c1,income"}, where="t")
    with pytest.raises(SchemaError, match=r"'c1,income' names column\(s\) income not in the schema; the columns "
                                          r"are c0, c1, c2"):
        aim.fit(_data(domain), domain=domain, epsilon=1.0, ledger=ledger, source=SeededSource(np.random.default_rng(0)))
    with pytest.raises(SchemaError, match=r"rounds \(3\) must exceed the number of columns \(3\)"):
        synthesizer_from_spec("aim", {"rounds": 3}, where="t").fit(
            _data(domain), domain=domain, epsilon=1.0, ledger=ledger, source=SeededSource(np.random.default_rng(0)))
    assert ledger.events == ()


@pytest.mark.parametrize("name", ["mst", "aim"])
def test_mst_and_aim_without_the_extra_say_which_extra_to_install(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgm, "installed", lambda: False)
    monkeypatch.setattr(pgm, "_load", lambda: None)
    with pytest.raises(SpecError, match=rf"study s \(synthesizer '{name}'\).*needs Private-PGM.*"
                                        r"pip install 'privlab\[pgm\]'"):
        synthesizer_from_spec(name, {}, where="study s")


# --- the Gaussian mechanism's noise ----------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("rho", [0.01, 0.5])
def test_research_gaussian_noise_has_the_stated_scale(rho: float) -> None:
    ledger = _zcdp_ledger(None)
    counts = np.arange(40_000, dtype=np.float64)
    noisy = gaussian_mechanism(counts, sensitivity=math.sqrt(2), rho=rho, source=SeededSource(np.random.default_rng(5)),
                               ledger=ledger, name="m")
    sigma = 1 / math.sqrt(rho)  # √2/sqrt(2ρ)
    (event,) = ledger.events
    assert (event.mechanism, event.noise_scale, event.typed.rho) == ("gaussian", pytest.approx(sigma), pytest.approx(rho))
    residual = noisy - counts
    # Sample sd of 40,000 normals: standard error σ/sqrt(2·40,000) ≈ 0.35% of σ; 2% is > 5 standard errors.
    assert np.std(residual) == pytest.approx(sigma, rel=0.02), np.std(residual) / sigma
    assert abs(np.mean(residual)) < 5 * sigma / math.sqrt(residual.size)
    assert gaussian_sigma(math.sqrt(2), rho) == pytest.approx(sigma, rel=1e-15)


class _SeededSecrets:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self._rng.randrange(n)

    def randbits(self, k: int) -> int:
        return self._rng.getrandbits(k)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [0.7, 4.0])
def test_release_gaussian_noise_is_discrete_exact_and_in_the_transcript(
    sigma: float, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secure_sampling, "secrets", _SeededSecrets(11))
    ledger = _zcdp_ledger(None)
    rho = 2 / (2 * sigma**2)
    with TranscriptWriter(tmp_path / "t", context={"spec_sha256": "0", "data_sha256": "1"}) as writer:
        noisy = gaussian_mechanism(np.zeros(20_000), sensitivity=math.sqrt(2), rho=rho, source=SecureSource(writer),
                                   ledger=ledger, name="m")
        with pytest.raises(ValueError, match="must be integer counts"):
            gaussian_mechanism(np.array([0.5]), sensitivity=math.sqrt(2), rho=rho, source=SecureSource(writer),
                               ledger=ledger, name="m2")
    assert ledger.events[0].mechanism == "discrete_gaussian"
    assert ledger.events[0].noise_scale == pytest.approx(sigma, rel=1e-12)
    assert np.array_equal(noisy, np.round(noisy))
    # The discrete Gaussian's variance, summed exactly over the integers, against the sample's.
    support = np.arange(-200, 201)
    weights = np.exp(-support.astype(float) ** 2 / (2 * sigma**2))
    variance = float((weights * support**2).sum() / weights.sum())
    assert np.var(noisy) == pytest.approx(variance, rel=0.05), np.var(noisy) / variance


def test_discrete_gaussian_refuses_floats_and_nonpositive_variances() -> None:
    with pytest.raises(TypeError, match="Fraction"):
        secure_sampling.discrete_gaussian(2.5)  # type: ignore[arg-type]
    for bad in (Fraction(0), Fraction(-1, 2)):
        with pytest.raises(ValueError, match="must be > 0"):
            secure_sampling.discrete_gaussian(bad)


def test_simplex_projection_is_the_nearest_point_of_the_scaled_simplex() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        y = rng.normal(10, 30, size=rng.integers(2, 9))
        x = pgm.simplex_projection(y, 100.0)
        assert x.min() >= 0 and x.sum() == pytest.approx(100.0)
        # KKT: x = max(y − τ, 0) for one τ, with τ ≥ y on the zero coordinates.
        tau = (y - x)[x > 0]
        assert np.ptp(tau) < 1e-9 and np.all(y[x == 0] <= tau[0] + 1e-9)


def test_repeated_measurements_merge_into_their_sufficient_statistic() -> None:
    """Two noisy measurements of one marginal become one whose L2 loss differs from theirs by a
    constant in μ (so Private-PGM's gradient is unchanged); a clique measured once is untouched."""
    rng = np.random.default_rng(5)
    y1, y2, z = rng.normal(50, 10, 6), rng.normal(50, 10, 6), rng.normal(20, 5, 3)
    merged = pgm.merge_repeated([(("a", "b"), y1, 2.0), (("c",), z, 3.0), (("a", "b"), y2, 4.0)])
    assert [clique for clique, _, _ in merged] == [("a", "b"), ("c",)]
    (_, mean, sigma), (_, z_out, z_sigma) = merged
    assert sigma == pytest.approx((2.0**-2 + 4.0**-2) ** -0.5) and z_sigma == 3.0
    np.testing.assert_array_equal(z_out, z)
    gaps = [np.sum(((mu - y1) / 2.0) ** 2) + np.sum(((mu - y2) / 4.0) ** 2) - np.sum(((mu - mean) / sigma) ** 2)
            for mu in rng.normal(50, 30, (5, 6))]
    assert np.ptp(gaps) < 1e-9 * max(abs(g) for g in gaps)


def test_elimination_of_sharp_factors_in_log_space_does_not_underflow() -> None:
    """A chain of 16 binary columns whose every configuration has probability below 10⁻⁶⁰⁰:
    a plain einsum's terms all underflow to 0, the log-space elimination gives the marginal
    (computed exactly in log space over all 2¹⁶ configurations)."""
    import itertools

    n, tiny = 16, 1e-80
    letters = "abcdefghijklmnop"
    operands = [np.array([1.0, tiny])] * n + [np.array([[tiny, 1.0], [1.0, tiny]])] * (n - 1)
    subscripts = list(letters) + [letters[i:i + 2] for i in range(n - 1)]
    with np.errstate(under="ignore"):
        assert np.einsum(",".join(subscripts) + "->ab", *operands).sum() == 0.0
    got = pgm._eliminate([np.log(op) for op in operands], subscripts, "ab")
    configs = np.array(list(itertools.product([0, 1], repeat=n)))
    log_p = math.log(tiny) * (configs.sum(axis=1) + (configs[:, :-1] == configs[:, 1:]).sum(axis=1))
    expected = np.array([np.logaddexp.reduce(log_p[(configs[:, 0] == a) & (configs[:, 1] == b)])
                         for a in (0, 1) for b in (0, 1)])
    np.testing.assert_allclose(got.ravel() - np.logaddexp.reduce(got.ravel()),
                               expected - np.logaddexp.reduce(expected), rtol=1e-12)


@needs_mbi
@pytest.mark.slow  # compiles mbi's mirror descent twice
def test_the_carried_marginals_mirror_descent_follows_mbis_iterates() -> None:
    """pgm.estimate's estimator calls the oracle once per step instead of twice; from zero
    potentials and from a warm start its iterates are mbi's MirrorDescent's, and its model's
    marginals are the oracle's at its potentials."""
    mbi = pgm.require_mbi("test")
    domain = _domain(3, 2, 4, 2)
    codes = np.stack([np.random.default_rng(j).integers(0, k, 300) for j, k in enumerate(domain.sizes)])
    names = domain.names
    noise = np.random.default_rng(9)
    measurements = [((a,), pgm.marginal_counts(codes, (j,), domain.sizes) + noise.normal(0, 5, domain.sizes[j]), 5.0)
                    for j, a in enumerate(names)]
    first = pgm.estimate(domain, measurements, total=300, iters=100)
    pair = (names[0], names[2])
    measurements.append((pair, pgm.marginal_counts(codes, (0, 2), domain.sizes) + noise.normal(0, 3, 12), 3.0))
    for warm_start in (None, first):
        ours = pgm.estimate(domain, measurements, total=300, iters=100, warm_start=warm_start)
        linear = [mbi.LinearMeasurement(y, clique, stddev=s) for clique, y, s in measurements]
        theirs = mbi.estimation.MirrorDescent().estimate(pgm.mbi_domain(domain), linear, known_total=300.0, iters=100,
                                                          warm_start=warm_start)
        for clique in theirs.potentials.cliques:
            np.testing.assert_allclose(ours.potentials[clique].values, theirs.potentials[clique].values,
                                       rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(ours.marginals[clique].values, theirs.marginals[clique].values,
                                       rtol=1e-9, atol=1e-9)


# --- in the release flow's grids ---------------------------------------------------------------

ACS = Path(__file__).resolve().parents[1] / "experiments" / "acs"
ACS_TRANSFORMATION = "age=decades,marital-status=grouped,education=grouped,income=coarse"


@needs_mbi
@pytest.mark.slow  # the criteria's first domain check compiles numba kernels (~10 s under load)
@pytest.mark.parametrize(("name", "params"), [("mst", {"iters": 500}), ("aim", {"max_model_size": 10.0})])
def test_a_flow_plans_mst_and_aim_at_its_zcdp_delta(name: str, params: dict[str, Any]) -> None:
    import dataclasses

    from privlab.mechanisms.release.flow import FlowConfiguration, load_settings, planned_events
    from privlab.mechanisms.tabular.space import load_release_space

    space, settings = load_release_space(ACS / "space.toml"), load_settings(ACS / "flow.toml")
    configuration = FlowConfiguration(transformation=ACS_TRANSFORMATION, synthesizer=name,
                                      synthesizer_params=tuple(params.items()))
    plan = planned_events(configuration, settings, space=space, n=20_000)
    synthesizer_steps = [e for e in plan if e.name.startswith(f"{name}/")]
    assert synthesizer_steps and len(plan) == len(synthesizer_steps) + len(settings.criteria)
    # ε_generation read at zcdp_delta, plus the criteria's pure-ε steps, fit the grid's cap.
    ledger = Ledger(epsilon_cap=5.5, delta_cap=1e-9, accountant="zcdp", delta_slack=settings.zcdp_delta)
    assert ledger.check_plan(plan).epsilon == pytest.approx(5.349, abs=1e-3)
    with pytest.raises(SpecError, match="set zcdp_delta in the flow settings"):
        planned_events(configuration, dataclasses.replace(settings, zcdp_delta=None), space=space, n=20_000)


@needs_mbi
def test_a_flow_refuses_mst_on_a_pure_ledger_before_reading_the_data() -> None:
    from privlab.mechanisms.release.flow import FlowConfiguration, load_settings, run_flow
    from privlab.mechanisms.tabular.space import load_release_space

    configuration = FlowConfiguration(transformation=ACS_TRANSFORMATION, synthesizer="mst")
    ledger = Ledger(epsilon_cap=5.0)
    with pytest.raises(SpecError, match=r'needs \[budget\] accountant = "zcdp" and delta_slack = zcdp_delta'):
        run_flow(pd.DataFrame(), space=load_release_space(ACS / "space.toml"), configuration=configuration,
                 settings=load_settings(ACS / "flow.toml"), source=SeededSource(np.random.default_rng(0)),
                 ledger=ledger)
    assert ledger.events == ()


@needs_mbi
@pytest.mark.slow
def test_an_mst_flow_runs_on_acs_and_spends_its_plan(acs_national: Path) -> None:
    from privlab.mechanisms.release.flow import FlowConfiguration, load_settings, planned_events, run_flow
    from privlab.mechanisms.release.workloads import _cleaned
    from privlab.mechanisms.tabular.space import load_release_space

    space, settings = load_release_space(ACS / "space.toml"), load_settings(ACS / "flow.toml")
    cleaned = _cleaned(str(ACS / "space.toml"), str(acs_national))
    configuration = FlowConfiguration(transformation=ACS_TRANSFORMATION, synthesizer="mst",
                                      synthesizer_params=(("iters", 200),), min_count=2)
    ledger = Ledger(epsilon_cap=5.5, delta_cap=1e-9, accountant="zcdp", delta_slack=1e-9)
    outcome = run_flow(cleaned, space=space, configuration=configuration, settings=settings,
                       source=SeededSource(np.random.default_rng(4)), ledger=ledger)
    check_conforms(ledger.events, planned_events(configuration, settings, space=space, n=len(outcome.candidate)),
                   who="flow", exact_sensitivity=False)
    assert len(outcome.results) == len(settings.criteria) and ledger.total().epsilon <= 5.5


@needs_mbi
def test_a_release_naming_mst_without_delta_is_refused_before_reading_the_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from privlab.platform.cli.main import main

    for name in ("release.toml", "space.toml", "flow.toml"):
        shutil.copy(ACS / name, tmp_path / name)
    (tmp_path / "shortlist.toml").write_text(
        'space = "space.toml"\nsettings = "flow.toml"\n\n[[configuration]]\n'
        f'transformation = "{ACS_TRANSFORMATION}"\nsynthesizer = "mst"\nmin_count = 2\niters = 500\n')
    out = tmp_path / "bundle"
    code = main(["release", str(tmp_path / "release.toml"), "--data", str(tmp_path / "never-read.csv"),
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    # Without a δ in the spec: an (ε, δ) release must declare it (tests/test_release_mixed.py runs one).
    assert "names mst, which measure with Gaussian noise" in err and "delta = " in err and "No data was read" in err
    assert not out.exists() and not any(tmp_path.glob("*.transcript*"))
    assert main(["validate", str(tmp_path / "release.toml")]) == 2


@needs_mbi
@pytest.mark.slow
@pytest.mark.parametrize(("name", "params"), [("mst", {"iters": 50}), ("aim", {"max_iters": 30, "rounds": 8})])
def test_a_release_mode_fit_replays_bit_identically_from_its_transcript(
        name: str, params: dict[str, Any], tmp_path: Path) -> None:
    from privlab.platform.dp.randomness import ReplaySource
    from privlab.platform.dp.transcript import TranscriptReader

    domain = _domain(3, 4, 2)
    data = _data(domain, 400)
    context = {"spec_sha256": "0", "data_sha256": "1"}
    with TranscriptWriter(tmp_path / "fit.transcript", context=context) as writer:
        first = synthesizer_from_spec(name, params, where="t").fit(
            data, domain=domain, epsilon=2.0, ledger=_zcdp_ledger(2.0), source=SecureSource(writer))
    replay = ReplaySource(TranscriptReader(tmp_path / "fit.transcript", expected_context=context))
    again = synthesizer_from_spec(name, params, where="t").fit(
        data, domain=domain, epsilon=2.0, ledger=_zcdp_ledger(2.0), source=replay)
    replay.finish()  # every recorded draw was consumed
    assert len(first.measurements_) == len(again.measurements_)
    for (c1, y1, s1), (c2, y2, s2) in zip(first.measurements_, again.measurements_, strict=True):
        assert c1 == c2 and s1 == s2 and np.array_equal(y1, y2)
        assert np.array_equal(y1, np.round(y1))  # discrete Gaussian noise on counts
    assert [e.mechanism for e in first.events_] == [e.mechanism for e in again.events_]
    assert {e.mechanism for e in first.events_} == {"discrete_gaussian", "exponential_rejection"}


@needs_mbi
@pytest.mark.slow
def test_the_acs_grid_runs_mst_and_logs_its_configuration(acs_national: Path, tmp_path: Path) -> None:
    """A configuration whose ledger holds Gaussian steps (no pure ε) is logged like any other."""
    from privlab.platform.cli.main import main

    code = main(["run", str(ACS / "grid_pgm.toml"), "--serial", "--no-progress", "--set", "study.mst.repetitions=1",
                 "--set", "study.mst.grid.iters=[50]", "--max-units", "1",
                 "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
    assert code == 0
    assert main(["compare", "acs-grid-pgm", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                 "--metric", "accepted"]) == 0


@needs_mbi
@pytest.mark.slow  # imports JAX and compiles mbi's elimination
def test_clique_marginals_survive_potentials_sharp_enough_to_underflow() -> None:
    """Two sharp cliques whose shifted product underflows everywhere (an AIM fit on ACS hit this
    at round 19): the marginal comes from mbi's log-space elimination, and is exact."""
    mbi = pgm.require_mbi("test")
    domain = mbi.Domain(("a", "b", "c"), (2, 2, 2))
    sharp = -2000.0  # exp(−2000) is 0 in float64
    ab = mbi.Factor(domain.project(("a", "b")), np.array([[0.0, sharp], [sharp, sharp]]))
    bc = mbi.Factor(domain.project(("b", "c")), np.array([[sharp, sharp], [sharp, 0.0]]))
    potentials = mbi.CliqueVector(domain, [("a", "b"), ("b", "c")], {("a", "b"): ab, ("b", "c"): bc})
    model = mbi.MarkovRandomField(potentials=potentials, marginals=mbi.CliqueVector.zeros(domain, [("a",)]),
                                  total=100.0)
    # The four configurations at log-potential −2000: (0,0,0), (0,0,1), (0,1,1), (1,1,1).
    np.testing.assert_allclose(pgm.project(model, ("a", "c")), [25.0, 50.0, 0.0, 25.0], atol=1e-9)
