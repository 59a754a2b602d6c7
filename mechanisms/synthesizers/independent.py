"""The independent-marginals baseline: Laplace-noised 1-way histograms, sampled independently.

Each of the ``d`` columns gets its count histogram over the domain's codes released with
``Lap(2/(ε/d))`` noise; negative counts are set to 0 and the histogram is normalised (a column
whose noisy counts are all ≤ 0 becomes uniform, a data-independent fallback). Records are
sampled column by column, independently. It is PrivBayes' model with no edges and all of ε
spent on the tables, and the natural floor any correlation-aware synthesizer must beat.

Privacy:
    ε-DP under replace-one neighbouring with ``n`` public: ``d`` Laplace releases of count
    histograms, each of L1 sensitivity 2 (replacing one record moves one count from one code
    to another), with ε/d each (shares summing to ε exactly), composed sequentially. Sampling
    is post-processing.

References:
    Dwork, McSherry, Nissim & Smith (2006) (Laplace mechanism); Zhang et al. (2017), PrivBayes
    (TODS), the independent-attributes baseline of the experiments; Hod & Canetti (2024),
    Section 4.4.2 (n public).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from privlab.mechanisms.synthesizers.base import (
    BudgetStep,
    Synthesizer,
    register_synthesizer,
    split_epsilon,
)
from privlab.mechanisms.synthesizers.network_model import BayesianNetworkModel
from privlab.mechanisms.synthesizers.privbayes import TABLE_SENSITIVITY
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SchemaError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["IndependentMarginals", "IndependentMarginalsParams"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndependentMarginalsParams:
    """The baseline has no hyperparameters (the budget is split evenly over the columns)."""


@register_synthesizer
class IndependentMarginals(Synthesizer):
    """Noisy 1-way histograms, one per column, sampled independently.

    Fitted attributes:
        marginals_: One probability vector per column, in domain order.
        measurements_: ``((column,), noisy counts, Laplace scale)`` per column, as released
            (before clipping): the white-box view an audit reads.
        model_: The equivalent edgeless :class:`BayesianNetworkModel`.
        domain_, epsilon_, n_records_, events_: see :meth:`Synthesizer.fit`.

    Privacy:
        ε-DP under replace-one neighbouring with ``n`` public; ``d`` Laplace steps
        ``independent_marginals/<column>`` with ε/d each, sensitivity 2, scale ``2/(ε/d)``.

    References:
        Dwork, McSherry, Nissim & Smith (2006).
    """

    name: ClassVar[str] = "independent_marginals"
    Params: ClassVar[type] = IndependentMarginalsParams

    def budget_steps(self, epsilon: float, domain: Domain, n: int) -> tuple[BudgetStep, ...]:
        """One Laplace step per column, named ``independent_marginals/<column>``.

        Raises:
            SchemaError: ``n`` is 0 (there is nothing to learn from an empty dataset).
        """
        if n < 1:
            raise SchemaError("independent_marginals needs at least one record; the data is empty")
        shares = split_epsilon(epsilon, [1.0] * len(domain))
        return tuple(
            BudgetStep(name=f"{self.name}/{column.name}", mechanism="laplace", epsilon=share,
                       sensitivity=TABLE_SENSITIVITY)
            for column, share in zip(domain, shares, strict=True)
        )

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
        marginals = []
        measurements = []
        for j, (column, step) in enumerate(zip(domain, steps, strict=True)):
            counts = np.bincount(codes[j], minlength=column.size).astype(np.float64)
            released = self._laplace(step, counts, ledger=ledger, source=source, scope=scope)
            measurements.append(((column.name,), released, step.noise_scale))
            noisy = np.clip(released, 0.0, None)
            total = noisy.sum()
            marginal = noisy / total if total > 0 else np.full(column.size, 1.0 / column.size)
            marginal.setflags(write=False)
            marginals.append(marginal)
        self.marginals_ = tuple(marginals)
        self.measurements_ = tuple(measurements)
        self.model_ = BayesianNetworkModel(
            domain=domain,
            network=tuple((name, ()) for name in domain.names),
            conditionals=tuple(m[None, :] for m in marginals),
        )

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.model_.sample_codes(n, rng)
