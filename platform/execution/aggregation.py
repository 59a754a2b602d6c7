"""Streaming aggregation whose result does not depend on batching or merge order.

Workers summarise each batch of trials into a :class:`ConfigAggregate`; the driver merges
them as they arrive. Memory is O(metrics × reservoir size) per configuration, whatever the
trial count. Every piece is a commutative, associative merge, so the result is bit-identical
for any partition of the trials into batches and any completion order:

* counts, minima and maxima are order-free;
* sums and sums of squares are kept **exactly** as Shewchuk partials (the algorithm behind
  :func:`math.fsum`), and the mean and variance are computed once from the exact rational
  totals, so no floating-point rounding depends on the order of additions;
* the reservoir is a bottom-k sample by a pseudo-random priority that is a pure function of
  the trial index (:func:`privlab.platform.dp.seeding.reservoir_priorities`), ties broken by
  trial index.

Quantiles are read from the reservoir (exact while the count is at most its size).
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from privlab.platform.dp.exact_sum import ExactSum
from privlab.platform.dp.seeding import reservoir_priorities
from privlab.platform.experiment.registry import MetricKind

DEFAULT_RESERVOIR_SIZE = 10_000
Z_95 = 1.959963984540054


def _encode(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()


def _decode(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype).copy()


@dataclasses.dataclass
class MetricAccumulator:
    """Everything kept about one metric of one configuration."""

    kind: MetricKind
    reservoir_size: int = DEFAULT_RESERVOIR_SIZE
    count: int = 0
    total: ExactSum = dataclasses.field(default_factory=ExactSum)
    total_sq: ExactSum = dataclasses.field(default_factory=ExactSum)
    minimum: float = math.inf
    maximum: float = -math.inf
    res_priority: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    res_index: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=np.int64))
    res_value: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))

    def add(self, values: np.ndarray, indices: np.ndarray, salt: int) -> None:
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return
        self.count += int(values.size)
        self.total.add_array(values)
        self.total_sq.add_array(values * values)
        self.minimum = min(self.minimum, float(values.min()))
        self.maximum = max(self.maximum, float(values.max()))
        self._keep(reservoir_priorities(salt, indices), np.asarray(indices, dtype=np.int64), values)

    def _keep(self, priority: np.ndarray, index: np.ndarray, value: np.ndarray) -> None:
        priority = np.concatenate([self.res_priority, priority])
        index = np.concatenate([self.res_index, index])
        value = np.concatenate([self.res_value, value])
        if priority.size > self.reservoir_size:
            # The k smallest (priority, index) pairs all have priority ≤ the k-th smallest
            # priority, so sorting only those gives the full sort's first k.
            threshold = np.partition(priority, self.reservoir_size - 1)[self.reservoir_size - 1]
            near = np.flatnonzero(priority <= threshold)
            order = near[np.lexsort((index[near], priority[near]))][: self.reservoir_size]
            priority, index, value = priority[order], index[order], value[order]
        self.res_priority, self.res_index, self.res_value = priority, index, value

    def merge(self, other: MetricAccumulator) -> None:
        self.count += other.count
        self.total.merge(other.total)
        self.total_sq.merge(other.total_sq)
        self.minimum = min(self.minimum, other.minimum)
        self.maximum = max(self.maximum, other.maximum)
        self._keep(other.res_priority, other.res_index, other.res_value)

    def reservoir(self) -> np.ndarray:
        """The kept values in trial order (a uniform sample of at most ``reservoir_size``)."""
        return self.res_value[np.argsort(self.res_index, kind="stable")]

    def summary(self) -> dict[str, float]:
        """The metric's statistics. A rate's are ``trials`` (how many values: ``violation_trials``
        = 2000), ``successes`` (how many were 1: the violations), ``rate`` and its Wilson
        interval; a value's are ``count``, ``mean``, ``sd``, its t interval, extremes and quantiles."""
        n = self.count
        if n == 0:
            return {"trials" if self.kind is MetricKind.RATE else "count": 0.0}
        exact_mean = self.total.fraction() / n
        mean = float(exact_mean)
        if self.kind is MetricKind.RATE:
            successes = float(self.total.fraction())
            low, high = wilson_interval(successes, n)
            return {"trials": float(n), "rate": mean, "ci_low": low, "ci_high": high, "successes": successes}
        if n > 1:
            variance = (self.total_sq.fraction() - self.total.fraction() * exact_mean) / (n - 1)
            sd = math.sqrt(max(float(variance), 0.0))
            from scipy import stats  # the driver's summaries only; workers never need it

            half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        else:
            sd, half = math.nan, math.nan
        sample = self.res_value
        q05, q50, q95 = (float(q) for q in np.quantile(sample, [0.05, 0.5, 0.95]))
        return {
            "count": float(n),
            "mean": mean,
            "sd": sd,
            "ci_low": mean - half,
            "ci_high": mean + half,
            "min": self.minimum,
            "max": self.maximum,
            "p05": q05,
            "p50": q50,
            "p95": q95,
        }

    def state(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "reservoir_size": self.reservoir_size,
            "count": self.count,
            "total": [p.hex() for p in self.total.partials],
            "total_sq": [p.hex() for p in self.total_sq.partials],
            "minimum": self.minimum.hex(),
            "maximum": self.maximum.hex(),
            "res_priority": _encode(self.res_priority.astype("<f8")),
            "res_index": _encode(self.res_index.astype("<i8")),
            "res_value": _encode(self.res_value.astype("<f8")),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MetricAccumulator:
        return cls(
            kind=MetricKind(state["kind"]),
            reservoir_size=int(state["reservoir_size"]),
            count=int(state["count"]),
            total=ExactSum(float.fromhex(p) for p in state["total"]),
            total_sq=ExactSum(float.fromhex(p) for p in state["total_sq"]),
            minimum=float.fromhex(state["minimum"]),
            maximum=float.fromhex(state["maximum"]),
            res_priority=_decode(state["res_priority"], "<f8"),
            res_index=_decode(state["res_index"], "<i8"),
            res_value=_decode(state["res_value"], "<f8"),
        )


def wilson_interval(successes: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion (95% by default)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At p = 0 (p = 1) the bound is exactly 0 (1); centre ∓ half cancels only up to rounding,
    # which left e.g. 6.9e-18 > 0 for 0 of 50 (a finite log-ratio where there is none).
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return (low, high)


class IntervalSet:
    """Disjoint half-open [start, stop) ranges of finished units, kept merged and sorted."""

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self.ranges: list[tuple[int, int]] = []
        for start, stop in ranges:
            self.add(start, stop)

    def add(self, start: int, stop: int) -> None:
        merged: list[tuple[int, int]] = []
        for a, b in self.ranges:
            if b < start or a > stop:
                merged.append((a, b))
                continue
            if max(a, start) < min(b, stop):
                raise ValueError(f"units [{start}, {stop}) overlap finished units [{a}, {b}): double counting")
            start, stop = min(a, start), max(b, stop)
        merged.append((start, stop))
        self.ranges = sorted(merged)

    def covered(self) -> int:
        return sum(b - a for a, b in self.ranges)

    def missing(self, total: int) -> list[tuple[int, int]]:
        gaps, cursor = [], 0
        for a, b in self.ranges:
            if a > cursor:
                gaps.append((cursor, a))
            cursor = max(cursor, b)
        if cursor < total:
            gaps.append((cursor, total))
        return gaps


@dataclasses.dataclass
class ConfigAggregate:
    """The merged results of some units (trials, repetitions or items) of one configuration."""

    metrics: dict[str, MetricAccumulator]
    done: IntervalSet = dataclasses.field(default_factory=IntervalSet)
    salt: int = 0
    compute_seconds: float = 0.0  # timing only; never part of results
    #: Per-unit metrics ``(index, {metric: value})`` of a ``unit_runs`` workload: the rows of the
    #: configuration's per-unit table. Merged and checkpointed with the ranges they belong to (so a
    #: resumed run ends with each unit's row exactly once), never compared (they hold timings).
    unit_records: list[tuple[int, dict[str, float]]] = dataclasses.field(default_factory=list, compare=False)
    nodes: set[str] = dataclasses.field(default_factory=set)  # Ray nodes that ran units (timing only)

    @classmethod
    def empty(cls, kinds: Mapping[str, MetricKind], *, salt: int, reservoir_size: int = DEFAULT_RESERVOIR_SIZE) -> ConfigAggregate:
        return cls(
            metrics={name: MetricAccumulator(kind=kind, reservoir_size=reservoir_size) for name, kind in kinds.items()},
            salt=salt,
        )

    def add_batch(self, values: Mapping[str, np.ndarray], indices: np.ndarray) -> None:
        for name, accumulator in self.metrics.items():
            accumulator.add(values[name], indices, self.salt)

    def merge(self, other: ConfigAggregate) -> None:
        # Check every range before changing anything: a half-merged aggregate (units marked
        # done whose metrics were never merged) would be checkpointed and skipped on resume.
        done = IntervalSet(self.done.ranges)
        for start, stop in other.done.ranges:
            done.add(start, stop)
        self.done = done
        for name, accumulator in self.metrics.items():
            accumulator.merge(other.metrics[name])
        self.compute_seconds += other.compute_seconds
        self.nodes |= other.nodes
        self.unit_records.extend(other.unit_records)

    def summary(self) -> dict[str, dict[str, float]]:
        return {name: acc.summary() for name, acc in self.metrics.items()}

    def drop_samples(self) -> None:
        """Free what a finished, logged configuration no longer needs: each metric's reservoir
        sample and the per-unit rows (both are in its logged result). Counts, sums, extremes,
        the done ranges and timing stay, so a grid's driver holds a few hundred bytes per
        finished configuration instead of its samples."""
        for accumulator in self.metrics.values():
            accumulator.res_priority = np.empty(0)
            accumulator.res_index = np.empty(0, dtype=np.int64)
            accumulator.res_value = np.empty(0)
        self.unit_records = []

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "metrics": {name: acc.state() for name, acc in self.metrics.items()},
            "done": self.done.ranges,
            "salt": self.salt,
            "compute_seconds": self.compute_seconds,
            "nodes": sorted(self.nodes),
        }
        if self.unit_records:
            state["unit_records"] = [[index, values] for index, values in self.unit_records]
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ConfigAggregate:
        return cls(
            metrics={name: MetricAccumulator.from_state(s) for name, s in state["metrics"].items()},
            done=IntervalSet(tuple(r) for r in state["done"]),
            salt=int(state["salt"]),
            compute_seconds=float(state["compute_seconds"]),
            nodes=set(state.get("nodes", [])),
            unit_records=[(int(index), dict(values)) for index, values in state.get("unit_records", [])],
        )
