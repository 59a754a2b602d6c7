"""Plots of configuration-level results: one PNG per study and metric.

The x axis is the study's first numeric grid axis (log scale when it spans a factor ≥ 10);
each remaining combination of grid values is one line; error bars are the 95% intervals
(t interval of the mean, Wilson interval of a rate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from privlab.platform.experiment.spec import ExperimentSpec  # noqa: E402
from privlab.platform.results.reports import figure_png  # noqa: E402


def _centre(metrics: Mapping[str, float], name: str) -> tuple[float, float, float] | None:
    for statistic in ("mean", "rate"):
        key = f"{name}_{statistic}"
        if key in metrics:
            return metrics[key], metrics.get(f"{name}_ci_low", metrics[key]), metrics.get(f"{name}_ci_high", metrics[key])
    if name in metrics:
        return metrics[name], metrics[name], metrics[name]
    return None


STATISTIC_SUFFIXES = (
    "_count", "_trials", "_sd", "_ci_low", "_ci_high", "_min", "_max", "_p05", "_p50", "_p95", "_successes",
)


def metric_names(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Plottable metrics: aggregated ones (by their ``_mean``/``_rate``) and derived ones."""
    names: list[str] = []
    for entry in entries:
        for key in entry["metrics"]:
            if key.startswith(("eps_", "delta_")) or key.endswith(STATISTIC_SUFFIXES):
                continue
            base = key.rsplit("_", 1)[0] if key.endswith(("_mean", "_rate")) else key
            if base not in names:
                names.append(base)
    return names


def plot_metric(entries: Sequence[Mapping[str, Any]], metric: str, *, title: str) -> bytes | None:
    """A PNG of ``metric`` across configurations, or None when nothing can be drawn."""
    points = _points(entries, metric)
    if not points:
        return None
    figure, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    _draw(ax, points, metric)
    ax.set_title(title)
    return _png(figure)


Point = tuple[Mapping[str, Any], tuple[float, float, float]]  # (grid point, (centre, low, high))


def plot_panels(
    panels: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], metric: str, *, title: str
) -> bytes | None:
    """A PNG with one panel per ``(name, entries)`` that has ``metric`` (a study each, with
    its own x axis, series and legend), or None when none has it."""
    drawable = [(name, points) for name, entries in panels if (points := _points(entries, metric))]
    if not drawable:
        return None
    figure, axes = plt.subplots(len(drawable), 1, figsize=(6.4, 3.6 * len(drawable)), dpi=110, squeeze=False)
    for ax, (name, points) in zip(axes[:, 0], drawable):
        _draw(ax, points, metric)
        ax.set_title(name)
    figure.suptitle(title)
    return _png(figure)


def _points(entries: Sequence[Mapping[str, Any]], metric: str) -> list[Point]:
    points = [(e["grid_point"], _centre(e["metrics"], metric)) for e in entries]
    return [(g, c) for g, c in points if c is not None and not any(map(math.isnan, c))]


def _png(figure: Any) -> bytes:
    return figure_png(figure)


def _draw(ax: Any, points: Sequence[Point], metric: str) -> None:
    """One metric on ``ax``: x is the first numeric grid axis, one series per combination of
    the other axes (legend entries name only those), error bars the intervals."""
    axes = list(points[0][0])
    numeric = [a for a in axes if all(isinstance(g.get(a), (int, float)) and not isinstance(g.get(a), bool) for g, _ in points)]
    if numeric:
        x_axis = numeric[0]
        others = [a for a in axes if a != x_axis]
        series: dict[str, list[tuple[float, tuple[float, float, float]]]] = {}
        for grid_point, centre in points:
            label = ", ".join(f"{a}={grid_point[a]}" for a in others) or metric
            series.setdefault(label, []).append((float(grid_point[x_axis]), centre))
        for label, values in series.items():
            values.sort()
            xs = [x for x, _ in values]
            ys = [c[0] for _, c in values]
            low = [max(c[0] - c[1], 0.0) for _, c in values]
            high = [max(c[2] - c[0], 0.0) for _, c in values]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=label)
        xs_all = [float(g[x_axis]) for g, _ in points]
        if min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 10:
            ax.set_xscale("log")
        ax.set_xlabel(x_axis)
        if len(series) > 1:
            ax.legend(fontsize="small")
    else:
        labels = [", ".join(f"{k}={v}" for k, v in g.items()) or "all" for g, _ in points]
        ys = [c[0] for _, c in points]
        ax.errorbar(range(len(ys)), ys, yerr=[[c[0] - c[1] for _, c in points], [c[2] - c[0] for _, c in points]],
                    fmt="o", capsize=3)
        ax.set_xticks(range(len(ys)), labels, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel(metric)
    ax.grid(True, alpha=0.3)


def study_plots(spec: ExperimentSpec, entries: Sequence[Mapping[str, Any]]) -> dict[str, bytes]:
    """``{"<study>-<metric>.png": png}`` for every study and plottable metric."""
    plots: dict[str, bytes] = {}
    for study in spec.studies:
        rows = [e for e in entries if e["study"] == study.name]
        for metric in metric_names(rows):
            png = plot_metric(rows, metric, title=f"{spec.name} · {study.name}: {metric} (95% CI)")
            if png is not None:
                plots[f"{study.name}-{metric}.png"] = png
    return plots
