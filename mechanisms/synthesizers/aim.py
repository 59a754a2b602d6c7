"""AIM: adaptive, workload-aware selection of marginals with budget annealing, on Private-PGM.

Given a workload ``W`` of marginals (cliques of columns, weight 1 each; by default every
``workload_degree``-way marginal of the domain) and a zCDP budget ρ (from ε at the ledger's δ'',
:mod:`~privlab.mechanisms.synthesizers.zcdp`), with ``T`` = ``rounds`` (default 16·d) and
α = 0.9:

1. **Initialisation.** Every one-way marginal is measured with σ₀, where one round's
   measurement gets αρ/T: under replace-one ρ_meas = (√2)²/(2σ₀²) = 1/σ₀², so σ₀ = sqrt(T/(αρ)).
   Private-PGM estimates a model p̂ from them.
2. **Rounds**, while budget remains. The candidates are the workload's downward closure, each
   with weight ``c_r = Σ_{s∈W} |r ∩ s|``, kept when the model with ``r`` added stays within
   ``max_model_size · ρ_used/ρ`` MB (or ``r`` is already inside a clique of the model). The
   exponential mechanism picks ``r`` with utility
   ``c_r · (‖M_r(D) − M_r(p̂)‖₁ − sqrt(2/π)·σ·|dom r|)`` (the expected ℓ1 norm of the noise a
   measurement of r would add is subtracted, so marginals already estimated well enough are not
   re-measured); its sensitivity is ``2·max_r c_r`` over the kept candidates (replace-one ℓ1
   sensitivity 2 of the count vector; the bias term and the kept set are public given the
   earlier DP outputs). The round's selection has ρ_sel = (1−α)·ρ_round, i.e. ε = sqrt(8ρ_sel):
   the exponential mechanism is ε-bounded range, ε²/8-zCDP (Cesar & Rogers 2021). Then ``M_r(D)`` is measured with Gaussian noise σ and the model re-estimated
   (warm-started).
3. **Annealing.** When the new estimate of ``M_r`` moved by at most ``sqrt(2/π)·σ·|dom r|`` in
   ℓ1 (the measurement told the model little), σ halves and ε doubles: a round then costs four
   times as much. When less than two rounds' budget remains, the last round spends exactly
   what is left (its σ and ε solved from it).

:meth:`sample` draws records from the final model.

The number of rounds and each round's ρ depend on the mechanism's own DP outputs (the
annealing decision compares two estimates computed from noisy measurements only), so the rounds
are declared as one zCDP filter of ρ − ρ_oneway (``aim/round/``): each round's selection and
measurement is recorded in the ledger as it happens, the ledger's cap checks every one, and
the fit checks that their ρ sum to at most the filter's.

Differences from the paper and its reference code: replace-one sensitivities, the relation
privlab's ledger guarantees (√2 and 2·max c_r where the paper's add/remove-one has 1 and
max c_r), so for the same ρ each measurement's σ is √2 times the reference's and each selection's
utility scale twice its own (ρ = 1/σ² per measurement where the reference has 1/(2σ²)).

Cost: every round's estimate has a measurement structure the model has not had before, so
Private-PGM's mirror descent is compiled anew each round (XLA, seconds), and the round scores
every candidate against the model. :mod:`~privlab.mechanisms.synthesizers.pgm` keeps this to
one compiled program per round, of a size that grows with the model's cliques but not with
the number of measurements (repeated measurements of a clique merge into their sufficient
statistic, the loss is a gather over the flat marginals, each step's marginals are carried to
the next), keeps only the latest structure's program (XLA otherwise runs out of memory for
code after a few hundred rounds), and scores candidates in NumPy by variable elimination. The
estimates are Private-PGM's; none of this changes what is measured or selected.

Privacy:
    ρ-zCDP under replace-one with ``n`` public, hence (ε, δ'')-DP through the ledger's zcdp
    accountant: d Gaussian one-way measurements (ℓ2 sensitivity √2, αρ/T each) composed
    sequentially with the rounds, an adaptive sequence of exponential-mechanism choices
    (ε-bounded range, ε²/8 each: Cesar & Rogers 2021, Lemma 3.2) and
    Gaussian measurements whose running ρ never exceeds ρ − dαρ/T (a zCDP privacy filter:
    fully adaptive composition, Whitehouse, Ramdas, Rogers & Wu 2023; AIM's Theorem 1 argues the
    same); candidate filtering, annealing, estimation and sampling are post-processing.

References:
    McKenna, Mullins, Sheldon & Miklau (2022), "AIM: An Adaptive and Iterative Mechanism for
    Differentially Private Synthetic Data", PVLDB 15(11), Algorithm 2 and Section 4; Cesar &
    Rogers (2021), ALT, Lemma 3.2.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import ClassVar

import numpy as np

from privlab.mechanisms.synthesizers import pgm
from privlab.mechanisms.synthesizers.base import BudgetStep, register_synthesizer
from privlab.mechanisms.synthesizers.zcdp import (
    COUNT_L1_SENSITIVITY,
    COUNT_L2_SENSITIVITY,
    SelectionStep,
    Step,
    ZcdpFilter,
    ZcdpSynthesizer,
    hyperparameter_count,
    hyperparameter_positive,
    selection_epsilon,
)
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["AIM", "AIMParams", "MEASUREMENT_SHARE", "parse_workload", "workload_weights"]

MEASUREMENT_SHARE = 0.9
"""α: the share of each round's ρ spent on the measurement (the rest selects), as in the paper."""

_BIAS = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|


def parse_workload(text: str) -> tuple[tuple[str, ...], ...]:
    """``"a,b,c; b,d"`` → ``(("a", "b", "c"), ("b", "d"))``: cliques separated by ``;``,
    columns by ``,``.

    Raises:
        SpecError: an empty clique or a column named twice in one clique.
    """
    cliques = []
    for part in text.split(";"):
        columns = tuple(c.strip() for c in part.split(",") if c.strip())
        if not columns:
            raise SpecError(f"workload ({text!r}) has an empty marginal; write cliques as 'a,b,c; b,d'")
        if len(set(columns)) != len(columns):
            raise SpecError(f"workload marginal {part.strip()!r} names a column twice")
        cliques.append(columns)
    return tuple(cliques)


def workload_weights(workload: tuple[tuple[str, ...], ...]) -> dict[tuple[str, ...], float]:
    """Each clique ``r`` of the workload's downward closure with ``c_r = Σ_{s∈W} |r ∩ s|``
    (columns of ``r`` in domain order as given by the workload cliques' sorted union)."""
    closure: set[tuple[str, ...]] = set()
    for clique in workload:
        for size in range(1, len(clique) + 1):
            closure.update(tuple(sorted(sub)) for sub in itertools.combinations(clique, size))
    return {r: float(sum(len(set(r) & set(s)) for s in workload)) for r in sorted(closure, key=lambda c: (len(c), c))}


@dataclasses.dataclass(frozen=True, kw_only=True)
class AIMParams:
    """AIM hyperparameters.

    Attributes:
        rounds: T, the planned number of rounds (default ``None``: 16·d, the paper's); it sets
            the initial σ and ε. Must exceed the number of columns (the one-way marginals use
            d rounds' measurement budget).
        max_model_size: Largest model in MB (8 bytes per cell of the junction tree; the paper's
            default 80).
        max_iters: Mirror-descent steps of each Private-PGM estimate.
        workload_degree: The workload is every marginal over this many columns (default 3, the
            paper's all-3-way workload), unless ``workload`` is given.
        workload: Explicit marginals, ``"a,b,c; b,d"`` (columns by name).

    Raises:
        TypeError, SpecError: a bad value; SpecError too when Private-PGM is not installed.
    """

    rounds: int | None = None
    max_model_size: float = 80.0
    max_iters: int = 1000
    workload_degree: int = 3
    workload: str | None = None

    def __post_init__(self) -> None:
        if self.rounds is not None:
            hyperparameter_count("rounds", self.rounds, 2)
        hyperparameter_positive("max_model_size", self.max_model_size)
        hyperparameter_count("max_iters", self.max_iters, 1)
        hyperparameter_count("workload_degree", self.workload_degree, 1)
        if self.workload is not None:
            if not isinstance(self.workload, str):
                raise TypeError(f"workload ({self.workload!r}) must be a string such as 'a,b,c; b,d'")
            parse_workload(self.workload)
        pgm.require_mbi("aim", load=False)


@register_synthesizer
class AIM(ZcdpSynthesizer):
    """AIM: workload-aware adaptive selection of marginals with annealing (module docstring).

    Fitted attributes:
        model_: Private-PGM's ``MarkovRandomField``.
        selected_: The marginals measured in the rounds, in order.
        sigmas_: The σ of each round's measurement (annealing halves it).
        measurements_: ``(clique, noisy counts, σ)`` of every measurement, in order.
        rho_, delta_: The zCDP budget spent and the δ'' it was read at.
        domain_, epsilon_, n_records_, events_: see :meth:`Synthesizer.fit`.

    Privacy:
        ρ-zCDP under replace-one with ``n`` public (module docstring).
    """

    name: ClassVar[str] = "aim"
    Params: ClassVar[type] = AIMParams

    def workload(self, domain: Domain) -> tuple[tuple[str, ...], ...]:
        """The workload's cliques over ``domain``, columns in domain order.

        Raises:
            SchemaError: a marginal names a column not in the domain.
        """
        params: AIMParams = self.params
        order = {name: j for j, name in enumerate(domain.names)}
        if params.workload is None:
            k = min(params.workload_degree, len(domain))
            return tuple(itertools.combinations(domain.names, k))
        cliques = []
        for clique in parse_workload(params.workload):
            unknown = [c for c in clique if c not in order]
            if unknown:
                raise SchemaError(
                    f"aim workload marginal {','.join(clique)!r} names column(s) {', '.join(unknown)} not in the "
                    f"schema; the columns are {', '.join(domain.names)}")
            cliques.append(tuple(sorted(clique, key=order.__getitem__)))
        return tuple(cliques)

    def _rounds(self, domain: Domain) -> int:
        return self.params.rounds if self.params.rounds is not None else 16 * len(domain)

    def zcdp_steps(self, rho: float, domain: Domain, n: int) -> tuple[Step, ...]:
        """``aim/oneway/<column>`` (d Gaussian measurements), then the filter ``aim/round/``.

        Raises:
            SchemaError: no record; a workload column not in the schema; ``rounds`` ≤ d; the
                one-way model alone larger than ``max_model_size``.
        """
        d = len(domain)
        if n < 1:
            raise SchemaError("aim needs at least one record; the data is empty")
        self.workload(domain)
        rounds = self._rounds(domain)
        if rounds <= d:
            raise SchemaError(f"aim: rounds ({rounds}) must exceed the number of columns ({d}): the one-way "
                              "marginals alone use d rounds' measurement budget")
        oneway_mb = sum(domain.sizes) * pgm.BYTES_PER_CELL / 2**20
        if oneway_mb > self.params.max_model_size:
            raise SchemaError(
                f"aim: the domain is too large for max_model_size ({self.params.max_model_size} MB): its one-way "
                f"marginals alone take {oneway_mb:.3g} MB; bin the columns more coarsely or raise max_model_size")
        per_oneway = MEASUREMENT_SHARE * rho / rounds
        oneway = tuple(BudgetStep(name=f"aim/oneway/{name}", mechanism="gaussian", rho=per_oneway,
                                  sensitivity=COUNT_L2_SENSITIVITY) for name in domain.names)
        rest = rho - math.fsum(step.zcdp_rho for step in oneway)
        return (*oneway, ZcdpFilter(prefix="aim/round/", rho=rest))

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
        params: AIMParams = self.params
        d, n = codes.shape
        names, sizes = domain.names, domain.sizes
        index = {name: j for j, name in enumerate(names)}
        oneway, budget = steps[:d], steps[d]
        assert isinstance(budget, ZcdpFilter)
        rho_total = math.fsum(step.zcdp_rho for step in steps)
        rounds = self._rounds(domain)
        round_rho = rho_total / rounds
        sigma = math.sqrt(1.0 / (MEASUREMENT_SHARE * round_rho))
        epsilon = selection_epsilon((1.0 - MEASUREMENT_SHARE) * round_rho)
        candidates = workload_weights(self.workload(domain))
        candidates = {tuple(sorted(r, key=index.__getitem__)): c for r, c in candidates.items()}
        exact = {r: pgm.marginal_counts(codes, tuple(index[c] for c in r), sizes) for r in candidates}

        measurements: list[tuple[tuple[str, ...], np.ndarray, float]] = []
        for j, step in enumerate(oneway):
            assert isinstance(step, BudgetStep)
            noisy = self._gaussian(step, exact.get((names[j],), pgm.marginal_counts(codes, (j,), sizes)),
                                   ledger=ledger, source=source, scope=scope)
            measurements.append(((names[j],), noisy, step.noise_scale))
        model = pgm.estimate(domain, measurements, total=n, iters=params.max_iters)
        used = math.fsum(step.zcdp_rho for step in oneway)
        spent_rounds = 0.0
        selected: list[tuple[str, ...]] = []
        sigmas: list[float] = []
        t = 0
        last = False
        while not last:
            t += 1
            remaining = budget.rho - spent_rounds
            if remaining < 2.0 * (1.0 / sigma**2 + epsilon**2 / 8.0):
                sigma = math.sqrt(1.0 / (MEASUREMENT_SHARE * remaining))
                epsilon = selection_epsilon((1.0 - MEASUREMENT_SHARE) * remaining)
                last = True
            measure_step = BudgetStep(name=f"aim/round/{t}/measure", mechanism="gaussian",
                                      rho=1.0 / sigma**2 if not last else MEASUREMENT_SHARE * remaining,
                                      sensitivity=COUNT_L2_SENSITIVITY)
            round_cost = epsilon**2 / 8.0 + measure_step.zcdp_rho
            size_limit = params.max_model_size * (used + spent_rounds + round_cost) / rho_total
            model_cliques = [tuple(c) for c in model.cliques]
            inside = {tuple(sorted(sub, key=index.__getitem__))
                      for c in model_cliques for k in range(1, len(c) + 1) for sub in itertools.combinations(c, k)}
            kept = [r for r in candidates
                    if r in inside or pgm.model_size_mb(domain, [*model_cliques, r]) <= size_limit]
            select_step = SelectionStep(name=f"aim/round/{t}/select", epsilon=epsilon,
                                        sensitivity=COUNT_L1_SENSITIVITY * max(candidates[r] for r in kept))
            utilities = np.array([
                candidates[r] * (float(np.abs(exact[r] - pgm.project(model, r)).sum())
                                 - _BIAS * sigma * math.prod(sizes[index[c]] for c in r))
                for r in kept])
            chosen = kept[self._select(select_step, utilities, ledger=ledger, source=source, scope=scope)]
            before = pgm.project(model, chosen)
            noisy = self._gaussian(measure_step, exact[chosen], ledger=ledger, source=source, scope=scope)
            measurements.append((chosen, noisy, measure_step.noise_scale))
            selected.append(chosen)
            sigmas.append(measure_step.noise_scale)
            spent_rounds += round_cost
            model = pgm.estimate(domain, measurements, total=n, iters=params.max_iters, warm_start=model)
            moved = float(np.abs(pgm.project(model, chosen) - before).sum())
            if not last and moved <= _BIAS * sigma * math.prod(sizes[index[c]] for c in chosen):
                sigma /= 2.0
                epsilon *= 2.0
        self.model_ = model
        self.selected_ = tuple(selected)
        self.sigmas_ = tuple(sigmas)
        self.measurements_ = tuple(measurements)
        self._record_budget(steps)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return pgm.sample_codes(self.model_, self.domain_, n, rng)
