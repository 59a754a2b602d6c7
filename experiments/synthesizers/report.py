"""The comparison study's page: tables and plots from ``results/*.csv`` (study.py's rows).

For each data set and synthesizer, by ε: the mean all-3-way workload error and pMSE with a 95%
t-interval over the repetitions, the acceptance pass rate with its Wilson interval, and the
mean fit + sample seconds. Writes ``figures/<data>.png`` (three panels over ε) and prints the
tables as Markdown (pasted into RESULTS.md).

    python experiments/synthesizers/report.py                 # every results/*.csv
    python experiments/synthesizers/report.py results/RUN.csv
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDER = ["privbayes", "mst", "aim"]


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_ci(values: pd.Series) -> tuple[float, float]:
    values = values.dropna()
    if len(values) < 2:
        return float(values.mean()), math.nan
    return float(values.mean()), float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (data, synthesizer, epsilon), group in frame.groupby(["data", "synthesizer", "epsilon"]):
        error, error_ci = mean_ci(group["workload_error"])
        score, score_ci = mean_ci(group["pmse"])
        passed = int(group["accepted"].astype(str).str.lower().eq("true").sum())
        low, high = wilson(passed, len(group))
        rows.append({"data": data, "synthesizer": synthesizer, "epsilon": epsilon, "n": len(group),
                     "workload_error": error, "workload_error_ci": error_ci, "pmse": score, "pmse_ci": score_ci,
                     "accepted": passed / len(group), "accepted_low": low, "accepted_high": high,
                     "criteria_passed": group["criteria_passed"].mean(), "seconds": group["seconds"].mean()})
    out = pd.DataFrame(rows)
    out["order"] = out["synthesizer"].map({s: i for i, s in enumerate(ORDER)})
    return out.sort_values(["data", "order", "epsilon"]).drop(columns="order")


def markdown(table: pd.DataFrame) -> str:
    lines = ["| data | synthesizer | ε | n | all-3-way error | pMSE | accepted [95% CI] | criteria passed (of 7/8) | s per fit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in table.itertuples():
        ci = "" if math.isnan(row.workload_error_ci) else f" ± {row.workload_error_ci:.4f}"
        pci = "" if math.isnan(row.pmse_ci) else f" ± {row.pmse_ci:.5f}"
        lines.append(f"| {row.data} | {row.synthesizer} | {row.epsilon:g} | {row.n} | {row.workload_error:.4f}{ci} | "
                     f"{row.pmse:.5f}{pci} | {row.accepted:.2f} [{row.accepted_low:.2f}, {row.accepted_high:.2f}] | "
                     f"{row.criteria_passed:.1f} | {row.seconds:.1f} |")
    return "\n".join(lines)


def plot(table: pd.DataFrame, data: str, path: Path) -> None:
    part = table[table["data"] == data]
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for synthesizer in ORDER:
        rows = part[part["synthesizer"] == synthesizer]
        if rows.empty:
            continue
        axes[0].errorbar(rows["epsilon"], rows["workload_error"], yerr=rows["workload_error_ci"].fillna(0),
                         marker="o", capsize=3, label=synthesizer)
        axes[1].errorbar(rows["epsilon"], rows["pmse"], yerr=rows["pmse_ci"].fillna(0), marker="o", capsize=3,
                         label=synthesizer)
        axes[2].errorbar(rows["epsilon"], rows["accepted"],
                         yerr=[rows["accepted"] - rows["accepted_low"], rows["accepted_high"] - rows["accepted"]],
                         marker="o", capsize=3, label=synthesizer)
    titles = ["all-3-way marginal error (mean ℓ1, normalised)", "pMSE (rpart CART, cp = 0.01)", "acceptance pass rate"]
    for axis, title in zip(axes, titles, strict=True):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("ε")
        axis.set_title(title, fontsize=10)
        axis.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].set_ylim(bottom=0)  # linear: a CART that does not split gives pMSE exactly 0
    axes[2].set_ylim(-0.05, 1.05)
    axes[0].legend()
    figure.suptitle(f"{data}: PrivBayes vs MST vs AIM (mean, 95% CI over repetitions)")
    figure.tight_layout()
    path.parent.mkdir(exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted((HERE / "results").glob("*.csv"))
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    table = summary(frame)
    for data in table["data"].unique():
        plot(table, data, HERE / "figures" / f"{data}.png")
    print(f"runs: {', '.join(sorted(frame['run_id'].unique()))}; {len(frame)} fits")
    print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
