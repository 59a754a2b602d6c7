"""The DP generative model of Section 3 as a :class:`PrivateEstimator`.

``fit`` learns the structure from D_T (:mod:`.structure`) and the conditional tables from D_P
(:mod:`.parameters`); ``sample`` draws whole records by ancestral sampling in the dependency
order (eq. 2), which is synthesis with ω = m and no seed. Seed-based synthesis and the privacy
tests (:mod:`.synthesis`, :mod:`.privacy_tests`) use the fitted model with D_S.

Privacy:
    (ε, δ)-DP for replace-one neighbours of the whole dataset with the split sizes public, when
    the model cuts D_T and D_P itself: ``fit(data, split=...)`` takes the whole data and a
    :class:`~privlab.platform.dp.positional_split.PositionalSplit` drawn from the record count
    and a random stream (:mod:`.split`), declares it on the ledger as the partition of ``scope``
    into ``scope/structure``, ``scope/parameters`` (and ``scope/seeds`` for a three-part split),
    and reads each half through it, so the halves compose in parallel: the structure's K₁
    Laplace releases on D_T compose to ε, and so do the m releases on D_P (:mod:`.accounting`;
    δ = ``delta_slack`` for every accountant but ``"basic"``). Halves the caller cut
    (``fit(D_T, parameter_data=D_P)``) are not known to be disjoint by position (a split by a
    column's value moves a changed record between them), so they compose sequentially (2ε) and
    the fit says so (:class:`~privlab.platform.core.errors.SequentialCompositionWarning`).
    Sensitivities: Δ_H = h(1/n_T) nats per entropy (:mod:`.entropy`), 2 per count table
    (:mod:`.parameters`). Everything else is post-processing. Release-safe: every DP draw is the
    source's own Laplace sampler; the Dirichlet draws are post-processing from ``source.generator``.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Sections 3.1–3.5.
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.accounting import ACCOUNTANTS, step_epsilons
from privlab.mechanisms.plausible_deniability.entropy import entropy_sensitivity
from privlab.mechanisms.plausible_deniability.parameters import (
    COUNT_SENSITIVITY, ESTIMATORS, conditional_tables, configuration_index)
from privlab.mechanisms.plausible_deniability.structure import (
    Bucketing, Structure, correlations, dependency_order, entropy_queries, greedy_parents, noisy_entropies)
from privlab.mechanisms.tabular import bayesian_network
from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.platform.core.errors import LedgerError, SequentialCompositionWarning, SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval, Options
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["PlausibleDeniabilityModel", "PlausibleDeniabilityModelParams", "part_scopes"]

DEFAULT_DELTA_SLACK = 2.0**-30

PARTS = ("structure", "parameters", "seeds")
"""The parts of the data the mechanism touches, each a ledger scope under the data's scope."""


def part_scopes(scope: str = "data") -> tuple[str, str, str]:
    """The ledger scopes of D_T, D_P and D_S under ``scope``."""
    return tuple(f"{scope}/{part}" for part in PARTS)  # type: ignore[return-value]


POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
"""A finite real number > 0 (an ε, a prior's α)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlausibleDeniabilityModelParams(ConstrainedParams):
    """Hyperparameters of the generative model.

    Attributes:
        epsilon: The model's ε (structure and parameters together), finite and > 0.
        accountant: the ledger's accountant (:data:`privlab.platform.dp.accountants.SELECTABLE`),
            so the ledger's total is the declared ε; default ``"best"`` (the paper composes each
            half with advanced composition, Section 3.5; the curve accountants are tighter).
        delta_slack: δ'' (the paper's δ_L), in (0, 1); default 2⁻³⁰. Must equal the ledger's
            ``delta_slack`` for every accountant but ``"basic"``.
        maxcost: The bound of eq. (6) on a parent set's number of configurations, ≥ 1.
        alpha: Dirichlet prior α of every cell, > 0.
        estimator: ``"posterior_sample"`` (eq. 12, the paper's) or ``"posterior_mean"`` (eq. 13).
    """

    epsilon: float
    accountant: str = "best"
    delta_slack: float = DEFAULT_DELTA_SLACK
    maxcost: int = 64
    alpha: float = 1.0
    estimator: str = "posterior_sample"

    _parameter_constraints: ClassVar = {
        "epsilon": [POSITIVE], "accountant": [Options(str, ACCOUNTANTS)],
        "delta_slack": [Interval(numbers.Real, 0, 1, closed="neither")],
        "maxcost": [Interval(numbers.Integral, 1, None, closed="left")], "alpha": [POSITIVE],
        "estimator": [Options(str, ESTIMATORS)]}


class PlausibleDeniabilityModel(PrivateEstimator):
    """The paper's DP Bayesian-network generative model (module docstring).

    Fitted attributes: ``domain_``, ``bucketing_``, ``structure_`` (parents and σ),
    ``tables_`` (one (#c, |x_i|) array per attribute), ``events_``.
    """

    name: ClassVar[str] = "plausible_deniability_model"
    Params: ClassVar[type] = PlausibleDeniabilityModelParams
    release_safe: ClassVar[bool] = True

    # --- plan ----------------------------------------------------------------------------------

    def planned_events(self, domain: Domain, n_structure: int, n_parameters: int, *,
                       buckets: Mapping[str, Sequence[int]] | None = None, scope: str = "data") -> list[PrivacyEvent]:
        """The events a research-mode fit records, from public inputs only: the entropies in
        ``scope/structure`` (D_T), the count tables in ``scope/parameters`` (D_P).

        Raises:
            SchemaError: a bucketisation names an unknown attribute or is malformed.
            SpecError: n_T < 2, or ε too small for the number of steps.
        """
        if not isinstance(domain, Domain):
            raise TypeError(f"domain ({domain!r}) must be a Domain")
        if n_structure < 2:
            raise SpecError(f"n_structure ({n_structure!r}) must be >= 2 (structure learning needs D_T)")
        if n_parameters < 1:
            raise SpecError(f"n_parameters ({n_parameters!r}) must be >= 1")
        bucketing = Bucketing.build(domain, buckets)
        queries = entropy_queries(len(domain), bucketing)
        structure_scope, parameter_scope = part_scopes(scope)[:2]
        delta_h = entropy_sensitivity(n_structure)
        names = domain.names
        events = [PrivacyEvent(name=f"pd.entropy {q.label(names)}", mechanism="laplace", epsilon=e,
                               sensitivity=delta_h, noise_scale=delta_h / e, scope=structure_scope,
                               step="pd.structure")
                  for q, e in zip(queries, self._step_epsilons(len(queries)))]
        events += [PrivacyEvent(name=f"pd.counts {name}", mechanism="laplace", epsilon=e,
                                sensitivity=COUNT_SENSITIVITY, noise_scale=COUNT_SENSITIVITY / e,
                                scope=parameter_scope, step="pd.parameters")
                   for name, e in zip(names, self._step_epsilons(len(domain)))]
        return events

    def _step_epsilons(self, steps: int) -> tuple[float, ...]:
        p = self.params
        return step_epsilons(p.epsilon, steps, accountant=p.accountant, delta_slack=p.delta_slack)

    # --- fit -----------------------------------------------------------------------------------

    def fit(self, data: pd.DataFrame, *, split: PositionalSplit | None = None,
            parameter_data: pd.DataFrame | None = None, domain: Domain, ledger: Ledger, source: RandomSource,
            buckets: Mapping[str, Sequence[int]] | None = None, scope: str = "data") -> Self:
        """Learn the structure from D_T and the conditional tables from D_P.

        Args:
            data: integer codes over ``domain``: the whole data, cut by ``split``; or, with
                ``parameter_data``, D_T itself.
            split: a :class:`~privlab.platform.dp.positional_split.PositionalSplit` of ``data``'s
                positions into D_T, D_P (and D_S), drawn without looking at the data
                (:func:`.split.split_dataset`'s ``positions``). The model reads D_T and D_P
                through it and declares it on the ledger (unless the ledger already holds this
                very split for ``scope``), so the halves compose in parallel.
            parameter_data: D_P, when the caller cut the halves itself: they then compose
                sequentially (module docstring), with a warning that says so.
            domain: The public domain.
            ledger: Charged with :meth:`planned_events`; its accountant (and, for every accountant
                but ``"basic"``, its ``delta_slack``) must be the params'.
            source: DP noise (Laplace) and the Dirichlet stream.
            buckets: Public bucketisation ``{attribute: bucket of each code}`` (eq. 7).
            scope: The ledger scope of the data; the events go to its parts (:func:`part_scopes`).

        Raises:
            TypeError: a wrong-typed ledger, source, domain or split.
            SchemaError: data not over ``domain``, or a bad bucketisation.
            SpecError: both or neither of ``split`` and ``parameter_data``, the ledger's accounting
                differs from the params', or D_T too small.
            LedgerError: the split was drawn for another record count, has other than 2 or 3 parts,
                or the ledger splits ``scope`` by another split.
            BudgetExceededError: the plan does not fit the ledger (nothing drawn).
            ModeError: never (the model is release-safe).
        """
        self._check_protocol_arguments(ledger, source)
        if not isinstance(domain, Domain):
            raise TypeError(f"domain ({domain!r}) must be a Domain")
        if (split is None) == (parameter_data is None):
            raise SpecError("fit takes the whole data with split=PositionalSplit (D_T and D_P cut by the model, in "
                            "parallel) or D_T with parameter_data=D_P (cut by the caller, composed sequentially): "
                            "give exactly one of split and parameter_data")
        p = self.params
        if ledger.accountant != p.accountant:
            raise SpecError(f"accountant ({p.accountant!r}) must be the ledger's ({ledger.accountant!r}) so that "
                            "the ledger's total is the model's declared ε; set the study's accountant parameter "
                            "and [budget] accountant to the same name")
        if p.accountant != "basic" and ledger.delta_slack != p.delta_slack:
            raise SpecError(f"delta_slack ({p.delta_slack!r}) must be the ledger's ({ledger.delta_slack!r})")
        if split is not None:
            structure_frame, parameter_frame, partitions = self._cut(data, split, ledger, scope)
        else:
            structure_frame, parameter_frame, partitions = data, parameter_data, []
            self._check_unsplit(ledger, scope)
        structure = domain.validate(structure_frame, what="D_T (structure data)").to_numpy(dtype=CODE_DTYPE)
        parameters = domain.validate(parameter_frame, what="D_P (parameter data)").to_numpy(dtype=CODE_DTYPE)
        plan = self.planned_events(domain, len(structure), len(parameters), buckets=buckets, scope=scope)
        bucketing = Bucketing.build(domain, buckets)
        eps = [e.epsilon for e in plan]

        def run() -> None:
            queries = entropy_queries(len(domain), bucketing)
            noisy = noisy_entropies(structure, domain=domain, bucketing=bucketing, queries=queries,
                                    epsilons=eps[:len(queries)], sensitivity=plan[0].sensitivity,
                                    source=source, ledger=ledger, scope=plan[0].scope)
            parents = greedy_parents(correlations(noisy, len(domain), bucketing), bucketing, p.maxcost)
            self.structure_ = Structure(parents=parents, order=dependency_order(parents))
            self.tables_ = conditional_tables(
                parameters, sizes=domain.sizes, parents=parents, bucketing=bucketing, epsilons=eps[len(queries):],
                alpha=float(p.alpha), estimator=p.estimator, source=source, ledger=ledger, scope=plan[-1].scope,
                names=domain.names)
            self.domain_ = domain
            self.bucketing_ = bucketing

        return self._charged_fit(plan, ledger=ledger, source=source, run=run, partitions=partitions)

    @staticmethod
    def _cut(data: pd.DataFrame, split: PositionalSplit, ledger: Ledger,
             scope: str) -> tuple[pd.DataFrame, pd.DataFrame, list[tuple[str, tuple[str, ...], PositionalSplit]]]:
        """D_T and D_P read through ``split``, and the partition to declare (none when the ledger
        already holds this split for ``scope``)."""
        if not isinstance(split, PositionalSplit):
            raise TypeError(f"split ({split!r}) must be a PositionalSplit (split_dataset(...).positions)")
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"data ({type(data).__name__}) must be a pandas DataFrame of codes")
        split.check_record_count(len(data), what="data")
        if split.n_parts not in (2, 3):
            raise LedgerError(f"split ({split!r}) must have 2 parts (D_T, D_P) or 3 (D_T, D_P, D_S)")
        names = part_scopes(scope)[:split.n_parts]
        held = ledger.split_of(scope, names)
        if held is not None and held is not split:
            raise LedgerError(f"the ledger splits {scope!r} into {list(names)} by another split ({held!r}); fit with "
                              "the split the ledger holds")
        halves = tuple(data.iloc[split.members(k)].reset_index(drop=True) for k in (0, 1))
        return halves[0], halves[1], ([] if held is not None else [(scope, names, split)])

    @staticmethod
    def _check_unsplit(ledger: Ledger, scope: str) -> None:
        """Halves cut by the caller compose sequentially: refuse a ledger that would compose them
        in parallel, and say that they do not."""
        names = part_scopes(scope)
        if any(ledger.has_partition(scope, names[:k]) for k in (2, 3)):
            raise LedgerError(f"the ledger splits {scope!r} into D_T and D_P by a drawn split, but fit was given "
                              "halves cut by the caller: fit(data, split=...) with that split instead")
        warnings.warn(SequentialCompositionWarning(
            f"D_T and D_P were cut by the caller, not by a split the ledger can check, so they compose sequentially "
            f"({names[0]!r} and {names[1]!r} each spend the model's ε: 2ε in all); pass the whole data with "
            "split=split_dataset(...).positions for parallel composition"), stacklevel=3)

    # --- use -----------------------------------------------------------------------------------

    @property
    def m(self) -> int:
        self._require_fitted("fit(data, split=..., ...)")
        return len(self.domain_)

    def conditional(self, attribute: int, record: np.ndarray) -> np.ndarray:
        """Pr{x_attribute = · | parents as in ``record``} (a row of the attribute's table)."""
        c = configuration_index(record, self.structure_.parents[attribute], self.bucketing_)
        return self.tables_[attribute][c]

    def sample(self, n: int, *, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` records by ancestral sampling in σ (eq. 2); post-processing.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: ``n`` < 0.
        """
        self._require_fitted("fit(data, split=..., ...)")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n ({n!r}) must be an int >= 0")
        records = np.zeros((int(n), self.m), dtype=CODE_DTYPE)
        cdfs = bayesian_network.cumulative_tables(self.tables_)
        for i in self.structure_.order:
            rows = configuration_index(records, self.structure_.parents[i], self.bucketing_)
            records[:, i] = bayesian_network.draw_values(cdfs[i], rows, rng.random(int(n)), scale_by_total=True)
        return pd.DataFrame(records, columns=list(self.domain_.names))

    def describe(self) -> dict[str, Any]:
        """Loggable summary: each attribute's parents and σ, by name."""
        self._require_fitted("fit(data, split=..., ...)")
        names = self.domain_.names
        return {"order": [names[i] for i in self.structure_.order],
                "parents": {names[i]: [names[j] for j in pa] for i, pa in enumerate(self.structure_.parents)}}
