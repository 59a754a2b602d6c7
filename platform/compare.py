"""Configuration-level comparison read back from MLflow (``privlab compare``).

One row per configuration (child run) of a parent run — by default the experiment's latest
parent run — with its parameters and aggregated metrics, read from the run's index of its
configuration runs when it is complete (:mod:`~privlab.platform.configuration_index`), else from
the child runs themselves. Rendered as one aligned table per
study for people (the same tables ``privlab run`` prints: :mod:`privlab.platform.tables`), or
exported for scripts as one CSV table per study (only that study's columns; integers stay
integers) or one parquet file, plus an optional plot with one panel per study.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from privlab.platform.configuration_index import IndexRow, read_index
from privlab.platform.errors import NotFoundError, TrackingError
from privlab.platform.tracking import RunTags, Tracker

ID_COLUMNS = ["config_id", "study", "workload", "parent_run_id", "run_id"]


def comparison_frame(
    tracker: Tracker, experiment: str, *, run_id: str | None = None, all_runs: bool = False,
    metrics: Sequence[str] = (), studies: Sequence[str] = (),
) -> pd.DataFrame:
    """The comparison as a DataFrame (parameters as ``params.*``/``dataset.*`` columns, a
    facet's own parameters under their names; integer columns stay integers).

    With ``metrics``, only those metrics' columns are kept and the studies that lack all of
    them are left out; their names are in ``frame.attrs["studies_without_metric"]``.

    Raises:
        NotFoundError: ``experiment`` or one of ``studies`` does not exist (the message lists
            what does).
        TrackingError: the store holds no finished configurations, or a metric is unknown.
    """
    experiment_id = tracker.require_experiment(experiment)
    parents = tracker.parent_runs(experiment_id)
    if run_id is not None:
        parents = [p for p in parents if p.info.run_id == run_id]
        if not parents:
            raise TrackingError(f"run {run_id!r} is not a parent run of experiment {experiment!r}; "
                                f"`privlab runs {experiment}` lists them")
    elif not all_runs:
        parents = parents[:1]
    if not parents:
        raise TrackingError(f"experiment {experiment!r} has no privlab runs yet; `privlab run` a spec first")
    rows: list[dict[str, Any]] = []
    for parent in parents:
        for logged in configuration_rows(tracker, experiment_id, parent):
            row: dict[str, Any] = {
                "config_id": logged.config_id,
                "study": logged.study,
                "workload": logged.workload,
                "parent_run_id": parent.info.run_id,
                "run_id": logged.run_id,
            }
            for key, value in logged.params.items():
                if key.startswith(PARAM_PREFIXES):
                    row[key] = _parse(value)
                elif key not in RUN_PARAMS:  # a facet's own parameters (depth, cp): facet.*
                    row[f"facet.{key}"] = _parse(value)
            row.update(logged.metrics)
            rows.append(row)
    if not rows:
        raise TrackingError(f"the selected run of {experiment!r} has no finished configurations yet")
    if studies:
        known = list(dict.fromkeys(r["study"] for r in rows))
        unknown = [s for s in studies if s not in known]
        if unknown:
            raise NotFoundError(f"no study {', '.join(map(repr, unknown))} in {experiment!r}; "
                                f"its studies: {', '.join(known)}")
        rows = [r for r in rows if r["study"] in studies]
    frame = _frame(rows).sort_values(["parent_run_id", "config_id"], kind="stable").reset_index(drop=True)
    frame = frame[_column_order(frame.columns)]
    without: list[str] = []
    if metrics:
        known = [c for c in frame.columns if not _is_param(c) and c not in ID_COLUMNS]
        keep = [c for c in known if any(c == m or c.startswith(f"{m}_") for m in metrics)]
        missing = [m for m in metrics if not any(c == m or c.startswith(f"{m}_") for c in known)]
        if missing:
            bases = sorted({c.rsplit("_", 1)[0] if c.endswith(("_mean", "_rate")) else c for c in known
                            if not c.startswith("timing_")})
            raise TrackingError(f"unknown metric(s) {', '.join(map(repr, missing))}; available: {', '.join(bases)}")
        has_metric = frame[keep].notna().any(axis=1)
        order = list(dict.fromkeys(frame["study"]))
        with_metric = set(frame.loc[has_metric, "study"])
        without = [s for s in order if s not in with_metric]
        frame = frame.loc[has_metric, [c for c in frame.columns if c in ID_COLUMNS or _is_param(c) or c in keep]]
        frame = frame.dropna(axis=1, how="all").reset_index(drop=True)
    frame.attrs["studies_without_metric"] = without
    return frame


def configuration_rows(tracker: Tracker, experiment_id: str, parent: Any) -> list[IndexRow]:
    """A parent run's configuration runs as logged: from its index when the run is complete
    (one artifact), else from its child runs (one search, slow for thousands of runs)."""
    if RunTags.of(parent).status == "complete":
        indexed = read_index(tracker, parent.info.run_id)
        if indexed is not None:
            return indexed
    return [IndexRow.of_run(child)
            for child in tracker.configuration_runs(experiment_id, parent.info.run_id, finished=False)]


RUN_PARAMS = {"workload", "study", "units"}  # logged on every child run; not the configuration's parameters
PARAM_PREFIXES = ("params.", "dataset.", "facet.")


def _is_param(column: str) -> bool:
    return column.startswith(PARAM_PREFIXES)


def _column_order(columns: Sequence[str]) -> list[str]:
    """Ids, then parameters, then metrics (each metric's statistics together), then ε, δ and timings."""
    from privlab.platform.tables import metric_order

    def rank(column: str) -> tuple[int, str, str]:
        if column in ID_COLUMNS:
            return 0, f"{ID_COLUMNS.index(column):03d}", ""
        if _is_param(column):
            return 1, column, ""
        if column.startswith(("eps_", "delta_")):
            return 3, column, ""
        if column.startswith("timing_"):
            return 4, column, ""
        return 2, *metric_order(column)

    return sorted(columns, key=rank)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` as a frame whose integer-valued columns stay integers (nullable ``Int64``):
    parameters given as integers, and counts."""
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        values = [r[column] for r in rows if column in r and r[column] is not None]
        is_int = bool(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        is_count = column.endswith(COUNT_SUFFIXES) and all(isinstance(v, float) and v.is_integer() for v in values)
        if (is_int or is_count) and column not in ID_COLUMNS:
            frame[column] = frame[column].astype("Int64")
    return frame


COUNT_SUFFIXES = ("_count", "_successes")


def _parse(value: str) -> Any:
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return value
    return parsed if isinstance(parsed, (int, float, str, bool)) or parsed is None else value


def param_columns(frame: pd.DataFrame) -> list[str]:
    """The frame's parameter columns: ``params.*``, ``dataset.*`` and ``facet.*``."""
    return [c for c in frame.columns if _is_param(c)]


def varying_params(frame: pd.DataFrame) -> list[str]:
    columns = param_columns(frame)
    return [c for c in columns if frame[c].astype(str).nunique() > 1]


def study_frames(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One frame per study (in order of appearance) with only the columns it fills."""
    return {study: rows.dropna(axis=1, how="all").reset_index(drop=True)
            for study, rows in frame.groupby("study", sort=False)}


def to_csv(frame: pd.DataFrame) -> str:
    """CSV: one table when the frame holds one study, else one table per study, each after a
    ``# study: NAME`` line and separated by blank lines (``--study NAME`` picks one)."""
    frames = study_frames(frame)
    if len(frames) == 1:
        return next(iter(frames.values())).to_csv(index=False)
    return "\n".join(f"# study: {study}\n{rows.to_csv(index=False)}" for study, rows in frames.items())


def table_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows in the shape :mod:`privlab.platform.tables` renders."""
    params = set(param_columns(frame))
    several_runs = frame["parent_run_id"].nunique() > 1
    rows = []
    for record in frame.to_dict("records"):
        values = {k: _python(v) for k, v in record.items() if not _missing(v)}
        # with --all-runs, the run (its id's first 8 characters) tells the same configuration's rows apart
        run = {"run": str(values.get("parent_run_id", ""))[:8]} if several_runs else {}
        rows.append({
            "id": values.get("config_id", ""), "study": values.get("study", ""), "workload": values.get("workload", ""),
            "params": run | {k: v for k, v in values.items() if k in params},
            "metrics": {k: v for k, v in values.items() if k not in params and k not in ID_COLUMNS},
        })
    return rows


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _python(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def render_table(frame: pd.DataFrame) -> str:
    """One aligned text table per study: its varying parameters, then ``mean [95% CI]`` or
    ``rate [95% CI]`` per metric (with theory's value and a verdict where the workload states
    one), then derived metrics and ε."""
    from privlab.platform.tables import render_studies

    runs = frame.groupby("study", sort=False)["parent_run_id"].nunique()
    suffix = {study: f", {count} runs" for study, count in runs.items() if count > 1}
    return render_studies(table_rows(frame), title_suffix=suffix)


def comparison_plot(frame: pd.DataFrame, metric: str | None) -> bytes:
    """A PNG of one metric: one panel per study that has it, x a varying parameter of that
    study, one series per combination of its other varying parameters, 95% error bars."""
    from privlab.platform.plots import metric_names, plot_panels
    from privlab.platform.tables import display_names, varying_params as row_varying

    panels = []
    names: list[str] = []
    for study, rows in study_frames(frame).items():
        entries = table_rows(rows)
        varying = row_varying(entries)
        shown = display_names(varying)
        points = [{"grid_point": {shown[k]: e["params"].get(k) for k in varying}, "metrics": e["metrics"]}
                  for e in entries]
        names += [n for n in metric_names(points) if n not in names]
        panels.append((study, points))
    chosen = metric or (names[0] if names else None)
    if chosen is None:
        raise TrackingError("no plottable metric in this comparison")
    png = plot_panels(panels, chosen, title=f"{chosen} (95% CI)")
    if png is None:
        raise TrackingError(f"metric {chosen!r} has no values to plot; plottable: {', '.join(names)}")
    return png
