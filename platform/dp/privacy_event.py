"""What one DP step spent: :class:`PrivacyEvent`, an immutable, loggable record.

A record carries the step's mechanism, ε, δ, sensitivity, noise scale, the data it touched and
its pipeline step, and derives its typed event (:mod:`privlab.platform.dp.dp_events`) or carries
an explicit one. Records never compose themselves; :class:`~privlab.platform.dp.ledger.Ledger`
and the accountants do.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from privlab.platform.core.errors import LedgerError
from privlab.platform.core.validation import check_real
from privlab.platform.dp import composition
from privlab.platform.dp.dp_events import (
    BoundedRangeEvent,
    DpEvent,
    EpsilonDeltaEvent,
    ExponentialEvent,
    LaplaceEvent,
    ParallelByPosition,
    PrivateSelectionEvent,
    Subsampled,
    basic_guarantee,
    event_from_dict,
)

__all__ = ["BOUNDED_RANGE_MECHANISMS", "PURE_EPSILON_MECHANISMS", "SENSITIVITY_NOTE", "DetailValue", "PrivacyEvent",
           "ledger_text"]

DetailValue = int | float | str

SENSITIVITY_NOTE = "sensitivity_is"
"""A detail that says what an event's recorded sensitivity is when that needs saying: a plan's
worst case over data-dependent public inputs (e.g. the candidate) or the value actually used."""


def _holds_parallel(event: DpEvent) -> bool:
    return isinstance(event, ParallelByPosition) or any(_holds_parallel(child) for child in event.children())


def ledger_text(name: str, value: object, *, empty_ok: bool = False) -> str:
    """A ledger record's text field (a name, scope, step…): a ``str``, non-empty unless ``empty_ok``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} ({value!r}) must be a str")
    if not empty_ok and not value.strip():
        raise LedgerError(f"{name} ({value!r}) must be a non-empty string")
    return value


def _optional_nonnegative(name: str, value: object) -> float | None:
    if value is None:
        return None
    x = check_real(name, value)
    if not (math.isfinite(x) and x >= 0.0):
        raise LedgerError(f"{name} ({value!r}) must be finite and >= 0 when given")
    return x


def _details(value: object) -> tuple[tuple[str, DetailValue], ...]:
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"details ({value!r}) must be a tuple of (key, value) pairs")
    out: list[tuple[str, DetailValue]] = []
    for item in value:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"details item ({item!r}) must be a (key, value) pair")
        key = ledger_text("details key", item[0])
        v = item[1]
        if isinstance(v, bool) or not isinstance(v, (str, numbers.Real)):
            raise TypeError(f"details[{key!r}] ({v!r}) must be a number or a str")
        if isinstance(v, numbers.Integral):
            v = int(v)
        elif isinstance(v, numbers.Real):
            v = float(v)
            if not math.isfinite(v):
                raise LedgerError(f"details[{key!r}] ({v!r}) must be finite (or a str)")
        if any(k == key for k, _ in out):
            raise LedgerError(f"details key ({key!r}) must be unique")
        out.append((key, v))
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class PrivacyEvent:
    """What one DP step spent: an immutable, loggable record.

    Numbers are stored as ``float`` (ints and numpy scalars are converted), ``details`` as a
    tuple of pairs, so events are hashable and round-trip exactly through :meth:`to_dict`.

    Attributes:
        name: what was released, e.g. ``"noisy_mean"``.
        mechanism: the mechanism, e.g. ``"laplace"``, ``"exponential"``.
        epsilon: ε of the step as run (before amplification), finite and > 0. ε = 0 is
            rejected: a DP step that spends nothing is a bug.
        delta: δ of the step as run, in [0, 1).
        sensitivity: the query's sensitivity, ≥ 0, when it has one.
        noise_scale: the noise scale used (Laplace b, Gaussian σ), ≥ 0, when it has one.
        scope: the data the step touched (a scope name; see :class:`Ledger`).
        step: the pipeline step or function that ran it.
        sampling_rate: Poisson subsampling rate p in (0, 1], greater than ``delta``, when the
            step ran on such a subsample.
        details: extra loggable facts, e.g. ``(("epsilon1", 0.5),)``; values are numbers or
            strings, keys unique.
        dp_event: the step as a typed event tree (:mod:`privlab.platform.dp.dp_events`) when the
            mechanism builds one (a composed guarantee, Gaussian noise); use
            :meth:`from_dp_event`. Otherwise :attr:`typed` derives the leaf from ``mechanism``,
            ``sensitivity`` and ``noise_scale``. ``epsilon``/``delta`` are then the tree's basic
            (sequential-composition) guarantee; ``epsilon`` is ``None`` for a tree with no
            pure-ε guarantee (Gaussian noise).

    Raises:
        TypeError: a field has the wrong kind of value.
        LedgerError: a field has a wrong value.

    Privacy:
        ``effective_epsilon``/``effective_delta`` are what the step costs after amplification
        by subsampling (add/remove-one neighbouring); otherwise ``epsilon``/``delta``.

    References:
        Bindschaedler, Shokri & Gunter (VLDB 2017), Appendix A, Theorem 4.
    """

    name: str
    mechanism: str
    epsilon: float
    delta: float = 0.0
    sensitivity: float | None = None
    noise_scale: float | None = None
    scope: str = "data"
    step: str = ""
    sampling_rate: float | None = None
    details: tuple[tuple[str, DetailValue], ...] = ()
    dp_event: DpEvent | None = None

    def __post_init__(self) -> None:
        ledger_text("name", self.name)
        ledger_text("mechanism", self.mechanism)
        ledger_text("scope", self.scope)
        ledger_text("step", self.step, empty_ok=True)
        if self.dp_event is not None and not isinstance(self.dp_event, DpEvent):
            raise TypeError(f"dp_event ({self.dp_event!r}) must be a DpEvent")
        if self.dp_event is not None and _holds_parallel(self.dp_event):
            raise LedgerError(
                f"event {self.name!r}: a {ParallelByPosition.kind} tree is not accepted in a record: parallel "
                "composition holds only over a split the ledger can check; declare the partition on the ledger "
                "with the split that cut it (Ledger.declare_partition(parent, parts, split=...)) and spend each "
                "part's steps on its part's scope")
        basic = None if self.dp_event is None else basic_guarantee(self.dp_event)
        if self.dp_event is not None and basic is None:
            if self.epsilon is not None:
                raise LedgerError(f"epsilon ({self.epsilon!r}) must be None for {self.dp_event.label()}, "
                                  "which has no pure-ε guarantee")
            if self.sampling_rate is not None:
                raise LedgerError("sampling_rate must be None with a dp_event (use a Subsampled event)")
            object.__setattr__(self, "delta", check_real("delta", self.delta))
            object.__setattr__(self, "details", _details(self.details))
            return
        epsilon = check_real("epsilon", self.epsilon)
        if not (math.isfinite(epsilon) and epsilon > 0.0):
            raise LedgerError(f"epsilon ({self.epsilon!r}) must be finite and > 0")
        if basic is not None and (epsilon, check_real("delta", self.delta)) != basic:
            raise LedgerError(f"epsilon, delta ({epsilon!r}, {self.delta!r}) must be the basic guarantee "
                              f"{basic!r} of {self.dp_event.label()}; build the record with "  # type: ignore[union-attr]
                              "PrivacyEvent.from_dp_event")
        delta = check_real("delta", self.delta)
        if not 0.0 <= delta < 1.0:
            raise LedgerError(f"delta ({self.delta!r}) must be in [0, 1)")
        rate = None
        if self.sampling_rate is not None:
            rate = check_real("sampling_rate", self.sampling_rate)
            if not 0.0 < rate <= 1.0:
                raise LedgerError(f"sampling_rate ({self.sampling_rate!r}) must be in (0, 1]")
            if not rate > delta:
                raise LedgerError(
                    f"sampling_rate ({self.sampling_rate!r}) must be greater than delta "
                    f"({self.delta!r}) for amplification by subsampling (δ < p)"
                )
        normalized = {
            "epsilon": epsilon,
            "delta": delta,
            "sensitivity": _optional_nonnegative("sensitivity", self.sensitivity),
            "noise_scale": _optional_nonnegative("noise_scale", self.noise_scale),
            "sampling_rate": rate,
            "details": _details(self.details),
        }
        for key, value in normalized.items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_dp_event(cls, dp_event: DpEvent, *, name: str, mechanism: str | None = None, scope: str = "data",
                      step: str = "",
                      sensitivity: float | None = None, noise_scale: float | None = None,
                      details: tuple[tuple[str, DetailValue], ...] = ()) -> PrivacyEvent:
        """The record of a step the mechanism describes as a typed event tree; ``mechanism`` names
        it (default: the tree's kind) and ``epsilon``/``delta`` are its basic guarantee (``None``
        for Gaussian noise)."""
        if not isinstance(dp_event, DpEvent):
            raise TypeError(f"dp_event ({dp_event!r}) must be a DpEvent")
        basic = basic_guarantee(dp_event)
        return cls(name=name, mechanism=mechanism or dp_event.kind, epsilon=None if basic is None else basic[0],  # type: ignore[arg-type]
                   delta=0.0 if basic is None else basic[1], sensitivity=sensitivity, noise_scale=noise_scale,
                   scope=scope, step=step, details=details, dp_event=dp_event)

    @property
    def typed(self) -> DpEvent:
        """The step as a typed event (:mod:`privlab.platform.dp.dp_events`).

        Explicit when built with :meth:`from_dp_event`. Otherwise derived: ``"laplace"`` with a
        sensitivity Δ and scale b such that Δ/b is ε (to 1e-9) is a :class:`LaplaceEvent`, whose
        exact privacy curve the curve accountants use; the exponential mechanism, permute-and-flip
        and the pMSE chain are :class:`ExponentialEvent` (pure ε); the exponential mechanism
        recorded as bounded range (:data:`BOUNDED_RANGE_MECHANISMS`) is a :class:`BoundedRangeEvent`;
        private selection with its ε₁, ε₀ details a :class:`PrivateSelectionEvent`; any other step is an
        :class:`EpsilonDeltaEvent` with its recorded (ε, δ), naming its mechanism. A
        ``sampling_rate`` wraps the leaf in :class:`Subsampled`.
        """
        if self.dp_event is not None:
            return self.dp_event
        return _derived_event(self.mechanism, self.epsilon, self.delta, self.sensitivity, self.noise_scale,
                              self.sampling_rate, self.details)

    @property
    def effective_epsilon(self) -> float:
        """ε after amplification by subsampling (``epsilon`` when not subsampled)."""
        return self._effective()[0]

    @property
    def effective_delta(self) -> float:
        """δ after amplification by subsampling (``delta`` when not subsampled)."""
        return self._effective()[1]

    def _effective(self) -> tuple[float, float]:
        if self.sampling_rate is None:
            return self.epsilon, self.delta
        return composition.amplify_by_subsampling(
            epsilon=self.epsilon, delta=self.delta, rate=self.sampling_rate
        )

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready data; :meth:`from_dict` inverts it exactly."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["details"] = [[k, v] for k, v in self.details]
        if self.dp_event is None:
            del d["dp_event"]
        else:
            d["dp_event"] = self.dp_event.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyEvent:
        """Rebuild an event from :meth:`to_dict` output.

        Raises:
            TypeError: ``d`` is not a mapping, or a field has the wrong kind of value.
            LedgerError: ``d`` has unknown keys, lacks a required key, or a value is wrong.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"event ({d!r}) must be a mapping")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise LedgerError(f"event keys ({unknown!r}) must be among {known}")
        missing = [k for k in ("name", "mechanism", "epsilon") if k not in d]
        if missing:
            raise LedgerError(f"event ({dict(d)!r}) must have keys {missing}")
        d = dict(d)
        if d.get("dp_event") is not None:
            d["dp_event"] = event_from_dict(d["dp_event"])
        return cls(**d)


def _derived_event(mechanism: str, epsilon: float, delta: float, sensitivity: float | None,
                   noise_scale: float | None, sampling_rate: float | None,
                   details: tuple[tuple[str, DetailValue], ...]) -> DpEvent:
    """The typed leaf of a flat record (:attr:`PrivacyEvent.typed`)."""
    leaf: DpEvent
    if (mechanism == "laplace" and delta == 0.0 and sensitivity and noise_scale
            and abs(sensitivity / noise_scale - epsilon) <= 1e-9 * epsilon):
        leaf = LaplaceEvent(sensitivity, noise_scale)
    elif mechanism in PURE_EPSILON_MECHANISMS and delta == 0.0:
        leaf = ExponentialEvent(epsilon)
    elif mechanism in BOUNDED_RANGE_MECHANISMS and delta == 0.0:
        leaf = BoundedRangeEvent(epsilon)
    elif mechanism == "private_selection_known_threshold" and delta == 0.0:
        known = dict(details)
        leaf = PrivateSelectionEvent(float(known["epsilon1"]), float(known["epsilon0"]))
    else:
        leaf = EpsilonDeltaEvent(epsilon, delta, f"the {mechanism} step's own guarantee")
    return leaf if sampling_rate is None else Subsampled(leaf, sampling_rate)


PURE_EPSILON_MECHANISMS = ("exponential", "permute_and_flip", "exponential_pmse_metropolis")
"""Mechanisms that choose one output at ε (an exponential-mechanism choice): :class:`ExponentialEvent`."""

BOUNDED_RANGE_MECHANISMS = ("exponential_bounded_range", "exponential_rejection")
"""The exponential mechanism recorded as ε-bounded range (:class:`BoundedRangeEvent`): Gumbel-max
in research mode, exact rejection sampling in release mode."""
