"""Synthesis from the Bayesian posterior predictive of the sequential normal linear model.

:class:`BPPDSynthesizer` is the non-DP baseline of Snoke & Slavković (Section 6: "non-DP
synthetic data, sampled from the unperturbed BPPD"); :class:`NoisyBPPDSynthesizer` is the
noisy BPPD of Bowen & Liu (2016) as described there in Section 2.1: the Bayesian sufficient
statistics are perturbed with the Laplace mechanism, parameters are drawn from the posterior
given the noisy statistics, and synthetic data are drawn from those parameters.

The model (columns in data order, ``q`` of them)::

    X₁ ~ N(β₁₀, σ₁²),   X_j | X₁ … X_{j−1} ~ N(β_j0 + Σ_{k<j} β_jk X_k, σ_j²),

each column a normal linear regression on an intercept and all earlier columns, with
independent standard noninformative priors ``p(β_j, σ_j²) ∝ σ_j⁻²``. With design ``Z``
(``n × d``, ``d = j`` columns counting the intercept) and response ``y`` the posterior is
(Gelman et al., *Bayesian Data Analysis*, 3rd ed., Section 14.2)::

    σ² | y ~ Scaled-Inv-χ²(n − d, s²), i.e. σ² = S / χ²_{n−d},   S = yᵀy − yᵀZ β̂,
    β | σ², y ~ N(β̂, σ² (ZᵀZ)⁻¹),                              β̂ = (ZᵀZ)⁻¹ Zᵀy.

Everything it needs is in the augmented Gram matrix ``G = WᵀW`` of ``W = [1, X₁, …, X_q]``:
column ``j``'s ``ZᵀZ``, ``Zᵀy`` and ``yᵀy`` are ``G[:d, :d]``, ``G[:d, d]`` and ``G[d, d]``.
The prior is invariant under affine changes of units, so the posterior is computed in
standardised (BPPD) or [−1, 1]-scaled (noisy BPPD) units and mapped back exactly.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.pmse.continuous import ContinuousSynthesizer
from privlab.mechanisms.pmse.numeric_data import (
    COUNT,
    EPSILON,
    FRACTION,
    check_count,
    clip_and_scale,
    data_matrix,
    validate_bounds,
)
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian
from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import ConstrainedParams, Unconstrained
from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = [
    "BPPDParams",
    "BPPDSynthesizer",
    "NoisyBPPDParams",
    "NoisyBPPDSynthesizer",
    "floor_eigenvalues",
    "gram_sensitivity",
    "posterior_draw",
]


def posterior_draw(
    gram: np.ndarray, *, n: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[float]]:
    """One draw of ``(β_j, σ_j)`` for every column from the posterior given ``gram``.

    Args:
        gram: the ``(q+1) × (q+1)`` augmented Gram matrix of ``[1, X₁, …, X_q]``.
        n: the number of records (public); the degrees of freedom are ``n − d``.
        rng: post-processing randomness.

    Returns:
        ``(coefficients, residual_sds)`` in the units of ``gram``.

    Raises:
        SchemaError: a block ``ZᵀZ`` is singular or a residual sum of squares is not > 0
            (collinear columns or a column that is an exact function of earlier ones).
    """
    from scipy import linalg  # imported on use: loading the workload plug-ins stays light

    q = gram.shape[0] - 1
    coefficients, sds = [], []
    for j in range(q):
        d = j + 1
        try:
            factor = linalg.cho_factor(gram[:d, :d], lower=True)
        except linalg.LinAlgError:
            raise SchemaError(
                f"column {j}: the design on the earlier columns is singular (constant or "
                "collinear columns); drop the redundant column"
            ) from None
        b = gram[:d, d]
        beta_hat = linalg.cho_solve(factor, b)
        rss = float(gram[d, d] - b @ beta_hat)
        if not (math.isfinite(rss) and rss > 0.0):
            raise SchemaError(
                f"column {j} is an exact linear function of the earlier columns (residual sum "
                f"of squares {rss!r}); the posterior is improper, drop the column"
            )
        sigma2 = rss / rng.chisquare(n - d)
        z = rng.standard_normal(d)
        shift = linalg.solve_triangular(factor[0], z, lower=True, trans="T")  # L⁻ᵀz ~ N(0, (LLᵀ)⁻¹)
        coefficients.append(beta_hat + math.sqrt(sigma2) * shift)
        sds.append(math.sqrt(sigma2))
    return coefficients, sds


def gram_sensitivity(q: int) -> float:
    """L1 sensitivity ``(q + 1)² − 1`` of the released entries of ``G`` on [−1, 1]-scaled data.

    Replace-one neighbours, ``x̃ ∈ [−1, 1]^q``: each ``Σx̃_a`` moves by ≤ 2 (q entries), each
    ``Σx̃_a²`` by ≤ 1 (q entries), each ``Σx̃_a x̃_b`` (a < b) by ≤ 2 (q(q−1)/2 entries):
    ``2q + q + q(q−1) = q² + 2q``. ``G[0, 0] = n`` is public and not released.
    """
    return float((q + 1) ** 2 - 1)


def floor_eigenvalues(matrix: np.ndarray, floor: float) -> np.ndarray:
    """The symmetric ``matrix`` with its eigenvalues raised to at least ``floor`` (> 0).

    Returns ``V diag(max(w, floor)) Vᵀ`` for ``matrix = V diag(w) Vᵀ``: positive definite, and
    equal to ``matrix`` when that is already at least ``floor`` in every direction.
    """
    sym = (matrix + matrix.T) / 2.0
    w, v = np.linalg.eigh(sym)
    out = (v * np.maximum(w, floor)) @ v.T
    return (out + out.T) / 2.0


# --- non-DP BPPD ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class BPPDParams(ConstrainedParams):
    """Hyperparameters of :class:`BPPDSynthesizer`.

    Attributes:
        datasets: how many synthetic datasets (independent posterior draws) to produce, ≥ 1.
    """

    datasets: int = 1

    _parameter_constraints: ClassVar = {"datasets": [COUNT]}


class BPPDSynthesizer(ContinuousSynthesizer):
    """Non-DP synthetic data from the posterior predictive of the sequential normal model.

    ``fit`` makes ``datasets`` independent draws of all ``(β_j, σ_j²)`` from the posterior
    (module docstring); ``sample`` draws one synthetic dataset per parameter draw, column
    by column.

    Args:
        params: a :class:`BPPDParams`.

    Attributes:
        model_: the :class:`~privlab.mechanisms.pmse.synthesis.SequentialLinearGaussian` family.
        thetas_: ``datasets × dim`` array, one θ of ``model_`` per parameter draw, in data units.
        columns_: the data's column names.

    Privacy:
        None: this is the paper's non-private reference. The parameter draws depend on the
        exact data; nothing is charged to the ledger, and release mode refuses it.

    References:
        Snoke & Slavković, Sections 6–7 (the "unperturbed BPPD"); Gelman et al., *Bayesian
        Data Analysis*, 3rd ed., Section 14.2.
    """

    name = "bppd"
    Params = BPPDParams
    release_safe = False

    def _research_only_reason(self) -> str:
        return "the non-DP BPPD is a research baseline; use NoisyBPPDSynthesizer"

    def planned_events(self, records: int, columns: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """None: nothing DP happens, so nothing is charged."""
        check_count("records", records)
        check_count("columns", columns)
        return []

    def _read(self, data: object) -> tuple[np.ndarray, tuple[str, ...]]:
        matrix, columns = data_matrix(data)
        n, q = matrix.shape
        if n <= q:
            raise SchemaError(f"data has {n} rows; the BPPD needs more rows than columns ({q})")
        constant = np.flatnonzero(matrix.std(axis=0) == 0.0)
        if constant.size:
            raise SchemaError(f"column(s) {[columns[j] for j in constant]} are constant")
        return matrix, columns

    def _fit(
        self, matrix: np.ndarray, *, plan: list[PrivacyEvent], ledger: Ledger, source: RandomSource, scope: str
    ) -> None:
        """Draw ``datasets`` parameter vectors from the posterior given the exact data."""
        n, q = matrix.shape
        mean = matrix.mean(axis=0)
        sd = matrix.std(axis=0)
        w = np.column_stack([np.ones(n), (matrix - mean) / sd])
        gram = w.T @ w
        gen = source.generator(purpose="bppd.posterior")
        model = SequentialLinearGaussian(q)
        thetas = []
        for _ in range(self.params.datasets):
            coefs, sds = posterior_draw(gram, n=n, rng=gen)
            thetas.append(model.from_scaled(coefs, sds, lower=mean - sd, upper=mean + sd))
        self.model_ = model
        self.thetas_ = np.array(thetas)

    def _sample_arrays(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        return [self.model_.sample(theta, n, rng) for theta in self.thetas_]


# --- noisy BPPD (Bowen & Liu 2016) -----------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoisyBPPDParams(ConstrainedParams):
    """Hyperparameters of :class:`NoisyBPPDSynthesizer`.

    Attributes:
        epsilon: total ε, split equally over the ``datasets`` releases.
        lower, upper: public bounds, one per column (e.g. mean ± 2, 4, 5 or 10 sd in the
            paper's Section 6); data outside them is clipped.
        datasets: l, the number of noisy releases and synthetic datasets (the paper's l = 10).
        variance_floor: in (0, 1): the noisy Gram matrix of the [−1, 1]-scaled data is made
            positive definite by raising its eigenvalues to at least ``variance_floor · n``,
            so every posterior residual variance is at least about this, in scaled units.
    """

    epsilon: float
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    datasets: int = 10
    variance_floor: float = 1e-4

    _parameter_constraints: ClassVar = {"epsilon": [EPSILON], "lower": [Unconstrained()], "upper": [Unconstrained()],
                                        "datasets": [COUNT], "variance_floor": [FRACTION]}  # lower, upper: validate_bounds

    def _check_together(self) -> None:
        lower, upper = validate_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "variance_floor", float(self.variance_floor))


class NoisyBPPDSynthesizer(ContinuousSynthesizer):
    """The noisy BPPD: posterior draws from Laplace-perturbed sufficient statistics.

    For each of the ``l = datasets`` releases: clip the data to the public bounds and scale
    it to [−1, 1]; release the ``q + q(q+1)/2`` distinct entries of the augmented Gram
    matrix ``G`` (all but the public ``G[0, 0] = n``) with Laplace noise of scale ``Δ/(ε/l)``;
    make the noisy ``G̃`` positive definite by raising its eigenvalues to at least
    ``variance_floor · n`` (every ``ZᵀZ`` block is then positive definite and every residual
    sum of squares, a Schur complement, is ≥ that floor); draw all ``(β_j, σ_j²)`` from the
    posterior given ``G̃`` as if it were exact (module docstring); map the draw back to data
    units. ``sample`` draws one synthetic dataset per release.

    Args:
        params: a :class:`NoisyBPPDParams`.

    Attributes:
        model_: the :class:`~privlab.mechanisms.pmse.synthesis.SequentialLinearGaussian` family.
        thetas_: ``datasets × dim`` array, one θ of ``model_`` per release, in data units.
        columns_: the data's column names.
        sensitivity_: Δ = (q + 1)² − 1.

    Privacy:
        ε-DP under replace-one neighbours (n public). Sensitivity (see
        :func:`gram_sensitivity`): on ``x̃ ∈ [−1, 1]^q`` the released vector moves by at most
        ``Δ = 2q + q + q(q−1) = (q+1)² − 1`` in L1 (8 for the paper's q = 2); the scaling is a
        public bijection of the raw statistics ``Σx_a, Σx_a x_b``. Budget split: ε/l for each
        of the l releases (sequential composition, one ledger step per release, the last share
        absorbing float rounding so the total is exactly ε). Within a release the whole vector
        gets one Laplace draw per entry at scale ``Δ·l/ε``; that is the split
        ``ε_s = (ε/l)·Δ_s/Δ`` over the statistics ``s`` in proportion to their sensitivities
        ``Δ_s`` (2 for a sum or cross-product, 1 for a square), which gives every statistic the
        same noise scale. The eigenvalue floor, the posterior draws and the synthesis are
        post-processing.

    References:
        Bowen & Liu (2016), "Comparative study of differentially private data synthesis
        methods", noisy BPPD; Snoke & Slavković, Sections 2.1 and 6 (l = 10, ε/l each);
        Gelman et al., *Bayesian Data Analysis*, 3rd ed., Section 14.2.
    """

    name = "noisy_bppd"
    Params = NoisyBPPDParams

    def _read(self, data: object) -> tuple[np.ndarray, tuple[str, ...]]:
        q = len(self.params.lower)
        return data_matrix(data, columns=q, min_rows=q + 1)

    def planned_events(self, records: int, columns: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """The ledger steps :meth:`fit` charges for data with ``columns`` columns, in order.

        One Laplace step per release k: share ε/l of ε (the shares' ``math.fsum`` is exactly
        ε), sensitivity ``(q + 1)² − 1`` and noise scale sensitivity/share (research mode; in
        release mode :func:`~privlab.mechanisms.basic.laplace.laplace_mechanism` records its
        lattice scale instead). ``records`` does not enter (n is public and not released).
        """
        check_count("records", records)
        q = check_count("columns", columns)
        sensitivity = gram_sensitivity(q)
        shares = split_epsilon(self.params.epsilon, [1.0] * self.params.datasets)
        return [
            PrivacyEvent(name="noisy_bppd.sufficient_statistics", mechanism="laplace", epsilon=share,
                         sensitivity=sensitivity, noise_scale=sensitivity / share, scope=scope,
                         step=f"noisy_bppd.dataset[{k}]")
            for k, share in enumerate(shares)
        ]

    def _fit(
        self, matrix: np.ndarray, *, plan: list[PrivacyEvent], ledger: Ledger, source: RandomSource, scope: str
    ) -> None:
        """Release the noisy statistics ``datasets`` times and draw parameters from each."""
        p = self.params
        n, q = matrix.shape
        w = np.column_stack([np.ones(n), clip_and_scale(matrix, p.lower, p.upper)])
        gram = w.T @ w
        rows, cols = np.triu_indices(q + 1)
        keep = ~((rows == 0) & (cols == 0))
        rows, cols = rows[keep], cols[keep]
        statistics = gram[rows, cols]
        gen = source.generator(purpose="noisy_bppd.posterior")
        model = SequentialLinearGaussian(q)
        thetas = []
        sensitivity = gram_sensitivity(q)
        for event in plan:
            noisy = laplace_mechanism(statistics, sensitivity=sensitivity, epsilon=event.epsilon, source=source,
                                      ledger=ledger, name=event.name, scope=scope, step=event.step)
            g = np.empty((q + 1, q + 1))
            g[rows, cols] = noisy
            g[cols, rows] = noisy
            g[0, 0] = n
            g = floor_eigenvalues(g, p.variance_floor * n)
            coefs, sds = posterior_draw(g, n=n, rng=gen)
            thetas.append(model.from_scaled(coefs, sds, lower=p.lower, upper=p.upper))
        self.model_ = model
        self.thetas_ = np.array(thetas)
        self.sensitivity_ = sensitivity

    def _sample_arrays(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """One dataset per release; values are not clipped to the bounds (the model is normal)."""
        return [self.model_.sample(theta, n, rng) for theta in self.thetas_]
