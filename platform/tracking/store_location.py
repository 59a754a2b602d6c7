"""Where a tracking store is: the URI a command uses, a local sqlite store's database file, its
artifact folder and its lock (no MLflow import: commands that only read a local store use these)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from privlab.platform.core.errors import NotFoundError
from privlab.platform.tracking.moved_store import experiment_folder

log = logging.getLogger(__name__)

def resolve_tracking_uri(uri: str | None) -> str:
    """``uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's default embedded store."""
    if uri:
        return uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return default_tracking_uri()


def default_tracking_uri() -> str:
    """MLflow 3's default store, ``mlflow.db`` in the working directory (as
    ``mlflow.get_tracking_uri()`` names it; said here so that a command that only reads a local
    store need not import MLflow)."""
    return f"sqlite:///{os.path.abspath('mlflow.db')}"


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new experiment's artifacts go: beside a local sqlite store, in ``mlruns/`` next to
    the database file (MLflow's own default is ``./mlruns`` of whatever folder the command runs
    in); None (the server's or store's default) for any other store.

    The experiment's folder is its name with anything but letters, digits, ``.``, ``_`` and
    ``-`` replaced by ``_``; runs get their own subfolders below it, so two names that map to
    the same folder still never share an artifact.
    """
    if not uri.startswith("sqlite:///"):
        return None
    return str(sqlite_database(uri).resolve().parent / "mlruns" / experiment_folder(experiment))


def sqlite_database(uri: str) -> Path:
    """The database file of a ``sqlite:///`` URI."""
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])


def existing_store_uri(uri: str | None) -> str:
    """The resolved tracking URI for a command that only reads (compare, ledger, runs).

    MLflow creates an empty sqlite database on first contact; a command that only reads must
    not leave one behind in whatever folder it was started from, so a local sqlite file that
    does not exist is reported instead (servers and other stores are left to MLflow).

    Raises:
        NotFoundError: the URI names a sqlite file that does not exist.
    """
    resolved = resolve_tracking_uri(uri)
    if resolved.startswith("sqlite:///"):
        path = sqlite_database(resolved)
        if not path.is_file():
            raise NotFoundError(
                f"no MLflow tracking store at {path} ({resolved}); run `privlab run SPEC` in this folder first, "
                "or point --tracking-uri / MLFLOW_TRACKING_URI at the store that holds your runs"
            )
    return resolved


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock while a local sqlite store is created or changed structurally.

    MLflow creates its tables (and Alembic migrates them) on first contact, and two processes
    doing that at once on a new file fail ("table ... already exists", exit 4); creating the same
    experiment at once fails the same way. An ``fcntl`` lock on ``<db>.lock`` beside the database
    serialises both across processes on this machine; other stores (servers) need none.
    """
    if not uri.startswith("sqlite:///"):
        yield
        return
    database = sqlite_database(uri)
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(database.with_name(database.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def make_artifact_root_private(uri: str) -> None:
    """Make ``mlruns/`` beside a local sqlite store 0700 (creating it if needed).

    MLflow writes artifacts with the process's umask (folders 0755, files 0644); under a root only
    the user can enter, results, ledgers and specs stay the user's alone. Other stores keep theirs.
    """
    if not uri.startswith("sqlite:///"):
        return
    root = sqlite_database(uri).resolve().parent / "mlruns"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        root.chmod(0o700)
    except PermissionError:
        log.warning("cannot make the artifact folder %s private (mode 0700): it is not yours", root)
