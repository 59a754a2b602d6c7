"""Acceptance criteria on marginal counts (Hod & Canetti 2024, Section 4.5.2).

Two criteria compare the transformed private dataset ``R`` with the public release candidate
``S`` (frames of integer codes over one :class:`~privlab.mechanisms.tabular.domain.Domain`):

* ``marginals_absolute`` — :class:`MarginalsAbsoluteError`: the maximal absolute error of all
  k-way marginal counts, ``E_abs = (1/n) max_{k ≤ k_max} max_{q ∈ M_k} |q(R) − q(S)|``, over
  every non-empty subset of the declared columns (63 subsets for the six birth columns).
* ``marginals_relative`` — :class:`MarginalsRelativeError`: the maximal relative error of the
  add-one smoothed 1-way marginal counts, each ratio clipped to ``[1, λ]``,
  ``E_rel^λ = max_{q ∈ M_1} max{[q̂(R)/q̂(S)]_1^λ, [q̂(S)/q̂(R)]_1^λ}`` with ``q̂ = q + 1``.

Both marginal tables are computed with ``numpy.bincount`` on mixed-radix cell codes: the
absolute criterion builds the full difference table ``count_R − count_S`` once (when the joint
domain has at most :data:`FULL_TABLE_CELL_LIMIT` cells) and obtains every lower-order marginal
by summing one axis out of an already computed parent (the 63 marginals of 160,000 records
over Table 1's 230,400-cell domain take about 15 ms); larger domains fall back to one
bincount (or a sparse ``numpy.unique``) per column subset.

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
from collections.abc import Sequence
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import (  # noqa: F401  (helpers re-exported for old imports)
    AcceptanceCriterion,
    CriterionResult,
    check_bounds,
    check_column_names,
    check_same_size,
    codes_of,
    register_criterion,
    release_laplace_measure,
    require_columns,
)
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.errors import SchemaError, SpecError
from privlab.platform.ledger import Ledger
from privlab.platform.randomness import RandomSource

__all__ = [
    "FULL_TABLE_CELL_LIMIT",
    "MarginalsAbsoluteError",
    "MarginalsRelativeError",
    "adjusted_threshold",
    "check_bounds",
    "check_column_names",
    "codes_of",
    "max_abs_marginal_difference",
    "relative_error_sensitivity",
    "release_laplace_measure",
    "require_columns",
]

FULL_TABLE_CELL_LIMIT = 1 << 22
"""Largest joint domain (cells) for which the full difference table is materialised (32 MiB)."""


def _optional_columns(criterion: str, value: object) -> tuple[str, ...] | None:
    return None if value is None else check_column_names(criterion, "columns", value)


def _selected(criterion: str, columns: tuple[str, ...] | None, domain: Domain) -> tuple[str, ...]:
    if columns is None:
        return domain.names
    require_columns(criterion, "columns", columns, domain)
    return columns


# --- the marginal computations --------------------------------------------------------------


def _radix(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Mixed-radix cell index of each row (last column fastest, as ``numpy`` reshapes)."""
    index = np.zeros(codes.shape[0], dtype=np.int64)
    for j, size in enumerate(sizes):
        index *= size
        index += codes[:, j]
    return index


def _subset_difference_max(r: np.ndarray, s: np.ndarray, sizes: Sequence[int], cell_limit: int) -> int:
    """``max_cell |count_R − count_S|`` of one marginal given the subset's code columns."""
    cells = math.prod(sizes)
    if cells <= cell_limit:
        diff = np.bincount(_radix(r, sizes), minlength=cells) - np.bincount(_radix(s, sizes), minlength=cells)
        return int(np.abs(diff).max())
    stacked = np.concatenate([r, s])
    if cells < 2**62:
        _, inverse = np.unique(_radix(stacked, sizes), return_inverse=True)
    else:  # the radix code would overflow int64: unique rows instead
        _, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    m = int(inverse.max()) + 1
    diff = np.bincount(inverse[: len(r)], minlength=m) - np.bincount(inverse[len(r):], minlength=m)
    return int(np.abs(diff).max())


def max_abs_marginal_difference(
    r_codes: np.ndarray,
    s_codes: np.ndarray,
    sizes: Sequence[int],
    *,
    k_max: int,
    cell_limit: int = FULL_TABLE_CELL_LIMIT,
) -> int:
    """``max_{1 ≤ |A| ≤ k_max} max_cell |q_A(R) − q_A(S)|`` over column subsets ``A``.

    Args:
        r_codes, s_codes: ``n × d`` int64 code matrices (columns in ``sizes`` order).
        sizes: Number of codes of each column.
        k_max: Largest marginal order, ``1 ≤ k_max ≤ d``.
        cell_limit: Materialise the full ``d``-way difference table when it has at most this
            many cells (then every marginal is one axis-sum of a parent marginal); otherwise
            count each subset separately.

    Returns:
        The maximal absolute count difference (an int; divide by ``n`` for ``E_abs``).
    """
    d = len(sizes)
    if not 1 <= k_max <= d:
        raise ValueError(f"k_max ({k_max!r}) must be between 1 and the number of columns ({d})")
    sizes = tuple(int(s) for s in sizes)
    best = 0
    if math.prod(sizes) <= cell_limit:
        cells = math.prod(sizes)
        full = (np.bincount(_radix(r_codes, sizes), minlength=cells)
                - np.bincount(_radix(s_codes, sizes), minlength=cells)).reshape(sizes)
        level: dict[tuple[int, ...], np.ndarray] = {tuple(range(d)): full}
        if d <= k_max:
            best = int(np.abs(full).max())
        for k in range(d - 1, 0, -1):
            below: dict[tuple[int, ...], np.ndarray] = {}
            for subset in combinations(range(d), k):
                # Sum out the smallest missing column: the cheapest parent to marginalise.
                j = min((c for c in range(d) if c not in subset), key=lambda c: sizes[c])
                parent = tuple(sorted((*subset, j)))
                table = level[parent].sum(axis=parent.index(j))
                below[subset] = table
                if k <= k_max:
                    best = max(best, int(np.abs(table).max()))
            level = below
        return best
    for k in range(1, k_max + 1):
        for subset in combinations(range(d), k):
            cols = list(subset)
            best = max(best, _subset_difference_max(
                r_codes[:, cols], s_codes[:, cols], [sizes[c] for c in cols], cell_limit))
    return best


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

    columns: tuple[str, ...] | None = None
    k_max: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "columns", _optional_columns(self.name, self.columns))
        if self.k_max is not None:
            if isinstance(self.k_max, bool) or not isinstance(self.k_max, numbers.Integral) or self.k_max < 1:
                raise SpecError(f"criterion {self.name!r}: k_max ({self.k_max!r}) must be an int >= 1")
            if self.columns is not None and self.k_max > len(self.columns):
                raise SpecError(
                    f"criterion {self.name!r}: k_max ({self.k_max!r}) must be <= the number of columns "
                    f"({len(self.columns)})"
                )
            object.__setattr__(self, "k_max", int(self.k_max))

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """``E_abs(R, S)``.

        Raises:
            SpecError: Unknown column or ``k_max`` above the number of columns.
            SchemaError: A frame does not hold valid codes of ``domain``.
        """
        check_same_size(transformed, candidate, name=self.name)
        names = _selected(self.name, self.columns, domain)
        k_max = len(names) if self.k_max is None else self.k_max
        if k_max > len(names):
            raise SpecError(
                f"criterion {self.name!r}: k_max ({k_max!r}) must be <= the number of columns ({len(names)})"
            )
        r = codes_of(transformed, domain, names, what=f"criterion {self.name!r}: transformed data")
        s = codes_of(candidate, domain, names, what=f"criterion {self.name!r}: candidate")
        diff = max_abs_marginal_difference(r, s, [domain[c].size for c in names], k_max=k_max)
        return diff / len(transformed)

    def sensitivity(self, n: int) -> float:
        """``1/n`` (Section 4.5.2)."""
        return 1.0 / _check_n(n)

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

    ratio_clip: float
    columns: tuple[str, ...] | None = None
    false_positive_rate: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        lam = self.ratio_clip
        if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not math.isfinite(lam) or lam <= 1:
            raise SpecError(f"criterion {self.name!r}: ratio_clip ({lam!r}) must be a finite number > 1")
        object.__setattr__(self, "ratio_clip", float(lam))
        if not 1.0 < self.threshold <= self.ratio_clip:
            raise SpecError(
                f"criterion {self.name!r}: threshold ({self.threshold!r}) must be in (1, ratio_clip = "
                f"{self.ratio_clip!r}]: the clipped measure never leaves [1, ratio_clip]"
            )
        p = self.false_positive_rate
        if p is not None:
            if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 < p <= 0.5:
                raise SpecError(f"criterion {self.name!r}: false_positive_rate ({p!r}) must be in (0, 0.5]")
            object.__setattr__(self, "false_positive_rate", float(p))
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
        _check_n(n)
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


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise SchemaError(f"n ({n!r}) must be an int >= 1")
    return int(n)
