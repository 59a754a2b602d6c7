"""The Laplace mechanism, with a floating-point-safe path for releases.

Research mode adds ``Lap(Δ/ε)`` noise from the run's seeded stream. Release mode snaps the
statistic to the lattice ``2**k`` and adds discrete-Laplace noise on the same lattice drawn
from the OS CSPRNG (:mod:`privlab.platform.dp.secure_sampling`), so the sum is exact in float64
and Mironov's floating-point attack does not apply; the snapping slack is paid for by using
``(Δ + d·2**k)/ε`` as the scale for a ``d``-coordinate statistic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from privlab.platform.core.validation import check_positive_finite
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource
from privlab.platform.dp.secure_sampling import release_laplace_parameters, snap_to_lattice


def release_parameters(sensitivity: float, epsilon: float, dimension: int) -> tuple[float, int]:
    """``(scale, k)`` for a ``dimension``-coordinate release on the lattice ``2**k``.

    Snapping moves each coordinate by at most ``2**(k-1)``, so the snapped statistic's L1
    sensitivity is at most ``Δ + dimension·2**k``; :func:`release_laplace_parameters` already
    adds one ``2**k``, and this adds the other ``dimension − 1`` until ``k`` is stable.

    Raises:
        ValueError: ``k`` does not settle: ε is too small for ``dimension`` (roughly
            ``ε ≤ dimension·2**-29``), so no consistent ``(scale, k)`` exists.
    """
    _, k = release_laplace_parameters(sensitivity, epsilon)
    for _ in range(64):  # k only grows; it settles in a few steps unless ε is too small for d
        # Δ + (d − 1)·2**k, rounded *up* to a float: a float sum could round down.
        exact = Fraction(sensitivity) + (dimension - 1) * Fraction(2) ** k
        padded = float(exact)
        if Fraction(padded) < exact:
            padded = math.nextafter(padded, math.inf)
        new_scale, new_k = release_laplace_parameters(padded, epsilon)
        if new_k == k:
            return new_scale, k
        k = new_k
    raise ValueError(
        f"epsilon ({epsilon!r}) is too small for a lattice release of {dimension} coordinates: "
        "the snapping slack d·2**k outgrows the scale; raise epsilon or release fewer coordinates"
    )


def laplace_mechanism(
    value: float | np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    source: RandomSource,
    ledger: Ledger,
    name: str,
    scope: str = "data",
    step: str = "",
) -> float | np.ndarray:
    """Release ``value + Lap(Δ/ε)`` (coordinate-wise for arrays) and record it in ``ledger``.

    Args:
        value: The exact statistic (scalar or array) computed on the data.
        sensitivity: Its global L1 sensitivity Δ under the caller's neighbouring relation
            (the caller derives it from public bounds, never from the data).
        epsilon: The privacy budget of this step.
        source: The run's random source (seeded in research mode, CSPRNG in release mode).
        ledger: Charged *before* any noise is drawn; raises if the budget would be exceeded.
        name, scope, step: Recorded in the ledger.

    Returns:
        The noisy statistic, same shape as ``value``.

    Raises:
        BudgetExceededError: The step would exceed the ledger's cap (nothing is drawn).
        TypeError: ``sensitivity`` or ``epsilon`` is not a real number.
        ValueError: ``sensitivity`` or ``epsilon`` not positive and finite, or a non-finite value.

    Privacy:
        ε-DP for a statistic with L1 sensitivity Δ: the density ratio of ``Lap(Δ/ε)`` shifted
        by at most Δ (in L1) is at most ``exp(ε)``. In release mode the scale is
        ``(Δ + d·2**k)/ε`` on the snapped statistic (see module docstring), so the guarantee
        holds for the values actually computed in floating point.

    References:
        Dwork, McSherry, Nissim & Smith (2006); Mironov (2012) for the lattice construction.
    """
    sensitivity = check_positive_finite("sensitivity", sensitivity)
    epsilon = check_positive_finite("epsilon", epsilon)
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: the statistic has non-finite values; check the data and bounds")
    if source.mode == "release":
        scale, k = release_parameters(sensitivity, epsilon, max(array.size, 1))
        ledger.charge(name=name, mechanism="laplace_lattice", epsilon=epsilon, sensitivity=sensitivity,
                      noise_scale=scale, scope=scope, step=step, details=(("lattice_exponent", float(k)),))
        snapped = np.vectorize(lambda v: snap_to_lattice(float(v), k), otypes=[np.float64])(array)
        noise = np.asarray(source.laplace(scale=scale, size=array.shape), dtype=np.float64)
        result = snapped + noise
    else:
        scale = sensitivity / epsilon
        ledger.charge(name=name, mechanism="laplace", epsilon=epsilon, sensitivity=sensitivity,
                      noise_scale=scale, scope=scope, step=step)
        result = array + np.asarray(source.laplace(scale=scale, size=array.shape), dtype=np.float64)
    return float(result) if np.ndim(value) == 0 else result
