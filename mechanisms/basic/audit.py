"""ε audits of the basic mechanisms on neighbouring pairs at sensitivity-maximising distance.

* ``laplace``: the ε-DP mean of ``n`` values in public bounds ``[lower, upper]``
  (:func:`privlab.mechanisms.basic.laplace.laplace_mechanism` with Δ = (upper − lower)/n);
* ``exponential``: an ε-DP approval vote
  (:func:`privlab.mechanisms.basic.exponential.exponential_mechanism` with Δ = 1).

Both pairs are fixed by public parameters (no randomness), and both move the statistic by
exactly its sensitivity, which is where the mechanisms' privacy loss is largest; the events the
audit counts are fixed from the same public parameters and the claimed ε
(:meth:`privlab.platform.audit.registration.EpsilonAuditable.thresholds`). See :mod:`privlab.platform.audit.registration`
for the bound and why it is valid.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privlab.mechanisms.basic.exponential import exponential_mechanism
from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.platform.audit.registration import EpsilonAuditable, register_auditable
from privlab.platform.core.validation import ConstrainedParams, ConstraintSpec, Interval
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource


_POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
_FINITE = Interval(numbers.Real, None, None, closed="neither")


def _at_least(low: int) -> list[ConstraintSpec]:
    return [Interval(numbers.Integral, low, None, closed="left")]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaplaceMeanAuditParams(ConstrainedParams):
    """The claimed ε (required: privlab has no default ε), n records and their public bounds."""

    epsilon: float
    n: int = 100
    lower: float = 0.0
    upper: float = 1.0

    _parameter_constraints: ClassVar = {"epsilon": [_POSITIVE], "n": _at_least(1), "lower": [_FINITE],
                                        "upper": [_FINITE]}

    def _check_together(self) -> None:
        if not self.upper > self.lower:
            raise ValueError(f"upper ({self.upper!r}) must be greater than lower ({self.lower!r})")


@register_auditable
class LaplaceMeanAudit(EpsilonAuditable):
    """ε audit of the Laplace mechanism releasing the mean of ``n`` bounded values.

    The pair: D holds ``n`` records equal to ``lower``; D′ replaces one of them with
    ``upper``. The means differ by ``(upper − lower)/n``, the mean's replace-one sensitivity Δ,
    which the release uses. The score is the released mean ``o``; the events are
    ``{o ≥ t}`` for ``t`` in ``(q − b, q, (q + q′)/2, q′, q′ + b)``, with ``q``, ``q′`` the
    exact means of D and D′ and ``b = Δ/ε`` the claimed scale (complements are counted too).
    For a correct mechanism ``P_D′(o ≥ q′)/P_D(o ≥ q′) = e^ε`` exactly, so the bound comes
    close to ε; a scale that is too small for the claimed ε makes it exceed ε.

    Privacy:
        The audited release is ε-DP for replace-one neighbours with public ``n`` and bounds
        (Laplace mechanism with Δ = (upper − lower)/n). Each trial charges ε on D and,
        on a separate ledger, ε on D′ (the neighbouring world).

    References:
        Dwork, McSherry, Nissim & Smith (2006); Ding et al. (CCS 2018) for the events.
    """

    name = "laplace"
    Params = LaplaceMeanAuditParams
    description = "Laplace mechanism, mean of n values in [lower, upper]"
    neighbouring = "replace-one"
    claim = "ε = epsilon, δ = 0, with Δ = (upper − lower)/n"
    default_trials = 50_000
    score = "noisy mean"
    threshold_count = 5

    @staticmethod
    def sensitivity(params: LaplaceMeanAuditParams) -> float:
        return (params.upper - params.lower) / params.n

    def neighbours(self, params: LaplaceMeanAuditParams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return self.pair(params)

    @staticmethod
    def pair(params: LaplaceMeanAuditParams) -> tuple[np.ndarray, np.ndarray]:
        """D: ``n`` records at ``lower``; D′: the first of them moved to ``upper``."""
        d = np.full(params.n, float(params.lower))
        d_prime = d.copy()
        d_prime[0] = params.upper
        return d, d_prime

    def claimed_epsilon(self, params: LaplaceMeanAuditParams) -> float:
        return float(params.epsilon)

    def plan(self, params: LaplaceMeanAuditParams) -> list[PrivacyEvent]:
        s = self.sensitivity(params)
        return [PrivacyEvent(name="mean", mechanism="laplace", epsilon=params.epsilon, sensitivity=s,
                             noise_scale=s / params.epsilon, step="audit.laplace")]

    def release(self, params: LaplaceMeanAuditParams, data: np.ndarray, *, source: RandomSource,
                ledger: Ledger) -> float:
        values = np.clip(data, params.lower, params.upper)
        return float(laplace_mechanism(float(values.mean()), sensitivity=self.sensitivity(params),
                                       epsilon=params.epsilon, source=source, ledger=ledger, name="mean",
                                       step="audit.laplace"))

    def thresholds(self, params: LaplaceMeanAuditParams) -> Sequence[float]:
        d, d_prime = self.pair(params)
        q, q_prime = float(d.mean()), float(d_prime.mean())
        scale = self.sensitivity(params) / params.epsilon
        return (q - scale, q, (q + q_prime) / 2, q_prime, q_prime + scale)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApprovalVoteAuditParams(ConstrainedParams):
    """The claimed ε (required), the number of candidates and of voters."""

    epsilon: float
    candidates: int = 10
    voters: int = 100

    _parameter_constraints: ClassVar = {"epsilon": [_POSITIVE], "candidates": _at_least(2), "voters": _at_least(1)}


def approval_utilities(ballots: np.ndarray) -> np.ndarray:
    """Approvals per candidate: ``ballots`` is a (voters, candidates) 0/1 matrix."""
    return ballots.sum(axis=0).astype(np.float64)


@register_auditable
class ApprovalVoteAudit(EpsilonAuditable):
    """ε audit of the exponential mechanism choosing the most-approved candidate.

    Each voter approves a subset of ``m`` candidates; the utility of a candidate is its
    number of approvals, which one replaced voter changes by at most Δ = 1 per candidate. The
    pair: in D one voter approves only candidate 0; in D′ that voter approves every other
    candidate instead, so *every* utility moves by exactly Δ, candidate 0's down and the rest
    up — the change that makes the exponential mechanism's privacy loss largest. The other
    ``voters − 1`` voters approve every candidate, which shifts all utilities equally and
    leaves the mechanism's law unchanged. The score is the selected index and the one event
    is ``{index ≥ 0.5}``, i.e. (by its complement) "candidate 0 was chosen", with

        P_D(0) / P_D′(0) = e^{ε/2} (1 + (m − 1) e^{ε/2}) / (e^{ε/2} + m − 1) < e^ε,

    which approaches e^ε as ``m`` grows (m = 10, ε = 1: ln ratio = 0.897).

    Privacy:
        The audited selection is ε-DP for replace-one neighbours (McSherry & Talwar 2007,
        Theorem 6, with Δ = 1). Each trial charges ε on D and, on a separate ledger, on D′.

    References:
        McSherry & Talwar (2007); Ding et al. (CCS 2018).
    """

    name = "exponential"
    Params = ApprovalVoteAuditParams
    description = "exponential mechanism, approval vote over m candidates"
    neighbouring = "replace-one"
    claim = "ε = epsilon, δ = 0, with Δ = 1"
    default_trials = 50_000
    score = "selected candidate"
    threshold_count = 1

    def neighbours(self, params: ApprovalVoteAuditParams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        ballots = np.ones((params.voters, params.candidates), dtype=np.int64)
        ballots[0] = 0
        ballots[0, 0] = 1
        ballots_prime = ballots.copy()
        ballots_prime[0] = 1 - ballots[0]
        return ballots, ballots_prime

    def claimed_epsilon(self, params: ApprovalVoteAuditParams) -> float:
        return float(params.epsilon)

    def plan(self, params: ApprovalVoteAuditParams) -> list[PrivacyEvent]:
        return [PrivacyEvent(name="winner", mechanism="exponential", epsilon=params.epsilon, sensitivity=1.0,
                             noise_scale=2.0 / params.epsilon, step="audit.exponential")]

    def release(self, params: ApprovalVoteAuditParams, data: np.ndarray, *, source: RandomSource,
                ledger: Ledger) -> float:
        return float(exponential_mechanism(approval_utilities(data), sensitivity=1.0, epsilon=params.epsilon,
                                           source=source, ledger=ledger, name="winner", step="audit.exponential"))

    def thresholds(self, params: ApprovalVoteAuditParams) -> Sequence[float]:
        return (0.5,)

    def event_label(self, params: ApprovalVoteAuditParams, threshold: float, complement: bool) -> str:
        return "candidate 0 selected" if complement else "a candidate other than 0 selected"


def exact_candidate_zero_probabilities(params: ApprovalVoteAuditParams) -> tuple[float, float]:
    """``(P_D(0), P_D′(0))`` for :class:`ApprovalVoteAudit`'s pair, in closed form."""
    half = math.exp(params.epsilon / 2)
    m = params.candidates
    return half / (half + m - 1), 1.0 / (1.0 + (m - 1) * half)
