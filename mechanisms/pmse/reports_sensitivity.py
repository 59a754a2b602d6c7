"""The results page of the sensitivity study: Table 1 beside the paper's, and Figure 1.

Figure 1 of Snoke & Slavković plots a sample of simulated |Δu| = |pMSE(X) − pMSE(X′)| per
tree depth, darker where the bound 1/n is violated. We draw it from the run's reservoir
samples (a uniform sample of up to 10,000 trials per configuration, identical whatever the
worker count), one panel per cp.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from privlab.platform.results.reports import StudyResults, figure_png  # noqa: E402

PAPER_PERCENT: dict[tuple[str, float], float] = {
    ("1", 0.01): 0.0, ("2", 0.01): 0.3, ("5", 0.01): 0.6, ("unlimited", 0.01): 0.7,
    ("1", 0.001): 0.0, ("2", 0.001): 0.5, ("5", 0.001): 2.0, ("unlimited", 0.001): 2.5,
}
DEPTH_ORDER = ("1", "2", "5", "unlimited")
FLOOR = 1e-8  # differences below it (including exact zeros) are drawn at it


def _key(entry: Mapping[str, Any]) -> tuple[str, float]:
    return str(entry["params"]["depth"]), float(entry["params"]["cp"])


def tree_rule(results: StudyResults) -> str:
    """The tree rule of a run's entries: their ``tree`` param (an entry without one grew greedy
    trees)."""
    rules = sorted({str(e["params"].get("params.tree", e["params"].get("tree", "greedy"))) for e in results.entries})
    return ", ".join(rules) if rules else "greedy"


def _percent(x: float) -> str:
    if x == 0 or x >= 1e-4:
        return f"{100 * x:.2f}%"
    return f"{100 * x:.1e}%"  # e.g. the upper Wilson bound when nothing was seen


def table1_markdown(results: StudyResults) -> str:
    """Table 1 as markdown: our violation rates with Wilson intervals beside the paper's."""
    lines = [
        f"## Table 1: CART violations of Δu ≤ 1/n ({results.study}; tree = {tree_rule(results)})",
        "",
        f"Run `{results.run_id}` (experiment `{results.experiment}`), root seed {results.root_seed}, "
        f"{results.units:,} trials per configuration; all eight configurations share each trial's "
        "(X, X′, Xˢ).",
    ]
    if results.command:
        lines += ["", f"Command: `{results.command}`"]
    if wall_time := results.wall_time_sentence():
        lines += ["", wall_time]
    lines += [
        "",
        "| depth | cp | violation rate [95% Wilson] | paper (10⁶ trials) | max \\|Δu\\| | max \\|Δu\\| · n |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for entry in sorted(results.entries, key=lambda e: (-_key(e)[1], DEPTH_ORDER.index(_key(e)[0]))):
        m = entry["metrics"]
        depth, cp = _key(entry)
        paper = PAPER_PERCENT.get((depth, cp))
        largest = m.get("max_abs_diff", math.nan)
        bound = m.get("bound", math.nan)
        lines.append(
            f"| {depth} | {cp:g} | {_percent(m['violation_rate'])} [{_percent(m['violation_ci_low'])}, "
            f"{_percent(m['violation_ci_high'])}] | {'—' if paper is None else f'{paper:.1f}%'} | "
            f"{largest:.2e} | {largest / bound:.1f} |"
        )
    lines += ["", "![Figure 1](figure1.png)", ""]
    return "\n".join(lines)


def figure1_png(results: StudyResults) -> bytes:
    """Figure 1: sampled |Δu| per depth (one panel per cp), violations of 1/n darker."""
    by_cp: dict[float, list[Mapping[str, Any]]] = {}
    for entry in results.entries:
        by_cp.setdefault(_key(entry)[1], []).append(entry)
    figure, axes = plt.subplots(1, len(by_cp), figsize=(5.2 * len(by_cp), 4.2), dpi=110, squeeze=False,
                                sharey=True)
    jitter_rng = np.random.default_rng(0)  # cosmetic horizontal jitter only
    for ax, (cp, entries) in zip(axes[0], sorted(by_cp.items(), reverse=True), strict=True):
        bound = float(entries[0]["metrics"].get("bound", math.nan))
        for entry in entries:
            depth = _key(entry)[0]
            x = DEPTH_ORDER.index(depth) if depth in DEPTH_ORDER else len(DEPTH_ORDER)
            frame = results.reservoirs.get(entry["id"])
            if frame is None or "abs_diff" not in frame:
                continue
            values = frame["abs_diff"].dropna().to_numpy()
            xs = x + jitter_rng.uniform(-0.3, 0.3, values.size)
            over = values > bound
            values = np.maximum(values, FLOOR)  # log scale: exact zeros drawn on the floor
            ax.scatter(xs[~over], values[~over], s=3, alpha=0.25, color="#9ecae1", linewidths=0)
            ax.scatter(xs[over], values[over], s=5, alpha=0.9, color="#08306b", linewidths=0)
        ax.axhline(bound, color="#d62728", linewidth=1, linestyle="--", label=f"1/n = {bound:.1e}")
        ax.set_yscale("log")
        ax.set_ylim(FLOOR / 2, None)
        ax.set_xticks(range(len(DEPTH_ORDER)), [f"depth {d}" for d in DEPTH_ORDER])
        ax.set_title(f"cp = {cp:g}")
        ax.set_ylabel("|pMSE(X) − pMSE(X′)|")
        ax.legend(loc="upper left", fontsize=8)
    figure.suptitle("Empirical sensitivity of the pMSE: a uniform sample of up to 10,000 trials per "
                    f"configuration (log scale; values ≤ {FLOOR:g} drawn at {FLOOR:g})", fontsize=10)
    return figure_png(figure)
