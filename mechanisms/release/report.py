"""The results page of a release-scheme grid search: acceptance per configuration and per factor.

Drawn by the ``release_flow`` workload's report from a finished run (``privlab run
--report-dir`` or ``privlab report RUN_ID``): the configurations ranked by estimated
acceptance probability (95% Wilson intervals), how often each criterion passed, and the
acceptance rate by level of each factor of the space (transformation alternatives, synthesizer
hyperparameters, projection), plus a PNG of the per-criterion pass rates by factor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

from privlab.platform.results.reports import StudyResults, figure_png  # noqa: E402

FACTORS = ("transformation", "epsilon_split", "theta", "degree", "min_count")


def grid_frame(entries: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per configuration: its factors, attempts, acceptance and per-criterion pass rates."""
    rows = []
    for entry in entries:
        params = {k.removeprefix("params."): v for k, v in entry["params"].items() if k.startswith("params.")}
        metrics = entry["metrics"]
        row: dict[str, Any] = {"config": entry["id"]}
        for factor in FACTORS:
            if params.get(factor) is not None:
                row[factor] = params[factor]
        row["attempts"] = int(metrics.get("accepted_trials", metrics.get("accepted_count", 0)))  # _count: before 0.1 renamed it
        row["accepted"] = metrics["accepted_rate"]
        row["ci_low"] = metrics["accepted_ci_low"]
        row["ci_high"] = metrics["accepted_ci_high"]
        for key, value in metrics.items():
            if key.endswith("_passed_rate"):
                row[key.removesuffix("_passed_rate")] = value
        rows.append(row)
    return pd.DataFrame(rows)


def _criteria(frame: pd.DataFrame) -> list[str]:
    fixed = {"config", "attempts", "accepted", "ci_low", "ci_high", *FACTORS}
    return [c for c in frame.columns if c not in fixed]


def _short(transformation: str) -> str:
    return ",".join(part.split("=")[1] for part in transformation.split(",") if "=" in part)


def _transformed_columns(frame: pd.DataFrame) -> str:
    """The columns a transformation id names (``a=x,b=y`` → ``a, b``), from the first configuration."""
    first = str(frame["transformation"].iloc[0]) if "transformation" in frame and len(frame) else ""
    return ", ".join(part.split("=")[0] for part in first.split(",") if "=" in part) or "columns"


def grid_markdown(frame: pd.DataFrame, *, title: str, header: Sequence[str], top: int = 20) -> str:
    criteria = _criteria(frame)
    attempts = int(frame["attempts"].sum())
    accepted = float((frame["accepted"] * frame["attempts"]).sum())
    lines = [f"## {title}", "", *header, "",
             f"{len(frame):,} configurations, {attempts:,} attempts, {int(round(accepted)):,} accepted "
             f"({accepted / max(attempts, 1):.1%} of attempts); {int((frame['accepted'] > 0).sum()):,} configurations "
             f"accepted at least once; {int((frame['accepted'] >= 0.1).sum()):,} have an estimated acceptance ≥ 10%.",
             "", "### How often each criterion passed (all attempts)", "",
             "| criterion | pass rate |", "| --- | --- |"]
    for criterion in criteria:
        rate = float((frame[criterion] * frame["attempts"]).sum()) / max(attempts, 1)
        lines.append(f"| {criterion} | {rate:.1%} |")
    lines += ["", f"### The {min(top, len(frame))} configurations with the highest estimated acceptance", "",
              f"| configuration | transformation ({_transformed_columns(frame)}) | hyperparameters | min_count | "
              "acceptance [95% Wilson] | attempts |", "| --- | --- | --- | --- | --- | --- |"]
    ranked = frame.sort_values(["accepted", "ci_low"], ascending=False, kind="stable").head(top)
    for _, row in ranked.iterrows():
        hyper = ", ".join(f"{k}={row[k]:g}" for k in ("epsilon_split", "theta", "degree")
                          if k in row and not (isinstance(row[k], float) and math.isnan(row[k])))
        lines.append(f"| {row['config']} | {_short(str(row.get('transformation', '')))} | {hyper} | "
                     f"{row.get('min_count', '')} | {row['accepted']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] | "
                     f"{row['attempts']} |")
    lines += ["", "### Acceptance by factor level (mean over configurations)", ""]
    for factor in FACTORS:
        if factor not in frame or frame[factor].isna().all():
            continue
        table = frame.groupby(frame[factor].map(lambda v: _short(v) if factor == "transformation" else v))
        summary = table.agg(configurations=("accepted", "size"), acceptance=("accepted", "mean"))
        lines += [f"**{factor}**", "", "| level | configurations | mean acceptance |", "| --- | --- | --- |"]
        lines += [f"| {level} | {int(r.configurations)} | {r.acceptance:.1%} |" for level, r in summary.iterrows()]
        lines.append("")
    lines += ["![pass rates by factor](grid.png)", ""]
    return "\n".join(lines)


def grid_png(frame: pd.DataFrame) -> bytes:
    """Per-criterion pass rates and acceptance, by the levels of each synthesizer factor."""
    return figure_png(grid_figure(frame))


def grid_figure(frame: pd.DataFrame) -> Any:
    """:func:`grid_png`'s figure: a panel per factor, each level a labelled tick (θ's levels on a
    log axis, min_count's integers as integers)."""
    criteria = [*_criteria(frame), "accepted"]
    factors = [f for f in ("epsilon_split", "theta", "degree", "min_count") if f in frame and not frame[f].isna().all()]
    figure, axes = plt.subplots(1, max(len(factors), 1), figsize=(4.6 * max(len(factors), 1), 3.8), dpi=110,
                                squeeze=False)
    for ax, factor in zip(axes[0], factors, strict=False):
        grouped = frame.dropna(subset=[factor]).groupby(factor)[criteria].mean()
        for criterion in criteria:
            style = {"linewidth": 2.5, "color": "black"} if criterion == "accepted" else {"linewidth": 1, "alpha": 0.8}
            ax.plot(grouped.index.astype(float), grouped[criterion], marker="o", label=criterion, **style)
        ax.set_xlabel(factor)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("pass rate")
        if factor == "theta":
            ax.set_xscale("log")
        levels = [float(level) for level in grouped.index]
        ax.xaxis.set_minor_locator(NullLocator())  # a log axis's 2×10, 3×10… would crowd the levels
        ax.set_xticks(levels, [f"{level:g}" for level in levels], rotation=45 if len(levels) > 6 else 0,
                      fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def study_report(results: StudyResults) -> dict[str, str | bytes]:
    frame = grid_frame(results.entries)
    header = [f"Run `{results.run_id}` (experiment `{results.experiment}`), root seed {results.root_seed}, "
              f"{results.units} attempt(s) per configuration."]
    if results.command:
        header.append(f"Command: `{results.command}`")
    if wall_time := results.wall_time_sentence():
        header.append(wall_time)
    return {"grid.md": grid_markdown(frame, title=f"Grid search: {results.study}", header=header),
            "grid.png": grid_png(frame), "configurations.csv": frame.to_csv(index=False)}
