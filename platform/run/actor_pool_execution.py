"""Running an ``actor_pool`` configuration: a large state put once, items streamed to actors.

The configuration's state is built once (from its reserved stream) and put in the object store;
a pool of actors, one per worker, holds it. The driver draws the deterministic item stream and
gives each item to the least-loaded actor, at most ``max_in_flight_per_worker`` per actor. Results
are merged in item order, whatever order they finished in, so the aggregate does not depend on
scheduling; on resume the items already merged are skipped.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from privlab.platform.core.errors import ExecutionError
from privlab.platform.execution.backends import Backend
from privlab.platform.execution.worker_tasks import build_pool_state, iterate_items
from privlab.platform.run.configuration_state import ConfigState
from privlab.platform.run.run_events import RunEvents


def run_actor_pool(state: ConfigState, backend: Backend, *, per_actor: int, events: RunEvents) -> None:
    """Process every item of ``state``'s configuration not merged yet.

    Args:
        state: The configuration (its aggregate receives the items' metric arrays).
        backend: Where the actors run.
        per_actor: Items in flight per actor at most.
        events: Told of every merged item and every round of results.

    Raises:
        ExecutionError: The item stream's length differs from the workload's ``item_count()``.
    """
    context = state.context
    state.started = time.perf_counter()
    data = None
    if state.data_ref is not None:
        data = backend.get(state.data_ref)
    state_ref = backend.put(build_pool_state(context, data))
    actors = backend.create_pool(backend.workers)
    load = {i: 0 for i in range(len(actors))}
    done_items = state.aggregate.done.covered()
    next_emit = done_items
    offset = int(max((acc.count for acc in state.aggregate.metrics.values()), default=0))
    items = iterate_items(context)
    for _ in range(done_items):  # the stream is deterministic: skip what is already merged
        next(items)
    index = done_items
    exhausted = index >= state.config.units
    in_flight: dict[Any, int] = {}
    buffer: dict[int, tuple[dict[str, Any], float]] = {}
    try:
        while True:
            while not exhausted:
                actor_id = min(load, key=load.__getitem__)
                if load[actor_id] >= per_actor:
                    break
                try:
                    item = next(items)
                except StopIteration:
                    exhausted = True
                    break
                handle = backend.submit_item(actors[actor_id], context, state_ref, item, index)
                in_flight[handle] = actor_id
                load[actor_id] += 1
                index += 1
                exhausted = exhausted or index >= state.config.units
            if not in_flight:
                break
            for handle in backend.wait(list(in_flight), timeout=1.0):
                actor_id = in_flight.pop(handle)
                load[actor_id] -= 1
                item_index, arrays, seconds = backend.result(handle)
                buffer[item_index] = (arrays, seconds)
            while next_emit in buffer:
                arrays, seconds = buffer.pop(next_emit)
                length = len(next(iter(arrays.values()))) if arrays else 0
                state.aggregate.add_batch(arrays, offset + np.arange(length, dtype=np.int64))
                state.aggregate.done.add(next_emit, next_emit + 1)
                state.aggregate.compute_seconds += seconds
                offset += length
                next_emit += 1
                events.item_merged(state, seconds)
            events.round_finished()
    finally:
        backend.cancel(list(in_flight))
        backend.release_pool(actors)
    if next_emit != state.config.units:
        raise ExecutionError(
            f"{state.config.id}: the workload's item stream yielded {next_emit} items but item_count() "
            f"declared {state.config.units}"
        )
