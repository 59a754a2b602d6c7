"""The driver of ``privlab run``: schedules units, merges results, logs, checkpoints, resumes.

Flow: validate the spec (done before this module is reached) → open the tracking store and
create the experiment (driver only, before any worker starts) → start or resume the parent
run → start the backend → load file datasets once and put them in the object store → stream
units with bounded in-flight work (backpressure) → merge each result into its
configuration's aggregate → when a configuration completes, log its child run (one batch)
→ checkpoint every ``checkpoint_interval_s`` and on Ctrl-C → log the parent's tables,
plots and summary.

Batch sizing is adaptive (a short pilot batch, then batches sized to take about
``target_task_seconds``) and never changes results, because aggregation is exact and
order-free (:mod:`privlab.platform.aggregation`) and every trial has its own seed.

Privacy accounting: each configuration is one candidate release, so its ledger is the plan
of one trial checked against the ``[budget]`` cap before any work; the run's ``eps_total``
is the largest configuration total (configurations are alternatives, not compositions).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import io
import json
import logging
import math
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from privlab.platform import registry
from privlab.platform.aggregation import ConfigAggregate
from privlab.platform.backends import make_backend
from privlab.platform.datasets import FileDataset, GeneratedDataset
from privlab.platform.errors import ExecutionError, PrivlabError
from privlab.platform.interrupts import shielded_cleanup
from privlab.platform.ledger import Ledger
from privlab.platform.liveness import take_over, this_driver
from privlab.platform.plots import study_plots
from privlab.platform.reports import REPORT_PREFIX, build_reports, parquet_frame, write_report_dir
from privlab.platform.progress import Progress
from privlab.platform.registry import MetricKind, Pattern
from privlab.platform.seeding import fresh_root_seed
from privlab.platform.spec import Configuration, ExperimentSpec
from privlab.platform.tracking import BackgroundWriter, RunTags, Tracker
from privlab.platform.worker_tasks import UnitContext, build_pool_state, iterate_items

log = logging.getLogger(__name__)

PILOT_UNITS = 4
CHECKPOINT_PATH = "checkpoint/checkpoint.json"
RESULT_PATH = "result.json"
RESERVOIR_PATH = "reservoir.parquet"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    workers: int | None = None
    address: str | None = None
    serial: bool = False  # run in this process without Ray (reference and debugging)
    tracking_uri: str | None = None
    resume: str | None = None
    progress: bool = True
    stop_after_units: int | None = None  # stop cleanly (resumable) after this many units of work
    command: str | None = None  # the command line, recorded on the run and in study reports
    report_dir: Path | None = None  # also write the study reports (markdown, PNG) here
    on_start: Callable[[str], None] | None = None  # told the parent run id as soon as it exists
    on_abandon: Callable[[str], None] | None = None  # told the run id when Ctrl-C abandons the cleanup


class RunInterrupted(PrivlabError):
    """The run stopped before finishing (Ctrl-C or ``stop_after_units``); it can be resumed."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclasses.dataclass
class _ConfigState:
    config: Configuration
    context: UnitContext
    aggregate: ConfigAggregate
    ledger: Ledger
    data_ref: Any = None
    started: float | None = None
    finished: bool = False
    cursor: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # ranges still to submit


def run_experiment(spec: ExperimentSpec, options: RunOptions) -> dict[str, Any]:
    """Run every configuration of ``spec``; returns the run summary (see ``--summary-json``)."""
    return _Driver(spec, options).run()


class _Driver:
    def __init__(self, spec: ExperimentSpec, options: RunOptions) -> None:
        self.spec = spec
        self.options = options
        self.tracker = Tracker(options.tracking_uri or spec.tracking.uri)
        self.writer = BackgroundWriter()
        self.parent_seconds = 0.0
        self.startup_seconds = 0.0
        self.execution_seconds = 0.0
        self.results: dict[str, list[dict[str, Any]]] = {}  # config id → its entries (one per facet)
        self.reservoir_frames: dict[str, pd.DataFrame] = {}
        self.timing: dict[str, dict[str, float]] = {}
        self.states: dict[str, _ConfigState] = {}
        self.units_seen = 0
        self.last_checkpoint = time.perf_counter()
        self.driver = this_driver()

    # -- lifecycle -----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        spec, options = self.spec, self.options
        began = time.perf_counter()
        # File datasets are read and validated before anything is logged or started.
        self.frames = {
            study.name: study.dataset.load() for study in spec.studies if isinstance(study.dataset, FileDataset)
        }
        self._load_workload_data()
        experiment_id = self.tracker.experiment_id(spec.tracking.experiment, create=True)
        checkpoint = self._open_parent(experiment_id)
        if options.on_start is not None:
            options.on_start(self.run_id)
        status = "FAILED"
        backend = None
        try:
            backend = self.backend = make_backend(
                serial=options.serial, address=options.address, workers=options.workers,
                max_retries=spec.execution.max_retries,
            )
            self.tracker.record_backend(self.run_id, workers=backend.workers, nodes=backend.nodes,
                                        backend=backend.name)
            self._prepare(checkpoint)
            study_units: dict[str, int] = {}
            study_done: dict[str, int] = {}
            for s in self.states.values():
                study_units[s.config.study] = study_units.get(s.config.study, 0) + s.config.units
                study_done[s.config.study] = study_done.get(s.config.study, 0) + s.aggregate.done.covered()
            self.progress = Progress(
                sum(study_units.values()), label="units", enabled=options.progress, studies=study_units
            )
            self.progress.configs_total = len(spec.configurations)
            self.progress.resume_from(sum(study_done.values()), studies=study_done)
            self.progress.update(configs_done=len(self.results), force=True)
            self.startup_seconds = time.perf_counter() - began
            executing = time.perf_counter()
            self._run_units()
            self._run_pools()
            self.writer.flush()
            self.execution_seconds = time.perf_counter() - executing
            self.progress.close()
            summary = self._finish_parent(time.perf_counter() - began)
            status = "FINISHED"
            return summary
        except (KeyboardInterrupt, RunInterrupted) as interrupt:
            status = "KILLED"
            # Saving can take a while (a checkpoint, pending tracking writes, stopping Ray); more
            # Ctrl-Cs must not cut it short with a traceback. A third abandons it (exit 130): the
            # run id was printed at start and the lease shows the driver as gone.
            with shielded_cleanup(lambda: self._abandon()):
                self._checkpoint(force=True)
                self.writer.flush()
                self.tracker.mark_interrupted(self.run_id)
                self._close(backend, status)
            if isinstance(interrupt, RunInterrupted):
                raise
            raise RunInterrupted(self.run_id, "interrupted") from None
        except BaseException:
            self._checkpoint(force=True)
            try:
                self.writer.flush()
            except PrivlabError:
                log.exception("tracking failed while saving the checkpoint")
            raise
        finally:
            self._close(backend, status)

    def _close(self, backend: Any, status: str) -> None:
        """Stop the writer and the backend, release the lease and end the parent run (once)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.writer.close()
        if backend is not None:
            backend.shutdown()
        self.tracker.close_parent_run(self.run_id, status)

    def _abandon(self) -> None:
        if self.options.on_abandon is not None:
            self.options.on_abandon(self.run_id)

    def _open_parent(self, experiment_id: str) -> dict[str, Any] | None:
        spec, options = self.spec, self.options
        self.experiment_id = experiment_id
        if options.resume:
            tags = RunTags.of(self.tracker.get_run(options.resume))
            if tags.kind != "parent":
                raise ExecutionError(f"run {options.resume} is not a privlab parent run; resume the id `privlab run` printed")
            if tags.spec_sha256 != spec.sha256:
                raise ExecutionError(
                    f"run {options.resume} was started from a different spec (or different --set values); "
                    "resume with exactly the same spec and overrides, or start a new run"
                )
            self.run_id = options.resume
            self.root_seed = int(tags.root_seed)  # type: ignore[arg-type]
            take_over(self.tracker, self.run_id, self.driver)
            text = self.tracker.read_text(self.run_id, CHECKPOINT_PATH)
            checkpoint = json.loads(text) if text else None
            for child in self.tracker.configuration_runs(experiment_id, self.run_id):
                result = self.tracker.read_text(child.info.run_id, RESULT_PATH)
                if result:
                    entry = json.loads(result)
                    self.results.setdefault(entry.get("config", entry["id"]), []).append(entry)
            return checkpoint
        self.root_seed = spec.seed if spec.seed is not None else fresh_root_seed()
        try:
            version = importlib.metadata.version("privlab")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        params = {
            "spec": spec.name,
            "seed": self.root_seed,
            "studies": ",".join(s.name for s in spec.studies),
            "configurations": len(spec.configurations),
            "budget.epsilon": spec.budget.epsilon if spec.budget else "uncapped",
        }
        self.run_id = self.tracker.start_parent_run(
            experiment_id, name=f"{spec.name}", params=params, description=spec.description, root_seed=self.root_seed,
            mode=spec.mode, spec_name=spec.name, spec_sha256=spec.sha256, command=(options.command or "")[:4000],
            version=version, git_commit=_git_commit(spec.source), driver=self.driver,
        )
        if spec.tracking.artifacts:
            self.tracker.log_texts(self.run_id, {"spec.json": json.dumps(spec.document, indent=2, default=str),
                                                 "spec.toml": spec.text})
        return None

    # -- preparation ---------------------------------------------------------------------
    def _load_workload_data(self) -> None:
        """Datasets named by workloads' parameters: each read and validated once, up front."""
        self.workload_frames: dict[str, pd.DataFrame] = {}
        self.config_data_key: dict[str, str] = {}
        for config in self.spec.configurations:
            if self.spec.study(config.study).dataset is not None:
                continue
            workload = registry.get_workload(config.workload)
            params = registry.build_params(workload.Params, config.params, where=config.id)
            key = workload.data_key(params)
            if key is None:
                continue
            if key not in self.workload_frames:
                self.workload_frames[key] = workload.load_data(params)
            self.config_data_key[config.id] = key

    def _prepare(self, checkpoint: dict[str, Any] | None) -> None:
        spec = self.spec
        partial = (checkpoint or {}).get("partial", {})
        file_refs: dict[str, Any] = {}
        for config in spec.configurations:
            workload = registry.get_workload(config.workload)
            params = registry.build_params(workload.Params, config.params, where=config.id)
            if config.id in self.results:
                facets = workload.facets(params)
                logged = {entry.get("facet", "") for entry in self.results[config.id]}
                if logged == (set(facets) or {""}):
                    order = list(facets) or [""]
                    self.results[config.id].sort(key=lambda e: order.index(e.get("facet", "")))
                    continue
                del self.results[config.id]  # some facets were not logged before the stop: redo them all
            study = spec.study(config.study)
            ledger = spec.new_ledger()
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
                ledger_template=ledger.fresh(),
            )
            aggregate = (
                ConfigAggregate.from_state(partial[config.id]) if config.id in partial else context.empty_aggregate()
            )
            state = _ConfigState(config=config, context=context, aggregate=aggregate, ledger=ledger)
            if isinstance(study.dataset, FileDataset):
                if study.name not in file_refs:
                    file_refs[study.name] = self.backend.put(self.frames[study.name])
                state.data_ref = file_refs[study.name]
            elif config.id in self.config_data_key:
                key = f"workload:{self.config_data_key[config.id]}"
                if key not in file_refs:
                    file_refs[key] = self.backend.put(self.workload_frames[self.config_data_key[config.id]])
                state.data_ref = file_refs[key]
            state.cursor = aggregate.done.missing(config.units)
            self.states[config.id] = state

    # -- grid and trials -------------------------------------------------------------------
    def _run_units(self) -> None:
        pending = [s for s in self.states.values() if registry.get_workload(s.config.workload).pattern is not Pattern.ACTOR_POOL]
        seconds_per_unit: dict[str, float] = {}
        capacity = self.backend.workers * self.spec.execution.max_in_flight_per_worker
        in_flight: dict[Any, tuple[_ConfigState, int, int]] = {}
        queue = list(pending)
        pilots: dict[str, int] = {}

        def next_unit() -> tuple[_ConfigState, int, int] | None:
            while queue:
                state = queue[0]
                if not state.cursor:
                    queue.pop(0)
                    continue
                start, stop = state.cursor[0]
                size = self._batch_size(state, seconds_per_unit, pilots, queue)
                if size is None:
                    return None
                limit = self.options.stop_after_units
                if limit is not None:  # no batch may cross --max-units: stop after exactly that many
                    allowance = limit - self.units_seen - sum(e - s for _, s, e in in_flight.values())
                    if allowance <= 0:
                        return None
                    size = min(size, allowance)
                end = min(stop, start + size)
                if end == stop:
                    state.cursor.pop(0)
                else:
                    state.cursor[0] = (end, stop)
                return state, start, end
            return None

        for state in pending:
            self._maybe_complete(state)
        try:
            while True:
                while len(in_flight) < capacity:
                    unit = next_unit()
                    if unit is None:
                        break
                    state, start, end = unit
                    if state.started is None:
                        state.started = time.perf_counter()
                    handle = self.backend.submit_trials(state.context, start, end, state.data_ref)
                    in_flight[handle] = unit
                if not in_flight:
                    break
                for handle in self.backend.wait(list(in_flight), timeout=1.0):
                    state, start, end = in_flight.pop(handle)
                    try:
                        result = self.backend.result(handle)
                    except PrivlabError:
                        raise
                    except Exception as error:
                        raise ExecutionError(
                            f"{state.config.id} units [{start}, {end}) failed: {type(error).__name__}: {error}"
                        ) from error
                    study = state.config.study
                    measured = max(result.compute_seconds / max(end - start, 1), 1e-7)
                    seconds_per_unit[study] = measured if study not in seconds_per_unit else 0.5 * (seconds_per_unit[study] + measured)
                    state.aggregate.merge(result)
                    self._log_unit_runs(state, result.unit_records)
                    self._after_result(state, end - start, seconds=result.compute_seconds)
                self._checkpoint()
        finally:
            self.backend.cancel(list(in_flight))
            for handle, (state, start, end) in in_flight.items():
                # Units that did not come back are submitted again on resume.
                state.cursor.insert(0, (start, end))

    def _log_unit_runs(self, state: _ConfigState, records: list[tuple[int, dict[str, float]]]) -> None:
        """One MLflow run per unit of a ``unit_runs`` workload (e.g. each release-flow attempt)."""
        config = state.config
        for index, metrics in records:
            self.writer.submit(functools.partial(
                self.tracker.log_unit_run, self.experiment_id, parent_id=self.run_id,
                name=f"{config.label()[:200]} #{index}",
                params=config.flat_params() | {"workload": config.workload, "study": config.study, "unit": index},
                metrics=metrics, config_id=config.id, unit=index, study=config.study, workload=config.workload,
                root_seed=self.root_seed, mode=self.spec.mode,
            ))

    def _batch_size(self, state: _ConfigState, spu: dict[str, float], pilots: dict[str, int], queue: list[_ConfigState]) -> int | None:
        execution = self.spec.execution
        if execution.batch_size is not None:
            return execution.batch_size
        study = state.config.study
        if study not in spu:
            # Pilot batches measure the cost of a unit; at most one per worker until one returns.
            if pilots.get(study, 0) >= self.backend.workers:
                return None
            pilots[study] = pilots.get(study, 0) + 1
            return PILOT_UNITS
        size = max(1, int(execution.target_task_seconds / spu[study]))
        remaining = sum(b - a for s in queue for a, b in s.cursor)
        balance = max(1, math.ceil(remaining / (self.backend.workers * 4)))
        return min(size, balance)

    def _after_result(self, state: _ConfigState, units: int, *, seconds: float | None = None) -> None:
        self.units_seen += units
        self.progress.update(units, study=state.config.study, seconds=seconds)
        self._maybe_complete(state)
        limit = self.options.stop_after_units
        if limit is not None and self.units_seen >= limit:
            raise RunInterrupted(self.run_id, f"stopped after {self.units_seen:,} units of work as asked")

    def _maybe_complete(self, state: _ConfigState) -> None:
        if state.finished or state.aggregate.done.covered() < state.config.units:
            return
        state.finished = True
        self._log_configuration(state)
        self.progress.update(configs_done=len(self.results), force=True)

    # -- actor pool ---------------------------------------------------------------------
    def _run_pools(self) -> None:
        for state in self.states.values():
            if state.finished or registry.get_workload(state.config.workload).pattern is not Pattern.ACTOR_POOL:
                continue
            self._run_pool(state)

    def _run_pool(self, state: _ConfigState) -> None:
        backend, context = self.backend, state.context
        state.started = time.perf_counter()
        data = None
        if state.data_ref is not None:
            data = state.data_ref if self.options.serial else _ray_get(state.data_ref)
        state_ref = backend.put(build_pool_state(context, data))
        actors = backend.create_pool(backend.workers)
        per_actor = self.spec.execution.max_in_flight_per_worker
        load = {i: 0 for i in range(len(actors))}
        done_items = state.aggregate.done.covered()
        next_emit = done_items
        offset = int(max((acc.count for acc in state.aggregate.metrics.values()), default=0))
        items = iterate_items(context)
        for _ in range(done_items):  # the stream is deterministic: skip what is already merged
            next(items)
        index = done_items
        exhausted = index >= state.config.units
        in_flight: dict[Any, int] = {}
        buffer: dict[int, tuple[dict[str, Any], float]] = {}
        try:
            while True:
                while not exhausted:
                    actor_id = min(load, key=load.__getitem__)
                    if load[actor_id] >= per_actor:
                        break
                    try:
                        item = next(items)
                    except StopIteration:
                        exhausted = True
                        break
                    handle = backend.submit_item(actors[actor_id], context, state_ref, item, index)
                    in_flight[handle] = actor_id
                    load[actor_id] += 1
                    index += 1
                    exhausted = exhausted or index >= state.config.units
                if not in_flight:
                    break
                for handle in backend.wait(list(in_flight), timeout=1.0):
                    actor_id = in_flight.pop(handle)
                    load[actor_id] -= 1
                    item_index, arrays, seconds = backend.result(handle)
                    buffer[item_index] = (arrays, seconds)
                while next_emit in buffer:  # emit in item order, whatever order they finished in
                    arrays, seconds = buffer.pop(next_emit)
                    length = len(next(iter(arrays.values()))) if arrays else 0
                    state.aggregate.add_batch(arrays, offset + np_arange(length))
                    state.aggregate.done.add(next_emit, next_emit + 1)
                    state.aggregate.compute_seconds += seconds
                    offset += length
                    next_emit += 1
                    self._after_result(state, 1, seconds=seconds)
                self._checkpoint()
        finally:
            backend.cancel(list(in_flight))
            backend.release_pool(actors)
        if next_emit != state.config.units:
            raise ExecutionError(
                f"{state.config.id}: the workload's item stream yielded {next_emit} items but item_count() "
                f"declared {state.config.units}"
            )

    # -- logging -------------------------------------------------------------------------
    def _log_configuration(self, state: _ConfigState) -> None:
        """Log a finished configuration: one MLflow child run (and summary entry) per facet."""
        config = state.config
        study = self.spec.study(config.study)
        workload = registry.get_workload(config.workload)
        summary = state.aggregate.summary()
        params = registry.build_params(workload.Params, config.params, where=config.id)
        derived = workload.derive(params, summary)
        kinds = workload.metric_kinds(params)
        metrics = flatten_metrics(summary, kinds, study.metrics or (*kinds, *derived), derived)
        # Metrics that measure time ("timing_*") vary run to run: keep them out of the results.
        measured = {k: v for k, v in metrics.items() if k.startswith("timing_")}
        metrics = {k: v for k, v in metrics.items() if not k.startswith("timing_")}
        ledger_metrics = {"eps_total": state.ledger.total().epsilon, "delta_total": state.ledger.total().delta}
        for i, event in enumerate(state.ledger.events):
            ledger_metrics[f"eps_step_{i:02d}_{_metric_safe(event.name)}"] = event.effective_epsilon
        wall = time.perf_counter() - (state.started or time.perf_counter())
        timing = {"wall_seconds": wall, "compute_seconds": state.aggregate.compute_seconds,
                  "nodes": float(len(state.aggregate.nodes))} | {k.removeprefix("timing_"): v for k, v in measured.items()}
        reservoirs = {name: acc.reservoir() for name, acc in state.aggregate.metrics.items() if acc.count}
        facets = workload.facets(params) or {"": {}}
        entries = []
        for facet, facet_params in facets.items():
            entry_id = f"{config.id}.{facet}" if facet else config.id
            entry = {
                "id": entry_id,
                "study": config.study,
                "workload": config.workload,
                "label": " ".join(filter(None, (config.label(), _facet_label(facet_params)))),
                "units": config.units,
                "params": config.flat_params() | dict(facet_params),
                "grid_point": dict(config.grid_point) | dict(facet_params),
                "metrics": split_facet(metrics, facet, facets) | ledger_metrics,
                "ledger": json.loads(state.ledger.to_json()),
            }
            if facet:
                entry["config"] = config.id
                entry["facet"] = facet
            files: dict[str, str | bytes] = {RESULT_PATH: json.dumps(entry, indent=2, default=str)}
            if self.spec.tracking.artifacts:
                files["ledger.json"] = state.ledger.to_json()
                files["ledger.txt"] = state.ledger.render_table()
                kept = split_facet(reservoirs, facet, facets)
                if kept:
                    frame = pd.DataFrame({k: pd.Series(v) for k, v in kept.items()})
                    self.reservoir_frames[entry_id] = frame
                    files[RESERVOIR_PATH] = _parquet_bytes(frame)
            child_params = entry["params"] | {"workload": config.workload, "study": config.study, "units": config.units}
            child_metrics = entry["metrics"] | {f"timing_{k}": v for k, v in timing.items()}
            self.writer.submit(functools.partial(
                self.tracker.log_configuration_run, self.experiment_id, parent_id=self.run_id,
                name=entry["label"][:250], params=child_params, metrics=child_metrics, files=files,
                config_id=entry_id, group=config.id, study=config.study, workload=config.workload,
                root_seed=self.root_seed, mode=self.spec.mode,
            ))
            entries.append(entry)
        self.results[config.id] = entries
        self.timing[config.id] = timing

    def _finish_parent(self, wall_seconds: float) -> dict[str, Any]:
        spec = self.spec
        ordered = [entry for c in spec.configurations for entry in self.results[c.id]]
        epsilons = [e["metrics"]["eps_total"] for e in ordered]
        deltas = [e["metrics"]["delta_total"] for e in ordered]
        summary = {
            "run_id": self.run_id,
            "experiment": spec.tracking.experiment,
            "spec": spec.name,
            "spec_sha256": spec.sha256,
            "root_seed": self.root_seed,
            "mode": spec.mode,
            "epsilon_total": max(epsilons, default=0.0),
            "delta_total": max(deltas, default=0.0),
            "budget": dataclasses.asdict(spec.budget) if spec.budget else None,
            "configurations": ordered,
            "timing": {
                "wall_seconds": wall_seconds,
                "startup_seconds": self.startup_seconds,
                "execution_seconds": self.execution_seconds,
                "workers": self.backend.workers,
                "ray_nodes": self.backend.nodes,
                "backend": self.backend.name,
                "configurations": self.timing,
            },
        }
        parent_began = time.perf_counter()
        table = results_table(ordered)
        self.tracker.mark_complete(self.run_id, {
            "eps_total": summary["epsilon_total"], "delta_total": summary["delta_total"],
            "configurations_done": float(len(ordered)), "timing_wall_seconds": wall_seconds,
        })
        files: dict[str, str | bytes] = {"summary.json": json.dumps(summary, indent=2, default=str)}
        if spec.tracking.artifacts:
            files["results.parquet"] = _parquet_bytes(table)
            files["results.csv"] = table.to_csv(index=False)
        if spec.tracking.artifacts and spec.tracking.plots:
            for name, png in study_plots(spec, ordered).items():
                files[f"plots/{name}"] = png
        reports = build_reports(summary, self._reservoir_of, command=self.options.command)
        if spec.tracking.artifacts:
            files.update({f"{REPORT_PREFIX}/{name}": content for name, content in reports.items()})
        self.tracker.log_texts(self.run_id, files)
        if self.options.report_dir is not None:
            write_report_dir(reports, self.options.report_dir)
        self.parent_seconds = time.perf_counter() - parent_began
        # Where the results went (not part of the logged summary.json: it describes the store itself).
        summary["tracking"] = {"uri": self.tracker.uri,
                               "artifacts": self.tracker.get_run(self.run_id).info.artifact_uri}
        summary["timing"]["tracking_seconds"] = self.tracker.seconds
        summary["timing"]["tracking_blocked_seconds"] = self.writer.blocked_seconds + self.parent_seconds
        return summary

    def _reservoir_of(self, config_id: str) -> pd.DataFrame | None:
        """A configuration's reservoir sample: kept in memory, or read back after a resume."""
        if config_id not in self.reservoir_frames and self.spec.tracking.artifacts:
            child = next((c for c in self.tracker.configuration_runs(self.experiment_id, self.run_id)
                          if RunTags.of(c).config_id == config_id), None)
            frame = parquet_frame(self.tracker.read_bytes(child.info.run_id, RESERVOIR_PATH)) if child else None
            if frame is not None:
                self.reservoir_frames[config_id] = frame
        return self.reservoir_frames.get(config_id)

    def _checkpoint(self, *, force: bool = False) -> None:
        interval = self.spec.tracking.checkpoint_interval_s
        now = time.perf_counter()
        if not force and now - self.last_checkpoint < interval:
            return
        self.last_checkpoint = now
        partial = {
            cid: s.aggregate.state() for cid, s in self.states.items()
            if not s.finished and s.aggregate.done.covered() > 0
        }
        payload = {"spec_sha256": self.spec.sha256, "root_seed": self.root_seed, "partial": partial,
                   "completed": sorted(self.results)}
        text = json.dumps(payload)
        self.writer.submit(lambda: self.tracker.log_texts(self.run_id, {CHECKPOINT_PATH: text}))
        self.writer.submit(lambda: self.tracker.heartbeat(self.run_id))


def np_arange(length: int) -> Any:
    import numpy as np

    return np.arange(length, dtype=np.int64)


def _ray_get(ref: Any) -> Any:
    import ray

    return ray.get(ref)


def flatten_metrics(
    summary: Mapping[str, Mapping[str, float]],
    kinds: Mapping[str, MetricKind],
    selected: tuple[str, ...],
    derived: Mapping[str, float],
) -> dict[str, float]:
    """``{metric}_{statistic}`` for the selected aggregated metrics, plus derived metrics."""
    flat: dict[str, float] = {}
    for name in selected:
        if name in summary:
            for statistic, value in summary[name].items():
                flat[f"{name}_{statistic}"] = float(value)
        elif name in derived:
            flat[name] = float(derived[name])
    return flat


def split_facet(values: Mapping[str, Any], facet: str, facets: Mapping[str, Any]) -> dict[str, Any]:
    """The values of one facet, renamed: ``"{facet}/{name}"`` becomes ``name``; values that
    belong to no facet are shared by all. Without facets (``facet == ""``) nothing changes."""
    if not facet:
        return dict(values)
    out: dict[str, Any] = {}
    for key, value in values.items():
        owner, sep, name = key.partition("/")
        if sep and owner in facets:
            if owner == facet:
                out[name] = value
        else:
            out[key] = value
    return out


def _facet_label(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def results_table(entries: list[Mapping[str, Any]]) -> pd.DataFrame:
    rows = []
    for entry in entries:
        row = {"config_id": entry["id"], "study": entry["study"], "workload": entry["workload"]}
        row.update({k: (v if isinstance(v, (int, float, str)) else json.dumps(v)) for k, v in entry["params"].items()})
        row.update(entry["metrics"])
        rows.append(row)
    frame = pd.DataFrame(rows)
    for column in frame.columns:  # a column mixing numbers and text (depth 1, 2, "unlimited") → text
        if frame[column].dtype == object and not all(isinstance(v, str) or v is None for v in frame[column]):
            frame[column] = frame[column].map(lambda v: v if v is None else str(v))
    return frame


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
    return buffer.getvalue()


def _metric_safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in name)


def _git_commit(source: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(source.resolve().parent), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


ProgressCallback = Callable[[int], None]
