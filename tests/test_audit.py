"""`privlab audit`: the statistics (exact checks), the auditables, the CLI end to end, and a
deliberately broken mechanism that the ε audit must flag while the correct one passes."""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from privlab.mechanisms.basic.audit import (
    ApprovalVoteAudit,
    ApprovalVoteAuditParams,
    LaplaceMeanAudit,
    LaplaceMeanAuditParams,
    exact_candidate_zero_probabilities,
)
from privlab.mechanisms.pmse.audit import PMSEAudit, PMSEAuditParams
from privlab.mechanisms.pmse.studies import TABLE1_CONFIGS, SensitivityParams, table1_trial
from privlab.platform.audit import registration as audit, audit_results, audit_run, audit_statistics
from privlab.platform.cli.main import main
from privlab.platform.core.errors import LedgerError, RegistryError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource, SeededSource
from privlab.platform.experiment import registry
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunOptions, run_experiment


@audit.register_auditable
class HalfScaleLaplace(LaplaceMeanAudit):
    """Broken on purpose: charges ε but adds Laplace noise of half the scale Δ/ε (true ε = 2ε)."""

    name = "test_half_scale_laplace"
    description = "BROKEN Laplace mean: half the required noise scale"

    def release(self, params: LaplaceMeanAuditParams, data: np.ndarray, *, source: RandomSource,
                ledger: Ledger) -> float:
        s = self.sensitivity(params)
        ledger.charge(name="mean", mechanism="laplace", epsilon=params.epsilon, sensitivity=s,
                      noise_scale=s / params.epsilon, step="audit.laplace")
        return float(np.mean(data)) + float(source.laplace(scale=s / params.epsilon / 2))


@audit.register_auditable
class DataDependentCharge(LaplaceMeanAudit):
    """Broken on purpose: what it charges depends on the data."""

    name = "test_data_dependent_charge"

    def release(self, params: LaplaceMeanAuditParams, data: np.ndarray, *, source: RandomSource,
                ledger: Ledger) -> float:
        ledger.charge(name="mean" if data[0] == params.lower else "other", mechanism="laplace",
                      epsilon=params.epsilon, step="audit.laplace")
        return float(np.mean(data))


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('audit') / 'mlflow.db'}"


def _run(name: str, uri: str, *settings: str, trials: int, seed: int, **options: object) -> audit_results.AuditResult:
    request = audit_run.prepare_audit(name, settings=settings, trials=trials, seed=seed)
    options = RunOptions(tracking_uri=uri, progress=False, **options)  # type: ignore[arg-type]
    result, _ = audit_run.run_audit(request, options)
    return result


# --- the statistics ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_clopper_pearson_covers_at_least_its_level_for_every_proportion(level: float) -> None:
    # Exact coverage by enumeration (no Monte Carlo): each side fails with probability
    # ≤ (1 − level)/2 at every p.
    n = 40
    k = np.arange(n + 1)
    bounds = np.array([audit_statistics.clopper_pearson(int(i), n, level) for i in k])
    for p in np.linspace(0.001, 0.999, 499):
        pmf = stats.binom.pmf(k, n, p)
        assert pmf[bounds[:, 0] > p].sum() <= (1 - level) / 2 + 1e-12
        assert pmf[bounds[:, 1] < p].sum() <= (1 - level) / 2 + 1e-12
    # The same check fails for the (approximate) Wilson interval: its lower end overshoots small p.
    z = stats.norm.ppf(1 - (1 - level) / 2)
    centre = (k / n + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    wilson_low = np.where(k == 0, 0.0, centre - half)
    worst = max(stats.binom.pmf(k, n, p)[wilson_low > p].sum() for p in np.linspace(0.001, 0.999, 499))
    assert worst > (1 - level) / 2


def test_epsilon_bound_false_alarm_probability_is_at_most_alpha_exactly() -> None:
    # One threshold whose event has P_D′/P_D = e^ε exactly (the Laplace tail event). Enumerate
    # every (k_D, k_D′) to get the exact probability that the bound exceeds the true ε.
    trials, epsilon, confidence = 400, 1.0, 0.9
    p_d, p_d_prime = 0.5 * math.exp(-epsilon), 0.5
    level = 1 - (1 - confidence) / 2  # one threshold: two proportions at 1 − α/2 each
    cp = np.array([audit_statistics.clopper_pearson(k, trials, level) for k in range(trials + 1)])
    low, high = cp[:, 0], cp[:, 1]
    k_d, k_dp = np.arange(trials + 1)[:, None], np.arange(trials + 1)[None, :]
    with np.errstate(divide="ignore"):
        candidates = np.broadcast_arrays(
            np.log(low[k_dp] / high[k_d]), np.log(low[k_d] / high[k_dp]),
            np.log((1 - high[k_d]) / (1 - low[k_dp])), np.log((1 - high[k_dp]) / (1 - low[k_d])))
    bound = np.maximum(np.max(candidates, axis=0), 0.0)
    rng = np.random.default_rng(5)
    for a, b in rng.integers(0, trials + 1, size=(40, 2)):  # the enumeration is the function's rule
        found = audit_statistics.epsilon_lower_bound([a], [b], trials, [0.0], confidence=confidence).epsilon_lower
        assert found == pytest.approx(bound[a, b], abs=1e-12)
    pmf = stats.binom.pmf(np.arange(trials + 1), trials, p_d)[:, None] * \
        stats.binom.pmf(np.arange(trials + 1), trials, p_d_prime)[None, :]
    false_alarm = pmf[bound > epsilon].sum()
    assert 0 < false_alarm <= 1 - confidence
    assert (pmf * bound).sum() > 0.6 * epsilon  # and it has power: E[ε_lb] is not far below ε


def test_epsilon_bound_corrects_for_several_events_and_delta() -> None:
    one = audit_statistics.epsilon_lower_bound([1000], [3000], 10_000, [0.0], confidence=0.95)
    five = audit_statistics.epsilon_lower_bound([1000] * 5, [3000] * 5, 10_000, [0.0, 1, 2, 3, 4], confidence=0.95)
    assert one.tests == 4 and five.tests == 20
    assert five.interval_level == pytest.approx(1 - 0.05 / 10) and one.interval_level == pytest.approx(0.975)
    assert 0 < five.epsilon_lower < one.epsilon_lower < math.log(3)
    assert one.numerator == "D′" and not one.complement and one.estimate == pytest.approx(math.log(3))
    with_delta = audit_statistics.epsilon_lower_bound([1000], [3000], 10_000, [0.0], confidence=0.95, delta=0.1)
    assert with_delta.epsilon_lower < one.epsilon_lower
    assert audit_statistics.epsilon_lower_bound([500], [500], 1000, [0.0], confidence=0.95).epsilon_lower == 0.0
    with pytest.raises(ValueError, match="same positive length"):
        audit_statistics.epsilon_lower_bound([1], [1, 2], 10, [0.0], confidence=0.95)
    with pytest.raises(ValueError, match="successes"):
        audit_statistics.epsilon_lower_bound([11], [1], 10, [0.0], confidence=0.95)
    with pytest.raises(ValueError, match="confidence"):
        audit_statistics.epsilon_lower_bound([1], [1], 10, [0.0], confidence=1.0)


# --- the auditables ------------------------------------------------------------------------------


def test_pmse_auditable_computes_exactly_the_table1_difference() -> None:
    params = SensitivityParams(n=300)
    for seed in range(6):
        table1 = table1_trial(params, np.random.default_rng(seed))
        for column, (depth, cp) in enumerate(TABLE1_CONFIGS):
            audited = PMSEAuditParams(depth=depth, cp=cp, n=300)
            rng = np.random.default_rng(seed)
            d, d_prime = PMSEAudit().neighbours(audited, rng)
            f_d, f_d_prime = PMSEAudit().evaluate(audited, d, d_prime, rng)
            assert abs(f_d - f_d_prime) == table1[column]
    assert PMSEAuditParams(depth="unlimited").depth is None  # type: ignore[arg-type]
    assert PMSEAudit().claimed_sensitivity(PMSEAuditParams(n=400)) == 1 / 400


def test_basic_pairs_sit_at_the_sensitivity_and_events_are_fixed_from_public_parameters() -> None:
    laplace = LaplaceMeanAudit()
    params = LaplaceMeanAuditParams(epsilon=0.5, n=20, lower=-1.0, upper=3.0)
    d, d_prime = laplace.neighbours(params, np.random.default_rng(0))
    assert np.count_nonzero(d != d_prime) == 1
    assert d_prime.mean() - d.mean() == pytest.approx(laplace.sensitivity(params)) == pytest.approx(4 / 20)
    assert laplace.thresholds(params) == pytest.approx((-1.4, -1.0, -0.9, -0.8, -0.4))
    vote = ApprovalVoteAudit()
    vote_params = ApprovalVoteAuditParams(epsilon=1.0, candidates=4, voters=5)
    ballots, ballots_prime = vote.neighbours(vote_params, np.random.default_rng(0))
    assert (np.abs(ballots - ballots_prime).sum(axis=1) > 0).sum() == 1  # one voter replaced
    delta_u = np.abs(ballots.sum(axis=0) - ballots_prime.sum(axis=0))
    assert np.all(delta_u == 1)  # every utility moves by exactly Δ = 1
    p0, p0_prime = exact_candidate_zero_probabilities(vote_params)
    assert math.log(p0 / p0_prime) < 1.0


def test_registration_rejects_malformed_auditables() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithConfidence:
        confidence: float = 0.5

    @dataclasses.dataclass(kw_only=True)
    class NotFrozen:
        x: int = 1

    for params, message in ((WithConfidence, "must not define 'confidence'"), (NotFrozen, "frozen")):
        cls = type("Bad", (LaplaceMeanAudit,), {"name": "test_bad", "Params": params})
        with pytest.raises(TypeError, match=message):
            audit.register_auditable(cls)
    with pytest.raises(RegistryError, match="already registered"):
        audit.register_auditable(type("Other", (LaplaceMeanAudit,), {"name": "laplace"}))
    with pytest.raises(RegistryError, match="unknown auditable 'nope'; auditables: .*laplace"):
        audit.get_auditable("nope")


def test_a_mechanism_whose_charge_depends_on_the_data_is_refused() -> None:
    workload = registry.get_workload("privacy_audit.test_data_dependent_charge")
    params = registry.build_params(workload.Params, {"epsilon": 1.0}, where="test")
    with pytest.raises(LedgerError, match="must not depend on the data"):
        workload.run_trial(params, data=None, source=SeededSource(np.random.default_rng(0)), ledger=Ledger(epsilon_cap=None))


# --- ε audits: the correct mechanisms pass, the broken one is flagged -------------------------------


@pytest.mark.statistical
def test_correct_laplace_is_never_flagged_and_its_bound_is_tight(tmp_path: Path, uri: str) -> None:
    # A spec may use the audit workload directly: one run, two claimed ε on a grid (ε = 1 is
    # audited in the other tests).
    spec = tmp_path / "laplace.toml"
    spec.write_text('name = "laplace-audit"\nseed = 3\nworkload = "privacy_audit.laplace"\ntrials = 3000\n'
                    '[grid]\nepsilon = [0.5, 2.0]\n[tracking]\nplots = false\n')
    summary = run_experiment(load_spec(spec), RunOptions(serial=True, tracking_uri=uri, progress=False))
    for entry in summary["configurations"]:
        metrics, epsilon = entry["metrics"], entry["params"]["params.epsilon"]
        assert metrics["claimed_epsilon"] == epsilon and metrics["eps_total"] == epsilon
        assert metrics["violation_found"] == 0.0
        assert 0.6 * epsilon < metrics["epsilon_lower_bound"] <= epsilon  # tight, yet never above


@pytest.mark.statistical
def test_half_scale_laplace_is_flagged(uri: str) -> None:
    result = _run("test_half_scale_laplace", uri, "epsilon=1.0", trials=4000, seed=3, serial=True)
    assert result.violation and result.verdict.startswith("VIOLATION")
    assert 1.5 < result.empirical <= 2.0  # the true ε of half the scale is 2


@pytest.mark.statistical
def test_exponential_audit_matches_the_closed_form(uri: str) -> None:
    result = _run("exponential", uri, "epsilon=1.0", "candidates=10", trials=6000, seed=4, serial=True)
    p0, p0_prime = exact_candidate_zero_probabilities(ApprovalVoteAuditParams(epsilon=1.0))
    assert not result.violation
    assert result.details["event"] == "candidate 0 selected" and result.details["numerator"] == "D"
    assert result.details["numerator_lower"] <= p0 and result.details["denominator_upper"] >= p0_prime
    assert 0.6 < result.empirical <= math.log(p0 / p0_prime)


# --- the sensitivity audit reproduces the Table-1 workload ----------------------------------------


@pytest.mark.statistical
def test_pmse_audit_violation_rate_is_consistent_with_the_table1_workload(uri: str) -> None:
    trials, n = 800, 1000
    result = _run("pmse", uri, f"n={n}", "depth=unlimited", "cp=0.001", trials=trials, seed=9, serial=True)
    spec = load_spec(Path(__file__).resolve().parents[1] / "experiments" / "pmse" / "sensitivity.toml",
                     [f"trials={trials}", f"params.n={n}", "tracking.plots=false"])
    table1 = run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False))
    entry = next(e for e in table1["configurations"] if e.get("facet") == "dinf_cp001")
    ours = result.details["violations"]
    theirs = int(entry["metrics"]["violation_successes"])
    assert result.violation and result.claimed == 1 / n and ours > 20 and theirs > 20
    assert stats.fisher_exact([[ours, trials - ours], [theirs, trials - theirs]]).pvalue > 0.001
    assert result.details["violation_rate_lower"] <= theirs / trials <= result.details["violation_rate_upper"]


# --- the command --------------------------------------------------------------------------------


def test_list_shows_names_kinds_claims_and_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--list"]) == 0
    out = capsys.readouterr().out
    for text in ("laplace", "exponential", "pmse", "ε audit", "sensitivity audit", "Δu = 1/n",
                 "epsilon (required)", "n=100", "cp=0.001", "default trials: 2,000"):
        assert text in out, text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "nope"], "unknown auditable 'nope'; auditables: exponential, forest_dipreme, forest_dp_ert, laplace"),
        (["audit"], "give an auditable NAME or --list"),
        (["audit", "laplace", "--set", "epsilon=1", "--set", "eps=2"],
         "unknown parameter 'eps'; parameters: epsilon, n, lower, upper"),
        (["audit", "laplace", "--set", "epsilon=1", "--set", "trials=5"], "use --trials"),
        (["audit", "laplace"], "missing required parameter(s) 'epsilon'; give --set epsilon=VALUE"),
        (["audit", "laplace", "--set", "epsilon=-1"], "epsilon (-1) must be a finite real number > 0"),
        (["audit", "pmse", "--set", "depth=0"], "depth (0) must be None, 'unlimited' or an int >= 1"),
        (["audit", "laplace", "--set", "epsilon=1", "--confidence", "1.5"], "strictly between 0 and 1"),
        (["audit", "laplace", "--set", "epsilon=1", "--trials", "0"], "trials (0) must be an integer"),
        (["audit", "laplace", "--set", "epsilon=1", "--set", "budget.epsilon=1"], "execution.*, tracking.*"),
        (["audit", "laplace", "--set", "epsilon=1", "--set", "execution.nope=1"], "unknown key(s) 'nope'"),
        (["audit", "laplace", "--set", "epsilon=1", "--workers", "0"], "--workers (0) must be an int in [1, "),
    ],
)
def test_bad_input_exits_2_before_any_work(argv: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    assert main([*argv, "--serial", "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert message in capsys.readouterr().err
    assert not db.exists(), "nothing may be logged before the request validates"


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
@pytest.mark.ray
def test_serial_and_two_ray_workers_give_identical_audits(tmp_path: Path, uri: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    summaries = []
    for mode in (["--serial"], ["--workers", "2"]):
        path = tmp_path / f"{mode[-1]}.json"
        argv = ["audit", "exponential", "--set", "epsilon=0.7", "--trials", "1500", "--seed", "21",
                "--no-progress", "--tracking-uri", uri, "--summary-json", str(path), *mode]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "ε lower bound (95%)" in out and "no violation detected at 95%" in out
        summaries.append(json.loads(path.read_text()))
    serial, ray = summaries
    assert ray["timing"]["backend"] == "ray" and ray["timing"]["workers"] == 2
    assert serial["configurations"] == ray["configurations"]
    keep = {k: v for k, v in serial["audit"].items() if k != "run_id"}
    assert keep == {k: v for k, v in ray["audit"].items() if k != "run_id"}


def test_interrupted_audit_resumes_to_the_uninterrupted_result(uri: str, capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    base = ["audit", "laplace", "--set", "epsilon=1", "--set", "execution.batch_size=400", "--trials", "2000",
            "--seed", "8", "--serial", "--no-progress", "--tracking-uri", uri]
    full = tmp_path / "full.json"
    assert main([*base, "--summary-json", str(full)]) == 0
    capsys.readouterr()
    assert main([*base, "--max-units", "2"]) == 0  # the stop asked for is no interruption (issue 34 item 3)
    err = capsys.readouterr().err
    assert "stopped (after 2 units of work, as --max-units asked); finished work is saved" in err
    hint = err.strip().splitlines()[-1]
    assert hint.startswith("resume with: privlab audit laplace") and "--max-units" not in hint
    resumed = tmp_path / "resumed.json"
    assert main([*shlex.split(hint.removeprefix("resume with: "))[1:], "--summary-json", str(resumed)]) == 0
    out = capsys.readouterr().out
    first, second = json.loads(full.read_text()), json.loads(resumed.read_text())
    assert second["configurations"][0]["metrics"] == first["configurations"][0]["metrics"]
    assert {k: v for k, v in second["audit"].items() if k != "run_id"} == \
        {k: v for k, v in first["audit"].items() if k != "run_id"}
    assert "claimed ε" in out and "verdict" in out


def test_audit_run_is_logged_to_mlflow_with_its_report(uri: str, capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    from privlab.platform.tracking.tracker import Tracker

    path = tmp_path / "s.json"
    assert main(["audit", "pmse", "--set", "n=200", "--set", "depth=2", "--trials", "40", "--seed", "1",
                 "--confidence", "0.99", "--serial", "--no-progress", "--tracking-uri", uri,
                 "--summary-json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "claimed Δ" in out and "Clopper–Pearson 99%" in out
    summary = json.loads(path.read_text())
    assert summary["audit"]["kind"] == "sensitivity" and summary["audit"]["params"]["depth"] == 2
    tracker = Tracker(uri)
    (child,) = tracker.child_runs(tracker.experiment_id("audit-pmse", create=False), summary["run_id"])
    metrics = child.data.metrics
    assert metrics["claimed_sensitivity"] == 1 / 200 and metrics["abs_diff_count"] == 40
    assert metrics["max_abs_diff"] == metrics["abs_diff_max"] == summary["audit"]["empirical"]
    assert child.data.params["params.confidence"] == "0.99"
    report = tracker.read_text(summary["run_id"], "report/audit-pmse/audit.md")
    assert report is not None and "largest |f(D) − f(D′)|" in report


def test_a_violation_has_its_own_exit_code(uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 34 item 2: `verdict VIOLATION` exited 0, so scripts could not tell
    from privlab.platform.cli.commands import EXIT_VIOLATION

    assert main(["audit", "pmse", "--set", "n=200", "--set", "depth=unlimited", "--trials", "40", "--seed", "1",
                 "--serial", "--no-progress", "--tracking-uri", uri]) == EXIT_VIOLATION == 6
    assert "verdict                     VIOLATION" in capsys.readouterr().out


def test_help_describes_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["audit", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "usage: privlab audit" in out and "--confidence" in out and "Bonferroni" in out
