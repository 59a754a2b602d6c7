"""The quickstart studies: empirical checks of the Laplace and exponential mechanisms.

They are small but real, and together exercise all three execution patterns and the ledger:

* ``laplace_mean`` (grid): error of an ε-DP mean against the Laplace law it must follow;
* ``exponential_median`` (grid): rank error of an exponential-mechanism median against the
  mechanism's utility guarantee;
* ``laplace_privacy_loss`` (trials): the privacy loss of the Laplace mechanism on two
  neighbouring datasets, estimated from many trials, against ε.

(The actor-pool pattern's study is plausible deniability's ``pd_generation``, in
``mechanisms/plausible_deniability/workloads.py``.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.basic.exponential import exponential_mechanism
from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import MAX_RECORDS, ConstrainedParams, Interval
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import (
    Expectation,
    MetricKind,
    Pattern,
    Workload,
    register_workload,
)


POSITIVE = [Interval(Real, 0, None, closed="neither")]
FINITE = [Interval(Real, None, None, closed="neither")]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoundedDataParams(ConstrainedParams):
    """Shared by the grid studies: n records of Beta(a, b) scaled to public [lower, upper]."""

    epsilon: float
    n: int
    lower: float = 0.0
    upper: float = 1.0
    beta_a: float = 2.0
    beta_b: float = 5.0

    _parameter_constraints: ClassVar = {"epsilon": POSITIVE, "n": [Interval(Integral, 2, MAX_RECORDS, closed="both")],
                                        "lower": FINITE, "upper": FINITE, "beta_a": POSITIVE, "beta_b": POSITIVE}

    def _check_together(self) -> None:
        if not self.upper > self.lower:
            raise SpecError(f"upper ({self.upper!r}) must be greater than lower ({self.lower!r})")

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        return self.lower + (self.upper - self.lower) * rng.beta(self.beta_a, self.beta_b, size=self.n)


@register_workload
class LaplaceMean(Workload):
    """ε-DP mean of n bounded values; compares |error| with the Laplace scale b = (U−L)/(nε)."""

    name = "laplace_mean"
    pattern = Pattern.GRID
    Params = BoundedDataParams
    metrics = {
        "abs_error": MetricKind.VALUE,
        "error_over_scale": MetricKind.VALUE,  # |noise| / b: E = 1 for Laplace
        "within_scale": MetricKind.RATE,  # P(|noise| ≤ b) = 1 − e⁻¹ ≈ 0.632
    }
    derived_metrics = ("theoretical_abs_error",)

    @staticmethod
    def sensitivity(params: BoundedDataParams) -> float:
        """Replace-one neighbours with public n: one value moves by at most U − L."""
        return (params.upper - params.lower) / params.n

    def plan(self, params: BoundedDataParams) -> list[PrivacyEvent]:
        s = self.sensitivity(params)
        return [PrivacyEvent(name="dp_mean", mechanism="laplace", epsilon=params.epsilon, sensitivity=s,
                             noise_scale=s / params.epsilon, scope="data", step="laplace_mean")]

    def run_trial(self, params: BoundedDataParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        values = np.clip(params.draw(source.rng), params.lower, params.upper)
        exact = float(values.mean())
        noisy = laplace_mechanism(exact, sensitivity=self.sensitivity(params), epsilon=params.epsilon,
                                  source=source, ledger=ledger, name="dp_mean", step="laplace_mean")
        scale = self.sensitivity(params) / params.epsilon
        error = abs(float(noisy) - exact)
        return {"abs_error": error, "error_over_scale": error / scale, "within_scale": float(error <= scale)}

    def derive(self, params: BoundedDataParams, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        return {"theoretical_abs_error": self.sensitivity(params) / params.epsilon}

    def expectations(self, params: BoundedDataParams) -> dict[str, Expectation]:
        """|Lap(b)|/b is Exp(1): mean 1, and P(|noise| ≤ b) = 1 − e⁻¹."""
        return {"error_over_scale": Expectation(1.0), "within_scale": Expectation(1.0 - math.exp(-1.0))}


@dataclasses.dataclass(frozen=True, kw_only=True)
class MedianParams(BoundedDataParams):
    candidates: int = 101

    _parameter_constraints: ClassVar = {**BoundedDataParams._parameter_constraints,
                                        "candidates": [Interval(Integral, 2, MAX_RECORDS, closed="both")]}


@register_workload
class ExponentialMedian(Workload):
    """ε-DP median by the exponential mechanism over an evenly spaced public candidate grid.

    Utility u(c) = −|#{x ≤ c} − n/2|, sensitivity 1 under replace-one neighbours. The
    mechanism's guarantee: P[u(out) ≤ OPT − 2Δ(ln m + t)/ε] ≤ e⁻ᵗ; with t = ln 20 the rank
    error exceeds (OPT gap + 2(ln m + ln 20)/ε)/n with probability ≤ 5%.
    """

    name = "exponential_median"
    pattern = Pattern.GRID
    Params = MedianParams
    metrics = {
        "rank_error": MetricKind.VALUE,  # |rank(out) − n/2| / n
        "within_bound": MetricKind.RATE,  # utility within the 95% guarantee of OPT
    }
    derived_metrics = ("rank_error_bound_95",)

    def plan(self, params: MedianParams) -> list[PrivacyEvent]:
        return [PrivacyEvent(name="dp_median", mechanism="exponential", epsilon=params.epsilon, sensitivity=1.0,
                             noise_scale=2.0 / params.epsilon, scope="data", step="exponential_median")]

    @staticmethod
    def bound(params: MedianParams) -> float:
        return 2.0 * (math.log(params.candidates) + math.log(20.0)) / params.epsilon

    def run_trial(self, params: MedianParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        values = np.sort(params.draw(source.rng))
        grid = np.linspace(params.lower, params.upper, params.candidates)
        ranks = np.searchsorted(values, grid, side="right")
        utilities = -np.abs(ranks - params.n / 2)
        chosen = exponential_mechanism(utilities, sensitivity=1.0, epsilon=params.epsilon, source=source,
                                       ledger=ledger, name="dp_median", step="exponential_median")
        gap = float(utilities.max() - utilities[chosen])
        return {"rank_error": -float(utilities[chosen]) / params.n, "within_bound": float(gap <= self.bound(params))}

    def derive(self, params: MedianParams, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        return {"rank_error_bound_95": self.bound(params) / params.n}

    def expectations(self, params: MedianParams) -> dict[str, Expectation]:
        """The utility guarantee with t = ln 20 holds with probability at least 95%."""
        return {"within_bound": Expectation(0.95, ">=")}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyLossParams(ConstrainedParams):
    epsilon: float
    sensitivity: float = 1.0

    _parameter_constraints: ClassVar = {"epsilon": POSITIVE, "sensitivity": POSITIVE}


@register_workload
class LaplacePrivacyLoss(Workload):
    """Empirical privacy loss of the Laplace mechanism on neighbouring counts q(D)=0, q(D')=Δ.

    Each trial releases M(D) = Lap(b) and M(D') = Δ + Lap(b) with b = Δ/ε and records

    * the indicator of the tight event S = {o ≥ Δ}: P_D'(S) = 1/2 and P_D(S) = e^{−ε}/2, so
      ln(P_D'(S)/P_D(S)) = ε exactly (``empirical_epsilon``), with a conservative upper
      confidence bound from the Wilson intervals (``empirical_epsilon_upper``);
    * the realised privacy loss L(o) = ln(p_D(o)/p_D'(o)) for o ~ M(D), which must satisfy
      |L| ≤ ε always and E[L] = KL(M(D)‖M(D')) = ε + e^{−ε} − 1 (``expected_privacy_loss``).

    The ledger charges the release on D; the draw on D' is the neighbouring world's release
    (a different dataset), simulated only to estimate the loss.
    """

    name = "laplace_privacy_loss"
    pattern = Pattern.TRIALS
    Params = PrivacyLossParams
    metrics = {
        "in_event_d": MetricKind.RATE,
        "in_event_d_prime": MetricKind.RATE,
        "privacy_loss": MetricKind.VALUE,
    }
    derived_metrics = ("empirical_epsilon", "empirical_epsilon_upper", "expected_privacy_loss")

    def plan(self, params: PrivacyLossParams) -> list[PrivacyEvent]:
        return [PrivacyEvent(name="count_release", mechanism="laplace", epsilon=params.epsilon,
                             sensitivity=params.sensitivity, noise_scale=params.sensitivity / params.epsilon,
                             scope="data", step="laplace_privacy_loss")]

    def run_trial(self, params: PrivacyLossParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        delta = params.sensitivity
        on_d = laplace_mechanism(0.0, sensitivity=delta, epsilon=params.epsilon, source=source, ledger=ledger,
                                 name="count_release", step="laplace_privacy_loss")
        neighbour_ledger = Ledger(epsilon_cap=None)
        on_d_prime = laplace_mechanism(delta, sensitivity=delta, epsilon=params.epsilon, source=source,
                                       ledger=neighbour_ledger, name="count_release", scope="neighbour",
                                       step="laplace_privacy_loss")
        loss = params.epsilon * (abs(on_d - delta) - abs(on_d)) / delta
        return {"in_event_d": float(on_d >= delta), "in_event_d_prime": float(on_d_prime >= delta),
                "privacy_loss": loss}

    def derive(self, params: PrivacyLossParams, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        d, d_prime = summary["in_event_d"], summary["in_event_d_prime"]
        estimate = math.log(d_prime["rate"] / d["rate"]) if d["rate"] > 0 else math.inf
        upper = math.log(d_prime["ci_high"] / d["ci_low"]) if d["ci_low"] > 0 else math.inf
        return {"empirical_epsilon": estimate, "empirical_epsilon_upper": upper,
                "expected_privacy_loss": params.epsilon + math.exp(-params.epsilon) - 1}

    def expectations(self, params: PrivacyLossParams) -> dict[str, Expectation]:
        """P_D(S) = e^{−ε}/2, P_D'(S) = 1/2, and E[L] = KL = ε + e^{−ε} − 1."""
        return {"in_event_d": Expectation(math.exp(-params.epsilon) / 2), "in_event_d_prime": Expectation(0.5),
                "privacy_loss": Expectation(params.epsilon + math.exp(-params.epsilon) - 1)}
