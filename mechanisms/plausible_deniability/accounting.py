"""Budget arithmetic of the generative model (Section 3.5) and of Privacy Test 2 (Theorem 1).

Privacy:
    **The model.** Fitting takes K = (number of noisy entropies) + m DP steps: one Laplace
    release per entropy query of :mod:`.structure` and one per attribute's count table of
    :mod:`.parameters`. Every step gets the same ε_step, chosen so that the composition of all
    K steps under the ledger's accountant is the model's ε:

    * ``"advanced"`` — Dwork & Roth Thm 3.20 (the paper's Theorem 3) over all K steps:
      ε = ε_step·sqrt(2K ln(1/δ'')) + K·ε_step·(e^ε_step − 1), δ = δ'' (default 2⁻³⁰). ε_step is
      the largest float whose composition does not exceed ε (bisection to adjacent floats);
    * ``"basic"`` — sequential composition: ε_step·K = ε (shares from
      :func:`privlab.platform.budget.split_epsilon`, so the ledger's fsum is exactly ε).

    The paper (Section 3.5) composes the entropies with advanced composition (plus ε_nT), the
    count tables with a second advanced composition, and takes the max of the two because D_T
    and D_P are disjoint under add/remove-one. privlab's ledger refuses parallel composition
    under replace-one, and our n_T is public (see :mod:`.entropy`), so we compose all K steps
    at once: one δ'' instead of two, and sqrt(K₁ + K₂) ≤ sqrt(K₁) + sqrt(K₂).
    :func:`paper_structure_epsilon` and :func:`paper_parameter_epsilon` give the paper's
    formulas for comparison.

    **The test.** Theorem 1: Mechanism 1 with Privacy Test 2 (k ≥ 1, γ > 1, ε₀ > 0) is
    (ε, δ)-DP for any integer 1 ≤ t < k with ε = ε₀ + ln(1 + γ/t), δ = e^(−ε₀(k − t)), for
    **add/remove-one** neighbours of the seed set D_S, for one released candidate.
    :func:`theorem1_replace_one` applies group privacy (a replacement is a removal and an
    addition): (2ε, (1 + e^ε)·δ).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 2.1 (Theorem 1), Section 3.5 and
    Appendix A (Theorems 2–3); Dwork & Roth (2014), Theorems 3.20 and 2.2 (group privacy).
"""

from __future__ import annotations

import math

from privlab.platform import composition
from privlab.platform.budget import split_epsilon
from privlab.platform.errors import SpecError
from privlab.platform.validation import check_count, check_positive_finite, check_real

__all__ = [
    "ACCOUNTANTS",
    "paper_parameter_epsilon",
    "paper_structure_epsilon",
    "step_epsilons",
    "theorem1",
    "theorem1_replace_one",
]

ACCOUNTANTS = ("advanced", "basic")


def step_epsilons(epsilon: float, steps: int, *, accountant: str, delta_slack: float) -> tuple[float, ...]:
    """The ε of each of ``steps`` equal DP steps whose composition is ``epsilon`` (module docstring).

    Args:
        epsilon: The model's ε, finite and > 0.
        steps: K ≥ 1.
        accountant: ``"advanced"`` or ``"basic"``.
        delta_slack: δ'' of advanced composition, in (0, 1) (unused by ``"basic"``).

    Returns:
        K values. With ``"basic"`` their fsum is exactly ``epsilon``. With ``"advanced"`` they
        are equal and compose to at most ``epsilon`` (to the adjacent float) by Theorem 3.20,
        unless the basic split ε/K is larger (few steps, or a δ'' so small that Theorem 3.20
        loses): then the basic split, which the ledger's advanced accountant also composes
        by the basic rule (it keeps a scope's basic total where that dominates).

    Raises:
        SpecError: an argument is out of range, or ε is too small for K steps.
    """
    epsilon = check_positive_finite("epsilon", epsilon)
    steps = check_count("steps", steps)
    if accountant not in ACCOUNTANTS:
        raise SpecError(f"accountant ({accountant!r}) must be one of {list(ACCOUNTANTS)}")
    if accountant == "basic":
        return split_epsilon(epsilon, [1.0] * steps)
    slack = check_real("delta_slack", delta_slack)
    if not 0.0 < slack < 1.0:
        raise SpecError(f"delta_slack ({delta_slack!r}) must be in (0, 1)")

    def total(e: float) -> float:
        return composition.advanced(epsilon=e, delta=0.0, k=steps, delta_slack=slack)[0]

    low, high = 0.0, epsilon  # total(epsilon) > epsilon since sqrt(2K ln(1/δ'')) > 1 for δ'' < 1/e
    if total(high) <= epsilon:  # never for δ'' < 1/e; kept for completeness
        return (high,) * steps
    for _ in range(2000):
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        if total(mid) <= epsilon:
            low = mid
        else:
            high = mid
    basic = split_epsilon(epsilon, [1.0] * steps)
    if max(basic) >= low:
        return basic
    return (low,) * steps


def paper_structure_epsilon(*, epsilon_h: float, epsilon_nt: float, m: int, delta_l: float) -> float:
    """Section 3.5's ε_L = ε_nT + ε_H·sqrt(2m(m+1) ln(1/δ_L)) + m(m+1)·ε_H·(e^ε_H − 1)."""
    k = check_count("m", m) * (m + 1)
    return check_real("epsilon_nt", epsilon_nt) + composition.advanced(
        epsilon=epsilon_h, delta=0.0, k=k, delta_slack=delta_l)[0]


def paper_parameter_epsilon(*, epsilon_p: float, m: int, delta_p: float) -> float:
    """Section 3.5's ε_P = ε_p·sqrt(2m ln(1/δ_P)) + m·ε_p·(e^ε_p − 1)."""
    return composition.advanced(epsilon=epsilon_p, delta=0.0, k=check_count("m", m), delta_slack=delta_p)[0]


def theorem1(*, k: int, gamma: float, epsilon0: float, t: int) -> tuple[float, float]:
    """Theorem 1's (ε, δ) = (ε₀ + ln(1 + γ/t), e^(−ε₀(k − t))), add/remove-one on D_S.

    Args:
        k: The test's threshold, an int ≥ 2 (t must fit strictly below it).
        gamma: γ > 1.
        epsilon0: ε₀ > 0 of Privacy Test 2.
        t: The user's trade-off, an int with 1 ≤ t < k.

    Raises:
        TypeError: a count is not an int.
        ValueError: an argument is out of range (message names it and the constraint).
    """
    k = check_count("k", k, minimum=1)
    gamma = check_positive_finite("gamma", gamma)
    if gamma <= 1.0:
        raise ValueError(f"gamma ({gamma!r}) must be > 1")
    epsilon0 = check_positive_finite("epsilon0", epsilon0)
    t = check_count("t", t, minimum=1)
    if t >= k:
        raise ValueError(f"t ({t!r}) must be < k ({k!r})")
    return epsilon0 + math.log1p(gamma / t), math.exp(-epsilon0 * (k - t))


def theorem1_replace_one(*, k: int, gamma: float, epsilon0: float, t: int) -> tuple[float, float]:
    """Theorem 1 for replace-one neighbours by group privacy of size 2: (2ε, (1 + e^ε)·δ)."""
    eps, delta = theorem1(k=k, gamma=gamma, epsilon0=epsilon0, t=t)
    return 2.0 * eps, (1.0 + math.exp(eps)) * delta


def compose_invocations(*, epsilon: float, delta: float, invocations: int,
                        delta_slack: float | None) -> tuple[float, float, str]:
    """(ε, δ) of ``invocations`` runs of an (ε, δ)-DP mechanism on the same data, and the rule used.

    Sequential composition gives (Nε, Nδ); with ``delta_slack`` δ'' set, Dwork & Roth's
    Theorem 3.20 gives (ε·sqrt(2N ln(1/δ'')) + Nε(e^ε − 1), Nδ + δ''). Both hold; the basic
    one is returned whenever its ε is no larger (it then dominates: its δ is smaller too),
    else the advanced one.

    Returns:
        ``(ε_total, δ_total, "basic" | "advanced")``.

    Raises:
        SpecError: ``invocations`` < 1.
    """
    if isinstance(invocations, bool) or not isinstance(invocations, int) or invocations < 1:
        raise SpecError(f"invocations ({invocations!r}) must be an int >= 1")
    basic = (epsilon * invocations, min(delta * invocations, 1.0))
    if delta_slack is None:
        return (*basic, "basic")
    advanced = composition.advanced(epsilon=epsilon, delta=delta, k=invocations, delta_slack=delta_slack)
    if basic[0] <= advanced[0]:
        return (*basic, "basic")
    return (*advanced, "advanced")
