"""What a worker executes: a range of trials of one configuration, or one actor-pool item.

These are pure functions of their arguments (the root seed travels inside the unit), so they
give the same result in-process, in a Ray task on any node, and on a retry after a worker
died. Every trial's ledger is checked against the workload's declared plan: a mechanism
that charges anything other than what it declared is an error, not a silent difference.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privlab.platform.core.errors import ExecutionError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import check_conforms
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.dp.seeding import stable_key, trial_generator
from privlab.platform.execution.aggregation import ConfigAggregate
from privlab.platform.experiment import registry
from privlab.platform.experiment.datasets import GeneratedDataset

STATE_STREAM = 2**62  # trial index reserved for the actor-pool state of a configuration
ITEMS_STREAM = 2**62 + 1  # trial index reserved for the driver's item stream


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnitContext:
    """Everything about a configuration a worker needs, shipped once per unit."""

    config_id: str
    workload: str
    params: Mapping[str, Any]
    dataset: GeneratedDataset | None
    dataset_params: Mapping[str, Any]
    metric_kinds: Mapping[str, registry.MetricKind]
    root_seed: int
    study_key: int
    config_key: int
    ledger_template: Ledger

    @functools.cached_property
    def workload_params(self) -> Any:
        """The workload's ``Params`` built from ``params``: once per context object."""
        workload = registry.get_workload(self.workload)
        return registry.build_params(workload.Params, self.params, where=self.config_id)

    def __getstate__(self) -> dict[str, Any]:
        # A unit ships the parameters as given; each process builds them once from those.
        return {k: v for k, v in self.__dict__.items() if k != "workload_params"}

    @property
    def salt(self) -> int:
        return stable_key("reservoir", self.root_seed, self.study_key, self.config_key)

    def empty_aggregate(self) -> ConfigAggregate:
        return ConfigAggregate.empty(self.metric_kinds, salt=self.salt)

    def generator(self, index: int) -> np.random.Generator:
        return trial_generator(self.root_seed, self.study_key, self.config_key, index)


def run_trial_range(context: UnitContext, start: int, stop: int, data: pd.DataFrame | None) -> ConfigAggregate:
    """Run trials ``start..stop-1`` of one configuration and summarise them.

    Raises:
        LedgerError: a trial charged a different privacy spend than the workload planned.
        ExecutionError: a trial returned a missing or non-finite metric.
    """
    workload = registry.get_workload(context.workload)
    params = context.workload_params
    workload.warm_up(params)  # JIT compilation and the like: once per process, never in the timed units
    began = time.perf_counter()
    plan = workload.plan(params)
    generator_fn = None
    generator_params = None
    if context.dataset is not None:
        generator = registry.get_dataset_generator(context.dataset.generator)
        generator_fn = generator.generate
        generator_params = registry.build_params(generator.Params, context.dataset_params, where="[dataset]")
    names = list(context.metric_kinds)
    values = np.empty((len(names), stop - start))
    unit_records: list[tuple[int, dict[str, float]]] = []
    for column, index in enumerate(range(start, stop)):
        rng = context.generator(index)
        trial_data = generator_fn(generator_params, rng) if generator_fn is not None else data
        ledger = context.ledger_template.fresh()
        result = workload.run_trial(params, data=trial_data, source=SeededSource(rng), ledger=ledger)
        # The plan may state the worst case of a sensitivity that a public run-time value improves.
        who = f"{context.config_id} trial {index}: workload {context.workload!r}"
        check_conforms(ledger.events, plan, who=who, exact_sensitivity=False)
        registry.check_declared_partitions(workload, params, ledger, who=who)
        for row, name in enumerate(names):
            value = result.get(name)
            if value is None or not math.isfinite(value):
                raise ExecutionError(
                    f"{context.config_id} trial {index}: workload {context.workload!r} returned "
                    f"{value!r} for metric {name!r}; metrics must be finite numbers"
                )
            values[row, column] = value
        if workload.unit_runs:
            unit_records.append((index, {name: float(result[name]) for name in names}))
    aggregate = context.empty_aggregate()
    aggregate.unit_records = unit_records
    aggregate.add_batch(dict(zip(names, values, strict=True)), np.arange(start, stop, dtype=np.int64))
    aggregate.done.add(start, stop)
    aggregate.compute_seconds = time.perf_counter() - began
    aggregate.nodes = {_node_id()}
    return aggregate


def _node_id() -> str:
    """The Ray node running this unit ("local" outside Ray); reported as timing metadata."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return str(ray.get_runtime_context().get_node_id())
    return "local"


def build_pool_state(context: UnitContext, data: pd.DataFrame | None) -> Any:
    """The actor-pool state of a configuration, drawn from its reserved stream."""
    workload = registry.get_workload(context.workload)
    params = context.workload_params
    return workload.build_state(params, data=data, rng=context.generator(STATE_STREAM))  # type: ignore[attr-defined]


def iterate_items(context: UnitContext) -> Any:
    """The configuration's item stream (lazy, driver side, deterministic)."""
    workload = registry.get_workload(context.workload)
    params = context.workload_params
    return workload.items(params, rng=context.generator(ITEMS_STREAM))  # type: ignore[attr-defined]


def process_item(context: UnitContext, state: Any, item: Any, index: int) -> tuple[dict[str, np.ndarray], float]:
    """Process item ``index`` with its own stream; returns per-record metric arrays."""
    workload = registry.get_workload(context.workload)
    params = context.workload_params
    workload.warm_up(params)  # once per process, outside the timed item
    began = time.perf_counter()
    outputs = workload.process(state, item, source=SeededSource(context.generator(index)))  # type: ignore[attr-defined]
    arrays = {}
    lengths = set()
    for name in context.metric_kinds:
        if name not in outputs:
            raise ExecutionError(f"{context.config_id} item {index}: metric {name!r} missing from the output")
        array = np.asarray(outputs[name], dtype=np.float64).ravel()
        if not np.all(np.isfinite(array)):
            raise ExecutionError(f"{context.config_id} item {index}: metric {name!r} has non-finite values")
        arrays[name] = array
        lengths.add(array.size)
    if len(lengths) > 1:
        raise ExecutionError(f"{context.config_id} item {index}: metric arrays differ in length {sorted(lengths)}")
    return arrays, time.perf_counter() - began
