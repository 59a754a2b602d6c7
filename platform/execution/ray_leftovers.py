"""Clean up what a dead privlab run left of its private local Ray instance.

Each run that starts a private Ray instance gives it a temporary folder ``privlab-ray-*`` (in
``/tmp``: Ray's unix socket paths must stay short; mode 0700, Ray's own files go in a subfolder)
and writes ``owner.json`` there with the driver's PID and process start time. A driver killed with
SIGKILL cannot stop its instance: its raylet, GCS server and workers exit soon after, but Ray's
dashboard agent and runtime-env agent (about 210 MB) keep running for minutes, waiting on the dead
GCS. The next run calls :func:`clean_up_dead_runs` before starting Ray: for every such folder of
this user whose owner is gone (no process with that PID, or one with another start time, i.e. a
reused PID), this user's processes that use the folder are terminated (SIGTERM, then SIGKILL
after a grace period) and the folder is removed. A process uses the folder when its command line
names it or it holds a file in it open: the agents rename themselves (``ray::DashboardAgent``), so
only their open log files tie them to their folder. Folders of live runs are never touched;
folders without ``owner.json`` are left alone unless no process uses them and they are older than
a day.

Linux only (``/proc``); elsewhere nothing is done.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "privlab-ray-"
OWNER_FILE = "owner.json"
RAY_SUBFOLDER = "ray"
UNOWNED_AGE_SECONDS = 24 * 3600.0


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after it follow the last ')'.
    return int(stat.rsplit(")", 1)[1].split()[19])


def ray_temp_dir(folder: str | os.PathLike[str]) -> str:
    """Ray's temp dir inside a run's private folder: Ray makes the temp dir it is given 0777."""
    return os.path.join(folder, RAY_SUBFOLDER)


def write_owner(folder: str | os.PathLike[str], pid: int | None = None) -> None:
    """Record the running driver as the owner of ``folder``."""
    pid = os.getpid() if pid is None else pid
    (Path(folder) / OWNER_FILE).write_text(json.dumps({"pid": pid, "start": process_start_time(pid)}))


def _owner_alive(folder: Path) -> bool | None:
    """True/False for a folder with an owner record; None when it has none (or an unreadable one)."""
    try:
        owner = json.loads((folder / OWNER_FILE).read_text())
        pid, start = int(owner["pid"]), owner["start"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    current = process_start_time(pid)
    return current is not None and (start is None or current == start)


def _processes_using(folder: Path) -> list[int]:
    """This user's processes that name ``folder`` on their command line or hold a file in it open."""
    path = str(folder)
    named = re.compile(re.escape(path.encode()) + rb"(?:/|\x00|$)")
    uid = os.getuid()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            if named.search((entry / "cmdline").read_bytes()) or _has_open_file_in(entry, path):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _has_open_file_in(process: Path, folder: str) -> bool:
    try:
        descriptors = list((process / "fd").iterdir())
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target == folder or target.startswith(folder + "/"):
            return True
    return False


def _terminate(pids: Iterable[int], *, grace_seconds: float) -> None:
    pids = list(pids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace_seconds
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if process_start_time(pid) is not None and _state(pid) != "Z"]
        if pids:
            time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def clean_up_dead_runs(root: str | os.PathLike[str] = "/tmp", *, grace_seconds: float = 3.0) -> list[Path]:
    """Stop the Ray processes of dead privlab runs and remove their folders; the folders removed.

    Args:
        root: Where the ``privlab-ray-*`` folders are.
        grace_seconds: How long processes get to exit after SIGTERM before SIGKILL.
    """
    if not Path("/proc/self/stat").exists():
        return []
    removed = []
    for folder in sorted(Path(root).glob(f"{PREFIX}*")):
        if not folder.is_dir() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
            continue
        alive = _owner_alive(folder)
        if alive:
            continue
        users = _processes_using(folder)
        if alive is None and (users or time.time() - folder.stat().st_mtime < UNOWNED_AGE_SECONDS):
            continue
        if users:
            log.warning("stopping %d Ray process(es) left by a dead privlab run in %s", len(users), folder)
            _terminate(users, grace_seconds=grace_seconds)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
