"""What every accountant reads: a ledger's scopes as a tree, and its choices of parts.

The ledger hands an accountant its top-level scopes (:class:`ScopeNode`: the events that touched
one part of the data, and the partitions of that part, each over a split the ledger checked). A
neighbouring pair differs in one record, which lies in one part of each partition, so a run's
guarantee is the worst over the choices of one part per partition (:func:`alternatives`); each
choice is a multiset of leaf steps that compose sequentially.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass

from privlab.platform.core.errors import LedgerError
from privlab.platform.dp.dp_events import (
    BoundedRangeEvent,
    Composed,
    DiscreteLaplaceEvent,
    DpEvent,
    EpsilonDeltaEvent,
    ExponentialEvent,
    LaplaceEvent,
    ParallelByPosition,
    PrivateSelectionEvent,
    RandomizedResponseEvent,
    RandomStoppingEvent,
    SelfComposed,
    Subsampled,
    basic_guarantee,
)

__all__ = ["MAX_ALTERNATIVES", "Alternative", "Guarantee", "ScopeNode", "alternative_basic", "alternatives",
           "basic_of", "leaf_counts", "pure_epsilon"]

MAX_ALTERNATIVES = 4096
"""Most choices of one part per partition a curve accountant composes one by one."""


@dataclass(frozen=True)
class Guarantee:
    """An (ε, δ) guarantee and the accountant that gave it."""

    epsilon: float
    delta: float
    accountant: str


@dataclass(frozen=True)
class ScopeNode:
    """One scope of a ledger: its events, in order, and its partitions, each a tuple of part
    scopes (which nest)."""

    name: str
    events: tuple[DpEvent, ...]
    partitions: tuple[tuple[ScopeNode, ...], ...] = ()
    basics: tuple[tuple[float, float] | None, ...] = ()
    """Each event's basic (ε, δ) as its record states it (the ledger's effective ε and δ, exact to
    the last bit); empty: :func:`~privlab.platform.dp.dp_events.basic_guarantee` of each event."""

    def basic_of(self, index: int) -> tuple[float, float]:
        if self.basics:
            g = self.basics[index]
        else:
            g = basic_guarantee(self.events[index])
        if g is None:  # pragma: no cover - refused before
            raise LedgerError(f"{self.events[index].label()} has no basic guarantee")
        return g

    def as_event(self) -> DpEvent | None:
        """The scope as one event tree (``None`` when nothing was spent on it)."""
        items: list[DpEvent] = list(self.events)
        for parts in self.partitions:
            trees = [p.as_event() for p in parts]
            spent = [t for t in trees if t is not None]
            if len(spent) == 1:
                items.append(spent[0])
            elif spent:
                items.append(ParallelByPosition(tuple(spent)))
        if not items:
            return None
        return items[0] if len(items) == 1 else Composed(tuple(items))

    def walk(self) -> list[ScopeNode]:
        """This scope and every part under it."""
        return [self, *(node for parts in self.partitions for part in parts for node in part.walk())]


def leaf_counts(event: DpEvent, times: int = 1) -> list[tuple[DpEvent, int]]:
    """The leaf steps of ``event`` and how many times each runs (a subsampled step and a random
    stopping search are leaves)."""
    if isinstance(event, SelfComposed):
        return leaf_counts(event.event, times * event.count)
    if event.children() and not isinstance(event, (Subsampled, RandomStoppingEvent)):
        return [pair for child in event.children() for pair in leaf_counts(child, times)]
    return [(event, times)]


def basic_of(event: DpEvent) -> tuple[float, float]:
    """``event``'s basic (ε, δ); raise when it has none (Gaussian noise)."""
    g = basic_guarantee(event)
    if g is None:  # pragma: no cover - refused before
        raise LedgerError(f"{event.label()} has no basic guarantee")
    return g


Alternative = Counter  # leaf event -> how many times it runs


def alternatives(event: DpEvent) -> list[Alternative]:
    """Every choice of one part per parallel block, as a multiset of leaf steps."""
    if isinstance(event, ParallelByPosition):
        out: dict[frozenset, Alternative] = {}
        for part in event.parts:
            for alt in alternatives(part):
                out.setdefault(frozenset(alt.items()), alt)
        return list(out.values())
    if isinstance(event, Composed):
        combined: dict[frozenset, Alternative] = {}
        per_child = [alternatives(child) for child in event.events]
        n = math.prod(len(a) for a in per_child)
        if n > MAX_ALTERNATIVES:
            raise LedgerError(f"{event.label()}: {n} choices of one part per partition exceed {MAX_ALTERNATIVES}; "
                              "use the basic or advanced accountant for this ledger")
        for combo in itertools.product(*per_child):
            alt: Alternative = Counter()
            for c in combo:
                alt.update(c)
            combined.setdefault(frozenset(alt.items()), alt)
        return list(combined.values())
    if isinstance(event, SelfComposed):
        inner = alternatives(event.event)
        if len(inner) > 1:
            # The same split may be redrawn for each run, so a record can be in a different part each
            # time: compose the runs explicitly (Composed) to account for that.
            raise LedgerError(f"{event.label()}: a self-composed event over a parallel split is ambiguous; "
                              "compose its runs explicitly")
        return [Counter({leaf: count * event.count for leaf, count in inner[0].items()})]
    return [Counter({event: 1})]


def alternative_basic(alt: Alternative) -> tuple[float, float] | None:
    """Sequential composition of one choice of parts (``None`` when a step has no basic guarantee)."""
    terms = [basic_guarantee(leaf) for leaf in alt]
    if any(t is None for t in terms):
        return None
    return (math.fsum(c * t[0] for t, c in zip(terms, alt.values())),  # type: ignore[index]
            min(math.fsum(c * t[1] for t, c in zip(terms, alt.values())), 1.0))  # type: ignore[index]


def pure_epsilon(leaf: DpEvent) -> float | None:
    """The ε of a leaf that is pure ε-DP (``None`` otherwise)."""
    if isinstance(leaf, (ExponentialEvent, BoundedRangeEvent, RandomizedResponseEvent, PrivateSelectionEvent,
                         LaplaceEvent, DiscreteLaplaceEvent)):
        return leaf.epsilon
    if isinstance(leaf, EpsilonDeltaEvent) and leaf.delta == 0.0:
        return leaf.epsilon
    return None
