"""Checkpoints of a ``privlab run``: the partial aggregates of its unfinished configurations.

Written as an artifact of the parent run every ``checkpoint_interval_s`` (and on a stop), each
time with a heartbeat of the driver's lease; a resume reads the last one back. Configurations
already finished are not in it: their child runs hold their results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from privlab.platform.run.configuration_state import ConfigState
from privlab.platform.tracking.background_writer import BackgroundWriter
from privlab.platform.tracking.tracker import Tracker

CHECKPOINT_PATH = "checkpoint/checkpoint.json"


class Checkpointer:
    """Saves checkpoints through ``writer`` (in the background), at most every ``interval_s``."""

    def __init__(self, tracker: Tracker, writer: BackgroundWriter, *, interval_s: float) -> None:
        self.tracker = tracker
        self.writer = writer
        self.interval_s = interval_s
        self.last = time.perf_counter()

    def save(
        self,
        run_id: str,
        *,
        spec_sha256: str,
        root_seed: int,
        states: Mapping[str, ConfigState],
        completed: Iterable[str],
        force: bool = False,
    ) -> None:
        """Checkpoint the unfinished ``states`` (unless the last one is recent and not ``force``)."""
        now = time.perf_counter()
        if not force and now - self.last < self.interval_s:
            return
        self.last = now
        text = json.dumps(checkpoint_payload(spec_sha256=spec_sha256, root_seed=root_seed, states=states,
                                             completed=completed))
        self.writer.submit(lambda: self.tracker.log_texts(run_id, {CHECKPOINT_PATH: text}))
        self.writer.submit(lambda: self.tracker.heartbeat(run_id))


def checkpoint_payload(
    *, spec_sha256: str, root_seed: int, states: Mapping[str, ConfigState], completed: Iterable[str],
) -> dict[str, Any]:
    """A checkpoint of the unfinished ``states``, stamped with the time it was taken."""
    partial = {
        cid: s.aggregate.state() for cid, s in states.items()
        if not s.finished and s.aggregate.done.covered() > 0
    }
    return {"spec_sha256": spec_sha256, "root_seed": root_seed, "partial": partial,
            "completed": sorted(completed), "saved_at": time.time()}


def write_checkpoint(tracker: Tracker, run_id: str, payload: Mapping[str, Any]) -> None:
    tracker.log_texts(run_id, {CHECKPOINT_PATH: json.dumps(payload)})


def read_checkpoint(tracker: Tracker, run_id: str) -> dict[str, Any] | None:
    """The run's last checkpoint (None when it has none)."""
    text = tracker.read_text(run_id, CHECKPOINT_PATH)
    return json.loads(text) if text else None
