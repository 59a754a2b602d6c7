"""Empirical entropy of a histogram and its exact sensitivity (Section 3.3.1, eq. 9).

Entropies are in **nats** throughout privlab's plausible-deniability code (``ln``); the
symmetrical uncertainty (eq. 5) is a ratio of entropies, so the unit cancels there, and only
the sensitivity has to be stated in the same unit as the entropies it noises.

Privacy:
    Neighbouring relation: **replace-one with n public**. D_T's size n_T is a public parameter
    of the split (:mod:`.split` draws sizes from the spec, not from the data), so under
    replace-one it needs no noise. This is also the relation the paper's own proof of Lemma 1
    (Appendix B) uses: "both datasets have n records but differ in exactly one record". We do
    not use the paper's add/remove reading with a noisy ñ_T in the scale (eq. 10): a scale
    computed from ñ_T is too small whenever ñ_T > n_T, which happens with probability 1/2, so
    it would need an extra high-probability argument that the paper does not give.

    Exact sensitivity. Replacing one record moves one unit of a histogram c (Σc = n) from a
    cell j₂ to a cell j₁. With f(c) = c·ln c and g(c) = f(c + 1) − f(c),

        n·(H(c') − H(c)) = −[f(c_j1 + 1) − f(c_j1)] + [f(c_j2) − f(c_j2 − 1)]
                         = g(c_j2 − 1) − g(c_j1).

    f is convex, so g is increasing, and a = c_j2 − 1 ≥ 0, b = c_j1 ≥ 0 satisfy a + b ≤ n − 1.
    Hence |ΔH| ≤ (g(n − 1) − g(0))/n, attained by moving one record out of a histogram holding
    all n records in one cell:

        Δ_H(n) = [ln n + (n − 1)·ln(n / (n − 1))] / n = h(1/n)  (nats),

    the binary entropy of 1/n, which is ≤ (ln n + 1)/n. The same bound holds for any histogram
    of n records, so for joint entropies H(x_i, bkt(x_j)) too. The paper's eq. (9),
    [2 + 1/ln 2 + 2 log₂ n]/n bits, is a valid but about twice looser upper bound
    (:func:`paper_entropy_bound_bits`); ``tests/test_plausible_deniability_model.py`` checks
    Δ_H against brute force over every histogram and move on tiny domains.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3.3.1 eqs. (8)–(10) and Appendix B.
"""

from __future__ import annotations

import math

import numpy as np

from privlab.platform.core.validation import check_count

__all__ = ["empirical_entropy", "entropy_sensitivity", "paper_entropy_bound_bits"]


def empirical_entropy(counts: np.ndarray) -> float:
    """H = −Σ (c/n)·ln(c/n) over the non-empty cells of a histogram, in nats.

    Args:
        counts: Non-negative counts (any shape); their total n must be > 0.

    Returns:
        The plug-in entropy in nats (0 for a histogram with one non-empty cell).

    Raises:
        ValueError: a count is negative or the total is 0.
    """
    c = np.asarray(counts, dtype=np.float64).ravel()
    if (c < 0).any():
        raise ValueError(f"counts ({counts!r}) must be >= 0")
    n = float(c.sum())
    if n <= 0:
        raise ValueError(f"counts total ({n!r}) must be > 0")
    nz = c[c > 0]
    return float(math.log(n) - np.dot(nz, np.log(nz)) / n)


def entropy_sensitivity(n: int) -> float:
    """Δ_H(n) = h(1/n) in nats: the exact replace-one sensitivity (module docstring).

    Args:
        n: The public number of records, ≥ 2 (with one record nothing can change).

    Raises:
        TypeError: ``n`` is not an int.
        ValueError: ``n`` < 2.
    """
    n = check_count("n", n, minimum=2)
    return (math.log(n) + (n - 1) * math.log(n / (n - 1))) / n


def paper_entropy_bound_bits(n: int) -> float:
    """The paper's eq. (9) upper bound [2 + 1/ln 2 + 2·log₂ n]/n, in **bits**."""
    n = check_count("n", n, minimum=2)
    return (2.0 + 1.0 / math.log(2.0) + 2.0 * math.log2(n)) / n
