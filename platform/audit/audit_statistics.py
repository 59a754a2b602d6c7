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


def clopper_pearson_arrays(successes: Any, trials: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`clopper_pearson` for an array of success counts at once (same bounds, vectorised)."""
    from scipy import stats

    k = np.asarray(successes, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore"):
        low = np.where(k == 0, 0.0, stats.beta.ppf(tail, np.maximum(k, 1), trials - k + 1))
        high = np.where(k == trials, 1.0, stats.beta.ppf(1.0 - tail, k + 1, np.maximum(trials - k, 1)))
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


# --- Gaussian DP: μ from the whole trade-off curve ---------------------------------------------

def gdp_tradeoff(alpha: Any, mu: float) -> Any:
    """The μ-GDP trade-off curve ``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)``: the smallest type-II error
    (false-negative rate) any test between ``M(D)`` and ``M(D′)`` with type-I error α can have.

    References:
        Dong, Roth & Su (2022), "Gaussian Differential Privacy", JRSS B 84(1), Definition 2.
    """
    from scipy import stats

    return stats.norm.cdf(stats.norm.isf(np.asarray(alpha, dtype=np.float64)) - mu)


def gdp_mu_of_test(alpha: float, beta: float) -> float:
    """The smallest μ whose curve ``G_μ`` passes through or below ``(α, β)``:
    ``Φ⁻¹(1 − α) − Φ⁻¹(β)`` (``-inf`` when ``α + β ≥ 1`` cannot constrain any μ ≥ 0,
    ``inf`` when α = 0 and β < 1 or β = 0 and α < 1: no finite μ allows a perfect test)."""
    if alpha + beta >= 1.0:
        return -math.inf
    if alpha <= 0.0 or beta <= 0.0:
        return math.inf
    from scipy import stats

    return float(stats.norm.isf(alpha) - stats.norm.ppf(beta))


@dataclasses.dataclass(frozen=True, kw_only=True)
class TradeoffPoint:
    """One test of the audit's family: "say D′ when the score is ≥ t" (or, reversed, < t).

    ``fpr``/``fnr`` are the empirical type-I/II errors; ``fpr_upper``/``fnr_upper`` their
    simultaneous upper confidence bounds (the same Clopper–Pearson intervals as the ε bound).
    """

    threshold: float
    reversed: bool
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class MuBound:
    """The lower confidence bound on μ under Gaussian DP and the test that attains it."""

    mu_lower: float  # ≥ 0; 0 when no test constrains μ
    mu_estimate: float  # Φ⁻¹(1 − α̂) − Φ⁻¹(β̂) of the attaining test; for reading only (may be inf)
    threshold: float
    reversed: bool
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    trials: int
    tests: int
    interval_level: float


def tradeoff_points(events_d: Sequence[int], events_d_prime: Sequence[int], trials: int,
                    thresholds: Sequence[float], *, confidence: float) -> list[TradeoffPoint]:
    """The 2T tests of a threshold family with simultaneous upper bounds on their errors.

    With ``p_j = P_D(score ≥ t_j)`` and ``q_j = P_D′(score ≥ t_j)``, the test "D′ when
    score ≥ t_j" has FPR ``p_j`` and FNR ``1 − q_j``; its reverse has FPR ``1 − p_j`` and FNR
    ``q_j``. Each of the 2T probabilities gets a two-sided Clopper–Pearson interval at level
    ``1 − (1 − confidence)/(2T)``, so all of them (and the ε bound built on the same
    intervals) hold at once with probability ≥ ``confidence`` (union bound).
    """
    confidence = check_confidence(confidence)
    if not (len(events_d) == len(events_d_prime) == len(thresholds) >= 1):
        raise ValueError(
            f"events_d, events_d_prime and thresholds (lengths {len(events_d)}, {len(events_d_prime)}, "
            f"{len(thresholds)}) must have the same positive length")
    level = 1.0 - (1.0 - confidence) / (2 * len(thresholds))
    d_lows, d_highs = clopper_pearson_arrays(events_d, trials, level)
    dp_lows, dp_highs = clopper_pearson_arrays(events_d_prime, trials, level)
    points = []
    for j, (k_d, k_dp, threshold) in enumerate(zip(events_d, events_d_prime, thresholds, strict=True)):
        d_low, d_high, dp_low, dp_high = float(d_lows[j]), float(d_highs[j]), float(dp_lows[j]), float(dp_highs[j])
        p, q = int(k_d) / trials, int(k_dp) / trials
        points.append(TradeoffPoint(threshold=float(threshold), reversed=False, fpr=p, fnr=1.0 - q,
                                    fpr_upper=d_high, fnr_upper=1.0 - dp_low))
        points.append(TradeoffPoint(threshold=float(threshold), reversed=True, fpr=1.0 - p, fnr=q,
                                    fpr_upper=1.0 - d_low, fnr_upper=dp_high))
    return points


def mu_lower_bound(events_d: Sequence[int], events_d_prime: Sequence[int], trials: int,
                   thresholds: Sequence[float], *, confidence: float) -> MuBound:
    """A lower confidence bound on μ for a mechanism claimed μ-GDP, from the whole curve.

    Why it is valid: if M is μ-GDP, every test's true errors satisfy ``β ≥ G_μ(α)``, i.e.
    ``Φ⁻¹(1 − α) − Φ⁻¹(β) ≤ μ``. On the event (probability ≥ ``confidence``) that every
    interval of :func:`tradeoff_points` holds, ``α ≤ α_u`` and ``β ≤ β_u`` for all 2T tests,
    and ``(α, β) ↦ Φ⁻¹(1 − α) − Φ⁻¹(β)`` decreases in both arguments, so
    ``μ_lb = max(0, max_j Φ⁻¹(1 − α_u,j) − Φ⁻¹(β_u,j)) ≤ μ``: it is the smallest μ whose curve
    ``G_μ`` lies below every point's upper confidence corner. ``μ_lb`` above the claim's μ is a
    violation at that confidence. For scores ``N(0, 1)`` against ``N(m, 1)`` every test lies on
    ``G_m`` exactly, so the bound approaches ``m`` as the trials grow.

    Returns:
        The bound, the attaining test and its point estimate ``Φ⁻¹(1 − α̂) − Φ⁻¹(β̂)``.

    References:
        Dong, Roth & Su (2022), Section 2 (trade-off functions, GDP); Nasr et al. (2023), "Tight
        Auditing of Differentially Private Machine Learning", USENIX Security (auditing in f-DP).
    """
    points = tradeoff_points(events_d, events_d_prime, trials, thresholds, confidence=confidence)
    level = 1.0 - (1.0 - confidence) / (2 * len(thresholds))
    best, best_value = points[0], -math.inf
    for point in points:
        value = gdp_mu_of_test(point.fpr_upper, point.fnr_upper)
        if value > best_value:
            best, best_value = point, value
    return MuBound(
        mu_lower=max(0.0, best_value), mu_estimate=gdp_mu_of_test(best.fpr, best.fnr), threshold=best.threshold,
        reversed=best.reversed, fpr=best.fpr, fnr=best.fnr, fpr_upper=best.fpr_upper, fnr_upper=best.fnr_upper,
        trials=trials, tests=len(points), interval_level=level)


def mu_bound_from(auditable: EpsilonAuditable, params: Any, metric: Callable[[str, str], float]) -> MuBound:
    """The μ bound from aggregated event counts (``metric(name, statistic)``), as :func:`bound_from`."""
    thresholds = thresholds_of(auditable, params)
    trials = int(metric("event_d_00", "trials"))
    events_d = [int(round(metric(f"event_d_{j:02d}", "successes"))) for j in range(len(thresholds))]
    events_dp = [int(round(metric(f"event_d_prime_{j:02d}", "successes"))) for j in range(len(thresholds))]
    return mu_lower_bound(events_d, events_dp, trials, thresholds, confidence=params.confidence)


# --- the ε bound with a threshold chosen on half of the trials ---------------------------------

def epsilon_lower_bound_split(scores_d: Sequence[float], scores_d_prime: Sequence[float], *, confidence: float,
                              delta: float = 0.0, candidates: int = 256) -> EpsilonBound:
    """An ε lower bound whose event is chosen on the first half of the trials and counted on the second.

    The first half of each side (in trial order) picks, among up to ``candidates`` thresholds
    at the pooled first-half scores' quantiles, the (threshold, event, direction) with the
    largest Clopper–Pearson bound there; :func:`epsilon_lower_bound` then counts that one event
    on the second halves at ``confidence`` (T = 1, no Bonferroni factor). The second halves
    are independent of the choice, so the bound holds with probability ≥ ``confidence``
    whatever the selection did. This uses raw scores (a benchmark's or a test's); the audit
    workloads stream counts over a fixed grid instead (Bonferroni over the grid).

    Raises:
        ValueError: fewer than 2 scores a side, unequal sides, or bad confidence or δ.

    References:
        Jagielski, Ullman & Oprea (2020), Section 3; Nasr et al. (2021), "Adversary
        Instantiation", Section 4 (thresholds chosen on held-out trials).
    """
    a = np.asarray(scores_d, dtype=np.float64)
    b = np.asarray(scores_d_prime, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"scores_d and scores_d_prime (sizes {a.size}, {b.size}) must be 1-d, equal and ≥ 2 each")
    half = a.size // 2
    select_d, select_dp, count_d, count_dp = a[:half], b[:half], a[half:], b[half:]
    pooled = np.concatenate([select_d, select_dp])
    grid = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, candidates)))
    k_d = (select_d[None, :] >= grid[:, None]).sum(axis=1)
    k_dp = (select_dp[None, :] >= grid[:, None]).sum(axis=1)
    d_low, d_high = clopper_pearson_arrays(k_d, half, confidence)
    dp_low, dp_high = clopper_pearson_arrays(k_dp, half, confidence)
    # The four (event, direction) pairs of epsilon_lower_bound: numerator lower, denominator upper.
    numerators = np.stack([dp_low, d_low, 1.0 - d_high, 1.0 - dp_high])
    denominators = np.stack([d_high, dp_high, 1.0 - dp_low, 1.0 - d_low])
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(numerators > delta, np.log((numerators - delta) / denominators), -np.inf)
    t = float(grid[np.unravel_index(int(np.argmax(values)), values.shape)[1]])
    return epsilon_lower_bound([(count_d >= t).sum()], [(count_dp >= t).sum()], count_d.size, [t],
                               confidence=confidence, delta=delta)


def smallest_informative_trials(threshold_count: int, confidence: float, *, delta: float = 0.0) -> int:
    """The fewest runs per side with which :func:`epsilon_lower_bound` can exceed 0 at all.

    The most extreme counts (every run on one side in the event, none on the other) give
    ``lower = t^(1/N)`` and ``upper = 1 − t^(1/N)`` with ``t = (1 − level)/2`` the interval's
    tail at the Bonferroni level ``1 − (1 − confidence)/(2T)``; a positive bound needs
    ``lower − δ > upper``. Fewer trials cannot give a bound whatever the mechanism does.
    """
    confidence = check_confidence(confidence)
    tail = (1.0 - confidence) / (4 * threshold_count)
    trials = 1
    while tail ** (1.0 / trials) - delta <= 1.0 - tail ** (1.0 / trials):
        trials += 1
        if trials > 10**7:
            raise ValueError(f"delta ({delta!r}) leaves no trial count that can give a bound")
    return trials
