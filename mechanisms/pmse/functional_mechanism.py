"""The functional mechanism for linear regression (Zhang et al. 2012), and a synthesizer on it.

:func:`functional_mechanism_regression` is the paper's DP regression baseline: on data
scaled to [−1, 1] it perturbs the coefficients of the squared-error objective written as a
polynomial in the regression coefficients ω, then minimises the noisy polynomial. The
coefficients are perturbed either with Laplace noise calibrated to their L1 sensitivity (the
ℓ1 mechanism of Zhang et al.) or with the ℓ∞ K-norm mechanism of Awan & Slavković (2018),
the two variants the pMSE paper compares in Section 6.

:class:`FunctionalMechanismSynthesizer` turns it into a sequential normal synthesizer (the
pMSE paper uses the functional mechanism only for regression estimates; synthesis is ours):
the first column's normal marginal comes from a Laplace release of its first two moments,
every later column from a functional-mechanism regression on the columns before it, with the
residual variance read off the minimum of the noisy objective.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.pmse.continuous import ContinuousSynthesizer
from privlab.mechanisms.pmse.numeric_data import (
    EPSILON,
    FRACTION,
    NONNEGATIVE,
    check_count,
    check_fraction,
    check_nonnegative,
    clip_and_scale,
    data_matrix,
    validate_bounds,
)
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian
from privlab.platform.core.errors import ModeError, SchemaError
from privlab.platform.core.validation import ConstrainedParams, Unconstrained, check_positive_finite
from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = [
    "LINF_SENSITIVITY",
    "MARGINAL_SENSITIVITY",
    "FunctionalMechanismParams",
    "FunctionalMechanismSynthesizer",
    "functional_mechanism_event",
    "functional_mechanism_regression",
    "functional_mechanism_sensitivity",
]

NORMS = ("l1", "linf")

MARGINAL_SENSITIVITY = 3.0
"""L1 sensitivity of ``(Σx̃, Σx̃²)`` for ``x̃ ∈ [−1, 1]`` under replace-one: 2 + 1."""

LINF_SENSITIVITY = 4.0
"""ℓ∞ sensitivity of the objective's coefficient vector (any number of coefficients d ≥ 1).

One record contributes ``y²`` ∈ [0, 1], ``−2 y x_k`` ∈ [−2, 2], ``x_k²`` ∈ [0, 1] and
``2 x_k x_l`` ∈ [−2, 2] to the coefficients (every entry of ``x`` and ``y`` in [−1, 1]);
replacing it moves each coordinate by at most 4 (the linear terms, e.g. ``−2Σy`` for the
intercept, attain it)."""


def functional_mechanism_sensitivity(d: int) -> float:
    """Δ = 2(d + 1)² for ``d`` regression coefficients (the intercept counts as one).

    The objective ``Σ_i (y_i − x_iᵀω)²`` with ``x_i = (1, x̃_i1, …)`` and every entry of
    ``x_i`` and ``y_i`` in [−1, 1] is ``Σ_φ λ_φ φ(ω)`` over the monomials ``φ`` of degree ≤ 2:
    ``λ_1 = Σy²``, ``λ_{ω_k} = −2Σ y x_k``, ``λ_{ω_k²} = Σ x_k²``,
    ``λ_{ω_k ω_l} = 2Σ x_k x_l`` (k < l). One record contributes
    ``y² + 2|y|Σ_k|x_k| + Σ_k x_k² + 2Σ_{k<l}|x_k x_l| = (|y| + ‖x‖₁)² ≤ (1 + d)²`` in L1, so
    replacing it moves the coefficient vector by at most ``2(d + 1)²`` (Zhang et al., the
    linear-regression case of the functional mechanism). The intercept's constant feature is included in ``d``; its ``ω_0²``
    coefficient is ``n`` on both neighbours, so this bound is conservative by that term.
    """
    return 2.0 * (d + 1) ** 2


def functional_mechanism_event(
    d: int, *, epsilon: float, norm: str = "l1", name: str = "functional_mechanism.objective",
    scope: str = "data", step: str = "",
) -> PrivacyEvent:
    """The ledger step :func:`functional_mechanism_regression` charges (research mode).

    ``norm="l1"``: a Laplace step with sensitivity ``2(d + 1)²`` and scale Δ/ε;
    ``norm="linf"``: a ``"k_norm_linf"`` step with the ℓ∞ sensitivity 4 and Gamma scale Δ/ε.

    Raises:
        ValueError: an unknown ``norm`` or ``d < 1``.
    """
    d = check_count("d", d)
    epsilon = check_positive_finite("epsilon", epsilon)
    if norm not in NORMS:
        raise ValueError(f"norm ({norm!r}) must be one of {', '.join(NORMS)}")
    if norm == "l1":
        sensitivity = functional_mechanism_sensitivity(d)
        return PrivacyEvent(name=name, mechanism="laplace", epsilon=epsilon, sensitivity=sensitivity,
                            noise_scale=sensitivity / epsilon, scope=scope, step=step)
    return PrivacyEvent(name=name, mechanism="k_norm_linf", epsilon=epsilon, sensitivity=LINF_SENSITIVITY,
                        noise_scale=LINF_SENSITIVITY / epsilon, scope=scope, step=step)


def _linf_mechanism(value: np.ndarray, event: PrivacyEvent, *, source: RandomSource, ledger: Ledger) -> np.ndarray:
    """``value + r·V`` with ``r ~ Gamma(k + 1, Δ∞/ε)`` and ``V`` uniform on ``[−1, 1]^k``.

    That is a draw from the density ∝ ``exp(−ε‖z − value‖∞ / Δ∞)`` (the K-norm mechanism
    with K the unit ℓ∞ ball), ε-DP for statistics of ℓ∞ sensitivity Δ∞. Charged first.
    """
    if source.mode == "release":
        raise ModeError(
            "the ℓ∞ functional mechanism samples floating-point Gamma and uniform noise, which is "
            "not protected against Mironov's attack; use norm='l1' (lattice Laplace) in release mode"
        )
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{event.name}: the statistic has non-finite values; check the data and bounds")
    ledger.spend(event)
    gen = source.generator(purpose="functional_mechanism.linf")
    radius = gen.gamma(shape=value.size + 1, scale=LINF_SENSITIVITY / event.epsilon)
    return value + radius * gen.uniform(-1.0, 1.0, value.size)


def functional_mechanism_regression(
    features: np.ndarray,
    target: np.ndarray,
    *,
    epsilon: float,
    source: RandomSource,
    ledger: Ledger,
    ridge: float = 0.0,
    trim: float = 1e-4,
    norm: str = "l1",
    name: str = "functional_mechanism.objective",
    scope: str = "data",
    step: str = "",
) -> tuple[np.ndarray, float]:
    """ε-DP least-squares coefficients by the functional mechanism, and the noisy RSS.

    Args:
        features: ``n × d`` design, every entry in [−1, 1]; include a column of ones for an
            intercept (it counts in ``d``).
        target: ``n`` responses in [−1, 1].
        epsilon: the budget of this regression.
        source: the run's random source.
        ledger: charged one Laplace step before noise is drawn.
        ridge: ≥ 0; ``ridge · n · ‖ω‖²`` is added to the noisy objective before minimising.
        trim: in (0, 1); spectral trimming drops the directions in which the regularised
            noisy quadratic form ``M̃ + ridge·n·I`` has an eigenvalue ≤ ``trim · n``.
        norm: ``"l1"`` (Laplace noise, Zhang et al.) or ``"linf"`` (the ℓ∞ K-norm mechanism,
            Awan & Slavković; research mode only).
        name, scope, step: recorded in the ledger.

    Returns:
        ``(ω, rss)``: the minimiser of the (regularised, trimmed) noisy objective, and the
        value of the noisy objective ``λ̃_1 + λ̃_ωᵀω + ωᵀM̃ω`` at ω (a DP estimate of the
        residual sum of squares; it can be ≤ 0 at small ε).

    Raises:
        BudgetExceededError: ε would exceed the ledger's cap (nothing is drawn).
        ModeError: ``norm="linf"`` with a release-mode source.
        ValueError: an entry outside [−1, 1], mismatched shapes, a bad ``ridge``/``trim`` or
            an unknown ``norm``.

    Privacy:
        ε-DP under replace-one neighbours (n public). ``norm="l1"``: the vector of all
        ``k = 1 + d + d(d+1)/2`` polynomial coefficients gets ``Lap(Δ/ε)`` noise per entry
        with ``Δ = 2(d + 1)²`` (:func:`functional_mechanism_sensitivity`). ``norm="linf"``:
        the vector gets noise with density ∝ ``exp(−ε‖z‖∞/Δ∞)``, ``Δ∞ = 4``
        (:data:`LINF_SENSITIVITY`), sampled as ``r·V`` with ``r ~ Gamma(k + 1, Δ∞/ε)`` and
        ``V`` uniform on the cube. Building
        ``M̃`` (diagonal ``λ̃_{ω_k²}``, off-diagonal ``λ̃_{ω_kω_l}/2``), the ridge, the
        spectral trimming and the minimisation are post-processing. No internal split.

    References:
        Zhang, Zhang, Xiao, Yang & Winslett (2012), "Functional mechanism: regression
        analysis under differential privacy", PVLDB 5(11): Algorithm 1, the linear-regression
        sensitivity Δ = 2(d+1)², and regularisation and spectral trimming for unbounded noisy
        objectives (section numbers not checked: the paper is not in shared/papers); Awan &
        Slavković (2018), "Structure and Sensitivity in Differential Privacy: Comparing K-Norm
        Mechanisms" (the ℓ∞ mechanism; not in shared/papers either); Hardt & Talwar (2010) for
        the Gamma–uniform sampler of K-norm mechanisms.
    """
    ridge = check_nonnegative("ridge", ridge)
    trim = check_fraction("trim", trim)
    n, d = features.shape
    if target.shape != (n,):
        raise ValueError(f"target (shape {target.shape}) must have shape ({n},), one per row of features")
    if np.any(np.abs(features) > 1.0) or np.any(np.abs(target) > 1.0):
        raise ValueError(
            "features and target must lie in [-1, 1] (the sensitivity assumes it); clip and "
            "scale them with the public bounds first"
        )
    rows, cols = np.triu_indices(d)
    quadratic = (features[:, rows] * features[:, cols]).sum(axis=0) * np.where(rows == cols, 1.0, 2.0)
    coefficients = np.concatenate((
        [target @ target],
        -2.0 * (features.T @ target),
        quadratic,
    ))
    event = functional_mechanism_event(d, epsilon=epsilon, norm=norm, name=name, scope=scope, step=step)
    if norm == "l1":
        noisy = laplace_mechanism(
            coefficients, sensitivity=functional_mechanism_sensitivity(d), epsilon=epsilon,
            source=source, ledger=ledger, name=name, scope=scope, step=step,
        )
    else:
        noisy = _linf_mechanism(coefficients, event, source=source, ledger=ledger)
    constant, linear, quad = noisy[0], noisy[1 : d + 1], noisy[d + 1 :]
    m = np.zeros((d, d))
    m[rows, cols] = np.where(rows == cols, quad, quad / 2.0)
    m[cols, rows] = m[rows, cols]
    w, v = np.linalg.eigh(m + ridge * n * np.eye(d))
    keep = w > trim * n
    omega = v[:, keep] @ ((v[:, keep].T @ (-linear / 2.0)) / w[keep])
    rss = float(constant + linear @ omega + omega @ m @ omega)
    return omega, rss


@dataclasses.dataclass(frozen=True, kw_only=True)
class FunctionalMechanismParams(ConstrainedParams):
    """Hyperparameters of :class:`FunctionalMechanismSynthesizer`.

    Attributes:
        epsilon: the total ε.
        lower, upper: public bounds, one per column; data outside them is clipped.
        marginal_fraction: in (0, 1): the share of ε for the first column's moments; the
            rest is split equally over the q − 1 regressions (ignored when q = 1, where the
            marginal gets all of ε).
        ridge: ≥ 0, the ridge weight per record in [−1, 1]-scaled units (0: none).
        variance_floor: in (0, 1): the spectral-trimming threshold per record, and the
            smallest variance (marginal and residual) in scaled units.
    """

    epsilon: float
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    marginal_fraction: float
    ridge: float = 0.0
    variance_floor: float = 1e-4

    _parameter_constraints: ClassVar = {"epsilon": [EPSILON], "lower": [Unconstrained()], "upper": [Unconstrained()],
                                        "marginal_fraction": [FRACTION], "ridge": [NONNEGATIVE],
                                        "variance_floor": [FRACTION]}  # lower, upper: validate_bounds

    def _check_together(self) -> None:
        lower, upper = validate_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        for name in ("epsilon", "marginal_fraction", "ridge", "variance_floor"):
            object.__setattr__(self, name, float(getattr(self, name)))


class FunctionalMechanismSynthesizer(ContinuousSynthesizer):
    """Sequential normal synthesis from a DP marginal and functional-mechanism regressions.

    ``fit`` clips the data to the public bounds and scales every column to [−1, 1], then:
    (1) releases ``(Σx̃₁, Σx̃₁²)`` with Laplace noise and sets the first column's mean
    ``clip(S₁/n, −1, 1)`` and variance ``clip(S₂/n − mean², variance_floor, 1)``; (2) for each
    later column j, runs :func:`functional_mechanism_regression` of ``x̃_j`` on
    ``(1, x̃₁, …, x̃_{j−1})`` and sets the residual variance to
    ``clip(rss̃/(n − d), variance_floor, 1)``; (3) maps the model back to data units.
    ``sample`` draws from that model.

    Args:
        params: a :class:`FunctionalMechanismParams`.

    Attributes:
        model_: the :class:`~privlab.mechanisms.pmse.synthesis.SequentialLinearGaussian` family.
        theta_: its DP θ in data units; ``model_.unpack(theta_)[0][-1]`` is the DP regression
            ``(intercept, slopes…)`` of the last column on the others.
        columns_: the data's column names.

    Privacy:
        ε-DP under replace-one neighbours (n public). DP steps: the marginal moments,
        ``Lap(3/ε_m)`` (``|Δx̃| ≤ 2``, ``|Δx̃²| ≤ 1``), and one functional-mechanism release
        per regression, ``Lap(2(d+1)²/ε_r)`` with d = j coefficients for column j
        (Δ = 18 for the paper's X₂ | X₁). Budget split: ``ε_m = marginal_fraction · ε``, the
        rest equally over the q − 1 regressions (the last share absorbs float rounding so the
        ledger total is exactly ε). Post-processing: clipping the moments, the ridge,
        trimming and minimisation, the variance floors, the change of units and every
        synthetic draw. The paper compares the functional mechanism's coefficients at the
        full ε; this synthesizer's regression gets ``(1 − marginal_fraction) ε``, and
        :func:`functional_mechanism_regression` alone reproduces the paper's baseline.

    References:
        Zhang et al. (2012), PVLDB 5(11), Algorithm 1; Snoke &
        Slavković, Section 6 (the functional mechanism on data truncated at public bounds).
    """

    name = "functional_mechanism"
    Params = FunctionalMechanismParams

    def _read(self, data: object) -> tuple[np.ndarray, tuple[str, ...]]:
        q = len(self.params.lower)
        return data_matrix(data, columns=q, min_rows=q + 1)

    def planned_events(self, records: int, columns: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """One Laplace step for the marginal moments, then one per regression, in order.

        Shares: ``marginal_fraction · ε`` for the moments (all of ε when q = 1), the rest
        equally over the q − 1 regressions (:func:`split_epsilon`: the shares sum to exactly ε).
        ``records`` does not enter (n is public and not released).
        """
        p = self.params
        check_count("records", records)
        q = len(p.lower)
        if check_count("columns", columns) != q:
            raise SchemaError(f"data has {columns} column(s) but the public bounds declare {q}")
        weights = [1.0] if q == 1 else [p.marginal_fraction] + [(1 - p.marginal_fraction) / (q - 1)] * (q - 1)
        shares = split_epsilon(p.epsilon, weights)
        names = ["functional_mechanism.marginal_moments"] + [
            f"functional_mechanism.objective[{j}]" for j in range(1, q)
        ]
        sensitivities = [MARGINAL_SENSITIVITY] + [functional_mechanism_sensitivity(j + 1) for j in range(1, q)]
        return [
            PrivacyEvent(name=name, mechanism="laplace", epsilon=share, sensitivity=sensitivity,
                         noise_scale=sensitivity / share, scope=scope, step="functional_mechanism")
            for name, share, sensitivity in zip(names, shares, sensitivities, strict=True)
        ]

    def _fit(
        self, matrix: np.ndarray, *, plan: list[PrivacyEvent], ledger: Ledger, source: RandomSource, scope: str
    ) -> None:
        """Release the marginal moments and the regressions' noisy objectives."""
        p = self.params
        n, q = matrix.shape
        scaled = clip_and_scale(matrix, p.lower, p.upper)
        x = scaled[:, 0]
        moments = laplace_mechanism(
            np.array([x.sum(), x @ x]), sensitivity=MARGINAL_SENSITIVITY, epsilon=plan[0].epsilon,
            source=source, ledger=ledger, name=plan[0].name, scope=scope, step=plan[0].step,
        )
        mean = float(np.clip(moments[0] / n, -1.0, 1.0))
        variance = float(np.clip(moments[1] / n - mean**2, p.variance_floor, 1.0))
        coefficients = [np.array([mean])]
        sds = [np.sqrt(variance)]
        for j in range(1, q):
            features = np.column_stack([np.ones(n), scaled[:, :j]])
            omega, rss = functional_mechanism_regression(
                features, scaled[:, j], epsilon=plan[j].epsilon, source=source, ledger=ledger,
                ridge=p.ridge, trim=p.variance_floor, name=plan[j].name, scope=scope, step=plan[j].step,
            )
            coefficients.append(omega)
            sds.append(np.sqrt(np.clip(rss / (n - (j + 1)), p.variance_floor, 1.0)))
        self.model_ = SequentialLinearGaussian(q)
        self.theta_ = self.model_.from_scaled(coefficients, sds, lower=p.lower, upper=p.upper)

    def _sample_arrays(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """One dataset of ``n`` records from the DP model (values not clipped)."""
        return [self.model_.sample(self.theta_, n, rng)]
