"""Who drives a run: a lease on the parent run, a heartbeat, and whether the driver is gone.

A ``privlab run`` parent run records its driver in the tag :data:`DRIVER_TAG` (host, PID, the
PID's start time and a random lease id) and refreshes :data:`HEARTBEAT_TAG` (UNIX seconds) at
every checkpoint. From these, :func:`driver_state` tells a live driver from a gone one:

- on the driver's own host the answer is exact: the PID exists and started at the recorded
  time (a reused PID has another start time);
- from another host only the heartbeat can tell: a driver whose heartbeat is older than
  :data:`STALE_SECONDS` (several checkpoint intervals, and longer than any pause a healthy
  driver makes) is taken to be gone.

A resume (:func:`take_over`) takes the lease under the store's lock, so two resumes started
together cannot both proceed: the second sees the first's lease and is refused, as is a resume
of a finished run or of one whose driver is still alive. A driver killed with SIGKILL, a dead
raylet or an abandoned Ctrl-C leaves its parent RUNNING; ``privlab runs`` shows it as
"driver gone (resumable)".
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import ExecutionError
from privlab.platform.tracking.run_tags import DRIVER_TAG, HEARTBEAT_TAG, STATUS_TAG
from privlab.platform.tracking.store_location import store_lock
from privlab.platform.tracking.tracker import Tracker

#: A heartbeat older than this (seconds) means the driver is gone, when its host cannot be asked.
STALE_SECONDS = 600.0


def _process_start_ticks(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces; fields after it are plain.
    return stat.rsplit(")", 1)[1].split()[19]


def this_driver() -> dict[str, Any]:
    """The lease this process takes: host, PID, the PID's start time and a fresh lease id."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_start": _process_start_ticks(pid),
            "lease": uuid.uuid4().hex}


def driver_state(tags: Mapping[str, str], *, now: float | None = None) -> str:
    """``"live"``, ``"gone"`` or ``"unknown"`` (a run from before leases were recorded)."""
    text = tags.get(DRIVER_TAG)
    if not text:
        return "unknown"
    try:
        driver = json.loads(text)
        host, pid = driver["host"], int(driver["pid"])
    except (ValueError, KeyError, TypeError):
        return "unknown"
    if host == socket.gethostname():
        started = _process_start_ticks(pid)
        return "live" if started is not None and started == driver.get("pid_start") else "gone"
    try:
        beat = float(tags.get(HEARTBEAT_TAG, "nan"))
    except ValueError:
        return "unknown"
    if beat != beat:  # NaN: no heartbeat recorded
        return "unknown"
    return "gone" if (time.time() if now is None else now) - beat > STALE_SECONDS else "live"


def refuse_reason(run_id: str, tags: Mapping[str, str], *, now: float | None = None) -> str | None:
    """Why ``run_id`` (with ``tags``) cannot be resumed now, or None if it can."""
    if tags.get(STATUS_TAG) == "complete":
        return (f"run {run_id} already finished; there is nothing to resume. `privlab compare` shows its "
                "results; start a new run for new ones")
    if driver_state(tags, now=now) == "live":
        driver = json.loads(tags[DRIVER_TAG])
        return (f"run {run_id} is being driven right now (PID {driver['pid']} on {driver['host']}); a second "
                "driver would log every configuration twice. Wait for it to finish, or stop it (Ctrl-C) and "
                "resume then")
    return None


def take_over(tracker: Tracker, run_id: str, driver: Mapping[str, Any]) -> None:
    """Take the lease on a run being resumed, for ``driver``.

    Checked and taken under the store's lock, then read back: with a tracking server (no
    lock) two resumes may both write, and only the one whose lease stayed recorded goes on.

    Raises:
        ExecutionError: The run finished, or another driver holds it.
    """
    with store_lock(tracker.uri):
        reason = refuse_reason(run_id, tracker.get_run(run_id).data.tags)
        if reason is not None:
            raise ExecutionError(reason)
        tracker.claim_parent_run(run_id, driver)
    if tracker.lease(run_id) != driver["lease"]:
        raise ExecutionError(refuse_reason(run_id, tracker.get_run(run_id).data.tags)
                             or f"run {run_id} was taken over by another driver while this one started")
