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

The statistics and why they are valid: :mod:`privlab.platform.audit.audit_statistics`; the
workloads: :mod:`~privlab.platform.audit.audit_workloads`; results: :mod:`~privlab.platform.audit.audit_results`;
running one: :mod:`~privlab.platform.audit.audit_run`.

References:
    Ding, Wang, Wang, Zhang & Kifer (CCS 2018), "Detecting Violations of Differential Privacy";
    Jagielski, Ullman & Oprea (NeurIPS 2020), "Auditing Differentially Private Machine
    Learning" (Clopper–Pearson lower bounds on ε); Clopper & Pearson (1934).
"""

from __future__ import annotations

import dataclasses
import re

from privlab.platform.audit.audit_workloads import audit_workload
from privlab.platform.audit.auditables import (
    AUDITABLES,
    DEFAULT_CONFIDENCE,
    WORKLOAD_PREFIX,
    Auditable,
    AuditKind,
    EpsilonAuditable,
    SensitivityAuditable,
    auditable_names,
    get_auditable,
)
from privlab.platform.experiment import registry

__all__ = ["DEFAULT_CONFIDENCE", "WORKLOAD_PREFIX", "AuditKind", "Auditable", "EpsilonAuditable",
           "SensitivityAuditable", "auditable_names", "get_auditable", "register_auditable"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


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
    registry.register_workload(audit_workload(cls))
    return cls


