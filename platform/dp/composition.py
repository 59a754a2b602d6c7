"""Composition theorems of differential privacy, as pure functions on (ε, δ) pairs.

Each function states the theorem it implements and validates its inputs; none keeps state.
:class:`privlab.platform.dp.ledger.Ledger` combines them into a run's total.

Privacy:
    These functions compute guarantees; they spend nothing. All bounds hold for the
    add/remove-one neighbouring relation. Sequential and advanced composition also hold for
    replace-one; so does parallel composition when the parts are cut by record position
    (:mod:`privlab.platform.dp.positional_split`), but not over parts cut by membership (a replaced
    record can move between them); amplification by subsampling as stated here does not.

References:
    Dwork & Roth, "The Algorithmic Foundations of Differential Privacy" (2014), Thm 3.16 and
    3.20; Li, Qardaji & Su (AsiaCCS 2012), as Thm 4 of Bindschaedler, Shokri & Gunter,
    "Plausible Deniability for Privacy-Preserving Data Synthesis" (VLDB 2017), Appendix A;
    Liu & Talwar, "Private Selection from Private Candidates" (STOC 2019), as Thm 3 of Hod &
    Canetti, "Differentially Private Release of Israel's National Registry of Live Births".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from privlab.platform.core.errors import LedgerError
from privlab.platform.core.validation import check_real

__all__ = [
    "advanced",
    "amplify_by_subsampling",
    "check_delta",
    "parallel",
    "private_selection_known_threshold",
    "sequential",
    "validate_private_selection",
]


def _finite_at_least_zero(name: str, value: object) -> float:
    x = check_real(name, value)
    if not (math.isfinite(x) and x >= 0.0):
        raise LedgerError(f"{name} ({value!r}) must be finite and >= 0")
    return x


def check_delta(name: str, value: object) -> float:
    """``value`` as a float if it is a real number in [0, 1) (a δ), else :class:`LedgerError`."""
    x = check_real(name, value)
    if not 0.0 <= x < 1.0:
        raise LedgerError(f"{name} ({value!r}) must be in [0, 1)")
    return x


def sequential(epsilons: Sequence[float], deltas: Sequence[float]) -> tuple[float, float]:
    """Sequential (basic) composition: ε and δ add up.

    Theorem (Dwork & Roth 3.16): if each M_i is (ε_i, δ_i)-DP, then releasing
    (M_1(D), …, M_m(D)) is (Σ ε_i, Σ δ_i)-DP. Sums use :func:`math.fsum`, so the result is the
    correctly rounded sum and does not depend on the order of the terms.

    Args:
        epsilons: ε_i of each mechanism, each finite and ≥ 0.
        deltas: δ_i of each mechanism, each finite and ≥ 0, as many as ``epsilons``.

    Returns:
        ``(Σ ε_i, Σ δ_i)``; ``(0.0, 0.0)`` for no mechanisms.

    Raises:
        TypeError: a term is not a real number.
        LedgerError: the lengths differ or a term is negative or not finite.

    Privacy:
        Holds for any neighbouring relation and adaptively chosen mechanisms.

    References:
        Dwork & Roth (2014), Theorem 3.16; Bindschaedler et al. (2017), Appendix A, Theorem 2.
    """
    if len(epsilons) != len(deltas):
        raise LedgerError(
            f"deltas (length {len(deltas)}) must have as many terms as epsilons "
            f"(length {len(epsilons)})"
        )
    eps = [_finite_at_least_zero(f"epsilons[{i}]", e) for i, e in enumerate(epsilons)]
    dels = [_finite_at_least_zero(f"deltas[{i}]", d) for i, d in enumerate(deltas)]
    return math.fsum(eps), math.fsum(dels)


def advanced(*, epsilon: float, delta: float, k: int, delta_slack: float) -> tuple[float, float]:
    """Advanced composition of ``k`` mechanisms that are each (ε, δ)-DP.

    Theorem (Dwork & Roth 3.20): for every δ'' > 0, the k-fold adaptive composition of
    (ε, δ)-DP mechanisms is (ε', δ')-DP with

        ε' = ε·sqrt(2k·ln(1/δ'')) + k·ε·(e^ε − 1),    δ' = k·δ + δ''.

    ``e^ε − 1`` is evaluated with :func:`math.expm1`. For small k this is looser than
    :func:`sequential` (at k = 1, ε' > ε); the ledger reports both.

    Args:
        epsilon: ε of each mechanism, finite and ≥ 0. For heterogeneous mechanisms pass the
            largest ε: an (ε_i, δ_i)-DP mechanism is also (max ε, max δ)-DP.
        delta: δ of each mechanism, in [0, 1).
        k: number of mechanisms composed, ≥ 1.
        delta_slack: δ'', in (0, 1).

    Returns:
        ``(ε', δ')``.

    Raises:
        TypeError: an argument has the wrong type.
        LedgerError: an argument is out of range.

    Privacy:
        Holds for any neighbouring relation and adaptively chosen mechanisms.

    References:
        Dwork & Roth (2014), Theorem 3.20; Bindschaedler et al. (2017), Appendix A, Theorem 3.
    """
    eps = _finite_at_least_zero("epsilon", epsilon)
    dlt = check_delta("delta", delta)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k ({k!r}) must be an integer")
    if k < 1:
        raise LedgerError(f"k ({k!r}) must be >= 1")
    slack = check_real("delta_slack", delta_slack)
    if not 0.0 < slack < 1.0:
        raise LedgerError(f"delta_slack ({delta_slack!r}) must be in (0, 1)")
    k = int(k)
    # e^ε − 1 overflows a float beyond ε ≈ 709.8: the bound is then +inf (valid, and useless).
    growth = math.expm1(eps) if eps < 709.0 else math.inf
    eps_total = eps * math.sqrt(2.0 * k * -math.log(slack)) + k * eps * growth
    return eps_total, k * dlt + slack


def amplify_by_subsampling(*, epsilon: float, delta: float, rate: float) -> tuple[float, float]:
    """Privacy amplification by Poisson subsampling.

    Theorem (Li, Qardaji & Su): running an (ε, δ)-DP mechanism on a subsample that keeps each
    record independently with probability p, δ < p < 1, is (ε', δ')-DP with

        ε' = ln(1 + p·(e^ε − 1)),    δ' = p·δ.

    ``rate = 1`` (no subsampling) returns ``(epsilon, delta)`` unchanged, exactly. The
    paper's condition δ < p is enforced.

    Args:
        epsilon: ε of the mechanism run on the subsample, finite and ≥ 0.
        delta: δ of that mechanism, in [0, 1).
        rate: the inclusion probability p, in (0, 1] and greater than ``delta``.

    Returns:
        ``(ε', δ')``.

    Raises:
        TypeError: an argument is not a real number.
        LedgerError: an argument is out of range, or ``rate <= delta``.

    Privacy:
        Add/remove-one neighbouring; the subsample must be drawn with fresh, secret randomness.

    References:
        Li, Qardaji & Su (AsiaCCS 2012); Bindschaedler et al. (2017), Appendix A, Theorem 4.
    """
    eps = _finite_at_least_zero("epsilon", epsilon)
    dlt = check_delta("delta", delta)
    p = check_real("rate", rate)
    if not 0.0 < p <= 1.0:
        raise LedgerError(f"rate ({rate!r}) must be in (0, 1]")
    if not p > dlt:
        raise LedgerError(f"rate ({rate!r}) must be greater than delta ({delta!r}) (δ < p)")
    if p == 1.0:
        return eps, dlt
    return math.log1p(p * math.expm1(eps)), p * dlt


def parallel(totals: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Parallel composition over disjoint parts of the data: the largest ε and δ.

    Theorem (McSherry 2009): if M_i is (ε_i, δ_i)-DP and is applied only to part D_i of a
    partition of D, releasing all outputs is (max ε_i, max δ_i)-DP.

    Args:
        totals: ``(ε_i, δ_i)`` of each part, each finite and ≥ 0.

    Returns:
        ``(max ε_i, max δ_i)``; ``(0.0, 0.0)`` for no parts.

    Raises:
        TypeError: a term is not a real number.
        LedgerError: a term is negative or not finite.

    Privacy:
        Add/remove-one neighbouring (a record is in at most one part), and replace-one when the
        parts are cut by record position independently of the values (the replaced record stays
        in its part). Under replace-one with parts cut by membership a record can move between
        parts and the bound is the sum of the two largest parts.

    References:
        McSherry, "Privacy Integrated Queries" (SIGMOD 2009), Theorem 4.
    """
    eps = [_finite_at_least_zero(f"totals[{i}][0]", e) for i, (e, _) in enumerate(totals)]
    dels = [_finite_at_least_zero(f"totals[{i}][1]", d) for i, (_, d) in enumerate(totals)]
    return max(eps, default=0.0), max(dels, default=0.0)


def private_selection_known_threshold(
    *, epsilon1: float, epsilon0: float, delta1: float = 0.0
) -> float:
    """Privacy of Liu & Talwar's private selection with a known threshold: 2ε₁ + ε₀.

    Theorem (Liu & Talwar; Hod & Canetti Thm 3, item 2): run an ε₁-DP mechanism repeatedly,
    stop at the first output whose score passes a fixed public threshold, stop with ⊥ with
    probability γ after each failure and after at most T iterations. If T satisfies
    :func:`validate_private_selection`, the output is (2ε₁ + ε₀)-DP.

    Args:
        epsilon1: ε₁ of one run of the base mechanism (candidate and its score together),
            finite and > 0.
        epsilon0: ε₀ in [0, 1], the price of stopping after T iterations.
        delta1: δ of the base mechanism. Must be 0: the 2ε₁ + ε₀ guarantee is for pure-DP
            base mechanisms.

    Returns:
        ``2·epsilon1 + epsilon0``.

    Raises:
        TypeError: an argument is not a real number.
        LedgerError: an argument is out of range or ``delta1 > 0``.

    Privacy:
        The whole search is charged once, whatever the number of iterations. Same neighbouring
        relation as the base mechanism.

    References:
        Liu & Talwar (STOC 2019); Hod & Canetti, Theorem 3.
    """
    eps1 = check_real("epsilon1", epsilon1)
    if not (math.isfinite(eps1) and eps1 > 0.0):
        raise LedgerError(f"epsilon1 ({epsilon1!r}) must be finite and > 0")
    eps0 = check_real("epsilon0", epsilon0)
    if not 0.0 <= eps0 <= 1.0:
        raise LedgerError(f"epsilon0 ({epsilon0!r}) must be in [0, 1]")
    d1 = check_real("delta1", delta1)
    if d1 != 0.0:
        raise LedgerError(
            f"delta1 ({delta1!r}) must be 0: the (2ε₁+ε₀) guarantee of private selection with a "
            "known threshold holds for pure-DP (ε₁, 0) base mechanisms only; use a pure-DP base "
            "mechanism (e.g. Laplace instead of Gaussian)"
        )
    return 2.0 * eps1 + eps0


def validate_private_selection(*, steps: float, gamma: float, epsilon0: float) -> None:
    """Check the parameters of private selection with a known threshold.

    The guarantee of :func:`private_selection_known_threshold` needs γ ∈ [0, 1], ε₀ ∈ [0, 1]
    and an integer T ≥ max{ln(2/ε₀)/γ, 1 + 1/(e·γ)}. It also holds with γ = 0, T = ∞ and
    ε₀ = 0 (never give up). With γ > 0 and ε₀ = 0 the bound is infinite, so T must be ∞.

    Args:
        steps: the cap T on iterations: a positive integer or :data:`math.inf`.
        gamma: γ, the probability of stopping with ⊥ after a failed iteration.
        epsilon0: ε₀, the budget paid for truncating at T.

    Raises:
        TypeError: an argument is not a real number.
        LedgerError: an argument is out of range, or T is below the bound (the message names
            the smallest valid T).

    Privacy:
        Parameter check only; see :func:`private_selection_known_threshold`.

    References:
        Liu & Talwar (STOC 2019); Hod & Canetti, Theorem 3.
    """
    t = check_real("steps", steps)
    if not (t == math.inf or (math.isfinite(t) and t >= 1.0 and t.is_integer())):
        raise LedgerError(f"steps ({steps!r}) must be a positive integer or math.inf")
    g = check_real("gamma", gamma)
    if not 0.0 <= g <= 1.0:
        raise LedgerError(f"gamma ({gamma!r}) must be in [0, 1]")
    eps0 = check_real("epsilon0", epsilon0)
    if not 0.0 <= eps0 <= 1.0:
        raise LedgerError(f"epsilon0 ({epsilon0!r}) must be in [0, 1]")
    if g == 0.0:
        if t != math.inf or eps0 != 0.0:
            raise LedgerError(
                f"steps ({steps!r}) must be math.inf and epsilon0 ({epsilon0!r}) must be 0 when "
                "gamma is 0 (the infinite-horizon case); set gamma > 0 to cap the iterations"
            )
        return
    bound = max(math.log(2.0 / eps0) / g if eps0 > 0.0 else math.inf, 1.0 + 1.0 / (math.e * g))
    if t < bound:
        smallest = "math.inf" if bound == math.inf else str(math.ceil(bound))
        raise LedgerError(
            f"steps ({steps!r}) must be >= {smallest}: T >= max{{ln(2/ε₀)/γ, 1 + 1/(eγ)}} = "
            f"{bound:.6g} for gamma={gamma!r}, epsilon0={epsilon0!r}; raise steps or gamma"
        )
