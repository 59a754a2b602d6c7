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

``method="batched"`` (the default) does everything for a batch of candidates at once with
numpy (:mod:`.batched`); the two per-candidate paths are its references: ``"fast"`` counts with
:class:`~.probability.SeedIndex` and P_y(ℓ), ``"literal"`` loops over the examined records and
computes each Pr{y = M(d_a)} (:func:`~.probability.generation_probability`). All three take the
same draws from the same candidate streams, so their outputs are identical (tested, for many
parameter combinations and batch sizes).

Randomness: candidate j has its own counter-based streams, Philox4x64-10 keyed by two words
drawn once from ``source.dp_generator`` with j in the counter (:mod:`.streams`): the seed
(uniform on D_S), ω (uniform on the range), the Test 2 uniform (k̃ = k + Lap(1/ε₀) by the
inverse CDF), m uniforms for eq. (3) and the examination order (a partial Fisher–Yates
shuffle). Output therefore does not depend on how candidates are batched or distributed.
(A ``SeedSequence(root, spawn_key=(j,))`` generator per candidate would give the same
independence but costs ≈ 19 µs per candidate to set up and cannot be batched.)

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
import numbers
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.accounting import theorem1, theorem1_replace_one
from privlab.mechanisms.plausible_deniability.batched import (
    BatchTester, draw_batch, draw_candidate, laplace_from_uniform)
from privlab.mechanisms.plausible_deniability.probability import (
    SeedIndex, generation_probability, partition_index, prefix_probabilities)
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams, synthesize
from privlab.mechanisms.tabular.domain import CODE_DTYPE
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval
from privlab.platform.dp.basic_totals import Budget
from privlab.platform.dp.dp_events import EpsilonDeltaEvent, SelfComposed
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["CandidateResults", "METHODS", "PrivacyTestParams", "count_plausible", "generate_candidates",
           "generation_event", "record_generation"]

METHODS = ("batched", "fast", "literal")
DEFAULT_BATCH_SIZE = 4096
COUNT = Interval(numbers.Integral, 1, None, closed="left")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyTestParams(ConstrainedParams):
    """Parameters of Privacy Test 1 (``epsilon0=None``) or 2.

    Raises:
        SpecError: k < 1, γ ≤ 1, ε₀ ≤ 0, or a stopping bound < 1.
    """

    k: int
    gamma: float
    epsilon0: float | None = None
    max_plausible: int | None = None
    max_check_plausible: int | None = None

    _parameter_constraints: ClassVar = {
        "k": [COUNT], "gamma": [Interval(numbers.Real, 1, None, closed="neither")],
        "epsilon0": [None, Interval(numbers.Real, 0, None, closed="neither")],
        "max_plausible": [None, COUNT], "max_check_plausible": [None, COUNT]}
    _parameter_hints: ClassVar = {"epsilon0": "None runs Test 1, which has no DP guarantee"}

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
                        n: int, source: RandomSource, method: str = "batched",
                        batch_size: int = DEFAULT_BATCH_SIZE) -> CandidateResults:
    """Mechanism 1 for ``n`` candidates: seed, synthesize (eq. 3), test (module docstring).

    Args:
        model: A fitted :class:`~.model.PlausibleDeniabilityModel`.
        seeds: D_S, codes over the model's domain.
        n: Number of candidates, ≥ 0.
        source: A research source (the candidates' stream key comes from ``dp_generator``).
        method: ``"batched"`` (numpy over ``batch_size`` candidates at a time, :mod:`.batched`),
            or one of the per-candidate references ``"fast"`` (seed index) and ``"literal"``
            (a loop over D_S). All three return identical results.
        batch_size: Candidates per batch of ``"batched"``, ≥ 1; the output does not depend on it.

    Raises:
        SpecError: ω outside [1, m], an unknown method, an empty D_S, or a bad ``n`` or
            ``batch_size``.
        SchemaError: ``seeds`` is not over the model's domain.
        ModeError: a release source (research-only, module docstring).
    """
    m = model.m
    synthesis.check_for(m)
    if method not in METHODS:
        raise SpecError(f"method ({method!r}) must be one of {list(METHODS)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SpecError(f"n ({n!r}) must be an int >= 0")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise SpecError(f"batch_size ({batch_size!r}) must be an int >= 1")
    codes = model.domain_.validate(seeds, what="D_S (seeds)").to_numpy(dtype=CODE_DTYPE)
    if not 1 <= len(codes) < 2**32:
        raise SpecError(f"seeds ({len(codes)} records) must hold at least one and fewer than 2**32 records")
    words = source.dp_generator(purpose="pd.candidates").integers(0, 2**64, size=2, dtype=np.uint64)
    key = (int(words[0]), int(words[1]))
    check = test.max_check_plausible
    noisy = test.epsilon0 is not None
    scale = 1.0 / test.epsilon0 if noisy else 0.0
    thresholds = np.full(n, float(test.k))
    options = {"n_seeds": len(codes), "m": m, "synthesis": synthesis, "test_noise": noisy, "check": check}
    if method == "batched":
        tester = BatchTester(model, codes, synthesis, test.gamma, test.max_plausible)
        out_y = np.zeros((n, m), dtype=CODE_DTYPE)
        rows, omegas, found = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        for a in range(0, n, batch_size):
            b = min(a + batch_size, n)
            draws = draw_batch(key, a, b, **options)
            out_y[a:b], found[a:b] = tester.run(draws)
            rows[a:b], omegas[a:b] = draws.rows, draws.omegas
            if noisy:
                thresholds[a:b] = test.k + laplace_from_uniform(draws.noise, scale)
        return CandidateResults(out_y, rows, omegas, found, thresholds, found >= thresholds)
    index = SeedIndex(codes, model.structure_.order, model.domain_.sizes) if method == "fast" else None
    out_y = np.zeros((n, m), dtype=CODE_DTYPE)
    rows, omegas, found = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    for j in range(n):
        draws = draw_candidate(key, j, **options)
        row, omega = int(draws.rows[0]), int(draws.omegas[0])
        if noisy:
            thresholds[j] = test.k + laplace_from_uniform(draws.noise, scale)[0]
        order = None if draws.orders is None else draws.orders[0]
        y = synthesize(model, codes[row], omega, draws.uniforms[0])
        out_y[j], rows[j], omegas[j] = y, row, omega
        found[j] = count_plausible(model, codes, index, row, y, synthesis.tested_with(omega), test, order, method)
    return CandidateResults(out_y, rows, omegas, found, thresholds, found >= thresholds)


def record_generation(ledger: Ledger, test: PrivacyTestParams, *, t: int, invocations: int,
                      scope: str = "data/seeds") -> Budget:
    """Record Theorem 1 for a generation run's Test 2 in ``ledger``; return the run's composed (ε, δ).

    The model's steps are already in ``ledger`` (``fit`` recorded them). This adds **one**
    event, step ``"pd.test"``, in ``scope`` (D_S): ``invocations`` runs of Mechanism 1 (one per
    candidate, passed or not) as the typed event SelfComposed(EpsilonDelta(ε_T, δ_T), N), which
    the ledger's accountant composes. One record instead of N keeps a 10⁶-candidate ledger small.

    Math: Theorem 1 gives, per run, ε_T = ε₀ + ln(1 + γ/t) and δ_T = e^(−ε₀(k − t)) for
    add/remove-one neighbours of D_S; on a replace-one ledger (the default) group privacy of
    size 2 gives (2ε_T, (1 + e^ε_T)·δ_T) (:func:`.accounting.theorem1_replace_one`). The record's
    ε and δ are the basic composition (Nε_T, Nδ_T); the advanced accountant composes the N runs
    by Dwork & Roth 3.20 where that is smaller, and the curve accountants compose the dominating
    pair of an (ε_T, δ_T)-DP step N times.

    Args:
        ledger: The run's ledger (already holding the model's events).
        test: Privacy Test 2's parameters (``epsilon0`` set).
        t: The user's trade-off, an int with 1 ≤ t < k.
        invocations: N, the number of candidates tested (≥ 1).
        scope: The ledger scope of the seeds D_S (a part of the positional split of the data
            when the run declared it: the test then composes in parallel with the model).

    Returns:
        The ledger's total after recording.

    Raises:
        SpecError: Test 1 (no DP guarantee), or ``invocations`` < 1.
        ValueError: t is not in [1, k).
        BudgetExceededError: the event does not fit the ledger's caps (nothing recorded).

    Privacy:
        Theorem 1 covers one run of Mechanism 1, whose output is the candidate or nothing. A
        run's released synthetics are the passing candidates of all N runs, so the guarantee
        composes over the N runs, not only over the released ones: which candidates failed is
        part of what the output reveals (at least their number). D_S is cut by position apart
        from D_T and D_P, and the test reads the model only as a fixed input, so a neighbour in
        D_S changes only the test's output distribution, a neighbour in D_T or D_P only the
        model's (the test is then post-processing): the run's guarantee is the worst part's.

    References:
        Bindschaedler, Shokri & Gunter (VLDB 2017), Theorem 1 and Section 2.1; Dwork & Roth
        (2014), Theorems 2.2 and 3.20; McSherry (SIGMOD 2009), Theorem 4.
    """
    if not isinstance(ledger, Ledger):
        raise TypeError(f"ledger ({ledger!r}) must be a Ledger")
    ledger.spend(generation_event(test, t=t, invocations=invocations, neighbouring=ledger.neighbouring, scope=scope))
    return ledger.total()


def generation_event(test: PrivacyTestParams, *, t: int, invocations: int, neighbouring: str = "replace_one",
                     scope: str = "data/seeds") -> PrivacyEvent:
    """The ledger event of ``invocations`` runs of Mechanism 1 with Test 2 (see :func:`record_generation`).

    Raises:
        SpecError: Test 1, or ``invocations`` < 1, or a composed δ that reaches 1.
        ValueError: t is not in [1, k).
    """
    test.guarantee(t)  # validates Test 2 and t before anything is built
    if isinstance(invocations, bool) or not isinstance(invocations, int) or invocations < 1:
        raise SpecError(f"invocations ({invocations!r}) must be an int >= 1")
    rule = theorem1_replace_one if neighbouring == "replace_one" else theorem1
    epsilon, delta = rule(k=test.k, gamma=float(test.gamma), epsilon0=float(test.epsilon0), t=t)
    if not invocations * delta < 1.0:
        raise SpecError(f"invocations ({invocations!r}) make Theorem 1's composed δ ({invocations * delta!r}) "
                        "reach 1: raise k − t or ε₀, or test fewer candidates")
    theorem = ("Bindschaedler et al. 2017, Theorem 1" +
               (" with group privacy of size 2 (replace-one)" if neighbouring == "replace_one" else ""))
    event = SelfComposed(EpsilonDeltaEvent(epsilon, delta, theorem), invocations)
    return PrivacyEvent.from_dp_event(
        event, name=f"pd.privacy_test_2 x{invocations}", mechanism="pd.privacy_test_2", scope=scope, step="pd.test",
        details=(("k", test.k), ("gamma", float(test.gamma)), ("epsilon0", float(test.epsilon0)),
                 ("t", t), ("neighbouring", neighbouring), ("invocations", invocations),
                 ("per_candidate_epsilon", epsilon), ("per_candidate_delta", delta)))

