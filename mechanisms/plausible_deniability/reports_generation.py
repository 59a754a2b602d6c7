"""The results page of a ``pd_generation`` study: pass rates by k and ω (the paper's Figure 6).

A table of every configuration (k, γ, ε₀, ω, pass rate [95% Wilson], mean plausible seeds
found, the ledger's ε) and, when the study varies k, a plot of the pass rate against k with one
line per ω and its confidence band — Figure 6's axes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from privlab.platform.results.reports import StudyResults, figure_png  # noqa: E402

__all__ = ["generation_report"]


def _param(entry: Mapping[str, Any], name: str) -> Any:
    params = entry["params"]
    return params.get(f"params.{name}", params.get(name))


def _omega_key(entry: Mapping[str, Any]) -> tuple[Any, str | None]:
    """ω and, for a range, how the test scored its candidates (``omega_rule``; None in runs
    made before the rule was a parameter, which scored by the mixture)."""
    omega = _param(entry, "omega")
    return omega, _param(entry, "omega_rule") if isinstance(omega, str) and "-" in omega else None


def _omega_label(key: tuple[Any, str | None]) -> str:
    value, rule = key
    if not (isinstance(value, str) and "-" in value):
        return f"ω = {value}"
    return f"ω ∈R [{value}]" + (f" ({rule.replace('_', '-')})" if rule else "")


def _omega_order(key: tuple[Any, str | None]) -> tuple[int, str, str]:
    value, rule = key
    return (1, str(value), str(rule)) if isinstance(value, str) else (0, f"{int(value):04d}", "")


def table_markdown(results: StudyResults) -> str:
    lines = [f"## {results.study}: Mechanism 1's pass rate", "",
             f"Run `{results.run_id}` (experiment `{results.experiment}`), root seed {results.root_seed}; "
             f"{results.units:,} batch(es) per configuration."]
    if results.command:
        lines += ["", f"Command: `{results.command}`"]
    lines += ["", "| config | k | γ | ε₀ | ω | candidates | pass rate [95% Wilson] | mean k′ (capped) | ledger ε |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for entry in results.entries:
        m = entry["metrics"]
        epsilon0 = _param(entry, "epsilon0")
        lines.append(
            f"| {entry['id']} | {_param(entry, 'k')} | {_param(entry, 'gamma')} | "
            f"{'— (Test 1)' if epsilon0 is None else epsilon0} | {_omega_label(_omega_key(entry))} | "
            f"{_param(entry, 'candidates'):,} | {m['passed_rate']:.4f} [{m['passed_ci_low']:.4f}, "
            f"{m['passed_ci_high']:.4f}] | {m['plausible_seeds_mean']:.1f} | {m['eps_total']:.6g} |")
    return "\n".join(lines) + "\n"


def figure6_png(results: StudyResults) -> bytes | None:
    """Pass rate against k, one line per ω and rule (None when the study has a single k)."""
    by_omega: dict[tuple[Any, str | None], list[tuple[int, Mapping[str, float]]]] = {}
    for entry in results.entries:
        by_omega.setdefault(_omega_key(entry), []).append((int(_param(entry, "k")), entry["metrics"]))
    if len({k for points in by_omega.values() for k, _ in points}) < 2:
        return None
    figure, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for omega in sorted(by_omega, key=_omega_order):
        points = sorted(by_omega[omega], key=lambda p: p[0])
        ks = [k for k, _ in points]
        rates = [100 * m["passed_rate"] for _, m in points]
        ax.plot(ks, rates, marker="o", label=_omega_label(omega))
        ax.fill_between(ks, [100 * m["passed_ci_low"] for _, m in points],
                        [100 * m["passed_ci_high"] for _, m in points], alpha=0.15)
    gamma = {_param(e, "gamma") for e in results.entries}
    ax.set_xlabel("k")
    ax.set_ylabel("candidates passing the test (%)")
    ax.set_ylim(0, 102)
    ax.set_title(f"Pass rate of the privacy test (γ = {', '.join(map(str, sorted(gamma)))}); 95% Wilson bands",
                 fontsize=10)
    ax.legend(fontsize=8)
    return figure_png(figure)


def generation_report(results: StudyResults) -> dict[str, str | bytes]:
    """``README.md`` (the table, and the figure when k varies) and ``figure6.png``."""
    text = table_markdown(results)
    files: dict[str, str | bytes] = {}
    png = figure6_png(results)
    if png is not None:
        files["figure6.png"] = png
        text += "\n![Figure 6: pass rate against k](figure6.png)\n"
    files["README.md"] = text
    return files
