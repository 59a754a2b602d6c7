"""What an audit knows about a mechanism or statistic: the two kinds of auditable and their registry.

:mod:`privlab.platform.audit.registration` is the interface mechanisms use (it re-exports these classes and
registers each auditable's trials workload); the modules that run audits build on this one.
"""

from __future__ import annotations

import abc
import difflib
import enum
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from privlab.platform.core.errors import RegistryError
from privlab.platform.core.plugins import Registry
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["AUDITABLES", "DEFAULT_CONFIDENCE", "WORKLOAD_PREFIX", "AuditKind", "Auditable", "EpsilonAuditable",
           "SensitivityAuditable", "auditable_names", "get_auditable"]

WORKLOAD_PREFIX = "privacy_audit."  # sorts after the built-in workloads in listings
DEFAULT_CONFIDENCE = 0.95


class AuditKind(enum.StrEnum):
    SENSITIVITY = "sensitivity"
    EPSILON = "epsilon"


class Auditable(abc.ABC):
    """What an audit needs to know about one mechanism or statistic.

    Subclasses set ``name`` (lower-case identifier), ``Params`` (a frozen keyword-only
    dataclass validated in ``__post_init__``; no field may be called ``confidence``),
    ``description`` (one line), ``neighbouring`` (the relation, e.g. ``"replace-one"``),
    ``claim`` (the claimed guarantee as a formula of the parameters, for ``--list``) and
    ``default_trials``, and implement :meth:`neighbours`.
    """

    name: ClassVar[str]
    kind: ClassVar[AuditKind]
    Params: ClassVar[type]
    description: ClassVar[str]
    neighbouring: ClassVar[str]
    claim: ClassVar[str]
    default_trials: ClassVar[int]

    @abc.abstractmethod
    def neighbours(self, params: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        """A neighbouring pair ``(D, D′)``: drawn from ``rng``, or fixed by public parameters."""

    def warm_up(self, params: Any) -> None:
        """As :meth:`privlab.platform.experiment.registry.Workload.warm_up` (JIT compilation before any
        trial is timed; must return at once when repeated). Default: nothing."""


class SensitivityAuditable(Auditable):
    """A statistic whose claimed sensitivity Δ is audited on neighbouring pairs."""

    kind = AuditKind.SENSITIVITY
    #: The statistic, for output (e.g. ``"pMSE(X, Xˢ)"``).
    statistic: ClassVar[str]

    @abc.abstractmethod
    def claimed_sensitivity(self, params: Any) -> float:
        """The Δ the statistic is claimed to satisfy under ``neighbouring``."""

    @abc.abstractmethod
    def evaluate(self, params: Any, d: Any, d_prime: Any, rng: np.random.Generator) -> tuple[float, float]:
        """``(f(D), f(D′))``: the same query on both datasets.

        Randomness that is part of the query itself (e.g. the synthetic data a pMSE compares
        against) is drawn once from ``rng`` and shared by both evaluations. ``rng`` is the
        trial's stream, already advanced by :meth:`neighbours`.
        """


class EpsilonAuditable(Auditable):
    """A mechanism whose claimed ε (and δ) is audited by running it on ``D`` and ``D′``."""

    kind = AuditKind.EPSILON
    #: What :meth:`release` reduces the output to (e.g. ``"noisy mean"``).
    score: ClassVar[str]
    #: How many thresholds :meth:`thresholds` returns (fixes the workload's metric names).
    threshold_count: ClassVar[int]

    @abc.abstractmethod
    def claimed_epsilon(self, params: Any) -> float:
        """The ε the mechanism claims for one release."""

    def claimed_delta(self, params: Any) -> float:
        """The δ the mechanism claims for one release (0 for pure DP)."""
        return 0.0

    def claimed_mu(self, params: Any) -> float | None:
        """The μ of the Gaussian-DP guarantee the claim implies, or ``None`` when it implies none.

        When given, the audit also bounds μ from the whole empirical trade-off curve
        (:func:`~privlab.platform.audit.audit_statistics.mu_lower_bound`) and a bound above it is a
        violation, as an ε bound above ``claimed_epsilon`` is. Default: ``None`` (μ is still
        estimated and reported, for reading).
        """
        return None

    @abc.abstractmethod
    def plan(self, params: Any) -> list[PrivacyEvent]:
        """The DP steps one release charges (checked on both runs of every trial)."""

    @abc.abstractmethod
    def release(self, params: Any, data: Any, *, source: RandomSource, ledger: Ledger) -> float:
        """Run the mechanism on ``data`` (charging ``ledger``) and return a scalar score of
        its output. Any function of the output is allowed (post-processing), but it must not
        look at ``data`` except through the mechanism."""

    def event_label(self, params: Any, threshold: float, complement: bool) -> str:
        """How to print the event ``{score ≥ threshold}`` (or its complement, ``score < threshold``)."""
        return f"{self.score} {'<' if complement else '≥'} {threshold:.6g}"

    @abc.abstractmethod
    def thresholds(self, params: Any) -> Sequence[float]:
        """``threshold_count`` finite thresholds ``t``; the audit counts ``score ≥ t``.

        Choose them from public parameters and the claim only (e.g. the two datasets' exact
        statistics and the claimed noise scale), never from outputs: the bound's validity
        rests on the events being fixed before any trial runs.
        """


AUDITABLES: Registry[type[Auditable]] = Registry("auditable", groups=("privlab.auditables",), listed_as="auditables")


def get_auditable(name: str) -> Auditable:
    """A fresh instance of the auditable registered as ``name``.

    Raises:
        RegistryError: no such auditable; the message names the close ones first.
    """
    try:
        return AUDITABLES.get(name)()
    except RegistryError as error:
        close = difflib.get_close_matches(str(name), AUDITABLES.names(), n=3, cutoff=0.6)
        if not close:
            raise
        hint = f"{name!r} (did you mean {', '.join(map(repr, close))}?);"
        raise RegistryError(str(error).replace(f"{name!r};", hint, 1)) from None


def auditable_names() -> list[str]:
    return AUDITABLES.names()
