"""The linear regressions of the regression criteria: the ε-DP functional-mechanism fit on the
private data (:func:`fit_private_regression`), OLS on the public candidate, and the algebra both
share (the scaled design, data-unit and standardised coefficients, the clipped MAE).

Privacy:
    Replace-one neighbours with ``n`` public. :func:`fit_private_regression` is the functional
    mechanism on the design scaled to [−1, 1] with the public bounds (covariates: the range of
    their domain values; response: ``response_bounds``): the ``1 + p + p(p+1)/2`` objective
    coefficients get ``Lap(2(p+1)²/ε)`` with ``p`` = number of covariates + 1 (intercept),
    :func:`~privlab.mechanisms.pmse.functional_mechanism.functional_mechanism_sensitivity`; it
    records one Laplace event. Everything else here is post-processing of DP or public inputs.

References:
    Hod & Canetti (2024), Sections 4.5.4 and 4.14.1; Zhang et al. (2012), the functional mechanism.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import codes_of
from privlab.mechanisms.pmse.functional_mechanism import functional_mechanism_regression
from privlab.mechanisms.pmse.numeric_data import clip_and_scale
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["PrivateLinearFit", "clipped_mae", "covariate_ranges", "fit_private_regression", "ols_coefficients",
           "regression_data", "scaled_design", "standardized_coefficients"]

@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivateLinearFit:
    """A DP linear regression of ``response`` on ``covariates`` (public once released).

    Attributes:
        response, covariates: The columns.
        coefficients: ``(intercept, slope_1, …)`` in data units.
        epsilon, sensitivity, noise_scale, mechanism: The functional-mechanism step as
            charged in the ledger.
    """

    response: str
    covariates: tuple[str, ...]
    coefficients: tuple[float, ...]
    epsilon: float
    sensitivity: float
    noise_scale: float
    mechanism: str

    def as_details(self) -> tuple[tuple[str, float], ...]:
        names = ("intercept", *self.covariates)
        return tuple((f"dp_coefficient:{c}", float(v)) for c, v in zip(names, self.coefficients, strict=True))


def covariate_ranges(domain: Domain, covariates: Sequence[str], *, criterion: str) -> tuple[np.ndarray, np.ndarray]:
    """Public ``[lower, upper]`` of each covariate: the range of its domain values.

    Raises:
        SpecError: A covariate whose values are all equal (it would be collinear with the
            intercept).
    """
    lower, upper = [], []
    for c in covariates:
        values = domain[c].value_array()
        lo, hi = float(values.min()), float(values.max())
        if not lo < hi:
            raise SpecError(
                f"criterion {criterion!r}: covariates column {c!r} has a single value ({lo!r}); drop it"
            )
        lower.append(lo)
        upper.append(hi)
    return np.array(lower), np.array(upper)


def regression_data(
    frame: pd.DataFrame,
    *,
    domain: Domain,
    response: str,
    covariates: Sequence[str],
    response_bounds: tuple[float, float],
    what: str,
) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` in data units: covariate code values and response values clipped to its bounds."""
    codes = codes_of(frame, domain, [response, *covariates], what=what)
    y = np.clip(domain[response].value_array()[codes[:, 0]], *response_bounds)
    if covariates:
        x = np.column_stack([domain[c].value_array()[codes[:, j + 1]] for j, c in enumerate(covariates)])
    else:
        x = np.empty((len(frame), 0))
    return x, y


def scaled_design(
    x: np.ndarray, y: np.ndarray, *, lower: np.ndarray, upper: np.ndarray, response_bounds: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """The functional mechanism's input: ``[1, x̃]`` and ``ỹ``, every entry in [−1, 1]."""
    features = np.column_stack([np.ones(len(y)), clip_and_scale(x, lower, upper)])
    target = clip_and_scale(y[:, None], [response_bounds[0]], [response_bounds[1]])[:, 0]
    return features, target


def _unscale(
    omega: np.ndarray, lower: np.ndarray, upper: np.ndarray, response_bounds: tuple[float, float]
) -> np.ndarray:
    """Map ``ỹ = ω₀ + Σ ω_j x̃_j`` back to ``y = a + Σ b_j x_j`` (x̃ = (x − c)/h)."""
    c, h = (lower + upper) / 2, (upper - lower) / 2
    cy, hy = (response_bounds[0] + response_bounds[1]) / 2, (response_bounds[1] - response_bounds[0]) / 2
    slopes = hy * omega[1:] / h
    intercept = cy + hy * omega[0] - float(slopes @ c)
    return np.concatenate([[intercept], slopes])


def ols_coefficients(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares ``(intercept, slopes…)`` from the centred normal equations.

    The slopes solve ``(X_c'X_c) b = X_c'y_c`` on centred data (minimum-norm, so a covariate
    that is constant in the data gets slope 0) and the intercept is ``ȳ − x̄'b``; a
    ``k × k`` solve instead of a QR of the ``n × k`` design.
    """
    x_mean, y_mean = x.mean(axis=0), float(y.mean())
    xc = x - x_mean
    slopes, *_ = np.linalg.lstsq(xc.T @ xc, xc.T @ (y - y_mean), rcond=None)
    return np.concatenate([[y_mean - float(slopes @ x_mean)], slopes])


def standardized_coefficients(coefficients: np.ndarray, means: np.ndarray, sds: np.ndarray) -> np.ndarray:
    """Coefficients of the same model on covariates standardised with ``means`` and ``sds``.

    ``y = a + Σ b_j x_j = (a + Σ b_j μ_j) + Σ (b_j σ_j)(x_j − μ_j)/σ_j``.
    """
    coefficients = np.asarray(coefficients, dtype=np.float64)
    slopes = coefficients[1:]
    return np.concatenate([[coefficients[0] + float(slopes @ means)], slopes * sds])


def clipped_mae(coefficients: np.ndarray, x: np.ndarray, y: np.ndarray, bounds: tuple[float, float]) -> float:
    """``(1/n) Σ |y − [a + xᵀb]_L^U|`` (Section 4.5.4)."""
    coefficients = np.asarray(coefficients, dtype=np.float64)
    prediction = np.clip(coefficients[0] + x @ coefficients[1:], *bounds)
    return float(np.abs(y - prediction).mean())


def fit_private_regression(
    transformed: pd.DataFrame,
    *,
    domain: Domain,
    response: str,
    covariates: Sequence[str],
    response_bounds: tuple[float, float],
    epsilon: float,
    source: RandomSource,
    ledger: Ledger,
    name: str,
    scope: str = "data",
    ridge: float = 0.0,
) -> PrivateLinearFit:
    """ε-DP functional-mechanism regression of ``response`` on ``covariates`` (with intercept).

    Args:
        transformed: The private frame of codes.
        domain: Its domain (covariate bounds are the ranges of their numeric code values).
        response, covariates: Numeric columns.
        response_bounds: Public ``[L, U]`` of the response (values are clipped to it).
        epsilon: The budget of the fit.
        source, ledger, name, scope: Randomness and accounting (one Laplace event).
        ridge: ≥ 0, passed to the functional mechanism (post-processing).

    Returns:
        The fit, with data-unit coefficients and the ledger facts.

    Raises:
        BudgetExceededError: The step would exceed the ledger's cap (nothing is drawn).
        SchemaError: The frame does not hold valid codes.

    Privacy:
        ε-DP (replace-one, n public): Laplace noise of scale ``2(p+1)²/ε`` on the objective's
        polynomial coefficients, ``p = len(covariates) + 1``; the minimisation and the change
        back to data units are post-processing.

    References:
        Zhang et al. (2012); Hod & Canetti (2024), Section 4.5.4.
    """
    lower, upper = covariate_ranges(domain, covariates, criterion=name)
    x, y = regression_data(transformed, domain=domain, response=response, covariates=covariates,
                           response_bounds=response_bounds, what=f"{name}: transformed data")
    features, target = scaled_design(x, y, lower=lower, upper=upper, response_bounds=response_bounds)
    omega, _ = functional_mechanism_regression(
        features, target, epsilon=epsilon, source=source, ledger=ledger, ridge=ridge,
        name=name, scope=scope, step="acceptance",
    )
    event = ledger.events[-1]
    return PrivateLinearFit(
        response=response,
        covariates=tuple(covariates),
        coefficients=tuple(float(v) for v in _unscale(omega, lower, upper, response_bounds)),
        epsilon=float(epsilon),
        sensitivity=float(event.sensitivity or 0.0),
        noise_scale=float(event.noise_scale or 0.0),
        mechanism=f"functional_mechanism/{event.mechanism}",
    )
