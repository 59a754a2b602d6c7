"""Exact samplers on the OS CSPRNG, with no floating-point arithmetic in the randomness path.

Every random bit comes from Python's ``secrets`` module (the operating system's CSPRNG) and
every probability is an exact rational (``fractions.Fraction`` or a pair of ints), so each
sampler outputs *exactly* the distribution it documents. This is what a release run needs:
textbook floating-point Laplace samplers leak through the gaps and rounding of float64
(Mironov 2012), and seeded PRNGs are predictable.

Real-valued Laplace noise is drawn on a lattice (the approach OpenDP takes for float Laplace):
the statistic is snapped to the grid ``2**k * Z`` and integer discrete-Laplace noise times
``2**k`` is added. Both terms are exact float64 values on the same grid, so their sum is exact
and the released value has exactly the discrete Laplace distribution around the snapped
statistic. Use :func:`release_laplace_parameters` to obtain a (scale, k) pair that accounts for
the snapping.

References:
    Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy",
    NeurIPS: Algorithm 1 (Bernoulli(exp(-gamma))) and Algorithm 2 (discrete Laplace).
    Mironov (2012), "On Significance of the Least Significant Bits for Differential Privacy",
    CCS (the floating-point attack and the snapping defence).
"""

from __future__ import annotations

import math
import numbers
import operator
import secrets
from fractions import Fraction

from privlab.platform.core.validation import check_positive_finite

#: Lattice resolution: the noise grid 2**k is 2**-30 (about 1e-9) of the scale, or finer.
LATTICE_BITS = 30
#: Largest scale / 2**k accepted by :func:`laplace_on_lattice`. A draw then exceeds 2**53
#: grid steps (where float64 stops being exact) with probability below exp(-2**13).
MAX_LATTICE_RATIO = 2**40
_MIN_EXPONENT = -1074  # the float64 subnormal grid


def _rational(name: str, value: object) -> Fraction:
    """``value`` as an exact Fraction; floats are refused so that no rounding slips in."""
    if isinstance(value, bool) or not isinstance(value, numbers.Rational):
        raise TypeError(
            f"{name} ({value!r}) must be an int or fractions.Fraction "
            "(wrap a float in Fraction(x) to convert it exactly)"
        )
    return Fraction(value)


def _integer(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} ({value!r}) must be an int, not a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} ({value!r}) must be an int") from None


def _pow2(k: int) -> Fraction:
    return Fraction(2**k) if k >= 0 else Fraction(1, 2**-k)


# --- integer-only cores (the hot path; no Fraction objects are created here) ---------------


def _bernoulli_exp_neg_unit(num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num/den <= 1 (CKS 2020, Algorithm 1, gamma <= 1)."""
    k = 1
    while secrets.randbelow(den * k) < num:  # A_k ~ Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def _bernoulli_exp_neg_one() -> bool:
    """Bernoulli(exp(-1)): the unit case with gamma = 1, where A_1 = 1 always."""
    k = 2
    while secrets.randbelow(k) == 0:  # A_k ~ Bernoulli(1 / k)
        k += 1
    return k % 2 == 1


def _bernoulli_exp_neg(num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for num/den >= 0 (CKS 2020, Algorithm 1)."""
    whole, rest = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_neg_one():
            return False
    return _bernoulli_exp_neg_unit(rest, den)


def _discrete_laplace(t: int, s: int) -> int:
    """Discrete Laplace with scale t/s, i.e. P(x) proportional to exp(-|x| s / t).

    CKS 2020, Algorithm 2: X = U + t V with U uniform on [0, t) accepted with probability
    exp(-U/t) and V geometric via Bernoulli(exp(-1)), is geometric with ratio exp(-1/t);
    Y = floor(X / s) is then geometric with ratio exp(-s/t). A random sign is attached and
    the draw (sign = -, Y = 0) is rejected so that 0 is not counted twice. The expected
    number of loop iterations is bounded by a constant for every t and s.
    """
    while True:
        u = secrets.randbelow(t)
        if not _bernoulli_exp_neg_unit(u, t):
            continue
        v = 0
        while _bernoulli_exp_neg_one():
            v += 1
        y = (u + t * v) // s
        negative = secrets.randbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


# --- public samplers -----------------------------------------------------------------------


def bernoulli_exact(p: Fraction) -> bool:
    """Draw from Bernoulli(p) exactly for a rational ``p``.

    Args:
        p: The success probability, an ``int`` or ``Fraction`` in [0, 1].

    Returns:
        ``True`` with probability exactly ``p``.

    Raises:
        TypeError: If ``p`` is not rational (floats must be wrapped in ``Fraction``).
        ValueError: If ``p`` is outside [0, 1].

    Privacy:
        Not a mechanism by itself. Exact: ``secrets.randbelow(denominator) < numerator``.

    References:
        Canonne, Kamath & Steinke (2020), Section 5.1 (exact Bernoulli sampling).
    """
    q = _rational("p", p)
    if not 0 <= q <= 1:
        raise ValueError(f"p ({p!r}) must be in [0, 1]")
    return secrets.randbelow(q.denominator) < q.numerator


def bernoulli_exp_neg(gamma: Fraction) -> bool:
    """Draw from Bernoulli(exp(-gamma)) exactly for a rational ``gamma >= 0``.

    Args:
        gamma: An ``int`` or ``Fraction``, at least 0.

    Returns:
        ``True`` with probability exactly ``exp(-gamma)``.

    Raises:
        TypeError: If ``gamma`` is not rational.
        ValueError: If ``gamma`` is negative.

    Privacy:
        Not a mechanism by itself; the building block of :func:`discrete_laplace`. Uses only
        integer arithmetic and ``secrets.randbelow``; expected O(1) random draws.

    References:
        Canonne, Kamath & Steinke (2020), Algorithm 1.
    """
    g = _rational("gamma", gamma)
    if g < 0:
        raise ValueError(f"gamma ({gamma!r}) must be >= 0")
    return _bernoulli_exp_neg(g.numerator, g.denominator)


def discrete_laplace(scale: Fraction) -> int:
    """Draw from the discrete Laplace distribution on the integers, exactly.

    ``P(x) = (1 - q) / (1 + q) * q**|x|`` with ``q = exp(-1/scale)``, i.e. ``P(x)`` is
    proportional to ``exp(-|x| / scale)``.

    Args:
        scale: The scale ``t/s``, an ``int`` or ``Fraction`` greater than 0.

    Returns:
        One integer sample.

    Raises:
        TypeError: If ``scale`` is not rational.
        ValueError: If ``scale`` is not positive.

    Privacy:
        Adding ``discrete_laplace(Fraction(Delta) / epsilon)`` to an integer statistic of
        sensitivity ``Delta`` (under the neighbouring relation the caller accounts for) gives
        epsilon-DP exactly; no internal budget split. Running time is O(1) expected for every
        scale: there is no loop over the scale.

    References:
        Canonne, Kamath & Steinke (2020), Algorithm 2 (scale t/s with integers s, t).
    """
    b = _rational("scale", scale)
    if b <= 0:
        raise ValueError(f"scale ({scale!r}) must be > 0")
    return _discrete_laplace(b.numerator, b.denominator)


def discrete_gaussian(sigma_squared: Fraction) -> int:
    """Draw from the discrete Gaussian distribution on the integers, exactly.

    ``P(x) = exp(-x**2 / (2 sigma**2)) / sum_y exp(-y**2 / (2 sigma**2))`` for every integer x.

    Rejection sampling from a discrete Laplace proposal (CKS 2020, Algorithm 3): with
    ``t = floor(sigma) + 1``, draw ``Y`` from the discrete Laplace of scale ``t`` and accept it
    with probability ``exp(-(|Y| - sigma**2/t)**2 / (2 sigma**2))``. The accepted ``Y`` has
    exactly the discrete Gaussian distribution (CKS 2020, Theorem 21; the exponent is a
    non-negative rational, so the Bernoulli is exact). The acceptance probability is at least
    about ``1/e`` once sigma >= 1, so the expected number of proposals is O(1).

    Args:
        sigma_squared: The variance parameter ``sigma**2`` (an ``int`` or ``Fraction``) > 0.
            Wrap a float in ``Fraction(x)`` to use its exact value.

    Returns:
        One integer sample.

    Raises:
        TypeError: If ``sigma_squared`` is not rational.
        ValueError: If ``sigma_squared`` is not positive.

    Privacy:
        Adding independent draws to each coordinate of an integer vector whose l2 sensitivity
        is ``Delta`` (under the caller's neighbouring relation) is ``Delta**2 / (2 sigma**2)``-zCDP
        (CKS 2020, Theorem 14; ``Delta`` need not be an integer, e.g. sqrt(2) for a count
        vector under replace-one).

    References:
        Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy",
        NeurIPS: Algorithm 3 and Theorem 14.
    """
    s2 = _rational("sigma_squared", sigma_squared)
    if s2 <= 0:
        raise ValueError(f"sigma_squared ({sigma_squared!r}) must be > 0")
    p, q = s2.numerator, s2.denominator  # sigma**2 = p/q
    t = math.isqrt(p // q) + 1  # floor(sigma) + 1, exactly
    # gamma = (|y| - sigma**2/t)**2 / (2 sigma**2) = (|y| q t - p)**2 / (2 p q t**2), in integers.
    den = 2 * p * q * t * t
    while True:
        y = _discrete_laplace(t, 1)
        gap = abs(y) * q * t - p
        if _bernoulli_exp_neg(gap * gap, den):
            return y


def uniform_int(low: int, high: int) -> int:
    """Draw an integer uniformly from ``[low, high)``.

    Args:
        low: Inclusive lower bound.
        high: Exclusive upper bound, greater than ``low``.

    Returns:
        ``low + secrets.randbelow(high - low)``.

    Raises:
        TypeError: If a bound is not an int.
        ValueError: If ``low >= high``.

    Privacy:
        Not a mechanism by itself; exact uniform draw from the OS CSPRNG.

    References:
        Python ``secrets`` module (PEP 506).
    """
    lo, hi = _integer("low", low), _integer("high", high)
    if lo >= hi:
        raise ValueError(f"high ({high!r}) must be > low ({low!r})")
    return lo + secrets.randbelow(hi - lo)


def uniform_float() -> float:
    """Draw uniformly from the grid ``{i * 2**-53 : 0 <= i < 2**53}`` in [0, 1).

    Returns:
        A float64 that is an exact multiple of ``2**-53``.

    Privacy:
        Not a mechanism by itself. Do not build noise from it by inverse-CDF transforms in
        floating point (that is the construction Mironov 2012 attacks); use the exact samplers.

    References:
        Python ``secrets`` module (PEP 506).
    """
    return math.ldexp(secrets.randbits(53), -53)


# --- lattice Laplace for real-valued statistics ----------------------------------------------


def lattice_exponent(scale: float) -> int:
    """The lattice exponent ``k = floor(log2(scale)) - 30`` used for Laplace noise of ``scale``.

    The noise granularity ``2**k`` is between ``2**-31`` and ``2**-30`` (about 1e-9) of the
    scale, so the discretization is far below the noise itself. Computed exactly from the
    float's binary exponent (no ``log2`` rounding).

    Args:
        scale: The Laplace scale, positive and finite.

    Returns:
        The integer ``k``.

    Raises:
        ValueError: If ``scale`` is not positive and finite.

    Privacy:
        Public: depends on the scale only, never on the data.

    References:
        OpenDP, ``make_laplace`` on floats (noise on the lattice ``2**k * Z``).
    """
    # scale = m 2**e with m in [1/2, 1), so floor(log2(scale)) = e - 1 exactly.
    _, exponent = math.frexp(check_positive_finite("scale", scale))
    return exponent - 1 - LATTICE_BITS


def laplace_on_lattice(scale: float, k: int) -> float:
    """Draw Laplace noise of ``scale`` on the lattice ``2**k * Z``, as an exact float64.

    Returns ``discrete_laplace(Fraction(scale) / 2**k) * 2**k``: the probability of the value
    ``n * 2**k`` is proportional to ``exp(-|n| 2**k / scale)``.

    Adding this noise to a value snapped to the same lattice (:func:`snap_to_lattice`) is
    exact in float64 while ``|value| / 2**k < 2**53``, so the output distribution is exactly
    the discrete Laplace around the snapped value. That defeats Mironov's (2012) attack, which
    exploits the gaps and non-uniform rounding of float64 Laplace samplers. (Beyond that range
    float addition returns the correctly rounded exact sum, a post-processing of it: privacy
    holds, only the last bits are lost.)

    Args:
        scale: The Laplace scale, positive and finite (use :func:`release_laplace_parameters`).
        k: The lattice exponent, normally ``lattice_exponent(scale)``.

    Returns:
        An exact multiple of ``2**k``.

    Raises:
        ValueError: If ``scale`` is not positive and finite, ``k < -1074`` (below the float64
            grid) or ``scale / 2**k > 2**40`` (outputs would stop being exact floats).

    Privacy:
        With a statistic snapped to ``2**k * Z`` whose sensitivity before snapping is
        ``Delta``, the snapped sensitivity is at most ``Delta + 2**k``; the output is
        epsilon-DP when ``scale >= (Delta + 2**k) / epsilon`` (see
        :func:`release_laplace_scale`). No internal budget split.

    References:
        Canonne, Kamath & Steinke (2020), Algorithm 2; Mironov (2012), Section 5;
        OpenDP float Laplace on a lattice.
    """
    b = check_positive_finite("scale", scale)
    k = _integer("k", k)
    if k < _MIN_EXPONENT:
        raise ValueError(f"k ({k!r}) must be >= {_MIN_EXPONENT} (the float64 subnormal grid)")
    ratio = Fraction(b) / _pow2(k)
    if ratio > MAX_LATTICE_RATIO:
        raise ValueError(
            f"k ({k!r}) must be large enough that scale / 2**k <= 2**40; "
            "use k = lattice_exponent(scale)"
        )
    n = _discrete_laplace(ratio.numerator, ratio.denominator)
    if abs(n) >= 2**53:  # probability below exp(-2**13); kept so the result is always exact
        raise ArithmeticError("lattice Laplace draw is not exactly representable in float64")
    return math.ldexp(n, k)


def snap_to_lattice(value: float, k: int) -> float:
    """Round ``value`` to the nearest multiple of ``2**k``, ties to even, exactly.

    Args:
        value: A finite float.
        k: The lattice exponent.

    Returns:
        The multiple of ``2**k`` nearest to ``value`` (exact float64; at most ``2**(k-1)``
        away from ``value``). Values already on the lattice are returned unchanged.

    Raises:
        ValueError: If ``value`` is not finite.

    Privacy:
        Post-processing of the statistic before noise; it can move a value by up to
        ``2**(k-1)``, so neighbouring snapped values differ by up to ``Delta + 2**k``.

    References:
        Mironov (2012), Section 5 (snapping); exact rounding via ``fractions.Fraction``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value ({value!r}) must be a real number")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"value ({value!r}) must be finite")
    k = _integer("k", k)
    steps = Fraction(x) / _pow2(k)
    if steps.denominator == 1:  # already on the lattice (always so once ulp(x) >= 2**k)
        return x
    return math.ldexp(round(steps), k)  # |x| < 2**(k + 53) here; Fraction rounds half to even


def release_laplace_scale(sensitivity: float, epsilon: float, k: int) -> float:
    """The float Laplace scale for a snapped statistic: ``(sensitivity + 2**k) / epsilon``.

    The exact rational is converted to float64 and, if the conversion rounded down, moved up by
    one ulp with ``math.nextafter``, so the result is the smallest float64 that is at least
    the exact value.

    Args:
        sensitivity: The sensitivity ``Delta`` of the statistic before snapping, positive
            and finite.
        epsilon: The privacy parameter, positive and finite.
        k: The lattice exponent the noise and the snapping use.

    Returns:
        A float ``scale >= (sensitivity + 2**k) / epsilon`` (compared exactly).

    Raises:
        ValueError: If ``sensitivity`` or ``epsilon`` is not positive and finite.

    Privacy:
        The noise must be drawn on the same lattice ``k``; since ``k`` is itself a function
        of the scale, prefer :func:`release_laplace_parameters`, which returns a consistent
        pair.

    References:
        Mironov (2012), Section 5.2 (snapping mechanism sensitivity).
    """
    delta = check_positive_finite("sensitivity", sensitivity)
    eps = check_positive_finite("epsilon", epsilon)
    exact = (Fraction(delta) + _pow2(_integer("k", k))) / Fraction(eps)
    scale = float(exact)  # correctly rounded (nearest)
    if Fraction(scale) < exact:
        scale = math.nextafter(scale, math.inf)
    return scale


def release_laplace_parameters(sensitivity: float, epsilon: float) -> tuple[float, int]:
    """A consistent (scale, k) for the lattice Laplace mechanism in a release.

    Returns ``scale = release_laplace_scale(sensitivity, epsilon, k)`` with
    ``k == lattice_exponent(scale)``. Computing ``k`` from ``sensitivity / epsilon`` alone is
    not enough: the ``2**k`` term can push the scale over a power of two, which changes ``k``.

    Args:
        sensitivity: The sensitivity ``Delta`` of the statistic before snapping.
        epsilon: The privacy parameter; must exceed ``2**-29`` (below it the snapping slack
            outgrows the scale and no consistent pair exists).

    Returns:
        ``(scale, k)``: snap the statistic with ``snap_to_lattice(value, k)`` and add
        ``laplace_on_lattice(scale, k)`` (or a release source's ``laplace(scale=scale)``).

    Raises:
        ValueError: If an argument is not positive and finite, or ``epsilon <= 2**-29``.

    Privacy:
        The snapped statistic has sensitivity at most ``Delta + 2**k`` and the scale is at
        least ``(Delta + 2**k) / epsilon``: the release is epsilon-DP under whatever
        neighbouring relation ``Delta`` was computed for. No internal budget split.

    References:
        Mironov (2012), Section 5.2; OpenDP float Laplace on a lattice.
    """
    eps = check_positive_finite("epsilon", epsilon)
    if eps <= 2.0**-29:
        raise ValueError(f"epsilon ({epsilon!r}) must be > 2**-29 for lattice Laplace")
    delta = check_positive_finite("sensitivity", sensitivity)
    k = lattice_exponent(delta / eps)
    # k -> lattice_exponent(scale(k)) is monotone, so the iteration moves one way and stops;
    # for epsilon > 2**-29 it settles within two steps.
    while True:
        scale = release_laplace_scale(delta, eps, k)
        k_needed = lattice_exponent(scale)
        if k_needed == k:
            return scale, k
        k = k_needed
