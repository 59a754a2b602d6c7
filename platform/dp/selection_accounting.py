"""Private selection over base mechanisms that are not pure ε-DP: random stopping in Rényi DP.

Liu & Talwar's known-threshold selection (Hod & Canetti, Theorem 3) is (2ε₁ + ε₀)-DP for an
ε₁-DP base mechanism and says nothing useful for one that is only ρ-zCDP or (ε, δ)-DP (its
(ε, δ) variant pays δ₁ once per possible iteration). A flow that measures with Gaussian noise
(MST, AIM) is such a mechanism. This module accounts for the same search in Rényi DP instead.

Theorem (Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR
2022, Theorem 2). Let Q be a randomized algorithm that is (λ, ε)-RDP and (λ̂, ε̂)-RDP for
some orders λ, λ̂ > 1 and ε, ε̂ ≥ 0 (the paper also allows λ̂ = 1; it is not used here). Let K
be drawn, independently of the data, from the truncated negative binomial distribution with
parameters η ∈ (−1, ∞) and γ ∈ (0, 1); let A run Q K times, independently, and return the best
of the K outputs under a fixed total order.
Then A is (λ, ε')-RDP with

    ε' = ε + (1 + η)(1 − 1/λ̂)·ε̂ + (1 + η)·ln(1/γ)/λ̂ + ln E[K] / (λ − 1).

We use η = 1, where K is geometric, Pr[K = k] = γ(1 − γ)^(k−1) for k ≥ 1, E[K] = 1/γ:

    ε'(λ) = ε(λ) + 2·min over λ̂ of [(1 − 1/λ̂)·ε(λ̂) + ln(1/γ)/λ̂] + ln(1/γ)/(λ − 1).

Why the release's search is this A (conditions of the theorem):

* Algorithm 1 with γ > 0 and T = ∞ (run a flow; stop at the first accepted one; after each
  rejection stop with ⊥ with probability γ) runs flows until the first acceptance or until K of
  them have run, with K geometric as above and independent of the data: the γ-coins are.
* "The first accepted output of K runs, or ⊥" is post-processing of "the best of K runs" of
  Q' = (Q, U), U uniform on [0, 1] drawn independently of the data, under the total order
  (accepted, U): the best is an accepted run if there is one, and, the U being i.i.d. and
  independent of the outputs, the accepted run with the largest U is distributed exactly as the
  first accepted run (Q conditioned on acceptance); with no accepted run, map the best to ⊥. Q'
  has the RDP curve of Q, so the theorem applies to Q and post-processing keeps it.
* Q draws a configuration uniformly from the public shortlist and runs its flow, outputting
  both. Its Rényi divergence at every order is at most the largest of the flows' (the
  configuration has the same distribution on both datasets, and exp((λ − 1)D_λ) of the mixture
  is the average of the flows'), so the pointwise largest of the flows' RDP curves is Q's curve.
* The neighbouring relation is the flows' (replace-one with n public, as everywhere in the
  release); RDP composes sequentially with the rest of the run (the DP record count) and is
  converted to (ε, δ) once at the end (Canonne, Kamath & Steinke 2020, Proposition 12, as
  dp_accounting does).

What is not covered: a cap T < ∞ on the number of flows (it changes K's distribution; use γ
to bound the expected number, at most 1/γ), and γ = 0 (E[K] = ∞). Both are refused by
:func:`check_random_stopping`. Only the final output (the accepted configuration and its flow's
output, or ⊥) is covered, as for the pure path.

The minimum over λ̂ is taken over the accountant's orders above 1 (each gives a valid bound),
and RDP is non-decreasing in the order, so ε'(λ) is finally replaced by the smallest ε'(λ'')
over orders λ'' ≥ λ; both are what dp_accounting's ``RepeatAndSelectDpEvent`` does, which the
tests hold this module to.

References:
    Papernot & Steinke (ICLR 2022), Theorem 2 and Section 2; Liu & Talwar (STOC 2019);
    Hod & Canetti, Algorithm 1; Mironov (2017), Proposition 10 (RDP of a pure ε-DP step);
    Bun & Steinke (2016) (ρ-zCDP is (λ, ρλ)-RDP for every λ > 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from privlab.platform.core.errors import LedgerError
from privlab.platform.core.validation import check_real
from privlab.platform.dp.dp_events import Composed, DpEvent, EpsilonDeltaEvent, GaussianEvent, RandomStoppingEvent

FlowRdp = Callable[[DpEvent], "np.ndarray | None"]
"""A base mechanism's RDP curve on the accountant's orders, or ``None`` when it has none."""

__all__ = ["check_random_stopping", "flow_event", "random_stopping_curve", "random_stopping_rdp", "refusal"]

PURE_STEPS_THEOREM = "sequential composition of pure ε-DP steps (Dwork & Roth 2014, Theorem 3.16)"


def random_stopping_rdp(base_rdp: np.ndarray, orders: np.ndarray, gamma: float) -> np.ndarray:
    """The RDP curve of random stopping with a geometric number of runs (module docstring).

    Args:
        base_rdp: ε(λ) of the base mechanism at each of ``orders`` (finite, ≥ 0).
        orders: the Rényi orders λ, each ≥ 1 (an order of 1 is not used, as λ or as λ̂).
        gamma: γ in (0, 1), the probability of stopping after each rejected run.

    Returns:
        ε'(λ) at each order; ``inf`` at orders ≤ 1.

    Raises:
        LedgerError: γ outside (0, 1), or the arrays do not fit.
    """
    g = check_real("gamma", gamma)
    if not 0.0 < g < 1.0:
        raise LedgerError(f"gamma ({gamma!r}) must be in (0, 1) for random stopping")
    orders = np.asarray(orders, dtype=float)
    base = np.asarray(base_rdp, dtype=float)
    if orders.shape != base.shape or orders.ndim != 1 or not np.all(orders >= 1.0):
        raise LedgerError("orders and base_rdp must be 1-d arrays of the same length, every order >= 1")
    if not np.all(np.isfinite(base)) or np.any(base < 0.0):
        raise LedgerError("base_rdp must be finite and >= 0 at every order")
    log_inv_gamma = -math.log(g)
    expected_runs = 1.0 / g
    above = orders > 1.0
    if not above.any():
        raise LedgerError("orders must include an order above 1")
    hat, hat_rdp = orders[above], base[above]
    overhead = 2.0 * float(np.min((1.0 - 1.0 / hat) * hat_rdp + log_inv_gamma / hat))  # (1 + η)·min over λ̂
    out = np.full_like(orders, np.inf)
    out[above] = base[above] + overhead + math.log(expected_runs) / (orders[above] - 1.0)
    # Monotonicity in the order: a bound at λ'' ≥ λ is a bound at λ.
    return np.minimum.accumulate(out[::-1])[::-1]


def random_stopping_curve(event: RandomStoppingEvent, orders: np.ndarray, *, flow_rdp: FlowRdp) -> np.ndarray:
    """The RDP curve of ``event``: :func:`random_stopping_rdp` of the pointwise largest of its base
    mechanisms' curves (``flow_rdp``, the accountant's; module docstring: Q's curve).

    Raises:
        LedgerError: a base mechanism has no RDP curve (see :func:`refusal`).
    """
    base = np.zeros_like(np.asarray(orders, dtype=float))
    for flow in event.events:
        curve = flow_rdp(flow)
        if curve is None:
            raise LedgerError(f"{event.label()}: a base mechanism has no Rényi-DP curve")
        base = np.maximum(base, curve)
    return random_stopping_rdp(base, orders, event.gamma)


def refusal(event: RandomStoppingEvent, accountant: str, *, flow_rdp: FlowRdp) -> str | None:
    """Why ``accountant`` cannot account for ``event`` (``None`` when it can): only the rdp
    accountant can, and only when every base mechanism has an RDP curve."""
    if accountant != "rdp":
        return (f"{event.label()}: random stopping over flows that are not pure ε-DP has a Rényi-DP bound only "
                "(Papernot & Steinke 2022); use the rdp accountant")
    if any(flow_rdp(flow) is None for flow in event.events):
        return (f"{event.label()}: a base mechanism has a step with no Rényi-DP curve of its own (an (ε, δ) "
                "guarantee, a subsampled or nested selection step)")
    return None


def flow_event(*, rho: float, epsilon: float) -> DpEvent:
    """One flow's guarantee as an event for :class:`~privlab.platform.dp.dp_events.RandomStoppingEvent`.

    A flow composes a ρ-zCDP part (a zCDP synthesizer's Gaussian measurements and choices) with
    a pure ε-DP part (the acceptance criteria; all of a pure-ε synthesizer's fit). Its RDP
    curve is ρλ + the curve of an ε-DP step (randomized response's, which dominates every ε-DP
    mechanism: Mironov 2017, Proposition 10). The ρ part is a Gaussian of sensitivity 1 and
    σ = 1/√(2ρ); the ε part an (ε, 0) guarantee by sequential composition.

    Raises:
        LedgerError: ρ or ε negative or not finite, or both 0.
    """
    rho_value, eps_value = check_real("rho", rho), check_real("epsilon", epsilon)
    if not (math.isfinite(rho_value) and rho_value >= 0.0 and math.isfinite(eps_value) and eps_value >= 0.0):
        raise LedgerError(f"rho ({rho!r}) and epsilon ({epsilon!r}) must be finite and >= 0")
    parts: list[DpEvent] = []
    if rho_value > 0.0:
        parts.append(GaussianEvent(1.0, 1.0 / math.sqrt(2.0 * rho_value)))
    if eps_value > 0.0:
        parts.append(EpsilonDeltaEvent(eps_value, 0.0, PURE_STEPS_THEOREM))
    if not parts:
        raise LedgerError("a flow must spend something: rho and epsilon are both 0")
    return parts[0] if len(parts) == 1 else Composed(tuple(parts))


def check_random_stopping(*, gamma: float, steps: float, epsilon0: float) -> None:
    """Refuse stopping rules the Rényi-DP accounting does not cover: it needs γ in (0, 1),
    T = ∞ and ε₀ = 0 (module docstring).

    Raises:
        LedgerError: the message says what to set.
    """
    g, t, e0 = check_real("gamma", gamma), check_real("steps", steps), check_real("epsilon0", epsilon0)
    if not 0.0 < g < 1.0 or t != math.inf or e0 != 0.0:
        raise LedgerError(
            f"private selection over flows that are not pure ε-DP (zCDP synthesizers: MST, AIM) is accounted by "
            f"random stopping in Rényi DP (Papernot & Steinke 2022, Theorem 2), which needs gamma in (0, 1), "
            f"steps = \"inf\" and epsilon0 = 0; got gamma = {gamma!r}, steps = {steps!r}, epsilon0 = {epsilon0!r}. "
            "The search then runs 1/gamma flows at most on average (e.g. gamma = 0.05: at most 20) and ends "
            "with ⊥ with probability about gamma·(1 − p)/p when flows are accepted with probability p")
