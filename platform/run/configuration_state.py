"""What the driver of ``privlab run`` holds for each configuration while it runs, and how it is built.

A :class:`ConfigState` is one configuration's worker context, its planned ledger, its exact
aggregate so far (restored from a checkpoint on resume) and the trial ranges still to submit;
:class:`StateBuilder` builds it when the run reaches the configuration. The run's data (a file
dataset, or a dataset a workload names) is read once, up front (:func:`load_run_data`), and put
in the backend's object store once per study or dataset.

Privacy accounting: each configuration is one candidate release, so its ledger is the plan of
one trial checked against the ``[budget]`` cap before any work.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from privlab.platform.dp.ledger import Ledger
from privlab.platform.execution.aggregation import ConfigAggregate, IntervalSet
from privlab.platform.execution.worker_tasks import UnitContext
from privlab.platform.experiment import registry
from privlab.platform.experiment.datasets import FileDataset, GeneratedDataset
from privlab.platform.experiment.spec import Configuration, ExperimentSpec
from privlab.platform.tracking.run_datasets import DatasetDescription, describe_files, describe_generated


@dataclasses.dataclass
class ConfigState:
    config: Configuration
    context: UnitContext
    aggregate: ConfigAggregate
    ledger: Ledger
    cost_class: str  # units of one class cost about the same (cost_class_of)
    data_ref: Any = None
    started: float | None = None
    finished: bool = False
    cursor: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # ranges still to submit


@dataclasses.dataclass(frozen=True)
class RunData:
    """The data a run's configurations read, loaded and validated before anything is logged."""

    study_frames: Mapping[str, pd.DataFrame]  # study name → its file dataset
    workload_frames: Mapping[str, pd.DataFrame]  # data key → a dataset a workload's parameters name
    config_data_key: Mapping[str, str]  # configuration id → its workload's data key
    # What each configuration read, for MLflow's dataset inputs (run_datasets): configuration id → its
    # dataset's description (configurations on data drawn per trial are not in it).
    config_datasets: Mapping[str, DatasetDescription] = dataclasses.field(default_factory=dict)

    @property
    def datasets(self) -> list[DatasetDescription]:
        """Every dataset the run read, each once, in spec order."""
        return list({(d.name, d.digest): d for d in self.config_datasets.values()}.values())


def load_run_data(spec: ExperimentSpec) -> RunData:
    """Read every file dataset and every dataset a workload names, each once."""
    study_frames = {
        study.name: study.dataset.load() for study in spec.studies if isinstance(study.dataset, FileDataset)
    }
    described: dict[str, DatasetDescription] = {}  # data key (or a study's file) → its description
    workload_frames: dict[str, pd.DataFrame] = {}
    config_data_key: dict[str, str] = {}
    config_datasets: dict[str, DatasetDescription] = {}
    for config in spec.configurations:
        study = spec.study(config.study)
        if isinstance(study.dataset, FileDataset):
            path = str(study.dataset.path)
            if path not in described:
                described[path] = describe_files(path, [study.dataset.path], study_frames[study.name])
            config_datasets[config.id] = described[path]
        if study.dataset is not None:
            continue
        workload = registry.get_workload(config.workload)
        params = registry.build_params(workload.Params, config.params, where=config.id)
        key = workload.data_key(params)
        if key is None:
            continue
        if key not in workload_frames:
            workload_frames[key] = workload.load_data(params)
            files = workload.data_files(params)
            described[key] = (describe_files(key, files, workload_frames[key]) if files
                              else describe_generated(key, workload_frames[key]))
        config_data_key[config.id] = key
        config_datasets[config.id] = described[key]
    return RunData(study_frames=study_frames, workload_frames=workload_frames, config_data_key=config_data_key,
                   config_datasets=config_datasets)


def configurations_to_run(spec: ExperimentSpec, results: dict[str, list[dict[str, Any]]]) -> list[Configuration]:
    """The configurations of ``spec`` not already logged in ``results``, in spec order.

    On resume, a configuration whose facets were only partly logged before the stop is dropped
    from ``results`` and run again; one fully logged has its entries put in facet order.
    """
    to_run = []
    for config in spec.configurations:
        if config.id in results:
            workload = registry.get_workload(config.workload)
            facets = workload.facets(registry.build_params(workload.Params, config.params, where=config.id))
            logged = {entry.get("facet", "") for entry in results[config.id]}
            if logged == (set(facets) or {""}):
                order = list(facets) or [""]
                results[config.id].sort(key=lambda e: order.index(e.get("facet", "")))
                continue
            del results[config.id]  # some facets were not logged before the stop: redo them all
        to_run.append(config)
    return to_run


class StateBuilder:
    """Builds a configuration's :class:`ConfigState` when the run reaches it.

    A state holds a configuration's planned ledger, worker context and accumulators (about 8 KB
    and a hundred objects for a small configuration), so a grid's driver builds each as the
    scheduler reaches its configuration and lets it go once the configuration is logged: it holds
    the states of the configurations in flight, not of the whole grid. A study's or dataset's
    frame is put in the backend's object store when the first state that reads it is built; the
    builder lets go of it when it has built the last (the states hold it while they run).

    Args:
        spec: The run's spec.
        root_seed: The run's root seed.
        data: The run's data (:func:`load_run_data`).
        put: Places a frame in the backend's object store.
        checkpoint: The checkpoint a resume goes on from (None: a new run); a configuration's
            state starts from its checkpointed aggregate.
        configurations: The configurations it will build states for (each at most once).
    """

    def __init__(self, spec: ExperimentSpec, *, root_seed: int, data: RunData, put: Callable[[Any], Any],
                 checkpoint: Mapping[str, Any] | None, configurations: Iterable[Configuration]) -> None:
        self.spec = spec
        self.root_seed = root_seed
        self.data = data
        self.put = put
        self.partial: Mapping[str, Any] = (checkpoint or {}).get("partial", {})
        self.refs: dict[str, Any] = {}
        self.readers: dict[str, int] = {}  # data key → states still to build that read it
        for config in configurations:
            key = self._data_key(config)
            if key is not None:
                self.readers[key] = self.readers.get(key, 0) + 1

    def has_progress(self, config: Configuration) -> bool:
        """Whether the checkpoint holds some of ``config``'s units."""
        return self.units_done(config) > 0

    def units_done(self, config: Configuration) -> int:
        """Units of ``config`` the checkpoint holds as merged."""
        if config.id not in self.partial:
            return 0
        return IntervalSet(tuple(r) for r in self.partial[config.id]["done"]).covered()

    def build(self, config: Configuration) -> ConfigState:
        workload = registry.get_workload(config.workload)
        params = registry.build_params(workload.Params, config.params, where=config.id)
        study = self.spec.study(config.study)
        ledger = workload.declare_partitions(params, self.spec.new_ledger())
        for event in workload.plan(params):
            ledger.spend(event)
        context = UnitContext(
            config_id=config.id,
            workload=config.workload,
            params=config.params,
            dataset=study.dataset if isinstance(study.dataset, GeneratedDataset) else None,
            dataset_params=config.dataset_params,
            metric_kinds=dict(workload.metric_kinds(params)),
            root_seed=self.root_seed,
            study_key=config.study_key,
            config_key=config.config_key,
            ledger_template=ledger.for_trial(),
        )
        aggregate = (ConfigAggregate.from_state(self.partial[config.id]) if config.id in self.partial
                     else context.empty_aggregate())
        state = ConfigState(config=config, context=context, aggregate=aggregate, ledger=ledger,
                            cost_class=_qualified_cost_class(config, workload.cost_class(params)))
        key = self._data_key(config)
        if key is not None:
            if key not in self.refs:
                self.refs[key] = self.put(self._frame(key))
            state.data_ref = self.refs[key]
            self.readers[key] -= 1
            if self.readers[key] == 0:
                del self.refs[key]
        state.cursor = aggregate.done.missing(config.units)
        return state

    def _data_key(self, config: Configuration) -> str | None:
        """``study:NAME`` for a study's file dataset, ``workload:KEY`` for a dataset its workload
        names, None when it reads none (data drawn per trial)."""
        if isinstance(self.spec.study(config.study).dataset, FileDataset):
            return f"study:{config.study}"
        if config.id in self.data.config_data_key:
            return f"workload:{self.data.config_data_key[config.id]}"
        return None

    def _frame(self, key: str) -> pd.DataFrame:
        kind, _, name = key.partition(":")
        return self.data.study_frames[name] if kind == "study" else self.data.workload_frames[name]


def warm_up_workloads(configurations: Iterable[Configuration], *, say: Callable[[str], None] | None = None) -> None:
    """Every configuration's :meth:`~privlab.platform.experiment.registry.Workload.warm_up`, on the driver,
    before the progress bar starts: a kernel compiled here is in numba's on-disk cache when the
    workers load it, and no study stalls behind a compilation. ``say`` is told which workload
    is warming up when that takes more than a second (a first compilation)."""
    by_workload: dict[str, list[Configuration]] = {}
    for config in configurations:
        by_workload.setdefault(config.workload, []).append(config)
    for name, members in by_workload.items():
        workload = registry.get_workload(name)
        note = threading.Timer(1.0, say, args=[f"privlab: preparing {name} (loading its compiled code, or compiling "
                                                 "it on a first run: cached for later runs)"]) if say is not None else None
        if note is not None:
            note.daemon = True
            note.start()
        try:
            for config in members:
                workload.warm_up(registry.build_params(workload.Params, config.params, where=config.id))
        finally:
            if note is not None:
                note.cancel()


def cost_class_of(config: Configuration) -> str:
    """The study and its workload's :meth:`~privlab.platform.experiment.registry.Workload.cost_class`: units of
    one class are taken to cost the same when batches are sized and the time left is estimated."""
    workload = registry.get_workload(config.workload)
    params = registry.build_params(workload.Params, config.params, where=config.id)
    return _qualified_cost_class(config, workload.cost_class(params))


def _qualified_cost_class(config: Configuration, named: str) -> str:
    return f"{config.study}/{named}" if named else config.study


def is_actor_pool(config: Configuration) -> bool:
    return registry.get_workload(config.workload).pattern is registry.Pattern.ACTOR_POOL
