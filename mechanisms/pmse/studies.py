"""Workloads for the pMSE paper's studies (registered by name for specs).

``pmse_sensitivity`` — Table 1 / Figure 1 (Section 5): how often the CART (``tree``: rpart's,
the default and the paper's, or the greedy rule; :mod:`.cart`) breaks the
sensitivity bound Δu ≤ 1/n of Theorem 2. One trial draws

    X:  X₁ ~ N(2, 10),  X₂ ~ N(−2.5 + 0.5·x₁, 3)            (second argument = variance)
    X′: X with N(0, 25) noise added to both variables of one uniformly chosen row
    Xˢ: X₁ˢ ~ N(θ₁, |θ₂|), X₂ˢ ~ N(θ₃ + θ₄x₁ˢ, |θ₅|),  θᵢ ~ N(0, 10)

and computes pMSE(X, Xˢ) and pMSE(X′, Xˢ) for all eight configurations depth ∈ {1, 2, 5,
unlimited} × cp ∈ {0.01, 0.001} from one pair of fits (one grown tree serves every
configuration exactly, :func:`~privlab.mechanisms.pmse.propensity.pmse_configurations`), so the eight configurations share common random
numbers — the same X, X′, Xˢ — and their rates are paired, not independent. The paper does not
say how a negative variance draw θ₂ or θ₅ is handled; we use its absolute value.

Each configuration ``d{depth}_cp{cp}`` (e.g. ``dinf_cp001``) is a facet with metrics
``violation`` (rate of |Δu| > 1/n, Wilson interval), ``abs_diff`` (|pMSE(X) − pMSE(X′)|, whose
reservoir feeds the Figure-1 plot) and ``max_abs_diff`` (the empirical sensitivity).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.platform.core.validation import ConstrainedParams, Interval, Options
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload, register_workload
from privlab.platform.results.reports import StudyResults

TABLE1_CONFIGS: tuple[tuple[int | None, float], ...] = tuple(
    (depth, cp) for cp in (0.01, 0.001) for depth in (1, 2, 5, None)
)


def config_label(depth: int | None, cp: float) -> str:
    return f"d{'inf' if depth is None else depth}_cp{str(cp).replace('0.', '')}"


_VARIANCE = Interval(numbers.Real, 0, None, closed="neither")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SensitivityParams(ConstrainedParams):
    n: int = 5000
    neighbour_variance: float = 25.0
    theta_variance: float = 10.0
    tree: str = "rpart"  # the CART: "rpart" (R's rpart, the paper's tool) or "greedy"

    _parameter_constraints: ClassVar = {
        "n": [Interval(numbers.Integral, 10, None, closed="left")],
        "neighbour_variance": [_VARIANCE], "theta_variance": [_VARIANCE],
        "tree": [Options(str, ("rpart", "greedy"))]}


def table1_trial(params: SensitivityParams, rng: np.random.Generator) -> np.ndarray:
    """One Table-1 trial: |pMSE(X, Xˢ) − pMSE(X′, Xˢ)| for each of ``TABLE1_CONFIGS``."""
    n = params.n
    x1 = rng.normal(2.0, np.sqrt(10.0), n)
    x = np.column_stack([x1, rng.normal(-2.5 + 0.5 * x1, np.sqrt(3.0))])
    x_prime = x.copy()
    x_prime[rng.integers(n)] += rng.normal(0.0, np.sqrt(params.neighbour_variance), 2)
    theta = rng.normal(0.0, np.sqrt(params.theta_variance), 5)
    s1 = rng.normal(theta[0], np.sqrt(abs(theta[1])), n)
    synthetic = np.column_stack([s1, rng.normal(theta[2] + theta[3] * s1, np.sqrt(abs(theta[4])))])
    from privlab.mechanisms.pmse.propensity import pmse_neighbour_pair  # numba: only where trees are fitted

    pair = pmse_neighbour_pair(x, x_prime, synthetic, TABLE1_CONFIGS, tree=params.tree)  # type: ignore[arg-type]
    return np.abs(pair[:, 0] - pair[:, 1])


@register_workload
class PMSESensitivity(Workload):
    """Table 1: rate at which the CART (``tree``) violates the pMSE sensitivity bound 1/n.

    Each Table-1 configuration is a facet (see :meth:`Workload.facets`): all eight are read off
    the same fits in every trial, and the summary lists one entry per configuration with
    ``violation_rate`` (95% Wilson interval ``violation_ci_low``/``violation_ci_high``),
    ``abs_diff_*`` statistics of |Δu| and ``max_abs_diff``, the empirical sensitivity.
    """

    name = "pmse_sensitivity"
    pattern = Pattern.TRIALS
    Params = SensitivityParams
    metrics = {
        **{f"{config_label(d, c)}/violation": MetricKind.RATE for d, c in TABLE1_CONFIGS},
        **{f"{config_label(d, c)}/abs_diff": MetricKind.VALUE for d, c in TABLE1_CONFIGS},
    }
    derived_metrics = ("bound", *(f"{config_label(d, c)}/max_abs_diff" for d, c in TABLE1_CONFIGS))

    def warm_up(self, params: SensitivityParams) -> None:
        from privlab.mechanisms.pmse.propensity import warm_up  # numba: compiles (or loads) the trees once

        warm_up(params.tree)  # type: ignore[arg-type]

    def facets(self, params: SensitivityParams) -> dict[str, dict[str, object]]:
        return {config_label(d, c): {"depth": "unlimited" if d is None else d, "cp": c} for d, c in TABLE1_CONFIGS}

    def run_trial(self, params: SensitivityParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        differences = table1_trial(params, source.rng)
        bound = 1.0 / params.n
        result: dict[str, float] = {}
        for (depth, cp), difference in zip(TABLE1_CONFIGS, differences, strict=True):
            label = config_label(depth, cp)
            result[f"{label}/abs_diff"] = float(difference)
            result[f"{label}/violation"] = float(difference > bound)
        return result

    def derive(self, params: SensitivityParams, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        derived = {"bound": 1.0 / params.n}
        for depth, cp in TABLE1_CONFIGS:
            label = config_label(depth, cp)
            if summary.get(f"{label}/abs_diff", {}).get("count"):
                derived[f"{label}/max_abs_diff"] = summary[f"{label}/abs_diff"]["max"]
        return derived

    reads_reservoirs = True  # Figure 1's histograms

    def report(self, results: StudyResults) -> dict[str, str | bytes]:
        from privlab.mechanisms.pmse.reports_sensitivity import figure1_png, table1_markdown

        return {"table1.md": table1_markdown(results), "figure1.png": figure1_png(results)}
