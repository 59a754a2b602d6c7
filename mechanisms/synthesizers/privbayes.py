"""PrivBayes for non-binary discrete domains: a DP Bayesian network, then noisy conditionals.

Fitting on ``d`` columns with ``n`` records (``n`` public) and budget ε runs two phases:

1. **Structure** (budget ε₁ = ``epsilon_split``·ε). The first attribute is chosen uniformly at
   random: a data-independent draw from the run's source that costs no ε (as in PrivBayes'
   greedy construction). Then ``d − 1`` greedy steps each pick one (attribute, parent set)
   pair ``(X, Π)`` with ``X`` not yet in the network and ``Π`` a subset of the attributes
   already in it, using the exponential mechanism with ε₁/(d−1) over the score
   ``I(X; Π)`` (mutual information, in nats) or the PrivBayes ``R`` score. The candidate
   parent sets depend only on public facts (the domain sizes, ``n``, ε and the hyperparameters)
   and on earlier DP selections:

   * ``degree = k``: every ``Π`` of size ``min(k, |V|)`` (PrivBayes' fixed-degree network);
   * ``theta = θ``: every *maximal* θ-useful ``Π``: the noisy table of ``(X, Π)`` is θ-useful
     when its average cell count is at least θ Laplace scales,
     ``n / |dom(X, Π)| ≥ θ · 2/ε_t`` with ``ε_t = ε₂/d``, i.e. ``n·ε₂ / (2·d·|dom(X, Π)|) ≥ θ``,
     and maximal when adding any other attribute of the network breaks that (PrivBayes'
     generalisation to non-binary attributes; ``(X, ∅)`` when not even ``X`` alone is
     θ-useful). The factor 2 is the count table's replace-one sensitivity; the original C++
     implementation writes the same bound as ``ε·n/(4·d·θ)`` with ε₂ = ε/2.

2. **Conditionals** (budget ε₂ = ε − ε₁). For each of the ``d`` pairs, the count table of
   ``(X, Π)`` gets Laplace noise of scale ``2/ε_t`` (``ε_t = ε₂/d``), negative cells are
   set to 0, and each parent configuration's row is normalised into ``Pr[X | π]`` (a row
   whose noisy counts are all ≤ 0 becomes uniform, a data-independent fallback).

The shares are split with :func:`~privlab.mechanisms.synthesizers.base.split_epsilon`, so the
``d − 1`` structure steps and ``d`` tables sum to ε exactly in the ledger.

Candidates grow combinatorially (``C(|V|, k)`` parent sets per attribute). They are bounded
in two data-independent ways: ``max_table_cells`` drops any pair whose table would have more
cells (the degree flavour then falls back to the largest smaller parent-set size that fits),
and when a step still has more than ``max_candidates`` candidates a uniformly random subset of
that size is scored, drawn from ``source.generator`` (public randomness, no ε). Scoring a
candidate costs one ``bincount`` over the ``n`` records.

Sampling is in topological order: each column is drawn from its conditional given the
parent codes already sampled, by a vectorised inverse CDF per parent configuration.

Privacy:
    ε-DP under replace-one neighbouring with ``n`` public: ``d − 1`` exponential-mechanism
    steps of ε₁/(d−1) with the utility sensitivities of :func:`~.privbayes_scores.mutual_information_sensitivity`
    (or :func:`~.privbayes_scores.r_score_sensitivity`), and ``d`` Laplace releases of count tables (L1
    sensitivity 2: replacing one record moves one count from one cell to another) with
    ε₂/d each, composed sequentially. The first attribute and the candidate subsets are
    data-independent; sampling is post-processing.

References:
    Zhang, Cormode, Procopiuc, Srivastava & Xiao (2017), "PrivBayes: Private Data Release via
    Bayesian Networks", ACM TODS 42(4), article 25: the greedy network construction
    (GreedyBayes), the sensitivity lemma for mutual information, the R score, θ-usefulness
    and maximal parent sets for non-binary attributes; Hod & Canetti (2024), Section 4.7.2
    (``epsilon_split``, the theta and degree flavours and their grids).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from numbers import Integral, Real
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from privlab.mechanisms.synthesizers.base import (
    BudgetStep,
    Synthesizer,
    register_synthesizer,
    split_epsilon,
)
from privlab.mechanisms.synthesizers.network_model import BayesianNetworkModel, parent_index
from privlab.mechanisms.synthesizers.privbayes_scores import (
    mutual_information,
    mutual_information_sensitivity,
    r_score,
    r_score_sensitivity,
)
from privlab.mechanisms.tabular import bayesian_network
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval, Options
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["SCORES", "TABLE_SENSITIVITY", "PrivBayes", "PrivBayesParams", "maximal_parent_sets"]

SCORES = ("mi", "r")
"""Score functions of the structure phase: mutual information and PrivBayes' R."""

TABLE_SENSITIVITY = 2.0
"""L1 sensitivity of a count table under replace-one: one count −1, another +1."""


# --- scores and their sensitivities -------------------------------------------------------


# --- candidate parent sets ---------------------------------------------------------------


def maximal_parent_sets(sizes: Sequence[int], max_cells: float) -> list[tuple[int, ...]]:
    """The maximal subsets of ``range(len(sizes))`` whose joint domain has ≤ ``max_cells`` cells.

    A subset ``S`` qualifies when ``∏_{i∈S} sizes[i] ≤ max_cells`` and no ``j ∉ S`` can be
    added without exceeding it. Subsets are index tuples in increasing order, listed in
    lexicographic order. When ``max_cells < 1`` nothing qualifies and the result is empty.

    Args:
        sizes: Domain sizes (>= 1) of the attributes available as parents.
        max_cells: The cell budget for the parent set.

    Returns:
        The maximal qualifying subsets (``[()]`` when no attribute fits but ``max_cells ≥ 1``).

    References:
        Zhang et al. (2017), PrivBayes, the maximal parent sets of the θ-useful generalisation.
    """
    sizes = [int(s) for s in sizes]
    if any(s < 1 for s in sizes):
        raise ValueError(f"sizes ({sizes!r}) must all be >= 1")
    if not max_cells >= 1:
        return []
    # suffix[i]: the product of sizes[i:], an upper bound on what the indices from i can add.
    suffix = [1] * (len(sizes) + 1)
    for i in range(len(sizes) - 1, -1, -1):
        suffix[i] = suffix[i + 1] * sizes[i]
    out: list[tuple[int, ...]] = []

    def extend(start: int, chosen: tuple[int, ...], cells: int, skipped_min: float) -> None:
        # skipped_min: the smallest size among the indices below ``start`` left out so far.
        if start == len(sizes):
            if cells * skipped_min > max_cells:  # no left-out index fits: maximal
                out.append(chosen)
            return
        size = sizes[start]
        if cells * size <= max_cells:
            extend(start + 1, (*chosen, start), cells * size, skipped_min)
        left_out = min(skipped_min, size)
        # Leaving ``start`` out is only worth exploring if some completion could be maximal:
        # even the largest completion must leave no room for the smallest left-out size.
        if cells * suffix[start + 1] * left_out > max_cells:
            extend(start + 1, chosen, cells, left_out)

    extend(0, (), 1, math.inf)
    return out


# --- the fitted model --------------------------------------------------------------------


# --- hyperparameters ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivBayesParams(ConstrainedParams):
    """PrivBayes hyperparameters; exactly one of ``theta`` and ``degree`` is set.

    Attributes:
        epsilon_split: Fraction of ε for the structure, in (0, 1) (births grid: 0.1, 0.25,
            0.5, 0.7). Unused when the domain has one column.
        theta: θ-usefulness flavour: parent sets are the maximal sets whose noisy table has
            ``n·ε₂/(2·d·|dom(X, Π)|) ≥ θ`` (births grid 2 … 100).
        degree: Fixed-degree flavour: every attribute gets ``min(degree, |V|)`` parents
            (births grid 2, 3, 4).
        score: ``"mi"`` (mutual information) or ``"r"`` (PrivBayes' R score).
        max_candidates: At most this many (attribute, parent set) candidates are scored per
            structure step; a larger candidate set is subsampled uniformly (no ε).
        max_table_cells: Pairs whose table ``|dom(X, Π)|`` exceeds this are not candidates.

    Raises:
        TypeError: a field has the wrong kind of value.
        SpecError: a field has a wrong value, or both/neither of ``theta`` and ``degree``.
    """

    epsilon_split: float
    theta: float | None = None
    degree: int | None = None
    score: str = "mi"
    max_candidates: int = 1000
    max_table_cells: int = 1 << 22

    _parameter_constraints: ClassVar = {
        "epsilon_split": [Interval(Real, 0, 1, closed="neither")],
        "theta": [None, Interval(Real, 0, None, closed="neither")],
        "degree": [None, Interval(Integral, 1, None, closed="left")],
        "score": [Options(str, SCORES)],
        "max_candidates": [Interval(Integral, 1, None, closed="left")],
        "max_table_cells": [Interval(Integral, 1, None, closed="left")],
    }

    def _check_together(self) -> None:
        if (self.theta is None) == (self.degree is None):
            raise SpecError(
                f"theta ({self.theta!r}) and degree ({self.degree!r}) must have exactly one set: "
                "theta for the θ-usefulness flavour, degree for the fixed-degree flavour"
            )


# --- the synthesizer ---------------------------------------------------------------------


@register_synthesizer
class PrivBayes(Synthesizer):
    """PrivBayes: a greedy DP Bayesian network with Laplace-noised conditionals.

    See the module docstring for the algorithm, the θ and degree flavours and how the
    candidate sets are bounded.

    Fitted attributes:
        model_: The :class:`BayesianNetworkModel` sampled from.
        network_: ``(column, parents)`` pairs in the order they were selected.
        measurements_: ``(clique, noisy counts, Laplace scale)`` of every table released, the
            clique being ``(*parents, child)`` and the counts row-major over it (first column
            most significant), as MST's and AIM's: the white-box view an audit reads.
        domain_, epsilon_, n_records_, events_: see :meth:`Synthesizer.fit`.

    Privacy:
        ε-DP under replace-one neighbouring with ``n`` public. Budget: ε₁ =
        ``epsilon_split``·ε for the structure, ε₁/(d−1) per exponential-mechanism step with
        utility sensitivity ``Δ_I(n)`` (:func:`mutual_information_sensitivity`) or ``3/n``
        (R); ε₂ = ε − ε₁ for the tables, ε₂/d per table, Laplace scale ``2/(ε₂/d)``. With
        one column the whole ε goes to its table. The first attribute is a uniform
        data-independent draw (no ε).

    References:
        Zhang et al. (2017), PrivBayes (TODS), greedy construction and the sensitivity of I;
        Hod & Canetti (2024), Section 4.7.2.
    """

    name: ClassVar[str] = "privbayes"
    Params: ClassVar[type] = PrivBayesParams

    # --- budget ---

    def budget_steps(self, epsilon: float, domain: Domain, n: int) -> tuple[BudgetStep, ...]:
        """``d − 1`` structure steps ``privbayes/structure/<i>`` (i = 2..d) then ``d`` tables
        ``privbayes/table/<i>`` (i = 1..d), in network order.

        Raises:
            SchemaError: ``n < 2`` with two or more columns (nothing can be selected), no
                record at all, or a column larger than ``max_table_cells``.
        """
        params: PrivBayesParams = self.params
        d = len(domain)
        if n < 1:
            raise SchemaError("privbayes needs at least one record; the data is empty")
        too_big = [c.name for c in domain if c.size > params.max_table_cells]
        if too_big:
            raise SchemaError(
                f"column(s) {', '.join(too_big)} have more codes than max_table_cells "
                f"({params.max_table_cells}); bin them more coarsely or raise max_table_cells"
            )
        if d == 1:
            return (BudgetStep(name="privbayes/table/1", mechanism="laplace", epsilon=epsilon,
                               sensitivity=TABLE_SENSITIVITY),)
        if n < 2:
            raise SchemaError("privbayes needs at least 2 records to learn a network over several columns")
        split = float(params.epsilon_split)
        weights = [split / (d - 1)] * (d - 1) + [(1.0 - split) / d] * d
        shares = split_epsilon(epsilon, weights)
        sensitivity = mutual_information_sensitivity(n) if params.score == "mi" else r_score_sensitivity(n)
        structure = [
            BudgetStep(name=f"privbayes/structure/{i + 2}", mechanism="exponential",
                       epsilon=shares[i], sensitivity=sensitivity)
            for i in range(d - 1)
        ]
        tables = [
            BudgetStep(name=f"privbayes/table/{i + 1}", mechanism="laplace",
                       epsilon=shares[d - 1 + i], sensitivity=TABLE_SENSITIVITY)
            for i in range(d)
        ]
        return (*structure, *tables)

    # --- candidates ---

    def theta_max_cells(self, n: int, table_epsilon: float) -> float:
        """The largest θ-useful table: ``n·ε_t/(2θ)`` cells (``ε_t`` = one table's ε)."""
        theta = self.params.theta
        if theta is None:
            raise SpecError("theta_max_cells needs the theta flavour (theta is None)")
        return n * table_epsilon / (TABLE_SENSITIVITY * float(theta))

    def candidate_parent_sets(
        self, child_size: int, available: Mapping[int, int], *, n: int, table_epsilon: float
    ) -> list[tuple[int, ...]]:
        """Candidate parent sets (sorted column indices) for one attribute, public inputs only.

        Args:
            child_size: ``|dom(X)|``.
            available: Column index → domain size of the attributes already in the network.
            n: The public number of records.
            table_epsilon: ε of one conditional table (θ flavour).

        Returns:
            Non-empty; ``[()]`` when no parent fits.
        """
        params: PrivBayesParams = self.params
        indices = sorted(available)
        cap = params.max_table_cells / child_size
        if params.degree is not None:
            for size in range(min(params.degree, len(indices)), 0, -1):
                sets = [
                    combo for combo in itertools.combinations(indices, size)
                    if math.prod(available[j] for j in combo) <= cap
                ]
                if sets:
                    return sets
            return [()]
        cap = min(cap, self.theta_max_cells(n, table_epsilon) / child_size)
        sets = [tuple(indices[i] for i in s) for s in maximal_parent_sets([available[j] for j in indices], cap)]
        return sets or [()]

    def _candidates(
        self, chosen: Sequence[int], sizes: Sequence[int], *, n: int, table_epsilon: float
    ) -> list[tuple[int, tuple[int, ...]]]:
        available = {j: sizes[j] for j in chosen}
        out = []
        for child in range(len(sizes)):
            if child in available:
                continue
            for parents in self.candidate_parent_sets(sizes[child], available, n=n, table_epsilon=table_epsilon):
                out.append((child, parents))
        return out

    # --- fitting ---

    def _fit(
        self,
        codes: np.ndarray,
        *,
        domain: Domain,
        steps: tuple[BudgetStep, ...],
        ledger: Ledger,
        source: RandomSource,
        scope: str,
    ) -> None:
        params: PrivBayesParams = self.params
        d, n = codes.shape
        sizes = domain.sizes
        structure, tables = steps[: d - 1], steps[d - 1 :]
        first = int(source.integers(low=0, high=d)) if d > 1 else 0
        nodes: list[tuple[int, tuple[int, ...]]] = [(first, ())]
        for step in structure:
            candidates = self._candidates([c for c, _ in nodes], sizes, n=n, table_epsilon=tables[0].epsilon)
            if len(candidates) > params.max_candidates:
                generator = source.generator(purpose=f"{step.name}/candidate-subsample")
                keep = np.sort(generator.choice(len(candidates), size=params.max_candidates, replace=False))
                candidates = [candidates[int(i)] for i in keep]
            utilities = self._utilities(codes, candidates, sizes)
            nodes.append(candidates[self._exponential(step, utilities, ledger=ledger, source=source, scope=scope)])
        conditionals = []
        measurements = []
        names = domain.names
        for (child, parents), step in zip(nodes, tables, strict=True):
            counts = _count_table(codes, child, parents, sizes, parent_index(codes, parents, sizes))
            noisy = self._laplace(step, counts, ledger=ledger, source=source, scope=scope)
            conditionals.append(_normalise_rows(noisy))
            measurements.append((tuple(names[j] for j in (*parents, child)), noisy.ravel(), step.noise_scale))
        network = tuple((names[child], tuple(names[p] for p in parents)) for child, parents in nodes)
        self.network_ = network
        self.measurements_ = tuple(measurements)
        self.model_ = BayesianNetworkModel(domain=domain, network=network, conditionals=tuple(conditionals))

    def _utilities(
        self, codes: np.ndarray, candidates: Sequence[tuple[int, tuple[int, ...]]], sizes: Sequence[int]
    ) -> np.ndarray:
        score = mutual_information if self.params.score == "mi" else r_score
        cache: dict[tuple[int, ...], np.ndarray] = {}
        utilities = np.zeros(len(candidates), dtype=np.float64)
        for i, (child, parents) in enumerate(candidates):
            if not parents:
                continue  # I(X; ∅) = R(X, ∅) = 0 on every dataset
            if parents not in cache:
                cache[parents] = parent_index(codes, parents, sizes)
            utilities[i] = score(_count_table(codes, child, parents, sizes, cache[parents]))
        return utilities

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.model_.sample_codes(n, rng)


def _count_table(
    codes: np.ndarray, child: int, parents: Sequence[int], sizes: Sequence[int], parent_index: np.ndarray
) -> np.ndarray:
    """Counts of (parent configuration, child code), shape ``(∏ parent sizes, |dom child|)``."""
    return bayesian_network.count_table(parent_index, codes[child], size=sizes[child],
                                        n_configurations=bayesian_network.configuration_count([sizes[p] for p in parents]))


def _normalise_rows(noisy: np.ndarray) -> np.ndarray:
    """Clip at 0 and normalise each row; a row with no positive mass becomes uniform."""
    clipped = np.clip(noisy, 0.0, None)
    totals = clipped.sum(axis=1, keepdims=True)
    uniform = np.full_like(clipped, 1.0 / clipped.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, clipped / np.where(totals > 0, totals, 1.0), uniform)
