"""The tags of privlab's MLflow runs: every ``privlab.*`` tag is named here, and only here.

Other modules write them through :class:`~privlab.platform.tracking.tracker.Tracker`'s methods
and read them as :class:`RunTags`; ``tests/test_layout.py`` checks that no other module spells
one (a typo there would write a tag nothing reads).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

# Every privlab.* tag a run carries is named here, and only here.
KIND_TAG = "privlab.kind"  # parent | configuration | unit
CONFIG_TAG = "privlab.config_id"
GROUP_TAG = "privlab.config_group"  # the executed configuration a facet's child run belongs to
STATUS_TAG = "privlab.status"  # running | interrupted | complete
RESUMABLE_TAG = "privlab.resumable"
ROOT_SEED_TAG = "privlab.root_seed"
MODE_TAG = "privlab.mode"
SPEC_NAME_TAG = "privlab.spec_name"
SPEC_SHA256_TAG = "privlab.spec_sha256"
COMMAND_TAG = "privlab.command"
VERSION_TAG = "privlab.version"
GIT_COMMIT_TAG = "privlab.git_commit"
WORKERS_TAG = "privlab.workers"
RAY_NODES_TAG = "privlab.ray_nodes"
BACKEND_TAG = "privlab.backend"
UNIT_TAG = "privlab.unit"
STUDY_TAG = "privlab.study"
WORKLOAD_TAG = "privlab.workload"
DRIVER_TAG = "privlab.driver"  # the lease: who drives the run (platform/tracking/liveness.py)
HEARTBEAT_TAG = "privlab.heartbeat"
LEDGER_TAG = "privlab.ledger"  # a configuration run's ε ledger as a table (ledger.txt when too long)
PARENT_TAG = "mlflow.parentRunId"
# MLflow's own tags, which its UI shows (the User and Source columns) and its fluent API sets.
USER_TAG = "mlflow.user"
SOURCE_NAME_TAG = "mlflow.source.name"
SOURCE_TYPE_TAG = "mlflow.source.type"
SOURCE_GIT_COMMIT_TAG = "mlflow.source.git.commit"
SOURCE_TAGS = (USER_TAG, SOURCE_NAME_TAG, SOURCE_TYPE_TAG, SOURCE_GIT_COMMIT_TAG)
# An experiment's kind decides where MLflow 3's UI opens it: without it an experiment with no
# traces opens in the GenAI view ("Traces 0"), privlab's runs hidden behind a toggle.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
# The metric columns `privlab ui` shows by default in an experiment's runs table (JSON list of
# metric names: each study's headline metric and the configurations' ε; platform/cli/ui_app.py).
DEFAULT_COLUMNS_TAG = "privlab.default_columns"


def source_tags(*, source_name: str, git_commit: str | None, source_type: str = "LOCAL") -> dict[str, str]:
    """MLflow's standard tags of a run: who ran it (``mlflow.user``), from what (the spec's path,
    or the command), how (``LOCAL``) and at which git commit (when known)."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        user = "unknown"
    tags = {USER_TAG: user, SOURCE_NAME_TAG: source_name[:500], SOURCE_TYPE_TAG: source_type}
    if git_commit and git_commit != "unknown":
        tags[SOURCE_GIT_COMMIT_TAG] = git_commit
    return tags


def source_tags_of(run: Any) -> dict[str, str]:
    """The standard tags a run records (:func:`source_tags`), to give its child runs the same."""
    return {key: run.data.tags[key] for key in SOURCE_TAGS if key in run.data.tags}


def driver_tags(driver: Mapping[str, Any], *, now: float | None = None) -> dict[str, str]:
    """The tags that record ``driver`` (a lease, :mod:`privlab.platform.tracking.liveness`) as the run's
    driver, with a fresh heartbeat."""
    return {DRIVER_TAG: json.dumps(dict(driver), sort_keys=True), **heartbeat_tag(now=now)}


def heartbeat_tag(*, now: float | None = None) -> dict[str, str]:
    return {HEARTBEAT_TAG: f"{time.time() if now is None else now:.0f}"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunTags:
    """What privlab's tags say about a run (None where a tag is absent)."""

    kind: str | None  # parent | configuration | unit
    config_id: str | None
    study: str | None
    workload: str | None
    status: str | None  # running | interrupted | complete
    root_seed: str | None
    spec_name: str | None
    spec_sha256: str | None
    command: str | None

    @classmethod
    def of(cls, run: Any) -> RunTags:
        tags = run.data.tags
        return cls(kind=tags.get(KIND_TAG), config_id=tags.get(CONFIG_TAG), study=tags.get(STUDY_TAG),
                   workload=tags.get(WORKLOAD_TAG), status=tags.get(STATUS_TAG), root_seed=tags.get(ROOT_SEED_TAG),
                   spec_name=tags.get(SPEC_NAME_TAG), spec_sha256=tags.get(SPEC_SHA256_TAG),
                   command=tags.get(COMMAND_TAG))
