"""Between ρ-zCDP and (ε, δ)-DP: the conversion the zcdp accountant reads its total with, and
its inverse, the ρ a mechanism meant to be (ε, δ)-DP may spend."""

from __future__ import annotations

import math

__all__ = ["ZCDP_RHO_MARGIN", "zcdp_rho_for_epsilon", "zcdp_to_epsilon"]

def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """ε of a ρ-zCDP mechanism at δ (Canonne, Kamath & Steinke 2020, Corollary 13):
    inf over α > 1 of αρ + (log(1/δ) + (α−1)·log(1 − 1/α) − log α)/(α − 1), never above
    Bun & Steinke's ρ + 2·sqrt(ρ·log(1/δ))."""
    if rho == 0.0:
        return 0.0
    from scipy.optimize import minimize_scalar

    log_inv = -math.log(delta)

    def eps(alpha: float) -> float:
        return alpha * rho + (log_inv + (alpha - 1) * math.log1p(-1 / alpha) - math.log(alpha)) / (alpha - 1)

    centre = 1.0 + math.sqrt(log_inv / rho)  # the optimum of the simple bound's α
    best = minimize_scalar(eps, bounds=(1.0 + 1e-9, max(4.0 * centre, 10.0)), method="bounded",
                           options={"xatol": 1e-10})
    return min(float(best.fun), rho + 2.0 * math.sqrt(rho * log_inv))


ZCDP_RHO_MARGIN = 1e-9
"""Relative margin below ε that :func:`zcdp_rho_for_epsilon` aims at, so that float rounding in
recomputing ρ from noise scales (and the optimiser's tolerance in :func:`zcdp_to_epsilon`) never
takes the ledger's zcdp total over an ε cap equal to the target."""


def zcdp_rho_for_epsilon(epsilon: float, delta: float) -> float:
    """The largest ρ (to 1e-12 relative) with ``zcdp_to_epsilon(ρ, δ) ≤ ε·(1 − ZCDP_RHO_MARGIN)``:
    the zCDP budget of a mechanism meant to be (ε, δ)-DP through the zcdp accountant.

    ``zcdp_to_epsilon`` increases with ρ, so bisection on ρ finds it, starting from ``[0, ε]``
    (ρ + 2·sqrt(ρ·log(1/δ)) > ε at ρ = ε; the bracket is widened for δ close to 1).

    Raises:
        ValueError: ``epsilon`` not positive and finite, or ``delta`` outside (0, 1).
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (
            math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon ({epsilon!r}) must be positive and finite")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
        raise ValueError(f"delta ({delta!r}) must be in (0, 1)")
    target = epsilon * (1.0 - ZCDP_RHO_MARGIN)
    low, high = 0.0, float(epsilon)
    while zcdp_to_epsilon(high, delta) <= target:  # only for δ close to 1
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if zcdp_to_epsilon(middle, delta) <= target:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    if low <= 0.0:
        raise ValueError(f"no ρ > 0 is (ε = {epsilon!r}, δ = {delta!r})-DP; raise epsilon or delta")
    return low
