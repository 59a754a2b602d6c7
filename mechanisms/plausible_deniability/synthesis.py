"""Seed-based synthesis (Section 3.2, eq. 3) with ω fixed or drawn per record from a range.

Given a seed d (a record of D_S) and ω, the candidate y keeps d's values on the first m − ω
attributes of the dependency order σ and resamples the other ω, in σ order, from the model's
conditionals given the current values of the parents (kept seed values or values already
resampled), eq. (3). Because σ is a topological order, every parent of σ(p) sits at a
position < p and already holds its final value when σ(p) is resampled.

A resampled value is drawn by inverting the conditional CDF at a uniform u (values of
probability 0 are never drawn). Each candidate consumes exactly m uniforms (those of the kept
positions are ignored), so its stream advances the same way whatever ω is.

Privacy:
    Synthesis itself is not DP; it is the generative model M of Mechanism 1, whose output is
    released only if it passes a privacy test (:mod:`.privacy_tests`).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3.2, eq. (3); Section 6 (ω ∈R [9–11],
    [5–11]).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privlab.platform.errors import SpecError

__all__ = ["SynthesisParams", "synthesize"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisParams:
    """ω: fixed (``omega_min == omega_max``) or uniform on [omega_min, omega_max] per record.

    Raises:
        SpecError: a bound is not an int ≥ 1, or omega_max < omega_min. (ω ≤ m is checked
            against the model by :meth:`check_for`.)
    """

    omega_min: int
    omega_max: int

    def __post_init__(self) -> None:
        for name in ("omega_min", "omega_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{name} ({value!r}) must be an int >= 1")
        if self.omega_max < self.omega_min:
            raise SpecError(f"omega_max ({self.omega_max!r}) must be >= omega_min ({self.omega_min!r})")

    @classmethod
    def fixed(cls, omega: int) -> SynthesisParams:
        return cls(omega_min=omega, omega_max=omega)

    def check_for(self, m: int) -> None:
        """Raise :class:`SpecError` unless 1 ≤ ω ≤ m for every ω of the range."""
        if self.omega_max > m:
            raise SpecError(f"omega_max ({self.omega_max!r}) must be <= m ({m}), the number of attributes")

    def omegas(self) -> range:
        return range(self.omega_min, self.omega_max + 1)

    def weight(self) -> float:
        """π(ω) of every ω in the range (uniform); exactly 1.0 for a fixed ω."""
        return 1.0 / (self.omega_max - self.omega_min + 1)


def synthesize(model, seed: np.ndarray, omega: int, uniforms: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """The candidate eq. (3) makes from ``seed`` with ``omega`` and the ``m`` ``uniforms``.

    Args:
        model: A fitted :class:`~.model.PlausibleDeniabilityModel`.
        seed: The seed's codes, shape (m,), domain order.
        omega: ω in [1, m].
        uniforms: m floats in [0, 1); ``uniforms[p]`` is used for σ(p) when p ≥ m − ω.

    Returns:
        The candidate's codes, shape (m,).
    """
    y = np.array(seed, dtype=np.int64, copy=True)
    order = model.structure_.order
    m = len(order)
    for position in range(m - omega, m):
        attribute = order[position]
        cdf = np.cumsum(model.conditional(attribute, y))
        value = int(np.searchsorted(cdf, uniforms[position] * cdf[-1], side="right"))
        y[attribute] = min(value, len(cdf) - 1)
    return y
