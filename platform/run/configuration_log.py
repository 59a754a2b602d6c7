"""What a ``privlab run`` logs per configuration: its summary entries and MLflow child runs.

A finished configuration becomes one entry (and one child run) per facet of its workload:
its selected metrics, the ledger's totals and steps, and, with artifacts, its ledger and
reservoir sample. Metrics that measure time (``timing_*``) are logged on the child run but kept
out of the entry, so results do not vary run to run; a resume reads them back with the entries,
so a resumed run's summary still times every configuration. A ``unit_runs`` workload's units are rows of
a per-unit table on the configuration's run (:mod:`~privlab.platform.tracking.unit_table`), and with
``[tracking] unit_runs = true`` also child runs of their own. Each configuration run also gets a
row in the run's index (:mod:`~privlab.platform.tracking.configuration_index`). The entries of a run
being resumed are read back from its child runs.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privlab.platform.core.errors import TrackingError
from privlab.platform.experiment import registry
from privlab.platform.experiment.registry import MetricKind
from privlab.platform.experiment.spec import ExperimentSpec
from privlab.platform.results.reports import parquet_frame, reservoir_frame
from privlab.platform.run.configuration_state import ConfigState
from privlab.platform.run.parent_run import ParentRun
from privlab.platform.tracking.background_writer import BackgroundWriter
from privlab.platform.tracking.configuration_index import MLFLOW_METRIC_NAMES, RESULT_PATH, IndexRow, run_params_of
from privlab.platform.tracking.result_parts import PART_FOLDER, ResultRow, entry_text, read_results
from privlab.platform.tracking.tracker import ResultRunUpload, Tracker
from privlab.platform.tracking.unit_table import unit_columns, unit_frame

RESERVOIR_PATH = "reservoir.parquet"  # a configuration run's own sample, in runs logged before result parts
LEDGER_TEXT_PATH = "ledger.txt"  # a configuration run's ε ledger, whole; its privlab.ledger tag points to it
#: Metrics of a configuration's entry that are its ledger's detail (δ, each step's ε): shown by
#: the run's ledger tag, kept in the index and parts, not logged as MLflow metrics.
LEDGER_DETAIL = ("delta_total", "eps_step_")


def run_name(entry_id: str, point: Mapping[str, Any]) -> str:
    """A configuration run's name in MLflow: its id, as the command line shows it, then the
    parameters its study varies (``laplace_mean-000 epsilon=0.1 n=100``,
    ``pmse_sensitivity-000.d1_cp01 depth=1 cp=0.01``): one style for grid points and facets, and
    sorted by name the runs of a study are in the spec's order."""
    varying = " ".join(f"{k.removeprefix('facet.').removeprefix('dataset.')}={v}" for k, v in point.items())
    return f"{entry_id} {varying}"[:250].rstrip()


def ledger_tag(ledger: Any) -> str:
    """The ``privlab.ledger`` tag: what the ledger totals, and where the whole of it is (the
    run's ``ledger.txt``; a tag's value is cut short in MLflow's UI)."""
    total = ledger.total()
    steps = len(ledger.events)
    mechanisms = ", ".join(dict.fromkeys(str(e.mechanism) for e in ledger.events))
    delta = f", δ = {total.delta:.3g}" if total.delta else ""
    return (f"ε = {total.epsilon:.6g}{delta} over {steps} step(s) ({mechanisms}); every step, with its sensitivity "
            f"and noise scale: Artifacts › {LEDGER_TEXT_PATH}")


class ConfigurationLog:
    """The entries of a run's finished configurations, logged through ``writer`` as they finish."""

    def __init__(self, tracker: Tracker, writer: BackgroundWriter, spec: ExperimentSpec, parent: ParentRun) -> None:
        self.tracker = tracker
        self.writer = writer
        self.spec = spec
        self.parent = parent
        self.results: dict[str, list[dict[str, Any]]] = {}  # config id → its entries (one per facet)
        self.timing: dict[str, dict[str, float]] = {}
        self.reservoir_frames: dict[str, pd.DataFrame] = {}
        self.index: dict[str, IndexRow] = {}  # entry id → its configuration run, once logged
        self.logged_before: set[str] = set()  # entry ids a resume read back from the store
        self.reservoirs_read = False  # their stored reservoir samples, read once when a report asks

    def read_back(self) -> None:
        """The entries the run logged before it stopped (on resume).

        A FINISHED configuration run is done: it was only ended after its result was uploaded.
        If that result cannot be read now, computing the configuration again would give the run
        two child runs for it, so the resume stops instead.

        Raises:
            TrackingError: a finished configuration run's result cannot be read.
        """
        children = self.tracker.configuration_runs(self.parent.experiment_id, self.parent.run_id)
        stored = read_results(self.tracker, self.parent.run_id, finished=[c.info.run_id for c in children])
        for child in children:
            row = stored.get(child.info.run_id)
            result = row.result if row is not None else self.tracker.read_text(child.info.run_id, RESULT_PATH)
            if not result:
                raise TrackingError(
                    f"configuration run {child.info.run_id} of run {self.parent.run_id} is finished, but its result "
                    f"cannot be read (from the parts under {PART_FOLDER}/ of the parent run, or {RESULT_PATH} of "
                    f"{child.info.artifact_uri}); restore that folder (a local store's database and mlruns/ folder "
                    "move together) and resume again"
                )
            entry = json.loads(result)
            config_id = entry.get("config", entry["id"])
            measured = row.timing if row is not None and row.timing is not None else logged_timing(child.data.metrics)
            self.results.setdefault(config_id, []).append(entry)
            self.logged_before.add(entry["id"])
            self.index.setdefault(entry["id"], IndexRow.of_run(child, entry, measured))  # newest first: keep the newest
            if measured:
                self.timing.setdefault(config_id, measured)

    def index_rows(self, entry_ids: list[str]) -> list[IndexRow] | None:
        """The index rows of these entries' configuration runs, in this order (None when one is
        missing: then ``compare`` reads the child runs)."""
        if any(entry_id not in self.index for entry_id in entry_ids):
            return None
        return [self.index[entry_id] for entry_id in entry_ids]

    def log_configuration(self, state: ConfigState) -> None:
        """Log a finished configuration: one MLflow child run (and summary entry) per facet."""
        config, ledger = state.config, state.ledger
        study = self.spec.study(config.study)
        workload = registry.get_workload(config.workload)
        summary = state.aggregate.summary()
        params = registry.build_params(workload.Params, config.params, where=config.id)
        derived = workload.derive(params, summary)
        kinds = workload.metric_kinds(params)
        selected = study.metrics or (*kinds, *derived)
        metrics = flatten_metrics(summary, kinds, selected, derived)
        every_statistic = self.spec.tracking.run_statistics == "all"
        unlogged = set() if every_statistic else unlogged_statistics(
            summary, selected, run_statistics=self.spec.tracking.run_statistics,
            shown=workload.run_metrics(params), derived=derived)
        measured = {k: v for k, v in metrics.items() if k.startswith("timing_")}
        metrics = {k: v for k, v in metrics.items() if not k.startswith("timing_")}
        ledger_metrics = {"eps_total": ledger.total().epsilon, "delta_total": ledger.total().delta}
        for i, event in enumerate(ledger.events):
            if event.epsilon is not None:  # a Gaussian step has no ε of its own; ledger.txt shows its ρ
                ledger_metrics[f"eps_step_{i:02d}_{_metric_safe(event.name)}"] = event.effective_epsilon
        wall = time.perf_counter() - (state.started or time.perf_counter())
        end_millis = int(time.time() * 1000)  # the run's real span in MLflow (its Duration column)
        start_millis = end_millis - int(wall * 1000)
        timing = {"wall_seconds": wall, "compute_seconds": state.aggregate.compute_seconds,
                  "nodes": float(len(state.aggregate.nodes))} | {k.removeprefix("timing_"): v for k, v in measured.items()}
        reservoirs = {name: acc.reservoir() for name, acc in state.aggregate.metrics.items() if acc.count}
        facets = workload.facets(params) or {"": {}}
        units = self._unit_table(state, kinds)
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
                "ledger": json.loads(ledger.to_json()),
            }
            if facet:
                entry["config"] = config.id
                entry["facet"] = facet
            files: dict[str, str | bytes] = {}
            ledger_text = None
            kept = None
            if self.spec.tracking.artifacts:  # the ledger whole as an artifact; the tag says what it totals
                files[LEDGER_TEXT_PATH] = ledger.render_table()
                ledger_text = ledger_tag(ledger)
                kept = split_facet(reservoirs, facet, facets)
                if not (workload.reads_reservoirs or self.spec.tracking.reservoirs == "all"):
                    kept = None  # no report reads it: neither stored nor kept in memory
                if kept:
                    self.reservoir_frames[entry_id] = reservoir_frame(kept)
            run_params = entry["params"] | {"workload": config.workload, "study": config.study, "units": config.units}
            run_metrics = entry["metrics"] | {f"timing_{k}": v for k, v in timing.items()}
            result = entry_text(entry)
            row = functools.partial(IndexRow, config_id=entry_id, study=config.study, workload=config.workload,
                                    params=run_params_of(json.loads(result)),  # as a resume reads it back
                                    metrics={k: float(v) for k, v in run_metrics.items()})
            skipped = split_facet(dict.fromkeys(unlogged), facet, facets)
            logged = run_metrics if every_statistic else {k: v for k, v in entry["metrics"].items()
                                                          if not k.startswith(LEDGER_DETAIL)}
            upload = self.tracker.result_upload(
                self.parent.experiment_id, parent_id=self.parent.run_id,
                name=run_name(entry_id, entry["grid_point"]), params=run_params if every_statistic else entry["params"],
                ledger_text=ledger_text,
                metrics={MLFLOW_METRIC_NAMES.get(k, k): v for k, v in logged.items() if k not in skipped}, files=files,
                config_id=entry_id, group=config.id, study=config.study, workload=config.workload,
                standard_tags=self.parent.standard_tags,
                datasets=[self.parent.datasets[config.id]] if config.id in self.parent.datasets else [],
                result=result, timing=timing, reservoir=kept, units=units,
                start_millis=start_millis, end_millis=end_millis,
            )
            self.writer.submit_batched(self._send, (entry_id, row, upload), keep=upload)
            entries.append(entry)
        self.results[config.id] = entries
        self.timing[config.id] = timing

    def _send(self, batch: list[tuple[str, Any, ResultRunUpload]]) -> None:
        """Log a batch of configuration runs (in the writer's thread) and index them by run id."""
        run_ids = self.tracker.send_results([upload for _, _, upload in batch])
        for (entry_id, row, _), run_id in zip(batch, run_ids):
            self.index[entry_id] = row(run_id=run_id)

    def _unit_table(self, state: ConfigState, kinds: Mapping[str, MetricKind]) -> dict[str, Any] | None:
        """The per-unit table of a finished ``unit_runs`` configuration (None for other workloads)."""
        config = state.config
        if not registry.get_workload(config.workload).unit_runs:
            return None
        frame = unit_frame(state.aggregate.unit_records, metrics=list(kinds), study_key=config.study_key,
                           config_key=config.config_key, units=config.units, where=config.id)
        return unit_columns(frame)

    def log_unit_runs(self, state: ConfigState, records: list[tuple[int, dict[str, float]]]) -> None:
        """With ``[tracking] unit_runs = true``, one MLflow run per unit of a ``unit_runs``
        workload (e.g. each release-flow attempt); the per-unit table is written either way."""
        if not self.spec.tracking.unit_runs:
            return
        config = state.config
        for index, metrics in records:
            upload = self.tracker.result_upload(
                self.parent.experiment_id, parent_id=self.parent.run_id,
                name=f"{run_name(config.id, config.grid_point)[:200]} #{index}",
                params=config.flat_params() | {"workload": config.workload, "study": config.study, "unit": index},
                metrics=metrics, files={}, config_id=config.id, group=config.id, study=config.study,
                workload=config.workload, unit=index,
                standard_tags=self.parent.standard_tags,
            )
            self.writer.submit(functools.partial(self.tracker.send, upload), keep=upload)

    def reservoir_of(self, config_id: str) -> pd.DataFrame | None:
        """A configuration's reservoir sample: kept in memory, or (for those a resume read back)
        read from the run's parts, all at once the first time one is missing."""
        earlier = config_id in self.logged_before  # this session did not compute it
        if config_id not in self.reservoir_frames and earlier and self.spec.tracking.artifacts and not self.reservoirs_read:
            self.reservoirs_read = True
            for frame_id, frame in reservoirs_of(self.tracker, self.parent.run_id, self.index).items():
                self.reservoir_frames.setdefault(frame_id, frame)
        return self.reservoir_frames.get(config_id)


def reservoirs_of(tracker: Tracker, parent_run_id: str, index: Mapping[str, IndexRow]) -> dict[str, pd.DataFrame]:
    """The reservoir samples of the indexed configuration runs of a parent run (entry id →
    frame): from its result parts, else (runs logged before the parts) each run's own
    ``reservoir.parquet``."""
    run_ids = {row.run_id: entry_id for entry_id, row in index.items()}
    stored = read_results(tracker, parent_run_id, reservoirs=True, finished=run_ids)
    frames: dict[str, pd.DataFrame] = {}
    for run_id, entry_id in run_ids.items():
        row = stored.get(run_id)
        frame = _row_reservoir(row) if row is not None else parquet_frame(tracker.read_bytes(run_id, RESERVOIR_PATH))
        if frame is not None:
            frames[entry_id] = frame
    return frames


def logged_timing(metrics: Mapping[str, float]) -> dict[str, float]:
    """A configuration's timing as its run logged it (``timing_X`` metrics → ``{X: value}``)."""
    return {name.removeprefix("timing_"): float(value) for name, value in metrics.items() if name.startswith("timing_")}


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


#: The statistics of a metric that a configuration run logs as MLflow metrics, by ``[tracking]
#: run_statistics``: "centre" (the default) its mean or rate, "summary" also its 95% interval
#: (what ``privlab compare`` shows); "all" logs every statistic.
LOGGED_STATISTICS = {"centre": frozenset({"mean", "rate"}), "summary": frozenset({"mean", "rate", "ci_low", "ci_high"})}


def unlogged_statistics(summary: Mapping[str, Mapping[str, float]], selected: tuple[str, ...], *,
                        run_statistics: str = "centre", shown: tuple[str, ...] | None = None,
                        derived: Mapping[str, float] | None = None) -> set[str]:
    """The flattened names (``{metric}_{statistic}``, a derived metric's own name) of the
    selected metrics' statistics that are not logged as MLflow metrics: those
    ``run_statistics`` leaves out (:data:`LOGGED_STATISTICS`), and every statistic of a metric
    outside the workload's ``shown`` ones (:meth:`~privlab.platform.experiment.registry.Workload.run_metrics`;
    None: all are shown). They are kept in the result parts and the index, which ``compare`` reads.

    Each MLflow metric value is a row of its ``metrics`` and ``latest_metrics`` tables and of
    four indexes, ~470 bytes of sqlite: a births configuration's 47 metrics cost ~210 KB with
    every statistic, ~49 KB with their centres and intervals, ~17 KB with their centres, ~6 KB
    with the centres of the release flow's shown metrics.
    """
    logged = LOGGED_STATISTICS[run_statistics]
    unlogged = {f"{name}_{statistic}" for name in selected if name in summary
                for statistic in summary[name] if statistic not in logged or (shown is not None and name not in shown)}
    if shown is not None:
        unlogged |= {name for name in (derived or {}) if name in selected and name not in shown}
    return unlogged


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


def _metric_safe(name: str) -> str:
    """``name`` as part of a metric name: ASCII letters, digits, ``_ - .`` only (MLflow also
    allows spaces, colons and slashes, but a space makes a name hard to use in a search filter
    or a column and a slash makes it a path), each run of other characters one ``_``:
    ``pd.entropy H(age)`` → ``pd.entropy_H_age``."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("_") or "step"


def _row_reservoir(row: ResultRow) -> pd.DataFrame | None:
    """A result row's reservoir as a frame, a column per metric (None when the run kept none)."""
    if row.reservoir is None:
        return None
    return reservoir_frame({name: np.asarray(values, np.float64) for name, values in row.reservoir.items()})
