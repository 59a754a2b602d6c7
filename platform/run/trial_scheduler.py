"""Scheduling trial ranges on the backend: batch sizing, backpressure and ``--max-units``.

Configurations of the ``grid`` and ``trials`` patterns are cut into ranges of trials, submitted
with at most ``max_in_flight_per_worker`` ranges per worker in flight (backpressure). Batch sizing
is adaptive: a short pilot batch per worker and cost class (a study's configurations of about
equal cost per unit, ``Workload.cost_class``), then batches sized to take about
``target_task_seconds``, but small enough to keep every worker busy to the end. Sizing never
changes results, because aggregation is exact and order-free
(:mod:`privlab.platform.execution.aggregation`) and every trial has its own seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

from privlab.platform.core.errors import ExecutionError, PrivlabError
from privlab.platform.execution.aggregation import ConfigAggregate
from privlab.platform.execution.backends import Backend
from privlab.platform.execution.progress import UnitCosts
from privlab.platform.experiment.spec import ExecutionSpec
from privlab.platform.run.configuration_state import ConfigState
from privlab.platform.run.run_events import RunEvents

PILOT_UNITS = 4


class UnitLimit:
    """``--max-units``: how many units of work the run does before it stops (resumable)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.units_seen = 0

    def count(self, units: int) -> None:
        self.units_seen += units

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.units_seen >= self.limit

    def allowance(self, in_flight: int) -> int | None:
        """How many more units may be submitted with ``in_flight`` still running (None: no limit)."""
        return None if self.limit is None else self.limit - self.units_seen - in_flight


class TrialScheduler:
    """Runs the trial ranges of some configurations on ``backend`` until all are merged.

    Args:
        backend: Where ranges run.
        execution: The spec's ``[execution]`` settings.
        limit: The run's ``--max-units``; no batch crosses it.
        events: Told of every merged range and every round of results.
    """

    def __init__(self, backend: Backend, execution: ExecutionSpec, limit: UnitLimit, *, events: RunEvents) -> None:
        self.backend = backend
        self.execution = execution
        self.limit = limit
        self.events = events
        self.seconds_per_unit = UnitCosts()  # cost class → measured compute seconds per unit
        self.pilots: dict[str, int] = {}  # cost class → pilot batches submitted
        self.in_flight: dict[Any, tuple[ConfigState, int, int]] = {}
        self.unsubmitted = 0  # units in the queued configurations' cursors, kept as ranges are cut

    def run(self, states: Iterable[ConfigState], *, units: int) -> None:
        """Run every range of ``states`` (taken one at a time, as ranges are needed: a state may
        be built when it is reached) holding ``units`` units not yet submitted in all."""
        queue = _Queue(iter(states))
        self.unsubmitted = units
        capacity = self.backend.workers * self.execution.max_in_flight_per_worker
        in_flight = self.in_flight
        try:
            while True:
                while len(in_flight) < capacity:
                    unit = self._next_range(queue)
                    if unit is None:
                        break
                    state, start, end = unit
                    if state.started is None:
                        state.started = time.perf_counter()
                    handle = self.backend.submit_trials(state.context, start, end, state.data_ref)
                    in_flight[handle] = unit
                if not in_flight:
                    break
                for handle in self.backend.wait(list(in_flight), timeout=1.0):
                    state, start, end = in_flight.pop(handle)
                    result = self._result(handle, state, start, end)
                    self.seconds_per_unit.measure(state.cost_class,
                                                  max(result.compute_seconds / max(end - start, 1), 1e-7))
                    state.aggregate.merge(result)
                    self.events.range_merged(state, result, end - start)
                self.events.round_finished()
        finally:
            self.backend.cancel(list(in_flight))
            for state, start, end in in_flight.values():
                # Ranges that did not come back are submitted again on resume.
                state.cursor.insert(0, (start, end))

    def _next_range(self, queue: _Queue) -> tuple[ConfigState, int, int] | None:
        """The next range to submit, cut from the first queued configuration with units left
        (None: nothing may be submitted now). Constant time per range, whatever the number of
        configurations: a grid of 10⁵ configurations is 10⁵ ranges or more."""
        while (state := queue.head()) is not None:
            if not state.cursor:
                queue.pop()
                continue
            start, stop = state.cursor[0]
            size = self._batch_size(state)
            if size is None:
                return None
            allowance = self.limit.allowance(sum(e - s for _, s, e in self.in_flight.values()))
            if allowance is not None:  # no batch may cross --max-units: stop after exactly that many
                if allowance <= 0:
                    return None
                size = min(size, allowance)
            end = min(stop, start + size)
            if end == stop:
                state.cursor.pop(0)
            else:
                state.cursor[0] = (end, stop)
            self.unsubmitted -= end - start
            return state, start, end
        return None

    def _batch_size(self, state: ConfigState) -> int | None:
        execution = self.execution
        if execution.batch_size is not None:
            return execution.batch_size
        cost_class = state.cost_class
        if cost_class not in self.seconds_per_unit:
            # Pilot batches measure the cost of a unit; at most one per worker until one returns.
            if self.pilots.get(cost_class, 0) >= self.backend.workers:
                return None
            self.pilots[cost_class] = self.pilots.get(cost_class, 0) + 1
            return PILOT_UNITS
        size = max(1, int(execution.target_task_seconds / self.seconds_per_unit[cost_class]))
        balance = max(1, math.ceil(self.unsubmitted / (self.backend.workers * 4)))
        return min(size, balance)

    def _result(self, handle: Any, state: ConfigState, start: int, end: int) -> ConfigAggregate:
        try:
            return self.backend.result(handle)  # type: ignore[no-any-return]
        except PrivlabError:
            raise
        except Exception as error:
            raise ExecutionError(
                f"{state.config.id} units [{start}, {end}) failed: {type(error).__name__}: {error}"
            ) from error


class _Queue:
    """The configurations still to cut ranges from, taken from an iterator one at a time."""

    def __init__(self, states: Iterator[ConfigState]) -> None:
        self.states = states
        self.first: ConfigState | None = None

    def head(self) -> ConfigState | None:
        if self.first is None:
            self.first = next(self.states, None)
        return self.first

    def pop(self) -> None:
        self.first = None
