"""Budget arithmetic of the generative model (Section 3.5) and of Privacy Test 2 (Theorem 1).

Privacy:
    **The model.** Structure learning takes K₁ Laplace releases on D_T (one per entropy query
    of :mod:`.structure`), parameter learning K₂ = m on D_P (one count table per attribute,
    :mod:`.parameters`). D_T and D_P are disjoint parts of the data cut by record *position*
    (a seeded permutation, :mod:`.split`), so a replace-one neighbour changes one record in one
    of them, and the model is (max(ε_T, ε_P), max(δ_T, δ_P))-DP (parallel composition; the
    ledger holds the split as a positional partition). The paper (Section 3.5) composes the
    halves the same way, under add/remove-one. Each half therefore gets the model's whole ε:
    every step of a half gets the same ε_step, the largest for which K steps compose to at most
    ε under the ledger's accountant (:func:`step_epsilons`):

    * ``"basic"`` — ε_step·K = ε (shares from :func:`privlab.platform.dp.budget.split_epsilon`, so
      the ledger's fsum is exactly ε);
    * ``"advanced"`` — Dwork & Roth Thm 3.20 (the paper's Theorem 3):
      ε = ε_step·sqrt(2K ln(1/δ'')) + K·ε_step·(e^ε_step − 1), δ = δ'' (default 2⁻³⁰), or the basic
      split where that is larger;
    * ``"pld"``, ``"rdp"``, ``"zcdp"`` — the accountant's composed curve of K Laplace steps read at
      δ'' (:func:`privlab.platform.dp.accountants.largest_step_epsilon`), never below the basic split;
    * ``"best"`` — the largest ε_step any of them allows (the ledger's ``"best"`` total is then at
      most ε, since it is the smallest of the accountants' totals).

    :func:`paper_structure_epsilon` and :func:`paper_parameter_epsilon` give the paper's formulas
    for comparison (the paper also charges ε_nT for a noisy n_T; our n_T is public).

    **The test.** Theorem 1: Mechanism 1 with Privacy Test 2 (k ≥ 1, γ > 1, ε₀ > 0) is
    (ε, δ)-DP for any integer 1 ≤ t < k with ε = ε₀ + ln(1 + γ/t), δ = e^(−ε₀(k − t)), for
    **add/remove-one** neighbours of the seed set D_S, for one released candidate.
    :func:`theorem1_replace_one` applies group privacy (a replacement is a removal and an
    addition): (2ε, (1 + e^ε)·δ). N candidates are N runs of it, a ``SelfComposed`` event the
    ledger's accountant composes.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 2.1 (Theorem 1), Section 3.5 and
    Appendix A (Theorems 2–3); Dwork & Roth (2014), Theorems 3.20 and 2.2 (group privacy).
"""

from __future__ import annotations

import math

from privlab.platform.core.errors import LedgerError, SpecError
from privlab.platform.core.validation import check_count, check_positive_finite, check_real
from privlab.platform.dp import accountants, composition
from privlab.platform.dp.budget import split_epsilon

__all__ = [
    "ACCOUNTANTS",
    "paper_parameter_epsilon",
    "paper_structure_epsilon",
    "step_epsilons",
    "theorem1",
    "theorem1_replace_one",
]

ACCOUNTANTS = accountants.SELECTABLE


def step_epsilons(epsilon: float, steps: int, *, accountant: str, delta_slack: float) -> tuple[float, ...]:
    """The ε of each of ``steps`` equal DP steps whose composition is ``epsilon`` (module docstring).

    Args:
        epsilon: The ε the K steps compose to, finite and > 0.
        steps: K ≥ 1.
        accountant: one of :data:`ACCOUNTANTS`.
        delta_slack: δ'' in (0, 1) (unused by ``"basic"``).

    Returns:
        K values. With ``"basic"`` their fsum is exactly ``epsilon``. With another accountant
        they are equal and compose to at most ``epsilon`` under it, unless the basic split ε/K
        is larger (few steps, or a δ'' so small that composition theorems lose): then the basic
        split, which every accountant of the ledger also accepts (each keeps the basic total
        where that dominates).

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
    if accountant == "best":
        options = [step_epsilons(epsilon, steps, accountant=name, delta_slack=slack)
                   for name in accountants.ACCOUNTANTS]
        return max(options, key=lambda shares: (min(shares), shares))
    if accountant != "advanced":
        basic = split_epsilon(epsilon, [1.0] * steps)
        try:
            step = accountants.largest_step_epsilon(epsilon, steps, accountant=accountant, delta_slack=slack)
        except LedgerError as error:
            raise SpecError(str(error)) from None
        return basic if max(basic) >= step else (step,) * steps

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
