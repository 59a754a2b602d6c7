"""A real two-node Ray cluster on loopback: a driver in another process uses both nodes, nothing
listens beyond 127.0.0.1, and stopping leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from privlab.platform.core.errors import ExecutionError
from privlab.platform.execution.local_cluster import (
    LocalClusterInfo,
    local_cluster_status,
    start_local_cluster,
    stop_local_cluster,
)

pytestmark = pytest.mark.ray

DRIVER = textwrap.dedent(
    """
    import json, sys, time
    import ray

    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)

    @ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
    def where(i):
        time.sleep(0.2)
        return ray.get_runtime_context().get_node_id()

    alive = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    ran_on = sorted(set(ray.get([where.remote(i) for i in range(8)])))
    print(json.dumps({"alive": alive, "ran_on": ran_on}))
    ray.shutdown()
    """
)

LOOPBACK = re.compile(r"^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):\d+$")


def _processes_of(info: LocalClusterInfo) -> dict[int, str]:
    """Every process in the sessions of the cluster's `ray start` processes (their descendants)."""
    out = subprocess.run(["ps", "-eo", "pid=,sid=,stat=,comm="], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        pid, sid, state, comm = line.split(None, 3)
        if int(sid) in info.pids and not state.startswith("Z"):
            found[int(pid)] = comm
    return found


def _listeners() -> list[tuple[str, set[int], str]]:
    """(local address, owning pids, process names) for every listening TCP socket."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        fields = line.split()
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        rows.append((fields[3], pids, " ".join(re.findall(r'\("([^"]+)"', line))))
    return rows


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, LocalClusterInfo]]:
    if shutil.which("ss") is None:
        pytest.skip("needs `ss` (iproute2) to check listening sockets")
    state_dir = tmp_path / "cluster"
    info = start_local_cluster(nodes=2, cpus_per_node=1, state_dir=state_dir, timeout_s=45)
    try:
        yield state_dir, info
    finally:
        stop_local_cluster(state_dir=state_dir)


@pytest.mark.slow  # starts a real two-node cluster with `ray start` (about 15 s)
def test_two_node_loopback_cluster(cluster: tuple[Path, LocalClusterInfo], tmp_path: Path) -> None:
    state_dir, info = cluster
    assert info.address.startswith("127.0.0.1:")
    assert info.nodes == 2 and len(info.pids) == 2
    assert local_cluster_status(state_dir=state_dir) == info
    token = Path(info.env["RAY_AUTH_TOKEN_PATH"])
    assert info.env["RAY_AUTH_MODE"] == "token" and token.is_relative_to(state_dir)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert json.loads((state_dir / "cluster.json").read_text())["address"] == info.address
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    sessions = list(Path(info.temp_dir).glob("session_2*"))  # Ray's (0777) in /tmp/privlab-ray-*/ray
    assert sessions and not any(_reachable_by_others(session) for session in sessions)

    with pytest.raises(ExecutionError, match="privlab cluster down"):
        start_local_cluster(nodes=1, cpus_per_node=1, state_dir=state_dir)

    # A driver in a separate process, configured only by info.env, uses both nodes.
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
    env.update(info.env)
    done = subprocess.run([sys.executable, "-c", DRIVER, info.address], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=40)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(report["alive"]) == 2
    assert report["ran_on"] == report["alive"]

    # Every TCP listener of the cluster's processes is on loopback.
    processes = _processes_of(info)
    ours = [(addr, names) for addr, pids, names in _listeners() if pids & processes.keys()]
    assert any("gcs_server" in names for _, names in ours)
    assert sum("raylet" in names for _, names in ours) >= 2
    assert any(addr.endswith(":" + info.address.rsplit(":", 1)[1]) for addr, _ in ours)
    exposed = [(addr, names) for addr, names in ours if not LOOPBACK.match(addr)]
    assert not exposed, f"listening beyond 127.0.0.1: {exposed}"

    stopped = stop_local_cluster(state_dir=state_dir)
    assert stopped >= len(info.pids)
    # A Ray worker started without the cluster's marker (so never signalled: only what is proven
    # to be the cluster's is) exits by itself once its raylet is gone: give it a few seconds.
    deadline = time.monotonic() + 15
    while _processes_of(info) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_of(info)
    for pid in [*info.pids, *processes]:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"process {pid} survived"
    assert local_cluster_status(state_dir=state_dir) is None
    assert not (state_dir / "cluster.json").exists() and not token.exists()
    assert stop_local_cluster(state_dir=state_dir) == 0


def _is_zombie(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text[text.rfind(")") + 2] in "ZX"


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"nodes": 0, "cpus_per_node": 1}, ValueError),
    ({"nodes": 2, "cpus_per_node": 0}, ValueError),
    ({"nodes": 2.0, "cpus_per_node": 1}, TypeError),
])
def test_bad_arguments_start_nothing(tmp_path: Path, kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error, match="must be"):
        start_local_cluster(state_dir=tmp_path, **kwargs)
    assert local_cluster_status(state_dir=tmp_path) is None
    assert stop_local_cluster(state_dir=tmp_path / "missing") == 0


def _reachable_by_others(path: Path) -> bool:
    """Whether another user could reach ``path``: no folder on the way (``path`` included) is
    ours and closed to group and others."""
    for folder in [path, *path.parents]:
        info = folder.stat()
        if info.st_uid == os.getuid() and not info.st_mode & 0o077:
            return False
    return True


def test_the_state_directory_and_rays_folders_are_private(tmp_path: Path) -> None:
    """Issue 30 item 6: Ray made its session folders 0777, in a state directory left 0755."""
    from privlab.platform.execution.cluster_state import discard_state
    from privlab.platform.execution.local_cluster import _free_port, _make_temp_dir

    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o755)
    state_dir.chmod(0o755)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", _free_port()))
        busy.listen()
        with pytest.raises(ExecutionError, match="in use"):  # refused after the state directory is made
            start_local_cluster(nodes=1, cpus_per_node=1, state_dir=state_dir, port=busy.getsockname()[1])
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700

    short = Path(tempfile.mkdtemp(prefix="plc-", dir="/tmp"))  # short enough for Ray's temp dir inside
    try:
        temp_dir, root = _make_temp_dir(short)
        assert temp_dir == short / "ray" and root is None
    finally:
        shutil.rmtree(short)
    temp_dir, root = _make_temp_dir(tmp_path / ("x" * 50))  # too long: a folder under /tmp
    try:
        assert root is not None and temp_dir.parent == root and str(root).startswith("/tmp/privlab-ray-")
        temp_dir.chmod(0o777)  # as Ray does
        assert not _reachable_by_others(temp_dir)
    finally:
        discard_state(tmp_path, {"temp_dir": str(temp_dir), "temp_dir_owned": True, "temp_dir_root": str(root)})
    assert not root.exists()


def test_each_node_is_waited_for_until_its_runtime_started(tmp_path: Path) -> None:
    """Nodes start one after another: the next one only once `ray start` said "Ray runtime
    started." (two worker nodes started together picked the same session socket and one died);
    a node that exits first, or never says it, is an error naming the node and its log."""
    import time

    from privlab.platform.execution.local_cluster import _wait_for_node_start

    log = tmp_path / "worker-1.log"
    script = ("import sys, time; time.sleep(0.3); "
              "open(sys.argv[1], 'a').write('\\x1b[32mRay runtime started.\\x1b[39m\\n'); time.sleep(30)")
    log.write_text("Local node IP: 127.0.0.1\n")
    started = subprocess.Popen([sys.executable, "-c", script, str(log)])
    try:
        begin = time.monotonic()
        _wait_for_node_start(started, 1, time.monotonic() + 20, log)
        assert 0.25 < time.monotonic() - begin < 15 and started.poll() is None
    finally:
        started.kill()
        started.wait()

    crashed = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    crashed.wait()
    (tmp_path / "worker-2.log").write_text("Exception: bind: Address already in use\n")
    with pytest.raises(ExecutionError, match=r"(?s)Ray node 2 \(worker\) exited with code 1.*Address already in use"):
        _wait_for_node_start(crashed, 2, time.monotonic() + 20, tmp_path / "worker-2.log")

    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(ExecutionError, match=r"Ray node 0 \(head\) did not start in time"):
            _wait_for_node_start(silent, 0, time.monotonic() + 0.5, tmp_path / "worker-2.log")
    finally:
        silent.kill()
        silent.wait()


@pytest.mark.slow  # starts a one-node cluster with `ray start`, then a run on it (about 20 s)
def test_a_run_joins_the_cluster_started_from_its_folder_instead_of_starting_ray(tmp_path: Path) -> None:
    (tmp_path / "q.toml").write_text('name = "q"\nseed = 1\nworkload = "laplace_mean"\nrepetitions = 20\n'
                                     '[params]\nn = 10\nepsilon = 1.0\n[tracking]\nplots = false\n')
    state_dir = tmp_path / ".privlab" / "cluster"  # where `privlab cluster up` run here keeps it
    info = start_local_cluster(nodes=1, cpus_per_node=2, state_dir=state_dir, timeout_s=45)
    try:
        result = subprocess.run([sys.executable, "-m", "privlab.platform.cli", "run", "q.toml", "--no-progress",
                                 "--summary-json", "summary.json"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, result.stderr
        assert f"the local cluster at {info.address}" in result.stderr
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert summary["timing"]["ray_address"] == info.address and summary["timing"]["workers"] == 2
        assert local_cluster_status(state_dir=state_dir) is not None  # the run left the cluster running
    finally:
        stop_local_cluster(state_dir=state_dir)
