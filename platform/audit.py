"""Empirical audits of DP claims on neighbouring datasets (``privlab audit``).

An *auditable* names a mechanism or statistic, its frozen ``Params`` and a neighbouring pair
``(D, D′)``, and is one of two kinds:

* a **sensitivity audit** (:class:`SensitivityAuditable`) evaluates a statistic ``f`` on
  both datasets and compares ``|f(D) − f(D′)|`` with the claimed sensitivity Δ: the largest
  difference seen, its quantiles, a reservoir sample and the rate of pairs with
  ``|f(D) − f(D′)| > Δ`` with a Clopper–Pearson interval;
* an **ε audit** (:class:`EpsilonAuditable`) runs the mechanism on ``D`` and on ``D′`` (each
  run charges a fresh ledger, as in any run) and counts how often a scalar score of the output
  falls in each of a few events fixed in advance; :func:`epsilon_lower_bound` turns the
  counts into a lower confidence bound on ε that is compared with the claimed ε.

:func:`register_auditable` also registers a trials workload ``privacy_audit.<name>`` whose parameters
are the auditable's plus ``confidence``, so an audit runs through the ordinary runner: batched
on Ray, aggregated as a stream (memory O(events), whatever the trial count), logged to MLflow,
resumable, and bit-identical for any number of workers. ``privlab audit NAME`` builds a
one-configuration spec for it (:func:`prepare_audit`, :func:`run_audit`); a spec file may use
the workload directly, e.g. with a grid over the auditable's parameters.

Adding an auditable: subclass :class:`SensitivityAuditable` or :class:`EpsilonAuditable` in a
module beside your mechanism (``audit.py``), decorate it with :func:`register_auditable`, and list
the module under the ``privlab.auditables`` entry points in ``pyproject.toml`` (third-party
packages: in theirs). Examples: ``privlab.mechanisms.basic.audit`` and
``privlab.mechanisms.pmse.audit``.

The statistics and why they are valid: :mod:`privlab.platform.audit_statistics`; the
workloads: :mod:`~privlab.platform.audit_workloads`; results: :mod:`~privlab.platform.audit_results`;
running one: :mod:`~privlab.platform.audit_run`.

References:
    Ding, Wang, Wang, Zhang & Kifer (CCS 2018), "Detecting Violations of Differential Privacy";
    Jagielski, Ullman & Oprea (NeurIPS 2020), "Auditing Differentially Private Machine
    Learning" (Clopper–Pearson lower bounds on ε); Clopper & Pearson (1934).
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from privlab.platform.ledger import Ledger, PrivacyEvent
from privlab.platform import registry
from privlab.platform.plugins import Registry
from privlab.platform.randomness import RandomSource

WORKLOAD_PREFIX = "privacy_audit."  # sorts after the built-in workloads in listings
DEFAULT_CONFIDENCE = 0.95
SPEC_TABLES = ("execution", "tracking")  # spec-level tables `--set` may address with a dotted key
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


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
        """As :meth:`privlab.platform.registry.Workload.warm_up` (JIT compilation before any
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


def register_auditable(cls: type[Auditable]) -> type[Auditable]:
    """Class decorator: register ``cls`` and its trials workload ``privacy_audit.<name>``.

    Raises:
        TypeError: ``cls`` is not a concrete auditable, lacks a class attribute, or its
            ``Params`` is not a frozen keyword-only dataclass (or has a ``confidence`` field).
        RegistryError: another class already uses the name.
    """
    if not (isinstance(cls, type) and issubclass(cls, (SensitivityAuditable, EpsilonAuditable))):
        raise TypeError(f"{cls!r} must subclass SensitivityAuditable or EpsilonAuditable")
    required = ["name", "Params", "description", "neighbouring", "claim", "default_trials"]
    required += ["statistic"] if issubclass(cls, SensitivityAuditable) else ["score", "threshold_count"]
    for attribute in required:
        if not hasattr(cls, attribute):
            raise TypeError(f"auditable {cls.__qualname__} must define {attribute!r}")
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if abstract:
        raise TypeError(f"auditable {cls.__qualname__} must implement {', '.join(abstract)}")
    if not isinstance(cls.name, str) or not _NAME.match(cls.name):
        raise TypeError(f"auditable name ({cls.name!r}) must be a lower-case identifier")
    params = cls.Params
    if not (dataclasses.is_dataclass(params) and params.__dataclass_params__.frozen  # type: ignore[attr-defined]
            and all(f.kw_only for f in dataclasses.fields(params))):
        raise TypeError(f"{cls.__qualname__}.Params must be a frozen keyword-only dataclass")
    if "confidence" in {f.name for f in dataclasses.fields(params)}:
        raise TypeError(f"{cls.__qualname__}.Params must not define 'confidence' (every audit has it)")
    if not isinstance(cls.default_trials, int) or cls.default_trials < 1:
        raise TypeError(f"{cls.__qualname__}.default_trials ({cls.default_trials!r}) must be an integer ≥ 1")
    if issubclass(cls, EpsilonAuditable) and not (isinstance(cls.threshold_count, int) and cls.threshold_count >= 1):
        raise TypeError(f"{cls.__qualname__}.threshold_count ({cls.threshold_count!r}) must be an integer ≥ 1")
    AUDITABLES.register(cls.name, cls)
    from privlab.platform.audit_workloads import audit_workload  # the workload module builds on this one

    registry.register_workload(audit_workload(cls))
    return cls


def get_auditable(name: str) -> Auditable:
    """A fresh instance of the auditable registered as ``name``."""
    return AUDITABLES.get(name)()


def auditable_names() -> list[str]:
    return AUDITABLES.names()
