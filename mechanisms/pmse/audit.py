"""Sensitivity audit of the pMSE under a top-down CART (``privlab audit pmse``; ``tree`` = rpart or greedy).

The auditable ``pmse`` is the Table-1 study of Snoke & Slavković (Section 5) for one tree
configuration: each trial draws the paper's neighbouring pair and synthetic data,

    X:  X₁ ~ N(2, 10),  X₂ ~ N(−2.5 + 0.5·x₁, 3)            (second argument = variance)
    X′: X with N(0, neighbour_variance) noise added to both variables of one uniform row
    Xˢ: X₁ˢ ~ N(θ₁, |θ₂|), X₂ˢ ~ N(θ₃ + θ₄x₁ˢ, |θ₅|),  θᵢ ~ N(0, theta_variance)

and compares ``|pMSE(X, Xˢ) − pMSE(X′, Xˢ)|`` with Theorem 2's claimed Δu = 1/n. The draws are
made in the same order as :func:`privlab.mechanisms.pmse.studies.table1_trial`, so for one
seed the difference is bit-identical to that function's column for the same ``(depth, cp)`` and tree
(tests/test_audit.py checks it); the Table-1 workload evaluates all eight configurations on
common random numbers, this auditable one configuration per audit.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, ClassVar

import numpy as np

from privlab.mechanisms.pmse.studies import SensitivityParams
from privlab.platform.audit.registration import SensitivityAuditable, register_auditable
from privlab.platform.core.validation import ConstrainedParams, Interval, Options

UNLIMITED = "unlimited"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PMSEAuditParams(ConstrainedParams):
    """One CART configuration and the Section-5 data sizes and variances.

    ``depth`` is a positive integer or None (unlimited; write ``"unlimited"`` in a spec or
    ``--set depth=unlimited``, since TOML has no null).
    """

    depth: int | None = None
    cp: float = 0.001
    tree: str = "rpart"  # "rpart" (R's rpart, the paper's tool) or "greedy"
    n: int = 5000
    neighbour_variance: float = 25.0
    theta_variance: float = 10.0

    _parameter_constraints: ClassVar = {
        "depth": [None, Options(str, (UNLIMITED,)), Interval(numbers.Integral, 1, None, closed="left")],
        "cp": [Interval(numbers.Real, 0, None, closed="left")], **SensitivityParams._parameter_constraints}

    def _check_together(self) -> None:
        if self.depth == UNLIMITED:
            object.__setattr__(self, "depth", None)


def section5_pair(params: PMSEAuditParams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Section 5's ``(X, X′)``: ``n`` rows of the bivariate normal and a replace-one neighbour."""
    n = params.n
    x1 = rng.normal(2.0, np.sqrt(10.0), n)
    x = np.column_stack([x1, rng.normal(-2.5 + 0.5 * x1, np.sqrt(3.0))])
    x_prime = x.copy()
    x_prime[rng.integers(n)] += rng.normal(0.0, np.sqrt(params.neighbour_variance), 2)
    return x, x_prime


def section5_synthetic(params: PMSEAuditParams, rng: np.random.Generator) -> np.ndarray:
    """Section 5's ``Xˢ`` from θᵢ ~ N(0, theta_variance), taking |θ₂|, |θ₅| as variances."""
    n = params.n
    theta = rng.normal(0.0, np.sqrt(params.theta_variance), 5)
    s1 = rng.normal(theta[0], np.sqrt(abs(theta[1])), n)
    return np.column_stack([s1, rng.normal(theta[2] + theta[3] * s1, np.sqrt(abs(theta[4])))])


@register_auditable
class PMSEAudit(SensitivityAuditable):
    """Sensitivity audit of pMSE(X, Xˢ) with a CART (``tree``, default rpart's) against Δu = 1/n.

    Privacy:
        Theorem 2 bounds the pMSE's replace-one sensitivity by 1/n for globally optimal
        trees; the pMSE mechanism calibrates its exponential mechanism with it. Greedy trees
        can exceed it (Table 1), which this audit measures; a violation means the mechanism's
        ε is not what it claims for that configuration. Nothing is released.

    References:
        Snoke & Slavković (2018), Theorem 2, Section 5, Table 1.
    """

    name = "pmse"
    Params = PMSEAuditParams
    description = "pMSE of CART (tree = rpart | greedy; Section 5 data), Theorem 2's bound"
    neighbouring = "replace-one"
    claim = "Δu = 1/n (Theorem 2; proven for globally optimal trees only)"
    default_trials = 2_000
    statistic = "pMSE(X, Xˢ)"

    def claimed_sensitivity(self, params: PMSEAuditParams) -> float:
        return 1.0 / params.n

    def warm_up(self, params: PMSEAuditParams) -> None:
        from privlab.mechanisms.pmse.propensity import warm_up  # numba: compiles (or loads) the trees once

        warm_up(params.tree)  # type: ignore[arg-type]

    def neighbours(self, params: PMSEAuditParams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return section5_pair(params, rng)

    def evaluate(self, params: PMSEAuditParams, d: Any, d_prime: Any, rng: np.random.Generator) -> tuple[float, float]:
        synthetic = section5_synthetic(params, rng)
        from privlab.mechanisms.pmse.propensity import pmse_neighbour_pair  # numba: only where trees are fitted

        pair = pmse_neighbour_pair(d, d_prime, synthetic, [(params.depth, float(params.cp))],
                                   tree=params.tree)  # type: ignore[arg-type]
        return float(pair[0, 0]), float(pair[0, 1])
