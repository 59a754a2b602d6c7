"""The parent run of a ``privlab run``: started new, or resumed with its lease taken over.

A new parent run records how it was made (version, git commit, root seed, spec hash, command)
and the driver's lease; the spec itself is logged beside it. A resume checks that the run is a
privlab parent run of exactly the same spec, reuses its root seed and takes the lease
(:func:`privlab.platform.tracking.liveness.take_over`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import shlex
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import ExecutionError
from privlab.platform.dp.seeding import fresh_root_seed
from privlab.platform.experiment import registry
from privlab.platform.experiment.spec import ExperimentSpec
from privlab.platform.tracking.liveness import take_over
from privlab.platform.tracking.run_datasets import DatasetDescription
from privlab.platform.tracking.run_tags import RunTags, source_tags, source_tags_of
from privlab.platform.tracking.tracker import Tracker


@dataclasses.dataclass(frozen=True, kw_only=True)
class ParentRun:
    experiment_id: str
    run_id: str
    root_seed: int
    standard_tags: Mapping[str, str] = dataclasses.field(default_factory=dict)  # MLflow's, for its child runs too
    datasets: Mapping[str, DatasetDescription] = dataclasses.field(default_factory=dict)  # config id → what it read


def start_parent_run(
    tracker: Tracker, spec: ExperimentSpec, experiment_id: str, driver: Mapping[str, Any], *, command: str | None,
    datasets: Mapping[str, DatasetDescription] | None = None, now: float | None = None,
) -> ParentRun:
    """A new parent run for ``spec``, driven by ``driver``, named by :func:`run_name`; it
    records MLflow's standard tags and, as dataset inputs, every dataset in ``datasets``
    (configuration id → the dataset it read)."""
    root_seed = spec.seed if spec.seed is not None else fresh_root_seed()
    git_commit = _git_commit(spec.source)
    standard = source_tags(source_name=_source_name(spec, command), git_commit=git_commit)
    datasets = dict(datasets or {})
    params = {
        "spec": spec.name,
        "seed": root_seed,
        "studies": ",".join(s.name for s in spec.studies),
        "configurations": len(spec.configurations),
        "budget.epsilon": spec.budget.epsilon if spec.budget else "uncapped",
    }
    run_id = tracker.start_parent_run(
        experiment_id, name=run_name(spec, now=now), params=params, description=spec.description,
        root_seed=root_seed, mode=spec.mode, spec_name=spec.name, spec_sha256=spec.sha256,
        command=(command or "")[:4000], version=_version(), git_commit=git_commit, driver=driver,
        standard_tags=standard, datasets=list({(d.name, d.digest): d for d in datasets.values()}.values()),
    )
    if spec.tracking.artifacts:
        tracker.log_texts(run_id, {"spec.json": json.dumps(spec.document, indent=2, default=str),
                                   "spec.toml": spec.text})
    tracker.set_default_columns(experiment_id, default_columns(spec))
    return ParentRun(experiment_id=experiment_id, run_id=run_id, root_seed=root_seed, standard_tags=standard,
                     datasets=datasets)


def default_columns(spec: ExperimentSpec) -> list[str]:
    """The metric columns MLflow's runs table opens with under ``privlab ui``: each study's
    headline metric (its workload's first, as its configuration runs log it: ``abs_error_mean``,
    ``accepted_rate``) and the configurations' ε (``eps_configuration``)."""
    from privlab.platform.experiment.registry import MetricKind

    columns: list[str] = []
    for study in spec.studies:
        workload = registry.get_workload(study.workload)
        names = list(study.metrics) or list(workload.metrics)
        if names and names[0] in workload.metrics:
            kind = workload.metrics[names[0]]
            metric = names[0].split("/", 1)[-1]  # a facetted study's runs log a facet's metric bare
            columns.append(f"{metric}_{'rate' if kind == MetricKind.RATE else 'mean'}")
    return [*dict.fromkeys(columns), "eps_configuration"]


def run_name(spec: ExperimentSpec, *, now: float | None = None) -> str:
    """The parent run's name: the spec's name, when it started (local time, to the second) and,
    when ``--set`` changed the spec, the changes (or, if long, a hash of them), so two runs of
    one spec never look the same in MLflow's runs view: ``quickstart 2026-11-26 23:40:05``,
    ``quickstart [trials=100] 2026-11-26 23:41:10``."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    if not spec.overrides:
        return f"{spec.name} {started}"
    text = ", ".join(spec.overrides)
    if len(text) > 60:
        text = "set " + hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{spec.name} [{text}] {started}"


def _source_name(spec: ExperimentSpec, command: str | None) -> str:
    """``mlflow.source.name``: the spec file the run read, else the command that made the spec
    (``privlab audit laplace``)."""
    if spec.source.is_file():
        return str(spec.source)
    words = shlex.split(command or "")[:3]
    return " ".join(words) or "privlab run"


def resume_parent_run(
    tracker: Tracker, spec: ExperimentSpec, experiment_id: str, driver: Mapping[str, Any], *, run_id: str,
    datasets: Mapping[str, DatasetDescription] | None = None,
) -> ParentRun:
    """Parent run ``run_id``, taken over by ``driver`` to go on with ``spec``.

    Raises:
        ExecutionError: The run is not a privlab parent run, was started from another spec, has
            finished, or another driver holds it.
    """
    tags = RunTags.of(tracker.get_run(run_id))
    if tags.kind != "parent":
        raise ExecutionError(f"run {run_id} is not a privlab parent run; resume the id `privlab run` printed")
    if tags.spec_sha256 != spec.sha256:
        raise ExecutionError(
            f"run {run_id} was started from a different spec (or different --set values); "
            "resume with exactly the same spec and overrides, or start a new run"
        )
    root_seed = int(tags.root_seed)  # type: ignore[arg-type]
    take_over(tracker, run_id, driver)
    return ParentRun(experiment_id=experiment_id, run_id=run_id, root_seed=root_seed,
                     standard_tags=source_tags_of(tracker.get_run(run_id)), datasets=dict(datasets or {}))


def _version() -> str:
    try:
        return importlib.metadata.version("privlab")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git_commit(source: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(source.resolve().parent), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
