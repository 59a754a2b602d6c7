"""The Gaussian mechanism under zero-concentrated DP, with an exact path for releases.

Research mode adds continuous ``N(0, σ²)`` noise from the run's seeded stream. Release mode adds
the discrete Gaussian with parameter σ drawn exactly from the OS CSPRNG
(:func:`~privlab.platform.dp.secure_sampling.discrete_gaussian`), each draw written to the
transcript, to an integer-valued statistic (counts): the sum is an exact integer, so no
floating-point attack applies and a replay reproduces it bit for bit.

Privacy:
    For a statistic ``f`` with ℓ2 sensitivity ``Δ = max ‖f(D) − f(D')‖₂`` over neighbours,
    ``f(D) + N(0, σ² I)`` is ``Δ²/(2σ²)``-zCDP (Bun & Steinke 2016, Proposition 1.6), and so is
    ``f(D) + N_Z(0, σ²)^d`` for integer-valued ``f`` (Canonne, Kamath & Steinke 2020,
    Theorem 14: the Rényi divergence of two shifted discrete Gaussians is at most that of the
    continuous ones). Given ρ we use ``σ = Δ/sqrt(2ρ)``. Both are recorded as a
    :class:`~privlab.platform.dp.dp_events.GaussianEvent` (Δ, σ): the zcdp accountant's ρ is the
    same for both; the discrete one is named ``"discrete_gaussian"`` in the ledger.

References:
    Bun & Steinke (2016), "Concentrated Differential Privacy: Simplifications, Extensions, and
    Lower Bounds", TCC; Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for
    Differential Privacy", NeurIPS.
"""

from __future__ import annotations

import math

import numpy as np

from privlab.platform.core.validation import check_positive_finite
from privlab.platform.dp.dp_events import GaussianEvent
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["gaussian_mechanism", "gaussian_sigma"]


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """``σ = Δ/sqrt(2ρ)``: the standard deviation that makes an ℓ2-sensitivity-Δ release ρ-zCDP."""
    return check_positive_finite("sensitivity", sensitivity) / math.sqrt(2.0 * check_positive_finite("rho", rho))


def gaussian_mechanism(
    value: np.ndarray,
    *,
    sensitivity: float,
    rho: float,
    source: RandomSource,
    ledger: Ledger,
    name: str,
    scope: str = "data",
    step: str = "",
) -> np.ndarray:
    """Release ``value + N(0, σ²)`` per coordinate with ``σ = Δ/sqrt(2ρ)`` and record it.

    Args:
        value: The exact statistic (an array); integer-valued in release mode (counts).
        sensitivity: Its ℓ2 sensitivity Δ under the ledger's neighbouring relation, from public
            facts only (a count vector: √2 under replace-one, 1 under add/remove-one).
        rho: The step's ρ (zCDP), > 0.
        source: The run's random source (seeded: continuous Gaussian; release: discrete).
        ledger: Charged *before* any noise is drawn.
        name, scope, step: Recorded in the ledger.

    Returns:
        The noisy statistic, float64, same shape as ``value``.

    Raises:
        BudgetExceededError: the step would exceed the ledger's cap (nothing is drawn).
        LedgerError: the ledger's accountant cannot account for Gaussian noise (basic, advanced).
        ValueError: a bad Δ or ρ, a non-finite statistic, or a non-integer one in release mode.

    Privacy:
        ρ-zCDP (module docstring).
    """
    sigma = gaussian_sigma(sensitivity, rho)
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: the statistic has non-finite values; check the data")
    release = source.mode == "release"
    if release and not np.all(array == np.round(array)):
        raise ValueError(f"{name}: release-mode Gaussian noise is discrete; the statistic must be integer counts")
    ledger.spend(PrivacyEvent.from_dp_event(
        GaussianEvent(float(sensitivity), sigma), name=name, mechanism="discrete_gaussian" if release else "gaussian",
        scope=scope, step=step, sensitivity=float(sensitivity), noise_scale=sigma))
    noise = np.asarray(source.gaussian(sigma=sigma, size=array.shape), dtype=np.float64)
    return array + noise
