"""What a dead privlab run leaves of its private Ray instance is cleaned up at the next start."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privlab.platform.execution.ray_leftovers import OWNER_FILE, clean_up_dead_runs, process_start_time, write_owner

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


def test_a_renamed_agent_is_found_by_its_open_log_files(tmp_path: Path) -> None:
    """Issue 30 item 6: Ray's dashboard and runtime-env agents rename themselves
    (``ray::DashboardAgent``), so their command line no longer names the folder; their stdout and
    stderr are log files in it. They outlived the cleanup (and the killed driver) by minutes."""
    dead = tmp_path / "privlab-ray-dead"
    logs = dead / "ray" / "session_latest" / "logs"
    logs.mkdir(parents=True)
    write_owner(dead, pid=_dead_pid())
    with open(logs / "dashboard_agent.out", "w") as out, open(logs / "dashboard_agent.err", "w") as err:
        agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=out, stderr=err)
    try:
        assert str(dead).encode() not in Path(f"/proc/{agent.pid}/cmdline").read_bytes()
        assert clean_up_dead_runs(tmp_path, grace_seconds=5.0) == [dead]
        assert agent.wait(timeout=10) is not None
        assert not dead.exists()
    finally:
        agent.kill()
        agent.wait()


def test_a_folder_whose_name_merely_starts_like_a_dead_one_is_not_its(tmp_path: Path) -> None:
    dead = tmp_path / "privlab-ray-dead"
    dead.mkdir()
    write_owner(dead, pid=_dead_pid())
    live = tmp_path / "privlab-ray-dead2"  # another run's folder, whose path starts with the dead one's
    live.mkdir()
    write_owner(live)
    agent = _agent(live)
    try:
        assert clean_up_dead_runs(tmp_path, grace_seconds=1.0) == [dead]
        assert agent.poll() is None and live.exists()
    finally:
        agent.kill()
        agent.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_another_users_processes_are_never_signalled(tmp_path: Path) -> None:
    dead = tmp_path / "privlab-ray-dead"
    dead.mkdir()
    write_owner(dead, pid=_dead_pid())
    with open(dead / "agent.out", "w") as out:
        other = subprocess.Popen(["/bin/sh", "-c", "sleep 600; :", "sh", f"--temp-dir={dead}/ray"],
                                 stdout=out, user=65534, start_new_session=True)
    try:
        clean_up_dead_runs(tmp_path, grace_seconds=1.0)
        assert other.poll() is None
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()


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


@pytest.mark.ray
@pytest.mark.slow  # its own Ray instance: ~6 s
def test_a_private_ray_instance_lives_in_a_folder_only_its_user_can_enter() -> None:
    """Issue 30 item 6: Ray makes its temp dir and session folders 0777, whatever the umask."""
    from privlab.platform.execution.backends import RayBackend

    backend = RayBackend(address=None, workers=1, max_retries=0)
    try:
        folder = Path(backend._temp_dir)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()
        sessions = list(folder.glob("*/session_2*"))
        assert sessions and all(session.resolve().is_relative_to(folder) for session in sessions)
    finally:
        backend.shutdown()
    assert not folder.exists()


def _descendants(root: int) -> dict[int, int]:
    """Every process below ``root`` (children, grandchildren …): PID → start time."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            start = process_start_time(child)
            if start is not None:
                found[child] = start
                todo.append(child)
    return found


def _running(pid: int, start: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in "ZX" and int(fields[19]) == start


@pytest.mark.slow  # a Ray run whose driver is SIGKILLed, then the next run's cleanup (about 20 s)
@pytest.mark.ray
def test_nothing_of_a_sigkilled_runs_ray_survives_the_next_runs_cleanup(tmp_path: Path, privlab_process) -> None:
    """Issue 30 item 6: Ray's dashboard and runtime-env agents (~210 MB) outlived a SIGKILLed
    driver by ~2.5 min, and the next run's cleanup did not stop them."""
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "killed"\nseed = 5\nworkload = "cpu_burn"\ntrials = 20000\n'
                    '[params]\nsize = 40000\nsorts = 4\n[tracking]\nexperiment = "killed"\n')
    run = privlab_process("run", str(spec), "--workers", "1", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    run.wait_started()
    driver = run.process.pid
    ray_processes = _descendants(driver)
    folders = [f for f in Path("/tmp").glob("privlab-ray-*")
               if f.stat().st_uid == os.getuid() and (f / OWNER_FILE).is_file()
               and json.loads((f / OWNER_FILE).read_text())["pid"] == driver]
    assert len(folders) == 1 and len(ray_processes) >= 4, (folders, ray_processes)
    try:
        os.kill(driver, signal.SIGKILL)  # the driver only, as the OOM killer would
        run.process.wait(timeout=30)
        time.sleep(2)  # Ray's own processes that die with their driver have done so
        assert folders[0] in clean_up_dead_runs("/tmp")
        deadline = time.monotonic() + 5
        while (left := {pid for pid, start in ray_processes.items() if _running(pid, start)}) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes()[:60] for pid in left]
        assert not folders[0].exists()
    finally:
        for pid, start in ray_processes.items():
            if _running(pid, start):
                os.kill(pid, signal.SIGKILL)
