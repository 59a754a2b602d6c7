"""Privacy Tests 1 and 2 with early stopping, and the candidate loop of Mechanism 1 (Section 2).

For a candidate y made from seed d: i is the γ-partition of Pr{y = M(d)} (γ^(−i−1) < p ≤ γ^(−i)),
and k' counts the records d_a of D_S (d included) whose Pr{y = M(d_a)} falls in the same
partition; records with probability 0 are never plausible. Test 1 passes when k' ≥ k; Test 2
when k' ≥ k̃ = k + Lap(1/ε₀), with fresh noise per candidate.

Early stopping (Section 5): examine D_S in a random order, stop when k' ≥ ``max_plausible`` or
after ``max_check_plausible`` records. Since k' grows by one at a time, the result is
min(max_plausible, #plausible among the first max_check_plausible records of the order); when
max_check_plausible ≥ |D_S| (or is None) that no longer depends on the order, so the order is
drawn only when max_check_plausible < |D_S|.

``method="fast"`` counts with :class:`~.probability.SeedIndex` and P_y(ℓ); ``"literal"`` loops
over the examined records and computes each Pr{y = M(d_a)} (:func:`~.probability.
generation_probability`). Both take the same draws from the same candidate stream, so their
outputs are identical (tested).

Randomness: candidate j uses its own stream, ``SeedSequence(root, spawn_key=(j,))`` with the
root drawn once from ``source.dp_generator``: the seed (uniform on D_S), ω (uniform on the
range), m uniforms for eq. (3), the Test 2 noise, then the examination order. Output therefore
does not depend on how candidates are batched or distributed.

Privacy:
    Theorem 1 (:func:`.accounting.theorem1`): with Test 2, releasing one candidate is
    (ε₀ + ln(1 + γ/t), e^(−ε₀(k−t)))-DP for add/remove-one neighbours of D_S, for any integer
    1 ≤ t < k, whatever max_plausible and max_check_plausible (they affect which candidates
    pass, "not privacy", Section 5, as the stopping rule depends on public parameters and a
    data-independent order). Test 1 gives (k, γ)-plausible deniability (Definition 1) but no
    DP guarantee. **Research-only**: the seed choice, the resampling and the Test 2 noise are
    all part of the mechanism Theorem 1 is about, and they come from a seeded PRNG
    (``dp_generator``), which release sources refuse (ModeError).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 2 (Mechanism 1, Privacy Tests 1 and 2,
    Theorem 1) and Section 5 (max_plausible, max_check_plausible).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.accounting import theorem1
from privlab.mechanisms.plausible_deniability.probability import (
    SeedIndex, generation_probability, partition_index, prefix_probabilities)
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams, synthesize
from privlab.mechanisms.tabular.domain import CODE_DTYPE
from privlab.platform.errors import SpecError
from privlab.platform.randomness import RandomSource

__all__ = ["CandidateResults", "METHODS", "PrivacyTestParams", "count_plausible", "generate_candidates"]

METHODS = ("fast", "literal")


def _optional_count(name: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise SpecError(f"{name} ({value!r}) must be an int >= 1 or None")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyTestParams:
    """Parameters of Privacy Test 1 (``epsilon0=None``) or 2.

    Raises:
        SpecError: k < 1, γ ≤ 1, ε₀ ≤ 0, or a stopping bound < 1.
    """

    k: int
    gamma: float
    epsilon0: float | None = None
    max_plausible: int | None = None
    max_check_plausible: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise SpecError(f"k ({self.k!r}) must be an int >= 1")
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, (int, float)) or \
                not (math.isfinite(self.gamma) and self.gamma > 1):
            raise SpecError(f"gamma ({self.gamma!r}) must be finite and > 1")
        if self.epsilon0 is not None and (isinstance(self.epsilon0, bool) or not isinstance(
                self.epsilon0, (int, float)) or not (math.isfinite(self.epsilon0) and self.epsilon0 > 0)):
            raise SpecError(f"epsilon0 ({self.epsilon0!r}) must be finite and > 0, or None for Test 1")
        _optional_count("max_plausible", self.max_plausible)
        _optional_count("max_check_plausible", self.max_check_plausible)

    def guarantee(self, t: int) -> tuple[float, float]:
        """Theorem 1's (ε, δ) for ``t`` (add/remove-one on D_S, per released candidate).

        Raises:
            SpecError: Test 1 (no ε₀) has no DP guarantee.
            ValueError: t is not an int in [1, k).
        """
        if self.epsilon0 is None:
            raise SpecError("epsilon0 (None) must be set: Theorem 1 holds for Privacy Test 2 only")
        return theorem1(k=self.k, gamma=float(self.gamma), epsilon0=float(self.epsilon0), t=t)


def count_plausible(model, seeds: np.ndarray, index: SeedIndex | None, seed_row: int, y: np.ndarray,  # noqa: ANN001
                    synthesis: SynthesisParams, test: PrivacyTestParams, order: np.ndarray | None,
                    method: str) -> int:
    """k' for candidate ``y`` made from ``seeds[seed_row]``, with early stopping (module docstring).

    Args:
        seeds: D_S, (n, m) codes in domain order.
        index: The seed index (``method="fast"``).
        order: The examination order (positions in D_S) when max_check_plausible < n, else None.
        method: ``"fast"`` or ``"literal"``.
    """
    cap = test.max_plausible if test.max_plausible is not None else math.inf
    if method == "literal":
        i = partition_index(generation_probability(model, seeds[seed_row], y, synthesis), test.gamma)
        found = 0
        for row in (range(len(seeds)) if order is None else order):
            p = generation_probability(model, seeds[row], y, synthesis)
            if p > 0.0 and partition_index(p, test.gamma) == i:
                found += 1
                if found >= cap:
                    break
        return found
    probabilities = prefix_probabilities(model, y, synthesis)
    parts = [partition_index(float(p), test.gamma) for p in probabilities]
    own = int(index.prefix_lengths(np.array([seed_row]), y)[0])
    plausible = np.array([part is not None and part == parts[own] for part in parts])
    if order is None:
        found = int(index.exactly(y)[plausible].sum())
    else:
        found = int(plausible[index.prefix_lengths(order, y)].sum())
    return int(min(found, cap))


@dataclasses.dataclass(frozen=True)
class CandidateResults:
    """One row per candidate: its codes, seed, ω, k', threshold (k or k̃) and the verdict."""

    candidates: np.ndarray
    seed_rows: np.ndarray
    omegas: np.ndarray
    plausible: np.ndarray
    thresholds: np.ndarray
    passed: np.ndarray

    def released(self, names: tuple[str, ...]) -> pd.DataFrame:
        """The candidates that passed, as a frame of codes (the synthetic data)."""
        return pd.DataFrame(self.candidates[self.passed], columns=list(names))

    @property
    def pass_rate(self) -> float:
        return float(self.passed.mean()) if len(self.passed) else 0.0


def generate_candidates(model, seeds: pd.DataFrame, *, synthesis: SynthesisParams, test: PrivacyTestParams,  # noqa: ANN001
                        n: int, source: RandomSource, method: str = "fast") -> CandidateResults:
    """Mechanism 1 for ``n`` candidates: seed, synthesize (eq. 3), test (module docstring).

    Args:
        model: A fitted :class:`~.model.PlausibleDeniabilityModel`.
        seeds: D_S, codes over the model's domain.
        n: Number of candidates, ≥ 0.
        source: A research source (the candidate root stream is a ``dp_generator``).
        method: ``"fast"`` or ``"literal"``.

    Raises:
        SpecError: ω outside [1, m], an unknown method, an empty D_S, or a bad ``n``.
        SchemaError: ``seeds`` is not over the model's domain.
        ModeError: a release source (research-only, module docstring).
    """
    m = model.m
    synthesis.check_for(m)
    if method not in METHODS:
        raise SpecError(f"method ({method!r}) must be one of {list(METHODS)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SpecError(f"n ({n!r}) must be an int >= 0")
    codes = model.domain_.validate(seeds, what="D_S (seeds)").to_numpy(dtype=CODE_DTYPE)
    if len(codes) < 1:
        raise SpecError("seeds (0 records) must hold at least one record")
    root = [int(w) for w in source.dp_generator(purpose="pd.candidates").integers(0, 2**63, size=4)]
    index = SeedIndex(codes, model.structure_.order, model.domain_.sizes) if method == "fast" else None
    check = test.max_check_plausible
    out_y = np.zeros((n, m), dtype=CODE_DTYPE)
    rows, omegas, found = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    thresholds = np.full(n, float(test.k))
    for j in range(n):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(root, spawn_key=(j,))))
        row = int(rng.integers(len(codes)))
        omega = int(rng.integers(synthesis.omega_min, synthesis.omega_max + 1))
        uniforms = rng.random(m)
        if test.epsilon0 is not None:
            thresholds[j] = test.k + rng.laplace(0.0, 1.0 / test.epsilon0)
        order = rng.choice(len(codes), size=check, replace=False) if check is not None and check < len(codes) else None
        y = synthesize(model, codes[row], omega, uniforms)
        out_y[j], rows[j], omegas[j] = y, row, omega
        found[j] = count_plausible(model, codes, index, row, y, synthesis, test, order, method)
    return CandidateResults(out_y, rows, omegas, found, thresholds, found >= thresholds)
