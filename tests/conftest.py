"""Shared fixtures: a small spec exercising all three patterns, a private MLflow store, the public
datasets, `privlab` run in a process of its own for tests that signal it, a disk that fills up
under the release transcript, and an MLflow tracking server on PostgreSQL."""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Every Ray instance and cluster the tests start listens on loopback; this makes Ray resolve
# "this node" to 127.0.0.1 too (it is read when Ray is imported, so set it first).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The diagnostic workloads (cpu_burn, crash_once, column_mean…) are not in the installed
# registry; the tests, their subprocesses and Ray workers (which inherit the environment)
# load them as a plug-in (privlab.platform.core.plugins).
os.environ["PRIVLAB_PLUGINS"] = "privlab.mechanisms.basic.diagnostic_workloads"

MINI_SPEC = """
name = "mini"
description = "a small spec covering the grid, trials and actor-pool patterns"
seed = 7

[budget]
epsilon = 1.5

[tracking]
experiment = "mini"

[[study]]
name = "mean"
workload = "laplace_mean"
repetitions = 24
[study.grid]
epsilon = [0.5, 1.0]
n = [50]

[[study]]
name = "loss"
workload = "laplace_privacy_loss"
trials = 3000
[study.grid]
epsilon = [0.5, 1.0]

[[study]]
name = "seeds"
workload = "pd_generation"
[study.params]
toy_records = 1500
accountant = "basic"
k = 10
gamma = 4.0
candidates = 240
batch = 40
"""


@pytest.fixture
def mini_spec(tmp_path: Path) -> Path:
    path = tmp_path / "mini.toml"
    path.write_text(textwrap.dedent(MINI_SPEC))
    return path


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local MLflow store with its tables made, once per session: MLflow's migrations take
    ~1.5 s per new database, and tests make dozens; :func:`tracking_uri` copies this file."""
    from privlab.platform.tracking.tracker import Tracker

    database = tmp_path_factory.mktemp("empty-store") / "mlflow.db"
    Tracker(f"sqlite:///{database}")
    return database


@pytest.fixture
def tracking_uri(tmp_path: Path, empty_store: Path) -> str:
    """A local store of the test's own (``tmp_path/mlflow.db``), tables made, nothing logged."""
    shutil.copyfile(empty_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def new_store(tmp_path: Path, empty_store: Path) -> Callable[[str], str]:
    """Make ``tmp_path/NAME`` a copy of :func:`empty_store`; returns its URI."""

    def make(name: str) -> str:
        shutil.copyfile(empty_store, tmp_path / name)
        return f"sqlite:///{tmp_path / name}"

    return make



@pytest.fixture(scope="session")
def mini_spec_text() -> str:
    return textwrap.dedent(MINI_SPEC)


# --- public datasets ------------------------------------------------------------------------
#
# The public datasets live outside the checkout, in ../shared/data relative to it. A test that
# needs one asks for it through :func:`shared_dataset` (or the ``nvss_10k`` fixture). When the
# file is missing the test is skipped with a reason naming the file, where it is expected and
# why — except under ``CI=true``, where a missing dataset is an error: CI must run these tests,
# and a silent skip there would hide 40-odd end-to-end release tests.

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NVSS_10K_NAME = "nvss/birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def shared_dataset(relative: str) -> Path:
    """The path of a public dataset under ../shared/data; skip (or fail under CI=true) if absent."""
    path = SHARED_DATA / relative
    if path.is_file():
        return path
    reason = (
        f"public dataset {relative!r} is missing: expected at {path} (../shared/data/{relative} relative to "
        f"the checkout {Path(__file__).resolve().parents[1]}); see {SHARED_DATA / relative.split('/')[0]}/README.md"
    )
    if running_in_ci():
        pytest.fail(f"CI=true and {reason}; CI must run the tests that need it, so this is an error, not a skip",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def acs_national() -> Path:
    """The NIST ACS 2019 national excerpt of the ACS example (experiments/acs): skipped with a
    reason when absent, an error under ``CI=true``."""
    return shared_dataset("nist_acs_excerpts/national/national2019.csv")


@pytest.fixture(scope="session")
def nvss_10k() -> Path:
    """The public NVSS 10K births sample (session scope, so it is checked before any module
    fixture reads it): skipped with a reason when absent, an error under ``CI=true``."""
    return shared_dataset(NVSS_10K_NAME)


# --- a disk that fills up under the release transcript ------------------------------------------


class FillingDisk:
    """A transcript file on a disk that fills up: once ``state["full"]`` is set (or more than
    ``state["room"]`` writes were made), writes and flushes fail with ENOSPC, and so does
    ``close`` while bytes are still buffered — what Python's buffered files do on a full tmpfs.
    ``state["refused"]`` counts the refusals."""

    def __init__(self, file: object, state: dict[str, int | bool]) -> None:
        self._file, self._state, self._stuck = file, state, False

    def _refuse(self) -> None:
        self._stuck = True
        self._state["refused"] = int(self._state["refused"]) + 1
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, data: bytes) -> int:
        self._state["writes"] = int(self._state["writes"]) + 1
        if self._state["full"] or self._state["writes"] > self._state["room"]:
            self._refuse()
        return self._file.write(data)  # type: ignore[attr-defined, no-any-return]

    def flush(self) -> None:
        if self._stuck:
            self._refuse()
        self._file.flush()  # type: ignore[attr-defined]

    def fileno(self) -> int:
        return self._file.fileno()  # type: ignore[attr-defined, no-any-return]

    def close(self) -> None:
        self._file.close()  # type: ignore[attr-defined]
        if self._stuck:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def transcript_disk(monkeypatch: pytest.MonkeyPatch) -> dict[str, int | bool]:
    """Every transcript file written during the test lies on a :class:`FillingDisk`; returns its
    state (``full``, ``room`` in writes, ``writes`` and ``refused`` so far). Only the transcript
    module's ``os.fdopen`` is replaced, so nothing else writes to the simulated disk."""
    from privlab.platform.dp import transcript

    state: dict[str, int | bool] = {"full": False, "room": 1 << 30, "writes": 0, "refused": 0}
    fake_os = types.ModuleType("os")
    fake_os.__dict__.update(os.__dict__)
    fake_os.fdopen = (  # type: ignore[attr-defined]
        lambda fd, *args, **kwargs: FillingDisk(os.fdopen(fd, *args, **kwargs), state))
    monkeypatch.setattr(transcript, "os", fake_os)
    return state


# --- a `privlab run` in its own process, for tests that signal it ---------------------------------

PROGRESS_LINE = re.compile(r"^\[[.#=> -]*\]\s+[\d.]+% .*units")


class RunningCommand:
    """``python -m privlab.platform.cli ARGS`` in its own process group, its stderr collected.

    ``started`` is set at the first progress line: it is drawn inside the runner's try block,
    after the parent run exists and the backend is up, so a signal sent then lands where the
    runner handles it. SIGINT is given its default disposition in the child: a test process
    started in the background (nohup, ``cmd &`` in a script) has it ignored, the child would
    inherit that, and Python would install no KeyboardInterrupt handler.
    """

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "privlab.platform.cli", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: list[str] = []
        self.started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if PROGRESS_LINE.match(line):
                self.started.set()

    def wait_started(self, timeout: float = 120) -> None:
        assert self.started.wait(timeout=timeout), "no progress line within 120 s:\n" + self.stderr

    def signal(self, signum: int, *, times: int = 1, gap: float = 0.05) -> None:
        for i in range(times):
            if i:
                time.sleep(gap)
            os.killpg(self.process.pid, signum)

    def finish(self, timeout: float = 60) -> int:
        """Wait for the exit (killing the process if it hangs) and for the last stderr line."""
        try:
            self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        self._reader.join(timeout=60)  # stderr reaches EOF once the process has exited
        assert not self._reader.is_alive()
        return self.process.returncode

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def first_progress_line(self) -> int:
        """The index in :attr:`lines` of the first progress line."""
        return next(i for i, line in enumerate(self.lines) if PROGRESS_LINE.match(line))


@pytest.fixture
def privlab_process() -> Iterator[Callable[..., RunningCommand]]:
    """Start ``privlab ARGS`` in its own process; any still running at the end is killed."""
    started: list[RunningCommand] = []

    def start(*args: str) -> RunningCommand:
        command = RunningCommand(*args)
        started.append(command)
        return command

    yield start
    for command in started:
        if command.process.poll() is None:
            command.process.kill()


# --- a long `privlab run` (cpu_burn) for tests that stop it ------------------------------------

def cpu_burn_spec(name: str, *, checkpoint_interval_s: float | None = None) -> str:
    """A spec named ``name`` (and logged to experiment ``name``) whose 20,000 cpu_burn units take
    far longer than any test waits."""
    interval = "" if checkpoint_interval_s is None else f"checkpoint_interval_s = {checkpoint_interval_s:g}\n"
    return (f'name = "{name}"\nseed = 5\nworkload = "cpu_burn"\ntrials = 20000\n'
            f'[params]\nsize = 40000\nsorts = 4\n[tracking]\nexperiment = "{name}"\n{interval}')


@pytest.fixture
def long_run(tmp_path: Path, privlab_process: Callable[..., RunningCommand]
             ) -> Callable[..., tuple[RunningCommand, str]]:
    """Start ``privlab run`` (serial) on :func:`cpu_burn_spec` with a private store, and wait for
    its first progress line; returns the running command and the tracking URI."""

    def start(name: str, *, checkpoint_interval_s: float | None = None) -> tuple[RunningCommand, str]:
        spec = tmp_path / "spec.toml"
        spec.write_text(cpu_burn_spec(name, checkpoint_interval_s=checkpoint_interval_s))
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        run = privlab_process("run", str(spec), "--serial", "--tracking-uri", uri)
        run.wait_started()
        return run, uri

    return start


# --- an MLflow tracking server backed by a private PostgreSQL server (cluster/) ----------------

CLUSTER_SCRIPTS = Path(__file__).resolve().parents[1] / "cluster"


@dataclass(frozen=True)
class TrackingServer:
    """A running MLflow server on 127.0.0.1 with its PostgreSQL backend store."""

    uri: str                 # http://127.0.0.1:PORT, what `privlab --tracking-uri` takes
    database_dsn: str        # libpq keywords for the role MLflow uses (password included)
    database_port: int
    server_port: int
    artifacts: Path          # the server's artifact destination


def _postgres_bindir() -> Path | None:
    """Where initdb and pg_ctl are, as cluster/mlflow-postgres-setup.sh looks for them."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
        if found and Path(found, "initdb").is_file():
            return Path(found)
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return candidates[-1].parent if candidates else None


def _script(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run(["bash", *args], env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


@pytest.fixture
def postgres_tracking_server() -> Iterator[TrackingServer]:
    """cluster/mlflow-postgres-setup.sh's private PostgreSQL server and cluster/mlflow-server.sh's
    MLflow server, both on 127.0.0.1 and free ports, stopped and removed afterwards.

    Skipped with a reason when the PostgreSQL server binaries (Debian's ``postgresql`` package) or
    the ``psycopg2`` driver (the ``dev`` extra) are missing. The folder is made under /tmp rather
    than in pytest's tmp_path, whose 0700 parents the ``postgres`` OS user (the server refuses to
    run as root) cannot enter.
    """
    if _postgres_bindir() is None:
        pytest.skip("needs the PostgreSQL server binaries (Debian: apt-get install postgresql)")
    pytest.importorskip("psycopg2", reason="needs psycopg2 (pip install -e '.[dev]')")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("as root the PostgreSQL server runs through runuser, which is missing")
    folder = Path(tempfile.mkdtemp(prefix="privlab-pg-"))
    folder.chmod(0o711)
    from privlab.platform.execution.local_cluster import _free_port

    db_port, server_port = _free_port(), _free_port()
    password = secrets.token_urlsafe(24)
    env = {**os.environ, "MLFLOW_DB_PASSWORD": password, "MLFLOW_DB_PORT": str(db_port),
           "MLFLOW_SERVER_PORT": str(server_port), "MLFLOW_SERVER_STATE_DIR": str(folder / "server"),
           "MLFLOW_ARTIFACTS_DESTINATION": str(folder / "artifacts"), "PYTHON": sys.executable}
    instance = folder / "postgres"
    started: list[tuple[str, ...]] = []
    try:
        _script(str(CLUSTER_SCRIPTS / "mlflow-postgres-setup.sh"), "instance-start", str(instance), str(db_port),
                env=env)
        started.append(("mlflow-postgres-setup.sh", "instance-stop", str(instance)))
        _script(str(CLUSTER_SCRIPTS / "mlflow-postgres-setup.sh"), "create",
                env={**env, "PGHOST": str(instance), "PGPORT": str(db_port)})
        _script(str(CLUSTER_SCRIPTS / "mlflow-server.sh"), "start", env=env)
        started.append(("mlflow-server.sh", "stop"))
        yield TrackingServer(
            uri=f"http://127.0.0.1:{server_port}",
            database_dsn=f"host=127.0.0.1 port={db_port} dbname=mlflow user=mlflow password={password}",
            database_port=db_port, server_port=server_port, artifacts=folder / "artifacts")
    finally:
        for script, *args in reversed(started):
            subprocess.run(["bash", str(CLUSTER_SCRIPTS / script), *args], env=env, capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
