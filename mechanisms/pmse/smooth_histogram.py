"""The DP smooth histogram of Wasserman & Zhou (2010), equation (1) of Snoke & Slavković.

The data are clipped to public bounds ``[c_j0, c_j1]`` and binned into ``k`` equal-width
bins per column, ``K = k^q`` cells of equal volume. The released records are ``m`` i.i.d.
draws from the smoothed density::

    f̂*_K(x) = (1 − λ) f̂_K(x) + λ Ω,     Ω = (∏_j (c_j1 − c_j0))⁻¹,           (1)

where ``f̂_K`` is the histogram density: choose a cell with probability
``(1 − λ)·count/n + λ/K``, then a point uniformly inside it. The privacy comes from the
mixing weight λ alone; no noise is added to the counts.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from privlab.mechanisms.pmse.continuous import ContinuousSynthesizer
from privlab.mechanisms.pmse.numeric_data import COUNT, EPSILON, check_count, data_matrix, validate_bounds
from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import ConstrainedParams, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = [
    "MAX_CELLS",
    "SmoothHistogramParams",
    "SmoothHistogramSynthesizer",
    "mixing_weight",
    "smooth_histogram_epsilon",
]

MAX_CELLS = 10**7
"""Largest ``bins ** columns`` accepted (the cell counts are held in memory)."""

_ROUND_UP = 1e-12  # relative, covers the few-ulp error of expm1 and the division


def mixing_weight(epsilon: float, *, cells: int, records: int, draws: int) -> float:
    """The smallest mixing weight λ for which ``draws`` samples from (1) are ε-DP.

    ``λ = K / (K + n (e^{ε/m} − 1))`` with ``K = cells``, ``n = records``, ``m = draws``
    (equation (1) of the paper has ``m = n``), rounded up by a relative 1e-12 so float error
    can only make it more private; 0 when ``e^{ε/m}`` overflows.
    """
    growth = math.expm1(epsilon / draws) if epsilon / draws < 709.0 else math.inf
    raw = cells / (cells + records * growth)
    return min(1.0, raw * (1.0 + _ROUND_UP))


def smooth_histogram_epsilon(weight: float, *, cells: int, records: int, draws: int) -> float:
    """ε of ``draws`` samples from (1) with mixing weight ``weight`` in (0, 1].

    The inverse of :func:`mixing_weight`: ``ε = m · log(1 + K (1 − λ) / (n λ))``.
    """
    return draws * math.log1p(cells * (1.0 - weight) / (records * weight))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SmoothHistogramParams(ConstrainedParams):
    """Hyperparameters of :class:`SmoothHistogramSynthesizer`.

    Attributes:
        epsilon: the total ε; the mixing weight λ is derived from it (:func:`mixing_weight`).
        lower, upper: public bounds ``c_j0, c_j1``, one per column; data outside is clipped.
        bins: k, bins per column (``k ** q`` cells, at most :data:`MAX_CELLS`).
        draws: m, the number of records released; ``None`` releases ``m = n`` records as in
            the paper's equation (1). ε covers exactly these m draws.
    """

    epsilon: float
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    bins: int
    draws: int | None = None

    _parameter_constraints: ClassVar = {"epsilon": [EPSILON], "lower": [Unconstrained()], "upper": [Unconstrained()],
                                        "bins": [COUNT], "draws": [None, COUNT]}  # lower, upper: validate_bounds

    def _check_together(self) -> None:
        lower, upper = validate_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "epsilon", float(self.epsilon))
        cells = self.bins ** len(lower)
        if cells > MAX_CELLS:
            raise ValueError(
                f"bins ({self.bins!r}) must be small enough that bins ** columns "
                f"({self.bins}**{len(lower)} = {cells}) is <= {MAX_CELLS}"
            )


class SmoothHistogramSynthesizer(ContinuousSynthesizer):
    """DP synthetic data: ``m`` draws from the smooth histogram (1), uniform within cells.

    ``fit`` clips and bins the data, charges ε, and draws the ``m`` released cells: with
    probability λ a uniformly random cell, otherwise the cell of a uniformly random record.
    Only the released cell counts are kept. ``sample`` places records uniformly inside the
    released cells.

    Args:
        params: a :class:`SmoothHistogramParams`.

    Attributes:
        counts_: the released multiset of cells, as counts over the ``K`` cells (C order over
            the per-column bin indices); it sums to ``draws_``.
        mixing_weight_: λ.
        draws_: m, the number of released records.
        columns_: the data's column names.

    Privacy:
        ε-DP under replace-one neighbours (n public). One draw picks a cell holding ``c``
        records with probability ``(1−λ)c/n + λ/K``; replacing one record moves one count
        by ±1, so the probability ratio between neighbours is at most
        ``((1−λ)(c+1)/n + λ/K) / ((1−λ)c/n + λ/K) ≤ 1 + K(1−λ)/(nλ)`` (worst at c = 0), and
        the position inside the cell does not depend on the data. m independent draws
        compose to ``ε = m log(1 + K(1−λ)/(nλ))``; solved for λ this is
        ``λ ≥ K / (K + n(e^{ε/m} − 1))``, the bound of equation (1) with m = n. The ledger
        records one step of the declared ε (mechanism ``"smooth_histogram"``, no sensitivity
        or noise scale; λ, K, n and m in its details). No internal split. ``sample`` is
        post-processing of the released cells.

    References:
        Wasserman & Zhou (2010), "A statistical framework for differential privacy", JASA,
        the smoothed histogram; Snoke & Slavković, Section 2.1, equation (1).
    """

    name = "smooth_histogram"
    Params = SmoothHistogramParams

    def _read(self, data: object) -> tuple[np.ndarray, tuple[str, ...]]:
        return data_matrix(data, columns=len(self.params.lower))

    def planned_events(self, records: int, columns: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """The one ledger step :meth:`fit` charges for ``records`` rows (n is public).

        Mechanism ``"smooth_histogram"``, the declared ε, no sensitivity or noise scale; the
        mixing weight λ, the cell count K, n and m in its details.
        """
        p = self.params
        n = check_count("records", records)
        q = len(p.lower)
        if check_count("columns", columns) != q:
            raise SchemaError(f"data has {columns} column(s) but the public bounds declare {q}")
        cells = p.bins**q
        draws = n if p.draws is None else p.draws
        weight = mixing_weight(p.epsilon, cells=cells, records=n, draws=draws)
        return [PrivacyEvent(
            name="smooth_histogram.cells",
            mechanism="smooth_histogram",
            epsilon=p.epsilon,
            scope=scope,
            step="smooth_histogram",
            details=(("mixing_weight", weight), ("cells", cells), ("records", n), ("draws", draws)),
        )]

    def _fit(
        self, matrix: np.ndarray, *, plan: list[PrivacyEvent], ledger: Ledger, source: RandomSource, scope: str
    ) -> None:
        """Charge ε and release ``m`` cells drawn from the smooth histogram."""
        p = self.params
        n, q = matrix.shape
        lo, hi = np.asarray(p.lower), np.asarray(p.upper)
        position = (np.clip(matrix, lo, hi) - lo) / (hi - lo) * p.bins
        index = np.clip(np.floor(position).astype(np.int64), 0, p.bins - 1)
        record_cells = np.ravel_multi_index(tuple(index.T), (p.bins,) * q)
        cells = p.bins**q
        draws = n if p.draws is None else p.draws
        weight = mixing_weight(p.epsilon, cells=cells, records=n, draws=draws)
        (event,) = plan
        ledger.spend(event)
        from_uniform = np.asarray(source.bernoulli(p=weight, size=draws), dtype=bool)
        uniform_cells = np.asarray(source.integers(low=0, high=cells, size=draws))
        records = np.asarray(source.integers(low=0, high=n, size=draws))
        released = np.where(from_uniform, uniform_cells, record_cells[records])

        self.counts_ = np.bincount(released, minlength=cells).astype(np.int64)
        self.mixing_weight_ = weight
        self.draws_ = draws

    def _sample_arrays(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """``n`` records uniform inside released cells, one dataset (post-processing).

        For ``n ≤ m`` the cells are a random subset of the ``m`` released ones, drawn without
        replacement (``n = m`` gives exactly the released multiset); for ``n > m`` they are
        drawn with replacement from the released cell frequencies.
        """
        p = self.params
        if n <= self.draws_:
            chosen = rng.multivariate_hypergeometric(self.counts_, n)
        else:
            chosen = rng.multinomial(n, self.counts_ / self.draws_)
        cells = rng.permutation(np.repeat(np.arange(self.counts_.size), chosen))
        q = len(p.lower)
        index = np.column_stack(np.unravel_index(cells, (p.bins,) * q))
        lo, hi = np.asarray(p.lower), np.asarray(p.upper)
        return [lo + (index + rng.random((n, q))) * ((hi - lo) / p.bins)]
