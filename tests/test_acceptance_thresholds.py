"""The pass/fail decision of every acceptance criterion, on both sides of its threshold.

Hod & Canetti (2024), Definition 3: a criterion ``(E, T)`` is met when ``E(R, S) < T`` — lower
is better, and the inequality is *strict*; the DP variant compares the released (noisy) value
with ``T`` in the same way (Section 4.5). Each test below builds ``R`` and ``S`` by hand so that
the exact measure ``E`` is known, draws the Laplace noise from a source that returns a chosen
constant (so the released value lands exactly where the test wants it: well below, just below,
exactly at, just above and well above ``T``), and checks ``passed`` against Definition 3.

The cases are chosen so that each plausible slip in a comparison fails at least one of them:
a scaled threshold (``noisy < 2T`` or ``noisy < T/2``) fails "just above"/"well above" or
"just below"; a reversed comparison fails "well below"; ``<=`` fails "exactly at T".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.acceptance.base import CriterionResult
from privlab.mechanisms.acceptance.conditional_means import ConditionalMeanError
from privlab.mechanisms.acceptance.faithfulness import FaithfulnessCriterion
from privlab.mechanisms.acceptance.linear_fit import PrivateLinearFit
from privlab.mechanisms.acceptance.marginals import MarginalsAbsoluteError, MarginalsRelativeError
from privlab.mechanisms.acceptance.regression import RegressionCoefficientsError, RegressionMAEError
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

# released value / threshold, and whether Definition 3 says the candidate passes
POSITIONS: list[tuple[str, float, bool]] = [
    ("well_below", 0.5, True),
    ("just_below", 1 - 2**-20, True),
    ("at", 1.0, False),  # E < T is strict (Definition 3)
    ("just_above", 1 + 2**-20, False),
    ("well_above", 1.5, False),
]
POSITION_IDS = [p[0] for p in POSITIONS]


class FixedNoiseSource(SeededSource):
    """A research source whose Laplace "noise" is a constant chosen by the test.

    Everything else (``generator`` for the conditional-means resize order) is the seeded
    stream. The requested scales are recorded so the tests can check them against the
    hand-derived ``Δ/ε``.
    """

    def __init__(self, noise: float, seed: int = 0) -> None:
        super().__init__(np.random.default_rng(seed))
        self.noise = float(noise)
        self.scales: list[float] = []

    def _draw_laplace(self, scale: float, shape: Any) -> Any:
        self.scales.append(scale)
        return self.noise if shape is None else np.full(shape, self.noise)


def noise_to_reach(value: float, target: float) -> float:
    """A noise ``c`` with ``value + c == target`` exactly in float64."""
    c = target - value
    for _ in range(8):
        if value + c == target:
            return c
        c = math.nextafter(c, math.inf if value + c < target else -math.inf)
    raise AssertionError(f"no float c with {value!r} + c == {target!r}")


def check_decision(result: CriterionResult, *, threshold: float, ratio: float, expected: bool) -> None:
    target = threshold * ratio
    assert result.threshold == threshold
    assert result.dp_value == target, f"released {result.dp_value!r}, wanted {target!r}"
    assert result.passed is expected, (
        f"released value {result.dp_value!r} vs threshold {threshold!r} (ratio {ratio}): passed={result.passed}, "
        f"but Definition 3 (E < T) says {expected}"
    )


# --- marginals_absolute -------------------------------------------------------------------------

ABC = Domain.from_columns([
    ColumnDomain(name="a", labels=("a0", "a1")),
    ColumnDomain(name="b", labels=("b0", "b1", "b2")),
    ColumnDomain(name="c", labels=("c0", "c1", "c2", "c3")),
])


def _rows(*groups: tuple[int, tuple[int, ...]], names: tuple[str, ...] = ("a", "b", "c")) -> pd.DataFrame:
    return pd.DataFrame([dict(zip(names, codes, strict=True)) for count, codes in groups for _ in range(count)])


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_marginals_absolute_decision(position: str, ratio: float, expected: bool) -> None:
    # S: 8 × (0,0,0); R: 6 × (0,0,0) + 2 × (1,1,1). Every marginal cell differs by 0 or 2: E = 2/8.
    s = _rows((8, (0, 0, 0)))
    r = _rows((6, (0, 0, 0)), (2, (1, 1, 1)))
    exact, threshold, epsilon = 0.25, 0.5, 0.5
    source = FixedNoiseSource(noise_to_reach(exact, threshold * ratio))
    criterion = MarginalsAbsoluteError(name="abs", threshold=threshold, epsilon=epsilon)
    result = criterion.release(r, s, domain=ABC, source=source, ledger=Ledger(epsilon_cap=None))
    assert result.true_value == exact
    assert source.scales == [(1 / 8) / epsilon]  # Δ = 1/n (Section 4.5.2, Proposition 3)
    check_decision(result, threshold=threshold, ratio=ratio, expected=expected)


# --- marginals_relative -------------------------------------------------------------------------

REL_S = _rows((4, (0, 0, 0)), (4, (1, 1, 1)))
REL_R = _rows((5, (0, 0, 0)), (3, (1, 1, 1)))
# add-one counts: a0 6/5, a1 4/5 → max ratio 5/4 (same for b and c); absent codes give 1. E = 1.25.
REL_EXACT = 1.25


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_marginals_relative_decision(position: str, ratio: float, expected: bool) -> None:
    threshold, epsilon = 1.5, 0.3
    # Only the measure is clipped to [1, λ]; the released (noisy) value may leave it (well_above: 2.25).
    source = FixedNoiseSource(noise_to_reach(REL_EXACT, threshold * ratio))
    criterion = MarginalsRelativeError(name="rel", threshold=threshold, epsilon=epsilon, ratio_clip=2.0)
    result = criterion.release(REL_R, REL_S, domain=ABC, source=source, ledger=Ledger(epsilon_cap=None))
    assert result.true_value == REL_EXACT
    # Proposition 5 with s_min = 0 (b2, c2, c3 never occur in S): max{1, λ − 1/(1/λ + 1)} = 4/3.
    assert source.scales == [pytest.approx((4 / 3) / epsilon, rel=1e-12)]
    check_decision(result, threshold=threshold, ratio=ratio, expected=expected)


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_marginals_relative_decision_against_the_adjusted_threshold(
    position: str, ratio: float, expected: bool
) -> None:
    # Proposition 6: with p set, the threshold used is min(T, λ + η ln 2p), η = Δ/ε.
    epsilon, p, lam = 100.0, 0.05, 2.0
    eta = (4 / 3) / epsilon
    used = lam + eta * math.log(2 * p)
    assert 1.25 < used < 2.0  # the adjusted threshold is the binding one, above the exact measure
    criterion = MarginalsRelativeError(name="rel", threshold=2.0, epsilon=epsilon, ratio_clip=lam,
                                       false_positive_rate=p)

    def release(noise: float) -> CriterionResult:
        return criterion.release(REL_R, REL_S, domain=ABC, source=FixedNoiseSource(noise),
                                 ledger=Ledger(epsilon_cap=None))

    reported = release(0.0).threshold  # public: depends on λ, p and the noise scale only
    assert reported == pytest.approx(used, rel=1e-12)
    result = release(noise_to_reach(REL_EXACT, reported * ratio))
    check_decision(result, threshold=reported, ratio=ratio, expected=expected)


# --- conditional means --------------------------------------------------------------------------

CM = Domain.from_columns([
    ColumnDomain(name="w", labels=("w0", "w1", "w2"), values=(1.0, 2.0, 4.0)),
    ColumnDomain(name="g", labels=("g0", "g1")),
])


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_conditional_means_decision(position: str, ratio: float, expected: bool) -> None:
    # The target is constant within R (4.0) and within S (2.0), so every (resized) group mean
    # differs by exactly 2 whatever the resize order: Ê = E = 2.
    s = _rows((4, (1, 0)), (4, (1, 1)), names=("w", "g"))
    r = _rows((4, (2, 0)), (4, (2, 1)), names=("w", "g"))
    exact, threshold, epsilon = 2.0, 3.0, 0.5
    source = FixedNoiseSource(noise_to_reach(exact, threshold * ratio), seed=3)
    criterion = ConditionalMeanError(name="cm", threshold=threshold, epsilon=epsilon, target="w",
                                     target_bounds=(0.0, 5.0), by=["g"], resize_margin=0.05)
    result = criterion.release(r, s, domain=CM, source=source, ledger=Ledger(epsilon_cap=None))
    assert result.true_value == exact
    # Proposition 7: Δ = (U − L)/min m̂ with m̂ = max{1, ⌊4 − 0.05·8⌋} = 3 (the overall term has m̂ = n).
    assert source.scales == [pytest.approx((5.0 / 3) / epsilon, rel=1e-12)]
    check_decision(result, threshold=threshold, ratio=ratio, expected=expected)


# --- regression ---------------------------------------------------------------------------------

REG = Domain.from_columns([
    ColumnDomain(name="x", labels=("0", "1", "2", "3"), values=(0.0, 1.0, 2.0, 3.0)),
    ColumnDomain(name="y", labels=("100", "200", "300", "400"), values=(100.0, 200.0, 300.0, 400.0)),
])
REG_COLUMNS: dict[str, Any] = {"response": "y", "covariates": ["x"], "response_bounds": (100.0, 400.0)}
# S: y = 300 for every x, so its OLS fit is exactly (300, 0); R: y = 200 everywhere.
REG_S = _rows((2, (0, 2)), (2, (1, 2)), (2, (2, 2)), (2, (3, 2)), names=("x", "y"))
REG_R = _rows((2, (0, 1)), (2, (1, 1)), (2, (2, 1)), (2, (3, 1)), names=("x", "y"))


def _fit(coefficients: tuple[float, ...], epsilon: float) -> PrivateLinearFit:
    return PrivateLinearFit(response="y", covariates=("x",), coefficients=coefficients, epsilon=epsilon,
                            sensitivity=18.0, noise_scale=18.0 / epsilon, mechanism="functional_mechanism/laplace")


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_regression_coefficients_decision(position: str, ratio: float, expected: bool) -> None:
    # A DP fit (310, 0) against w(S) = (300, 0): the standardised intercepts differ by 10 and the
    # slopes agree, so the l1 distance (the released value; no extra noise) is exactly 10. The
    # threshold moves instead of the value.
    distance = 10.0
    threshold = distance / ratio
    criterion = RegressionCoefficientsError(name="coef", threshold=threshold, epsilon=0.5, **REG_COLUMNS)
    result = criterion.release(REG_R, REG_S, domain=REG, source=FixedNoiseSource(0.0),
                               ledger=Ledger(epsilon_cap=None), fit=_fit((310.0, 0.0), 0.5))
    assert result.dp_value == distance
    assert result.threshold == threshold
    assert result.passed is (distance < threshold) is expected, (
        f"distance {distance} vs threshold {threshold}: passed={result.passed}, Definition 3 says {expected}"
    )


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_regression_mae_decision(position: str, ratio: float, expected: bool) -> None:
    # w(S) = (300, 0) predicts 300 for records with y = 200: MAE_R = 100; the DP fit (250, 0)
    # has MAE_R = 50, so E_lr-mae = 50.
    exact, threshold, epsilon = 50.0, 60.0, 0.04
    source = FixedNoiseSource(noise_to_reach(exact, threshold * ratio))
    criterion = RegressionMAEError(name="mae", threshold=threshold, epsilon=epsilon, **REG_COLUMNS)
    result = criterion.release(REG_R, REG_S, domain=REG, source=source, ledger=Ledger(epsilon_cap=None),
                               fit=_fit((250.0, 0.0), 0.5))
    assert result.true_value == exact
    # Proposition 9 (corrected, Section 4.14.2): Δ = 2(U − L)/n = 2·300/8 = 75.
    assert source.scales == [pytest.approx(75.0 / epsilon, rel=1e-12)]
    check_decision(result, threshold=threshold, ratio=ratio, expected=expected)


# --- faithfulness -------------------------------------------------------------------------------

FF = Domain.from_columns([
    ColumnDomain(name="g", labels=("x", "y")),
    ColumnDomain(name="a", labels=("0", "1", "2"), values=(0.0, 1.0, 2.0)),
])


@pytest.mark.parametrize(("position", "ratio", "expected"), POSITIONS, ids=POSITION_IDS)
def test_faithfulness_decision(position: str, ratio: float, expected: bool) -> None:
    # S: 8 × (x, 0); R: 6 × (x, 1) (one bin away: matches) + 2 × (y, 0) (exact column differs:
    # matches nothing). The maximum matching leaves 2 of 8 unmatched: E_ff = 0.25.
    s = _rows((8, (0, 0)), names=("g", "a"))
    r = _rows((6, (0, 1)), (2, (1, 0)), names=("g", "a"))
    exact, threshold, epsilon = 0.25, 0.5, 0.01
    source = FixedNoiseSource(noise_to_reach(exact, threshold * ratio))
    criterion = FaithfulnessCriterion(name="ff", threshold=threshold, epsilon=epsilon, exact=["g"],
                                      within_one_bin=["a"])
    result = criterion.release(r, s, domain=FF, source=source, ledger=Ledger(epsilon_cap=None))
    assert result.true_value == exact
    assert source.scales == [(1 / 8) / epsilon]  # Proposition 10: Δ = 1/n
    check_decision(result, threshold=threshold, ratio=ratio, expected=expected)


def test_a_faithful_candidate_passes_at_the_paper_threshold() -> None:
    """The paper's T = 0.05 with a candidate that matches every record (E_ff = 0) and a small
    noise draw: passed=True (no faithfulness test produced a pass before)."""
    s = _rows((8, (0, 0)), names=("g", "a"))
    r = _rows((8, (0, 1)), names=("g", "a"))
    criterion = FaithfulnessCriterion(name="ff", threshold=0.05, epsilon=0.01, exact=["g"], within_one_bin=["a"])
    result = criterion.release(r, s, domain=FF, source=FixedNoiseSource(0.04), ledger=Ledger(epsilon_cap=None))
    assert result.true_value == 0.0 and result.dp_value == 0.04 and result.passed is True
    result = criterion.release(r, s, domain=FF, source=FixedNoiseSource(0.06), ledger=Ledger(epsilon_cap=None))
    assert result.dp_value == 0.06 and result.passed is False
