"""Maximal error of conditional means, released with the resized mean (Hod & Canetti 2024, 4.5.3).

For an averaging column ``a`` (``target``) with public bounds ``[L, U]`` and group-by columns
``C(a)`` (``by``, plus the "none" column ⊥ when ``overall`` is true) the error measure is

    E_ā(R, S) = max_{b ∈ C(a)} max_{v ∈ V(b)} |q_{a|b←v}(R) − q_{a|b←v}(S)|

where ``q_{a|b←v}`` is the mean of ``a`` over the records whose column ``b`` falls in group
``v``. The DP release replaces the private mean by the resized mean of Algorithm 2 with the
public size ``m̂_{b←v} = max{1, ⌊q_{b←v}(S) − margin · n⌋}`` (the candidate's group count less
the count error that the absolute-marginals criterion tolerates, ``margin = T_abs``): the
group's values are subsampled without replacement to ``m̂`` values when the group is larger
and padded with the constant ``fill`` when it is smaller. The ⊥ term uses ``m = n``, which is
public (Section 4.4.2), so it is the plain mean.

How a spec declares the groups (TOML)::

    [[acceptance]]
    kind = "conditional_mean"
    name = "birth_weight_mean"
    threshold = 100.0
    epsilon = 0.17
    target = "birth_weight"
    target_bounds = [1400, 4600]
    by = ["birth_sex", "parity", "gestation_week", "mother_age"]
    resize_margin = 0.01          # T_abs of the absolute-marginals criterion
    [acceptance.groups]           # optional coarse re-binning, per group-by column
    mother_age = [["<18", "18-19", "20-24"], ["25-29"], ["30-34"], ["35-36", "37-39", "40-42", "43-44", "44<"]]
    parity = [[0], [1], [2, 3, 4]]
    gestation_week = [["<29", "29-31", "32-33", "34-36"], ["37-41", "41<"]]

``groups`` maps a column of ``by`` to a list of code groups; each group lists codes (ints) or
code labels (strings) of that column, and together the groups must cover every code exactly
once. A column of ``by`` without an entry is grouped by its own codes. Groups empty in the
candidate are skipped (their mean is undefined on ``S``, which is public). Target values are
the domain's numeric code values clipped to ``target_bounds``.

Privacy:
    ε-DP under replace-one neighbours with ``n`` and ``S`` public. For a fixed subsampling
    order the resized mean of a group has sensitivity ``(U − L)/m̂`` (Proposition 7): the order
    is a uniformly random permutation of row positions, shared by all group-by columns, and a
    group keeps its first ``m̂`` records in it, so removing, adding or changing one record of
    a group changes at most one of the ``m̂`` summed values (a removed kept record is replaced
    by the group's next record, an added one displaces the group's last kept record or a
    padding copy of ``fill``), and a record moving between groups is one removal and one
    addition in different terms. Proposition 3 bounds the maximum by
    ``Δ = (U − L)/min_{b,v} m̂_{b←v}`` (over the terms present); ``m̂`` depends on the public
    candidate and ``n`` only. Drawing the order at random keeps ε-DP (Proposition 8), so it
    comes from ``source.generator`` (post-processing stream; in release mode its seed is in
    the transcript). One Laplace release per criterion; no internal split.

References:
    Hod & Canetti (2024), Section 4.5.3, Algorithm 2, Propositions 3, 7 and 8; Table 2 rows
    3-5. OpenDP's resize transformation (Algorithm 2's source) is described, not copied.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import (
    AcceptanceCriterion,
    CriterionResult,
    FINITE,
    check_column_names,
    check_not_empty,
    check_same_size,
    checked_record_count,
    codes_of,
    register_criterion,
    release_laplace_measure,
    require_columns,
)
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import BOOLEAN, Interval, RealPair, Text, Unconstrained
from privlab.platform.dp.budget import preflight
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["ConditionalMeanError", "GroupTerm", "resize_sizes", "resized_group_means"]

GroupSpec = tuple[tuple[str, tuple[tuple[int | str, ...], ...]], ...]


@dataclasses.dataclass(frozen=True)
class GroupTerm:
    """One group-by column resolved against the domain: code → group id, and group count."""

    column: str | None  # None: the "none" column ⊥ (one group holding every record)
    group_of_code: np.ndarray
    n_groups: int


def resize_sizes(candidate_counts: np.ndarray, *, n: int, margin: float) -> np.ndarray:
    """``m̂_v = max{1, ⌊q_v(S) − margin · n⌋}`` per group (Section 4.5.3).

    Args:
        candidate_counts: Group counts of the public candidate.
        n: The public number of records.
        margin: Fraction of ``n`` subtracted (the absolute-marginals threshold).

    Returns:
        int64 resize parameters, ≥ 1.
    """
    raw = np.floor(np.asarray(candidate_counts, dtype=np.float64) - margin * n)
    return np.maximum(1, raw).astype(np.int64)


def resized_group_means(
    groups: np.ndarray,
    values: np.ndarray,
    sizes: np.ndarray,
    order: np.ndarray,
    *,
    fill: float,
) -> np.ndarray:
    """Algorithm 2 for every group at once: the mean of exactly ``sizes[v]`` values per group.

    A group with more than ``m = sizes[v]`` records keeps its first ``m`` records in ``order``
    (a uniformly random order gives a uniform sample without replacement); a group with fewer
    records is padded with ``m − n_v`` copies of ``fill``.

    Args:
        groups: Group id (0 .. G−1) of each record.
        values: The averaged value of each record (already clipped to ``[L, U]``).
        sizes: Resize parameter ``m`` of each group (≥ 1).
        order: A permutation of the record indices (the randomness ``r``), first kept first.
        fill: The public constant ``w ∈ [L, U]``.

    Returns:
        float64 array of the G resized means.
    """
    n_groups = len(sizes)
    key = groups[order]
    small = np.int16 if n_groups <= np.iinfo(np.int16).max else np.int64
    order = order[np.argsort(key.astype(small), kind="stable")]  # by group, then by ``order`` (radix)
    g_sorted = groups[order]
    counts = np.bincount(groups, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.arange(len(groups)) - starts[g_sorted]
    keep = rank < sizes[g_sorted]
    sums = np.bincount(g_sorted[keep], weights=values[order][keep], minlength=n_groups)
    sums = sums + np.maximum(sizes - counts, 0) * fill
    return sums / sizes


@register_criterion
@dataclasses.dataclass(frozen=True, kw_only=True)
class ConditionalMeanError(AcceptanceCriterion):
    """Maximal absolute error of the conditional means of ``target`` by the ``by`` groups.

    Spec keys: ``name``, ``threshold``, ``epsilon``, ``target`` (a numeric column),
    ``target_bounds`` (``[L, U]``, public, ``L < U``), ``by`` (list of group-by columns, may be empty
    when ``overall``), ``resize_margin`` (fraction of ``n`` in [0, 1); the paper's
    ``T_abs = 0.01``), ``groups`` (optional coarse re-binning; see the module docstring),
    ``overall`` (include the ungrouped mean ⊥; default true), ``fill`` (Algorithm 2's
    constant in ``[L, U]``; default the midpoint).

    :meth:`error` is the exact ``E_ā`` (plain means); :meth:`resized_error` is the statistic
    that :meth:`release` perturbs (resized means on ``R``, plain means on ``S``).

    Privacy:
        ε-DP, Laplace with ``Δ = (U − L)/min m̂`` (:meth:`candidate_sensitivity`; see the module
        docstring for the derivation). :meth:`sensitivity` is the candidate-free worst case
        ``U − L`` (``m̂ ≥ 1``).

    References:
        Hod & Canetti (2024), Section 4.5.3, Algorithm 2 and Proposition 7.
    """

    kind: ClassVar[str] = "conditional_mean"
    description: ClassVar[str] = "means of a column within groups of other columns: largest absolute error"
    any_size: ClassVar[bool] = True  # group means: R and S may have different sizes

    target: str
    target_bounds: tuple[float, float]
    by: tuple[str, ...]
    resize_margin: float
    groups: GroupSpec = ()
    cuts: tuple[tuple[str, tuple[float, ...]], ...] = ()
    overall: bool = True
    fill: float | None = None

    _parameter_constraints: ClassVar = {
        **AcceptanceCriterion._parameter_constraints, "target": [Text("a column name")],
        "target_bounds": [RealPair()], "by": [Unconstrained()],
        "resize_margin": [Interval(numbers.Real, 0, 1, closed="left")], "groups": [Unconstrained()],
        "cuts": [Unconstrained()], "overall": [BOOLEAN], "fill": [None, FINITE]}

    def _check_together(self) -> None:
        super()._check_together()
        where = f"criterion {self.name!r}"
        lo, hi = float(self.target_bounds[0]), float(self.target_bounds[1])
        object.__setattr__(self, "target_bounds", (lo, hi))
        by = check_column_names(self.name, "by", self.by, allow_empty=True)
        if self.target in by:
            raise SpecError(f"{where}: by ({list(by)!r}) must not contain the target column {self.target!r}")
        if not by and not self.overall:
            raise SpecError(f"{where}: by ({list(by)!r}) must name a column when overall is false")
        object.__setattr__(self, "by", by)
        object.__setattr__(self, "resize_margin", float(self.resize_margin))
        fill = (lo + hi) / 2 if self.fill is None else self.fill
        if not lo <= fill <= hi:
            raise SpecError(f"{where}: fill ({self.fill!r}) must be a number in target_bounds [{lo!r}, {hi!r}]")
        object.__setattr__(self, "fill", float(fill))
        object.__setattr__(self, "groups", self._normalise_groups(self.groups, by))
        object.__setattr__(self, "cuts", self._normalise_cuts(self.cuts, by))

    def _normalise_cuts(self, value: object, by: tuple[str, ...]) -> tuple[tuple[str, tuple[float, ...]], ...]:
        """``cuts = {column = [c1, c2, ...]}``: group a numeric column by value, ``v < c1``,
        ``c1 ≤ v < c2``, …, ``v ≥ c_k``, using each code's numeric value. Unlike ``groups``
        (codes or labels of one binning), cuts mean the same for every binning alternative of
        the column, so one spec serves a whole transformation space."""
        where = f"criterion {self.name!r}"
        items = list(value.items()) if isinstance(value, Mapping) else list(value) if isinstance(value, (list, tuple)) else None
        if items is None:
            raise SpecError(f"{where}: cuts ({value!r}) must be a table {{column = [cut, ...]}}")
        out = []
        declared = {c for c, _ in self.groups}
        for item in items:
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise SpecError(f"{where}: cuts ({value!r}) must map columns to lists of numbers")
            column, points = item
            if column not in by:
                raise SpecError(f"{where}: cuts names column {column!r}, which is not in by ({list(by)!r})")
            if column in declared:
                raise SpecError(f"{where}: column {column!r} has both groups and cuts; keep one")
            if (isinstance(points, (str, bytes)) or not isinstance(points, Sequence) or not points
                    or any(isinstance(p, bool) or not isinstance(p, numbers.Real) or not math.isfinite(p) for p in points)
                    or list(points) != sorted(set(points))):
                raise SpecError(f"{where}: cuts[{column!r}] ({points!r}) must be increasing finite numbers")
            out.append((column, tuple(float(p) for p in points)))
        if len({c for c, _ in out}) != len(out):
            raise SpecError(f"{where}: cuts ({value!r}) must list each column once")
        return tuple(out)

    def _normalise_groups(self, value: object, by: tuple[str, ...]) -> GroupSpec:
        where = f"criterion {self.name!r}"
        items: Sequence[object]
        if isinstance(value, Mapping):
            items = list(value.items())
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            raise SpecError(f"{where}: groups ({value!r}) must be a table {{column = [[codes], ...]}}")
        out = []
        for item in items:
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise SpecError(f"{where}: groups ({value!r}) must map columns to lists of code groups")
            column, code_groups = item
            if column not in by:
                raise SpecError(f"{where}: groups names column {column!r}, which is not in by ({list(by)!r})")
            if isinstance(code_groups, (str, bytes)) or not isinstance(code_groups, Sequence) or not code_groups:
                raise SpecError(f"{where}: groups[{column!r}] ({code_groups!r}) must be a non-empty list of lists")
            normalised = []
            for group in code_groups:
                if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
                    raise SpecError(f"{where}: groups[{column!r}] item ({group!r}) must be a non-empty list of codes")
                for code in group:
                    if isinstance(code, bool) or not isinstance(code, (numbers.Integral, str)):
                        raise SpecError(
                            f"{where}: groups[{column!r}] code ({code!r}) must be an int code or a label"
                        )
                normalised.append(tuple(int(c) if isinstance(c, numbers.Integral) else c for c in group))
            out.append((column, tuple(normalised)))
        if len({c for c, _ in out}) != len(out):
            raise SpecError(f"{where}: groups ({value!r}) must list each column once")
        return tuple(out)

    # --- resolution against the domain ----------------------------------------------------------

    def terms(self, domain: Domain) -> list[GroupTerm]:
        """The group-by terms resolved against ``domain`` (⊥ first when ``overall``).

        Raises:
            SpecError: Unknown or nominal target, unknown ``by`` column, or ``groups`` that name
                an unknown code or do not partition the column's codes.
        """
        where = f"criterion {self.name!r}"
        require_columns(self.name, "target", [self.target], domain, numeric=True)
        require_columns(self.name, "by", self.by, domain)
        declared = dict(self.groups)
        cuts = dict(self.cuts)
        if cuts:
            require_columns(self.name, "cuts", list(cuts), domain, numeric=True)
        out = [GroupTerm(None, np.zeros(1, dtype=np.int64), 1)] if self.overall else []
        for column in self.by:
            col = domain[column]
            if column in cuts:
                group_of = np.searchsorted(np.asarray(cuts[column]), col.value_array(), side="right").astype(np.int64)
                out.append(GroupTerm(column, group_of, len(cuts[column]) + 1))
                continue
            if column not in declared:
                out.append(GroupTerm(column, np.arange(col.size, dtype=np.int64), col.size))
                continue
            group_of = np.full(col.size, -1, dtype=np.int64)
            for gid, group in enumerate(declared[column]):
                for code in group:
                    if isinstance(code, str):
                        if code not in col.labels:
                            raise SpecError(
                                f"{where}: groups[{column!r}] label {code!r} is not a code of {column!r} "
                                f"({', '.join(col.labels)})"
                            )
                        code = col.labels.index(code)
                    if not 0 <= code < col.size:
                        raise SpecError(f"{where}: groups[{column!r}] code {code!r} is outside 0..{col.size - 1}")
                    if group_of[code] != -1:
                        raise SpecError(f"{where}: groups[{column!r}] puts code {code!r} in two groups")
                    group_of[code] = gid
            missing = np.flatnonzero(group_of < 0)
            if missing.size:
                raise SpecError(
                    f"{where}: groups[{column!r}] must cover every code; missing "
                    f"{', '.join(col.labels[i] for i in missing)}"
                )
            out.append(GroupTerm(column, group_of, len(declared[column])))
        return out

    @property
    def bounds(self) -> tuple[float, float]:
        """The public ``[L, U]`` of the target (``target_bounds``)."""
        return self.target_bounds

    def _target_values(self, domain: Domain) -> np.ndarray:
        return np.clip(domain[self.target].value_array(), *self.bounds)

    def _prepare(
        self, frame: pd.DataFrame, domain: Domain, what: str
    ) -> tuple[list[GroupTerm], np.ndarray, list[np.ndarray]]:
        terms = self.terms(domain)
        names = [self.target, *[t.column for t in terms if t.column is not None]]
        codes = codes_of(frame, domain, names, what=f"criterion {self.name!r}: {what}")
        x = self._target_values(domain)[codes[:, 0]]
        groups, j = [], 1
        for term in terms:
            if term.column is None:
                groups.append(np.zeros(len(frame), dtype=np.int64))
            else:
                groups.append(term.group_of_code[codes[:, j]])
                j += 1
        return terms, x, groups

    # --- measures -------------------------------------------------------------------------------

    @staticmethod
    def _exact(terms: list[GroupTerm], xr: np.ndarray, gr: list[np.ndarray], xs: np.ndarray,
               gs: list[np.ndarray]) -> float:
        worst = 0.0
        for term, g_r, g_s in zip(terms, gr, gs, strict=True):
            nr = np.bincount(g_r, minlength=term.n_groups)
            ns = np.bincount(g_s, minlength=term.n_groups)
            ok = (nr > 0) & (ns > 0)
            if ok.any():
                mr = np.bincount(g_r, weights=xr, minlength=term.n_groups)[ok] / nr[ok]
                ms = np.bincount(g_s, weights=xs, minlength=term.n_groups)[ok] / ns[ok]
                worst = max(worst, float(np.abs(mr - ms).max()))
        return worst

    def _sizes(self, terms: list[GroupTerm], gs: list[np.ndarray], n: int) -> list[np.ndarray]:
        out = []
        for term, g_s in zip(terms, gs, strict=True):
            if term.column is None:
                out.append(np.array([n], dtype=np.int64))
                continue
            ns = np.bincount(g_s, minlength=term.n_groups)
            out.append(np.where(ns > 0, resize_sizes(ns, n=n, margin=self.resize_margin), 0))
        return out

    def _resized(self, terms: list[GroupTerm], xr: np.ndarray, gr: list[np.ndarray], xs: np.ndarray,
                 gs: list[np.ndarray], sizes_all: list[np.ndarray], order: np.ndarray) -> float:
        worst = 0.0
        for term, g_r, g_s, sizes in zip(terms, gr, gs, sizes_all, strict=True):
            present = sizes > 0
            if term.column is None:
                mr = np.array([xr.mean()])
            else:
                mr = resized_group_means(g_r, xr, np.where(present, sizes, 1), order, fill=self.fill)
            ns = np.bincount(g_s, minlength=term.n_groups)
            ms = np.bincount(g_s, weights=xs, minlength=term.n_groups)[present] / ns[present]
            worst = max(worst, float(np.abs(mr[present] - ms).max()))
        return worst

    def _delta(self, sizes_all: list[np.ndarray]) -> tuple[float, float]:
        sizes = np.concatenate(sizes_all)
        min_m = float(sizes[sizes > 0].min())
        return (self.bounds[1] - self.bounds[0]) / min_m, min_m

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """The exact ``E_ā(R, S)`` with plain means (groups empty in ``R`` or ``S`` skipped).

        Means do not depend on the sizes, so ``R`` and ``S`` may differ in length (``any_size``).
        """
        check_not_empty(transformed, candidate, name=self.name)
        terms, xr, gr = self._prepare(transformed, domain, "transformed data")
        _, xs, gs = self._prepare(candidate, domain, "candidate")
        return self._exact(terms, xr, gr, xs, gs)

    def resize_parameters(self, candidate: pd.DataFrame, *, domain: Domain) -> list[np.ndarray]:
        """``m̂`` per group of each term, from the public candidate and ``n`` (0: group skipped)."""
        terms, _, gs = self._prepare(candidate, domain, "candidate")
        return self._sizes(terms, gs, len(candidate))

    def resized_error(
        self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain, rng: np.random.Generator
    ) -> float:
        """``Ê_ā(R, S)``: resized means on ``R`` (order drawn from ``rng``) against plain means on ``S``.

        Groups empty in the candidate are skipped. For a fixed ``rng`` state this has
        sensitivity :meth:`candidate_sensitivity` in ``R``.
        """
        check_same_size(transformed, candidate, name=self.name)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
        terms, xr, gr = self._prepare(transformed, domain, "transformed data")
        _, xs, gs = self._prepare(candidate, domain, "candidate")
        sizes = self._sizes(terms, gs, len(candidate))
        return self._resized(terms, xr, gr, xs, gs, sizes, rng.permutation(len(transformed)))

    def sensitivity(self, n: int) -> float:
        """Candidate-free worst case ``U − L`` (every ``m̂ ≥ 1``)."""
        checked_record_count(n)
        return self.bounds[1] - self.bounds[0]

    def candidate_sensitivity(self, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """``(U − L)/min m̂`` over the terms present (Proposition 7 with Proposition 3)."""
        return self._delta(self.resize_parameters(candidate, domain=domain))[0]

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
        """Release ``Ê_ā + Lap((U − L)/(ε min m̂))`` and compare it with the threshold.

        ``true_value`` (research mode) is ``Ê_ā``, the statistic that was perturbed; the plain
        ``E_ā`` is in ``details`` as ``exact_error`` (research mode only).

        Privacy:
            ε-DP; see the class docstring. ``min_resize`` in ``details`` is public.
        """
        check_same_size(transformed, candidate, name=self.name)
        terms, xr, gr = self._prepare(transformed, domain, "transformed data")
        _, xs, gs = self._prepare(candidate, domain, "candidate")
        sizes = self._sizes(terms, gs, len(candidate))
        delta, min_m = self._delta(sizes)
        preflight(ledger, [PrivacyEvent(name=f"acceptance:{self.name}", mechanism="laplace", epsilon=self.epsilon,
                                        sensitivity=delta, noise_scale=delta / self.epsilon, scope=scope,
                                        step="acceptance")])  # refuse before the resize order is drawn
        rng = source.generator(purpose=f"acceptance:{self.name}:resize")
        value = self._resized(terms, xr, gr, xs, gs, sizes, rng.permutation(len(transformed)))
        exact = self._exact(terms, xr, gr, xs, gs) if source.mode == "research" else math.nan
        return release_laplace_measure(
            self, value, sensitivity=delta, source=source, ledger=ledger, scope=scope,
            public_details=(("min_resize", min_m),),
            research_details=(("exact_error", exact),),
        )
