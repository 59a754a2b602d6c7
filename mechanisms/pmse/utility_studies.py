"""Workloads for the pMSE paper's utility studies: Table 2 / Figure 3 and Section 6.

Both are grid-pattern workloads: one repetition is one simulation. It draws a private dataset
X from the paper's data model (Sections 5–7),

    X₁ ~ N(2, 10),   X₂ | X₁ ~ N(−2.5 + 0.5·x₁, 3),   n = 5000     (second argument = variance),

runs one synthesis method on it with the configuration's ε (charging the trial's ledger), and
scores what the method released:

* ``pmse_comparison`` (Table 2 / Figure 3, Section 7): the pMSE of each released synthetic
  dataset against X, from a CART of unlimited depth (``tree``: rpart's by default, or the
  greedy rule; :data:`METRIC_TREES`);
* ``pmse_regression`` (Section 6, Figures 2 and 4): ``|β̂ − β̂priv|`` for the intercept and
  the slope of the OLS regression of X₂ on X₁, where β̂ is fitted on X and β̂priv is the mean
  of the per-dataset OLS fits over the released synthetic datasets (the point-estimate
  combining rule for multiple synthetic datasets, Raab et al. 2017), or the DP coefficients
  themselves for the functional mechanism, which releases no data.

A configuration is a method variant × ε. The variant is a table in the spec grid, so only
meaningful combinations exist::

    [grid]
    epsilon = [0.25, 0.5, 1.0]
    method = [
      { name = "non_dp" },
      { name = "pmse_mechanism", max_depth = 5 },          # or max_depth = "unlimited"
      { name = "noisy_bppd", bound_sd = 4 },
      { name = "smooth_histogram", bound_sd = 4 },
      { name = "functional_mechanism", bound_sd = 4, norm = "linf" },   # regression only
    ]

Anything else is rejected when the spec is loaded (a depth on a bounded method, a bound on the
pMSE mechanism, a missing bound, an unknown key or method). ``non_dp`` releases without
privacy and ignores ε; each ε row of it is an independent replicate, as in the paper's Table 2,
whose non-DP column also differs from row to row.

Methods (Sections 2.1 and 6 of the paper; settings shared by all variants are ``[params]``):

* ``non_dp`` — ``releases`` datasets from the unperturbed Bayesian posterior predictive of the
  sequential normal model (:class:`~.bppd.BPPDSynthesizer`); nothing is charged.
* ``pmse_mechanism`` — Algorithm 2: ``releases`` (l) parameter draws from the exponential
  mechanism with the pMSE as quality, ε/l each, one dataset per draw
  (:class:`~.mechanism.PMSEMechanism`), CART depth ``max_depth`` and complexity ``cp``,
  Metropolis settings ``proposal_scale``, ``burn_in``, ``thinning``, ``chains``.
* ``noisy_bppd`` — Bowen & Liu's noisy BPPD, l releases of ε/l (:class:`~.bppd.NoisyBPPDSynthesizer`).
* ``smooth_histogram`` — Wasserman & Zhou's smooth histogram, one release of ε with ``bins``
  bins per column (:class:`~.smooth_histogram.SmoothHistogramSynthesizer`).
* ``functional_mechanism`` — Zhang et al.'s functional mechanism (``norm = "l1"``) or Awan &
  Slavković's ℓ∞ variant (``norm = "linf"``) for the regression of X₂ on X₁ at the full ε
  (:func:`~.functional_mechanism.functional_mechanism_regression`).

Public bounds: the bounded methods clip each column to ``μ_j ± bound_sd · σ_j``, where μ_j and
σ_j are the *population* mean and standard deviation implied by the spec's data-model
parameters (μ = (2, −1.5), σ = (√10, √5.5) by default) — public configuration, never the
sample's moments. The paper says only "two, four, five, or ten times the standard deviation";
centring the interval on the mean is our reading.

Randomness: everything in a simulation (the private data, the mechanism's noise and chains,
the synthetic draws) comes from the repetition's generator, so a repetition is reproducible
from the root seed and its index alone.

References: Snoke & Slavković, "pMSE Mechanism", Sections 2.1, 5, 6 and 7 (Table 2,
Figures 2–4); Bowen & Liu (2016); Wasserman & Zhou (2010); Zhang et al. (2012); Awan &
Slavković (2018); Raab, Nowok & Dibben (2017).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.pmse.bppd import BPPDParams, BPPDSynthesizer, NoisyBPPDParams, NoisyBPPDSynthesizer
from privlab.mechanisms.pmse.functional_mechanism import functional_mechanism_event, functional_mechanism_regression
from privlab.mechanisms.pmse.mechanism import PMSEMechanism, PMSEMechanismParams
from privlab.mechanisms.pmse.numeric_data import clip_and_scale
from privlab.mechanisms.pmse.smooth_histogram import SmoothHistogramParams, SmoothHistogramSynthesizer
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian
from privlab.mechanisms.pmse.utility_methods import METHODS, Method
from privlab.platform.core.validation import ConstrainedParams, Interval, Options, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload, register_workload
from privlab.platform.results.reports import StudyResults

#: The pMSE metric's trees: unlimited depth with cp 0.01 (the tree the pMSE mechanism of Table 2
#: uses as its quality function) and with cp 0.001 (Table 1's second cp), both read off one fit.
METRIC_TREES: tuple[tuple[int | None, float], ...] = ((None, 0.01), (None, 0.001))

FM_STEP = "functional_mechanism"
FM_NAME = "functional_mechanism.objective"


# --- parameters -----------------------------------------------------------------------------


_POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
_FINITE = Interval(numbers.Real, None, None, closed="neither")
_COUNT = Interval(numbers.Integral, 1, None, closed="left")


@dataclasses.dataclass(frozen=True, kw_only=True)
class UtilityParams(ConstrainedParams):
    """Parameters of one configuration (the grid's ``method`` and ``epsilon`` plus ``[params]``).

    Attributes:
        method: the method variant table (see the module docstring); stored canonically.
        epsilon: the total ε of the release (ignored by ``non_dp``).
        n, x1_mean, x1_variance, x2_intercept, x2_slope, x2_variance: the data model
            ``X₁ ~ N(x1_mean, x1_variance)``, ``X₂ | X₁ ~ N(x2_intercept + x2_slope·x₁,
            x2_variance)``; also the source of the public bounds.
        releases: l, synthetic datasets released by ``non_dp``, the pMSE mechanism and the
            noisy BPPD (each DP release gets ε/l).
        cp: the pMSE mechanism's CART complexity parameter.
        tree: the CART of the pMSE mechanism's quality function and of the pMSE metric:
            ``"rpart"`` (R's rpart, the paper's tool; default) or ``"greedy"``.
        proposal_scale, burn_in, thinning, chains, synthetic_per_evaluation, prior_variance:
            the pMSE mechanism's Metropolis sampler (:class:`~.mechanism.PMSEMechanismParams`).
        bins: the smooth histogram's bins per column.
    """

    allowed_methods: ClassVar[tuple[str, ...]] = METHODS

    method: Mapping[str, Any]
    epsilon: float
    n: int = 5000
    x1_mean: float = 2.0
    x1_variance: float = 10.0
    x2_intercept: float = -2.5
    x2_slope: float = 0.5
    x2_variance: float = 3.0
    releases: int = 10
    cp: float = 0.01
    tree: str = "rpart"
    proposal_scale: float = 0.25
    burn_in: int = 1000
    thinning: int = 100
    chains: int = 1
    synthetic_per_evaluation: int = 1
    prior_variance: float = 100_000.0
    bins: int = 8

    _parameter_constraints: ClassVar = {
        "method": [Unconstrained()],  # a method table: Method.from_table
        "epsilon": [_POSITIVE], "n": [Interval(numbers.Integral, 10, None, closed="left")],
        "x1_mean": [_FINITE], "x1_variance": [_POSITIVE], "x2_intercept": [_FINITE], "x2_slope": [_FINITE],
        "x2_variance": [_POSITIVE], "releases": [_COUNT], "tree": [Options(str, ("rpart", "greedy"))],
        "proposal_scale": [_POSITIVE], "prior_variance": [_POSITIVE], "bins": [_COUNT],
        # the pMSE mechanism's own (PMSEMechanismParams), checked when the method is it
        "cp": [Unconstrained()], "burn_in": [Unconstrained()], "thinning": [Unconstrained()],
        "chains": [Unconstrained()], "synthetic_per_evaluation": [Unconstrained()],
    }

    def _check_together(self) -> None:
        variant = Method.from_table(self.method, allowed=self.allowed_methods)
        object.__setattr__(self, "method", variant.as_table())
        # The mechanism's and the histogram's own checks, run now so a bad spec fails at load.
        if variant.name == "pmse_mechanism":
            self.mechanism_params(variant)
        if variant.name == "smooth_histogram":
            self.histogram_params(variant)

    @property
    def variant(self) -> Method:
        return Method.from_table(self.method, allowed=self.allowed_methods)

    def population_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """The data model's column means and standard deviations (public)."""
        mean = np.array([self.x1_mean, self.x2_intercept + self.x2_slope * self.x1_mean])
        sd = np.sqrt([self.x1_variance, self.x2_slope**2 * self.x1_variance + self.x2_variance])
        return mean, sd

    def bounds(self, bound_sd: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Public per-column bounds ``μ_j ± bound_sd · σ_j`` from the data model."""
        mean, sd = self.population_moments()
        return tuple((mean - bound_sd * sd).tolist()), tuple((mean + bound_sd * sd).tolist())

    def draw_private(self, rng: np.random.Generator) -> np.ndarray:
        """One private n × 2 dataset from the data model."""
        x1 = rng.normal(self.x1_mean, math.sqrt(self.x1_variance), self.n)
        x2 = rng.normal(self.x2_intercept + self.x2_slope * x1, math.sqrt(self.x2_variance))
        return np.column_stack([x1, x2])

    def mechanism_params(self, variant: Method) -> PMSEMechanismParams:
        return PMSEMechanismParams(
            epsilon=self.epsilon, releases=self.releases, synthetic_per_evaluation=self.synthetic_per_evaluation,
            max_depth=variant.max_depth, cp=self.cp, tree=self.tree, proposal_scale=self.proposal_scale, burn_in=self.burn_in,
            thinning=self.thinning, chains=self.chains, prior_variance=self.prior_variance,
        )

    def histogram_params(self, variant: Method) -> SmoothHistogramParams:
        lower, upper = self.bounds(_bound(variant))
        return SmoothHistogramParams(epsilon=self.epsilon, lower=lower, upper=upper, bins=self.bins)

    def noisy_bppd_params(self, variant: Method) -> NoisyBPPDParams:
        lower, upper = self.bounds(_bound(variant))
        return NoisyBPPDParams(epsilon=self.epsilon, lower=lower, upper=upper, datasets=self.releases)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComparisonParams(UtilityParams):
    """Table 2's methods: the functional mechanism releases no data, so it has no pMSE."""

    allowed_methods: ClassVar[tuple[str, ...]] = ("non_dp", "pmse_mechanism", "noisy_bppd", "smooth_histogram")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RegressionParams(UtilityParams):
    """Section 6's methods: all five."""


def _bound(variant: Method) -> float:
    if variant.bound_sd is None:  # unreachable for validated bounded variants
        raise ValueError(f"method {variant.name!r} needs bound_sd")
    return variant.bound_sd


# --- one simulation ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Release:
    """What a method released: synthetic datasets, or (functional mechanism) coefficients."""

    datasets: tuple[np.ndarray, ...] = ()
    coefficients: np.ndarray | None = None


def planned_events(params: UtilityParams) -> list[PrivacyEvent]:
    """The ledger steps one simulation charges (empty for ``non_dp``)."""
    variant = params.variant
    if variant.name == "non_dp":
        return []
    if variant.name == "pmse_mechanism":
        return PMSEMechanism(params.mechanism_params(variant), model=SequentialLinearGaussian(2)).planned_events(
            params.n, 2)
    if variant.name == "noisy_bppd":
        return NoisyBPPDSynthesizer(params.noisy_bppd_params(variant)).planned_events(params.n, 2)
    if variant.name == "smooth_histogram":
        return SmoothHistogramSynthesizer(params.histogram_params(variant)).planned_events(params.n, 2)
    return [functional_mechanism_event(2, epsilon=params.epsilon, norm=variant.norm or "l1", name=FM_NAME,
                                       step=FM_STEP)]


def release(params: UtilityParams, data: np.ndarray, *, ledger: Ledger, source: SeededSource) -> Release:
    """Run the configuration's method on the private ``data`` (charging ``ledger``).

    Privacy: as the chosen method's (module docstring); ``non_dp`` charges nothing and gives
    no guarantee.
    """
    variant = params.variant
    n = params.n
    if variant.name == "non_dp":
        bppd = BPPDSynthesizer(BPPDParams(datasets=params.releases)).fit(data, ledger=ledger, source=source)
        frames = bppd.sample_datasets(n, rng=source.generator(purpose="non_dp.sample"))
        return Release(datasets=tuple(f.to_numpy() for f in frames))
    if variant.name == "pmse_mechanism":
        mechanism = PMSEMechanism(params.mechanism_params(variant), model=SequentialLinearGaussian(2))
        mechanism.fit(data, ledger=ledger, source=source)
        frames = mechanism.sample_datasets(n, rng=source.generator(purpose="pmse.sample"))
        return Release(datasets=tuple(f.to_numpy() for f in frames))
    if variant.name == "noisy_bppd":
        noisy = NoisyBPPDSynthesizer(params.noisy_bppd_params(variant)).fit(data, ledger=ledger, source=source)
        frames = noisy.sample_datasets(n, rng=source.generator(purpose="noisy_bppd.sample"))
        return Release(datasets=tuple(f.to_numpy() for f in frames))
    if variant.name == "smooth_histogram":
        histogram = SmoothHistogramSynthesizer(params.histogram_params(variant)).fit(data, ledger=ledger, source=source)
        frame = histogram.sample(n, rng=source.generator(purpose="smooth_histogram.sample"))
        return Release(datasets=(frame.to_numpy(),))
    lower, upper = params.bounds(_bound(variant))
    scaled = clip_and_scale(data, lower, upper)
    omega, _ = functional_mechanism_regression(
        np.column_stack([np.ones(n), scaled[:, 0]]), scaled[:, 1], epsilon=params.epsilon, source=source,
        ledger=ledger, norm=variant.norm or "l1", name=FM_NAME, step=FM_STEP,
    )
    return Release(coefficients=coefficients_in_data_units(omega, lower=lower, upper=upper))


def coefficients_in_data_units(omega: np.ndarray, *, lower: tuple[float, ...], upper: tuple[float, ...]) -> np.ndarray:
    """(intercept, slope) of X₂ on X₁ from the coefficients on ``[−1, 1]``-scaled columns.

    With ``x_j = c_j + h_j x̃_j``: slope ``h₂ω₁/h₁``, intercept ``c₂ + h₂ω₀ − slope·c₁``.
    """
    c = (np.asarray(lower) + np.asarray(upper)) / 2.0
    h = (np.asarray(upper) - np.asarray(lower)) / 2.0
    slope = h[1] * omega[1] / h[0]
    return np.array([c[1] + h[1] * omega[0] - slope * c[0], slope])


def ols(data: np.ndarray) -> np.ndarray:
    """(intercept, slope) of the least-squares regression of column 2 on column 1."""
    x, y = data[:, 0], data[:, 1]
    xc = x - x.mean()
    denominator = float(xc @ xc)
    slope = float(xc @ (y - y.mean())) / denominator if denominator > 0 else 0.0
    return np.array([y.mean() - slope * x.mean(), slope])


# --- workloads ----------------------------------------------------------------------------------


class _UtilityWorkload(Workload):
    pattern = Pattern.GRID
    reads_reservoirs = True  # the results pages' per-simulation distributions

    #: Whether every method's trials fit trees (the pMSE metric), or only the pMSE mechanism's.
    every_method_fits_trees: ClassVar[bool] = False

    def plan(self, params: UtilityParams) -> list[PrivacyEvent]:
        return planned_events(params)

    def warm_up(self, params: UtilityParams) -> None:
        if self.every_method_fits_trees or params.variant.name == "pmse_mechanism":
            from privlab.mechanisms.pmse.propensity import warm_up  # numba: compiles (or loads) the trees once

            warm_up(params.tree)  # type: ignore[arg-type]

    def cost_class(self, params: UtilityParams) -> str:
        """The method family, and for the pMSE mechanism its depth: a simulation of the mechanism
        runs a Metropolis chain of CART fits (seconds, more for deeper trees), the other methods
        a closed form or one histogram (milliseconds)."""
        variant = params.variant
        return f"{variant.family} {variant.setting}" if variant.name == "pmse_mechanism" else variant.family


@register_workload
class PMSEComparison(_UtilityWorkload):
    """Table 2 / Figure 3: the pMSE of the released synthetic datasets.

    Metrics (per simulation): ``pmse`` — the mean pMSE over the released datasets with the
    cp = 0.01 tree; ``pmse_single`` — the pMSE of the first released dataset alone (its
    variance is the per-dataset variance); ``pmse_cp0001`` and ``pmse_cp0001_single`` — the
    same with the cp = 0.001 tree. The smooth histogram releases one dataset, so its two
    versions coincide.
    """

    name = "pmse_comparison"
    Params = ComparisonParams
    every_method_fits_trees = True  # the pMSE metric
    metrics = {
        "pmse": MetricKind.VALUE,
        "pmse_single": MetricKind.VALUE,
        "pmse_cp0001": MetricKind.VALUE,
        "pmse_cp0001_single": MetricKind.VALUE,
    }

    def run_trial(self, params: ComparisonParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        private = params.draw_private(source.rng)
        released = release(params, private, ledger=ledger, source=source)
        from privlab.mechanisms.pmse.propensity import pmse_configurations  # numba: only where trees are fitted

        tree = params.tree
        scores = np.array([pmse_configurations(private, synthetic, METRIC_TREES, tree=tree)  # type: ignore[arg-type]
                           for synthetic in released.datasets])
        return {
            "pmse": float(scores[:, 0].mean()),
            "pmse_single": float(scores[0, 0]),
            "pmse_cp0001": float(scores[:, 1].mean()),
            "pmse_cp0001_single": float(scores[0, 1]),
        }

    def report(self, results: StudyResults) -> dict[str, str | bytes]:
        from privlab.mechanisms.pmse.reports_utility import comparison_report

        return comparison_report(results)


@register_workload
class PMSERegression(_UtilityWorkload):
    """Section 6, Figures 2 and 4: ``|β̂ − β̂priv|`` for the intercept and slope of X₂ on X₁."""

    name = "pmse_regression"
    Params = RegressionParams
    metrics = {"intercept_error": MetricKind.VALUE, "slope_error": MetricKind.VALUE}

    def run_trial(self, params: RegressionParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        private = params.draw_private(source.rng)
        released = release(params, private, ledger=ledger, source=source)
        if released.coefficients is not None:
            estimate = released.coefficients
        else:
            estimate = np.mean([ols(synthetic) for synthetic in released.datasets], axis=0)
        error = np.abs(ols(private) - estimate)
        return {"intercept_error": float(error[0]), "slope_error": float(error[1])}

    def report(self, results: StudyResults) -> dict[str, str | bytes]:
        from privlab.mechanisms.pmse.reports_utility import regression_report

        return regression_report(results)
