"""A local sqlite store that was moved (its database and ``mlruns/`` together) keeps working.

MLflow records artifact locations as absolute paths: an experiment's ``artifact_location`` and
every run's ``artifact_uri``. privlab puts a local store's artifacts in ``mlruns/`` beside its
database (:func:`privlab.platform.tracking.store_location.artifact_location`), so after ``mv run run2`` the
database in ``run2`` still points at ``run/mlruns``: a resume cannot read what the run logged
(and would log every configuration again), and new artifacts would re-create the old folder.

:func:`rebase_moved_store` notices this when the store is opened and rewrites the recorded
locations to the ``mlruns/`` beside the database. It touches only what privlab's convention
made and what it can see was moved: an experiment whose location is ``OLD/mlruns/FOLDER``
(``FOLDER`` being the experiment's own folder name) while ``NEW/mlruns/FOLDER`` exists beside
the database. Every location under ``OLD/mlruns/`` (MLflow's ``Default`` experiment included)
is then rewritten in one transaction, under the store's lock.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

FILE_SCHEME = "file://"


@dataclasses.dataclass(frozen=True)
class Rebased:
    """What :func:`rebase_moved_store` rewrote: the old and new ``mlruns`` folders, and counts."""

    old_root: str
    new_root: str
    experiments: int
    runs: int


def experiment_folder(name: str) -> str:
    """The folder of experiment ``name`` under ``mlruns/`` (letters, digits, ``.``, ``_``, ``-``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "experiment"


def _local_path(location: str) -> str:
    return location.removeprefix(FILE_SCHEME) if location.startswith(FILE_SCHEME) else location


def moved_roots(database: Path, locations: list[tuple[str, str]]) -> set[str]:
    """The old ``mlruns`` folders the store's experiments point at although their own folder is
    now beside ``database`` (``locations``: each experiment's name and artifact location)."""
    new_root = database.resolve().parent / "mlruns"
    old_roots = set()
    for name, location in locations:
        path = Path(_local_path(location))
        folder = experiment_folder(name)
        if path.name != folder or path.parent.name != "mlruns":
            continue  # not a location privlab chose
        if path.parent != new_root and (new_root / folder).is_dir():
            old_roots.add(str(path.parent))
    return old_roots


def rebase_moved_store(database: Path) -> list[Rebased]:
    """Point a moved local store's recorded artifact locations at the ``mlruns/`` beside
    ``database``; returns what was rewritten (empty when nothing was moved).

    Must be called under :func:`privlab.platform.tracking.store_location.store_lock`, after MLflow has
    created its tables.
    """
    new_root = str(database.resolve().parent / "mlruns")
    connection = sqlite3.connect(database)
    try:
        with connection:
            locations = connection.execute("SELECT name, artifact_location FROM experiments").fetchall()
            rewritten = []
            for old_root in sorted(moved_roots(database, locations)):
                counts = []
                for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
                    total = 0
                    for prefix in (old_root, FILE_SCHEME + old_root):
                        target = new_root if prefix == old_root else FILE_SCHEME + new_root
                        total += connection.execute(
                            f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                            f"WHERE substr({column}, 1, ?) = ?",
                            (target, len(prefix) + 1, len(prefix) + 1, prefix + "/"),
                        ).rowcount
                    counts.append(total)
                rewritten.append(Rebased(old_root, new_root, *counts))
            return rewritten
    finally:
        connection.close()
