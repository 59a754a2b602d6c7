"""Checks of a run's tracking store and ``--resume`` id, made before any store is created.

Opening an MLflow store creates it: a sqlite database (with its folders), a file store's
folder, the ``mlruns/`` beside them. So what a run is told about its store is checked first,
and a bad input leaves nothing behind (no ``mlflow.db``, no ``mlruns``, no parent run):

- the URI's scheme is one MLflow can store runs in (``ftp://…`` is bad input, not an outage);
- a local store's folder exists (privlab does not create folders a typo named: ``sqlite:///``
  with missing parent folders is refused, naming the folder);
- ``--resume RUN_ID`` names a run of an existing store: a local store that does not exist yet
  is itself the error, and the run is looked up without creating anything.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from urllib.parse import urlparse

from privlab.platform.core.errors import InputError
from privlab.platform.core.errors import NotFoundError, TrackingError
from privlab.platform.tracking.store_location import sqlite_database
from privlab.platform.tracking.tracker import Tracker

#: The schemes of MLflow's own tracking stores (``mlflow.tracking._tracking_service.utils``);
#: plug-ins add theirs under the ``mlflow.tracking_store`` entry points.
MLFLOW_SCHEMES = frozenset({"", "file", "sqlite", "postgresql", "mysql", "mssql", "http", "https",
                            "databricks", "databricks-uc", "uc"})
_DATABASES = ("postgresql", "mysql", "sqlite", "mssql")  # also with a driver: postgresql+psycopg2://
_NAMED_STORES = frozenset({"databricks", "databricks-uc", "uc"})  # a bare word, not a local path


def uri_source(cli_uri: str | None, spec_uri: str | None) -> str:
    """Where the URI a run uses comes from, for messages (the order :class:`Tracker` resolves it in)."""
    if cli_uri:
        return "--tracking-uri"
    if spec_uri:
        return "the spec's [tracking] uri"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return "MLFLOW_TRACKING_URI"
    return "MLflow's default store in the working folder"


def uri_scheme(uri: str) -> str:
    """The scheme MLflow picks a store by (``''`` for a local path, the database for ``db+driver``)."""
    if uri in _NAMED_STORES:
        return uri
    scheme = urlparse(uri).scheme.lower()
    database = next((db for db in _DATABASES if scheme.startswith(db)), None)
    if database is not None:
        return database
    return "" if len(scheme) == 1 and scheme.isalpha() else scheme  # C:\… is a path


def local_store_path(uri: str) -> Path | None:
    """The file (sqlite) or folder (file store) of a local store; None for a server or an in-memory one."""
    scheme = uri_scheme(uri)
    if uri.startswith("sqlite:///"):
        path = sqlite_database(uri)
        return path if str(path) not in (".", ":memory:") else None
    if scheme == "file":
        return Path(urlparse(uri).path)
    if scheme == "" and uri not in _NAMED_STORES:
        return Path(uri)
    return None


def _supported_schemes() -> frozenset[str]:
    plugins = {entry.name for entry in importlib.metadata.entry_points(group="mlflow.tracking_store")}
    return MLFLOW_SCHEMES | plugins


def check_store_uri(uri: str, *, source: str) -> None:
    """Refuse a URI no store can be opened at, before anything is created.

    Raises:
        InputError: the scheme is not a tracking store's, or the path is a folder where a
            sqlite file should be.
        NotFoundError: the folder a local store would be created in does not exist.
    """
    scheme = uri_scheme(uri)
    if scheme not in _supported_schemes():
        raise InputError(
            f"tracking URI {uri!r} ({source}): MLflow cannot store runs at a {scheme}:// URI; use a "
            "sqlite:///PATH file, a folder, or an http(s):// tracking server (or postgresql://, mysql://)")
    path = local_store_path(uri)
    if path is None:
        return
    if uri.startswith("sqlite:///") and path.exists() and not path.is_file():
        raise InputError(f"tracking URI {uri!r} ({source}): {str(path)!r} is not a file; name the "
                              "database file, e.g. sqlite:///runs/mlflow.db")
    folder = path.parent
    if not folder.is_dir():
        raise NotFoundError(
            f"tracking URI {uri!r} ({source}): the folder {str(folder)!r} does not exist; privlab does not "
            f"create it (a typo would scatter stores): create it (mkdir -p {folder}) or fix the URI")


def existing_store(cli_uri: str | None) -> str:
    """The resolved URI of a store a command only reads or serves (``privlab ui``), checked as a
    run's is (:func:`check_store_uri`) and, when local, required to exist: MLflow would create
    an empty one, or answer a missing ``file:`` store or an ``ftp://`` URI with its own words
    (a model-registry message, a deprecation notice) and exit 4.

    Raises:
        InputError: the scheme is not a tracking store's, or a sqlite path is a folder.
        NotFoundError: a local store (sqlite file or folder) that does not exist.
    """
    from privlab.platform.tracking.store_location import resolve_tracking_uri

    uri = resolve_tracking_uri(cli_uri)
    source = uri_source(cli_uri, None)
    path = local_store_path(uri) if uri_scheme(uri) in _supported_schemes() else None
    if path is not None and not path.exists():
        raise NotFoundError(
            f"no MLflow tracking store at {str(path)!r} ({uri}, {source}); run `privlab run SPEC` in this folder "
            "first, or point --tracking-uri / MLFLOW_TRACKING_URI at the store that holds your runs")
    check_store_uri(uri, source=source)
    return uri


def check_resumable(uri: str, run_id: str, *, source: str) -> None:
    """Check that ``run_id`` is a run of the store at ``uri``, creating no store.

    Raises:
        NotFoundError: the local store does not exist, or it holds no run ``run_id``.
        TrackingError: the store cannot be read (a server down).
    """
    path = local_store_path(uri)
    if path is not None and not path.exists():
        raise NotFoundError(
            f"--resume {run_id}: there is no tracking store at {str(path)!r} ({source}), so no run to resume; "
            "give the --tracking-uri of the store the run was started in (`privlab runs` there lists its ids)")
    from mlflow.exceptions import MlflowException

    tracker = Tracker(uri)  # the store exists: opening it creates no new one
    try:
        tracker.client.get_run(run_id)
    except MlflowException as error:
        if error.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise TrackingError(f"cannot read run {run_id} in the tracking store {uri!r}: {error}") from None
        raise NotFoundError(
            f"--resume {run_id}: no such run in the tracking store {uri} ({source}); give the id `privlab run` "
            "printed (`privlab runs` lists them) and the --tracking-uri it ran with") from None
    except Exception as error:
        raise TrackingError(f"cannot read run {run_id} in the tracking store {uri!r}: {error}") from None
