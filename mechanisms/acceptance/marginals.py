"""Acceptance criteria on marginal counts (Hod & Canetti 2024, Section 4.5.2).

Two criteria compare the transformed private dataset ``R`` with the public release candidate
``S`` (frames of integer codes over one :class:`~privlab.mechanisms.tabular.domain.Domain`):

* ``marginals_absolute`` — :class:`MarginalsAbsoluteError`: the maximal absolute error of all
  k-way marginal counts, ``E_abs = (1/n) max_{k ≤ k_max} max_{q ∈ M_k} |q(R) − q(S)|``, over
  every non-empty subset of the declared columns (63 subsets for the six birth columns). It is
  an error of proportions, so it also compares datasets of different sizes (``q(R)/|R|``
  against ``q(S)/|S|``; research use, ``privlab evaluate``).
* ``marginals_relative`` — :class:`MarginalsRelativeError`: the maximal relative error of the
  add-one smoothed 1-way marginal counts, each ratio clipped to ``[1, λ]``,
  ``E_rel^λ = max_{q ∈ M_1} max{[q̂(R)/q̂(S)]_1^λ, [q̂(S)/q̂(R)]_1^λ}`` with ``q̂ = q + 1``.

The absolute criterion's statistic, the largest marginal difference over every column subset,
is computed by :mod:`.marginal_differences`.

The module also holds :func:`release_laplace_measure`, the Laplace release shared by the
criteria whose sensitivity depends on the public candidate (relative marginals, conditional
means, regression MAE).

Privacy:
    Replace-one neighbours with ``n`` public; ``S`` is public and fixed (Section 4.5.1).
    ``marginals_absolute``: each count changes by at most 1 when one record is replaced, so
    ``Δ = 1/n`` (Proposition 3 for the maximum). ``marginals_relative``: ``Δ`` of
    Proposition 5 with ``s_min`` the smallest 1-way count of the *candidate* (public), and the
    pass threshold optionally lowered by Proposition 6. Each criterion spends its own ε once;
    there is no internal split.

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of
    Live Births", Section 4.5.2 (E_abs, E_rel, E_rel^λ), Propositions 3, 5 and 6.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import (
    AcceptanceCriterion,
    CriterionResult,
    check_column_names,
    check_not_empty,
    check_same_size,
    checked_record_count,
    codes_of,
    register_criterion,
    release_laplace_measure,
    require_columns,
)
from privlab.mechanisms.acceptance.marginal_differences import max_abs_marginal_difference
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import Interval, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["MarginalsAbsoluteError", "MarginalsRelativeError", "adjusted_threshold", "relative_error_sensitivity"]


def _optional_columns(criterion: str, value: object) -> tuple[str, ...] | None:
    return None if value is None else check_column_names(criterion, "columns", value)


def _selected(criterion: str, columns: tuple[str, ...] | None, domain: Domain) -> tuple[str, ...]:
    if columns is None:
        return domain.names
    require_columns(criterion, "columns", columns, domain)
    return columns


# --- the marginal computations --------------------------------------------------------------


def relative_error_sensitivity(ratio_clip: float, min_count: int) -> float:
    """Proposition 5: ``Δ = max{1/(s_min+1), λ − 1/(1/λ + 1/(s_min+1))}``.

    ``s_min`` is the smallest 1-way marginal count of the public candidate (zero-count codes
    included). With ``r = q̂(R)``, ``s = q̂(S) ≥ s_min + 1`` (add-one smoothed counts) and a
    neighbour moving ``r`` to ``r + 1``: the term ``[r/s]_1^λ`` moves by at most ``1/s``; the
    term ``[s/r]_1^λ`` moves by at most ``s/r − s/(r+1)`` on ``r ≥ s/λ`` (below that it is
    clipped at λ), which is largest at ``r = s/λ``, giving ``λ − 1/(1/λ + 1/s) = λ²/(s + λ)``,
    decreasing in ``s`` (attained when ``s/λ`` is an integer); when ``s/r`` and ``s/(r+1)``
    straddle 1, integrality forces ``r = s`` and the change is 0. Proposition 3 turns the
    per-term bound into one for the maximum. The paper's side condition ``λ > 1 + 1/s_max``
    only excludes the case ``s − 1 < r < s/λ``, which has no integer ``r`` for any λ > 1, so
    it is not required for counts.

    Raises:
        ValueError: ``ratio_clip ≤ 1`` or a negative/non-integer ``min_count``.
    """
    lam = float(ratio_clip)
    if not (math.isfinite(lam) and lam > 1.0):
        raise ValueError(f"ratio_clip ({ratio_clip!r}) must be finite and > 1")
    if isinstance(min_count, bool) or not isinstance(min_count, numbers.Integral) or min_count < 0:
        raise ValueError(f"min_count ({min_count!r}) must be an int >= 0")
    s = float(min_count) + 1.0
    return max(1.0 / s, lam - 1.0 / (1.0 / lam + 1.0 / s))


def adjusted_threshold(*, ratio_clip: float, noise_scale: float, false_positive_rate: float) -> float:
    """Proposition 6: ``T' = λ + η ln(2p)`` so that ``Pr[λ + Lap(η) ≤ T'] = p``.

    A candidate whose clipped measure sits at the cap λ passes a threshold ``T'`` only with
    probability ``p`` (for ``p ≤ 1/2``, ``T' ≤ λ``).

    Raises:
        ValueError: ``p`` outside (0, 1/2], or a non-positive scale.
    """
    if not 0.0 < false_positive_rate <= 0.5:
        raise ValueError(f"false_positive_rate ({false_positive_rate!r}) must be in (0, 0.5]")
    if not (math.isfinite(noise_scale) and noise_scale > 0):
        raise ValueError(f"noise_scale ({noise_scale!r}) must be finite and > 0")
    return float(ratio_clip) + float(noise_scale) * math.log(2.0 * false_positive_rate)


# --- criteria -------------------------------------------------------------------------------


@register_criterion
@dataclasses.dataclass(frozen=True, kw_only=True)
class MarginalsAbsoluteError(AcceptanceCriterion):
    """Maximal absolute error of all k-way marginal counts, as a fraction of ``n``.

    ``E_abs(R, S) = (1/n) max_{1 ≤ k ≤ k_max} max_{q ∈ M_k} |q(R) − q(S)|`` where ``M_k`` holds
    every cell count of every k-column marginal of ``columns``. The paper uses all six
    columns, ``k_max = d`` (63 marginals), ``T = 0.01`` and ``ε = 0.01``.

    The measure is one of proportions, so :meth:`error` also compares datasets of different
    sizes: ``max |q(R)/|R| − q(S)/|S||``, the same number when ``|R| = |S| = n`` (``any_size``;
    research use — :meth:`release` is for the flow's equal sizes, where ``Δ = 1/n`` holds).

    Spec keys: ``name``, ``threshold``, ``epsilon``, ``columns`` (optional list; default all
    domain columns), ``k_max`` (optional int ≥ 1; default the number of columns).

    Privacy:
        ε-DP, replace-one with ``n`` public: replacing one record lowers one cell and raises
        one cell of each marginal by 1, so each ``|q(R) − q(S)|`` moves by at most 1 and the
        maximum by at most 1 (Proposition 3); ``Δ = 1/n``. Released with ``Lap(1/(nε))``.

    References:
        Hod & Canetti (2024), Section 4.5.2 (E_abs) and Proposition 3; Table 2, row 1.
    """

    kind: ClassVar[str] = "marginals_absolute"
    description: ClassVar[str] = ("proportions (counts divided by n) of combinations of columns (k-way marginals): "
                                  "largest absolute error")
    any_size: ClassVar[bool] = True

    columns: tuple[str, ...] | None = None
    k_max: int | None = None

    _parameter_constraints: ClassVar = {**AcceptanceCriterion._parameter_constraints, "columns": [Unconstrained()],
                                        "k_max": [None, Interval(numbers.Integral, 1, None, closed="left")]}

    def _check_together(self) -> None:
        super()._check_together()
        object.__setattr__(self, "columns", _optional_columns(self.name, self.columns))
        if self.k_max is not None:
            if self.columns is not None and self.k_max > len(self.columns):
                raise SpecError(
                    f"criterion {self.name!r}: k_max ({self.k_max!r}) must be <= the number of columns "
                    f"({len(self.columns)})"
                )
            object.__setattr__(self, "k_max", int(self.k_max))

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """``E_abs(R, S)``; for sizes ``|R| ≠ |S|``, the largest difference of marginal proportions.

        ``q(R)/|R| − q(S)/|S| = (a·q(R) − b·q(S))/lcm(|R|, |S|)`` with ``a = |S|/g``,
        ``b = |R|/g``, ``g = gcd(|R|, |S|)``: exact integers, and ``a = b = 1`` for equal sizes.

        Raises:
            SpecError: Unknown column, ``k_max`` above the number of columns, or an empty frame.
            SchemaError: A frame does not hold valid codes of ``domain``.
        """
        check_not_empty(transformed, candidate, name=self.name)
        names = _selected(self.name, self.columns, domain)
        k_max = len(names) if self.k_max is None else self.k_max
        if k_max > len(names):
            raise SpecError(
                f"criterion {self.name!r}: k_max ({k_max!r}) must be <= the number of columns ({len(names)})"
            )
        r = codes_of(transformed, domain, names, what=f"criterion {self.name!r}: transformed data")
        s = codes_of(candidate, domain, names, what=f"criterion {self.name!r}: candidate")
        g = math.gcd(len(transformed), len(candidate))
        a, b = len(candidate) // g, len(transformed) // g
        diff = max_abs_marginal_difference(r, s, [domain[c].size for c in names], k_max=k_max, r_weight=a, s_weight=b)
        return diff / (a * len(transformed))

    def sensitivity(self, n: int) -> float:
        """``1/n`` (Section 4.5.2)."""
        return 1.0 / checked_record_count(n)

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)


@register_criterion
@dataclasses.dataclass(frozen=True, kw_only=True)
class MarginalsRelativeError(AcceptanceCriterion):
    """Maximal λ-clipped relative error of the add-one smoothed 1-way marginal counts.

    ``E_rel^λ(R, S) = max_{q ∈ M_1} max{[q̂(R)/q̂(S)]_1^λ, [q̂(S)/q̂(R)]_1^λ}`` with
    ``q̂ = q + 1``; ``M_1`` holds every code of every column in ``columns``, including codes
    that occur in neither dataset (their ratio is 1). The measure lies in ``[1, λ]``.

    Spec keys: ``name``, ``threshold`` (``1 < T ≤ ratio_clip``), ``epsilon``, ``ratio_clip``
    (λ > 1), ``columns`` (optional; default all), ``false_positive_rate`` (optional p in
    (0, 1/2]). The paper: λ = 2, T = 1.4, ε = 0.3 (Table 2 shows ``[L, U] = [1, 2]``).

    When ``false_positive_rate`` is set, the candidate passes only if the noisy value is below
    ``min(threshold, λ + η ln(2p))`` (Proposition 6), η being the noise scale actually used,
    so a candidate whose measure is clipped at λ passes with probability at most ``p``. The
    paper fixed ``T = 1.4`` in advance from an assumed ``s_min = 50``; use
    :func:`adjusted_threshold` with :func:`relative_error_sensitivity` to plan such a value.

    Privacy:
        ε-DP, replace-one with ``n`` public and ``S`` public: Laplace noise with the
        Proposition 5 sensitivity ``Δ(λ, s_min)`` (:func:`relative_error_sensitivity`), where
        ``s_min`` is the smallest 1-way count of the candidate, a public quantity.
        :meth:`sensitivity` gives the candidate-free worst case ``Δ(λ, 0)``. The adjusted
        threshold depends on public values only.

    References:
        Hod & Canetti (2024), Section 4.5.2, Propositions 4, 5 and 6; Table 2, row 2.
    """

    kind: ClassVar[str] = "marginals_relative"
    description: ClassVar[str] = "proportions of each column's values (1-way marginals): largest relative error"
    any_size: ClassVar[bool] = False  # ratios of add-one smoothed *counts*: |R| = |S| needed

    ratio_clip: float
    columns: tuple[str, ...] | None = None
    false_positive_rate: float | None = None

    _parameter_constraints: ClassVar = {
        **AcceptanceCriterion._parameter_constraints, "ratio_clip": [Interval(numbers.Real, 1, None, closed="neither")],
        "columns": [Unconstrained()], "false_positive_rate": [None, Interval(numbers.Real, 0, 0.5, closed="right")]}

    def _check_together(self) -> None:
        super()._check_together()
        object.__setattr__(self, "ratio_clip", float(self.ratio_clip))
        if not 1.0 < self.threshold <= self.ratio_clip:
            raise SpecError(
                f"criterion {self.name!r}: threshold ({self.threshold!r}) must be in (1, ratio_clip = "
                f"{self.ratio_clip!r}]: the clipped measure never leaves [1, ratio_clip]"
            )
        if self.false_positive_rate is not None:
            object.__setattr__(self, "false_positive_rate", float(self.false_positive_rate))
        object.__setattr__(self, "columns", _optional_columns(self.name, self.columns))

    def _counts(self, frame: pd.DataFrame, domain: Domain, what: str) -> list[np.ndarray]:
        names = _selected(self.name, self.columns, domain)
        codes = codes_of(frame, domain, names, what=f"criterion {self.name!r}: {what}")
        return [np.bincount(codes[:, j], minlength=domain[c].size) for j, c in enumerate(names)]

    def _ratio_measure(self, r_counts: list[np.ndarray], s_counts: list[np.ndarray]) -> float:
        worst = 1.0
        for r, s in zip(r_counts, s_counts, strict=True):
            r_hat, s_hat = r + 1.0, s + 1.0
            up = np.clip(r_hat / s_hat, 1.0, self.ratio_clip)
            down = np.clip(s_hat / r_hat, 1.0, self.ratio_clip)
            worst = max(worst, float(np.maximum(up, down).max()))
        return worst

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """``E_rel^λ(R, S)``, in ``[1, λ]``.

        Raises:
            SpecError: Unknown column.
            SchemaError: A frame does not hold valid codes of ``domain``.
        """
        check_same_size(transformed, candidate, name=self.name)
        return self._ratio_measure(self._counts(transformed, domain, "transformed data"),
                                   self._counts(candidate, domain, "candidate"))

    def candidate_min_count(self, candidate: pd.DataFrame, *, domain: Domain) -> int:
        """``s_min``: the smallest 1-way count of the (public) candidate over all codes."""
        return int(min(int(c.min()) for c in self._counts(candidate, domain, "candidate")))

    def sensitivity(self, n: int) -> float:
        """Worst case over all candidates: Proposition 5 with ``s_min = 0``."""
        checked_record_count(n)
        return relative_error_sensitivity(self.ratio_clip, 0)

    def candidate_sensitivity(self, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """Proposition 5 with the candidate's ``s_min`` (public, so it may set the noise)."""
        return relative_error_sensitivity(self.ratio_clip, self.candidate_min_count(candidate, domain=domain))

    @property
    def bounds(self) -> tuple[float, float]:
        return (1.0, self.ratio_clip)

    def release(
        self,
        transformed: pd.DataFrame,
        candidate: pd.DataFrame,
        *,
        domain: Domain,
        source: RandomSource,
        ledger: Ledger,
        scope: str = "data",
    ) -> CriterionResult:
        """Release ``E_rel^λ + Lap(Δ(λ, s_min)/ε)`` and compare it with the (adjusted) threshold.

        Returns:
            The result; ``threshold`` is the one actually used, and ``details`` hold the
            configured threshold, ``candidate_min_count`` and, with ``false_positive_rate``,
            ``adjusted_threshold`` (all public).

        Privacy:
            ε-DP (Laplace, Proposition 5); the threshold adjustment uses only the public noise
            scale (Proposition 6).
        """
        check_same_size(transformed, candidate, name=self.name)
        s_counts = self._counts(candidate, domain, "candidate")
        value = self._ratio_measure(self._counts(transformed, domain, "transformed data"), s_counts)
        s_min = int(min(int(c.min()) for c in s_counts))
        delta = relative_error_sensitivity(self.ratio_clip, s_min)
        result = release_laplace_measure(
            self, value, sensitivity=delta, source=source, ledger=ledger, scope=scope,
            public_details=(("configured_threshold", float(self.threshold)),
                            ("candidate_min_count", float(s_min))),
        )
        if self.false_positive_rate is None:
            return result
        t_adj = adjusted_threshold(ratio_clip=self.ratio_clip, noise_scale=result.noise_scale,
                                   false_positive_rate=self.false_positive_rate)
        used = min(float(self.threshold), t_adj)
        return dataclasses.replace(
            result, threshold=used, passed=result.dp_value < used,
            details=result.details + (("adjusted_threshold", t_adj),),
        )

