"""The statistics of an audit: exact binomial intervals and a lower confidence bound on ε.

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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from privlab.platform.audit.auditables import EpsilonAuditable

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


def thresholds_of(auditable: EpsilonAuditable, params: Any) -> list[float]:
    values = [float(t) for t in auditable.thresholds(params)]
    if len(values) != auditable.threshold_count or not all(math.isfinite(t) for t in values):
        raise ValueError(
            f"auditable {auditable.name!r}: thresholds() returned {values!r}; it must return "
            f"threshold_count = {auditable.threshold_count} finite numbers"
        )
    return values


def bound_from(auditable: EpsilonAuditable, params: Any, metric: Callable[[str, str], float]) -> EpsilonBound:
    """The ε bound from aggregated event counts (``metric(name, statistic)``)."""
    thresholds = thresholds_of(auditable, params)
    trials = int(metric("event_d_00", "trials"))
    events_d = [int(round(metric(f"event_d_{j:02d}", "successes"))) for j in range(len(thresholds))]
    events_dp = [int(round(metric(f"event_d_prime_{j:02d}", "successes"))) for j in range(len(thresholds))]
    return epsilon_lower_bound(events_d, events_dp, trials, thresholds, confidence=params.confidence,
                               delta=auditable.claimed_delta(params))
