"""Linear-regression acceptance criteria (Hod & Canetti 2024, Section 4.5.4 and 4.14).

Both criteria regress a numeric ``response`` column (the paper: birth weight) on numeric
``covariates`` (code values from the domain, the bin-to-number rule of Section 4.5.3), with an
intercept:

* ``regression_coefficients`` — :class:`RegressionCoefficientsError`:
  ``E_lr-coef = ‖w^ε(R) − w(S)‖`` (``norm = "l1"``, the paper's choice, or ``"max"``) where
  ``w^ε(R)`` is the ε-DP functional-mechanism fit on the transformed data and ``w(S)`` the OLS
  fit on the candidate, both *standardised with the candidate's covariate means and standard
  deviations*: slope ``b_j`` becomes ``b_j·sd_S(x_j)`` (response units per candidate standard
  deviation of ``x_j``) and the intercept becomes the prediction at the candidate's covariate
  means, ``a + Σ_j b_j·mean_S(x_j)``. The response keeps its units (the paper's threshold, 30,
  and result, 27.185, are only plausible in grams). The DP step is the fit; the distance is
  post-processing, so no further noise is added.
* ``regression_mae`` — :class:`RegressionMAEError`: the train-on-synthetic, test-on-real
  prediction criterion ``E_lr-mae = |MAE_R(w^ε(R)) − MAE_R(w(S))|`` with
  ``MAE_D(w) = (1/n) Σ |y − [wᵀx]_L^U|`` (predictions clipped to the public response bounds),
  released with the Laplace mechanism at the **corrected** sensitivity ``2(U − L)/n``.

:func:`fit_private_regression` runs the functional mechanism once and returns a public
:class:`PrivateLinearFit`. Section 4.14.1: ``w^ε(R)`` does not depend on the candidate, so a
flow should fit it once before the private-selection loop and pass it to both criteria's
``release(..., fit=fit)`` in every iteration (saving the doubling of its ε that Theorem 3
applies to everything inside the loop). Without ``fit``, :class:`RegressionCoefficientsError`
fits with its own ε, and :class:`RegressionMAEError` fits with ``fit_epsilon`` when the spec
gives one.

Privacy:
    Replace-one neighbours with ``n`` public; ``S`` public. Functional mechanism on the design
    scaled to [−1, 1] with the public bounds (covariates: the range of their domain values;
    response: ``response_bounds``): the ``1 + p + p(p+1)/2`` objective coefficients get
    ``Lap(2(p+1)²/ε)`` with ``p`` = number of covariates + 1 (intercept),
    :func:`~privlab.mechanisms.pmse.functional_mechanism.functional_mechanism_sensitivity`.
    MAE: ``Δ = 2(U − L)/n`` (Proposition 9; Section 4.14.2 reports that the production code
    used half of it, ``(U − L)/n``, at ε = 0.02; the noise it drew, scale ``(U − L)/(0.02 n)``,
    is 0.04-DP at the correct Δ, so the paper re-accounts the criterion at ε = 0.04. This
    module uses the correct Δ). Everything else (OLS on ``S``, standardisation, distances,
    threshold comparisons) is post-processing of public inputs.

References:
    Hod & Canetti (2024), Section 4.5.4 (E_lr-coef, E_lr-mae), Proposition 9, Sections 4.14.1
    and 4.14.2, Table 2 rows 6-7; Zhang et al. (2012), the functional mechanism.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import (
    AcceptanceCriterion,
    CriterionResult,
    check_column_names,
    check_not_empty,
    check_same_size,
    checked_record_count,
    register_criterion,
    release_laplace_measure,
    require_columns,
)
from privlab.mechanisms.acceptance.linear_fit import (
    PrivateLinearFit,
    clipped_mae,
    covariate_ranges,
    fit_private_regression,
    ols_coefficients,
    regression_data,
    standardized_coefficients,
)
from privlab.mechanisms.pmse.functional_mechanism import functional_mechanism_sensitivity
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import BOOLEAN, Interval, Options, RealPair, Text, Unconstrained
from privlab.platform.dp.budget import preflight
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["NORMS", "RegressionCoefficientsError", "RegressionMAEError", "mae_sensitivity"]

NORMS = ("l1", "max")
"""Distances between coefficient vectors that ``regression_coefficients`` accepts."""


# --- data and algebra -----------------------------------------------------------------------


def mae_sensitivity(response_bounds: tuple[float, float], n: int) -> float:
    """``2(U − L)/n`` — Proposition 9, the corrected value of Section 4.14.2.

    One replaced record ``(x, y) → (x', y')`` moves ``MAE_R(w_R) − MAE_R(w_S)`` by
    ``(1/n)|(|y − p_R| − |y − p_S|) − (|y' − p'_R| − |y' − p'_S|)|``, and each bracket is at
    most ``|p_R − p_S| ≤ U − L`` because the predictions are clipped to ``[L, U]``; the
    reverse triangle inequality carries this to the absolute value. The bound is attained
    (see the tests), so the ``(U − L)/n`` used in production was wrong.
    """
    return 2.0 * (response_bounds[1] - response_bounds[0]) / checked_record_count(n)


# --- criteria -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _LinearRegressionCriterion(AcceptanceCriterion):
    """Shared spec keys: ``response``, ``covariates``, ``response_bounds``, ``ridge``."""

    response: str
    covariates: tuple[str, ...]
    response_bounds: tuple[float, float]
    ridge: float = 0.0

    _parameter_constraints: ClassVar = {
        **AcceptanceCriterion._parameter_constraints, "response": [Text("a column name")],
        "covariates": [Unconstrained()], "response_bounds": [RealPair()],
        "ridge": [Interval(numbers.Real, 0, None, closed="left")]}

    def _check_together(self) -> None:
        super()._check_together()
        covariates = check_column_names(self.name, "covariates", self.covariates)
        if self.response in covariates:
            raise SpecError(f"criterion {self.name!r}: covariates ({list(covariates)!r}) must not contain the response")
        object.__setattr__(self, "covariates", covariates)
        lower, upper = self.response_bounds
        object.__setattr__(self, "response_bounds", (float(lower), float(upper)))
        object.__setattr__(self, "ridge", float(self.ridge))

    @property
    def bounds(self) -> tuple[float, float]:
        return self.response_bounds

    def check_domain(self, domain: Domain) -> None:
        """Raise :class:`SpecError` naming the key for unknown, nominal or constant columns."""
        require_columns(self.name, "response", [self.response], domain, numeric=True)
        require_columns(self.name, "covariates", self.covariates, domain, numeric=True)
        covariate_ranges(domain, self.covariates, criterion=self.name)

    def data(self, frame: pd.DataFrame, *, domain: Domain, what: str) -> tuple[np.ndarray, np.ndarray]:
        self.check_domain(domain)
        return regression_data(frame, domain=domain, response=self.response, covariates=self.covariates,
                               response_bounds=self.response_bounds, what=f"criterion {self.name!r}: {what}")

    def fit_private(
        self,
        transformed: pd.DataFrame,
        *,
        domain: Domain,
        epsilon: float,
        source: RandomSource,
        ledger: Ledger,
        scope: str = "data",
        name: str | None = None,
    ) -> PrivateLinearFit:
        """:func:`fit_private_regression` with this criterion's columns, bounds and ridge."""
        self.check_domain(domain)
        return fit_private_regression(
            transformed, domain=domain, response=self.response, covariates=self.covariates,
            response_bounds=self.response_bounds, epsilon=epsilon, source=source, ledger=ledger,
            name=name or f"acceptance:{self.name}", scope=scope, ridge=self.ridge,
        )

    def _check_fit(self, fit: object) -> PrivateLinearFit:
        if not isinstance(fit, PrivateLinearFit):
            raise TypeError(f"fit ({fit!r}) must be a PrivateLinearFit")
        if fit.response != self.response or fit.covariates != self.covariates:
            raise SpecError(
                f"criterion {self.name!r}: the fit regresses {fit.response!r} on {list(fit.covariates)!r}, "
                f"but the criterion declares {self.response!r} on {list(self.covariates)!r}"
            )
        return fit


@register_criterion
@dataclasses.dataclass(frozen=True, kw_only=True)
class RegressionCoefficientsError(_LinearRegressionCriterion):
    """Distance between the DP coefficients on ``R`` and the OLS coefficients on ``S``.

    Spec keys: ``name``, ``threshold``, ``epsilon`` (the functional mechanism's ε; paper 0.43,
    T = 30), ``response``, ``covariates``, ``response_bounds`` (``[L, U]``), ``norm``
    (``"l1"`` default, or ``"max"``), ``count_intercept`` (default true: the standardised
    intercept is one of the compared coefficients), ``ridge`` (default 0).

    :meth:`error` is the non-private analogue with the OLS fit on ``R``; :meth:`release`
    uses the functional-mechanism fit. See the module docstring for the standardisation.

    Privacy:
        ε-DP: one functional-mechanism release (:meth:`sensitivity` is its L1 sensitivity
        ``2(p+1)²``, independent of ``n``, in [−1, 1]-scaled units); the distance to the public
        candidate's fit is post-processing, so ``dp_value`` carries no extra noise.

    References:
        Hod & Canetti (2024), Section 4.5.4 ("Descriptive modeling") and 4.14.1.
    """

    kind: ClassVar[str] = "regression_coefficients"
    description: ClassVar[str] = "linear regression coefficients: largest absolute error"
    any_size: ClassVar[bool] = True  # fitted coefficients: R and S may have different sizes

    def shared_fit_provided(self) -> Any:
        """Its DP coefficients w^ε(R), reused by MAE criteria on the same columns (Section 4.14.1)."""
        return ("linear_fit", self.response, tuple(self.covariates))

    def fit_shared(self, transformed: pd.DataFrame, *, domain: Domain, source: RandomSource, ledger: Ledger,
                   scope: str = "data") -> PrivateLinearFit:
        return self.fit_private(transformed, domain=domain, epsilon=self.epsilon, source=source, ledger=ledger,
                                scope=scope)

    norm: str = "l1"
    count_intercept: bool = True

    _parameter_constraints: ClassVar = {**_LinearRegressionCriterion._parameter_constraints,
                                        "norm": [Options(str, NORMS)], "count_intercept": [BOOLEAN]}

    def distance(self, coefficients: Sequence[float], candidate: pd.DataFrame, *, domain: Domain) -> float:
        """``‖std(coefficients) − std(w(S))‖`` with the candidate's covariate means and sds."""
        xs, ys = self.data(candidate, domain=domain, what="candidate")
        means, sds = xs.mean(axis=0), xs.std(axis=0)
        gap = (standardized_coefficients(np.asarray(coefficients), means, sds)
               - standardized_coefficients(ols_coefficients(xs, ys), means, sds))
        if not self.count_intercept:
            gap = gap[1:]
        return float(np.abs(gap).sum() if self.norm == "l1" else np.abs(gap).max())

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """The non-private measure: the OLS fit on ``R`` against the OLS fit on ``S`` (any sizes)."""
        check_not_empty(transformed, candidate, name=self.name)
        xr, yr = self.data(transformed, domain=domain, what="transformed data")
        return self.distance(ols_coefficients(xr, yr), candidate, domain=domain)

    def sensitivity(self, n: int) -> float:
        """``2(p+1)²`` with ``p = len(covariates) + 1`` (the functional mechanism's L1 Δ)."""
        checked_record_count(n)
        return functional_mechanism_sensitivity(len(self.covariates) + 1)

    def release(
        self,
        transformed: pd.DataFrame,
        candidate: pd.DataFrame,
        *,
        domain: Domain,
        source: RandomSource,
        ledger: Ledger,
        scope: str = "data",
        fit: PrivateLinearFit | None = None,
    ) -> CriterionResult:
        """Fit ``w^ε(R)`` (or use ``fit``) and compare its distance to ``w(S)`` with the threshold.

        Args:
            fit: A fit released earlier with this criterion's ε (Section 4.14.1); nothing is
                charged then. Without it the functional mechanism runs now with ``epsilon``.

        Returns:
            ``dp_value`` = the distance; ``details`` list the DP coefficients (public);
            ``true_value`` (research) is :meth:`error`.

        Raises:
            SpecError: ``fit`` is for other columns or another ε.

        Privacy:
            ε-DP (the fit); the rest is post-processing.
        """
        check_same_size(transformed, candidate, name=self.name)
        if fit is None:
            fit = self.fit_private(transformed, domain=domain, epsilon=self.epsilon, source=source,
                                   ledger=ledger, scope=scope)
        else:
            fit = self._check_fit(fit)
            if fit.epsilon != float(self.epsilon):
                raise SpecError(
                    f"criterion {self.name!r}: the fit was released with epsilon {fit.epsilon!r}, but the "
                    f"criterion declares epsilon ({self.epsilon!r})"
                )
        value = self.distance(fit.coefficients, candidate, domain=domain)
        return CriterionResult(
            name=self.name,
            kind=self.kind,
            threshold=float(self.threshold),
            dp_value=value,
            passed=value < self.threshold,
            epsilon=fit.epsilon,
            mechanism=fit.mechanism,
            sensitivity=fit.sensitivity,
            noise_scale=fit.noise_scale,
            bounds=self.bounds,
            true_value=self.error(transformed, candidate, domain=domain) if source.mode == "research" else None,
            details=fit.as_details(),
        )


@register_criterion
@dataclasses.dataclass(frozen=True, kw_only=True)
class RegressionMAEError(_LinearRegressionCriterion):
    """Clipped-MAE gap between the DP fit on ``R`` and the OLS fit on ``S``, tested on ``R``.

    ``E_lr-mae = |MAE_R(w^ε(R)) − MAE_R(w(S))|`` (train on synthetic, test on real).

    Spec keys: ``name``, ``threshold`` (paper: 5 grams), ``epsilon`` (the Laplace release;
    paper 0.04 after the 4.14.2 correction), ``response``, ``covariates``, ``response_bounds``
    (paper ``[1400, 4600]``), ``fit_epsilon`` (optional: ε of a functional-mechanism fit of
    this criterion's own, used when ``release`` gets no ``fit``), ``ridge``.

    Privacy:
        ε-DP for the MAE gap given the public ``w^ε(R)`` and ``w(S)``: Laplace with
        ``Δ = 2(U − L)/n`` (:func:`mae_sensitivity`; Proposition 9, the value corrected in
        Section 4.14.2). The fit costs its own ε — ``fit_epsilon`` here, or whatever the
        criterion that released it charged.

    References:
        Hod & Canetti (2024), Section 4.5.4 ("Predictive modeling"), Proposition 9, 4.14.2.
    """

    kind: ClassVar[str] = "regression_mae"
    description: ClassVar[str] = "mean absolute error of linear-regression predictions: difference"
    any_size: ClassVar[bool] = True  # a fit on S, mean errors on R: R and S may have different sizes
    missing_fit_hint: ClassVar[str] = (
        "regression_mae uses the DP fit of a regression_coefficients criterion on the same response and "
        "covariates listed before it; add one, or set fit_epsilon to give it its own fit")

    def shared_fit_needed(self) -> Any:
        """The coefficients criterion's fit on the same columns, unless it fits its own (``fit_epsilon``)."""
        return None if self.fit_epsilon is not None else ("linear_fit", self.response, tuple(self.covariates))

    fit_epsilon: float | None = None

    _parameter_constraints: ClassVar = {**_LinearRegressionCriterion._parameter_constraints,
                                        "fit_epsilon": [None, Interval(numbers.Real, 0, None, closed="neither")]}

    def _check_together(self) -> None:
        super()._check_together()
        if self.fit_epsilon is not None:
            object.__setattr__(self, "fit_epsilon", float(self.fit_epsilon))

    def _gap(self, coefficients: Sequence[float], xr: np.ndarray, yr: np.ndarray, w_s: np.ndarray) -> float:
        return abs(clipped_mae(np.asarray(coefficients), xr, yr, self.response_bounds)
                   - clipped_mae(w_s, xr, yr, self.response_bounds))

    def planned_events(self, n: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """The Laplace release, preceded by the functional-mechanism fit when ``fit_epsilon`` is set
        (what :meth:`release` charges without a ``fit``; with one, only the release)."""
        events = super().planned_events(n, scope=scope)
        if self.fit_epsilon is None:
            return events
        fm_delta = functional_mechanism_sensitivity(len(self.covariates) + 1)
        fit = PrivacyEvent(name=f"acceptance:{self.name}:fit", mechanism="laplace", epsilon=self.fit_epsilon,
                           sensitivity=fm_delta, noise_scale=fm_delta / self.fit_epsilon, scope=scope,
                           step="acceptance")
        return [fit, *events]

    def gap(self, coefficients: Sequence[float], transformed: pd.DataFrame, candidate: pd.DataFrame,
            *, domain: Domain) -> float:
        """``|MAE_R(coefficients) − MAE_R(w(S))|``."""
        xr, yr = self.data(transformed, domain=domain, what="transformed data")
        w_s = ols_coefficients(*self.data(candidate, domain=domain, what="candidate"))
        return self._gap(coefficients, xr, yr, w_s)

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """The non-private measure with the OLS fit on ``R`` in place of ``w^ε(R)`` (any sizes: the
        MAEs are means over ``R``, and ``w(S)`` is a fit)."""
        check_not_empty(transformed, candidate, name=self.name)
        xr, yr = self.data(transformed, domain=domain, what="transformed data")
        w_s = ols_coefficients(*self.data(candidate, domain=domain, what="candidate"))
        return self._gap(ols_coefficients(xr, yr), xr, yr, w_s)

    def sensitivity(self, n: int) -> float:
        """``2(U − L)/n`` (Proposition 9; corrected per Section 4.14.2)."""
        return mae_sensitivity(self.response_bounds, n)

    def release(
        self,
        transformed: pd.DataFrame,
        candidate: pd.DataFrame,
        *,
        domain: Domain,
        source: RandomSource,
        ledger: Ledger,
        scope: str = "data",
        fit: PrivateLinearFit | None = None,
    ) -> CriterionResult:
        """Release ``E_lr-mae + Lap(2(U − L)/(nε))`` with ``w^ε(R)`` from ``fit`` or a fit of its own.

        Args:
            fit: The DP fit released by ``regression_coefficients`` (or
                :func:`fit_private_regression`); without it ``fit_epsilon`` must be set and
                a fit is released first (its ε is charged as a separate ledger event).

        Returns:
            The result; ``true_value`` (research) is the gap with the DP fit, the statistic that
            was perturbed; ``details`` list the DP coefficients used.

        Raises:
            SpecError: No ``fit`` and no ``fit_epsilon``, or a fit for other columns.
            BudgetExceededError: The fit and the release together exceed the cap (checked
                before either runs).

        Privacy:
            ε-DP for the release (+ ``fit_epsilon`` when it fits its own coefficients).
        """
        check_same_size(transformed, candidate, name=self.name)
        n = len(transformed)
        delta = self.sensitivity(n)
        if fit is None:
            if self.fit_epsilon is None:
                raise SpecError(
                    f"criterion {self.name!r}: regression_mae needs the DP coefficients w^ε(R): pass "
                    "fit= (from regression_coefficients / fit_private_regression) or set fit_epsilon"
                )
            self.check_domain(domain)
            preflight(ledger, self.planned_events(n, scope=scope))
            fit = self.fit_private(transformed, domain=domain, epsilon=self.fit_epsilon, source=source,
                                   ledger=ledger, scope=scope, name=f"acceptance:{self.name}:fit")
        else:
            fit = self._check_fit(fit)
        value = self.gap(fit.coefficients, transformed, candidate, domain=domain)
        return release_laplace_measure(
            self, value, sensitivity=delta, source=source, ledger=ledger, scope=scope,
            public_details=(("fit_epsilon", fit.epsilon), *fit.as_details()),
        )

