"""The results page of a ``private_forests`` study: a table of test errors with 95% confidence
intervals and, when one setting is swept (ε, depth, trees), a plot against it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from privlab.mechanisms.dipreme.methods import METHOD_LABELS, PRIVATE
from privlab.platform.results.reports import StudyResults, figure_png

__all__ = ["forest_report"]

SWEEPABLE = ("epsilon", "max_depth", "n_estimators", "split_fraction")


def _p(entry: Mapping[str, Any], key: str) -> Any:
    return entry["params"][f"params.{key}"]


def _label(entry: Mapping[str, Any]) -> str:
    method = _p(entry, "method")
    label = METHOD_LABELS[method]
    if method in ("dipreme", "dpert", "median") and _p(entry, "partition") == "full":
        label += " (full data)"
    return label


def _fmt(x: float) -> str:
    return "—" if not isinstance(x, (int, float)) or math.isnan(x) else f"{x:.4g}"


def forest_report(results: StudyResults) -> dict[str, str | bytes]:
    entries = list(results.entries)
    swept = [k for k in SWEEPABLE if len({_p(e, k) for e in entries if _p(e, "method") in PRIVATE or
                                          k in ("max_depth", "n_estimators")}) > 1]
    task = "MSE (target scaled to [0, 1] by its public bounds)" if _p(entries[0], "reader") in (
        "parkinsons", "appliances") else "misclassification rate"
    lines = [f"## {results.study}: test {task}", "",
             f"Run `{results.run_id}` (spec `{results.spec_name}`), root seed {results.root_seed}, "
             f"{results.units} repetitions (random {1 - float(_p(entries[0], 'test_fraction')):.0%}/"
             f"{float(_p(entries[0], 'test_fraction')):.0%} splits) per configuration.", ""]
    if results.command:
        lines += [f"Command: `{results.command}`", ""]
    lines += ["| dataset | method | ε | depth | trees | test error: mean [95% CI] |",
              "| --- | --- | --- | --- | --- | --- |"]

    def key(e: Mapping[str, Any]) -> tuple:
        return (_p(e, "reader"), list(METHOD_LABELS).index(_p(e, "method")), _label(e),
                *(float(_p(e, k)) for k in SWEEPABLE))

    for e in sorted(entries, key=key):
        m = e["metrics"]
        eps = _fmt(float(_p(e, "epsilon"))) if _p(e, "method") in PRIVATE else "∞"
        lines.append(f"| {_p(e, 'reader')} | {_label(e)} | {eps} | {_p(e, 'max_depth')} | {_p(e, 'n_estimators')} | "
                     f"{_fmt(m['test_error_mean'])} [{_fmt(m['test_error_ci_low'])}, {_fmt(m['test_error_ci_high'])}] |")
    files: dict[str, str | bytes] = {}
    if len(swept) == 1:
        files["test_error.png"] = _plot(entries, swept[0], task)
        lines += ["", f"![test error against {swept[0]}](test_error.png)"]
    files["results.md"] = "\n".join(lines) + "\n"
    return files


def _plot(entries: list[Mapping[str, Any]], sweep: str, task: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    by_label: dict[str, list[tuple[float, float, float, float]]] = {}
    for e in entries:
        m = e["metrics"]
        by_label.setdefault(_label(e), []).append((float(_p(e, sweep)), m["test_error_mean"], m["test_error_ci_low"],
                                                   m["test_error_ci_high"]))
    for label, points in sorted(by_label.items()):
        points.sort()
        xs, ys, lo, hi = zip(*points, strict=True)
        axis.errorbar(xs, ys, yerr=[[y - a for y, a in zip(ys, lo, strict=True)],
                                    [b - y for y, b in zip(ys, hi, strict=True)]], marker="o", capsize=3, label=label)
    if sweep == "epsilon":
        axis.set_xscale("log")
    axis.set_xlabel({"epsilon": "ε", "max_depth": "maximum depth", "n_estimators": "number of trees",
                     "split_fraction": "split fraction"}[sweep])
    axis.set_ylabel(f"test {task.split(' (')[0]}")
    axis.legend(fontsize=8)
    return figure_png(figure, dpi=110)
