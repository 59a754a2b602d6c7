"""What an audit found, for people: the verdict, the interval or bound, and ``privlab audit --list``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from privlab.platform.audit.audit_statistics import bound_from, clopper_pearson, mu_bound_from, thresholds_of
from privlab.platform.audit.auditables import AUDITABLES, Auditable, AuditKind, EpsilonAuditable, SensitivityAuditable, auditable_names
from privlab.platform.core.plugins import describe_params
from privlab.platform.experiment import registry

@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditResult:
    """The outcome of one audit, as ``privlab audit`` prints it and ``--summary-json`` stores it."""

    name: str
    kind: AuditKind
    description: str
    params: dict[str, Any]
    trials: int
    confidence: float
    claimed: float  # Δ or ε
    empirical: float  # max |f(D) − f(D′)|, or the ε lower bound
    violation: bool
    verdict: str
    details: dict[str, Any]
    run_id: str | None = None
    experiment: str | None = None
    root_seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        return data


def _percent(level: float) -> str:
    return f"{100 * level:.6g}%"


def audit_result(auditable: Auditable, params: Any, metrics: Mapping[str, float], *,
                 run_id: str | None = None, experiment: str | None = None,
                 root_seed: int | None = None) -> AuditResult:
    """Read an audit's findings from a configuration's flattened metrics (``{metric}_{stat}``)."""
    confidence = params.confidence
    values = {k: v for k, v in registry.params_dict(params).items() if k != "confidence"}
    common = {"name": auditable.name, "kind": auditable.kind, "description": auditable.description,
              "params": values, "confidence": confidence, "run_id": run_id, "experiment": experiment,
              "root_seed": root_seed}
    if isinstance(auditable, SensitivityAuditable):
        trials = int(metrics["violation_trials"])
        successes = int(round(metrics["violation_successes"]))
        claimed = auditable.claimed_sensitivity(params)
        low, high = clopper_pearson(successes, trials, confidence)
        largest = metrics["abs_diff_max"]
        if successes:
            verdict = (f"VIOLATION: {successes:,} of {trials:,} neighbouring pairs differ by more than "
                       f"Δ = {claimed:.6g} (largest {largest:.4g} = {largest / claimed:.3g} Δ)")
        else:
            verdict = (f"no violation detected: all {trials:,} pairs within Δ; violation rate ≤ "
                       f"{high:.3g} at {_percent(confidence)}")
        details = {
            "statistic": auditable.statistic, "neighbouring": auditable.neighbouring,
            "violations": successes, "violation_rate": successes / trials,
            "violation_rate_lower": low, "violation_rate_upper": high,
            "max_difference_over_claimed": largest / claimed,
            "abs_diff_p50": metrics["abs_diff_p50"], "abs_diff_p95": metrics["abs_diff_p95"],
            "abs_diff_mean": metrics["abs_diff_mean"],
        }
        return AuditResult(trials=trials, claimed=claimed, empirical=largest, violation=successes > 0,
                           verdict=verdict, details=details, **common)
    assert isinstance(auditable, EpsilonAuditable)
    bound = bound_from(auditable, params, lambda name, stat: metrics[f"{name}_{stat}"])
    mu = mu_bound_from(auditable, params, lambda name, stat: metrics[f"{name}_{stat}"])
    claimed = auditable.claimed_epsilon(params)
    claimed_mu = auditable.claimed_mu(params)
    epsilon_violation = bound.epsilon_lower > claimed
    mu_violation = claimed_mu is not None and mu.mu_lower > claimed_mu
    violation = epsilon_violation or mu_violation
    if violation:
        found = [f"ε ≥ {bound.epsilon_lower:.4g} > claimed {claimed:.6g}"] if epsilon_violation else []
        found += [f"μ ≥ {mu.mu_lower:.4g} > claimed μ {claimed_mu:.4g}"] if mu_violation else []
        verdict = f"VIOLATION: {'; '.join(found)} with {_percent(confidence)} confidence"
    else:
        mu_text = f"; μ lower bound {mu.mu_lower:.4g} ≤ claimed μ {claimed_mu:.4g}" if claimed_mu is not None else ""
        verdict = (f"no violation detected at {_percent(confidence)} "
                   f"(ε lower bound {bound.epsilon_lower:.4g} ≤ claimed {claimed:.6g}{mu_text})")
    other = "D" if bound.numerator == "D′" else "D′"
    details = {
        "score": auditable.score, "neighbouring": getattr(params, "neighbouring", auditable.neighbouring),
        "claimed_delta": auditable.claimed_delta(params), "estimate": bound.estimate,
        "event": auditable.event_label(params, bound.threshold, bound.complement),
        "numerator": bound.numerator, "denominator": other,
        "numerator_successes": bound.numerator_successes, "numerator_lower": bound.numerator_lower,
        "denominator_successes": bound.denominator_successes, "denominator_upper": bound.denominator_upper,
        "tests": bound.tests, "interval_level": bound.interval_level,
        "thresholds": thresholds_of(auditable, params),
        "claimed_mu": claimed_mu, "mu_lower": mu.mu_lower, "mu_estimate": mu.mu_estimate,
        "mu_test": ("D′ when " + auditable.event_label(params, mu.threshold, mu.reversed)
                    + f": FPR {mu.fpr:.4g} (≤ {mu.fpr_upper:.4g}), FNR {mu.fnr:.4g} (≤ {mu.fnr_upper:.4g})"),
        "epsilon_tightness": bound.epsilon_lower / claimed,
        "mu_tightness": None if not claimed_mu else mu.mu_lower / claimed_mu,
    }
    return AuditResult(trials=bound.trials, claimed=claimed, empirical=bound.epsilon_lower, violation=violation,
                       verdict=verdict, details=details, **common)


def _fmt_params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={'unlimited' if v is None else v}" for k, v in params.items()) or "(none)"


def render_result(result: AuditResult, summary: Mapping[str, Any] | None = None) -> str:
    """A readable table of an audit: claimed against empirical, the interval, the verdict."""
    d = result.details
    kind = "sensitivity audit" if result.kind is AuditKind.SENSITIVITY else "ε audit"
    conf = _percent(result.confidence)
    lines = [f"privlab audit {result.name} — {kind}: {result.description}"]
    if summary is not None:
        timing = summary.get("timing", {})
        lines.append(f"  run {summary['run_id']} in experiment {summary['experiment']!r} (seed {summary['root_seed']}, "
                     f"{timing.get('wall_seconds', math.nan):.1f} s, {timing.get('workers', '?')} worker(s))")
    lines.append(f"  parameters: {_fmt_params(result.params)}; {d['neighbouring']} neighbours")
    rows: list[tuple[str, str]]
    if result.kind is AuditKind.SENSITIVITY:
        n = result.trials
        rows = [
            ("claimed Δ", f"{result.claimed:.6g}"),
            ("largest |f(D) − f(D′)|", f"{result.empirical:.6g}  ({d['max_difference_over_claimed']:.3g} × Δ)"),
            ("|f(D) − f(D′)| median, p95", f"{d['abs_diff_p50']:.4g}, {d['abs_diff_p95']:.4g}"),
            ("pairs over Δ", f"{d['violations']:,} of {n:,} = {100 * d['violation_rate']:.3g}%  "
                             f"[{100 * d['violation_rate_lower']:.3g}%, {100 * d['violation_rate_upper']:.3g}%] "
                             f"Clopper–Pearson {conf}"),
        ]
    else:
        n = result.trials
        delta = f", δ = {d['claimed_delta']:.3g}" if d["claimed_delta"] else ""
        rows = [
            ("claimed ε", f"{result.claimed:.6g}{delta}"),
            (f"ε lower bound ({conf})", f"{result.empirical:.4g}"),
            ("point estimate", f"{d['estimate']:.4g}  (same event; not a bound)"),
            ("event", f"{d['event']}: P_{d['numerator']} ≥ {d['numerator_lower']:.4g} "
                      f"({d['numerator_successes']:,}/{n:,}), P_{d['denominator']} ≤ {d['denominator_upper']:.4g} "
                      f"({d['denominator_successes']:,}/{n:,})"),
            ("method", f"{d['tests']} (event, direction) pairs fixed in advance; Clopper–Pearson at "
                       f"{_percent(d['interval_level'])} each (Bonferroni)"),
        ]
        if "mu_lower" in d:
            claim = f" of claimed μ {d['claimed_mu']:.4g} ({d['mu_tightness']:.3g})" if d.get("claimed_mu") else ""
            rows += [
                (f"GDP μ lower bound ({conf})", f"{d['mu_lower']:.4g}{claim}; point estimate {d['mu_estimate']:.4g}"),
                ("μ attained by", f"{d['mu_test']} (same intervals as ε)"),
            ]
    rows.append(("trials", f"{result.trials:,} neighbouring pairs" if result.kind is AuditKind.SENSITIVITY
                 else f"{result.trials:,} runs on D and {result.trials:,} on D′"))
    rows.append(("verdict", result.verdict))
    width = max(len(label) for label, _ in rows)
    lines.append("")
    lines.extend(f"  {label.ljust(width)}  {value}" for label, value in rows)
    return "\n".join(lines)


def describe_auditables() -> str:
    """``privlab audit --list``: name, kind, claim, parameters with their defaults."""
    blocks = []
    width = max([14, *(len(name) + 2 for name in auditable_names())])
    for name in auditable_names():
        auditable = AUDITABLES.get(name)
        params = describe_params(auditable.Params, none="unlimited")
        kind = "sensitivity" if auditable.kind is AuditKind.SENSITIVITY else "ε"
        blocks.append(
            f"{name:{width}s}{kind} audit: {auditable.description}\n"
            f"{'':{width}s}claim: {auditable.claim}; {auditable.neighbouring} neighbours\n"
            f"{'':{width}s}parameters: {', '.join(params) or '(none)'}\n"
            f"{'':{width}s}default trials: {auditable.default_trials:,}"
        )
    return "\n\n".join(blocks)
