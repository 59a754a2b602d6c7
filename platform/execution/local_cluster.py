"""A real multi-node Ray cluster on this machine, on loopback only, for `privlab cluster up/down/status`.

The head and each worker node are separate ``ray start --block`` processes (one session and process
group each), so tasks really cross node boundaries while nothing listens beyond 127.0.0.1. The
cluster outlives the process that started it; its state lives in ``state_dir/cluster.json``.

What was measured on this machine with Ray 2.60.0 (and why the code does what it does):

* **Loopback.** ``--node-ip-address=127.0.0.1`` alone does *not* keep Ray on loopback: ``ray start``
  rewrites a localhost address to the machine's interface address ("Local node IP: 192.0.2.2") and
  gcs_server/raylet then listen on the wildcard address (``*:PORT``, and ``0.0.0.0`` for two Python
  helpers). The same happens to ``ray.init(address="local", _node_ip_address="127.0.0.1")``. Only
  with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in the environment does Ray keep 127.0.0.1, and then
  every listener is on ``127.0.0.1`` / ``[::ffff:127.0.0.1]``. With that variable set, however,
  ``ray start --address=...`` refuses to start a *worker* node ("Multi-node Ray clusters are not
  supported on Windows and OSX"). Worker nodes are therefore started by the same ``ray start`` CLI
  through a short shim (:data:`_WORKER_NODE_SHIM`) that lets that check pass while Ray's
  local-IP lookup keeps answering 127.0.0.1 - exactly what the variable does for the head.
  A *client* needs the variable too: without it ``ray.init(address="127.0.0.1:PORT")`` rewrites the
  address to 192.0.2.2:PORT, finds nothing listening there and gives up after ~30 s.
* **Token authentication.** Per Ray's source (``scripts.py``, ``authentication_token_setup.py``),
  ``ray start --head`` turns token auth on when ``RAY_AUTH_MODE=token`` is
  set, *or* when ``RAY_AUTH_MODE`` is unset and a token already exists (``RAY_AUTH_TOKEN``,
  ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``); a bare ``ray.init()`` that starts a local
  instance creates ``~/.ray/auth_token`` - so whether a ``ray start`` cluster had auth depended on
  what else had run on the host. Here the mode is explicit: every node runs with
  ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH=<state_dir>/auth_token`` (a fresh 256-bit token
  per cluster, mode 0600), and ``~/.ray`` is never read or written. Ray's precedence is
  ``RAY_AUTH_TOKEN`` > ``RAY_AUTH_TOKEN_PATH`` > ``~/.ray/auth_token``, so ``RAY_AUTH_TOKEN`` is
  removed from the nodes' environment. A client without the token is refused
  ("Unauthenticated: ... Authentication token is missing or incorrect") and ``ray.init`` raises
  ``ConnectionError`` after ~20 s of retries; with :attr:`LocalClusterInfo.env` applied it connects.
* **Stopping.** ``ray stop`` kills every Ray process on the host, so it is never used. SIGTERM to a
  ``ray start --block`` process shuts its node down cleanly in 1-2 s; processes still alive after the
  grace period get SIGKILL. Only processes proven to be this cluster's are signalled: each node's
  environment carries a per-cluster marker (``PRIVLAB_LOCAL_CLUSTER_ID``) that every descendant
  (gcs_server, raylet, agents, Ray workers) inherits, and recorded PIDs are re-checked against the
  marker or the private ``--temp-dir`` before any signal, so a reused PID is left alone.
* **Permissions.** Ray makes its temp dir and every session folder in it 0777, whatever the umask
  (``try_make_directory_shared``). So the temp dir always sits in a folder of ours that is 0700:
  the state directory itself (which also holds the token and the nodes' logs), or a
  ``privlab-ray-*`` folder from ``mkdtemp`` when the state directory's path is too long.
* Fixed default ports (GCS 6379, Ray client server 10001, dashboard agent 52365) would collide with
  other Ray instances on the host, so free loopback ports are chosen for them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from privlab.platform.core.errors import ExecutionError
from privlab.platform.execution.cluster_state import (
    MARKER_ENV,
    STATE_VERSION,
    TOKEN_FILE,
    belongs,
    discard_state,
    live_processes,
    locked,
    read_state,
    stop_cluster,
    write_state,
)

log = logging.getLogger(__name__)

# Ray's unix sockets live under <temp_dir>/session_<timestamp>_<pid>/sockets/... and must stay
# below 108 bytes; beyond this length the temp dir moves to a short directory under /tmp.
_MAX_TEMP_DIR_LEN = 40
_STDERR_TAIL_LINES = 25
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What `ray start --block` prints once its node is up.
_RUNTIME_STARTED = "Ray runtime started."

# `ray start` for a worker node. RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (needed to stay on loopback)
# also makes `ray start --address` refuse to join; this lets the multi-node check pass while the
# local-IP lookup keeps returning 127.0.0.1, as the variable does for the head node.
_WORKER_NODE_SHIM = (
    "import sys\n"
    "from ray._private import ray_constants, services\n"
    "ray_constants.ENABLE_RAY_CLUSTER = True\n"
    "services.get_node_ip_address = lambda address=None: '127.0.0.1'\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(main())\n"
)

# Runs in a subprocess with the client environment: connect as a driver and wait for the nodes.
_PROBE = (
    "import json, sys, time\n"
    "import ray\n"
    "address, want, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])\n"
    "ray.init(address=address, logging_level='ERROR', log_to_driver=False)\n"
    "while True:\n"
    "    alive = [n for n in ray.nodes() if n.get('Alive')]\n"
    "    if len(alive) >= want or time.monotonic() > deadline:\n"
    "        break\n"
    "    time.sleep(0.2)\n"
    "print(json.dumps({'alive': len(alive), 'ips': sorted({n['NodeManagerAddress'] for n in alive})}))\n"
    "ray.shutdown()\n"
    "sys.exit(0 if len(alive) >= want else 3)\n"
)


@dataclass(frozen=True, kw_only=True)
class LocalClusterInfo:
    """A loopback Ray cluster started by :func:`start_local_cluster`.

    Attributes:
        address: The GCS address to pass to ``ray.init(address=...)``, ``"127.0.0.1:PORT"``.
        nodes: Number of Ray nodes (head included).
        cpus_per_node: CPUs each node advertises.
        temp_dir: Ray's ``--temp-dir`` shared by the nodes (session logs live under it).
        pids: PIDs of the ``ray start`` process of each node, head first.
        env: Environment a client process needs to connect (apply it before importing ray):
            token auth mode, the token file, and Ray's loopback switch.
    """

    address: str
    nodes: int
    cpus_per_node: int
    temp_dir: str
    pids: tuple[int, ...]
    env: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def start_local_cluster(
    *, nodes: int, cpus_per_node: int, state_dir: Path, port: int | None = None, timeout_s: float = 60
) -> LocalClusterInfo:
    """Start a head and ``nodes - 1`` worker nodes with ``ray start``, all bound to 127.0.0.1.

    Returns once every node is alive as seen by a driver that connected with
    :attr:`LocalClusterInfo.env` (so the returned address is known to work).

    Args:
        nodes: Number of Ray nodes, head included (at least 1).
        cpus_per_node: CPUs each node advertises (at least 1).
        state_dir: Directory for ``cluster.json``, the auth token and the nodes' logs.
        port: GCS port on 127.0.0.1; a free one is chosen when omitted.
        timeout_s: How long to wait for all nodes to be alive.

    Returns:
        The cluster's address, PIDs and the client environment.

    Raises:
        TypeError: ``nodes``, ``cpus_per_node`` or ``port`` is not an int.
        ValueError: One of them is out of range.
        ExecutionError: A live cluster is already recorded in ``state_dir``, the port is taken,
            or the nodes did not come up in time (what was started is stopped first; the message
            carries the tail of Ray's output).
    """
    _check_int("nodes", nodes, minimum=1)
    _check_int("cpus_per_node", cpus_per_node, minimum=1)
    if port is not None:
        _check_int("port", port, minimum=1, maximum=65535)
    if not timeout_s > 0:
        raise ValueError(f"timeout_s ({timeout_s!r}) must be > 0")

    state_dir = Path(state_dir).absolute()
    _make_private_dir(state_dir)
    with locked(state_dir):
        previous = read_state(state_dir)
        if previous is not None:
            if live_processes(previous):
                raise ExecutionError(
                    f"a local Ray cluster recorded in {state_dir} is still running at "
                    f"{previous['address']}; run `privlab cluster down` first"
                )
            discard_state(state_dir, previous)

        gcs_port = port if port is not None else _free_port()
        if not _port_is_free(gcs_port):
            raise ExecutionError(f"port {gcs_port} on 127.0.0.1 is in use; pick another --port or omit it")
        address = f"127.0.0.1:{gcs_port}"
        cluster_id = secrets.token_hex(8)
        temp_dir, temp_root = _make_temp_dir(state_dir)
        token_path = _write_token(state_dir)
        client_env = {
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token_path),
        }
        node_env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
        node_env.update(client_env)
        node_env[MARKER_ENV] = cluster_id
        node_env["RAY_USAGE_STATS_ENABLED"] = "0"
        logs_dir = state_dir / "logs"
        logs_dir.mkdir(exist_ok=True)

        state: dict = {
            "version": STATE_VERSION,
            "cluster_id": cluster_id,
            "address": address,
            "nodes": nodes,
            "cpus_per_node": cpus_per_node,
            "temp_dir": str(temp_dir),
            "temp_dir_owned": temp_root is not None,
            "temp_dir_root": None if temp_root is None else str(temp_root),
            "pids": [],
            "env": client_env,
            "logs": [],
            "started_at": time.time(),
        }
        common = [
            f"--num-cpus={cpus_per_node}",
            "--node-ip-address=127.0.0.1",
            f"--temp-dir={temp_dir}",
            f"--object-store-memory={_object_store_bytes(nodes)}",
            f"--dashboard-agent-listen-port={_free_port()}",
            "--disable-usage-stats",
            "--block",
        ]
        deadline = time.monotonic() + timeout_s
        processes: list[subprocess.Popen] = []
        try:
            head_cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={gcs_port}",
                        "--include-dashboard=false", f"--ray-client-server-port={_free_port()}", *common]
            processes.append(_launch(head_cmd, node_env, logs_dir / "head.log"))
            state["pids"].append(processes[-1].pid)
            state["logs"].append(str(logs_dir / "head.log"))
            write_state(state_dir, state)  # recorded at once, so `down` can clean up an interrupted start
            _wait_for_port(gcs_port, processes[0], deadline, logs_dir / "head.log")
            _wait_for_node_start(processes[0], 0, deadline, logs_dir / "head.log")

            for index in range(1, nodes):
                log_path = logs_dir / f"worker-{index}.log"
                worker_common = [a if not a.startswith("--dashboard-agent-listen-port=")
                                 else f"--dashboard-agent-listen-port={_free_port()}" for a in common]
                worker_cmd = [sys.executable, "-c", _WORKER_NODE_SHIM, "start", f"--address={address}",
                              *worker_common]
                processes.append(_launch(worker_cmd, node_env, log_path))
                state["pids"].append(processes[-1].pid)
                state["logs"].append(str(log_path))
                write_state(state_dir, state)
                _wait_for_node_start(processes[-1], index, deadline, log_path)

            _wait_for_nodes(address, nodes, client_env, processes, state["logs"], deadline)
        except BaseException:
            try:
                stop_cluster(state, state_dir, timeout_s=10)
            finally:
                discard_state(state_dir, state)
            raise

        info = _info(state)
        log.info("local Ray cluster: %d node(s) at %s (temp dir %s)", nodes, address, temp_dir)
        return info


def stop_local_cluster(*, state_dir: Path, timeout_s: float = 30) -> int:
    """Stop the cluster recorded in ``state_dir``: SIGTERM, then SIGKILL whatever is left.

    Only processes proven to belong to this cluster are signalled (the cluster's marker in their
    environment, or a recorded PID whose command line names the cluster's private temp dir).
    The state file, the token and a temp dir outside ``state_dir`` are removed afterwards.

    Args:
        state_dir: The directory given to :func:`start_local_cluster`.
        timeout_s: Total time allowed; half of it is the grace period after SIGTERM.

    Returns:
        How many processes were stopped (0 when nothing was recorded or running).

    Raises:
        ExecutionError: Some of the cluster's processes survived SIGKILL.
    """
    state_dir = Path(state_dir).absolute()
    if not state_dir.is_dir():
        return 0
    with locked(state_dir):
        state = read_state(state_dir)
        if state is None:
            return 0
        stopped = stop_cluster(state, state_dir, timeout_s=timeout_s)
        discard_state(state_dir, state)
        return stopped


def local_cluster_status(*, state_dir: Path) -> LocalClusterInfo | None:
    """The cluster recorded in ``state_dir`` if any of its node processes is alive, else ``None``.

    Args:
        state_dir: The directory given to :func:`start_local_cluster`.

    Returns:
        The recorded cluster (``pids`` lists the node processes still alive), or ``None``.
    """
    state = read_state(Path(state_dir).absolute())
    if state is None:
        return None
    alive = [pid for pid in state["pids"] if belongs(pid, state)]
    if not alive:
        return None
    return _info({**state, "pids": alive})


# --------------------------------------------------------------------------------------------
# Starting
# --------------------------------------------------------------------------------------------


def _check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} ({value!r}) must be an int")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ValueError(f"{name} ({value!r}) must be {bound}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _make_private_dir(state_dir: Path) -> None:
    """Create ``state_dir`` (and its parents) and make it 0700: Ray's sessions, the token and the
    nodes' logs go in it."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        state_dir.chmod(0o700)
    except OSError as error:
        raise ExecutionError(f"cannot make the state directory {state_dir} private (mode 0700: {error.strerror}); "
                             "pass a --state-dir of your own") from None


def _make_temp_dir(state_dir: Path) -> tuple[Path, Path | None]:
    """Ray's temp dir, and the folder to remove with the cluster (None: it is in ``state_dir``).

    Ray makes the temp dir 0777, so it is always inside a 0700 folder of ours: ``state_dir``, or
    a ``mkdtemp`` folder under /tmp when ``state_dir``'s path would make Ray's socket paths too long.
    """
    candidate = state_dir / "ray"
    if len(str(candidate)) <= _MAX_TEMP_DIR_LEN:
        shutil.rmtree(candidate, ignore_errors=True)
        candidate.mkdir()
        return candidate, None
    root = Path(tempfile.mkdtemp(prefix="privlab-ray-", dir="/tmp"))
    (root / "ray").mkdir()
    return root / "ray", root


def _write_token(state_dir: Path) -> Path:
    path = state_dir / TOKEN_FILE
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))
    return path


def _object_store_bytes(nodes: int) -> int:
    """Share 30% of RAM between the nodes (each node would otherwise claim 30% for itself)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return max(int(0.3 * total / nodes), 128 << 20)


def _launch(cmd: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as out:
        # A new session: the node survives the terminal of `privlab cluster up` and its Ctrl-C.
        return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd="/")


def _wait_for_node_start(process: subprocess.Popen, index: int, deadline: float, log_path: Path) -> None:
    """Wait until node ``index``'s ``ray start`` (0: the head) says its runtime started.

    Nodes start one at a time: nodes sharing a temp dir pick their session files
    (``raylet.N.out``, the plasma store's socket) by looking for the first free suffix, so two
    nodes starting together can pick the same one, and one of them dies with "bind: Address
    already in use" (measured with three nodes on a loaded machine).
    """
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ExecutionError(f"Ray node {index} ({_role(index)}) exited with code {process.returncode} "
                                 "while starting:\n" + _tail(log_path))
        if _RUNTIME_STARTED in log_path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise ExecutionError(f"Ray node {index} ({_role(index)}) did not start in time:\n" + _tail(log_path))


def _role(index: int) -> str:
    return "head" if index == 0 else "worker"


def _wait_for_port(port: int, head: subprocess.Popen, deadline: float, log_path: Path) -> None:
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise ExecutionError(f"the Ray head node exited with code {head.returncode} while starting:\n"
                                 + _tail(log_path))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise ExecutionError(f"the Ray head node did not listen on 127.0.0.1:{port} in time:\n" + _tail(log_path))


def _wait_for_nodes(address: str, nodes: int, client_env: dict[str, str], processes: list[subprocess.Popen],
                    logs: list[str], deadline: float) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
    env.update(client_env)
    remaining = max(deadline - time.monotonic(), 1.0)
    probe = subprocess.Popen([sys.executable, "-c", _PROBE, address, str(nodes), str(remaining)], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd="/", text=True)
    try:
        while probe.poll() is None:
            dead = [(i, p) for i, p in enumerate(processes) if p.poll() is not None]
            if dead:
                index, proc = dead[0]
                raise ExecutionError(f"Ray node {index} ({_role(index)}) exited with code "
                                     f"{proc.returncode} while starting:\n" + _tail(Path(logs[index])))
            if time.monotonic() > deadline + 15:
                raise ExecutionError(f"no driver could connect to {address} in time:\n"
                                     + "\n".join(_tail(Path(p)) for p in logs))
            time.sleep(0.2)
        out, err = probe.communicate()
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    if probe.returncode != 0:
        err_tail = "\n".join(err.strip().splitlines()[-_STDERR_TAIL_LINES:])
        raise ExecutionError(f"the Ray cluster at {address} did not reach {nodes} live node(s) "
                             f"({out.strip() or 'driver could not connect'}):\n{err_tail}\n"
                             + "\n".join(_tail(Path(p)) for p in logs))


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"[{path}: no output]"
    return f"[{path}]\n" + "\n".join(_ANSI.sub("", line) for line in lines[-_STDERR_TAIL_LINES:])


def _info(state: dict) -> LocalClusterInfo:
    return LocalClusterInfo(address=state["address"], nodes=state["nodes"], cpus_per_node=state["cpus_per_node"],
                            temp_dir=state["temp_dir"], pids=tuple(state["pids"]), env=dict(state["env"]))


