"""Configuration-level comparison read back from MLflow (``privlab compare``).

One row per configuration (child run) of a parent run — by default the experiment's latest
parent run — with its parameters and aggregated metrics, read from the run's index of its
configuration runs when it is complete (:mod:`~privlab.platform.tracking.configuration_index`), else from
the child runs themselves. Rendered as one aligned table per
study for people (the same tables ``privlab run`` prints: :mod:`privlab.platform.results.tables`), or
exported for scripts as one CSV table per study (only that study's columns; integers stay
integers) or one parquet file, plus an optional plot with one panel per study.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.platform.core.errors import NotFoundError, TrackingError
from privlab.platform.tracking.configuration_index import METRIC_PREFIX, IndexRow, index_table, read_index_table
from privlab.platform.tracking.result_parts import read_results
from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import Tracker

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
            raise NotFoundError(f"run {run_id!r} is not a parent run of experiment {experiment!r}; "
                                f"`privlab runs {experiment}` lists them")
    elif not all_runs:
        parents = parents[:1]
    if not parents:
        raise TrackingError(f"experiment {experiment!r} has no privlab runs yet; `privlab run` a spec first")
    logged = [(parent.info.run_id, configuration_table(tracker, experiment_id, parent)) for parent in parents]
    if not any(table.num_rows for _, table in logged):
        raise TrackingError(f"the selected run of {experiment!r} has no finished configurations yet")
    frame = _frame(logged)
    if studies:
        known = list(dict.fromkeys(frame["study"]))
        unknown = [s for s in studies if s not in known]
        if unknown:
            raise NotFoundError(f"no study {', '.join(map(repr, unknown))} in {experiment!r}; "
                                f"its studies: {', '.join(known)}")
        frame = frame[frame["study"].isin(studies)].dropna(axis=1, how="all")
    frame = _in_spec_order(frame, [p.info.run_id for p in parents])
    frame.attrs["runs"] = [(p.info.run_id, p.info.start_time) for p in parents]  # what the command says it shows
    frame = frame[_column_order(frame.columns)]
    without: list[str] = []
    if metrics:
        known = [c for c in frame.columns if not _is_param(c) and c not in ID_COLUMNS]
        keep = [c for c in known if any(c == m or c.startswith(f"{m}_") for m in metrics)]
        missing = [m for m in metrics if not any(c == m or c.startswith(f"{m}_") for c in known)]
        if missing:
            raise NotFoundError(_unknown_metrics(missing, known, experiment))
        has_metric = frame[keep].notna().any(axis=1)
        order = list(dict.fromkeys(frame["study"]))
        with_metric = set(frame.loc[has_metric, "study"])
        without = [s for s in order if s not in with_metric]
        frame = frame.loc[has_metric, [c for c in frame.columns if c in ID_COLUMNS or _is_param(c) or c in keep]]
        frame = frame.dropna(axis=1, how="all").reset_index(drop=True)
    frame.attrs["studies_without_metric"] = without
    return frame


def _unknown_metrics(missing: Sequence[str], columns: Sequence[str], experiment: str) -> str:
    """What to say about metrics a comparison does not record: the closest names it does
    record (not all of them: a run may record hundreds), and how many there are."""
    import difflib
    import shlex

    from privlab.platform.results.tables import metric_order

    names = sorted({metric_order(c)[0] for c in columns})
    parts = []
    for name in missing:
        close = [n for n in names if name.lower() in n.lower()][:5]
        close += [n for n in difflib.get_close_matches(name, names, n=5, cutoff=0.6) if n not in close]
        parts.append(f"unknown metric {name!r}" + (f"; closest: {', '.join(close[:5])}" if close else ""))
    return (f"{'; '.join(parts)} ({len(names)} metric names recorded in {experiment!r}; "
            f"`privlab compare {shlex.quote(experiment)} --format csv` has them all)")


def configuration_table(tracker: Tracker, experiment_id: str, parent: Any) -> Any:
    """A parent run's configuration runs as logged, as an index table in the spec's order (as
    ``privlab run`` printed them): the run's own index when it is complete (one artifact,
    written in that order), else its child runs (one search, their results read from the
    run's result parts; runs logged before the parts each read their own result.json), put in the order of the studies in the run's ``spec.toml``, then of their
    configuration ids (numbers compared as numbers)."""
    if RunTags.of(parent).status == "complete":
        indexed = read_index_table(tracker, parent.info.run_id)
        if indexed is not None:
            return indexed
    children = tracker.configuration_runs(experiment_id, parent.info.run_id, finished=False)
    stored = read_results(tracker, parent.info.run_id)
    table = index_table(IndexRow.of_run(child, stored[child.info.run_id].entry, stored[child.info.run_id].timing)
                        if child.info.run_id in stored else IndexRow.read(tracker, child) for child in children)
    if not table.num_rows:
        return table
    studies = _spec_studies(tracker, parent.info.run_id)
    rows = table.column("study").to_pylist()
    ids = table.column("config_id").to_pylist()
    order = sorted(range(table.num_rows), key=lambda i: (studies.get(rows[i], len(studies)), rows[i],
                                                          _natural(ids[i])))
    return table.take(order)


def _spec_studies(tracker: Tracker, run_id: str) -> dict[str, int]:
    """The position of each ``[[study]]`` in a run's logged ``spec.toml`` (empty when unreadable)."""
    import tomllib

    try:
        text = tracker.read_text(run_id, "spec.toml")
        spec = tomllib.loads(text) if text else {}
    except (tomllib.TOMLDecodeError, TrackingError, OSError):
        return {}
    studies = spec.get("study")
    if not isinstance(studies, list):
        return {}
    return {str(s.get("name")): i for i, s in enumerate(studies) if isinstance(s, dict)}


def _natural(text: str) -> tuple[Any, ...]:
    """``study-2`` before ``study-10``: digit runs compared as numbers."""
    import re

    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _in_spec_order(frame: pd.DataFrame, parents: Sequence[str]) -> pd.DataFrame:
    """The rows grouped by parent run (newest first), each run's rows in the order logged."""
    rank = {run_id: i for i, run_id in enumerate(parents)}
    return frame.sort_values("parent_run_id", key=lambda ids: ids.map(rank), kind="stable").reset_index(drop=True)


RUN_PARAMS = {"workload", "study", "units"}  # logged on every child run; not the configuration's parameters
PARAM_PREFIXES = ("params.", "dataset.", "facet.")


def _is_param(column: str) -> bool:
    return column.startswith(PARAM_PREFIXES)


def _column_order(columns: Sequence[str]) -> list[str]:
    """Ids, then parameters, then metrics (each metric's statistics together), then ε, δ and timings."""
    from privlab.platform.results.tables import metric_order

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


def _frame(logged: Sequence[tuple[str, Any]]) -> pd.DataFrame:
    """One row per configuration run of each ``(parent run id, index table)``: ids, parameters
    (parsed from their logged text; a facet's own parameters as ``facet.*``) and metrics.
    Integer-valued columns stay integers (nullable ``Int64``): parameters given as integers,
    and counts."""
    ids: list[pd.DataFrame] = []
    params: list[dict[str, Any]] = []
    metrics: list[pd.DataFrame] = []
    for parent_id, table in logged:
        if not table.num_rows:
            continue
        ids.append(pd.DataFrame({"config_id": table.column("config_id").to_pylist(),
                                 "study": table.column("study").to_pylist(),
                                 "workload": table.column("workload").to_pylist(),
                                 "parent_run_id": parent_id,
                                 "run_id": table.column("run_id").to_pylist()}))
        for text in table.column("params").to_pylist():
            row: dict[str, Any] = {}
            for key, value in json.loads(text).items():
                if key.startswith(PARAM_PREFIXES):
                    row[key] = _parse(value)
                elif key not in RUN_PARAMS:  # a facet's own parameters (depth, cp): facet.*
                    row[f"facet.{key}"] = _parse(value)
            params.append(row)
        names = [c for c in table.column_names if c.startswith(METRIC_PREFIX)]
        metrics.append(pd.DataFrame({c.removeprefix(METRIC_PREFIX): table.column(c).to_numpy(zero_copy_only=False)
                                     for c in names}))
    frame = pd.concat([pd.concat(ids, ignore_index=True), pd.DataFrame(params),
                       pd.concat(metrics, ignore_index=True)], axis=1)
    given: dict[str, list[Any]] = {}  # each parameter's parsed values (metrics are floats, never ints)
    for row in params:
        for key, value in row.items():
            if value is not None:
                given.setdefault(key, []).append(value)
    for column in frame.columns:
        if column in ID_COLUMNS:
            continue
        values = given.get(column, [])
        is_int = bool(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        is_count = False
        if column.endswith(COUNT_SUFFIXES) and not is_int:
            present = frame[column].dropna()
            is_count = frame[column].dtype == np.float64 and bool(np.all(np.mod(present.to_numpy(), 1) == 0))
        if is_int or is_count:
            frame[column] = frame[column].astype("Int64")
    return frame


COUNT_SUFFIXES = ("_count", "_trials", "_successes")


@functools.lru_cache(maxsize=65536)  # a grid's parameters repeat their few values across its rows
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
    """The frame's rows in the shape :mod:`privlab.platform.results.tables` renders."""
    params = set(param_columns(frame))
    several_runs = frame["parent_run_id"].nunique() > 1
    rows = []
    na = pd.NA
    columns = {column: frame[column].tolist() for column in frame.columns}  # Python scalars, column by column
    for i in range(len(frame)):
        # v == v is False for NaN only (pd.NA is tested first: comparing it gives NA)
        values = {k: v for k, values in columns.items()
                  if (v := values[i]) is not None and v is not na and (not isinstance(v, float) or v == v)}
        # with --all-runs, the run (its id's first 8 characters) tells the same configuration's rows apart
        run = {"run": str(values.get("parent_run_id", ""))[:8]} if several_runs else {}
        rows.append({
            "id": values.get("config_id", ""), "study": values.get("study", ""), "workload": values.get("workload", ""),
            "params": run | {k: v for k, v in values.items() if k in params},
            "metrics": {k: v for k, v in values.items() if k not in params and k not in ID_COLUMNS},
        })
    return rows


def render_table(frame: pd.DataFrame, *, experiment: str | None = None, width: int | None = None) -> str:
    """One aligned text table per study: its varying parameters, then ``mean [95% CI]`` or
    ``rate [95% CI]`` per metric (with theory's value and a verdict where the workload states
    one), then derived metrics and ε; at most ``width`` characters wide (None: no limit), the
    hint about metrics left out naming ``experiment``."""
    from privlab.platform.results.tables import render_studies

    runs = frame.groupby("study", sort=False)["parent_run_id"].nunique()
    suffix = {study: f", {count} runs" for study, count in runs.items() if count > 1}
    shown = [c for c in frame.columns if c in ID_COLUMNS or _is_param(c) or _rendered(c, frame.columns)]
    return render_studies(table_rows(frame[shown]), title_suffix=suffix, experiment=experiment, width=width)


def _rendered(column: str, columns: Sequence[str]) -> bool:
    """Whether :func:`~privlab.platform.results.tables.render_study` shows metric ``column`` (so the
    other statistics of 10⁴ configurations need not become rows' values): a mean or rate, its
    95% interval, a metric that is no statistic (derived ones), and ε."""
    from privlab.platform.results.tables import STATISTICS

    if column == "eps_total" or (column.endswith(("_mean", "_rate")) and not column.startswith("eps_step_")):
        return True
    if column.endswith("_count") and f"{column.removesuffix('_count')}_mean" in columns:
        return True  # a mean over too few values is shown with its n instead of an interval
    for end in ("_ci_low", "_ci_high"):
        base = column.removesuffix(end)
        if column.endswith(end) and not base.startswith("eps_step_") and \
                (f"{base}_mean" in columns or f"{base}_rate" in columns):
            return True
    statistic = column.rsplit("_", 1)[-1] if "_" in column else ""
    return statistic not in STATISTICS and not column.startswith(("eps_step_", "delta_total", "timing_"))


def comparison_plot(frame: pd.DataFrame, metric: str | None) -> bytes:
    """A PNG of one metric: one panel per study that has it, x a varying parameter of that
    study, one series per combination of its other varying parameters, 95% error bars."""
    from privlab.platform.results.plots import metric_names, plot_panels
    from privlab.platform.results.tables import display_names, varying_params as row_varying

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
