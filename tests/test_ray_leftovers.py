"""What a dead privlab run leaves of its private Ray instance is cleaned up at the next start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privlab.platform.ray_leftovers import OWNER_FILE, clean_up_dead_runs, process_start_time, write_owner

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _agent(folder: Path) -> subprocess.Popen:
    """A stand-in for a raylet left running: its command line names the run's folder.

    Popen may return before the child's exec shows in /proc (its command line is still the
    parent's for a moment), so wait until it does: a real leftover has been running for long.
    """
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                              f"--temp-dir={folder}/session_latest/sockets"])
    deadline = time.monotonic() + 30
    while str(folder).encode() not in Path(f"/proc/{agent.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the stand-in process never showed its command line"
        time.sleep(0.01)
    return agent


def test_a_dead_runs_processes_are_stopped_and_its_folder_removed(tmp_path: Path) -> None:
    dead = tmp_path / "privlab-ray-dead"
    dead.mkdir()
    write_owner(dead, pid=_dead_pid())
    agent = _agent(dead)
    try:
        assert clean_up_dead_runs(tmp_path, grace_seconds=5.0) == [dead]
        assert agent.wait(timeout=10) is not None  # terminated
        assert not dead.exists()
    finally:
        agent.kill()


def test_a_live_runs_folder_and_processes_are_left_alone(tmp_path: Path) -> None:
    live = tmp_path / "privlab-ray-live"
    live.mkdir()
    write_owner(live)  # this test process is the owner
    agent = _agent(live)
    try:
        assert clean_up_dead_runs(tmp_path) == []
        assert live.exists() and agent.poll() is None
    finally:
        agent.kill()
        agent.wait()


def test_a_reused_pid_does_not_keep_a_dead_run_alive(tmp_path: Path) -> None:
    folder = tmp_path / "privlab-ray-reused"
    folder.mkdir()
    start = process_start_time(os.getpid())
    (folder / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start": start - 1}))
    assert clean_up_dead_runs(tmp_path) == [folder]


def test_an_unowned_folder_is_removed_only_when_old_and_unused(tmp_path: Path) -> None:
    folder = tmp_path / "privlab-ray-old"
    folder.mkdir()
    assert clean_up_dead_runs(tmp_path) == []  # recent: perhaps an older privlab still starting up
    old = time.time() - 2 * 24 * 3600
    os.utime(folder, (old, old))
    agent = _agent(folder)
    try:
        assert clean_up_dead_runs(tmp_path) == []  # still used by a process
    finally:
        agent.kill()
        agent.wait()
    assert clean_up_dead_runs(tmp_path) == [folder]
    other = tmp_path / "unrelated"
    other.mkdir()
    assert clean_up_dead_runs(tmp_path) == [] and other.exists()
