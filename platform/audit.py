"""Empirical audits of DP claims on neighbouring datasets (``privlab audit``).

An *auditable* names a mechanism or statistic, its frozen ``Params`` and a neighbouring pair
``(D, D′)``, and is one of two kinds:

* a **sensitivity audit** (:class:`SensitivityAuditable`) evaluates a statistic ``f`` on
  both datasets and compares ``|f(D) − f(D′)|`` with the claimed sensitivity Δ: the largest
  difference seen, its quantiles, a reservoir sample and the rate of pairs with
  ``|f(D) − f(D′)| > Δ`` with a Clopper–Pearson interval;
* an **ε audit** (:class:`EpsilonAuditable`) runs the mechanism on ``D`` and on ``D′`` (each
  run charges a fresh ledger, as in any run) and counts how often a scalar score of the output
  falls in each of a few events fixed in advance; :func:`epsilon_lower_bound` turns the
  counts into a lower confidence bound on ε that is compared with the claimed ε.

:func:`register_auditable` also registers a trials workload ``privacy_audit.<name>`` whose parameters
are the auditable's plus ``confidence``, so an audit runs through the ordinary runner: batched
on Ray, aggregated as a stream (memory O(events), whatever the trial count), logged to MLflow,
resumable, and bit-identical for any number of workers. ``privlab audit NAME`` builds a
one-configuration spec for it (:func:`prepare_audit`, :func:`run_audit`); a spec file may use
the workload directly, e.g. with a grid over the auditable's parameters.

Adding an auditable: subclass :class:`SensitivityAuditable` or :class:`EpsilonAuditable` in a
module beside your mechanism (``audit.py``), decorate it with :func:`register_auditable`, and list
the module under the ``privlab.auditables`` entry points in ``pyproject.toml`` (third-party
packages: in theirs). Examples: ``privlab.mechanisms.basic.audit`` and
``privlab.mechanisms.pmse.audit``.

Why the ε bound is valid (and what it does not say):
    Fix the events ``S_j = {score ≥ t_j}``, ``j = 1..T``, before any trial: the thresholds
    are functions of public parameters only (:meth:`EpsilonAuditable.thresholds`), never of
    outputs. Let ``p_j = P[score(M(D)) ∈ S_j]`` and ``q_j = P[score(M(D′)) ∈ S_j]``. Each of
    these 2T probabilities is estimated from N independent runs (every trial has its own seed
    stream), and its two-sided Clopper–Pearson interval at level ``1 − α/(2T)``
    (``α = 1 − confidence``) covers it with probability at least ``1 − α/(2T)`` for every N
    and every true value (the interval is exact, i.e. conservative). By the union bound all
    2T intervals hold at once with probability at least ``1 − α``; no independence between
    the intervals is needed (the D and D′ runs of one trial may share a random pair).

    If M is (ε, δ)-DP on this pair, then for every event S and in both directions
    ``P[M(D) ∈ S] ≤ e^ε P[M(D′) ∈ S] + δ``; a score is post-processing of the output, so this
    holds for ``S_j`` and for its complement. Hence ``ε ≥ ln((P_A − δ)/P_B)`` for each of the
    4T (event, direction) pairs, and on the event that all intervals hold,
    ``ln((lower(P_A) − δ)/upper(P_B)) ≤ ln((P_A − δ)/P_B) ≤ ε``. The reported
    ``ε_lb = max(0, max over the 4T pairs)`` is therefore ≤ the mechanism's true ε with
    probability at least ``confidence``, and taking the maximum over the pairs is allowed
    because the bounds hold simultaneously. ``ε_lb > claimed ε`` is a violation found at
    that confidence: a correct mechanism is flagged with probability at most ``1 − confidence``.
    ``ε_lb ≤ claimed ε`` proves nothing about other pairs or events ("no violation detected").
    The point estimate ``ln(p̂_A/p̂_B)`` of the best pair is reported for reading only.

Why the sensitivity findings are valid:
    Every observed ``|f(D) − f(D′)|`` on a neighbouring pair is a certified lower bound on the
    sensitivity (up to floating-point rounding of ``f``), so one difference above Δ is a
    counterexample, with no statistics involved. The violation *rate* under the auditable's
    pair distribution is a binomial proportion; its Clopper–Pearson interval at ``confidence``
    is exact. (The runner also logs its generic 95% Wilson interval for every rate metric;
    Wilson is approximate and can cover less than 95% for some rates, so the verdict uses
    Clopper–Pearson.) A violation is ``|f(D) − f(D′)| > Δ``, strictly, as in the Table-1
    workload ``pmse_sensitivity``.

References:
    Ding, Wang, Wang, Zhang & Kifer (CCS 2018), "Detecting Violations of Differential Privacy";
    Jagielski, Ullman & Oprea (NeurIPS 2020), "Auditing Differentially Private Machine
    Learning" (Clopper–Pearson lower bounds on ε); Clopper & Pearson (1934).
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import json
import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from privlab.platform import registry
from privlab.platform.errors import LedgerError, SpecError
from privlab.platform.plugins import Registry
from privlab.platform.ledger import Ledger, PrivacyEvent
from privlab.platform.randomness import RandomSource, SeededSource
from privlab.platform.registry import MetricKind, Pattern, Workload

if TYPE_CHECKING:
    from privlab.platform.runner import RunOptions

WORKLOAD_PREFIX = "privacy_audit."  # sorts after the built-in workloads in listings
DEFAULT_CONFIDENCE = 0.95
SPEC_TABLES = ("execution", "tracking")  # spec-level tables `--set` may address with a dotted key
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class AuditKind(enum.StrEnum):
    SENSITIVITY = "sensitivity"
    EPSILON = "epsilon"


class Auditable(abc.ABC):
    """What an audit needs to know about one mechanism or statistic.

    Subclasses set ``name`` (lower-case identifier), ``Params`` (a frozen keyword-only
    dataclass validated in ``__post_init__``; no field may be called ``confidence``),
    ``description`` (one line), ``neighbouring`` (the relation, e.g. ``"replace-one"``),
    ``claim`` (the claimed guarantee as a formula of the parameters, for ``--list``) and
    ``default_trials``, and implement :meth:`neighbours`.
    """

    name: ClassVar[str]
    kind: ClassVar[AuditKind]
    Params: ClassVar[type]
    description: ClassVar[str]
    neighbouring: ClassVar[str]
    claim: ClassVar[str]
    default_trials: ClassVar[int]

    @abc.abstractmethod
    def neighbours(self, params: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        """A neighbouring pair ``(D, D′)``: drawn from ``rng``, or fixed by public parameters."""


class SensitivityAuditable(Auditable):
    """A statistic whose claimed sensitivity Δ is audited on neighbouring pairs."""

    kind = AuditKind.SENSITIVITY
    #: The statistic, for output (e.g. ``"pMSE(X, Xˢ)"``).
    statistic: ClassVar[str]

    @abc.abstractmethod
    def claimed_sensitivity(self, params: Any) -> float:
        """The Δ the statistic is claimed to satisfy under ``neighbouring``."""

    @abc.abstractmethod
    def evaluate(self, params: Any, d: Any, d_prime: Any, rng: np.random.Generator) -> tuple[float, float]:
        """``(f(D), f(D′))``: the same query on both datasets.

        Randomness that is part of the query itself (e.g. the synthetic data a pMSE compares
        against) is drawn once from ``rng`` and shared by both evaluations. ``rng`` is the
        trial's stream, already advanced by :meth:`neighbours`.
        """


class EpsilonAuditable(Auditable):
    """A mechanism whose claimed ε (and δ) is audited by running it on ``D`` and ``D′``."""

    kind = AuditKind.EPSILON
    #: What :meth:`release` reduces the output to (e.g. ``"noisy mean"``).
    score: ClassVar[str]
    #: How many thresholds :meth:`thresholds` returns (fixes the workload's metric names).
    threshold_count: ClassVar[int]

    @abc.abstractmethod
    def claimed_epsilon(self, params: Any) -> float:
        """The ε the mechanism claims for one release."""

    def claimed_delta(self, params: Any) -> float:
        """The δ the mechanism claims for one release (0 for pure DP)."""
        return 0.0

    @abc.abstractmethod
    def plan(self, params: Any) -> list[PrivacyEvent]:
        """The DP steps one release charges (checked on both runs of every trial)."""

    @abc.abstractmethod
    def release(self, params: Any, data: Any, *, source: RandomSource, ledger: Ledger) -> float:
        """Run the mechanism on ``data`` (charging ``ledger``) and return a scalar score of
        its output. Any function of the output is allowed (post-processing), but it must not
        look at ``data`` except through the mechanism."""

    def event_label(self, params: Any, threshold: float, complement: bool) -> str:
        """How to print the event ``{score ≥ threshold}`` (or its complement, ``score < threshold``)."""
        return f"{self.score} {'<' if complement else '≥'} {threshold:.6g}"

    @abc.abstractmethod
    def thresholds(self, params: Any) -> Sequence[float]:
        """``threshold_count`` finite thresholds ``t``; the audit counts ``score ≥ t``.

        Choose them from public parameters and the claim only (e.g. the two datasets' exact
        statistics and the claimed noise scale), never from outputs: the bound's validity
        rests on the events being fixed before any trial runs.
        """


AUDITABLES: Registry[type[Auditable]] = Registry("auditable", groups=("privlab.auditables",), listed_as="auditables")


def register_auditable(cls: type[Auditable]) -> type[Auditable]:
    """Class decorator: register ``cls`` and its trials workload ``privacy_audit.<name>``.

    Raises:
        TypeError: ``cls`` is not a concrete auditable, lacks a class attribute, or its
            ``Params`` is not a frozen keyword-only dataclass (or has a ``confidence`` field).
        RegistryError: another class already uses the name.
    """
    if not (isinstance(cls, type) and issubclass(cls, (SensitivityAuditable, EpsilonAuditable))):
        raise TypeError(f"{cls!r} must subclass SensitivityAuditable or EpsilonAuditable")
    required = ["name", "Params", "description", "neighbouring", "claim", "default_trials"]
    required += ["statistic"] if issubclass(cls, SensitivityAuditable) else ["score", "threshold_count"]
    for attribute in required:
        if not hasattr(cls, attribute):
            raise TypeError(f"auditable {cls.__qualname__} must define {attribute!r}")
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if abstract:
        raise TypeError(f"auditable {cls.__qualname__} must implement {', '.join(abstract)}")
    if not isinstance(cls.name, str) or not _NAME.match(cls.name):
        raise TypeError(f"auditable name ({cls.name!r}) must be a lower-case identifier")
    params = cls.Params
    if not (dataclasses.is_dataclass(params) and params.__dataclass_params__.frozen  # type: ignore[attr-defined]
            and all(f.kw_only for f in dataclasses.fields(params))):
        raise TypeError(f"{cls.__qualname__}.Params must be a frozen keyword-only dataclass")
    if "confidence" in {f.name for f in dataclasses.fields(params)}:
        raise TypeError(f"{cls.__qualname__}.Params must not define 'confidence' (every audit has it)")
    if not isinstance(cls.default_trials, int) or cls.default_trials < 1:
        raise TypeError(f"{cls.__qualname__}.default_trials ({cls.default_trials!r}) must be an integer ≥ 1")
    if issubclass(cls, EpsilonAuditable) and not (isinstance(cls.threshold_count, int) and cls.threshold_count >= 1):
        raise TypeError(f"{cls.__qualname__}.threshold_count ({cls.threshold_count!r}) must be an integer ≥ 1")
    AUDITABLES.register(cls.name, cls)
    registry.register_workload(_audit_workload(cls))
    return cls


def get_auditable(name: str) -> Auditable:
    """A fresh instance of the auditable registered as ``name``."""
    return AUDITABLES.get(name)()


def auditable_names() -> list[str]:
    return AUDITABLES.names()


# --- statistics -----------------------------------------------------------------------------


def check_confidence(confidence: Any) -> float:
    if (not isinstance(confidence, (int, float)) or isinstance(confidence, bool)
            or not math.isfinite(confidence) or not 0 < confidence < 1):
        raise ValueError(f"confidence ({confidence!r}) must be a number strictly between 0 and 1, e.g. 0.95")
    return float(confidence)


def clopper_pearson(successes: int, trials: int, level: float) -> tuple[float, float]:
    """The two-sided Clopper–Pearson interval for a binomial proportion at ``level``.

    Each side fails with probability at most ``(1 − level)/2`` for every true proportion and
    every ``trials`` (it inverts two exact one-sided binomial tests).

    Raises:
        ValueError: ``successes`` outside ``[0, trials]``, ``trials < 1`` or ``level`` not in (0, 1).

    References:
        Clopper & Pearson (1934), Biometrika 26(4).
    """
    check_confidence(level)
    if not (isinstance(trials, (int, np.integer)) and trials >= 1):
        raise ValueError(f"trials ({trials!r}) must be an integer ≥ 1")
    if not (isinstance(successes, (int, np.integer)) and 0 <= successes <= trials):
        raise ValueError(f"successes ({successes!r}) must be an integer in [0, trials = {trials}]")
    from scipy import stats  # imported here: scipy.stats alone takes 0.4 s, and listings need none of it

    tail = (1.0 - level) / 2.0
    low = 0.0 if successes == 0 else float(stats.beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(stats.beta.ppf(1.0 - tail, successes + 1, trials - successes))
    return low, high


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpsilonBound:
    """The lower confidence bound on ε and the (event, direction) that attains it."""

    epsilon_lower: float  # ≥ 0; 0 when no event gives a positive bound
    estimate: float  # ln((p̂_A − δ)/p̂_B) for the attaining pair (may be ±inf); for reading only
    threshold: float  # t of the attaining event
    complement: bool  # the event is {score < t} rather than {score ≥ t}
    numerator: str  # "D" or "D′": the dataset whose probability is lower-bounded
    numerator_successes: int
    numerator_lower: float
    denominator_successes: int
    denominator_upper: float
    trials: int
    tests: int  # (event, direction) pairs considered: 4 × thresholds
    interval_level: float  # per-probability Clopper–Pearson level, 1 − α/(2T)


def epsilon_lower_bound(
    events_d: Sequence[int], events_d_prime: Sequence[int], trials: int, thresholds: Sequence[float], *,
    confidence: float, delta: float = 0.0,
) -> EpsilonBound:
    """A lower bound on ε that holds with probability ≥ ``confidence`` (module docstring).

    Args:
        events_d: For each threshold ``t_j``, how many of the ``trials`` runs on D scored ≥ t_j.
        events_d_prime: The same for the runs on D′.
        trials: Runs per dataset.
        thresholds: The ``t_j``, fixed before any run.
        confidence: The simultaneous confidence level, e.g. 0.95.
        delta: The claimed δ (subtracted from the numerator probability).

    Returns:
        The bound, maximised over the 4T (event, direction) pairs, floored at 0.

    Raises:
        ValueError: Mismatched lengths, counts outside ``[0, trials]``, bad confidence or δ.

    Privacy:
        Reads only outputs of simulated runs; the guarantee it tests is (ε, δ)-DP on the pair
        that produced them, in both directions (the neighbouring relation is symmetric).

    References:
        Jagielski, Ullman & Oprea (2020), Section 3 (Clopper–Pearson bound on ε); Ding et al.
        (2018) for counting events on neighbouring datasets.
    """
    confidence = check_confidence(confidence)
    if not (len(events_d) == len(events_d_prime) == len(thresholds) >= 1):
        raise ValueError(
            f"events_d, events_d_prime and thresholds (lengths {len(events_d)}, {len(events_d_prime)}, "
            f"{len(thresholds)}) must have the same positive length"
        )
    if not (isinstance(delta, (int, float)) and 0.0 <= delta < 1.0):
        raise ValueError(f"delta ({delta!r}) must be in [0, 1)")
    count = len(thresholds)
    level = 1.0 - (1.0 - confidence) / (2 * count)
    best: EpsilonBound | None = None
    for j, threshold in enumerate(thresholds):
        k_d, k_dp = int(events_d[j]), int(events_d_prime[j])
        d_low, d_high = clopper_pearson(k_d, trials, level)
        dp_low, dp_high = clopper_pearson(k_dp, trials, level)
        # (complement?, numerator, its successes and lower bound, denominator successes and upper bound)
        candidates = (
            (False, "D′", k_dp, dp_low, k_d, d_high),
            (False, "D", k_d, d_low, k_dp, dp_high),
            (True, "D", trials - k_d, 1.0 - d_high, trials - k_dp, 1.0 - dp_low),
            (True, "D′", trials - k_dp, 1.0 - dp_high, trials - k_d, 1.0 - d_low),
        )
        for complement, numerator, k_num, num_low, k_den, den_high in candidates:
            value = math.log((num_low - delta) / den_high) if num_low > delta else -math.inf
            if best is None or value > best.epsilon_lower:
                p_num, p_den = k_num / trials, k_den / trials
                if p_num <= delta:
                    estimate = -math.inf
                else:
                    estimate = math.inf if p_den == 0 else math.log((p_num - delta) / p_den)
                best = EpsilonBound(
                    epsilon_lower=value, estimate=estimate, threshold=float(threshold), complement=complement,
                    numerator=numerator, numerator_successes=k_num, numerator_lower=num_low,
                    denominator_successes=k_den, denominator_upper=den_high, trials=trials,
                    tests=4 * count, interval_level=level,
                )
    assert best is not None  # at least one threshold
    if best.epsilon_lower < 0:
        best = dataclasses.replace(best, epsilon_lower=0.0)
    return best


# --- the audit workloads ----------------------------------------------------------------------


def _audit_params(auditable: type[Auditable]) -> type:
    """The workload's Params: the auditable's fields plus ``confidence``."""
    base = auditable.Params
    base_post_init: Callable[[Any], None] | None = getattr(base, "__post_init__", None)

    def __post_init__(self: Any) -> None:
        if base_post_init is not None:
            base_post_init(self)
        check_confidence(self.confidence)

    return dataclasses.make_dataclass(
        f"{base.__name__}WithConfidence",
        [("confidence", float, dataclasses.field(default=DEFAULT_CONFIDENCE, kw_only=True))],
        bases=(base,),
        frozen=True,
        kw_only=True,
        namespace={"__post_init__": __post_init__, "__module__": __name__},
    )


class _AuditWorkload(Workload):
    auditable: ClassVar[type[Auditable]]
    pattern = Pattern.TRIALS

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
        trials, successes = int(violation["count"]), int(round(violation.get("successes", 0.0)))
        low, high = clopper_pearson(successes, trials, params.confidence) if trials else (math.nan, math.nan)
        return {"claimed_sensitivity": self.auditable().claimed_sensitivity(params),
                "max_abs_diff": summary["abs_diff"].get("max", math.nan),
                "violation_rate_lower": low, "violation_rate_upper": high, "violation_found": float(successes > 0)}


class _EpsilonAudit(_AuditWorkload):
    auditable: ClassVar[type[EpsilonAuditable]]
    derived_metrics = ("claimed_epsilon", "epsilon_lower_bound", "epsilon_estimate", "best_threshold",
                       "violation_found")

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
            self._thresholds_for = (params, _thresholds(auditable, params))
        for j, threshold in enumerate(self._thresholds_for[1]):
            result[f"event_d_{j:02d}"] = float(score_d >= threshold)
            result[f"event_d_prime_{j:02d}"] = float(score_d_prime >= threshold)
        return result

    def derive(self, params: Any, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        auditable = self.auditable()
        bound = _bound_from(auditable, params, lambda name, stat: summary[name].get(stat, 0.0))
        claimed = auditable.claimed_epsilon(params)
        return {"claimed_epsilon": claimed, "epsilon_lower_bound": bound.epsilon_lower,
                "epsilon_estimate": bound.estimate, "best_threshold": bound.threshold,
                "violation_found": float(bound.epsilon_lower > claimed)}


def _thresholds(auditable: EpsilonAuditable, params: Any) -> list[float]:
    values = [float(t) for t in auditable.thresholds(params)]
    if len(values) != auditable.threshold_count or not all(math.isfinite(t) for t in values):
        raise ValueError(
            f"auditable {auditable.name!r}: thresholds() returned {values!r}; it must return "
            f"threshold_count = {auditable.threshold_count} finite numbers"
        )
    return values


def _bound_from(auditable: EpsilonAuditable, params: Any, metric: Callable[[str, str], float]) -> EpsilonBound:
    """The ε bound from aggregated event counts (``metric(name, statistic)``)."""
    thresholds = _thresholds(auditable, params)
    trials = int(metric("event_d_00", "count"))
    events_d = [int(round(metric(f"event_d_{j:02d}", "successes"))) for j in range(len(thresholds))]
    events_dp = [int(round(metric(f"event_d_prime_{j:02d}", "successes"))) for j in range(len(thresholds))]
    return epsilon_lower_bound(events_d, events_dp, trials, thresholds, confidence=params.confidence,
                               delta=auditable.claimed_delta(params))


def _audit_workload(auditable: type[Auditable]) -> type[Workload]:
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


# --- results --------------------------------------------------------------------------------


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
        trials = int(metrics["violation_count"])
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
    bound = _bound_from(auditable, params, lambda name, stat: metrics[f"{name}_{stat}"])
    claimed = auditable.claimed_epsilon(params)
    violation = bound.epsilon_lower > claimed
    if violation:
        verdict = (f"VIOLATION: ε ≥ {bound.epsilon_lower:.4g} > claimed {claimed:.6g} "
                   f"with {_percent(confidence)} confidence")
    else:
        verdict = (f"no violation detected at {_percent(confidence)} "
                   f"(ε lower bound {bound.epsilon_lower:.4g} ≤ claimed {claimed:.6g})")
    other = "D" if bound.numerator == "D′" else "D′"
    details = {
        "score": auditable.score, "neighbouring": auditable.neighbouring,
        "claimed_delta": auditable.claimed_delta(params), "estimate": bound.estimate,
        "event": auditable.event_label(params, bound.threshold, bound.complement),
        "numerator": bound.numerator, "denominator": other,
        "numerator_successes": bound.numerator_successes, "numerator_lower": bound.numerator_lower,
        "denominator_successes": bound.denominator_successes, "denominator_upper": bound.denominator_upper,
        "tests": bound.tests, "interval_level": bound.interval_level,
        "thresholds": _thresholds(auditable, params),
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
    for name in auditable_names():
        auditable = AUDITABLES.get(name)
        params = registry.describe_params(auditable.Params, none="unlimited")
        kind = "sensitivity" if auditable.kind is AuditKind.SENSITIVITY else "ε"
        blocks.append(
            f"{name:14s}{kind} audit: {auditable.description}\n"
            f"{'':14s}claim: {auditable.claim}; {auditable.neighbouring} neighbours\n"
            f"{'':14s}parameters: {', '.join(params) or '(none)'}\n"
            f"{'':14s}default trials: {auditable.default_trials:,}"
        )
    return "\n\n".join(blocks)


# --- running an audit ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditRequest:
    """A validated audit: the generated one-configuration spec and its ``--set`` overrides."""

    name: str
    spec_text: str
    overrides: tuple[str, ...]
    trials: int
    confidence: float


def prepare_audit(name: str, *, settings: Sequence[str] = (), trials: int | None = None,
                  confidence: float = DEFAULT_CONFIDENCE, seed: int | None = None,
                  experiment: str | None = None) -> AuditRequest:
    """Validate an audit request completely (nothing runs, nothing is logged).

    Args:
        name: A registered auditable.
        settings: ``key=value`` strings (TOML values): ``key`` is a parameter of the auditable,
            or ``execution.*`` / ``tracking.*`` for the generated spec.
        trials: Neighbouring pairs (sensitivity) or runs per dataset (ε); default: the
            auditable's ``default_trials``.
        confidence: The confidence level of the reported interval or bound.
        seed: The root seed (default: fresh OS entropy, logged with the run).
        experiment: The MLflow experiment (default ``audit-<name>``).

    Raises:
        RegistryError: Unknown auditable (the message lists them).
        SpecError: Unknown parameter, bad value, bad trials, confidence or seed.
    """
    from privlab.platform.spec import MAX_UNITS, apply_override, parse_spec

    auditable = get_auditable(name)
    where = f"audit {name!r}"
    try:
        confidence = check_confidence(confidence)
    except ValueError as error:
        raise SpecError(f"{where}: --confidence: {error}") from None
    trials = auditable.default_trials if trials is None else trials
    if not isinstance(trials, int) or isinstance(trials, bool) or not 1 <= trials <= MAX_UNITS:
        raise SpecError(f"{where}: trials ({trials!r}) must be an integer between 1 and {MAX_UNITS:.0e}")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise SpecError(f"{where}: seed ({seed!r}) must be a non-negative integer")
    allowed = [f.name for f in dataclasses.fields(auditable.Params)]
    overrides = []
    for setting in settings:
        key, sep, value = setting.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"--set {setting!r} must look like key=value (e.g. {allowed[0] if allowed else 'key'}=1.0)")
        key = key.removeprefix("params.")
        if "." in key:
            if key.split(".", 1)[0] not in SPEC_TABLES:
                raise SpecError(
                    f"--set {key}: {where} takes its parameters ({', '.join(allowed) or 'none'}) and "
                    f"{', '.join(t + '.*' for t in SPEC_TABLES)} settings; use --trials, --confidence and "
                    "--seed for those"
                )
            overrides.append(f"{key}={value}")
        elif key not in allowed:
            hint = f"; use --{key}" if key in ("trials", "confidence", "seed") else ""
            raise SpecError(f"{where}: unknown parameter {key!r}; parameters: {', '.join(allowed) or 'none'}{hint}")
        else:
            overrides.append(f"params.{key}={value}")
    text = _spec_text(auditable, trials=trials, confidence=confidence, seed=seed,
                      experiment=experiment or f"audit-{name}")
    import tomllib

    document = tomllib.loads(text)
    for override in overrides:
        apply_override(document, override)
    missing = [f.name for f in dataclasses.fields(auditable.Params)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               and f.name not in document["params"]]
    if missing:
        example = " ".join(f"--set {m}=VALUE" for m in missing)
        raise SpecError(f"{where}: missing required parameter(s) {', '.join(map(repr, missing))}; give {example} "
                        "(privlab has no default ε)")
    parse_spec(document, source=Path(f"{name}.toml"))  # every parameter and setting checked here
    return AuditRequest(name=name, spec_text=text, overrides=tuple(overrides), trials=trials, confidence=confidence)


def _spec_text(auditable: Auditable, *, trials: int, confidence: float, seed: int | None, experiment: str) -> str:
    kind = "sensitivity" if auditable.kind is AuditKind.SENSITIVITY else "ε"
    lines = [
        f"# Generated by `privlab audit {auditable.name}`.",
        f"name = {json.dumps('audit-' + auditable.name)}",
        f"description = {json.dumps(f'{kind} audit: {auditable.description}')}",
    ]
    if seed is not None:
        lines.append(f"seed = {seed}")
    lines += [
        f"workload = {json.dumps(WORKLOAD_PREFIX + auditable.name)}",
        f"trials = {trials}",
        "",
        "[params]",
        f"confidence = {confidence!r}",
        "",
        "[tracking]",
        f"experiment = {json.dumps(experiment)}",
        "plots = false  # one configuration: nothing to plot across; the reservoir keeps the distribution",
    ]
    return "\n".join(lines) + "\n"


def run_audit(request: AuditRequest, options: RunOptions) -> tuple[AuditResult, dict[str, Any]]:
    """Run a prepared audit with the runner (serial, local Ray or a cluster, as ``options`` say).

    Returns:
        The audit's findings and the runner's summary (``--summary-json``).

    Raises:
        RunInterrupted: Ctrl-C or ``stop_after_units``; resume with ``options.resume``.
        ExecutionError, TrackingError: As :func:`privlab.platform.runner.run_experiment`.
    """
    from privlab.platform.runner import run_experiment
    from privlab.platform.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="privlab-audit-") as folder:
        path = Path(folder) / f"audit-{request.name}.toml"
        path.write_text(request.spec_text)
        spec = load_spec(path, request.overrides)
        summary = run_experiment(spec, options)
    config = spec.configurations[0]
    params = registry.build_params(registry.get_workload(config.workload).Params, config.params, where=config.id)
    result = audit_result(get_auditable(request.name), params, summary["configurations"][0]["metrics"],
                          run_id=summary["run_id"],
                          experiment=summary["experiment"], root_seed=summary["root_seed"])
    return result, summary
