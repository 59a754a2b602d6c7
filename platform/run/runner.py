"""The driver of ``privlab run``: the order in which a run's jobs happen.

Flow: validate the spec (done before this module is reached) → read the run's data → start the
backend while another thread opens the tracking store (MLflow's import and the store's opening
overlap Ray's start-up; workers never touch the store) → create the experiment and start or
resume the parent run → prepare each configuration's state → run the
trial ranges, then the actor pools → log each configuration's child run as it completes →
checkpoint every ``checkpoint_interval_s`` and on Ctrl-C → log the parent's summary, tables,
plots and reports → release the lease and end the parent run.

Each job has a module of its own: :mod:`~privlab.platform.run.parent_run` (start, resume),
:mod:`~privlab.platform.tracking.liveness` (the lease), :mod:`~privlab.platform.run.configuration_state`
(data and per-configuration state), :mod:`~privlab.platform.run.trial_scheduler` (batch sizing,
backpressure, ``--max-units``), :mod:`~privlab.platform.run.actor_pool_execution`,
:mod:`~privlab.platform.run.configuration_log` (entries and child runs),
:mod:`~privlab.platform.run.checkpoints`, :mod:`~privlab.platform.run.run_summary`; every tag is written
by :class:`~privlab.platform.tracking.tracker.Tracker`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import importlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import PrivlabError, SpecError, TrackingOutage
from privlab.platform.execution.aggregation import ConfigAggregate
from privlab.platform.execution.backends import Backend, make_backend
from privlab.platform.execution.interrupts import shielded_cleanup
from privlab.platform.execution.progress import Progress
from privlab.platform.experiment.spec import Configuration, ExperimentSpec
from privlab.platform.run import outbox
from privlab.platform.run.actor_pool_execution import run_actor_pool
from privlab.platform.run.checkpoints import Checkpointer, checkpoint_payload, read_checkpoint
from privlab.platform.run.configuration_log import ConfigurationLog
from privlab.platform.run.configuration_state import (
    ConfigState,
    RunData,
    StateBuilder,
    configurations_to_run,
    cost_class_of,
    is_actor_pool,
    load_run_data,
    warm_up_workloads,
)
from privlab.platform.run.parent_run import ParentRun, resume_parent_run, start_parent_run
from privlab.platform.run.run_events import RunLifecycle
from privlab.platform.run.run_summary import RunTiming, finish_run
from privlab.platform.run.trial_scheduler import TrialScheduler, UnitLimit
from privlab.platform.tracking.background_writer import BackgroundWriter
from privlab.platform.tracking.liveness import this_driver
from privlab.platform.tracking.store_checks import check_resumable, check_store_uri, uri_source
from privlab.platform.tracking.store_location import resolve_tracking_uri
from privlab.platform.tracking.tracker import Tracker
from privlab.platform.tracking.tracking_outage import is_unreachable

log = logging.getLogger(__name__)


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
    lifecycle: RunLifecycle | None = None  # told when the parent run exists and when its cleanup is abandoned

    def __post_init__(self) -> None:
        for name in ("workers", "stop_after_units"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise SpecError(f"{name} ({value!r}) must be a positive integer")


class RunInterrupted(PrivlabError):
    """The run stopped before finishing (Ctrl-C or ``stop_after_units``); it can be resumed.

    ``requested`` is True when the stop was the one asked for (``stop_after_units``), False for
    an interruption (Ctrl-C, SIGTERM).
    """

    def __init__(self, run_id: str, message: str, *, requested: bool = False) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.requested = requested


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # beside the progress bar, which stderr also shows


def run_experiment(spec: ExperimentSpec, options: RunOptions) -> dict[str, Any]:
    """Run every configuration of ``spec``; returns the run summary (see ``--summary-json``).

    Raises:
        NotFoundError, InputError: the tracking store's folder, or the run to resume, does not
            exist, or the URI is no store's (:mod:`~privlab.platform.tracking.store_checks`); nothing is
            created then.
    """
    check_store(spec, options)
    began = time.perf_counter()
    phases = {"before_run": process_age()}  # Python's start, imports, the spec
    data = load_run_data(spec)  # read and validated before a store is opened (and so created)
    phases["data"] = time.perf_counter() - began
    return _Driver(spec, options, phases).run(data, began=began)


def process_age() -> float:
    """Seconds since this process started (Linux's /proc; 0 where it cannot be read)."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started = int(stat.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
            return max(float(uptime.read().split()[0]) - started, 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


def check_store(spec: ExperimentSpec, options: RunOptions) -> None:
    """Check the tracking store and the run to resume before anything opens (and so creates) a store."""
    source = uri_source(options.tracking_uri, spec.tracking.uri)
    uri = resolve_tracking_uri(options.tracking_uri or spec.tracking.uri)
    check_store_uri(uri, source=source)
    if options.resume:
        check_resumable(uri, options.resume, source=source)


class _Driver:
    def __init__(self, spec: ExperimentSpec, options: RunOptions, phases: dict[str, float]) -> None:
        self.spec = spec
        self.options = options
        self.phases = phases  # seconds of each part of the run, from the process's start to its end
        self.writer = BackgroundWriter(outage_wait_s=spec.tracking.outage_wait_s)
        self.limit = UnitLimit(options.stop_after_units)
        self.states: dict[str, ConfigState] = {}  # built and not yet logged (what a checkpoint holds)
        self.to_run: list[Configuration] = []  # the configurations this session runs, in spec order
        self.driver = this_driver()
        self.closed = False
        self.tracking_down = False  # the tracking server went away: no more calls to it
        # Set once the parent run is open (run) and the backend started:
        self.run_id = ""
        self.parent: ParentRun | None = None
        self.configuration_log: ConfigurationLog | None = None
        self.backend: Backend | None = None
        self.progress: Progress | None = None
        self.builder: StateBuilder | None = None

    def _start(self) -> Any:
        """Start the backend while another thread opens the tracking store (MLflow's import and
        the store's opening overlap Ray's start-up); returns the backend."""
        spec, options = self.spec, self.options
        phases = self.phases

        def open_store() -> Tracker:
            opening = time.perf_counter()
            tracker = Tracker(options.tracking_uri or spec.tracking.uri)
            if spec.tracking.artifacts and spec.tracking.plots:
                importlib.import_module("privlab.platform.results.plots")  # matplotlib, which the summary draws with
            phases["store"] = time.perf_counter() - opening
            return tracker

        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="privlab-open-store") as pool:
            opened = pool.submit(open_store)
            starting = time.perf_counter()
            try:
                backend = make_backend(serial=options.serial, address=options.address, workers=options.workers,
                                       max_retries=spec.execution.max_retries)
            except BaseException:
                concurrent.futures.wait([opened])
                raise
            phases["backend"] = time.perf_counter() - starting
            try:
                self.tracker = opened.result()
            except BaseException:
                backend.shutdown()
                raise
        self.checkpointer = Checkpointer(self.tracker, self.writer, interval_s=spec.tracking.checkpoint_interval_s)
        return backend

    def run(self, data: Any, *, began: float) -> dict[str, Any]:
        """Run with the run's ``data`` (:func:`load_run_data`), read since ``began``."""
        spec, options, phases = self.spec, self.options, self.phases
        backend = self.backend = self._start()
        try:
            opening = time.perf_counter()
            experiment_id = self.tracker.experiment_id(spec.tracking.experiment, create=True)
            checkpoint = self._open_parent(experiment_id, data)
            phases["parent_run"] = time.perf_counter() - opening
        except BaseException:
            backend.shutdown()
            raise
        self.run_id = self.parent.run_id
        if options.lifecycle is not None:
            options.lifecycle.run_started(self.run_id)
        status = "FAILED"
        try:
            self.writer.submit(functools.partial(self.tracker.record_backend, self.run_id, workers=backend.workers,
                                                 nodes=backend.nodes, backend=backend.name))
            preparing = time.perf_counter()
            self.to_run = configurations_to_run(spec, self.configuration_log.results)
            self.builder = StateBuilder(spec, root_seed=self.parent.root_seed, data=data, put=backend.put,
                                        checkpoint=checkpoint, configurations=self.to_run)
            # A checkpointed configuration's state is built now, so that every later checkpoint
            # keeps its progress; the others are built as the scheduler reaches them.
            self.states = {c.id: self.builder.build(c) for c in self.to_run if self.builder.has_progress(c)}
            warm_up_workloads(self.to_run, say=_to_stderr if options.progress else None)
            self._start_progress()
            phases["states"] = time.perf_counter() - preparing
            startup_seconds = time.perf_counter() - began
            executing = time.perf_counter()
            self._run_trial_ranges()
            self._run_actor_pools()
            self.writer.flush()
            execution_seconds = phases["execution"] = time.perf_counter() - executing
            self.progress.close()
            timing = RunTiming(wall_seconds=time.perf_counter() - began, startup_seconds=startup_seconds,
                               execution_seconds=execution_seconds, resumed=bool(options.resume))
            finishing = time.perf_counter()
            # The workers have nothing left to do: the backend stops while the writer's thread
            # logs the summary, tables and plots.
            summary = self.writer.call(functools.partial(
                finish_run, self.tracker, self.writer, spec, self.configuration_log, backend, timing,
                command=options.command, report_dir=options.report_dir), meanwhile=backend.shutdown)
            phases["summary"] = time.perf_counter() - finishing
            status = "FINISHED"
            closing = time.perf_counter()
            self._close(backend, status)
            phases["shutdown"] = time.perf_counter() - closing
            summary["timing"]["phases"] = dict(phases)
            return summary
        except (KeyboardInterrupt, RunInterrupted) as interrupt:
            status = "KILLED"
            # Saving can take a while (a checkpoint, pending tracking writes, stopping Ray); more
            # Ctrl-Cs must not cut it short with a traceback. A third abandons it (exit 130): the
            # run id was printed at start and the lease shows the driver as gone.
            with shielded_cleanup(self._abandon):
                try:
                    self._checkpoint(force=True)
                    self.writer.flush()
                    self.tracker.mark_interrupted(self.run_id)
                except Exception as error:  # stopped while the tracking server is gone: keep the work
                    if isinstance(error, TrackingOutage) or is_unreachable(error):
                        raise self._keep_for_resume(error) from None
                    raise
                self._close(backend, status)
            if isinstance(interrupt, RunInterrupted):
                raise
            raise RunInterrupted(self.run_id, "interrupted") from None
        except BaseException as error:
            if isinstance(error, TrackingOutage) or is_unreachable(error):
                raise self._keep_for_resume(error) from None
            self._checkpoint(force=True)
            try:
                self.writer.flush()
            except PrivlabError:
                log.exception("tracking failed while saving the checkpoint")
            raise
        finally:
            self._close(backend, status)

    def _open_parent(self, experiment_id: str, data: RunData) -> dict[str, Any] | None:
        """Start or resume the parent run; returns the checkpoint to go on from (None: none)."""
        resume = self.options.resume
        if resume:
            self.parent = resume_parent_run(self.tracker, self.spec, experiment_id, self.driver,
                                                       run_id=resume, datasets=data.config_datasets)
        else:
            self.parent = start_parent_run(self.tracker, self.spec, experiment_id, self.driver,
                                           command=self.options.command, datasets=data.config_datasets)
        self.configuration_log = ConfigurationLog(self.tracker, self.writer, self.spec, self.parent)
        if not resume:
            return None
        outbox.send_held_back(self.tracker, experiment_id, self.parent.run_id)
        checkpoint = read_checkpoint(self.tracker, self.parent.run_id)
        self.configuration_log.read_back()
        return checkpoint

    def _keep_for_resume(self, error: BaseException) -> TrackingOutage:
        """The tracking server is gone: keep what was computed and not logged in the run's
        outbox (:mod:`~privlab.platform.run.outbox`); returns the error that ends the run."""
        self.tracking_down = True
        self.writer.abandon(f"the tracking server could not be reached: {error}")
        payload = checkpoint_payload(spec_sha256=self.spec.sha256, root_seed=self.parent.root_seed,
                                     states=self.states, completed=self.configuration_log.results)
        unsent = [upload for upload in self.writer.unsent if not upload.finished]  # a batch may have got part way
        held = outbox.HeldBack(run_id=self.run_id, tracking_uri=self.tracker.uri, uploads=unsent, checkpoint=payload)
        reason = str(error) if isinstance(error, TrackingOutage) else f"the tracking server could not be reached: {error}"
        try:
            path = outbox.keep(held)
        except OSError as failure:
            return TrackingOutage(f"{reason}. Keeping what run {self.run_id} computed failed too ({failure}); "
                                  "a resume goes on from the run's last checkpoint in the tracking store",
                                  run_id=self.run_id)
        return TrackingOutage(f"{reason}. Nothing computed is lost; kept in {path}: {held.describe()}; a resume "
                              "logs them once the server answers again", run_id=self.run_id)

    def _close(self, backend: Backend | None, status: str) -> None:
        """Stop the writer and the backend, release the lease and end the parent run (once)."""
        if self.closed:
            return
        self.closed = True
        if self.progress is not None:
            self.progress.stop()
        self.writer.close()
        if backend is not None:
            backend.shutdown()
        if self.tracking_down:
            return  # the outbox and the lease's dead driver tell a resume what to do
        try:
            self.tracker.close_parent_run(self.run_id, status)
        except Exception as error:
            if not is_unreachable(error):
                raise
            log.warning("run %s could not be ended in MLflow (the tracking server cannot be reached); it shows "
                        "as running, with its driver gone, until a resume", self.run_id)

    def _abandon(self) -> None:
        if self.options.lifecycle is not None:
            self.options.lifecycle.run_abandoned(self.run_id)

    def _start_progress(self) -> None:
        class_units: dict[str, int] = {}
        class_done: dict[str, int] = {}
        for config in self.to_run:
            cost_class = cost_class_of(config)
            class_units[cost_class] = class_units.get(cost_class, 0) + config.units
            class_done[cost_class] = class_done.get(cost_class, 0) + self.builder.units_done(config)
        self.progress = Progress(
            sum(class_units.values()), label="units", enabled=self.options.progress, classes=class_units
        )
        self.progress.configs_total = len(self.spec.configurations)
        self.progress.resume_from(sum(class_done.values()), classes=class_done,
                                  seconds_per_unit=self._measured_costs())
        self.progress.update(configs_done=len(self.configuration_log.results), force=True)
        self.progress.start_ticking()  # long units: the line keeps moving between results

    def _measured_costs(self) -> dict[str, float]:
        """Compute seconds per unit of each cost class, from what earlier sessions of a resumed
        run did: its finished configurations' logged timing and its partial aggregates."""
        seconds: dict[str, float] = {}
        units: dict[str, int] = {}
        timing = self.configuration_log.timing
        running = {c.id for c in self.to_run}
        measured = [(cost_class_of(c), timing[c.id].get("compute_seconds", 0.0), c.units)
                    for c in self.spec.configurations if c.id in timing and c.id not in running]
        measured += [(s.cost_class, s.aggregate.compute_seconds, s.aggregate.done.covered())
                     for s in self.states.values()]  # the checkpointed ones
        for cost_class, spent, done in measured:
            if spent > 0 and done > 0:
                seconds[cost_class] = seconds.get(cost_class, 0.0) + spent
                units[cost_class] = units.get(cost_class, 0) + done
        return {k: seconds[k] / units[k] for k in seconds}

    # -- execution -------------------------------------------------------------------------
    def _run_trial_ranges(self) -> None:
        configurations = [c for c in self.to_run if not is_actor_pool(c)]
        units = sum(c.units - self.builder.units_done(c) for c in configurations)
        TrialScheduler(self.backend, self.spec.execution, self.limit, events=self).run(
            self._states_of(configurations), units=units)

    def _run_actor_pools(self) -> None:
        for state in self._states_of([c for c in self.to_run if is_actor_pool(c)]):
            run_actor_pool(state, self.backend, per_actor=self.spec.execution.max_in_flight_per_worker, events=self)

    def _states_of(self, configurations: list[Configuration]) -> Iterator[ConfigState]:
        """The state of each configuration with units left, built as it is reached (one whose
        units were all merged before a resume is logged instead)."""
        for config in configurations:
            state = self.states.get(config.id)
            if state is None:
                state = self.states[config.id] = self.builder.build(config)
            self._maybe_complete(state)
            if not state.finished:
                yield state

    # -- RunEvents: what the scheduler and the actor pool report ----------------------------
    def range_merged(self, state: ConfigState, result: ConfigAggregate, units: int) -> None:
        self.configuration_log.log_unit_runs(state, result.unit_records)
        self._after_result(state, units, seconds=result.compute_seconds)

    def item_merged(self, state: ConfigState, seconds: float) -> None:
        self._after_result(state, 1, seconds=seconds)

    def round_finished(self) -> None:
        self._checkpoint()

    def _after_result(self, state: ConfigState, units: int, *, seconds: float | None = None) -> None:
        self.limit.count(units)
        self.progress.update(units, cost_class=state.cost_class, seconds=seconds)
        self._maybe_complete(state)
        if self.limit.reached:
            raise RunInterrupted(self.run_id, f"after {self.limit.units_seen:,} units of work, as --max-units asked",
                                  requested=True)

    def _maybe_complete(self, state: ConfigState) -> None:
        if state.finished or state.aggregate.done.covered() < state.config.units:
            return
        state.finished = True
        self.configuration_log.log_configuration(state)
        # Logged: its entry and child run hold its results. The driver lets go of its state (its
        # ledger, accumulators, worker context and hold on its data in Ray's object store: once
        # the last state that reads a frame is let go, Ray may free it), so a grid's driver keeps
        # only the finished configurations' entries, not their states.
        del self.states[state.config.id]
        state.aggregate.drop_samples()
        state.data_ref = None
        self.progress.update(configs_done=len(self.configuration_log.results), force=True)

    def _checkpoint(self, *, force: bool = False) -> None:
        self.checkpointer.save(self.run_id, spec_sha256=self.spec.sha256, root_seed=self.parent.root_seed,
                               states=self.states, completed=self.configuration_log.results, force=force)
