"""The basic (sequential + parallel) composition total of a ledger, kept exact and up to date."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from privlab.platform.dp.exact_sum import ExactSum

__all__ = ["BasicTotals", "Budget"]

class BasicTotals:
    """The basic (sequential + parallel) total, kept up to date one event at a time.

    Top-level scopes share one exact sum (:class:`~privlab.platform.dp.exact_sum.ExactSum`); each
    part scope keeps its own, and each partition caches its largest part. Recording an event
    touches its scope and the partitions above it, so :meth:`add` costs O(depth × parts), and
    :meth:`total` is one ``fsum`` over the partials and the top-level partitions. The result is
    bit-identical to ``fsum`` over every term at once.
    """

    def __init__(self) -> None:
        self.top: tuple[ExactSum, ExactSum] = (ExactSum(), ExactSum())
        self.own: dict[str, tuple[ExactSum, ExactSum]] = {}
        self.part_of: dict[str, int] = {}
        self.partitions: list[tuple[str, tuple[str, ...]]] = []
        self.children: dict[str, list[int]] = {}
        self.scope_total: dict[str, tuple[float, float]] = {}
        self.largest: list[tuple[float, float]] = []

    def declare(self, parent: str, parts: tuple[str, ...]) -> None:
        index = len(self.partitions)
        self.partitions.append((parent, parts))
        self.children.setdefault(parent, []).append(index)
        self.largest.append((0.0, 0.0))
        for part in parts:
            self.part_of[part] = index
            self.own[part] = (ExactSum(), ExactSum())
            self.scope_total[part] = (0.0, 0.0)

    def _sums(self, scope: str) -> tuple[ExactSum, ExactSum]:
        return self.own[scope] if scope in self.part_of else self.top

    def add(self, scope: str, epsilon: float, delta: float) -> None:
        eps, dels = self._sums(scope)
        eps.add((epsilon,))
        dels.add((delta,))
        while scope in self.part_of:
            eps, dels = self.own[scope]
            nested = [self.largest[i] for i in self.children.get(scope, [])]
            self.scope_total[scope] = (math.fsum([*eps.partials, *(e for e, _ in nested)]),
                                       math.fsum([*dels.partials, *(d for _, d in nested)]))
            index = self.part_of[scope]
            parent, parts = self.partitions[index]
            totals = [self.scope_total[p] for p in parts]
            self.largest[index] = (max(e for e, _ in totals), max(d for _, d in totals))
            scope = parent

    def total(self) -> Budget:
        nested = [self.largest[i] for i, (parent, _) in enumerate(self.partitions) if parent not in self.part_of]
        return Budget(math.fsum([*self.top[0].partials, *(e for e, _ in nested)]),
                      math.fsum([*self.top[1].partials, *(d for _, d in nested)]))

    def snapshot(self, scope: str) -> tuple[Any, ...]:
        """What :meth:`add` on ``scope`` can change, to :meth:`restore` after a refusal."""
        eps, dels = self._sums(scope)
        return (scope, list(eps.partials), list(dels.partials), dict(self.scope_total), list(self.largest))

    def restore(self, snapshot: tuple[Any, ...]) -> None:
        scope, eps, dels, scope_total, largest = snapshot
        sums = self._sums(scope)
        sums[0].partials[:] = eps
        sums[1].partials[:] = dels
        self.scope_total = scope_total
        self.largest = largest


@dataclass(frozen=True)
class Budget:
    """An (ε, δ) total."""

    epsilon: float
    delta: float
