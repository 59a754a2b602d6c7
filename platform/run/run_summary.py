"""The end of a ``privlab run``: its summary, results table, plots and study reports.

The summary lists every configuration's entries in spec order; the run's ε is the largest
configuration total (configurations are alternatives, not compositions), which the parent run
logs as ``eps_max_configuration`` (and ``delta_max_configuration``), with the number of
configurations (``configurations_done``, as the ``configurations`` parameter counts them) and of
configuration runs (``configuration_runs``: one per facet, the pMSE Table-1 study's eight
settings of one executed configuration being eight runs). It is marked complete, then receives
``summary.json``, the index of its
configuration runs (``configurations.parquet``, what ``privlab compare`` reads) and, with
artifacts, the results table, plots and reports in one upload.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.platform.execution.backends import Backend
from privlab.platform.experiment.spec import ExperimentSpec
from privlab.platform.results.reports import REPORT_PREFIX, build_reports, parquet_bytes, write_report_dir
from privlab.platform.run.configuration_log import ConfigurationLog
from privlab.platform.tracking.background_writer import BackgroundWriter
from privlab.platform.tracking.configuration_index import INDEX_PATH, index_bytes
from privlab.platform.tracking.result_parts import PART_FOLDER
from privlab.platform.tracking.tracker import Tracker


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunTiming:
    wall_seconds: float  # of this session: a resumed run's earlier sessions are not in it
    startup_seconds: float
    execution_seconds: float
    resumed: bool = False


def finish_run(
    tracker: Tracker,
    writer: BackgroundWriter,
    spec: ExperimentSpec,
    configuration_log: ConfigurationLog,
    backend: Backend,
    timing: RunTiming,
    *,
    command: str | None,
    report_dir: Path | None,
) -> dict[str, Any]:
    """Log the run's summary and artifacts on its parent run; returns the summary."""
    parent = configuration_log.parent
    ordered = [entry for c in spec.configurations for entry in configuration_log.results[c.id]]
    epsilons = [e["metrics"]["eps_total"] for e in ordered]
    deltas = [e["metrics"]["delta_total"] for e in ordered]
    summary = {
        "run_id": parent.run_id,
        "experiment": spec.tracking.experiment,
        "spec": spec.name,
        "spec_sha256": spec.sha256,
        "root_seed": parent.root_seed,
        "mode": spec.mode,
        "epsilon_total": max(epsilons, default=0.0),
        "delta_total": max(deltas, default=0.0),
        "budget": dataclasses.asdict(spec.budget) if spec.budget else None,
        "configurations": ordered,
        "timing": {
            "wall_seconds": timing.wall_seconds,
            "startup_seconds": timing.startup_seconds,
            "execution_seconds": timing.execution_seconds,
            "resumed": timing.resumed,
            "workers": backend.workers,
            "ray_nodes": backend.nodes,
            "backend": backend.name,
            "ray_address": backend.address,  # the cluster joined (None: a private instance, or serial)
            "configurations": configuration_log.timing,
        },
    }
    parent_began = time.perf_counter()
    table = results_table(ordered)
    tracker.mark_complete(parent.run_id, {
        "eps_max_configuration": summary["epsilon_total"], "delta_max_configuration": summary["delta_total"],
        "configurations_done": float(sum(c.id in configuration_log.results for c in spec.configurations)),
        "configuration_runs": float(len(ordered)), "timing_wall_seconds": timing.wall_seconds,
    })
    index = configuration_log.index_rows([e["id"] for e in ordered])
    files: dict[str, str | bytes] = {"summary.json": json.dumps(summary if index is None else logged_summary(summary),
                                                                indent=2, default=str)}
    if index is not None:
        files[INDEX_PATH] = index_bytes(index)
    if spec.tracking.artifacts:
        files["results.parquet"] = parquet_bytes(table)
    if spec.tracking.artifacts and spec.tracking.plots:
        from privlab.platform.results.plots import study_plots  # matplotlib: only a run that draws plots imports it

        for name, png in study_plots(spec, ordered).items():
            files[f"plots/{name}"] = png
    reports = build_reports(summary, configuration_log.reservoir_of, command=command)
    if spec.tracking.artifacts:
        files.update({f"{REPORT_PREFIX}/{name}": content for name, content in reports.items()})
    tracker.log_texts(parent.run_id, files)
    if report_dir is not None:
        write_report_dir(reports, report_dir)
    parent_seconds = time.perf_counter() - parent_began
    # Where the results went (not part of the logged summary.json: it describes the store itself).
    summary["tracking"] = {"uri": tracker.uri, "artifacts": tracker.get_run(parent.run_id).info.artifact_uri}
    summary["timing"]["tracking_seconds"] = tracker.seconds
    summary["timing"]["tracking_blocked_seconds"] = writer.blocked_seconds + parent_seconds
    return summary


#: Marks a ``summary.json`` whose configurations' entries and timings are left to the run's
#: index and result parts (:func:`stored_summary` puts them back).
ENTRIES_STORED = "configurations.parquet and results/"


def logged_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``summary`` as the parent run's ``summary.json`` holds it: without the configurations'
    entries and timings, which its index (their order, each run's logged timing) and result
    parts (each entry) hold already; its size no longer grows with the configurations."""
    timing = {k: v for k, v in summary["timing"].items() if k != "configurations"}
    return {k: v for k, v in summary.items() if k != "configurations"} | {"timing": timing,
                                                                            "configurations_in": ENTRIES_STORED}


def stored_summary(tracker: Tracker, run_id: str, logged: Mapping[str, Any]) -> dict[str, Any]:
    """A finished run's whole summary from its ``summary.json`` (``logged``): the entries, in
    the run's order, and each configuration's timing put back from its index and result parts
    when :func:`logged_summary` left them out.

    Raises:
        TrackingError: the run's index or a configuration's result cannot be read.
    """
    from privlab.platform.tracking.configuration_index import read_index
    from privlab.platform.run.configuration_log import logged_timing
    from privlab.platform.core.errors import TrackingError
    from privlab.platform.tracking.result_parts import read_results

    if "configurations" in logged:
        return dict(logged)
    rows = read_index(tracker, run_id)
    if rows is None:
        raise TrackingError(f"run {run_id}'s summary.json leaves its configurations to its index, "
                            "configurations.parquet, which cannot be read")
    results = read_results(tracker, run_id, finished=[row.run_id for row in rows])
    missing = [row.config_id for row in rows if row.run_id not in results]
    if missing:
        raise TrackingError(f"run {run_id}: the results of {len(missing)} configuration run(s) cannot be read "
                            f"from its parts ({PART_FOLDER}/), e.g. {missing[0]}")
    entries = [results[row.run_id].entry for row in rows]
    timings: dict[str, dict[str, float]] = {}
    for entry, row in zip(entries, rows):
        timings.setdefault(entry.get("config", entry["id"]), logged_timing(row.metrics))
    timing = dict(logged.get("timing", {})) | {"configurations": timings}
    summary = {k: v for k, v in logged.items() if k != "configurations_in"}
    return summary | {"configurations": entries, "timing": timing}


def results_table(entries: list[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per entry: its id, study, workload, parameters and metrics."""
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


def with_logged_timing(summary: Mapping[str, Any], logged: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """``summary`` with every configuration timed, for redrawing the reports of an older run.

    Summaries written before a resume read timing back (:meth:`ConfigurationLog.read_back`) time
    only the configurations finished in the run's last session, and do not say whether it was
    resumed. ``logged`` maps an entry id to the timing its configuration run logged
    (:func:`~privlab.platform.run.configuration_log.logged_timing`); it fills the missing ones. A
    configuration the last session did not time finished in an earlier session, so the run was
    resumed exactly when one is missing.
    """
    timing = dict(summary.get("timing", {}))
    configurations = dict(timing.get("configurations", {}))
    missing = False
    for entry in summary["configurations"]:
        config_id = entry.get("config", entry["id"])
        if config_id not in configurations:
            missing = True
            if logged.get(entry["id"]):
                configurations[config_id] = dict(logged[entry["id"]])
    timing["configurations"] = configurations
    timing.setdefault("resumed", missing)
    return dict(summary) | {"timing": timing}
