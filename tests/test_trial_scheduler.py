"""The trial scheduler against an in-process backend whose ranges finish at once.

What it must keep: every unit of every configuration is submitted exactly once; after the pilot
batches, a batch takes about ``target_task_seconds`` but at most a quarter of a worker's share of
the units not yet submitted (so every worker stays busy to the end); ``--max-units`` stops it after
exactly that many units. The count of units not yet submitted is kept as ranges are cut, not
summed over the queue (one pass per range would make a 10⁵-configuration grid quadratic:
``benchmarks/scheduler_scale.py``); these tests hold the kept count to the sum.
"""

from __future__ import annotations

import math
import types
from typing import Any

from privlab.platform.execution.aggregation import ConfigAggregate, IntervalSet
from privlab.platform.experiment.spec import ExecutionSpec
from privlab.platform.run.configuration_state import ConfigState
from privlab.platform.run.trial_scheduler import PILOT_UNITS, TrialScheduler, UnitLimit

SECONDS_PER_UNIT = 0.004  # every range reports this much compute per unit
UNITS = [1, 50, 300, 4, 1000, 2, 64, 733]


class InstantBackend:
    workers = 2

    def __init__(self) -> None:
        self.submitted: list[tuple[str, int, int]] = []

    def submit_trials(self, context: Any, start: int, stop: int, data: Any) -> int:
        self.submitted.append((context, start, stop))
        return len(self.submitted) - 1

    def wait(self, handles: list[int], timeout: float) -> list[int]:
        return list(handles)

    def result(self, handle: int) -> ConfigAggregate:
        _, start, stop = self.submitted[handle]
        return ConfigAggregate(metrics={}, done=IntervalSet([(start, stop)]),
                               compute_seconds=(stop - start) * SECONDS_PER_UNIT)

    def cancel(self, handles: list[int]) -> None:
        pass


class CountingEvents:
    """Counts merged units, and tells ``limit`` of them as the run's driver does."""

    def __init__(self, limit: UnitLimit) -> None:
        self.limit = limit
        self.merged = 0

    def range_merged(self, state: ConfigState, result: ConfigAggregate, units: int) -> None:
        self.merged += units
        self.limit.count(units)

    def item_merged(self, state: ConfigState, seconds: float) -> None:
        raise AssertionError("no actor-pool items here")

    def round_finished(self) -> None:
        pass


class CheckedScheduler(TrialScheduler):
    """Records each batch-size decision with the units left, recounted from the states."""

    def __init__(self, *args: Any, states: list[ConfigState], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.states = states
        self.decisions: list[tuple[int, int | None]] = []

    def _batch_size(self, state: ConfigState) -> int | None:
        left = sum(b - a for s in self.states for a, b in s.cursor)
        assert self.unsubmitted == left, (self.unsubmitted, left)
        size = super()._batch_size(state)
        self.decisions.append((left, size))
        return size


def _states() -> list[ConfigState]:
    states = []
    for i, units in enumerate(UNITS):
        config = types.SimpleNamespace(id=f"c{i}", units=units)
        state = ConfigState(config=config, context=config.id, aggregate=ConfigAggregate(metrics={}), ledger=None,
                            cost_class="one")
        state.cursor = [(0, units)]
        states.append(state)
    return states


def _run(limit: int | None = None) -> tuple[list[ConfigState], CheckedScheduler, CountingEvents]:
    states = _states()
    unit_limit = UnitLimit(limit)
    events = CountingEvents(unit_limit)
    scheduler = CheckedScheduler(InstantBackend(), ExecutionSpec(target_task_seconds=0.2), unit_limit,
                                 events=events, states=states)
    scheduler.run(iter(states), units=sum(UNITS))  # states taken one at a time, as the runner builds them
    return states, scheduler, events


def test_every_unit_is_submitted_once_and_each_batch_is_sized_from_the_units_left() -> None:
    states, scheduler, events = _run()
    for state, units in zip(states, UNITS):
        assert state.aggregate.done.ranges == [(0, units)] and not state.cursor  # overlaps would have raised
    assert events.merged == sum(UNITS) and scheduler.unsubmitted == 0
    pilots = [size for _, size in scheduler.decisions[:2]]
    assert pilots == [PILOT_UNITS, PILOT_UNITS]
    sized = [(left, size) for left, size in scheduler.decisions[2:] if size is not None]
    assert len(sized) > 10
    for left, size in sized:  # 0.2 s at 0.004 s a unit is 50 units, less near the end
        assert size == min(50, max(1, math.ceil(left / (2 * 4))))
    assert any(size < 50 for _, size in sized) and any(size == 50 for _, size in sized)


def test_max_units_stops_after_exactly_that_many_units() -> None:
    states, scheduler, events = _run(limit=777)
    assert events.merged == 777 == sum(s.aggregate.done.covered() for s in states)
    assert scheduler.unsubmitted == sum(UNITS) - 777
