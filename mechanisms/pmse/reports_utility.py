"""Results pages of the pMSE utility studies: Table 2 / Figure 3 and Section 6 / Figures 2 and 4.

The workloads of :mod:`.utility_studies` return these pages from ``Workload.report``; the
runner logs them on the parent run under ``report/<study>/`` (and writes them to
``--report-dir``). Every page names the run, root seed, repetitions and command, puts the
paper's values (Table 2) or findings (Section 6, whose figures give no numbers) beside ours,
and reports the measured compute time per simulation of each configuration.

Box plots are drawn from the run's reservoir samples (every repetition while there are at most
10,000 per configuration).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from privlab.mechanisms.pmse.reports_sensitivity import tree_rule
from privlab.mechanisms.pmse.utility_methods import FAMILY_LABELS, METHODS, Method  # noqa: E402
from privlab.platform.results.reports import StudyResults, figure_png  # noqa: E402

#: Table 2 of Snoke & Slavković: ε → method → (mean, variance) of the pMSE over 2,500 simulations.
#: The ε = 1 and ε = 2 rows print identical variances in every column — most likely a copy
#: error in the paper — so the ε = 2 variances are shown but flagged.
PAPER_TABLE2: dict[float, dict[str, tuple[float, float]]] = {
    0.25: {"non_dp": (0.00660, 8.681e-07), "pmse_mechanism": (0.09281, 1.347e-03),
           "noisy_bppd": (0.20509, 3.079e-03), "smooth_histogram": (0.08206, 2.826e-05)},
    0.5: {"non_dp": (0.00663, 8.929e-07), "pmse_mechanism": (0.03610, 8.020e-05),
          "noisy_bppd": (0.17876, 5.914e-03), "smooth_histogram": (0.05398, 1.809e-05)},
    1.0: {"non_dp": (0.00661, 8.342e-07), "pmse_mechanism": (0.02107, 1.648e-05),
          "noisy_bppd": (0.14372, 8.579e-03), "smooth_histogram": (0.03278, 1.069e-05)},
    2.0: {"non_dp": (0.00660, 8.342e-07), "pmse_mechanism": (0.01459, 1.648e-05),
          "noisy_bppd": (0.11177, 8.579e-03), "smooth_histogram": (0.01892, 1.069e-05)},
    4.0: {"non_dp": (0.00660, 8.671e-07), "pmse_mechanism": (0.01161, 3.329e-06),
          "noisy_bppd": (0.07919, 9.087e-03), "smooth_histogram": (0.01129, 5.964e-06)},
}
PAPER_DUPLICATED_VARIANCE_EPSILON = 2.0
PAPER_TABLE2_SIMULATIONS = 2500
#: Our metric the paper's Table 2 is drawn beside in Figure 3: the cp = 0.001 tree's pMSE, the
#: one whose null value matches the paper's non-DP row (see :func:`figure3_png`).
PAPER_TABLE2_METRIC = "pmse_cp0001"

FAMILY_ORDER = ("non_dp", "pmse_mechanism", "noisy_bppd", "smooth_histogram",
                "functional_mechanism_l1", "functional_mechanism_linf")
FAMILY_COLOURS = {
    "non_dp": "#444444", "pmse_mechanism": "#1f77b4", "noisy_bppd": "#d62728",
    "smooth_histogram": "#2ca02c", "functional_mechanism_l1": "#9467bd", "functional_mechanism_linf": "#ff7f0e",
}
LINE_STYLES = ("-", "--", "-.", ":")


# --- reading the entries ---------------------------------------------------------------------


def _variant(entry: Mapping[str, Any]) -> Method:
    return Method.from_table(entry["params"]["params.method"], allowed=METHODS)


def _epsilon(entry: Mapping[str, Any]) -> float:
    return float(entry["params"]["params.epsilon"])


def _variant_order(method: Method) -> tuple[int, float]:
    family = FAMILY_ORDER.index(method.family) if method.family in FAMILY_ORDER else len(FAMILY_ORDER)
    if method.name == "pmse_mechanism":
        return family, math.inf if method.max_depth is None else float(method.max_depth)
    return family, method.bound_sd if method.bound_sd is not None else 0.0


def _seconds_per_simulation(results: StudyResults, entry: Mapping[str, Any]) -> float:
    timing = results.timing.get("configurations", {}).get(entry["id"], {})
    seconds = timing.get("compute_seconds")
    units = entry.get("units") or 0
    return float(seconds) / units if isinstance(seconds, (int, float)) and units else math.nan


def _header(results: StudyResults, title: str, what: str) -> list[str]:
    lines = [
        f"## {title}",
        "",
        f"Run `{results.run_id}` (experiment `{results.experiment}`, spec `{results.spec_name}`), root seed "
        f"{results.root_seed}, {results.units:,} simulations (repetitions) per configuration, "
        f"{len(results.entries)} configurations; {what}",
    ]
    if results.command:
        lines += ["", f"Command: `{results.command}`"]
    if wall_time := results.wall_time_sentence():
        lines += ["", wall_time]
    return lines


def _fmt(x: float, digits: int = 4) -> str:
    if not isinstance(x, (int, float)) or math.isnan(x):
        return "—"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.{max(digits - 1, 1)}e}"


def _epsilon_axis(ax: Any, epsilons: Sequence[float]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(epsilons), [f"{e:g}" for e in epsilons])
    ax.minorticks_off()
    ax.set_xlabel("ε")


# --- Table 2 / Figure 3 ---------------------------------------------------------------------------


def comparison_report(results: StudyResults) -> dict[str, str | bytes]:
    """``table2.md`` (ours beside the paper's) and ``figure3.png`` (mean pMSE against ε)."""
    return {"table2.md": table2_markdown(results), "figure3.png": figure3_png(results)}


def table2_markdown(results: StudyResults) -> str:
    """Table 2 with our mean and variance of the pMSE beside the paper's, per ε and method."""
    rows = sorted(results.entries, key=lambda e: (_epsilon(e), _variant_order(_variant(e))))
    lines = _header(results, f"Table 2: pMSE of the released synthetic datasets ({results.study})",
                    f"pMSE from a CART of unlimited depth (tree = {tree_rule(results)}) on the stacked real "
                    "and synthetic data.")
    lines += [
        "",
        "`pmse` is the mean over the l released datasets of one simulation, `single` the first dataset "
        "alone; mean and variance are across simulations. cp = 0.01 is the tree the pMSE mechanism uses "
        "as its quality function; cp = 0.001 is Table 1's second cp. The paper's column is its Table 2 "
        f"({PAPER_TABLE2_SIMULATIONS:,} simulations; the paper does not say whether a simulation's value "
        "is one dataset's pMSE or an average, so both variances are shown).",
        "",
        "| ε | method | mean pMSE [95% CI] (cp 0.01) | var (mean of l) | mean pMSE [95% CI] (cp 0.001) "
        "| var (cp 0.001, mean of l) | var (cp 0.001, single) | paper mean | paper var | s / simulation |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for entry in rows:
        m = entry["metrics"]
        variant = _variant(entry)
        epsilon = _epsilon(entry)
        paper = PAPER_TABLE2.get(epsilon, {}).get(variant.name)
        flag = "†" if epsilon == PAPER_DUPLICATED_VARIANCE_EPSILON else ""
        paper_mean = "—" if paper is None else _fmt(paper[0])
        paper_var = "—" if paper is None else _fmt(paper[1]) + flag
        lines.append(
            f"| {epsilon:g} | {variant.label} | {_fmt(m['pmse_mean'])} [{_fmt(m['pmse_ci_low'])}, "
            f"{_fmt(m['pmse_ci_high'])}] | {_fmt(m['pmse_sd'] ** 2, 3)} | {_fmt(m['pmse_cp0001_mean'])} "
            f"[{_fmt(m['pmse_cp0001_ci_low'])}, {_fmt(m['pmse_cp0001_ci_high'])}] | "
            f"{_fmt(m['pmse_cp0001_sd'] ** 2, 3)} | {_fmt(m['pmse_cp0001_single_sd'] ** 2, 3)} | {paper_mean} | "
            f"{paper_var} | {_fmt(_seconds_per_simulation(results, entry), 3)} |"
        )
    lines += [
        "",
        "† The paper's ε = 1 and ε = 2 rows print the same variance in every column (most likely a copy "
        "error); its ε = 2 variances are not comparable.",
        "",
        "![Figure 3](figure3.png)",
        "",
    ]
    return "\n".join(lines)


def figure3_png(results: StudyResults) -> bytes:
    """Figure 3: mean pMSE against ε per method (ours solid with 95% CIs, the paper's dashed).

    The paper's values are drawn beside our cp = 0.001 tree's: its non-DP value (0.0066) is what
    that tree gives two samples of one distribution, while cp = 0.01 gives 1.5e-4
    (experiments/pmse/RESULTS.md, "Which cp the paper's Table 2 most likely used")."""
    by_method: dict[str, list[tuple[float, Mapping[str, float]]]] = {}
    labels: dict[str, str] = {}
    for entry in results.entries:
        variant = _variant(entry)
        key = variant.label
        labels[key] = variant.name
        by_method.setdefault(key, []).append((_epsilon(entry), entry["metrics"]))
    epsilons = sorted({_epsilon(e) for e in results.entries})
    figure, axes = plt.subplots(1, 2, figsize=(11.5, 4.4), dpi=110)
    for ax, (metric, title) in zip(axes, (("pmse", "cp = 0.01"), ("pmse_cp0001", "cp = 0.001")), strict=True):
        for key, points in sorted(by_method.items(), key=lambda kv: FAMILY_ORDER.index(labels[kv[0]])):
            points.sort(key=lambda p: p[0])
            colour = FAMILY_COLOURS.get(labels[key], "black")
            xs = [p[0] for p in points]
            ys = np.array([p[1][f"{metric}_mean"] for p in points])
            low = ys - np.array([p[1][f"{metric}_ci_low"] for p in points])
            high = np.array([p[1][f"{metric}_ci_high"] for p in points]) - ys
            ax.errorbar(xs, ys, yerr=[np.maximum(low, 0), np.maximum(high, 0)], marker="o", capsize=3,
                        color=colour, label=f"{key} (ours)")
            paper = [(e, PAPER_TABLE2[e][labels[key]][0]) for e in xs if labels[key] in PAPER_TABLE2.get(e, {})]
            if paper and metric == PAPER_TABLE2_METRIC:
                ax.plot([p[0] for p in paper], [p[1] for p in paper], linestyle="--", marker="s",
                        markerfacecolor="none", color=colour, alpha=0.8, label=f"{FAMILY_LABELS[labels[key]]} (paper)")
        _epsilon_axis(ax, epsilons)
        ax.set_ylim(bottom=-0.005)  # the pMSE is ≥ 0; t intervals of tiny samples can reach below
        ax.set_ylabel("mean pMSE (0 = indistinguishable)")
        ax.set_title(f"pMSE tree: unlimited depth, {title}")
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    figure.suptitle(f"Figure 3: mean pMSE by method ({results.units:,} simulations per point; 95% CI)", fontsize=10)
    return figure_png(figure)


# --- Section 6 / Figures 2 and 4 ---------------------------------------------------------------------


REGRESSION_METRICS = (("intercept_error", "|β̂₀ − β̂₀,priv| (intercept)"), ("slope_error", "|β̂₁ − β̂₁,priv| (slope)"))


def regression_report(results: StudyResults) -> dict[str, str | bytes]:
    """``section6.md``, ``figure2.png`` (selected lines), ``figure4_lines.png`` (every variant)
    and ``figure4_boxes.png`` (box plots of the simulations)."""
    return {
        "section6.md": section6_markdown(results),
        "figure2.png": figure2_png(results),
        "figure4_lines.png": figure4_lines_png(results),
        "figure4_boxes.png": figure4_boxes_png(results),
    }


def _table(results: StudyResults) -> dict[str, dict[float, Mapping[str, Any]]]:
    """label → ε → entry, in variant order."""
    table: dict[str, dict[float, Mapping[str, Any]]] = {}
    for entry in sorted(results.entries, key=lambda e: (_variant_order(_variant(e)), _epsilon(e))):
        table.setdefault(_variant(entry).label, {})[_epsilon(entry)] = entry
    return table


def section6_markdown(results: StudyResults) -> str:
    """Mean |β̂ − β̂priv| per variant and ε, and the paper's Section-6 findings checked on them."""
    table = _table(results)
    epsilons = sorted({_epsilon(e) for e in results.entries})
    lines = _header(results, f"Section 6: accuracy of the regression of X₂ on X₁ ({results.study})",
                    "each cell is the mean over simulations of |β̂ − β̂priv| with its 95% CI.")
    for metric, title in REGRESSION_METRICS:
        lines += ["", f"**{title}**", "",
                  "| method | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |",
                  "| --- |" + " --- |" * len(epsilons)]
        for label, cells in table.items():
            row = []
            for e in epsilons:
                entry = cells.get(e)
                if entry is None:
                    row.append("—")
                    continue
                m = entry["metrics"]
                row.append(f"{_fmt(m[f'{metric}_mean'], 3)} [{_fmt(m[f'{metric}_ci_low'], 3)}, "
                           f"{_fmt(m[f'{metric}_ci_high'], 3)}]")
            lines.append(f"| {label} | " + " | ".join(row) + " |")
    lines += ["", "**Compute time per simulation (s)**", "",
              "| method | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |",
              "| --- |" + " --- |" * len(epsilons)]
    for label, cells in table.items():
        lines.append(f"| {label} | " + " | ".join(
            _fmt(_seconds_per_simulation(results, cells[e]), 3) if e in cells else "—" for e in epsilons) + " |")
    lines += ["", "**The paper's findings (Section 6), checked on these means**", "",
              "| finding | ε | holds here? | evidence (means of the intercept and slope errors) |",
              "| --- | --- | --- | --- |"]
    for finding, epsilon, verdict, evidence in section6_findings(results):
        lines.append(f"| {finding} | {epsilon:g} | {verdict} | {evidence} |")
    lines += [
        "",
        "A finding “holds” (yes) when every comparison it makes holds for both the intercept and the slope "
        "means, “partly” when only some do, “no” when none does. Comparisons whose 95% intervals overlap "
        "(≈) are within Monte Carlo error at this number of simulations.",
        "",
        "![Figure 2](figure2.png)",
        "",
        "![Figure 4, lines](figure4_lines.png)",
        "",
        "![Figure 4, box plots](figure4_boxes.png)",
        "",
    ]
    return "\n".join(lines)


def _mean_ci(entry: Mapping[str, Any], metric: str) -> tuple[float, float, float]:
    m = entry["metrics"]
    return m[f"{metric}_mean"], m[f"{metric}_ci_low"], m[f"{metric}_ci_high"]


def section6_findings(results: StudyResults) -> list[tuple[str, float, str, str]]:
    """The paper's Section-6 claims, each evaluated per ε on this run's means.

    Returns ``(finding, ε, verdict, evidence)`` rows; a finding whose variants are not all in
    the run is skipped.
    """
    by_key: dict[tuple[str, str], dict[float, Mapping[str, Any]]] = {}
    for entry in results.entries:
        variant = _variant(entry)
        by_key.setdefault((variant.family, variant.setting), {})[_epsilon(entry)] = entry
    epsilons = sorted({_epsilon(e) for e in results.entries})

    def check(pairs: Sequence[tuple[tuple[str, str], tuple[str, str]]], epsilon: float) -> tuple[str, str] | None:
        """Compare mean(better) < mean(worse) for both metrics of every pair."""
        held = total = overlapping = 0
        failed, failed_within_noise = [], 0
        for better, worse in pairs:
            a, b = by_key.get(better, {}).get(epsilon), by_key.get(worse, {}).get(epsilon)
            if a is None or b is None:
                return None
            for metric, _ in REGRESSION_METRICS:
                ma, la, ha = _mean_ci(a, metric)
                mb, lb, hb = _mean_ci(b, metric)
                total += 1
                overlap = la <= hb and lb <= ha
                if ma < mb:
                    held += 1
                    overlapping += overlap
                elif overlap:
                    failed_within_noise += 1
                else:
                    failed.append(f"{_short(better)} vs {_short(worse)}, {metric.split('_')[0]}: "
                                  f"{_fmt(ma, 3)} ≥ {_fmt(mb, 3)}")
        verdict = "yes" if held == total else ("no" if held == 0 else "partly")
        evidence = f"{held} of {total} comparisons hold ({overlapping} of them within overlapping 95% CIs)"
        if failed_within_noise:
            evidence += f"; {failed_within_noise} {'fails' if failed_within_noise == 1 else 'fail'} within overlapping CIs"
        if failed:
            evidence += (f"; {len(failed)} {'fails' if len(failed) == 1 else 'fail'} with separated CIs: "
                         + "; ".join(failed))
        return verdict, evidence

    bounded = ["noisy_bppd", "smooth_histogram", "functional_mechanism_l1", "functional_mechanism_linf"]
    findings: list[tuple[str, Callable[[], list[tuple[tuple[str, str], tuple[str, str]]]]]] = [
        ("pMSE mechanism: depth 2 beats depth 1, depth 5 beats depth 2",
         lambda: [(("pmse_mechanism", "depth 2"), ("pmse_mechanism", "depth 1")),
                  (("pmse_mechanism", "depth 5"), ("pmse_mechanism", "depth 2"))]),
        ("bounded methods: 2 sd beats 4 sd, and every bound beats 10 sd",
         lambda: [pair for family in bounded for pair in
                  [((family, "2 sd"), (family, "4 sd")), ((family, "2 sd"), (family, "10 sd")),
                   ((family, "4 sd"), (family, "10 sd")), ((family, "5 sd"), (family, "10 sd"))]]),
        ("pMSE mechanism depth 5 and unlimited beat noisy BPPD and smooth histogram at every bound",
         lambda: [((("pmse_mechanism", depth)), (family, f"{b} sd")) for depth in ("depth 5", "depth unlimited")
                  for family in ("noisy_bppd", "smooth_histogram") for b in (2, 4, 5, 10)]),
        ("pMSE mechanism depth 2 beats noisy BPPD and smooth histogram at 4 sd",
         lambda: [(("pmse_mechanism", "depth 2"), (family, "4 sd")) for family in ("noisy_bppd", "smooth_histogram")]),
        ("functional mechanism (best bound, 2 sd) beats the pMSE mechanism at depth unlimited",
         lambda: [((family, "2 sd"), ("pmse_mechanism", "depth unlimited"))
                  for family in ("functional_mechanism_l1", "functional_mechanism_linf")]),
    ]
    rows = []
    for finding, pairs in findings:
        for epsilon in epsilons:
            outcome = check(pairs(), epsilon)
            if outcome is not None:
                rows.append((finding, epsilon, *outcome))
    depth_pairs = [(("pmse_mechanism", "depth 5"), ("pmse_mechanism", "depth unlimited"))]
    for epsilon in epsilons:
        a = by_key.get(depth_pairs[0][0], {}).get(epsilon)
        b = by_key.get(depth_pairs[0][1], {}).get(epsilon)
        if a is None or b is None:
            continue
        parts = []
        close = True
        for metric, _ in REGRESSION_METRICS:
            ma, la, ha = _mean_ci(a, metric)
            mb, lb, hb = _mean_ci(b, metric)
            overlap = la <= hb and lb <= ha
            close &= overlap
            parts.append(f"{_fmt(ma, 3)} vs {_fmt(mb, 3)}{' ≈' if overlap else ''}")
        rows.append(("pMSE mechanism: little change from depth 5 to unlimited (95% CIs overlap)", epsilon,
                     "yes" if close else "no", "depth 5 vs unlimited: " + "; ".join(parts)))
    return rows


def _short(key: tuple[str, str]) -> str:
    family, setting = key
    return f"{FAMILY_LABELS.get(family, family)} {setting}".strip()


def _lines(ax: Any, series: Mapping[str, list[tuple[float, tuple[float, float, float]]]],
           styles: Mapping[str, tuple[str, str]], epsilons: Sequence[float]) -> None:
    for label, points in series.items():
        points.sort(key=lambda p: p[0])
        colour, style = styles[label]
        xs = [p[0] for p in points]
        ys = np.array([p[1][0] for p in points])
        low = np.maximum(ys - np.array([p[1][1] for p in points]), 0)
        high = np.maximum(np.array([p[1][2] for p in points]) - ys, 0)
        ax.errorbar(xs, ys, yerr=[low, high], marker="o", markersize=4, capsize=2, color=colour, linestyle=style,
                    label=label)
    _epsilon_axis(ax, epsilons)
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3, which="both")


def _series(results: StudyResults, metric: str, keep: Callable[[Method], bool]
            ) -> tuple[dict[str, list[tuple[float, tuple[float, float, float]]]], dict[str, tuple[str, str]]]:
    series: dict[str, list[tuple[float, tuple[float, float, float]]]] = {}
    styles: dict[str, tuple[str, str]] = {}
    settings: dict[str, list[str]] = {}
    for entry in sorted(results.entries, key=lambda e: _variant_order(_variant(e))):
        variant = _variant(entry)
        if not keep(variant):
            continue
        settings.setdefault(variant.family, [])
        if variant.setting not in settings[variant.family]:
            settings[variant.family].append(variant.setting)
        style = LINE_STYLES[settings[variant.family].index(variant.setting) % len(LINE_STYLES)]
        styles[variant.label] = (FAMILY_COLOURS.get(variant.family, "black"), style)
        series.setdefault(variant.label, []).append((_epsilon(entry), _mean_ci(entry, metric)))
    return series, styles


def best_bounds(results: StudyResults) -> dict[str, float]:
    """Per bounded family, the bound with the lowest mean slope error averaged over ε (this run)."""
    scores: dict[tuple[str, float], list[float]] = {}
    for entry in results.entries:
        variant = _variant(entry)
        if variant.bound_sd is not None:
            scores.setdefault((variant.family, variant.bound_sd), []).append(entry["metrics"]["slope_error_mean"])
    best: dict[str, tuple[float, float]] = {}
    for (family, bound), values in scores.items():
        score = float(np.mean(values))
        if family not in best or score < best[family][1]:
            best[family] = (bound, score)
    return {family: bound for family, (bound, _) in best.items()}


def figure2_png(results: StudyResults) -> bytes:
    """Figure 2: mean errors against ε for the better-performing variants only.

    Shown: non-DP, the pMSE mechanism at depths 5 and unlimited, and each bounded method at its
    best bound in this run (lowest mean slope error averaged over ε), as the paper limits its
    Figure 2 to the better results for readability.
    """
    best = best_bounds(results)

    def keep(v: Method) -> bool:
        if v.name == "pmse_mechanism":
            return v.max_depth is None or v.max_depth >= 5
        if v.bound_sd is not None:
            return best.get(v.family) == v.bound_sd
        return True

    epsilons = sorted({_epsilon(e) for e in results.entries})
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6), dpi=110)
    for ax, (metric, title) in zip(axes, REGRESSION_METRICS, strict=True):
        series, styles = _series(results, metric, keep)
        _lines(ax, series, styles, epsilons)
        ax.set_ylabel(f"mean {title}")
    axes[1].legend(fontsize=7, loc="best")
    figure.suptitle(f"Figure 2: mean regression error, better-performing variants ({results.units:,} simulations "
                    "per point; 95% CI)", fontsize=10)
    return figure_png(figure)


def figure4_lines_png(results: StudyResults) -> bytes:
    """Figure 4 (lines): every variant, one column per method family, non-DP in each as reference."""
    families = [f for f in FAMILY_ORDER if f != "non_dp" and any(_variant(e).family == f for e in results.entries)]
    families = families or ["non_dp"]
    epsilons = sorted({_epsilon(e) for e in results.entries})
    figure, axes = plt.subplots(2, len(families), figsize=(3.6 * len(families), 6.6), dpi=110, squeeze=False,
                                sharey="row")
    for row, (metric, title) in enumerate(REGRESSION_METRICS):
        for column, family in enumerate(families):
            ax = axes[row][column]
            series, styles = _series(results, metric, lambda v, f=family: v.family in (f, "non_dp"))
            _lines(ax, series, styles, epsilons)
            if row == 0:
                ax.set_title(FAMILY_LABELS.get(family, family), fontsize=9)
            if column == 0:
                ax.set_ylabel(f"mean {title}", fontsize=8)
            ax.legend(fontsize=6, loc="best")
    figure.suptitle(f"Figure 4: mean regression error of every variant ({results.units:,} simulations per point)",
                    fontsize=10)
    return figure_png(figure)


def figure4_boxes_png(results: StudyResults) -> bytes:
    """Figure 4 (box plots): the distribution of the errors over simulations, per ε and variant."""
    epsilons = sorted({_epsilon(e) for e in results.entries})
    variants = sorted({_variant(e).label: _variant_order(_variant(e)) for e in results.entries}.items(),
                      key=lambda kv: kv[1])
    labels = [label for label, _ in variants]
    families = {_variant(e).label: _variant(e).family for e in results.entries}
    figure, axes = plt.subplots(2, len(epsilons), figsize=(4.8 * len(epsilons), 8.5), dpi=100, squeeze=False,
                                sharey="row")
    for row, (metric, title) in enumerate(REGRESSION_METRICS):
        for column, epsilon in enumerate(epsilons):
            ax = axes[row][column]
            data, positions, colours = [], [], []
            for position, label in enumerate(labels):
                entry = next((e for e in results.entries if _epsilon(e) == epsilon and _variant(e).label == label), None)
                frame = results.reservoirs.get(entry["id"]) if entry is not None else None
                if frame is None or metric not in frame:
                    continue
                values = frame[metric].dropna().to_numpy()
                values = values[values > 0]
                if values.size:
                    data.append(values)
                    positions.append(position)
                    colours.append(FAMILY_COLOURS.get(families[label], "black"))
            if data:
                boxes = ax.boxplot(data, positions=positions, widths=0.6, patch_artist=True, showfliers=True,
                                   flierprops={"markersize": 2, "alpha": 0.4})
                for patch, colour in zip(boxes["boxes"], colours, strict=True):
                    patch.set_facecolor(colour)
                    patch.set_alpha(0.45)
            ax.set_yscale("log")
            ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
            ax.set_xlim(-0.7, len(labels) - 0.3)
            ax.grid(True, axis="y", alpha=0.3, which="both")
            if row == 0:
                ax.set_title(f"ε = {epsilon:g}", fontsize=9)
            if column == 0:
                ax.set_ylabel(title, fontsize=8)
    figure.suptitle(f"Figure 4: distribution of the regression error over simulations ({results.units:,} per box; "
                    "log scale, zeros omitted)", fontsize=10)
    return figure_png(figure)
