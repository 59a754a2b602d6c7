"""Typed DP events: what a mechanism did, as a tree, apart from how it composes.

A mechanism describes each DP step by an event built from its parameters (a Laplace release of
sensitivity Δ with scale b; a Gaussian one with σ; an exponential-mechanism choice at ε; a
guarantee proven elsewhere, naming its theorem) and composite events built from those
(``SelfComposed``, ``Composed``, ``ParallelByPosition``, ``Subsampled``). Events never compose
themselves: :mod:`privlab.platform.dp.accountants` turns a tree into an (ε, δ) guarantee, each
accountant in its own way, and refuses what it cannot account for. This is dp_accounting's
``DpEvent`` design; the leaves here carry the sensitivity and the noise scale so the ledger
can show them, and the accountants map them onto dp_accounting's events.

Sensitivities are stated for the ledger's neighbouring relation (replace-one unless the ledger
says add/remove-one): a Laplace event (Δ, b) is a mechanism whose privacy loss for one pair of
neighbours is at worst that of Laplace noise of scale b on a query moved by Δ.

Every event has a *basic* guarantee (:func:`basic_guarantee`): the (ε, δ) that sequential
composition gives, or ``None`` for an event with no pure-ε guarantee (Gaussian noise).

References:
    Google's dp_accounting, ``dp_event.py``; Dwork & Roth (2014), Theorems 3.6, 3.16 and A.1;
    McSherry (SIGMOD 2009), Theorem 4; Canonne, Kamath & Steinke (NeurIPS 2020).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from privlab.platform.core.errors import LedgerError
from privlab.platform.core.validation import check_real
from privlab.platform.dp.composition import check_delta

__all__ = [
    "Composed",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "DpEvent",
    "EpsilonDeltaEvent",
    "ExponentialEvent",
    "BoundedRangeEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "ParallelByPosition",
    "PrivateSelectionEvent",
    "RandomStoppingEvent",
    "RandomizedResponseEvent",
    "SelfComposed",
    "Subsampled",
    "basic_guarantee",
    "event_from_dict",
    "render_tree",
]


def _positive(name: str, value: object) -> float:
    x = check_real(name, value)
    if not (math.isfinite(x) and x > 0.0):
        raise LedgerError(f"{name} ({value!r}) must be finite and > 0")
    return x


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LedgerError(f"{name} ({value!r}) must be an int >= 1")
    return value


class DpEvent:
    """Base of every event: frozen, hashable, JSON-ready through :meth:`to_dict`."""

    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., field: value, ...}``, children as nested dicts; see :func:`event_from_dict`."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, DpEvent):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = [v.to_dict() for v in value]
            out[f.name] = value
        return out

    def label(self) -> str:
        """One line: the kind and its numbers."""
        parts = []
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if not isinstance(value, (DpEvent, tuple)):
                parts.append(f"{f.name}={value:.6g}" if isinstance(value, float) else f"{f.name}={value}")
        return f"{self.kind}({', '.join(parts)})"

    def children(self) -> tuple[DpEvent, ...]:
        return ()


# --- leaves -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaplaceEvent(DpEvent):
    """Laplace noise of scale ``scale`` (b) on a query of ℓ1 sensitivity ``sensitivity`` (Δ): (Δ/b)-DP."""

    kind: ClassVar[str] = "laplace"
    sensitivity: float
    scale: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", _positive("sensitivity", self.sensitivity))
        object.__setattr__(self, "scale", _positive("scale", self.scale))

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class DiscreteLaplaceEvent(DpEvent):
    """Discrete Laplace noise, Pr[k] ∝ exp(−|k|/t), on an integer query of sensitivity Δ: (Δ/t)-DP."""

    kind: ClassVar[str] = "discrete_laplace"
    sensitivity: int
    scale: float

    def __post_init__(self) -> None:
        _count("sensitivity", self.sensitivity)
        object.__setattr__(self, "scale", _positive("scale", self.scale))

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class GaussianEvent(DpEvent):
    """Gaussian noise of standard deviation σ on a query of ℓ2 sensitivity Δ: (Δ²/2σ²)-zCDP, no pure ε."""

    kind: ClassVar[str] = "gaussian"
    sensitivity: float
    sigma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", _positive("sensitivity", self.sensitivity))
        object.__setattr__(self, "sigma", _positive("sigma", self.sigma))

    @property
    def rho(self) -> float:
        return self.sensitivity**2 / (2.0 * self.sigma**2)


@dataclass(frozen=True)
class DiscreteGaussianEvent(DpEvent):
    """Discrete Gaussian noise (parameter σ) on an integer query of ℓ2 sensitivity Δ: (Δ²/2σ²)-zCDP
    (Canonne, Kamath & Steinke 2020, Theorem 14)."""

    kind: ClassVar[str] = "discrete_gaussian"
    sensitivity: int
    sigma: float

    def __post_init__(self) -> None:
        _count("sensitivity", self.sensitivity)
        object.__setattr__(self, "sigma", _positive("sigma", self.sigma))

    @property
    def rho(self) -> float:
        return self.sensitivity**2 / (2.0 * self.sigma**2)


@dataclass(frozen=True)
class ExponentialEvent(DpEvent):
    """One choice by the exponential mechanism, report-noisy-max or permute-and-flip at ε (pure ε-DP)."""

    kind: ClassVar[str] = "exponential"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", self.epsilon))


@dataclass(frozen=True)
class BoundedRangeEvent(DpEvent):
    """One choice by the exponential mechanism itself (weights ∝ exp(ε·u/(2Δ)), sampled exactly
    or by Gumbel-max) at ε: ε-bounded range, hence ε-DP and ε²/8-zCDP (Cesar & Rogers 2021,
    Lemma 3.2), four times less ρ than the ε²/2 of a generic ε-DP step."""

    kind: ClassVar[str] = "bounded_range"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", self.epsilon))

    @property
    def rho(self) -> float:
        return self.epsilon * self.epsilon / 8.0


@dataclass(frozen=True)
class RandomizedResponseEvent(DpEvent):
    """k-ary randomized response that keeps the true value with probability e^ε/(e^ε + k − 1): ε-DP."""

    kind: ClassVar[str] = "randomized_response"
    epsilon: float
    buckets: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", self.epsilon))
        if isinstance(self.buckets, bool) or not isinstance(self.buckets, int) or self.buckets < 2:
            raise LedgerError(f"buckets ({self.buckets!r}) must be an int >= 2")


@dataclass(frozen=True)
class PrivateSelectionEvent(DpEvent):
    """Liu & Talwar's private selection with a known threshold over an ε₁-DP base mechanism:
    (2ε₁ + ε₀)-DP for the whole search (Hod & Canetti, Theorem 3)."""

    kind: ClassVar[str] = "private_selection"
    epsilon1: float
    epsilon0: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon1", _positive("epsilon1", self.epsilon1))
        eps0 = check_real("epsilon0", self.epsilon0)
        if not 0.0 <= eps0 <= 1.0:
            raise LedgerError(f"epsilon0 ({self.epsilon0!r}) must be in [0, 1]")
        object.__setattr__(self, "epsilon0", eps0)

    @property
    def epsilon(self) -> float:
        return 2.0 * self.epsilon1 + self.epsilon0


@dataclass(frozen=True)
class RandomStoppingEvent(DpEvent):
    """Private selection by random stopping over base mechanisms with a Rényi-DP curve
    (Papernot & Steinke 2022, Theorem 2, the geometric case): each iteration runs one of
    ``events`` (chosen without looking at the data), and after each rejection the search stops
    with probability ``gamma``. The base mechanism's curve is the pointwise largest of the
    ``events``' curves; only the rdp accountant composes it
    (:mod:`privlab.platform.dp.selection_accounting`). No pure-ε guarantee."""

    kind: ClassVar[str] = "random_stopping"
    events: tuple[DpEvent, ...]
    gamma: float

    def __post_init__(self) -> None:
        events = tuple(self.events)
        if not events or not all(isinstance(e, DpEvent) for e in events):
            raise TypeError(f"events ({self.events!r}) must be a non-empty sequence of DpEvents")
        object.__setattr__(self, "events", events)
        gamma = check_real("gamma", self.gamma)
        if not 0.0 < gamma < 1.0:
            raise LedgerError(f"gamma ({self.gamma!r}) must be in (0, 1) for random stopping")
        object.__setattr__(self, "gamma", gamma)

    def children(self) -> tuple[DpEvent, ...]:
        return self.events

    def label(self) -> str:
        return f"{self.kind}(gamma={self.gamma:.6g}, {len(self.events)} base mechanism(s))"


@dataclass(frozen=True)
class EpsilonDeltaEvent(DpEvent):
    """A step whose (ε, δ) guarantee is proven elsewhere; ``theorem`` says where (e.g.
    ``"Bindschaedler et al. 2017, Theorem 1"``). Accountants treat it as any (ε, δ)-DP mechanism."""

    kind: ClassVar[str] = "epsilon_delta"
    epsilon: float
    delta: float
    theorem: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta("delta", self.delta))
        if not isinstance(self.theorem, str) or not self.theorem.strip():
            raise LedgerError(f"theorem ({self.theorem!r}) must name the result that proves the guarantee")


# --- composites -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfComposed(DpEvent):
    """``count`` adaptive runs of ``event`` on the same data."""

    kind: ClassVar[str] = "self_composed"
    event: DpEvent
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, DpEvent):
            raise TypeError(f"event ({self.event!r}) must be a DpEvent")
        _count("count", self.count)

    def children(self) -> tuple[DpEvent, ...]:
        return (self.event,)

    def label(self) -> str:
        return f"{self.kind}(count={self.count})"


@dataclass(frozen=True)
class Composed(DpEvent):
    """Adaptive sequential composition of ``events`` on the same data."""

    kind: ClassVar[str] = "composed"
    events: tuple[DpEvent, ...]

    def __post_init__(self) -> None:
        events = tuple(self.events)
        if not events or not all(isinstance(e, DpEvent) for e in events):
            raise TypeError(f"events ({self.events!r}) must be a non-empty sequence of DpEvents")
        object.__setattr__(self, "events", events)

    def children(self) -> tuple[DpEvent, ...]:
        return self.events

    def label(self) -> str:
        return f"{self.kind}({len(self.events)} events)"


@dataclass(frozen=True)
class ParallelByPosition(DpEvent):
    """Each part runs on its own disjoint part of the records: (max ε_k, max δ_k)-DP when the
    parts were cut by a split that supports it under the relation
    (:mod:`privlab.platform.dp.positional_split`). Only a ledger builds one, from the partitions
    declared on it with their splits; a :class:`~privlab.platform.dp.privacy_event.PrivacyEvent`
    refuses one in its tree, so no caller can assert parallel composition the ledger did not
    check."""

    kind: ClassVar[str] = "parallel_by_position"
    parts: tuple[DpEvent, ...]

    def __post_init__(self) -> None:
        parts = tuple(self.parts)
        if len(parts) < 2 or not all(isinstance(e, DpEvent) for e in parts):
            raise TypeError(f"parts ({self.parts!r}) must be a sequence of at least 2 DpEvents")
        object.__setattr__(self, "parts", parts)

    def children(self) -> tuple[DpEvent, ...]:
        return self.parts

    def label(self) -> str:
        return f"{self.kind}({len(self.parts)} parts)"


@dataclass(frozen=True)
class Subsampled(DpEvent):
    """``event`` run on a Poisson subsample that keeps each record with probability ``rate``.
    Amplification holds as computed for add/remove-one neighbours only; a replace-one ledger
    refuses it."""

    kind: ClassVar[str] = "subsampled"
    event: DpEvent
    rate: float

    def __post_init__(self) -> None:
        if not isinstance(self.event, DpEvent):
            raise TypeError(f"event ({self.event!r}) must be a DpEvent")
        rate = check_real("rate", self.rate)
        if not 0.0 < rate <= 1.0:
            raise LedgerError(f"rate ({self.rate!r}) must be in (0, 1]")
        object.__setattr__(self, "rate", rate)

    def children(self) -> tuple[DpEvent, ...]:
        return (self.event,)


_KINDS: dict[str, type[DpEvent]] = {cls.kind: cls for cls in (
    LaplaceEvent, DiscreteLaplaceEvent, GaussianEvent, DiscreteGaussianEvent, ExponentialEvent,
    BoundedRangeEvent, RandomizedResponseEvent, PrivateSelectionEvent, RandomStoppingEvent, EpsilonDeltaEvent, SelfComposed,
    Composed, ParallelByPosition, Subsampled)}


def event_from_dict(d: Mapping[str, Any]) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_dict` output.

    Raises:
        LedgerError: an unknown kind, or fields that do not fit it.
    """
    if not isinstance(d, Mapping) or d.get("kind") not in _KINDS:
        raise LedgerError(f"event ({d!r}) must be a mapping with a kind among {sorted(_KINDS)}")
    cls = _KINDS[d["kind"]]
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if set(d) - {"kind"} != set(names):
        raise LedgerError(f"{d['kind']} event ({dict(d)!r}) must have exactly the fields {names}")
    values = {}
    for name in names:
        value = d[name]
        if name in ("event",):
            value = event_from_dict(value)
        elif name in ("events", "parts"):
            value = tuple(event_from_dict(v) for v in value)
        values[name] = value
    return cls(**values)


def basic_guarantee(event: DpEvent) -> tuple[float, float] | None:
    """The (ε, δ) that sequential composition gives ``event``, or ``None`` without a pure-ε bound.

    Leaves give their own ε (δ for a proven (ε, δ) guarantee); ``SelfComposed`` multiplies by
    the count, ``Composed`` adds (Dwork & Roth 3.16), ``ParallelByPosition`` takes the largest ε
    and δ (McSherry 2009; positional split), ``Subsampled`` amplifies:
    ε' = ln(1 + p(e^ε − 1)), δ' = pδ (Li, Qardaji & Su 2012). Gaussian leaves have no pure-ε
    guarantee, and nor does any tree holding one; nor does random stopping (its bound is Rényi DP).
    """
    if isinstance(event, (GaussianEvent, DiscreteGaussianEvent, RandomStoppingEvent)):
        return None
    if isinstance(event, EpsilonDeltaEvent):
        return event.epsilon, event.delta
    if isinstance(event, (LaplaceEvent, DiscreteLaplaceEvent, ExponentialEvent, BoundedRangeEvent,
                          RandomizedResponseEvent, PrivateSelectionEvent)):
        return event.epsilon, 0.0
    if isinstance(event, SelfComposed):
        inner = basic_guarantee(event.event)
        return None if inner is None else (event.count * inner[0], min(event.count * inner[1], 1.0))
    if isinstance(event, (Composed, ParallelByPosition)):
        terms = [basic_guarantee(e) for e in event.children()]
        if any(t is None for t in terms):
            return None
        eps = [t[0] for t in terms]  # type: ignore[index]
        dels = [t[1] for t in terms]  # type: ignore[index]
        if isinstance(event, Composed):
            return math.fsum(eps), min(math.fsum(dels), 1.0)
        return max(eps), max(dels)
    if isinstance(event, Subsampled):
        inner = basic_guarantee(event.event)
        if inner is None:
            return None
        if event.rate == 1.0:
            return inner
        return math.log1p(event.rate * math.expm1(inner[0])), event.rate * inner[1]
    raise LedgerError(f"event ({event!r}) is of an unknown kind")  # pragma: no cover - closed set


def render_tree(event: DpEvent, indent: str = "") -> list[str]:
    """The tree as indented lines, one event a line."""
    lines = [f"{indent}{event.label()}"]
    for child in event.children():
        lines += render_tree(child, indent + "  ")
    return lines
