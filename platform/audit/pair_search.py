"""A search over candidate neighbouring pairs for the most distinguishable one (the "dataset finder").

An auditable's parameters may describe a family of pairs (``outlier_columns``, ``columns``,
``n``, …). :func:`search_pairs` runs a few pilot trials of each candidate in this process and
keeps the candidate whose pilot trials give the largest ε lower bound (ties: the larger μ
estimate). Only the choice leaves the search: the audit that reports a bound must then run on
fresh trials (another root seed), so its bound is valid whatever the search chose, exactly as a
threshold chosen on one half of the trials leaves the other half's bound valid.

References:
    Kong, Muñoz Medina, Ribero & Syed (2024), "DP-Auditorium: a large scale library for
    auditing differential privacy", IEEE S&P (dataset finders); Annamalai, Ganev &
    De Cristofaro (2024) (worst-case datasets for synthetic data).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privlab.platform.audit.audit_statistics import epsilon_lower_bound, mu_lower_bound, thresholds_of
from privlab.platform.audit.auditables import EpsilonAuditable, get_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

__all__ = ["CandidateScore", "PairSearchResult", "search_pairs"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CandidateScore:
    settings: dict[str, Any]
    epsilon_lower: float
    mu_estimate: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class PairSearchResult:
    """The chosen candidate's full settings and every candidate's pilot scores, in order."""

    best: dict[str, Any]
    candidates: tuple[CandidateScore, ...]
    pilot_trials: int


def search_pairs(name: str, base: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]], *,
                 pilot_trials: int, seed: int, confidence: float = 0.95) -> PairSearchResult:
    """Score each candidate pair of the ε auditable ``name`` on ``pilot_trials`` trials.

    Args:
        name: A registered ε auditable.
        base: Parameters every candidate shares (e.g. the claimed ε).
        candidates: Each candidate's own parameters (overriding ``base``).
        pilot_trials: Runs per dataset and candidate.
        seed: The pilot's root seed; trial ``t`` of candidate ``i`` draws from
            ``SeedSequence(seed, spawn_key=(i, t))``. Run the final audit with another seed.

    Raises:
        SpecError: not an ε auditable, no candidate, a bad candidate (its Params say why), or
            too few pilot trials.
    """
    auditable = get_auditable(name)
    if not isinstance(auditable, EpsilonAuditable):
        raise SpecError(f"auditable {name!r} is not an ε audit; a pair search ranks ε audits")
    if not candidates:
        raise SpecError("candidates must list at least one candidate pair")
    if not isinstance(pilot_trials, int) or pilot_trials < 2:
        raise SpecError(f"pilot_trials ({pilot_trials!r}) must be an integer ≥ 2")
    scores = []
    for index, candidate in enumerate(candidates):
        settings = {**base, **candidate}
        try:
            params = auditable.Params(**settings)
        except TypeError as error:
            raise SpecError(f"candidate {dict(candidate)!r}: {error}") from None
        thresholds = thresholds_of(auditable, params)
        counts_d, counts_dp = np.zeros(len(thresholds), dtype=np.int64), np.zeros(len(thresholds), dtype=np.int64)
        for trial in range(pilot_trials):
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index, trial)))
            d, d_prime = auditable.neighbours(params, rng)
            source = SeededSource(rng)
            score_d = auditable.release(params, d, source=source, ledger=Ledger(epsilon_cap=None))
            score_dp = auditable.release(params, d_prime, source=source, ledger=Ledger(epsilon_cap=None))
            counts_d += [score_d >= t for t in thresholds]
            counts_dp += [score_dp >= t for t in thresholds]
        bound = epsilon_lower_bound(counts_d, counts_dp, pilot_trials, thresholds, confidence=confidence,
                                    delta=auditable.claimed_delta(params))
        mu = mu_lower_bound(counts_d, counts_dp, pilot_trials, thresholds, confidence=confidence)
        scores.append(CandidateScore(settings=settings, epsilon_lower=bound.epsilon_lower,
                                     mu_estimate=mu.mu_estimate if math.isfinite(mu.mu_estimate) else -math.inf))
    best = max(scores, key=lambda c: (c.epsilon_lower, c.mu_estimate))
    return PairSearchResult(best=best.settings, candidates=tuple(scores), pilot_trials=pilot_trials)
