"""MST: noisy one-way marginals, a private maximum spanning tree of pairs, Private-PGM on top.

Fitting on ``d`` columns with ``n`` records (``n`` public) and a zCDP budget ρ (from ε at the
ledger's δ'', :mod:`~privlab.mechanisms.synthesizers.zcdp`) runs three phases of ρ/3 each:

1. **One-way marginals.** Every column's count vector gets Gaussian noise with ρ/(3d) each:
   σ₁ = √2/sqrt(2ρ/(3d)) = sqrt(3d/ρ).
2. **Selection of a spanning tree.** The model of the one-way measurements alone is estimated
   (post-processing; what Private-PGM would find, in closed form: the product of each column's
   noisy counts projected onto the simplex of total n, :func:`~privlab.mechanisms.synthesizers.pgm.simplex_projection`). Each pair of columns ``(a, b)`` gets the weight
   ``w_ab = ‖M_ab(D) − M̂_ab‖₁``: how badly the noisy independent model explains the pair.
   Kruskal's algorithm then adds ``d − 1`` edges, each chosen among the pairs joining two
   components of the current forest by the exponential mechanism with utility ``w_ab``
   (ℓ1 sensitivity 2 under replace-one), ε = sqrt(8·(ρ/3)/(d−1)) each: the exponential
   mechanism is ε-bounded range, so each choice costs ε²/8 in zCDP (Cesar & Rogers 2021).
3. **Two-way marginals.** The ``d − 1`` selected pairs are measured with ρ/(3(d−1)) each.

Private-PGM (``mbi``) then estimates the graphical model from all the measurements (mirror
descent, ``iters`` steps, the public ``n`` as its total), and :meth:`sample` draws records from
it. With one column the whole ρ measures its one-way marginal.

Differences from the paper and its reference code, each stated so a reader can judge them:
the sensitivities are replace-one's, the relation privlab's ledger guarantees (√2 and 2 where
the paper's add/remove-one has 1 and 1), so σ is √2 times the paper's and the selection's
utility scale twice its own for the same ρ; and the paper's compression of rare
values of each column (merging the values whose noisy one-way count is below 3σ) is not done:
the columns of a privlab domain are already binned by its public transformation.

Privacy:
    ρ-zCDP under replace-one with ``n`` public, hence (ε, δ'')-DP through the ledger's zcdp
    accountant: d Gaussian measurements of count vectors (ℓ2 sensitivity √2, ρ/(3d) each),
    d − 1 exponential-mechanism choices (utility sensitivity 2, ε-bounded range with
    ε²/8 = ρ/(3(d−1)) each, Cesar & Rogers 2021, Lemma 3.2) and d − 1
    Gaussian measurements (ρ/(3(d−1)) each), composed sequentially; the candidate pairs at each
    step depend only on earlier DP choices; estimation and sampling are post-processing.

References:
    McKenna, Miklau & Sheldon (2021), "Winning the NIST Contest: A scalable and general
    approach to differentially private synthetic data", Journal of Privacy and
    Confidentiality 11(3), Section 4 (MST); Kruskal (1956); McSherry & Talwar (2007); Cesar &
    Rogers (2021), ALT, Lemma 3.2.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import ClassVar

import numpy as np

from privlab.mechanisms.synthesizers import pgm
from privlab.mechanisms.synthesizers.base import BudgetStep, register_synthesizer
from privlab.mechanisms.synthesizers.zcdp import (
    COUNT_L1_SENSITIVITY,
    COUNT_L2_SENSITIVITY,
    SelectionStep,
    Step,
    ZcdpSynthesizer,
    hyperparameter_count,
    hyperparameter_positive,
    selection_epsilon,
)
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SchemaError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["MST", "MSTParams"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MSTParams:
    """MST hyperparameters.

    Attributes:
        iters: Mirror-descent steps of Private-PGM's estimate from all the measurements.
        max_model_size: Largest model in MB (8 bytes per cell of the junction tree): pairs
            whose two-way table alone exceeds it are not candidates, and a domain where no
            spanning tree of the remaining pairs exists is refused before any budget is spent.

    Raises:
        TypeError, SpecError: a bad value; SpecError too when Private-PGM is not installed
            (the message names the ``pgm`` extra).
    """

    iters: int = 1000
    max_model_size: float = 80.0

    def __post_init__(self) -> None:
        hyperparameter_count("iters", self.iters, 1)
        hyperparameter_positive("max_model_size", self.max_model_size)
        pgm.require_mbi("mst", load=False)


@register_synthesizer
class MST(ZcdpSynthesizer):
    """MST: Gaussian one-way marginals, an exponential-mechanism spanning tree of pairs, their
    Gaussian two-way marginals, and Private-PGM's model of them (module docstring).

    Fitted attributes:
        model_: Private-PGM's ``MarkovRandomField``.
        tree_: The selected pairs ``(a, b)`` (column names) in the order chosen.
        measurements_: ``(clique, noisy counts, σ)`` of every measurement, in order.
        rho_, delta_: The zCDP budget spent and the δ'' it was read at.
        domain_, epsilon_, n_records_, events_: see :meth:`Synthesizer.fit`.

    Privacy:
        ρ-zCDP under replace-one with ``n`` public (module docstring).
    """

    name: ClassVar[str] = "mst"
    Params: ClassVar[type] = MSTParams

    def _pairs(self, domain: Domain) -> list[tuple[int, int]]:
        cap_cells = self.params.max_model_size * 2**20 / pgm.BYTES_PER_CELL
        sizes = domain.sizes
        return [(a, b) for a, b in itertools.combinations(range(len(domain)), 2) if sizes[a] * sizes[b] <= cap_cells]

    def zcdp_steps(self, rho: float, domain: Domain, n: int) -> tuple[Step, ...]:
        """``mst/oneway/<column>`` (d), then ``mst/select/<i>`` and ``mst/twoway/<i>``
        (i = 1..d−1).

        Raises:
            SchemaError: no record, or no spanning tree of the pairs within ``max_model_size``.
        """
        d = len(domain)
        if n < 1:
            raise SchemaError("mst needs at least one record; the data is empty")
        if d == 1:
            return (BudgetStep(name=f"mst/oneway/{domain.names[0]}", mechanism="gaussian", rho=rho,
                               sensitivity=COUNT_L2_SENSITIVITY),)
        pairs = self._pairs(domain)
        components = _Components(d)
        for a, b in pairs:
            components.merge(a, b)
        if components.count > 1:
            raise SchemaError(
                f"mst: no spanning tree of the columns fits max_model_size ({self.params.max_model_size} MB): "
                "the two-way tables of some columns are all larger; bin the columns more coarsely or raise "
                "max_model_size")
        third = rho / 3.0
        oneway = [BudgetStep(name=f"mst/oneway/{name}", mechanism="gaussian", rho=third / d,
                             sensitivity=COUNT_L2_SENSITIVITY) for name in domain.names]
        steps: list[Step] = []
        for i in range(1, d):
            steps.append(SelectionStep(name=f"mst/select/{i}", epsilon=selection_epsilon(third / (d - 1)),
                                       sensitivity=COUNT_L1_SENSITIVITY))
        for i in range(1, d):
            steps.append(BudgetStep(name=f"mst/twoway/{i}", mechanism="gaussian", rho=third / (d - 1),
                                    sensitivity=COUNT_L2_SENSITIVITY))
        return (*oneway, *steps)

    def _fit(
        self,
        codes: np.ndarray,
        *,
        domain: Domain,
        steps: tuple[Step, ...],
        ledger: Ledger,
        source: RandomSource,
        scope: str,
    ) -> None:
        d, n = codes.shape
        names, sizes = domain.names, domain.sizes
        measurements: list[tuple[tuple[str, ...], np.ndarray, float]] = []

        def measure(step: BudgetStep, columns: tuple[int, ...]) -> None:
            counts = pgm.marginal_counts(codes, columns, sizes)
            noisy = self._gaussian(step, counts, ledger=ledger, source=source, scope=scope)
            measurements.append((tuple(names[j] for j in columns), noisy, step.noise_scale))

        for j, step in enumerate(steps[:d]):
            measure(step, (j,))
        tree: list[tuple[int, int]] = []
        if d > 1:
            select, twoway = steps[d:2 * d - 1], steps[2 * d - 1:]
            # Private-PGM's model of the one-way measurements alone: the product of each column's
            # noisy counts projected onto the simplex of total n (pgm.simplex_projection).
            marginals = [pgm.simplex_projection(y, n) / n for _, y, _ in measurements]
            candidates = self._pairs(domain)
            weights = {}
            for a, b in candidates:
                exact = pgm.marginal_counts(codes, (a, b), sizes)
                estimate = n * np.outer(marginals[a], marginals[b]).ravel()
                weights[a, b] = float(np.abs(exact - estimate).sum())
            components = _Components(d)
            for step in select:
                joining = [pair for pair in candidates if not components.connected(*pair)]
                utilities = np.array([weights[pair] for pair in joining])
                chosen = joining[self._select(step, utilities, ledger=ledger, source=source, scope=scope)]
                components.merge(*chosen)
                tree.append(chosen)
            for pair, step in zip(tree, twoway, strict=True):
                measure(step, pair)
        self.model_ = pgm.estimate(domain, measurements, total=n, iters=self.params.iters)
        self.tree_ = tuple((names[a], names[b]) for a, b in tree)
        self.measurements_ = tuple(measurements)
        self._record_budget(steps)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return pgm.sample_codes(self.model_, self.domain_, n, rng)


class _Components:
    """Union-find over ``range(size)``: the connected components of Kruskal's forest."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))
        self.count = size

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def connected(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)

    def merge(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb
            self.count -= 1
