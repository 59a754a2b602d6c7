"""Finished runs written into a local sqlite MLflow store, a whole batch in one transaction.

Through MLflow's client a configuration run costs a dozen sqlite transactions (create, a
``log_batch`` that opens a session each for params, metrics and tags, dataset inputs, the
artifact upload, terminate), ≈18–40 ms here: one driver could log ≈25–50 configurations per
second. A batch of runs written here is one transaction of multi-row inserts into the tables
MLflow's own store reads (``runs``, ``tags``, ``params``, ``metrics``, ``latest_metrics``,
``inputs``), with the values MLflow would have written, so its UI, search and client see the
same runs. Artifacts are files in the run's artifact folder, written before the transaction
commits: a run is never seen finished without them.

Run ids are 32 hex digits like MLflow's, but ordered by time (milliseconds, then random bits):
each index on ``run_uuid`` then grows at its end, and sqlite packs appended pages full instead
of splitting pages at random (≈⅓ fewer index pages for the same rows).

Used only when the store is a ``sqlite:///`` file whose schema has the columns written here
and whose experiment keeps its artifacts in a local folder (:func:`writable`); anything else
goes through MLflow's client.
"""

from __future__ import annotations

import math
import os
import secrets
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RUN_NAME_TAG = "mlflow.runName"
_COLUMNS = {
    "runs": {"run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id", "status", "start_time",
             "end_time", "source_version", "lifecycle_stage", "artifact_uri", "experiment_id", "deleted_time"},
    "tags": {"key", "value", "run_uuid"},
    "params": {"key", "value", "run_uuid"},
    "metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
    "latest_metrics": {"key", "value", "timestamp", "step", "is_nan", "run_uuid"},
    "inputs": {"input_uuid", "source_type", "source_id", "destination_type", "destination_id", "step"},
    "datasets": {"dataset_uuid", "experiment_id", "name", "digest", "dataset_source_type", "dataset_source",
                 "dataset_schema", "dataset_profile"},
}
_FLOAT_MAX = 1.7976931348623157e308
_last_millis = 0


def time_ordered_run_id() -> str:
    """A new run id: 12 hex digits of milliseconds since the epoch, then 20 random ones."""
    global _last_millis
    millis = max(int(time.time() * 1000), _last_millis)
    _last_millis = millis
    return f"{millis:012x}{secrets.token_hex(10)}"


def local_folder(location: str) -> Path | None:
    """The local folder of an artifact location (a path or a ``file://`` URI; None otherwise)."""
    if location.startswith("file://"):
        return Path(location.removeprefix("file://"))
    if "://" in location or not location.startswith("/"):
        return None
    return Path(location)


class SqliteRunWriter:
    """Writes batches of finished runs of one experiment into a sqlite store's database."""

    def __init__(self, database: Path, experiment_id: str, artifact_root: Path) -> None:
        self.database = database
        self.experiment_id = experiment_id
        self.artifact_root = artifact_root

    @classmethod
    def writable(cls, database: Path, experiment_id: str) -> SqliteRunWriter | None:
        """A writer for the experiment, or None when this store is not one it can write (an
        unknown schema, or artifacts kept elsewhere than in a local folder)."""
        try:
            with _connect(database) as connection:
                for table, columns in _COLUMNS.items():
                    have = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
                    if not columns <= have:
                        return None
                row = connection.execute("SELECT artifact_location FROM experiments WHERE experiment_id = ?",
                                         (int(experiment_id),)).fetchone()
        except (sqlite3.Error, ValueError):
            return None
        folder = local_folder(row[0]) if row and row[0] else None
        return None if folder is None else cls(database, experiment_id, folder)

    def artifact_uri(self, run_id: str) -> str:
        return str(self.artifact_root / run_id / "artifacts")

    def write(self, runs: Sequence[FinishedRun]) -> None:
        """Write ``runs`` (their artifacts first, then every row in one transaction)."""
        for run in runs:
            if run.files:
                write_files(Path(self.artifact_uri(run.run_id)), run.files)
        with _connect(self.database) as connection:
            self._insert(connection, runs)

    def _insert(self, connection: sqlite3.Connection, runs: Sequence[FinishedRun]) -> None:
        run_rows, tag_rows, param_rows, metric_rows, input_rows = [], [], [], [], []
        for run in runs:
            tags = dict(run.tags)
            tags.setdefault(RUN_NAME_TAG, run.name)
            run_rows.append((run.run_id, run.name, "UNKNOWN", "", "", tags.get("mlflow.user", "unknown"), "FINISHED",
                             run.start_millis, run.end_millis, "", "active", self.artifact_uri(run.run_id),
                             int(self.experiment_id), None))
            tag_rows += [(key, str(value), run.run_id) for key, value in tags.items()]
            param_rows += [(key, value, run.run_id) for key, value in run.params.items()]
            for key, value in run.metrics.items():
                is_nan, stored = _metric_value(value)
                metric_rows.append((key, stored, run.end_millis, run.run_id, 0, is_nan))
            for dataset in run.datasets:
                input_rows.append((run.run_id, dataset))
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(
            "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
            "start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id, deleted_time) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", run_rows)
        connection.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", tag_rows)
        connection.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)", param_rows)
        connection.executemany("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                               "VALUES (?, ?, ?, ?, ?, ?)", metric_rows)
        connection.executemany("INSERT INTO latest_metrics (key, value, timestamp, run_uuid, step, is_nan) "
                               "VALUES (?, ?, ?, ?, ?, ?)", metric_rows)
        for run_id, dataset in input_rows:
            self._insert_input(connection, run_id, dataset)
        connection.execute("COMMIT")

    def _insert_input(self, connection: sqlite3.Connection, run_id: str, dataset: Mapping[str, str]) -> None:
        """A dataset input of a run, as MLflow's ``log_inputs`` records it (the dataset once per
        experiment, by name and digest; an edge from it to the run)."""
        row = connection.execute("SELECT dataset_uuid FROM datasets WHERE experiment_id = ? AND name = ? AND digest = ?",
                                 (int(self.experiment_id), dataset["name"], dataset["digest"])).fetchone()
        if row is None:
            dataset_uuid = uuid.uuid4().hex
            connection.execute(
                "INSERT INTO datasets (dataset_uuid, experiment_id, name, digest, dataset_source_type, dataset_source, "
                "dataset_schema, dataset_profile) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (dataset_uuid, int(self.experiment_id), dataset["name"], dataset["digest"], dataset["source_type"],
                 dataset["source"], dataset.get("schema"), dataset.get("profile")))
        else:
            dataset_uuid = row[0]
        connection.execute("INSERT INTO inputs (input_uuid, source_type, source_id, destination_type, destination_id, "
                           "step) VALUES (?, 'DATASET', ?, 'RUN', ?, 0)", (uuid.uuid4().hex, dataset_uuid, run_id))


class FinishedRun:
    """A run to write whole: its id, name, tags, params (text), metrics and artifact files."""

    __slots__ = ("run_id", "name", "tags", "params", "metrics", "files", "datasets", "start_millis", "end_millis")

    def __init__(self, *, run_id: str, name: str, tags: Mapping[str, str], params: Mapping[str, str],
                 metrics: Mapping[str, float], files: Mapping[str, str | bytes],
                 datasets: Sequence[Mapping[str, str]] = (), start_millis: int | None = None,
                 end_millis: int | None = None) -> None:
        now = int(time.time() * 1000)
        self.run_id, self.name, self.tags, self.params = run_id, name, tags, params
        self.metrics, self.files, self.datasets = metrics, files, datasets
        self.start_millis = now if start_millis is None else start_millis
        self.end_millis = now if end_millis is None else end_millis


def write_files(folder: Path, files: Mapping[str, str | bytes]) -> None:
    """Write ``files`` (relative path → content) under ``folder``, each atomically (a reader
    never sees half a file)."""
    for relative, content in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
        if isinstance(content, bytes):
            temporary.write_bytes(content)
        else:
            temporary.write_text(content)
        os.replace(temporary, target)


def _metric_value(value: float) -> tuple[int, float]:
    """(is_nan, stored value) as MLflow's sqlite store keeps a metric: NaN as 0 flagged, ±inf as
    ± the largest float."""
    value = float(value)
    if math.isnan(value):
        return 1, 0.0
    if math.isinf(value):
        return 0, _FLOAT_MAX if value > 0 else -_FLOAT_MAX
    return 0, value


def _connect(database: Path) -> Any:
    """A connection in autocommit mode (transactions are explicit), waiting up to 30 s for a lock."""
    connection = sqlite3.connect(database, timeout=30.0, isolation_level=None)
    return _Closing(connection)


class _Closing:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> sqlite3.Connection:
        return self.connection

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if kind is not None and self.connection.in_transaction:
            self.connection.execute("ROLLBACK")
        self.connection.close()
