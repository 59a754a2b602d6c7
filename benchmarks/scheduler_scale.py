"""The trial scheduler's own cost per configuration in grids of 10⁴–10⁵ configurations.

A grid's driver cuts every configuration's trials into ranges and keeps every worker busy; its
work per range must not grow with the grid, or a 10⁵-configuration grid is paced by the driver's
bookkeeping rather than by the workers. The scheduler runs here against an in-process backend
whose ranges finish at once (no Ray, no trials), so what is timed is the scheduler alone:
queueing, batch sizing, merging each range's (empty) aggregate.

The obvious baseline sizes each batch from the units left in the queue by summing the queued
configurations' ranges at every decision (what the scheduler did before it kept that count as it
cut ranges): one pass over the queue per range, quadratic in the grid.

    python benchmarks/scheduler_scale.py

Lines: ``scheduler_microseconds_per_configuration_100k`` (10⁵ configurations of 100 units, 2
workers), ``scheduler_microseconds_per_configuration_10k``, and
``scheduler_speedup_vs_rescan_20k`` (the baseline's time / ours at 2·10⁴ configurations, both
measured in this run).
"""

from __future__ import annotations

import os
import time
import types
from typing import Any

from privlab.platform.execution.aggregation import ConfigAggregate, IntervalSet
from privlab.platform.experiment.spec import ExecutionSpec
from privlab.platform.run.configuration_state import ConfigState
from privlab.platform.run.trial_scheduler import TrialScheduler, UnitLimit

UNITS = 100


class InstantBackend:
    """Two workers whose ranges are done the moment they are submitted."""

    workers = 2

    def __init__(self) -> None:
        self.submitted: dict[int, tuple[int, int]] = {}

    def submit_trials(self, context: Any, start: int, stop: int, data: Any) -> int:
        handle = len(self.submitted) + 1
        self.submitted[handle] = (start, stop)
        return handle

    def wait(self, handles: list[int], timeout: float) -> list[int]:
        return list(handles)

    def result(self, handle: int) -> ConfigAggregate:
        start, stop = self.submitted[handle]
        return ConfigAggregate(metrics={}, done=IntervalSet([(start, stop)]), compute_seconds=(stop - start) * 1e-3)

    def cancel(self, handles: list[int]) -> None:
        pass


class NoEvents:
    def range_merged(self, state: ConfigState, result: ConfigAggregate, units: int) -> None:
        pass

    def item_merged(self, state: ConfigState, seconds: float) -> None:
        pass

    def round_finished(self) -> None:
        pass


class RescanScheduler(TrialScheduler):
    """The baseline: the units left are summed over the queue at every batch-size decision."""

    def run(self, states: list[ConfigState], *, units: int) -> None:
        self.queued = states
        super().run(states, units=units)

    def _batch_size(self, state: ConfigState) -> int | None:
        self.unsubmitted = sum(b - a for s in self.queued for a, b in s.cursor)
        return super()._batch_size(state)


def grid_states(configurations: int) -> list[ConfigState]:
    states = []
    for i in range(configurations):
        config = types.SimpleNamespace(id=f"grid-{i}", units=UNITS)
        state = ConfigState(config=config, context=None, aggregate=ConfigAggregate(metrics={}), ledger=None,
                            cost_class="grid")
        state.cursor = [(0, UNITS)]
        states.append(state)
    return states


def seconds(scheduler_class: type[TrialScheduler], configurations: int) -> float:
    states = grid_states(configurations)
    scheduler = scheduler_class(InstantBackend(), ExecutionSpec(), UnitLimit(None), events=NoEvents())
    began = time.perf_counter()
    scheduler.run(states, units=configurations * UNITS)
    elapsed = time.perf_counter() - began
    assert all(s.aggregate.done.covered() == UNITS and not s.cursor for s in states), "a unit was not run"
    return elapsed


def main() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    per_configuration = {}
    for configurations in (10_000, 100_000):
        took = seconds(TrialScheduler, configurations)
        print(f"  {configurations:,} configurations of {UNITS} units: {took:.2f} s", flush=True)
        per_configuration[configurations] = took / configurations * 1e6
    ours = seconds(TrialScheduler, 20_000)
    baseline = seconds(RescanScheduler, 20_000)
    print(f"  20,000 configurations: {ours:.2f} s, the rescanning baseline {baseline:.2f} s", flush=True)
    print(f"scheduler_microseconds_per_configuration_10k: {per_configuration[10_000]:.3g}")
    print(f"scheduler_microseconds_per_configuration_100k: {per_configuration[100_000]:.3g}")
    print(f"scheduler_speedup_vs_rescan_20k: {baseline / ours:.3g}")
    print(f"load_average_1min: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
