"""The trials workload ``privacy_audit.<name>`` that :func:`~privlab.platform.audit.registration.register_auditable`
makes from an auditable: its parameters (the auditable's plus ``confidence``), its trials (a
neighbouring pair, then the statistic or the mechanism on each side) and its derived metrics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pandas as pd

from privlab.platform.audit.audit_results import audit_result, render_result
from privlab.platform.audit.audit_statistics import (
    bound_from,
    check_confidence,
    clopper_pearson,
    mu_bound_from,
    thresholds_of,
)
from privlab.platform.audit.auditables import (
    DEFAULT_CONFIDENCE,
    WORKLOAD_PREFIX,
    Auditable,
    EpsilonAuditable,
    SensitivityAuditable,
)
from privlab.platform.core.errors import LedgerError
from privlab.platform.core.validation import ConstrainedParams, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment import registry
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload

def _audit_params(auditable: type[Auditable]) -> type:
    """The workload's Params: the auditable's fields plus ``confidence``."""
    base = auditable.Params
    base_post_init: Callable[[Any], None] | None = getattr(base, "__post_init__", None)

    def __post_init__(self: Any) -> None:
        if base_post_init is not None:
            base_post_init(self)
        check_confidence(self.confidence)

    namespace: dict[str, Any] = {"__post_init__": __post_init__, "__module__": __name__}
    if issubclass(base, ConstrainedParams):  # its declared constraints must cover every field
        namespace["_parameter_constraints"] = {**base._parameter_constraints, "confidence": [Unconstrained()]}
    return dataclasses.make_dataclass(
        f"{base.__name__}WithConfidence",
        [("confidence", float, dataclasses.field(default=DEFAULT_CONFIDENCE, kw_only=True))],
        bases=(base,),
        frozen=True,
        kw_only=True,
        namespace=namespace,
    )


class _AuditWorkload(Workload):
    auditable: ClassVar[type[Auditable]]
    pattern = Pattern.TRIALS

    def warm_up(self, params: Any) -> None:
        self.auditable().warm_up(params)

    def report(self, results: Any) -> dict[str, str | bytes]:
        """``audit.md``: the audit table of every configuration (as ``privlab audit`` prints it)."""
        lines = [f"# {results.study}: {self.__doc__}", "",
                 f"Run `{results.run_id}` in experiment `{results.experiment}`, seed {results.root_seed}."]
        if results.command:
            lines += ["", f"    {results.command}"]
        for entry in results.entries:
            params = entry_params(self, entry)
            result = audit_result(self.auditable(), params, entry["metrics"], run_id=results.run_id,
                                  experiment=results.experiment, root_seed=results.root_seed)
            lines += ["", f"## {entry['label']}", "", "```", render_result(result), "```"]
        return {"audit.md": "\n".join(lines) + "\n"}


def entry_params(workload: Workload, entry: Mapping[str, Any]) -> Any:
    """A summary entry's workload parameters, rebuilt from its flattened ``params.*`` keys."""
    values = {k.removeprefix("params."): v for k, v in entry["params"].items() if k.startswith("params.")}
    return registry.build_params(workload.Params, values, where=entry["id"])


class _SensitivityAudit(_AuditWorkload):
    auditable: ClassVar[type[SensitivityAuditable]]
    metrics = {  # named as in the Table-1 workload's facets
        "abs_diff": MetricKind.VALUE,  # |f(D) − f(D′)|
        "abs_diff_over_claimed": MetricKind.VALUE,  # |f(D) − f(D′)| / Δ
        "violation": MetricKind.RATE,  # |f(D) − f(D′)| > Δ
    }
    derived_metrics = ("claimed_sensitivity", "max_abs_diff", "violation_rate_lower", "violation_rate_upper",
                       "violation_found")

    def run_trial(self, params: Any, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        auditable = self.auditable()
        rng = source.rng
        d, d_prime = auditable.neighbours(params, rng)
        f_d, f_d_prime = auditable.evaluate(params, d, d_prime, rng)
        bound = auditable.claimed_sensitivity(params)
        difference = abs(float(f_d) - float(f_d_prime))
        return {"abs_diff": difference, "abs_diff_over_claimed": difference / bound,
                "violation": float(difference > bound)}

    def derive(self, params: Any, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        violation = summary["violation"]
        trials, successes = int(violation["trials"]), int(round(violation.get("successes", 0.0)))
        low, high = clopper_pearson(successes, trials, params.confidence) if trials else (math.nan, math.nan)
        return {"claimed_sensitivity": self.auditable().claimed_sensitivity(params),
                "max_abs_diff": summary["abs_diff"].get("max", math.nan),
                "violation_rate_lower": low, "violation_rate_upper": high, "violation_found": float(successes > 0)}


class _EpsilonAudit(_AuditWorkload):
    auditable: ClassVar[type[EpsilonAuditable]]
    derived_metrics = ("claimed_epsilon", "epsilon_lower_bound", "epsilon_estimate", "best_threshold",
                       "claimed_mu", "mu_lower_bound", "mu_estimate", "violation_found")

    def __init__(self) -> None:
        # A workload instance serves one batch of trials of one configuration: compute the
        # thresholds once per params object, not once per trial.
        self._thresholds_for: tuple[Any, list[float]] | None = None

    def plan(self, params: Any) -> list[PrivacyEvent]:
        return self.auditable().plan(params)

    def run_trial(self, params: Any, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        # One stream per trial, used in order: the pair, the run on D, the run on D′. (Spawning
        # child generators would cost more than a Laplace release; the bound needs only that
        # trials are independent of each other.)
        auditable = self.auditable()
        d, d_prime = auditable.neighbours(params, source.rng)
        score_d = float(auditable.release(params, d, source=source, ledger=ledger))
        neighbour_ledger = ledger.fresh()  # the neighbouring world's release, charged as usual
        score_d_prime = float(auditable.release(params, d_prime, source=source, ledger=neighbour_ledger))
        if neighbour_ledger.events != ledger.events:
            raise LedgerError(
                f"auditable {auditable.name!r} charged {[e.name for e in ledger.events]} on D but "
                f"{[e.name for e in neighbour_ledger.events]} on D′: what a mechanism charges must not "
                "depend on the data"
            )
        result = {"score_d": score_d, "score_d_prime": score_d_prime}
        if self._thresholds_for is None or self._thresholds_for[0] is not params:
            self._thresholds_for = (params, thresholds_of(auditable, params))
        for j, threshold in enumerate(self._thresholds_for[1]):
            result[f"event_d_{j:02d}"] = float(score_d >= threshold)
            result[f"event_d_prime_{j:02d}"] = float(score_d_prime >= threshold)
        return result

    def derive(self, params: Any, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        auditable = self.auditable()
        metric = lambda name, stat: summary[name].get(stat, 0.0)  # noqa: E731
        bound = bound_from(auditable, params, metric)
        mu = mu_bound_from(auditable, params, metric)
        claimed = auditable.claimed_epsilon(params)
        claimed_mu = auditable.claimed_mu(params)
        violation = bound.epsilon_lower > claimed or (claimed_mu is not None and mu.mu_lower > claimed_mu)
        return {"claimed_epsilon": claimed, "epsilon_lower_bound": bound.epsilon_lower,
                "epsilon_estimate": bound.estimate, "best_threshold": bound.threshold,
                "claimed_mu": math.nan if claimed_mu is None else claimed_mu, "mu_lower_bound": mu.mu_lower,
                "mu_estimate": mu.mu_estimate, "violation_found": float(violation)}


def audit_workload(auditable: type[Auditable]) -> type[Workload]:
    doc = f"{auditable.kind.value} audit: {auditable.description}"
    attributes: dict[str, Any] = {
        "name": WORKLOAD_PREFIX + auditable.name, "Params": _audit_params(auditable), "auditable": auditable,
        "__doc__": doc, "__module__": __name__, "__qualname__": f"AuditWorkload[{auditable.__qualname__}]",
    }
    if issubclass(auditable, EpsilonAuditable):
        metrics = {"score_d": MetricKind.VALUE, "score_d_prime": MetricKind.VALUE}
        for j in range(auditable.threshold_count):
            metrics[f"event_d_{j:02d}"] = MetricKind.RATE
            metrics[f"event_d_prime_{j:02d}"] = MetricKind.RATE
        attributes["metrics"] = metrics
        base: type[Workload] = _EpsilonAudit
    else:
        base = _SensitivityAudit
    return type(f"AuditWorkload_{auditable.name}", (base,), attributes)
