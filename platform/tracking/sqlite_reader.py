"""Reading privlab's runs straight from a local sqlite store, without importing MLflow.

``privlab compare`` in a new process spent most of its time importing MLflow (≈2–4 s here) and
opening its store, to read one index artifact. For a local ``sqlite:///`` store whose schema has
the tables read here, :class:`SqliteStoreReader` answers the questions the reading commands ask
(experiments, runs with their tags, params and latest metrics, artifacts in local folders) with
the standard library's sqlite3, read-only; any other store is read through MLflow's client
(:class:`privlab.platform.tracking.tracker.Tracker`). Both return runs shaped like MLflow's (``run.info``,
``run.data``), so the callers do not tell them apart.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import NotFoundError, TrackingError
from privlab.platform.tracking.run_tags import KIND_TAG, PARENT_TAG
from privlab.platform.tracking.sqlite_runs import local_folder

_NEEDED = {
    "experiments": {"experiment_id", "name", "artifact_location", "lifecycle_stage"},
    "runs": {"run_uuid", "status", "start_time", "artifact_uri", "experiment_id", "lifecycle_stage"},
    "tags": {"key", "value", "run_uuid"},
    "params": {"key", "value", "run_uuid"},
    "latest_metrics": {"key", "value", "is_nan", "run_uuid"},
}


@dataclasses.dataclass
class RunInfo:
    run_id: str
    experiment_id: str
    status: str
    start_time: int
    artifact_uri: str


@dataclasses.dataclass
class RunData:
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]


@dataclasses.dataclass
class StoredRun:
    """A run as MLflow's client returns one (``info``, ``data``)."""

    info: RunInfo
    data: RunData


class SqliteStoreReader:
    """The read-only questions of ``compare``, ``report``, ``shortlist`` and ``ledger``, asked of
    a local sqlite store directly."""

    def __init__(self, uri: str, database: Path) -> None:
        self.uri = uri
        self.database = database
        self.connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30.0)

    @classmethod
    def open(cls, uri: str) -> SqliteStoreReader | None:
        """A reader of ``uri``, or None when it is not a local sqlite store this module can read
        (then MLflow's client reads it)."""
        if not uri.startswith("sqlite:///"):
            return None
        database = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
        if not database.is_file():
            return None
        try:
            reader = cls(uri, database)
            for table, columns in _NEEDED.items():
                have = {row[1] for row in reader.connection.execute(f"PRAGMA table_info({table})")}
                if not columns <= have:
                    return None
        except sqlite3.Error:
            return None
        return reader

    # -- experiments ----------------------------------------------------------------------------
    def experiment_names(self) -> list[str]:
        rows = self.connection.execute("SELECT name FROM experiments WHERE lifecycle_stage = 'active'").fetchall()
        return sorted(name for (name,) in rows if name != "Default")

    def require_experiment(self, name: str) -> str:
        """The id of experiment ``name``.

        Raises:
            NotFoundError: no such experiment; the message lists the ones that exist.
        """
        row = self.connection.execute("SELECT experiment_id FROM experiments WHERE name = ? AND lifecycle_stage = "
                                      "'active'", (name,)).fetchone()
        if row is None:
            known = ", ".join(map(repr, self.experiment_names())) or "none yet (`privlab run SPEC` makes one)"
            raise NotFoundError(f"no experiment named {name!r} in {self.uri}; experiments there: {known}")
        return str(row[0])

    # -- runs ---------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> StoredRun:
        runs = self._runs("r.run_uuid = ?", (run_id,))
        if not runs:
            raise NotFoundError(f"no run {run_id!r} in the tracking store {self.uri}; check the id "
                                "(`privlab runs` lists run ids) and --tracking-uri")
        return runs[0]

    def parent_runs(self, experiment_id: str) -> list[StoredRun]:
        return self._runs("r.experiment_id = ? AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND "
                          "t.key = ? AND t.value = 'parent')", (int(experiment_id), KIND_TAG))

    def child_runs(self, experiment_id: str, parent_id: str) -> list[StoredRun]:
        return self._runs("r.experiment_id = ? AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND "
                          "t.key = ? AND t.value = ?)", (int(experiment_id), PARENT_TAG, parent_id))

    def configuration_runs(self, experiment_id: str, parent_id: str, *, finished: bool = True) -> list[StoredRun]:
        """The configuration child runs of ``parent_id`` (only FINISHED ones unless ``finished=False``),
        newest first."""
        return [c for c in self.child_runs(experiment_id, parent_id)
                if (c.info.status == "FINISHED" or not finished) and c.data.tags.get(KIND_TAG) == "configuration"]

    def _runs(self, where: str, arguments: tuple[Any, ...]) -> list[StoredRun]:
        """Active runs matching ``where`` (on ``runs r``), newest first, with tags, params and metrics."""
        rows = self.connection.execute(
            f"SELECT r.run_uuid, r.experiment_id, r.status, r.start_time, r.artifact_uri FROM runs r WHERE {where} "
            "AND r.lifecycle_stage = 'active' ORDER BY r.start_time DESC, r.run_uuid", arguments).fetchall()
        runs = {run_id: StoredRun(RunInfo(run_id, str(experiment), status, start or 0, artifacts or ""),
                                  RunData({}, {}, {})) for run_id, experiment, status, start, artifacts in rows}
        for chunk in _chunks(list(runs), 500):
            marks = ",".join("?" * len(chunk))
            for key, value, run_id in self.connection.execute(
                    f"SELECT key, value, run_uuid FROM tags WHERE run_uuid IN ({marks})", chunk):
                runs[run_id].data.tags[key] = value
            for key, value, run_id in self.connection.execute(
                    f"SELECT key, value, run_uuid FROM params WHERE run_uuid IN ({marks})", chunk):
                runs[run_id].data.params[key] = value
            for key, value, is_nan, run_id in self.connection.execute(
                    f"SELECT key, value, is_nan, run_uuid FROM latest_metrics WHERE run_uuid IN ({marks})", chunk):
                runs[run_id].data.metrics[key] = float("nan") if is_nan else float(value)
        return list(runs.values())

    # -- artifacts ------------------------------------------------------------------------------
    def _artifact_folder(self, run_id: str) -> Path | None:
        """The run's artifact folder; for a store moved with its ``mlruns/`` folder
        (:mod:`~privlab.platform.tracking.moved_store`), the run's folder beside the database."""
        row = self.connection.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        folder = local_folder(row[0]) if row and row[0] else None
        if folder is not None and not folder.is_dir() and len(folder.parts) > 4 and folder.parts[-4] == "mlruns":
            moved = self.database.resolve().parent / "mlruns" / Path(*folder.parts[-3:])
            if moved.is_dir():
                return moved
        return folder

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        folder = self._artifact_folder(run_id)
        if folder is None:
            return []
        where = folder / path if path else folder
        if not where.is_dir():
            return []
        return sorted(str(p.relative_to(folder)) for p in where.iterdir())

    def read_bytes(self, run_id: str, path: str) -> bytes | None:
        folder = self._artifact_folder(run_id)
        try:
            return None if folder is None else (folder / path).read_bytes()
        except OSError:
            return None

    def read_text(self, run_id: str, path: str) -> str | None:
        data = self.read_bytes(run_id, path)
        return None if data is None else data.decode()


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def open_store(uri: str | None) -> Any:
    """A store to read an existing store's runs from: the sqlite reader for a local store it can
    read, else a :class:`~privlab.platform.tracking.tracker.Tracker` (MLflow's client).

    Raises:
        NotFoundError: the URI names a sqlite file that does not exist.
    """
    from privlab.platform.tracking.store_location import existing_store_uri

    resolved = existing_store_uri(uri)
    reader = SqliteStoreReader.open(resolved)
    if reader is not None:
        return reader
    from privlab.platform.tracking.tracker import Tracker

    return Tracker(resolved)
