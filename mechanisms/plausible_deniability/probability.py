"""The exact Pr{y = M(d)} of seed-based synthesis, literally and through a seed index (item 6).

Derivation. Write σ for the dependency order, f_p(y) = Pr{x_σ(p) = y_σ(p) | parents of σ(p) as
in y} for the model's conditionals, and L(d, y) for the length of the longest common prefix of
d and y along σ (the largest ℓ with d_σ(p) = y_σ(p) for all p < ℓ). With ω fixed, M(d) keeps
positions 0..m−ω−1 of σ and resamples positions m−ω..m−1 in order, each from its conditional
given values that, on the event M(d) = y, all equal y's. Hence

    Pr{y = M(d) | ω} = 1[L(d, y) ≥ m − ω] · Q_ω(y),    Q_ω(y) = ∏_{p=m−ω}^{m−1} f_p(y):

every seed agreeing with y on the kept prefix has the same probability, the others have 0.
With ω uniform on [ω₋, ω₊] (weight π = 1/(ω₊ − ω₋ + 1)),

    Pr{y = M(d)} = Σ_{ω=ω₋}^{ω₊} π · 1[ω ≥ m − L(d, y)] · Q_ω(y) =: P_y(L(d, y)),

a function of L alone, non-decreasing in L. That is the ``"mixture"`` rule; under
``"per_candidate"`` (:mod:`.synthesis`) a candidate drawn with ω is scored with the fixed-ω
model, the sum's single term (callers pass :meth:`.synthesis.SynthesisParams.tested_with`). So the γ-partition of a seed (Section 2) depends
only on L, and counting plausible seeds needs, for each ℓ, the number of seeds of D_S that
share exactly ℓ leading σ-attributes with y: :class:`SeedIndex` answers that with m sorted-key
lookups after an O(n·m log n) build.

Both paths multiply the same factors f_p(y) in the same order (p increasing) and add the
mixture terms in the same order (ω increasing), so they compute bit-identical floats, and the
partition indices they derive agree exactly; ``tests/test_plausible_deniability_tests.py``
checks that on every parameter combination.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 2 (Privacy Tests 1 and 2, the
    partitions of Appendix C) and Section 3.2, eq. (3).
"""

from __future__ import annotations

import math

import numpy as np

from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams
from privlab.platform.core.errors import SchemaError

__all__ = ["SeedIndex", "generation_probability", "partition_index", "prefix_probabilities"]


def partition_index(p: float, gamma: float) -> int | None:
    """The integer i ≥ 0 with γ^(−i−1) < p ≤ γ^(−i), or None when p = 0 (Section 2, step 1).

    γ^(−i) is evaluated as ``gamma ** -i`` and the log estimate is corrected by direct
    comparisons, so the index is exact for the float p and the float powers. A p above 1 (a
    float sum of weights that should total 1) is put in partition 0.
    """
    if not p > 0.0:
        return None
    i = max(0, math.floor(-math.log(p) / math.log(gamma)))
    while i > 0 and p > gamma ** -i:
        i -= 1
    while p <= gamma ** -(i + 1):
        i += 1
    return i


def generation_probability(model, seed: np.ndarray, y: np.ndarray, synthesis: SynthesisParams) -> float:  # noqa: ANN001
    """Pr{y = M(seed)}, literally: for each ω, is y reachable from the seed, and with what
    probability are y's values resampled (the reference implementation)."""
    order = model.structure_.order
    m = len(order)
    total = 0.0
    for omega in synthesis.omegas():
        if any(seed[order[p]] != y[order[p]] for p in range(m - omega)):
            continue
        q = 1.0
        for p in range(m - omega, m):
            attribute = order[p]
            q *= float(model.conditional(attribute, y)[y[attribute]])
        total += synthesis.weight() * q
    return total


def prefix_probabilities(model, y: np.ndarray, synthesis: SynthesisParams) -> np.ndarray:  # noqa: ANN001
    """P_y(ℓ) for ℓ = 0..m: the probability of generating y from any seed whose common prefix
    with y along σ has length exactly ℓ (module docstring)."""
    order = model.structure_.order
    m = len(order)
    factors = [float(model.conditional(a, y)[y[a]]) for a in order]
    q = {}
    for omega in synthesis.omegas():
        value = 1.0
        for p in range(m - omega, m):
            value *= factors[p]
        q[omega] = value
    out = np.zeros(m + 1)
    for length in range(m + 1):
        total = 0.0
        for omega in synthesis.omegas():
            if omega >= m - length:
                total += synthesis.weight() * q[omega]
        out[length] = total
    return out


class SeedIndex:
    """D_S sorted by prefix along σ, built once: how many seeds share ℓ leading attributes with y.

    Args:
        seeds: D_S as an (n, m) int array of codes in domain order.
        order: σ.
        sizes: |x_i| of each attribute (domain order).

    Raises:
        SchemaError: the joint domain has 2⁶² or more records (prefix keys are int64).
    """

    def __init__(self, seeds: np.ndarray, order: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        if math.prod(sizes) >= 2**62:
            raise SchemaError(f"domain sizes ({sizes!r}) must have a product < 2**62 for the seed index")
        self._order = np.asarray(order, dtype=np.int64)
        self._radix = np.asarray([sizes[a] for a in order], dtype=np.int64)
        self._sorted_seeds = np.ascontiguousarray(np.asarray(seeds, dtype=np.int64)[:, self._order])
        self.n = len(self._sorted_seeds)
        self._keys: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        key = np.zeros(self.n, dtype=np.int64)
        for p in range(len(order)):
            key = key * self._radix[p] + self._sorted_seeds[:, p]
            unique, counts = np.unique(key, return_counts=True)
            self._keys.append(unique)
            self._counts.append(counts)

    def at_least(self, y: np.ndarray) -> np.ndarray:
        """c[ℓ] = #seeds sharing at least ℓ leading σ-attributes with y, ℓ = 0..m."""
        ys = np.asarray(y, dtype=np.int64)[self._order]
        out = np.zeros(len(ys) + 1, dtype=np.int64)
        out[0] = self.n
        key = 0
        for p in range(len(ys)):
            key = key * int(self._radix[p]) + int(ys[p])
            keys = self._keys[p]
            at = int(np.searchsorted(keys, key))
            if at == len(keys) or keys[at] != key:
                break
            out[p + 1] = self._counts[p][at]
        return out

    def exactly(self, y: np.ndarray) -> np.ndarray:
        """e[ℓ] = #seeds whose common prefix with y has length exactly ℓ, ℓ = 0..m."""
        c = self.at_least(y)
        return c - np.append(c[1:], 0)

    def prefix_lengths(self, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        """L(d, y) for the seeds at ``rows`` (positions in D_S)."""
        agree = self._sorted_seeds[rows] == np.asarray(y, dtype=np.int64)[self._order]
        return np.cumprod(agree, axis=1).sum(axis=1)

    def exactly_batch(self, y: np.ndarray) -> np.ndarray:
        """:meth:`exactly` for each row of ``y`` ((B, m) codes in domain order): (B, m + 1).

        A prefix that no seed has cannot be extended by any seed, so looking every prefix up
        (instead of stopping at the first miss, as :meth:`at_least` does) gives the same counts.
        """
        ys = np.asarray(y, dtype=np.int64)[:, self._order]
        at_least = np.zeros((len(ys), len(self._order) + 1), dtype=np.int64)
        at_least[:, 0] = self.n
        key = np.zeros(len(ys), dtype=np.int64)
        for p in range(len(self._order)):
            key = key * self._radix[p] + ys[:, p]
            keys = self._keys[p]
            at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
            at_least[:, p + 1] = np.where(keys[at] == key, self._counts[p][at], 0)
        out = at_least.copy()
        out[:, :-1] -= at_least[:, 1:]
        return out

    def prefix_lengths_batch(self, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        """L(d, y) for seeds ``rows`` (any shape S) and candidates ``y`` (shape broadcasting to
        S + (m,), domain order): :meth:`prefix_lengths` elementwise, shape S."""
        agree = self._sorted_seeds[rows] == np.asarray(y, dtype=np.int64)[..., self._order]
        return np.cumprod(agree, axis=-1).sum(axis=-1)
