"""A local cluster's state file and processes: written atomically under a lock, and stopped only
where a process provably belongs to the cluster (:mod:`.local_cluster` starts them)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from privlab.platform.core.errors import ExecutionError

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"


TOKEN_FILE = "auth_token"


MARKER_ENV = "PRIVLAB_LOCAL_CLUSTER_ID"


STATE_VERSION = 1


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    with open(state_dir / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_state(state_dir: Path, state: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".cluster-", suffix=".json", dir=state_dir)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(state, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, state_dir / STATE_FILE)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_state(state_dir: Path) -> dict | None:
    try:
        state = json.loads((state_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ExecutionError(f"{state_dir / STATE_FILE} is unreadable ({error}); inspect or delete it") from error
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise ExecutionError(f"{state_dir / STATE_FILE} was not written by this version of privlab; "
                             "stop that cluster by its PIDs and delete the file")
    return state


def discard_state(state_dir: Path, state: dict) -> None:
    for name in (STATE_FILE, TOKEN_FILE):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / name).unlink()
    if state.get("temp_dir_owned"):
        shutil.rmtree(state.get("temp_dir_root") or state["temp_dir"], ignore_errors=True)


def _proc_state(pid: int) -> str | None:
    """The one-letter state of a process, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return "?"
    return stat[stat.rfind(")") + 2 :][:1]


def _is_running(pid: int) -> bool:
    return _proc_state(pid) not in (None, "Z", "X")


def _has_marker(pid: int, cluster_id: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={cluster_id}".encode() in environ.split(b"\0")


def _names_temp_dir(pid: int, temp_dir: str) -> bool:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    needle = temp_dir.rstrip("/").encode()
    return any(arg.endswith(b"=" + needle) or arg == needle or (b"=" + needle + b"/") in arg
               or arg.startswith(needle + b"/") for arg in args)


def belongs(pid: int, state: dict) -> bool:
    return _is_running(pid) and (_has_marker(pid, state["cluster_id"]) or _names_temp_dir(pid, state["temp_dir"]))


def live_processes(state: dict) -> set[int]:
    """Every running process of this cluster: recorded node PIDs and anything carrying the marker."""
    found = {pid for pid in state.get("pids", []) if belongs(pid, state)}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            pid = int(entry)
            if pid not in found and _is_running(pid) and _has_marker(pid, state["cluster_id"]):
                found.add(pid)
    return found


def _signal(pids: set[int], sig: signal.Signals, state: dict) -> None:
    for pid in pids:
        if belongs(pid, state):  # re-checked just before signalling: never hit a reused PID
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def _reap(pids: list[int]) -> None:
    for pid in pids:  # our own children (tests) would otherwise linger as zombies
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _wait_gone(state: dict, seen: set[int], until: float) -> set[int]:
    while True:
        _reap(state["pids"])
        alive = live_processes(state)
        seen |= alive
        if not alive or time.monotonic() >= until:
            return alive
        time.sleep(0.1)


def stop_cluster(state: dict, state_dir: Path, *, timeout_s: float) -> int:
    start = time.monotonic()
    seen = live_processes(state)
    if not seen:
        _reap(state["pids"])
        return 0
    grace = timeout_s / 2
    node_pids = [pid for pid in state["pids"] if pid in seen]
    # Worker nodes first, then the head: each `ray start --block` stops its own node on SIGTERM.
    _signal(set(node_pids[1:]), signal.SIGTERM, state)
    until = start + min(grace / 2, 5)
    while any(_is_running(pid) for pid in node_pids[1:]) and time.monotonic() < until:
        _reap(node_pids[1:])
        time.sleep(0.1)
    _signal(set(node_pids[:1]), signal.SIGTERM, state)
    alive = _wait_gone(state, seen, start + grace)
    if alive:
        _signal(alive, signal.SIGTERM, state)
        alive = _wait_gone(state, seen, start + grace + 2)
    if alive:
        log.warning("SIGKILL to %d process(es) of the local Ray cluster that ignored SIGTERM", len(alive))
        _signal(alive, signal.SIGKILL, state)
        alive = _wait_gone(state, seen, max(start + timeout_s, time.monotonic() + 2))
    if alive:
        raise ExecutionError(f"processes {sorted(alive)} of the local Ray cluster in {state_dir} survived SIGKILL")
    return len(seen)
