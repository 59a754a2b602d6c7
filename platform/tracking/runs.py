"""The privlab runs a tracking store holds (``privlab runs``): the ids other commands take.

One line per ``privlab run`` (a parent run): its id, experiment, when it started, whether it
finished, and how many configurations it has. ``privlab ledger``, ``compare --run``, ``report``
and ``shortlist`` take these ids.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from privlab.platform.tracking.liveness import driver_state
from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import Tracker


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunRow:
    run_id: str
    experiment: str
    name: str
    started: str  # UTC, minutes
    status: str  # privlab's own (complete / interrupted / running / driver gone (resumable)), else MLflow's
    configurations: str


def list_runs(tracker: Tracker, experiment: str | None = None) -> list[RunRow]:
    """The parent runs of ``experiment`` (every experiment when None), newest first.

    Raises:
        NotFoundError: ``experiment`` does not exist (the message lists those that do).
    """
    names = [experiment] if experiment is not None else tracker.experiment_names()
    rows: list[RunRow] = []
    for name in names:
        experiment_id = tracker.require_experiment(name)
        for run in tracker.parent_runs(experiment_id):
            rows.append(_row(run, name))
    rows.sort(key=lambda r: r.started, reverse=True)
    return rows


def _row(run: Any, experiment: str) -> RunRow:
    params = run.data.params
    started = datetime.datetime.fromtimestamp(run.info.start_time / 1000, tz=datetime.UTC)
    return RunRow(
        run_id=run.info.run_id,
        experiment=experiment,
        name=RunTags.of(run).spec_name or run.info.run_name or "",
        started=started.strftime("%Y-%m-%d %H:%M UTC"),
        status=_status(run),
        configurations=params.get("configurations", ""),
    )


def _status(run: Any) -> str:
    """privlab's status tag; a run still marked running whose driver is gone (SIGKILL, a dead
    raylet, an abandoned Ctrl-C) is shown as resumable."""
    status = RunTags.of(run).status or run.info.status.lower()
    if status == "running" and run.info.status == "RUNNING" and driver_state(run.data.tags) == "gone":
        return "driver gone (resumable)"
    return status


def render_runs(rows: list[RunRow]) -> str:
    """An aligned table of ``rows`` (with a line saying there are none)."""
    if not rows:
        return "no privlab runs yet; `privlab run SPEC` starts one"
    headers = {"run id": "run_id", "experiment": "experiment", "spec": "name", "started": "started",
               "status": "status", "configurations": "configurations"}
    cells = [[str(getattr(r, field)) for field in headers.values()] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)
