"""Mechanism 1 for a batch of candidates with numpy: draws, synthesis (eq. 3) and Tests 1–2.

The batched path computes, for candidates j ∈ [start, stop), exactly what the per-candidate
paths of :mod:`.privacy_tests` compute one at a time (``method="fast"``/``"literal"``), bit
for bit and whatever the batch size, because every step is either elementwise on the same
float64 inputs in the same order, or an exact integer operation:

1. **Draws** (:func:`draw_batch` vs :func:`draw_candidate`): the words of each candidate's
   Philox lanes (:mod:`.streams`), turned into the seed row, ω, the m synthesis uniforms, the
   Test 2 uniform and the examination order by the same integer/float conversions.
2. **Synthesis**: for σ-position p ≥ m − ω_j, the value is the number of entries of the
   conditional's CDF (``np.cumsum`` of the table row, the same sequential sums as
   :func:`.synthesis.synthesize`) that are ≤ u·CDF[−1], i.e. ``searchsorted(…, side="right")``,
   clipped to the last code.
3. **Pr{y = M(d)} by prefix length** (:mod:`.probability`): the factors f_p(y) are the same
   table entries, Q_ω = ∏_{p=m−ω}^{m−1} f_p multiplied from 1.0 in increasing p, and
   P_y(ℓ) = Σ_{ω ≥ m−ℓ} π·Q_ω added from 0.0 in increasing ω, as
   :func:`.probability.prefix_probabilities` does (adding 0.0 for an absent term is exact);
   under ``omega_rule="per_candidate"`` the sum has the candidate's own ω as its one term, as
   the per-candidate paths' fixed-ω model (:meth:`.synthesis.SynthesisParams.tested_with`).
4. **γ-partitions**: i(p) = #{i ≥ 1 : γ^(−i) ≥ p} against a table of the floats ``gamma ** -i``
   that :func:`.probability.partition_index` compares with; for a strictly decreasing table
   this is the unique i with γ^(−i−1) < p ≤ γ^(−i) (partition 0 for p > γ^(−1)), i.e. the
   scalar rule exactly (the table's monotonicity is checked; otherwise the scalar rule runs).
5. **Counting** with the seed index: e[ℓ] seeds share exactly ℓ leading σ-attributes with y
   (sorted-key lookups for all candidates at once); k' = Σ_ℓ e[ℓ]·1[i(P_y(ℓ)) = i(P_y(L_own))],
   or, with an examination order, the number of examined seeds whose prefix length is
   plausible; then min(k', max_plausible), which is what stopping at max_plausible gives.
6. **Test 2**: k̃ = k + Lap(1/ε₀) from the candidate's open uniform u by the inverse CDF
   (:func:`laplace_from_uniform`: −b·ln(2 − 2u) for u ≥ ½, b·ln(2u) below), the same
   function for both paths. Its ``np.log`` is elementwise, and numpy's float64 log (SIMD or
   libm) does not depend on an element's neighbours or on the array's length; a test checks
   that, since it is what makes k̃ independent of the batch.

Examination orders are drawn by a partial Fisher–Yates shuffle (c steps: swap position s with
s + U[0, n − s)), which gives a uniformly random ordered c-subset of D_S; the batch does each
step for all its candidates at once on an (B, n) permutation matrix, in chunks of bounded
memory.

Privacy:
    Post-processing and the same mechanism as :mod:`.privacy_tests`; see there (Theorem 1
    with Test 2; research-only because the streams are a seeded PRNG).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 2 (Mechanism 1, Privacy Tests 1 and 2)
    and Section 5 (max_plausible, max_check_plausible).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privlab.mechanisms.plausible_deniability.parameters import configuration_index
from privlab.mechanisms.plausible_deniability.probability import SeedIndex, partition_index
from privlab.mechanisms.plausible_deniability.streams import (
    LANE_MAIN, LANE_ORDER, LANE_SYNTHESIS, CandidateStream, bounded_batch, lane_words, open_uniform,
    uniform)
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams
from privlab.mechanisms.tabular import bayesian_network

__all__ = ["BatchTester", "CandidateDraws", "draw_batch", "draw_candidate", "laplace_from_uniform",
           "partition_indices"]

_CHUNK_CELLS = 1 << 22
"""Largest number of int64 cells of a chunk's (B, n) permutation or (B, c, m) comparison."""


def laplace_from_uniform(u: np.ndarray, scale: float) -> np.ndarray:
    """Lap(0, ``scale``) by the inverse CDF of ``u`` ∈ (0, 1), elementwise (module docstring, 6)."""
    u = np.asarray(u, dtype=np.float64)
    upper = u >= 0.5
    return np.where(upper, -scale * np.log(np.where(upper, 2.0 - u - u, 1.0)),
                    scale * np.log(np.where(upper, 1.0, u + u)))


@dataclasses.dataclass(frozen=True)
class CandidateDraws:
    """The random inputs of candidates: one row each.

    Attributes:
        rows: Seed positions in D_S, (B,).
        omegas: ω, (B,).
        uniforms: The m synthesis uniforms, (B, m), by σ-position.
        noise: The Test 2 open uniforms, (B,), or None for Test 1.
        orders: Examination orders, (B, c) positions in D_S, or None.
    """

    rows: np.ndarray
    omegas: np.ndarray
    uniforms: np.ndarray
    noise: np.ndarray | None
    orders: np.ndarray | None


def draw_candidate(key: tuple[int, int], index: int, *, n_seeds: int, m: int, synthesis: SynthesisParams,
                   test_noise: bool, check: int | None) -> CandidateDraws:
    """The reference: candidate ``index``'s draws from numpy's Philox, one word at a time."""
    stream = CandidateStream(key, index)
    main = stream.words(LANE_MAIN, 4)
    row = stream.bounded(int(main[0]), n_seeds, 0)
    omega = synthesis.omega_min + stream.bounded(int(main[1]), synthesis.omega_max - synthesis.omega_min + 1, 1)
    uniforms = uniform(stream.words(LANE_SYNTHESIS, m))
    noise = open_uniform(main[2:3]) if test_noise else None
    orders = None
    if check is not None and check < n_seeds:
        words = stream.words(LANE_ORDER, check)
        perm = np.arange(n_seeds, dtype=np.int64)
        for s in range(check):
            r = s + stream.bounded(int(words[s]), n_seeds - s, 2 + s)
            perm[s], perm[r] = perm[r], perm[s]
        orders = perm[None, :check].copy()
    return CandidateDraws(np.array([row]), np.array([omega]), uniforms[None, :], noise, orders)


def draw_batch(key: tuple[int, int], start: int, stop: int, *, n_seeds: int, m: int, synthesis: SynthesisParams,
               test_noise: bool, check: int | None) -> CandidateDraws:
    """Candidates ``start``..``stop − 1``'s draws, equal to :func:`draw_candidate` for each."""
    index = np.arange(start, stop, dtype=np.uint64)
    main = lane_words(key, index, LANE_MAIN, 4)
    rows, reject = bounded_batch(main[:, 0], n_seeds)
    spread, reject_omega = bounded_batch(main[:, 1], synthesis.omega_max - synthesis.omega_min + 1)
    reject |= reject_omega
    omegas = synthesis.omega_min + spread
    uniforms = uniform(lane_words(key, index, LANE_SYNTHESIS, m))
    noise = open_uniform(main[:, 2]) if test_noise else None
    orders = None
    if check is not None and check < n_seeds:
        words = lane_words(key, index, LANE_ORDER, check)
        steps, reject_order = bounded_batch(words, n_seeds - np.arange(check, dtype=np.uint64)[None, :])
        reject |= reject_order.any(axis=1)
        orders = np.empty((len(index), check), dtype=np.int64)
        chunk = max(1, _CHUNK_CELLS // n_seeds)
        for a in range(0, len(index), chunk):
            b = min(a + chunk, len(index))
            perm = np.tile(np.arange(n_seeds, dtype=np.int64), (b - a, 1))
            at = np.arange(b - a)
            for s in range(check):
                r = s + steps[a:b, s]
                held = perm[at, s].copy()
                perm[at, s] = perm[at, r]
                perm[at, r] = held
            orders[a:b] = perm[:, :check]
    for i in np.flatnonzero(reject):  # a word was rejected (probability < n/2^64): the reference
        one = draw_candidate(key, start + int(i), n_seeds=n_seeds, m=m, synthesis=synthesis,
                             test_noise=test_noise, check=check)
        rows[i], omegas[i] = one.rows[0], one.omegas[0]
        if orders is not None:
            orders[i] = one.orders[0]
    return CandidateDraws(rows, omegas, uniforms, noise, orders)


class _Partitions:
    """γ-partition indices of arrays of probabilities, exactly as :func:`partition_index`."""

    def __init__(self, gamma: float) -> None:
        self.gamma = float(gamma)
        self._powers = [1.0]  # gamma ** -i, i = 0, 1, …
        self._ascending = np.array([], dtype=np.float64)
        self._monotone = True

    def _extend(self, smallest: float) -> None:
        powers = self._powers
        if powers[-1] < smallest or powers[-1] == 0.0:
            return
        while powers[-1] >= smallest and powers[-1] > 0.0:
            powers.append(self.gamma ** -len(powers))
        table = np.array(powers[1:])
        self._monotone = bool(np.all(np.diff(table[table > 0.0]) < 0.0))
        self._ascending = table[::-1].copy()

    def __call__(self, p: np.ndarray) -> np.ndarray:
        """i(p) for each p; −1 where p ≤ 0 (never plausible)."""
        p = np.asarray(p, dtype=np.float64)
        positive = p > 0.0
        if not positive.any():
            return np.full(p.shape, -1, dtype=np.int64)
        self._extend(float(p[positive].min()))
        if not self._monotone:
            flat = [partition_index(float(x), self.gamma) for x in p.ravel()]
            return np.array([-1 if i is None else i for i in flat], dtype=np.int64).reshape(p.shape)
        count = len(self._ascending) - np.searchsorted(self._ascending, p, side="left")
        return np.where(positive, count, -1).astype(np.int64)


def partition_indices(p: np.ndarray, gamma: float) -> np.ndarray:
    """:func:`.probability.partition_index` elementwise (−1 for None), by one table lookup."""
    return _Partitions(gamma)(p)


class BatchTester:
    """A fitted model and D_S prepared once; :meth:`run` synthesizes and counts for a batch.

    Args:
        model: A fitted :class:`~.model.PlausibleDeniabilityModel`.
        seeds: D_S, (n, m) codes in domain order.
        synthesis: ω fixed or a range.
        gamma: γ of the test.
        max_plausible: The early-stopping cap, or None.
    """

    def __init__(self, model, seeds: np.ndarray, synthesis: SynthesisParams, gamma: float,  # noqa: ANN001
                 max_plausible: int | None) -> None:
        self.order = tuple(model.structure_.order)
        self.m = len(self.order)
        self.parents = model.structure_.parents
        self.bucketing = model.bucketing_
        self.tables = model.tables_
        self.cdfs = bayesian_network.cumulative_tables(model.tables_)
        self.seeds = np.asarray(seeds, dtype=np.int64)
        self.index = SeedIndex(self.seeds, self.order, model.domain_.sizes)
        self.synthesis = synthesis
        self.partitions = _Partitions(gamma)
        self.cap = max_plausible

    def synthesize(self, draws: CandidateDraws) -> np.ndarray:
        """Eq. (3) for every candidate of the batch: (B, m) codes."""
        y = self.seeds[draws.rows]
        m = self.m
        for position in range(m - int(draws.omegas.max(initial=0)), m):
            chosen = np.flatnonzero(position >= m - draws.omegas)
            if not len(chosen):
                continue
            attribute = self.order[position]
            rows = configuration_index(y[chosen], self.parents[attribute], self.bucketing)
            y[chosen, attribute] = bayesian_network.draw_values(self.cdfs[attribute], rows, draws.uniforms[chosen, position],
                                                                scale_by_total=True)
        return y

    def prefix_probabilities(self, y: np.ndarray, omegas: np.ndarray | None = None) -> np.ndarray:
        """P_y(ℓ), ℓ = 0..m, for each candidate: (B, m + 1) (module docstring, 3).

        When the test scores each candidate with its own ω (``omegas``, the candidates' drawn
        ω; :attr:`.synthesis.SynthesisParams.omega_rule`), P_y(ℓ) = 1[ℓ ≥ m − ω_j]·Q_{ω_j}, the
        fixed-ω sum with its single term (π = 1.0, added to 0.0: the same float).
        """
        m, batch = self.m, len(y)
        factors = np.empty((batch, m))
        for position, attribute in enumerate(self.order):
            configuration = configuration_index(y, self.parents[attribute], self.bucketing)
            factors[:, position] = self.tables[attribute][configuration, y[:, attribute]]
        q = {}
        for omega in self.synthesis.omegas():
            value = np.ones(batch)
            for position in range(m - omega, m):
                value = value * factors[:, position]
            q[omega] = value
        if self.synthesis.scores_own_omega:
            if omegas is None:
                raise ValueError("omegas (None) must be the candidates' drawn ω under omega_rule='per_candidate'")
            own = np.zeros(batch)
            for omega, value in q.items():
                own = np.where(omegas == omega, value, own)
            lengths = np.arange(m + 1)
            return np.where(lengths[None, :] >= m - np.asarray(omegas)[:, None], own[:, None], 0.0)
        weight = self.synthesis.weight()
        out = np.zeros((batch, m + 1))
        for length in range(m + 1):
            total = np.zeros(batch)
            for omega in self.synthesis.omegas():
                if omega >= m - length:
                    total = total + weight * q[omega]
            out[:, length] = total
        return out

    def count(self, draws: CandidateDraws, y: np.ndarray) -> np.ndarray:
        """k' of each candidate, with max_plausible and the examination order (module docstring, 5)."""
        parts = self.partitions(self.prefix_probabilities(y, draws.omegas))
        at = np.arange(len(y))
        own = self.index.prefix_lengths_batch(draws.rows, y)
        plausible = (parts >= 0) & (parts == parts[at, own][:, None])
        if draws.orders is None:
            found = (self.index.exactly_batch(y) * plausible).sum(axis=1)
        else:
            found = np.empty(len(y), dtype=np.int64)
            chunk = max(1, _CHUNK_CELLS // (draws.orders.shape[1] * self.m))
            for a in range(0, len(y), chunk):
                b = min(a + chunk, len(y))
                lengths = self.index.prefix_lengths_batch(draws.orders[a:b], y[a:b, None, :])
                found[a:b] = plausible[np.arange(a, b)[:, None], lengths].sum(axis=1)
        if self.cap is not None:
            found = np.minimum(found, self.cap)
        return found.astype(np.int64)

    def run(self, draws: CandidateDraws) -> tuple[np.ndarray, np.ndarray]:
        """(candidates (B, m), k' (B,)) for a batch's draws."""
        y = self.synthesize(draws)
        return y, self.count(draws, y)

