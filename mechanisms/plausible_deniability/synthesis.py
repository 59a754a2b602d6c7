"""Seed-based synthesis (Section 3.2, eq. 3) with ω fixed or drawn per record from a range.

Given a seed d (a record of D_S) and ω, the candidate y keeps d's values on the first m − ω
attributes of the dependency order σ and resamples the other ω, in σ order, from the model's
conditionals given the current values of the parents (kept seed values or values already
resampled), eq. (3). Because σ is a topological order, every parent of σ(p) sits at a
position < p and already holds its final value when σ(p) is resampled.

A resampled value is drawn by inverting the conditional CDF at a uniform u (values of
probability 0 are never drawn). Each candidate consumes exactly m uniforms (those of the kept
positions are ignored), so its stream advances the same way whatever ω is.

With ω drawn from a range, the privacy test can score a candidate in two ways
(:attr:`SynthesisParams.omega_rule`):

* ``"per_candidate"`` (the default; the paper's): the candidate is tested as the output of the
  fixed-ω model with its own drawn ω, Pr{y = M_ω(d)} = 1[L(d, y) ≥ m − ω]·Q_ω(y). This is what
  the paper's ω ∈R [a-b] synthetics are: Section 8 describes them as synthetics generated "for
  various values of ω", of which a random subset of those passing the test is released, so
  each was generated and tested by a fixed-ω run, and Section 6 pools those runs.
* ``"mixture"``: the candidate is tested as the output of the mixture model M that draws ω
  itself, Pr{y = M(d)} = Σ_ω π(ω)·1[L(d, y) ≥ m − ω]·Q_ω(y).

Privacy:
    Synthesis itself is not DP; it is the generative model M of Mechanism 1, whose output is
    released only if it passes a privacy test (:mod:`.privacy_tests`). Theorem 1 holds for any
    generative model, with (ε_T, δ_T) depending only on k, γ, ε₀ and t, so both rules give
    the same per-candidate guarantee and the same ledger event:

    * ``"mixture"``: Mechanism 1 with the model M (ω drawn inside M, never released) is one
      instance of Theorem 1.
    * ``"per_candidate"``: ω is drawn from π independently of the data, then Mechanism 1 runs
      with M_ω. For each ω that run, F_ω, is (ε_T, δ_T)-DP by Theorem 1, so for neighbours D,
      D′ and any set S of outputs, Pr{F(D) ∈ S} = Σ_ω π(ω)·Pr{F_ω(D) ∈ S}
      ≤ Σ_ω π(ω)·(e^ε_T·Pr{F_ω(D′) ∈ S} + δ_T) = e^ε_T·Pr{F(D′) ∈ S} + δ_T. The bound holds for
      each ω separately, so releasing the drawn ω beside the candidate costs nothing more.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3.2, eq. (3); Section 6 (ω ∈R [9–11],
    [5–11]); Section 8 (synthetics for various ω, pooled); Theorem 1.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import ClassVar

import numpy as np

from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval, Options

__all__ = ["OMEGA_RULES", "SynthesisParams", "synthesize"]

OMEGA_RULES = ("per_candidate", "mixture")
_OMEGA = Interval(numbers.Integral, 1, None, closed="left")
"""How a candidate of an ω range is scored by the privacy test (module docstring)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisParams(ConstrainedParams):
    """ω: fixed (``omega_min == omega_max``) or uniform on [omega_min, omega_max] per record,
    and ``omega_rule``, how the test scores a candidate of a range (module docstring; the two
    rules coincide for a fixed ω).

    Raises:
        SpecError: a bound is not an int ≥ 1, omega_max < omega_min, or an unknown
            ``omega_rule``. (ω ≤ m is checked against the model by :meth:`check_for`.)
    """

    omega_min: int
    omega_max: int
    omega_rule: str = "per_candidate"

    _parameter_constraints: ClassVar = {"omega_min": [_OMEGA], "omega_max": [_OMEGA],
                                        "omega_rule": [Options(str, OMEGA_RULES)]}

    def _check_together(self) -> None:
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

    @property
    def scores_own_omega(self) -> bool:
        """Whether the test scores each candidate with its own ω (a range under ``"per_candidate"``)."""
        return self.omega_rule == "per_candidate" and self.omega_max > self.omega_min

    def tested_with(self, omega: int) -> SynthesisParams:
        """The generative model the test scores a candidate drawn with ``omega`` against: the
        fixed-ω model (``"per_candidate"``) or this mixture (``"mixture"``)."""
        return SynthesisParams.fixed(omega) if self.scores_own_omega else self


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
