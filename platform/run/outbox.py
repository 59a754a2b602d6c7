"""A run's outbox: what it computed while its tracking server was gone, kept for the resume.

When the tracking server stays unreachable past ``[tracking] outage_wait_s``
(:mod:`privlab.platform.tracking.tracking_outage`), the driver stops and writes one file,
``STATE/outbox/RUN_ID.json``, holding

- the result runs (finished configurations, units) that never got through, whole, with how far
  each got (:class:`~privlab.platform.tracking.tracker.ResultRunUpload`), and
- a checkpoint of the configurations still running, in the parent's checkpoint format
  (:mod:`privlab.platform.run.checkpoints`), stamped with the time it was taken.

``privlab run SPEC --resume RUN_ID`` on the same machine sends the held-back runs (skipping any
configuration the store already holds as finished), puts the checkpoint on the parent run when
it is newer than the one there, says what the outage held back, and removes the file. Nothing
computed is lost and nothing is logged twice.

``STATE`` is ``$PRIVLAB_STATE_DIR``, else ``$XDG_STATE_HOME/privlab``, else
``~/.local/state/privlab``. The folder is the user's alone (0700, files 0600), and a file is
written whole (to a temporary name, then renamed) or not at all.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import TrackingError
from privlab.platform.run.checkpoints import read_checkpoint, write_checkpoint
from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import ResultRunUpload, Tracker

log = logging.getLogger(__name__)


def state_dir() -> Path:
    """Where privlab keeps per-user state that must outlive a run."""
    if explicit := os.environ.get("PRIVLAB_STATE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "privlab"


def outbox_path(run_id: str) -> Path:
    return state_dir() / "outbox" / f"{run_id}.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeldBack:
    """What an outage kept from the tracking store for run ``run_id``."""

    run_id: str
    tracking_uri: str
    uploads: list[ResultRunUpload]
    checkpoint: dict[str, Any] | None

    @property
    def path(self) -> Path:
        return outbox_path(self.run_id)

    def describe(self) -> str:
        """What is kept, counted as a user counts it: finished configurations (a facetted one logs
        several runs under one id), unit runs, and the configurations with partial results in
        the checkpoint; a kind with none is not named."""
        runs = [u for u in self.uploads if u.kind == "configuration"]
        finished = len({u.config_id for u in runs})
        units = len(self.uploads) - len(runs)
        partial = len((self.checkpoint or {}).get("partial", {}))
        parts = []
        if finished:
            extra = f" ({len(runs)} runs)" if len(runs) != finished else ""
            parts.append(f"the results of {finished} finished configuration(s){extra}")
        if units:
            parts.append(f"{units} unit run(s)")
        if partial:
            parts.append(f"the partial results of {partial} unfinished configuration(s)")
        if not parts:
            return "the run's checkpoint (every finished configuration was logged)"
        return ", ".join(parts)


def keep(held: HeldBack) -> Path:
    """Write ``held`` to its outbox file (whole or not at all); returns the path."""
    path = held.path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.chmod(0o700)
    payload = {"run_id": held.run_id, "tracking_uri": held.tracking_uri,
               "uploads": [u.to_record() for u in held.uploads], "checkpoint": held.checkpoint}
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{held.run_id}.", suffix=".partial")
    try:
        with os.fdopen(handle, "w") as stream:  # mkstemp: mode 0600
            json.dump(payload, stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def held_back(run_id: str) -> HeldBack | None:
    """The outbox of ``run_id`` (None when it has none).

    Raises:
        TrackingError: the file exists but cannot be read (it is left in place).
    """
    path = outbox_path(run_id)
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text())
        return HeldBack(run_id=payload["run_id"], tracking_uri=payload["tracking_uri"],
                        uploads=[ResultRunUpload.from_record(r) for r in payload["uploads"]],
                        checkpoint=payload["checkpoint"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TrackingError(f"the outbox of run {run_id} at {path} cannot be read ({error}); it holds what an "
                            "outage of the tracking server kept back. Move it aside to resume without it "
                            "(that work is then computed again)") from None


def newer_checkpoint(kept: Mapping[str, Any] | None, logged: Mapping[str, Any] | None) -> bool:
    """Whether the outbox's checkpoint ``kept`` is newer than the parent run's ``logged`` one."""
    if kept is None:
        return False
    return logged is None or float(kept.get("saved_at", 0.0)) > float(logged.get("saved_at", 0.0))


def send_held_back(tracker: Tracker, experiment_id: str, run_id: str) -> HeldBack | None:
    """On resume: log what an outage held back for ``run_id`` and remove its outbox; returns
    what was held back (None when nothing was).

    A configuration the store already holds as a finished run is not sent again, and the kept
    checkpoint replaces the parent's only when it is newer. If sending fails, the outbox stays
    for the next resume.
    """
    held = held_back(run_id)
    if held is None:
        return None
    finished = {RunTags.of(run).config_id for run in tracker.configuration_runs(experiment_id, run_id)}
    for upload in held.uploads:
        if upload.kind == "configuration" and upload.config_id in finished:
            continue
        tracker.send(upload)
    if newer_checkpoint(held.checkpoint, read_checkpoint(tracker, run_id)):
        write_checkpoint(tracker, run_id, held.checkpoint or {})
    held.path.unlink()
    log.warning("run %s: logged what the tracking outage of its last session held back (%s) from %s",
                run_id, held.describe(), held.path)
    return held
