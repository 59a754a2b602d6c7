"""The results page of a ``pd_evaluation`` study: the paper's Tables 3–5 and Figures 1–4 beside ours.

One column per configuration (its ω, and its model ε when that varies); each cell is the mean
over the repetitions with its 95% confidence interval, and the paper's value (ACS13, 1.5 M
records) beside it where the paper reports one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from privlab.platform.results.reports import StudyResults, figure_png  # noqa: E402

__all__ = ["PAPER", "evaluation_report"]

#: The paper's Tables 3–5 (percent), by row then configuration (ω or a baseline).
PAPER: dict[str, dict[str, float]] = {
    "accuracy_tree": {"reals": 77.8, "marginals": 57.9, "11": 72.4, "10": 72.3, "9": 72.4, "9-11": 72.3, "5-11": 72.1},
    "accuracy_rf": {"reals": 80.4, "marginals": 63.8, "11": 75.3, "10": 75.2, "9": 75.2, "9-11": 75.2, "5-11": 75.2},
    "accuracy_ada": {"reals": 79.3, "marginals": 69.2, "11": 78.0, "10": 78.1, "9": 77.5, "9-11": 78.1, "5-11": 78.1},
    "agreement_tree": {"marginals": 58.5, "11": 73.9, "10": 73.8, "9": 73.9, "9-11": 73.7, "5-11": 73.6},
    "agreement_rf": {"marginals": 65.4, "11": 79.0, "10": 78.9, "9": 79.2, "9-11": 79.0, "5-11": 79.2},
    "agreement_ada": {"marginals": 75.6, "11": 83.0, "10": 83.6, "9": 82.4, "9-11": 83.9, "5-11": 83.3},
    "accuracy_lr": {"nonprivate": 79.9, "output": 69.7, "objective": 76.3, "marginals": 68.9, "11": 77.6, "10": 77.7,
                    "9": 77.5, "9-11": 77.5, "5-11": 77.7},
    "accuracy_svm": {"nonprivate": 78.5, "output": 76.2, "objective": 78.2, "marginals": 68.9, "11": 77.2, "10": 77.1,
                     "9": 77.1, "9-11": 76.9, "5-11": 77.3},
    "distinguish_rf": {"reals": 50.0, "marginals": 79.8, "11": 62.3, "10": 61.8, "9": 63.0, "9-11": 60.1, "5-11": 61.4},
    "distinguish_tree": {"reals": 50.0, "marginals": 73.2, "11": 58.9, "10": 58.6, "9": 59.8, "9-11": 57.9,
                         "5-11": 58.4},
}


def _param(entry: Mapping[str, Any], name: str) -> Any:
    params = entry["params"]
    return params.get(f"params.{name}", params.get(name))


def _label(entry: Mapping[str, Any], vary_epsilon: bool) -> str:
    omega = _param(entry, "omega")
    text = f"ω ∈R [{omega}]" if isinstance(omega, str) else f"ω = {omega}"
    if isinstance(omega, str) and _param(entry, "omega_rule") == "mixture":
        text += " (mixture)"
    return f"{text}, ε = {_param(entry, 'model_epsilon'):g}" if vary_epsilon else text


def _cell(metrics: Mapping[str, float], name: str, *, percent: bool = True, digits: int = 4) -> str:
    if f"{name}_mean" not in metrics:
        return "—"
    scale, digits = (100.0, 1) if percent else (1.0, digits)
    mean, low, high = (scale * metrics[f"{name}_{k}"] for k in ("mean", "ci_low", "ci_high"))
    if low == high:
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f} [{low:,.{digits}f}, {high:,.{digits}f}]"


def _paper(row: str, key: str) -> str:
    value = PAPER.get(row, {}).get(key)
    return "—" if value is None else f"{value:.1f}"


def _table(title: str, rows: Sequence[tuple[str, str, str, str]], entries: Sequence[Mapping[str, Any]],
           labels: Sequence[str], *, percent: bool = True, digits: int = 4) -> list[str]:
    """``rows``: (row label, metric name, paper row, paper key or "" for the configuration's ω)."""
    lines = [f"### {title}", "", "| | " + " | ".join(f"{label} | paper" for label in labels) + " |",
             "| --- |" + " --- | --- |" * len(labels)]
    for row_label, metric, paper_row, paper_key in rows:
        cells = []
        for entry in entries:
            key = paper_key or str(_param(entry, "omega"))
            cells += [_cell(entry["metrics"], metric, percent=percent, digits=digits), _paper(paper_row, key)]
        lines.append(f"| {row_label} | " + " | ".join(cells) + " |")
    return lines + [""]


def _figure(entries: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> bytes:
    """Figures 3–4 (mean TVD to the test set) and Figure 1's accuracies, one bar group per table."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=110)
    for ax, kind in zip(axes, ("single", "pairs"), strict=True):
        tables = ("reals", "marginals", "synthetics")
        width = 0.8 / max(len(entries), 1)
        for i, (entry, label) in enumerate(zip(entries, labels, strict=True)):
            m = entry["metrics"]
            means = [m.get(f"tvd_{kind}_{t}_mean", float("nan")) for t in tables]
            errors = [[mean - m.get(f"tvd_{kind}_{t}_ci_low", mean) for mean, t in zip(means, tables)],
                      [m.get(f"tvd_{kind}_{t}_ci_high", mean) - mean for mean, t in zip(means, tables)]]
            ax.bar([j + i * width for j in range(3)], means, width, yerr=errors, label=label, capsize=2)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(3)], list(tables))
        ax.set_ylabel("mean total variation distance to the test set")
        ax.set_title("single attributes (Figure 3)" if kind == "single" else "pairs of attributes (Figure 4)")
    axes[0].legend(fontsize=7)
    return figure_png(figure)


def evaluation_report(results: StudyResults) -> dict[str, str | bytes]:
    """``README.md`` with Tables 3–5, Figures 1–4's numbers and timings; ``tvd.png``."""
    entries = list(results.entries)
    vary_epsilon = len({_param(e, "model_epsilon") for e in entries}) > 1
    labels = [_label(e, vary_epsilon) for e in entries]
    lines = [f"## {results.study}: the paper's Section 6 evaluation", "",
             f"Run `{results.run_id}` (experiment `{results.experiment}`), root seed {results.root_seed}; "
             f"{results.units} repetition(s) per configuration, mean [95% CI]. Paper: ACS13, 1.5 M records "
             "(D_T, D_P ≈ 280,000 each)."]
    if results.command:
        lines += ["", f"Command: `{results.command}`"]
    lines += [""]
    first = entries[0]["metrics"] if entries else {}
    lines += _table("Generation: candidates passing the test (%)", [("pass rate", "pass_rate", "", "-")],
                    entries, labels)
    lines += _table("Generation: synthetics released, and the split", [
        ("released", "released", "", "-"), *((f"records in {part}", f"records_{part}", "", "-")
                                             for part in ("structure", "parameters", "seeds", "test"))],
        entries, labels, percent=False, digits=0)
    if "tvd_single_reals_mean" in first:
        lines += _table("Figures 3–4: mean total variation distance to the test set",
                        [(f"{kind}: {t}", f"tvd_{kind}_{t}", "", "-") for kind in ("single", "pairs")
                         for t in ("reals", "marginals", "synthetics")], entries, labels, percent=False)
        lines += ["![Figures 3-4](tvd.png)", ""]
    if "accuracy_tree_reals_mean" in first:
        rows = [(f"accuracy {k}: {t}", f"accuracy_{k}_{t}", f"accuracy_{k}", "reals" if t == "reals" else
                 ("marginals" if t == "marginals" else "")) for k in ("tree", "rf", "ada", "lr", "svm")
                for t in ("reals", "marginals", "synthetics")]
        rows += [(f"agreement {k}: {t}", f"agreement_{k}_{t}", f"agreement_{k}", "marginals" if t == "marginals"
                  else "") for k in ("tree", "rf", "ada", "lr", "svm") for t in ("marginals", "synthetics")]
        lines += _table("Table 3 (and Table 4's synthetic rows): classifiers trained on reals, marginals, synthetics "
                        "(%)", rows, entries, labels)
    if "accuracy_lr_output_mean" in first:
        rows = [(f"{loss.upper()} {how}", f"accuracy_{loss}_{how}", f"accuracy_{loss}", how)
                for loss in ("lr", "svm") for how in ("nonprivate", "output", "objective")]
        lines += _table("Table 4: DP classifiers trained on reals at ε = 1 (%)", rows, entries, labels)
    if "distinguish_rf_synthetics_mean" in first:
        rows = [(f"{k.upper() if k == 'rf' else 'Tree'}: {t}", f"distinguish_{k}_{t}", f"distinguish_{k}",
                 "marginals" if t == "marginals" else "") for k in ("rf", "tree") for t in ("marginals", "synthetics")]
        lines += _table("Table 5: the distinguishing game, accuracy (%)", rows, entries, labels)
    if "model_accuracy_model_mean_mean" in first:
        attributes = sorted({k.removeprefix("model_accuracy_model_").removesuffix("_mean")
                             for k in first if k.startswith("model_accuracy_model_") and k.endswith("_mean")}
                            - {"mean"})
        sources = ("model", "marginals", "random", "forest")
        lines += ["### Figures 1–2: accuracy of predicting each attribute from the others (%)", "",
                  "Each cell: the model's most likely value given the other attributes / the DP marginals' mode / "
                  "random guessing / a random forest trained on D_T (— when not run); the mean over repetitions.",
                  "", "| attribute | " + " | ".join(labels) + " |", "| --- |" + " --- |" * len(labels)]
        for attribute in attributes:
            cells = [" / ".join(_cell(e["metrics"], f"model_accuracy_{s}_{attribute}").split(" [")[0] for s in sources)
                     for e in entries]
            lines.append(f"| {attribute} | " + " | ".join(cells) + " |")
        lines.append("")
    timing = results.timing.get("configurations", {})
    timed = [{"metrics": timing.get(e["id"], {}), "params": e["params"]} for e in entries]
    lines += _table("Timing (Figure 5: the paper generated 10,000 synthetics in under 10 minutes on one core)",
                    [("model fit (s)", "model_fit_seconds", "", "-"),
                     ("synthesis and test, per 1,000 candidates (s)", "synthesis_seconds_per_1000", "", "-")],
                    timed, labels, percent=False)
    files: dict[str, str | bytes] = {"README.md": "\n".join(lines)}
    if "tvd_single_reals_mean" in first:
        files["tvd.png"] = _figure(entries, labels)
    return files
