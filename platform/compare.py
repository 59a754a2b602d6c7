"""Configuration-level comparison read back from MLflow (``privlab compare``).

One row per configuration (child run) of a parent run — by default the experiment's latest
parent run — with its parameters and aggregated metrics. Rendered as an aligned table for
people (``mean [95% CI]``), or exported as CSV/parquet for scripts, plus an optional plot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from privlab.platform.errors import TrackingError
from privlab.platform.tracking import CONFIG_TAG, KIND_TAG, Tracker

ID_COLUMNS = ["config_id", "study", "workload", "parent_run_id", "run_id"]


def comparison_frame(
    tracker: Tracker, experiment: str, *, run_id: str | None = None, all_runs: bool = False,
    metrics: Sequence[str] = (),
) -> pd.DataFrame:
    """The comparison as a DataFrame (params as ``params.*``/``dataset.*`` columns)."""
    experiment_id = tracker.require_experiment(experiment)
    parents = tracker.parent_runs(experiment_id)
    if run_id is not None:
        parents = [p for p in parents if p.info.run_id == run_id]
        if not parents:
            raise TrackingError(f"run {run_id!r} is not a parent run of experiment {experiment!r}")
    elif not all_runs:
        parents = parents[:1]
    if not parents:
        raise TrackingError(f"experiment {experiment!r} has no privlab runs yet; `privlab run` a spec first")
    rows: list[dict[str, Any]] = []
    for parent in parents:
        for child in tracker.child_runs(experiment_id, parent.info.run_id):
            tags = child.data.tags
            if tags.get(KIND_TAG) != "configuration":
                continue
            row: dict[str, Any] = {
                "config_id": tags.get(CONFIG_TAG, ""),
                "study": tags.get("privlab.study", ""),
                "workload": tags.get("privlab.workload", ""),
                "parent_run_id": parent.info.run_id,
                "run_id": child.info.run_id,
            }
            for key, value in child.data.params.items():
                if key.startswith(("params.", "dataset.")):
                    row[key] = _parse(value)
            row.update(child.data.metrics)
            rows.append(row)
    if not rows:
        raise TrackingError(f"the selected run of {experiment!r} has no finished configurations yet")
    frame = pd.DataFrame(rows).sort_values(["parent_run_id", "config_id"], kind="stable").reset_index(drop=True)
    if metrics:
        known = [c for c in frame.columns if c not in ID_COLUMNS and not c.startswith(("params.", "dataset."))]
        keep = [c for c in known if any(c == m or c.startswith(f"{m}_") for m in metrics)]
        missing = [m for m in metrics if not any(c == m or c.startswith(f"{m}_") for c in known)]
        if missing:
            bases = sorted({c.rsplit("_", 1)[0] if c.endswith(("_mean", "_rate")) else c for c in known
                            if not c.startswith("timing_")})
            raise TrackingError(f"unknown metric(s) {', '.join(map(repr, missing))}; available: {', '.join(bases)}")
        frame = frame[[c for c in frame.columns if c in ID_COLUMNS or c.startswith(("params.", "dataset.")) or c in keep]]
    return frame


def _parse(value: str) -> Any:
    try:
        return json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return value


def varying_params(frame: pd.DataFrame) -> list[str]:
    columns = [c for c in frame.columns if c.startswith(("params.", "dataset."))]
    return [c for c in columns if frame[c].astype(str).nunique() > 1]


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return f"{x:.4g}"
    return str(x)


def render_table(frame: pd.DataFrame) -> str:
    """One aligned text table per study: its varying parameters, then ``mean [95% CI]`` or
    ``rate [95% CI]`` per metric, then derived metrics and ε."""
    blocks = []
    for study, rows in frame.groupby("study", sort=False):
        rows = rows.dropna(axis=1, how="all").reset_index(drop=True)
        runs = rows["parent_run_id"].nunique()
        title = f"{study} ({len(rows)} configuration{'s' if len(rows) != 1 else ''}"
        title += f", {runs} runs)" if runs > 1 else ")"
        blocks.append(title + "\n" + _render_study(rows))
    return "\n\n".join(blocks)


def _render_study(frame: pd.DataFrame) -> str:
    columns: dict[str, list[str]] = {"config": frame["config_id"].tolist()}
    for param in varying_params(frame):
        columns[param.split(".", 1)[1]] = [_fmt(v) for v in frame[param]]
    metric_columns = [c for c in frame.columns if c not in ID_COLUMNS and not c.startswith(("params.", "dataset.", "timing_"))]
    shown: set[str] = set()
    for column in metric_columns:
        if column.endswith(("_mean", "_rate")) and not column.startswith("eps_step_"):
            base = column.rsplit("_", 1)[0]
            low, high = f"{base}_ci_low", f"{base}_ci_high"
            cells = []
            for _, row in frame.iterrows():
                cell = _fmt(row[column])
                if low in frame.columns and high in frame.columns and not math.isnan(row[low]):
                    cell += f" [{_fmt(row[low])}, {_fmt(row[high])}]"
                cells.append(cell)
            columns[base] = cells
            shown.update({column, low, high})
    for column in metric_columns:
        statistic = column.rsplit("_", 1)[-1] if "_" in column else ""
        if column in shown or statistic in {"sd", "min", "max", "p05", "p50", "p95", "count", "successes", "low", "high"}:
            continue
        if column.startswith(("eps_step_", "delta_total")):
            continue
        columns["ε" if column == "eps_total" else column] = [_fmt(v) for v in frame[column]]
    widths = {k: max(len(k), *(len(v) for v in values)) for k, values in columns.items()}
    lines = ["  ".join(k.ljust(widths[k]) for k in columns), "  ".join("-" * widths[k] for k in columns)]
    for i in range(len(frame)):
        lines.append("  ".join(columns[k][i].ljust(widths[k]) for k in columns))
    return "\n".join(lines)


def comparison_plot(frame: pd.DataFrame, metric: str | None) -> bytes:
    """A PNG of one metric across configurations (error bars are 95% intervals)."""
    from privlab.platform.plots import metric_names, plot_metric

    varying = varying_params(frame)
    entries = []
    for _, row in frame.iterrows():
        metrics = {k: float(v) for k, v in row.items()
                   if k not in ID_COLUMNS and not str(k).startswith(("params.", "dataset.")) and isinstance(v, float)}
        entries.append({"grid_point": {p.split(".", 1)[1]: row[p] for p in varying}, "metrics": metrics,
                        "study": row["study"]})
    names = metric_names(entries)
    chosen = metric or (names[0] if names else None)
    if chosen is None:
        raise TrackingError("no plottable metric in this comparison")
    png = plot_metric(entries, chosen, title=f"{chosen} by configuration (95% CI)")
    if png is None:
        raise TrackingError(f"metric {chosen!r} has no values to plot; plottable: {', '.join(names)}")
    return png
