"""Where units run: in-process (serial, the reference) or on Ray (local or a cluster).

The Ray backend starts a *private* local instance by default (``address="local"``, bound to
127.0.0.1, no dashboard, a CPU cap), so a run never attaches to someone else's cluster by
accident; an explicit address joins an existing cluster. Tasks are retried by Ray when a
worker dies; because units are pure functions of their seeds, a retry gives the same result.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from privlab.platform.core.errors import ExecutionError
from privlab.platform.execution.ray_leftovers import PREFIX as RAY_FOLDER_PREFIX
from privlab.platform.execution.ray_leftovers import clean_up_dead_runs, ray_temp_dir, write_owner
from privlab.platform.execution.worker_tasks import UnitContext, process_item, run_trial_range

log = logging.getLogger(__name__)


class Backend(Protocol):
    """Where a run's units execute: what the scheduler and the actor pool may ask of it.

    Handles are opaque futures: ``submit_*`` returns one, ``wait`` returns those that finished
    (within ``timeout`` seconds, possibly none), ``result`` gives a finished handle's value or
    re-raises the unit's error. ``put`` stores an object once for many units and ``get`` reads it
    back on the driver. Implementations: :class:`SerialBackend` (in this process, in submission
    order, the reference) and :class:`RayBackend` (Ray tasks for trial ranges, actors for pools).
    """

    name: str
    workers: int
    nodes: int
    address: str | None  # the Ray cluster joined; None: a private instance, or no Ray

    def put(self, obj: Any) -> Any: ...
    def get(self, ref: Any) -> Any: ...
    def submit_trials(self, context: UnitContext, start: int, stop: int, data: Any) -> Any: ...
    def create_pool(self, size: int) -> list[Any]: ...
    def submit_item(self, actor: Any, context: UnitContext, state_ref: Any, item: Any, index: int) -> Any: ...
    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]: ...
    def result(self, handle: Any) -> Any: ...
    def cancel(self, handles: Sequence[Any]) -> None: ...
    def release_pool(self, actors: Sequence[Any]) -> None: ...
    def shutdown(self) -> None: ...


class _Done:
    """A finished serial 'future'."""

    __slots__ = ("value", "error")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error


class SerialBackend:
    """Runs every unit in this process, in submission order (the reference executor)."""

    name = "serial"

    def __init__(self) -> None:
        self.workers = 1
        self.nodes = 1
        self.address: str | None = None

    def put(self, obj: Any) -> Any:
        return obj

    def get(self, ref: Any) -> Any:
        return ref

    def submit_trials(self, context: UnitContext, start: int, stop: int, data: Any) -> _Done:
        try:
            return _Done(run_trial_range(context, start, stop, data))
        except Exception as error:  # re-raised by result(), like ray.get
            return _Done(error=error)

    def create_pool(self, size: int) -> list[Any]:
        return [_LocalPoolWorker()]

    def submit_item(self, actor: Any, context: UnitContext, state_ref: Any, item: Any, index: int) -> _Done:
        try:
            return _Done(actor.process(context, [state_ref], item, index))
        except Exception as error:
            return _Done(error=error)

    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        return list(handles)

    def result(self, handle: _Done) -> Any:
        if handle.error is not None:
            raise handle.error
        return handle.value

    def cancel(self, handles: Sequence[Any]) -> None:
        return None

    def release_pool(self, actors: Sequence[Any]) -> None:
        return None

    def shutdown(self) -> None:
        return None


class _LocalPoolWorker:
    def process(self, context: UnitContext, state_ref: list[Any], item: Any, index: int) -> tuple[int, dict[str, Any], float]:
        arrays, seconds = process_item(context, state_ref[0], item, index)
        return index, arrays, seconds


LOOPBACK_HOSTS = ("127.", "localhost", "[::1]", "::1")


def is_loopback_address(address: str | None) -> bool:
    return address is None or address.startswith(LOOPBACK_HOSTS)


def keep_ray_on_loopback() -> None:
    """Make Ray resolve "this node" to 127.0.0.1 instead of the machine's interface address.

    Ray rewrites a loopback bootstrap address such as ``127.0.0.1:6379`` into the machine's
    routable IP before connecting (``resolve_ip_for_localhost``), so a driver cannot reach a
    cluster that listens on loopback only, and hangs. Ray reads
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` at import time to use loopback instead; when Ray
    was imported before we could set it, the constant it derived is updated to match.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


@contextlib.contextmanager
def _sigterm_handler_kept() -> Iterator[None]:
    """``ray.init`` replaces the driver's SIGTERM handler with ``sys.exit``; keep a handler the
    caller installed (the command line's clean stop, ``interrupts.sigterm_as_interrupt``), so
    SIGTERM still checkpoints the run and marks it resumable. Without one, Ray's stays."""
    previous = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    try:
        yield
    finally:
        if callable(previous):
            signal.signal(signal.SIGTERM, previous)


class RayBackend:
    """Units as Ray tasks, actor-pool items as actor calls."""

    name = "ray"

    def __init__(self, *, address: str | None, workers: int | None, max_retries: int, include_dashboard: bool = False) -> None:
        if is_loopback_address(address):
            keep_ray_on_loopback()
        import ray

        self._ray = ray
        self._temp_dir: str | None = None
        self._closed = False
        self.address = address
        if ray.is_initialized():
            raise ExecutionError("Ray is already initialised in this process; privlab starts and stops its own connection")
        if address is None:
            cpus = workers or os.cpu_count() or 1
            # Keep socket paths short (Ray's unix sockets must stay under 108 bytes). What a dead
            # run left behind (a killed driver cannot stop its Ray) is cleaned up first.
            for folder in clean_up_dead_runs("/tmp"):
                log.info("removed %s, left by a dead privlab run", folder)
            self._temp_dir = tempfile.mkdtemp(prefix=RAY_FOLDER_PREFIX, dir="/tmp")  # mode 0700
            write_owner(self._temp_dir)
            with _sigterm_handler_kept():
                ray.init(
                    address="local",
                    num_cpus=cpus,
                    include_dashboard=include_dashboard,
                    _node_ip_address="127.0.0.1",
                    # Ray makes its temp dir and every session folder in it 0777 (whatever the
                    # umask); inside our 0700 folder no other user can reach them.
                    _temp_dir=ray_temp_dir(self._temp_dir),
                    logging_level=logging.WARNING,
                    log_to_driver=True,
                )
        else:
            _check_reachable(address)
            extra = {"_node_ip_address": "127.0.0.1"} if is_loopback_address(address) else {}
            try:
                with _sigterm_handler_kept():
                    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True, **extra)
            except Exception as error:  # Ray's own messages run to pages; say what to do instead
                first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                raise ExecutionError(
                    f"could not connect to the Ray cluster at {address} ({type(error).__name__}: {first[:200]}). "
                    "If it uses token authentication (clusters from `privlab cluster up` do), run privlab from the "
                    "folder where the cluster was started so it finds the token, or set RAY_AUTH_MODE=token and "
                    "RAY_AUTH_TOKEN_PATH to the cluster's auth_token file") from None
        cluster_cpus = int(ray.cluster_resources().get("CPU", 1))
        if address is not None and workers is not None and workers > cluster_cpus:
            log.warning("--workers %d is more than the cluster's %d CPU(s); using %d (a cluster runs one unit per "
                        "CPU: to run more at once, give its nodes more CPUs, e.g. privlab cluster up --cpus-per-node)",
                        workers, cluster_cpus, cluster_cpus)
        self.workers = min(workers, cluster_cpus) if workers else cluster_cpus
        self.nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        self._trials = ray.remote(num_cpus=1, max_retries=max_retries)(run_trial_range)
        self._pool_cls = ray.remote(num_cpus=1, max_restarts=max_retries, max_task_retries=max_retries)(_RayPoolWorker)
        self._warm_up()

    def _warm_up(self) -> None:
        """Have every worker import privlab and the registered workloads before the clock of
        the execution phase starts (a cold worker spends about a second on imports)."""
        warm = self._ray.remote(num_cpus=1)(_import_workloads)
        self._ray.get([warm.remote() for _ in range(self.workers)])

    def put(self, obj: Any) -> Any:
        return self._ray.put(obj)

    def get(self, ref: Any) -> Any:
        return self._ray.get(ref)

    def submit_trials(self, context: UnitContext, start: int, stop: int, data: Any) -> Any:
        return self._trials.remote(context, start, stop, data)

    def create_pool(self, size: int) -> list[Any]:
        return [self._pool_cls.remote() for _ in range(max(1, min(size, self.workers)))]

    def submit_item(self, actor: Any, context: UnitContext, state_ref: Any, item: Any, index: int) -> Any:
        # The state ref travels inside a list so Ray does not resolve it per call; the actor
        # fetches it once and caches it (again after a restart).
        return actor.process.remote(context, [state_ref], item, index)

    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        ready, _ = self._ray.wait(list(handles), num_returns=1, timeout=timeout)
        return ready

    def result(self, handle: Any) -> Any:
        try:
            return self._ray.get(handle)
        except self._ray.exceptions.RayTaskError as error:
            cause = error.as_instanceof_cause()
            raise cause from None

    def cancel(self, handles: Sequence[Any]) -> None:
        for handle in handles:
            try:
                self._ray.cancel(handle)
            except Exception:  # already finished or an actor call: nothing to cancel
                pass

    def release_pool(self, actors: Sequence[Any]) -> None:
        for actor in actors:
            self._ray.kill(actor)

    def shutdown(self) -> None:
        """Disconnect; a private instance's processes are stopped and its folder removed (once)."""
        if self._closed:
            return
        self._closed = True
        if self._temp_dir is not None:
            _stop_autoscaler_monitor(self._ray)
        self._ray.shutdown()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)


def _stop_autoscaler_monitor(ray: Any) -> None:
    """Kill a private instance's autoscaler monitor before ``ray.shutdown`` stops the rest.

    A single-node instance started by ``ray.init`` has nothing to autoscale, but Ray starts the
    monitor anyway; on shutdown Ray stops the GCS first, then sends the monitor SIGTERM, whose
    handler tries to report its end to that GCS and hangs until Ray kills it after a second's
    timeout (≈1.0 s of a ≈1.6 s shutdown, measured). Killed first, the monitor has nothing to
    report and Ray skips it as already gone. Ray's process table is internal: when it is not
    where this expects, Ray's own (slower) shutdown does the work.
    """
    try:
        monitors = list(ray._private.worker._global_node.all_processes.get("monitor", []))
    except AttributeError:
        return
    for info in monitors:
        process = getattr(info, "process", None)
        if process is None or process.poll() is not None:
            continue
        try:
            process.kill()
            process.wait(timeout=1)
        except Exception:  # gone already, or not ours to wait on: Ray's shutdown goes on
            pass


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail in seconds, not minutes, when nothing listens at a ``host:port`` address.

    Ray retries an unreachable GCS for a minute or more before giving up; a plain TCP connect
    tells at once. Other address forms (``auto``, ``ray://…``) are left to Ray.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        raise ExecutionError(
            f"nothing answers at {address} ({error.strerror or type(error).__name__}): no Ray cluster is running "
            "there. Start one (`privlab cluster up`, or `ray start --head`) and pass the address it prints, or "
            "leave out --address to run on a private local instance") from None


def _import_workloads() -> int:
    from privlab.platform.experiment import registry

    return len(registry.workload_names())


class _RayPoolWorker:
    """An actor that caches one configuration's read-only state and processes items."""

    def __init__(self) -> None:
        self._context: UnitContext | None = None
        self._state: Any = None

    def process(self, context: UnitContext, state_ref: list[Any], item: Any, index: int) -> tuple[int, dict[str, Any], float]:
        import ray

        if self._context is None or self._context.config_id != context.config_id:
            ref = state_ref[0]
            self._state = ray.get(ref) if isinstance(ref, ray.ObjectRef) else ref
            self._context = context  # kept: its parameters are built once per configuration
        arrays, seconds = process_item(self._context, self._state, item, index)
        return index, arrays, seconds


def make_backend(*, serial: bool, address: str | None, workers: int | None, max_retries: int) -> Backend:
    if serial:
        return SerialBackend()
    return RayBackend(address=address, workers=workers, max_retries=max_retries)

