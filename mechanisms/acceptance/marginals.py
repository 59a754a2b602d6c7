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

Both marginal tables are computed with ``numpy.bincount`` on mixed-radix cell codes: the
absolute criterion builds the full difference table ``count_R − count_S`` once (when the joint
domain has at most :data:`FULL_TABLE_CELL_LIMIT` cells) and obtains every lower-order marginal
by summing one axis out of an already computed parent (the 63 marginals of 160,000 records
over Table 1's 230,400-cell domain take about 15 ms); larger domains (wide tables: 13
columns have 8,191 marginals) use an exact branch and bound over the column subsets that counts
only the subsets and cells whose difference could still exceed the largest one found
(:func:`max_abs_marginal_difference`).

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

from privlab.mechanisms.acceptance.base import (
    AcceptanceCriterion,
    CriterionResult,
    check_column_names,
    check_not_empty,
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
    "LIVE_ROWS_LIMIT",
    "MarginalsAbsoluteError",
    "MarginalsRelativeError",
    "adjusted_threshold",
    "max_abs_marginal_difference",
    "max_abs_marginal_difference_per_subset",
    "relative_error_sensitivity",
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


def _subset_difference_max(r: np.ndarray, s: np.ndarray, sizes: Sequence[int], cell_limit: int,
                           r_weight: int = 1, s_weight: int = 1) -> int:
    """``max_cell |a·count_R − b·count_S|`` of one marginal given the subset's code columns."""
    cells = math.prod(sizes)
    if cells <= cell_limit:
        diff = (r_weight * np.bincount(_radix(r, sizes), minlength=cells)
                - s_weight * np.bincount(_radix(s, sizes), minlength=cells))
        return int(np.abs(diff).max())
    stacked = np.concatenate([r, s])
    if cells < 2**62:
        _, inverse = np.unique(_radix(stacked, sizes), return_inverse=True)
    else:  # the radix code would overflow int64: unique rows instead
        _, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    m = int(inverse.max()) + 1
    diff = (r_weight * np.bincount(inverse[: len(r)], minlength=m)
            - s_weight * np.bincount(inverse[len(r):], minlength=m))
    return int(np.abs(diff).max())


def max_abs_marginal_difference_per_subset(
    r_codes: np.ndarray,
    s_codes: np.ndarray,
    sizes: Sequence[int],
    *,
    k_max: int,
    cell_limit: int = FULL_TABLE_CELL_LIMIT,
    r_weight: int = 1,
    s_weight: int = 1,
) -> int:
    """The reference for :func:`max_abs_marginal_difference`: every subset counted on its own.

    One ``bincount`` (at most ``cell_limit`` cells) or sparse ``numpy.unique`` per column
    subset, ``Σ_{k ≤ k_max} C(d, k)`` passes over all ``2n`` records (8,191 for 13 columns,
    about 20 s on 30,000 records). Kept for the tests and the benchmark, which compare the
    fast path with it.
    """
    d = len(sizes)
    if not 1 <= k_max <= d:
        raise ValueError(f"k_max ({k_max!r}) must be between 1 and the number of columns ({d})")
    sizes = tuple(int(s) for s in sizes)
    best = 0
    for k in range(1, k_max + 1):
        for subset in combinations(range(d), k):
            cols = list(subset)
            best = max(best, _subset_difference_max(
                r_codes[:, cols], s_codes[:, cols], [sizes[c] for c in cols], cell_limit, r_weight, s_weight))
    return best


_RADIX_LIMIT = 1 << 62
"""Mixed-radix cell indices stay below this (int64); beyond it they are renumbered densely."""

LIVE_ROWS_LIMIT = 1 << 22
"""Most (row, subset) pairs :func:`_pruned_max_difference` keeps per level of the lattice
(three 8-byte arrays each: ≤ 100 MiB); subsets beyond it keep only their bound."""


def _cell_ids(codes: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, int]:
    """Cell index of each row of ``codes`` (``m × k``) and an upper bound on the indices.

    Mixed radix (last column fastest) while the number of cells fits in int64; past that the
    indices so far are renumbered densely (``numpy.unique``, order-preserving) and the radix
    goes on from there. Two rows get the same index iff they agree on every column.
    """
    ids = np.zeros(codes.shape[0], dtype=np.int64)
    cells = 1
    for j, size in enumerate(sizes):
        if cells * size >= _RADIX_LIMIT:
            _, ids = np.unique(ids, return_inverse=True)
            ids = ids.reshape(-1).astype(np.int64, copy=False)
            cells = int(ids.max()) + 1 if ids.size else 1
        ids = ids * size + codes[:, j]
        cells *= size
    return ids, cells


def _signed_rows(r_codes: np.ndarray, s_codes: np.ndarray, sizes: Sequence[int], r_weight: int = 1,
                 s_weight: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The distinct full rows on which ``R`` and ``S`` differ, with ``w(u) = a·#_R(u) − b·#_S(u) ≠ 0``.

    Every (weighted) marginal count difference is a sum of ``w`` over the rows of its cell,
    ``a·q_A(R)(a) − b·q_A(S)(a) = Σ_{u ∈ a} w(u)``: rows present equally often (after
    weighting) in both cancel. ``a = b = 1`` for counts.
    """
    n = r_codes.shape[0]
    stacked = np.concatenate([r_codes, s_codes])
    ids, _ = _cell_ids(stacked, sizes)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    m = first.size
    weights = r_weight * np.bincount(inverse[:n], minlength=m) - s_weight * np.bincount(inverse[n:], minlength=m)
    keep = np.flatnonzero(weights)
    return stacked[first[keep]], weights[keep]


class _Live:
    """A computed subset of the lattice: its bound, and (unless over budget) its live rows.

    ``rows`` are indices into the signed rows, ``cells`` their cell index in this marginal
    (``< n_cells``), ``row_bound`` the bound ``max(P, N)`` of each row's cell; rows whose cell
    bound is at most the best difference found so far are dropped (lazily, in :meth:`live`).
    """

    __slots__ = ("bound", "rows", "cells", "n_cells", "row_bound", "best_at")

    def __init__(self, bound: float, rows: np.ndarray | None = None, cells: np.ndarray | None = None,
                 n_cells: int = 0, row_bound: np.ndarray | None = None, best_at: int = 0) -> None:
        self.bound, self.rows, self.cells, self.n_cells = bound, rows, cells, n_cells
        self.row_bound, self.best_at = row_bound, best_at

    def live(self, best: int) -> None:
        if self.rows is not None and self.best_at < best:
            keep = self.row_bound > best
            self.rows, self.cells, self.row_bound = self.rows[keep], self.cells[keep], self.row_bound[keep]
            self.best_at = best


def _pruned_max_difference(
    r_codes: np.ndarray, s_codes: np.ndarray, sizes: Sequence[int], *, k_max: int,
    live_rows_limit: int = LIVE_ROWS_LIMIT, r_weight: int = 1, s_weight: int = 1,
) -> int:
    """``max_{1 ≤ |A| ≤ k_max} max_a |Σ_{u ∈ a} w(u)|`` by branch and bound over the subset lattice.

    Exact; see :func:`max_abs_marginal_difference` for the argument. Levels ``k = 1, …, k_max``
    are visited in order, each subset ``A`` in lexicographic order:

    1. ``A`` is skipped if some ``A \\ {c}`` was skipped or has ``bound ≤ best``.
    2. Otherwise its counts are refined from the child ``B = A \\ {c}`` with the fewest live
       rows: cell index ``cell_B(u) · |V_c| + code_c(u)`` on ``B``'s live rows only (renumbered
       with ``numpy.unique`` when sparse), then ``diff = bincount(w)``, ``P = bincount(w⁺)``,
       ``N = P − diff``; ``best`` takes ``max |diff|``.
    3. ``A`` keeps ``bound(A) = min(bound(B'), max_a max(P(a), N(a)))`` over its children
       ``B'`` and the rows of cells with ``max(P, N) > best``; if that bound is ``≤ best``, ``A``
       is dropped with every superset.

    ``bincount`` sums the integer weights in float64, exactly (``|sums| ≤ a·|R| + b·|S| < 2⁵³``,
    checked by :func:`max_abs_marginal_difference`).
    """
    rows, w = _signed_rows(r_codes, s_codes, sizes, r_weight, s_weight)
    m = w.size
    if m == 0:
        return 0
    d = len(sizes)
    columns = [np.ascontiguousarray(rows[:, j], dtype=np.int64) for j in range(d)]
    weights = w.astype(np.float64)
    positive = np.maximum(weights, 0.0)
    top = float(max(positive.sum(), positive.sum() - weights.sum()))
    everything = np.arange(m)
    level: dict[tuple[int, ...], _Live] = {
        (): _Live(top, everything, np.zeros(m, dtype=np.int64), 1, np.full(m, top))}
    best = 0
    for k in range(1, k_max + 1):
        below: dict[tuple[int, ...], _Live] = {}
        stored = 0
        for subset in combinations(range(d), k):
            children: list[tuple[int, _Live]] = []
            for i, c in enumerate(subset):
                child = level.get(subset[:i] + subset[i + 1:])
                if child is None or child.bound <= best:
                    break
                children.append((c, child))
            else:
                for _, child in children:
                    child.live(best)
                kept = [(c, child) for c, child in children if child.rows is not None]
                if kept:
                    c, base = min(kept, key=lambda item: item[1].rows.size)
                    if base.rows.size == 0:  # every cell of A lies in a cell already bounded by best
                        continue
                    live_rows = base.rows
                    cells = base.cells * sizes[c] + columns[c][live_rows]
                    n_cells = base.n_cells * sizes[c]
                else:  # no child kept its rows (over budget): count A on every row
                    live_rows = everything
                    cells, n_cells = _cell_ids(rows[:, list(subset)], [sizes[c] for c in subset])
                if n_cells > 8 * live_rows.size + 4096:
                    _, cells = np.unique(cells, return_inverse=True)
                    cells = cells.reshape(-1)
                    n_cells = int(cells.max()) + 1
                diff = np.bincount(cells, weights=weights[live_rows], minlength=n_cells)
                p = np.bincount(cells, weights=positive[live_rows], minlength=n_cells)
                best = max(best, int(np.abs(diff).max()))
                cell_bound = np.maximum(p, p - diff)
                bound = min(float(cell_bound.max()), *(child.bound for _, child in children))
                if bound <= best:
                    continue
                row_bound = cell_bound[cells]
                keep = row_bound > best
                size = int(np.count_nonzero(keep))
                if stored + size <= live_rows_limit:
                    stored += size
                    below[subset] = _Live(bound, live_rows[keep], cells[keep], n_cells, row_bound[keep], best)
                else:
                    below[subset] = _Live(bound)
        level = below
        if not level:
            break
    return best


def max_abs_marginal_difference(
    r_codes: np.ndarray,
    s_codes: np.ndarray,
    sizes: Sequence[int],
    *,
    k_max: int,
    cell_limit: int = FULL_TABLE_CELL_LIMIT,
    r_weight: int = 1,
    s_weight: int = 1,
) -> int:
    """``max_{1 ≤ |A| ≤ k_max} max_cell |a·q_A(R) − b·q_A(S)|`` over column subsets ``A``.

    With the default weights ``a = b = 1`` this is the largest marginal count difference; with
    ``a = |S|/g`` and ``b = |R|/g`` (``g = gcd(|R|, |S|)``) it is ``lcm(|R|, |S|)`` times the
    largest difference of marginal *proportions*, in exact integers, for datasets of different
    sizes. Everything below holds for any positive integer weights (``w⁺, w⁻ ≥ 0`` still).

    Two exact methods, chosen by the size of the joint domain:

    * At most ``cell_limit`` cells: the full ``d``-way difference table is materialised once
      and every lower-order marginal is one axis-sum of an already computed parent.
    * Larger (wide tables, e.g. 13 columns, 8,191 marginals): branch and bound over the subset
      lattice (:func:`_pruned_max_difference`). First, rows occurring equally often in ``R``
      and ``S`` cancel: with ``w(u) = #_R(u) − #_S(u)`` over distinct full rows ``u``, every
      difference is ``D_A(a) = Σ_{u ∈ a} w(u)``. Write ``P_A(a)``, ``N_A(a)`` for the sums of
      ``w⁺`` and ``w⁻`` over the cell (so ``D = P − N`` and ``P ≤ q_A(R)(a)``,
      ``N ≤ q_A(S)(a)``). Then ``|D_A(a)| ≤ max(P_A(a), N_A(a))``, and for ``B ⊆ A`` the cell
      ``a`` lies in one cell ``b`` of ``B`` with ``P_A(a) ≤ P_B(b)``, ``N_A(a) ≤ N_B(b)``
      (``w⁺, w⁻ ≥ 0``). Hence, for every superset ``A ⊇ B``,
      ``max_a |D_A(a)| ≤ U(B) := min_{B' ⊆ B} max_b max(P_{B'}(b), N_{B'}(b))``, and cells of
      ``A`` inside a cell ``b`` with ``max(P_B(b), N_B(b)) ≤ best`` cannot exceed ``best``.
      Subsets are visited by increasing size keeping the best difference so far, ``best``
      (it only grows). A subset ``A`` is counted only on the rows one child ``B`` kept: those
      of ``B``'s counted cells with ``max(P_B, N_B) > best``. By induction every other row lies
      in a cell (of ``B`` or of a subset of ``B``) all of whose refinements have ``|D| ≤ best``;
      the kept rows form whole cells of ``A`` (each cell of ``A`` lies inside one cell of
      ``B``), so the counted cells are exact, and every other cell of ``A`` (and of any
      superset) has ``|D| ≤ best``. Its ``bound`` is the
      largest ``max(P, N)`` over the cells it counted, capped by its children's bounds, so
      ``|D| ≤ max(bound, best)`` on every cell of the subset and of all its supersets; a
      subset with a child whose ``bound ≤ best`` is skipped together with all its supersets
      (their bound is no larger). Nothing skipped can exceed the final maximum, and every
      cell that can is counted exactly, so the result equals that of counting every subset
      (:func:`max_abs_marginal_difference_per_subset`). Counts per cell fall quickly as
      subsets grow, so most high-order subsets and rows are pruned; ``R == S`` costs one
      pass. Worst case (the difference only in the highest orders, e.g. a parity design,
      every bound above ``best = 0``): every subset is counted once, as by the reference.

    Args:
        r_codes, s_codes: ``n × d`` int64 code matrices (columns in ``sizes`` order).
        sizes: Number of codes of each column.
        k_max: Largest marginal order, ``1 ≤ k_max ≤ d``.
        cell_limit: Materialise the full ``d``-way difference table when it has at most this
            many cells; otherwise branch and bound.
        r_weight, s_weight: The positive integer weights ``a`` and ``b`` of the two counts.

    Returns:
        The maximal absolute (weighted) count difference (an int; divide by ``n`` for ``E_abs``,
        by ``lcm(|R|, |S|)`` with the proportion weights).

    Raises:
        ValueError: ``k_max`` out of range, weights that are not positive ints, or weighted
            totals too large for exact float64 sums (``a·|R| + b·|S| ≥ 2⁵³``).
    """
    d = len(sizes)
    if not 1 <= k_max <= d:
        raise ValueError(f"k_max ({k_max!r}) must be between 1 and the number of columns ({d})")
    for label, weight in (("r_weight", r_weight), ("s_weight", s_weight)):
        if isinstance(weight, bool) or not isinstance(weight, numbers.Integral) or weight < 1:
            raise ValueError(f"{label} ({weight!r}) must be an int >= 1")
    if r_weight * len(r_codes) + s_weight * len(s_codes) >= 2**53:
        raise ValueError(
            f"weighted totals ({r_weight} × {len(r_codes)} + {s_weight} × {len(s_codes)}) must stay below 2**53 "
            "for exact sums; compare datasets whose sizes share a larger common divisor (resize one)")
    sizes = tuple(int(s) for s in sizes)
    r_weight, s_weight = int(r_weight), int(s_weight)
    if math.prod(sizes) > cell_limit:
        return _pruned_max_difference(r_codes, s_codes, sizes, k_max=k_max, r_weight=r_weight, s_weight=s_weight)
    best = 0
    cells = math.prod(sizes)
    full = (r_weight * np.bincount(_radix(r_codes, sizes), minlength=cells)
            - s_weight * np.bincount(_radix(s_codes, sizes), minlength=cells)).reshape(sizes)
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
    any_size: ClassVar[bool] = False  # ratios of add-one smoothed *counts*: |R| = |S| needed

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
