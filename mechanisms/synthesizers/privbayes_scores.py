"""The scores of PrivBayes' structure phase and their sensitivities under replace-one.

``I(X; Π)`` (mutual information, in nats) and PrivBayes' ``R`` score are read off the count
table of ``(X, Π)``; each selection step of :class:`~.privbayes.PrivBayes` uses one of them as
the exponential mechanism's utility with the sensitivity proven below.

References:
    Zhang, Cormode, Procopiuc, Srivastava & Xiao (2017), "PrivBayes: Private Data Release via
    Bayesian Networks", Lemmas 1 and 2 (here for replace-one neighbours with ``n`` public).
"""

from __future__ import annotations

import math

import numpy as np

from privlab.platform.core.validation import check_count

__all__ = ["mutual_information", "mutual_information_sensitivity", "r_score", "r_score_sensitivity"]

def mutual_information_sensitivity(n: int) -> float:
    """Replace-one sensitivity of the empirical mutual information ``I(X; Π)``, in nats.

    ``Δ_I(n) = (2/n)·ln((n+1)/2) + ((n−1)/n)·ln((n+1)/(n−1))`` for every pair of discrete
    attributes (X and Π of any domain sizes; a parent *set* is one attribute on its joint
    domain).

    Derivation. With counts ``a_x``, ``b_π``, ``c_xπ`` of X, Π and (X, Π) in ``n`` records
    and ``f(t) = t·ln t`` (``f(0) = 0``), ``I = H(X) + H(Π) − H(X, Π)`` and ``n·H(c) =
    f(n) − Σ f(c)`` give::

        n·I = f(n) − Σ_x f(a_x) − Σ_π f(b_π) + Σ_{x,π} f(c_xπ).

    Replacing a record ``(x₁, π₁)`` by ``(x₂, π₂)`` (n fixed) and writing
    ``g(t) = f(t+1) − f(t)``, the change is::

        n·ΔI = [g(a₁−1) − g(a₂)]·[x₁≠x₂] + [g(b₁−1) − g(b₂)]·[π₁≠π₂] − g(c₁−1) + g(c₂),

    with ``a₁ = a_{x₁}``, ``a₂ = a_{x₂}``, ``c₁ = c_{x₁π₁} ≥ 1`` etc. counted in the first
    dataset. ``g`` is increasing (``g' = ln(1 + 1/t) > 0``), concave (``g'`` decreasing),
    and ``g(0) = 0``. Since ``c₂ ≤ min(a₂, b₂)``, ``g(c₂) − g(a₂) − g(b₂) ≤ 0``, so when
    both coordinates change ``n·ΔI ≤ h = g(a₁−1) + g(b₁−1) − g(c₁−1)``. The records with
    ``x₁`` or ``π₁`` number ``a₁ + b₁ − c₁ ≤ n``; with ``u = a₁−1``, ``v = b₁−1``,
    ``w = c₁−1`` that is ``u + v ≤ n − 1 + w``, so by concavity and monotonicity
    ``h ≤ 2·g((n−1+w)/2) − g(w) =: φ(w)``; ``φ'(w) = g'((n−1+w)/2) − g'(w) ≤ 0`` because
    ``(n−1+w)/2 ≥ w`` (``w ≤ n−1``) and ``g'`` decreases, so ``h ≤ φ(0) = 2·g((n−1)/2)``.
    When only Π changes, ``n·ΔI = g(b₁−1) − g(c₁−1) + g(c₂) − g(b₂) ≤ g(n−1) ≤
    2·g((n−1)/2)`` (subadditivity of a concave ``g`` with ``g(0) = 0``); likewise when only
    X changes, and ΔI = 0 when neither does. Swapping the two datasets bounds −ΔI the same
    way. Hence ``|ΔI| ≤ 2·g((n−1)/2)/n``, which expands to the formula above. It is
    attained (odd ``n``, both domains of size ≥ 3), so it is the exact sensitivity there.
    PrivBayes states a smaller value, ``g(n−1)/n``, when X or Π is binary; the derivation
    above covers every domain, so this function's value is a valid (conservative) bound for
    binary pairs too, and one Δ serves every candidate of a step.

    The bound holds in any logarithm base only if I is computed in the same base; here both
    use natural logarithms (:func:`mutual_information`).

    Args:
        n: The public number of records, >= 2.

    Returns:
        ``Δ_I(n)`` in nats (≈ ``2·ln(n/2)/n + 2/n`` for large n).

    Raises:
        TypeError: ``n`` is not an int.
        ValueError: ``n < 2`` (with one record I is always 0 and nothing can be selected).

    Privacy:
        The utility sensitivity of the structure steps' exponential mechanism.

    References:
        Zhang et al. (2017), PrivBayes, the sensitivity lemma for I (the same value for
        non-binary attributes).
    """
    n = check_count("n", n, minimum=2)
    return (2.0 / n) * math.log((n + 1) / 2.0) + ((n - 1) / n) * math.log1p(2.0 / (n - 1))


def r_score_sensitivity(n: int) -> float:
    """Replace-one sensitivity of the R score, ``Δ_R(n) = 3/n``.

    ``R(X, Π) = ½·‖P(X, Π) − P(X) ⊗ P(Π)‖₁`` with empirical distributions. Replacing one
    record moves mass ``1/n`` from one cell to another in each of ``P(X, Π)``, ``P(X)`` and
    ``P(Π)``, an L1 change of at most ``2/n`` each. For the product,
    ``‖p'⊗q' − p⊗q‖₁ ≤ ‖(p'−p)⊗q'‖₁ + ‖p⊗(q'−q)‖₁ = ‖p'−p‖₁ + ‖q'−q‖₁ ≤ 4/n``. By the
    triangle inequality the vector inside the norm moves by at most ``6/n`` in L1, so R moves
    by at most ``½·6/n = 3/n``.

    Args:
        n: The public number of records, >= 1.

    Raises:
        TypeError: ``n`` is not an int.
        ValueError: ``n < 1``.

    References:
        Zhang et al. (2017), PrivBayes, the score function R and its sensitivity.
    """
    n = check_count("n", n, minimum=1)
    return 3.0 / n


def _xlogx_sum(values: np.ndarray) -> float:
    positive = values[values > 0]
    return float(np.sum(positive * np.log(positive)))


def mutual_information(counts: np.ndarray) -> float:
    """Empirical mutual information, in nats, of a 2-D count table (rows: Π, columns: X).

    Returns 0.0 for an empty table; tiny negative rounding results are clipped to 0.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"counts (shape {table.shape}) must be a 2-D table")
    n = float(table.sum())
    if n <= 0:
        return 0.0
    value = (
        _xlogx_sum(table)
        - _xlogx_sum(table.sum(axis=0))
        - _xlogx_sum(table.sum(axis=1))
        + n * math.log(n)
    ) / n
    return max(value, 0.0)


def r_score(counts: np.ndarray) -> float:
    """PrivBayes' R score ``½·‖P(X, Π) − P(X) ⊗ P(Π)‖₁`` of a 2-D count table."""
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"counts (shape {table.shape}) must be a 2-D table")
    n = float(table.sum())
    if n <= 0:
        return 0.0
    p = table / n
    return 0.5 * float(np.abs(p - np.outer(p.sum(axis=1), p.sum(axis=0))).sum())
