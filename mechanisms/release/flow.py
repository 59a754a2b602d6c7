"""One iteration of the release scheme (a "flow"), dataset-agnostic.

configuration → transform the cleaned original data → fit a DP synthesizer → sample n records
→ reject records that break the synthetic constraints (resampling until n are valid) →
face-privacy projection → the DP acceptance criteria → (release candidate, DP results,
accepted?). Hod & Canetti (2024), Section 3.1 (Algorithm "scheme") and Section 4.

Everything specific to a dataset — schema, transformation alternatives, constraints,
projection settings — comes from a :class:`~privlab.mechanisms.tabular.space.ReleaseSpace`;
the criteria come from their own spec tables (:func:`load_criteria`). A configuration names a
transformation of the space, a registered synthesizer with its hyperparameters, and the
projection's ``min_count``.

Privacy:
    Replace-one neighbours with ``n`` public (Section 4.4.2). A flow spends
    ``ε₁ = ε_generation + Σ ε_criterion``: the synthesizer's fit (ε_generation, split inside
    the synthesizer as its own ledger steps) and one Laplace release per criterion, composed
    sequentially on the same data. Sampling, constraint filtering and the projection read only
    the DP model's output (post-processing). The transformed data's size n is treated as
    public, as in the paper; cleaning with the raw constraints is a fixed, data-independent
    record-level map applied before anything else, so neighbouring raw datasets stay
    neighbours (or become identical) after it. In release mode nothing computed from the
    private data without DP leaves this module: the outcome carries only DP values, and the
    exact criterion values are attached in research mode only.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import AcceptanceCriterion, CriterionResult, criterion_from_spec
from privlab.mechanisms.synthesizers.base import Synthesizer, synthesizer_from_spec
from privlab.mechanisms.synthesizers.zcdp import ZcdpSynthesizer
from privlab.mechanisms.tabular.constraints import rejection_sample
from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.mechanisms.tabular.space import ReleaseSpace, resolve_transformation
from privlab.mechanisms.tabular.transforms import Transformation
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.toml_files import read_toml
from privlab.platform.core.validation import ConstrainedParams, InstanceOf, Interval, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlowConfiguration(ConstrainedParams):
    """One point of the configuration space.

    Args:
        transformation: A transformation id of the space; columns with a single alternative
            may be left out (``"mother_age=fine,parity=coarse"``).
        synthesizer: A registered synthesizer name (``privbayes``, ``independent_marginals``).
        synthesizer_params: Its hyperparameters (spec keys of its ``Params``).
        min_count: The face-privacy projection's minimal occurrence (``None``: no projection).
    """

    transformation: str
    synthesizer: str
    synthesizer_params: tuple[tuple[str, Any], ...] = ()
    min_count: int | None = None

    _parameter_constraints: ClassVar = {
        "transformation": [InstanceOf(str, "a transformation id")],  # "" when every column has one alternative
        "synthesizer": [Unconstrained()],  # a registered name: build_synthesizer says which exist
        "synthesizer_params": [Unconstrained()],  # the synthesizer's Params check them
        "min_count": [None, Interval(numbers.Integral, 2, None, closed="left")],
    }
    _parameter_hints: ClassVar = {"min_count": "omit it for no projection"}
    _type_error: ClassVar = SpecError

    def build_synthesizer(self, *, where: str = "synthesizer") -> Synthesizer:
        return synthesizer_from_spec(self.synthesizer, dict(self.synthesizer_params), where=where)

    def as_dict(self) -> dict[str, Any]:
        return {"transformation": self.transformation, "synthesizer": self.synthesizer,
                **dict(self.synthesizer_params), "min_count": self.min_count}


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlowSettings(ConstrainedParams):
    """What every flow of a search or release shares: the generation ε and the criteria.

    Args:
        epsilon_generation: ε of the synthesizer's fit.
        criteria: The acceptance criteria (each with its own ε).
        max_rounds: Rejection-sampling rounds before a flow gives up on reaching n valid records.
        zcdp_delta: δ'' at which a zCDP synthesizer's (MST's, AIM's) ``epsilon_generation`` is
            read; the run's ledger must use the zcdp accountant with this ``delta_slack``. Unused
            by pure-ε synthesizers.
    """

    epsilon_generation: float
    criteria: tuple[AcceptanceCriterion, ...]
    max_rounds: int = 20
    zcdp_delta: float | None = None

    _parameter_constraints: ClassVar = {
        "epsilon_generation": [Interval(numbers.Real, 0, None, closed="neither")],
        "criteria": [Unconstrained()],  # a non-empty tuple of distinct criteria, checked together
        "max_rounds": [Interval(numbers.Integral, 1, None, closed="left")],
        "zcdp_delta": [None, Interval(numbers.Real, 0, 1, closed="neither")],
    }
    _type_error: ClassVar = SpecError

    def _check_together(self) -> None:
        if not self.criteria:
            raise SpecError("criteria must list at least one acceptance criterion")
        names = [c.name for c in self.criteria]
        if len(set(names)) != len(names):
            raise SpecError(f"criterion names ({names!r}) must be distinct")
        provided: set[Any] = set()  # shared DP fits, by key (AcceptanceCriterion.shared_fit_provided)
        for c in self.criteria:
            needed = c.shared_fit_needed()
            if needed is not None and needed not in provided:
                raise SpecError(f"criterion {c.name!r}: {c.missing_fit_hint}")
            key = c.shared_fit_provided()
            if key is not None:
                provided.add(key)

    @property
    def epsilon_acceptance(self) -> float:
        return math.fsum(c.epsilon for c in self.criteria)

    @property
    def epsilon_flow(self) -> float:
        """ε₁ of one flow: generation plus every criterion (sequential composition)."""
        return math.fsum([self.epsilon_generation, self.epsilon_acceptance])


@dataclasses.dataclass(frozen=True)
class FlowOutcome:
    """What one flow produced. ``candidate`` is a codes frame over ``domain``; ``results`` hold
    only DP values (plus exact ones in research mode)."""

    configuration: FlowConfiguration
    transformation: Transformation
    candidate: pd.DataFrame
    results: tuple[CriterionResult, ...]
    seconds: Mapping[str, float]

    @property
    def accepted(self) -> bool:
        return all(r.passed for r in self.results)

    def decoded(self, *, rng: Any = None) -> pd.DataFrame:
        """The candidate in the raw schema's units (representative values, or uniform within
        bins with ``rng``)."""
        return self.transformation.decode(self.candidate, rng=rng)


def domain_probe(domain: Domain) -> pd.DataFrame:
    """A small public codes frame over ``domain``: row ``i`` holds code ``i mod size`` in every
    column, so every code of every column occurs. Built from the domain alone (no data)."""
    rows = np.arange(max(domain.sizes), dtype=CODE_DTYPE)
    return pd.DataFrame({column.name: rows % column.size for column in domain})


# (criterion class, repr of its hyperparameters, domain) pairs already checked in this process.
# The check is a pure function of the two, and costs as much as one full-domain marginal table
# (~0.1 s on the finest births domain), so a grid search pays it once per domain, not per flow.
_CHECKED_CRITERIA: dict[tuple[type, str, Domain], None] = {}
_CHECKED_LIMIT = 4096


def check_criteria(criteria: Sequence[AcceptanceCriterion], domain: Domain) -> None:
    """Check that every criterion fits ``domain`` (its columns, groups, cuts and rules), reading no data.

    Each criterion's exact measure is evaluated on :func:`domain_probe` against itself, which
    resolves everything the criterion names against the domain the same way a flow will. A
    pair that passed once is not checked again in this process.

    Raises:
        SpecError: A criterion names a column the domain lacks, needs a numeric column that is
            nominal, or otherwise does not fit the domain (the message names the criterion).

    Privacy:
        Reads only the public domain; releases nothing and spends no budget.
    """
    probe = None
    for criterion in criteria:
        key = (type(criterion), repr(criterion), domain)
        if key in _CHECKED_CRITERIA:
            continue
        if probe is None:
            probe = domain_probe(domain)
        try:
            criterion.error(probe, probe, domain=domain)
        except SchemaError as error:
            raise SpecError(f"criterion {criterion.name!r} does not fit the transformed domain: {error}") from error
        if len(_CHECKED_CRITERIA) >= _CHECKED_LIMIT:
            _CHECKED_CRITERIA.clear()
        _CHECKED_CRITERIA[key] = None


def planned_events(configuration: FlowConfiguration, settings: FlowSettings, *, space: ReleaseSpace, n: int,
                   scope: str = "data") -> list[PrivacyEvent]:
    """The ledger steps one flow takes, in order, before any data is read.

    Raises:
        SpecError: The configuration does not fit the space, or a criterion does not fit the
            transformed domain.
    """
    transformation = resolve_transformation(space, configuration.transformation)
    space.projection(configuration.min_count)
    synthesizer = configuration.build_synthesizer()
    check_criteria(settings.criteria, transformation.domain)
    if isinstance(synthesizer, ZcdpSynthesizer):
        if settings.zcdp_delta is None:
            raise SpecError(f"synthesizer {synthesizer.name!r} is budgeted in zCDP: set zcdp_delta in the flow settings "
                            "(the δ'' its epsilon_generation is read at, equal to [budget] delta_slack)")
        events = synthesizer.planned_events(settings.epsilon_generation, transformation.domain, n, scope=scope,
                                            delta=settings.zcdp_delta)
    else:
        events = list(synthesizer.planned_events(settings.epsilon_generation, transformation.domain, n, scope=scope))
    for criterion in settings.criteria:
        events.extend(criterion.planned_events(n, scope=scope))
    return events


def run_flow(
    cleaned: pd.DataFrame,
    *,
    space: ReleaseSpace,
    configuration: FlowConfiguration,
    settings: FlowSettings,
    source: RandomSource,
    ledger: Ledger,
    scope: str = "data",
) -> FlowOutcome:
    """Run one flow on the cleaned original data (raw schema, raw constraints applied).

    Raises:
        SpecError: The configuration does not fit the space or the criteria do not fit the
            transformed domain (before any budget is spent).
        BudgetExceededError: The flow's steps do not fit the ledger (nothing is spent).
        ExecutionError: Rejection sampling could not reach n valid records.
    """
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    transformation = resolve_transformation(space, configuration.transformation)
    domain = transformation.domain
    synthesizer = configuration.build_synthesizer()
    if isinstance(synthesizer, ZcdpSynthesizer) and (ledger.accountant, ledger.delta_slack) != ("zcdp", settings.zcdp_delta):
        raise SpecError(f"synthesizer {synthesizer.name!r} is budgeted in zCDP: the run needs [budget] accountant = "
                        f"\"zcdp\" and delta_slack = zcdp_delta of the flow settings ({settings.zcdp_delta!r}); it has "
                        f"{ledger.accountant!r} and {ledger.delta_slack!r}")
    check_criteria(settings.criteria, domain)  # a bad spec fails before the data is read or budget spent
    transformed = transformation.apply(cleaned, source="original data")
    n = len(transformed)
    plan = planned_events(configuration, settings, space=space, n=n, scope=scope)
    # The plan must fit on top of what the ledger already holds, or the flow would stop
    # part-way with some of its budget spent.
    ledger.preflight(plan)
    seconds["transform"] = time.perf_counter() - clock

    clock = time.perf_counter()
    synthesizer.fit(transformed, domain=domain, epsilon=settings.epsilon_generation, ledger=ledger,
                    source=source, scope=scope)
    seconds["fit"] = time.perf_counter() - clock

    clock = time.perf_counter()
    sampling_rng = source.generator(purpose="synthetic-sampling")
    constraints = space.synthetic_filter(transformation)
    candidate = rejection_sample(lambda k: synthesizer.sample(k, rng=sampling_rng), n, constraints,
                                 max_rounds=settings.max_rounds)
    seconds["sample"] = time.perf_counter() - clock

    clock = time.perf_counter()
    projection = space.projection(configuration.min_count)
    if projection is not None:
        candidate = projection.apply(candidate, rng=source.generator(purpose="face-privacy-projection"),
                                     domain=domain)
    seconds["project"] = time.perf_counter() - clock

    results = []
    fits: dict[Any, Any] = {}
    for criterion in settings.criteria:
        clock = time.perf_counter()
        extra: dict[str, Any] = {}
        provided, needed = criterion.shared_fit_provided(), criterion.shared_fit_needed()
        if provided is not None:  # one DP fit serves this criterion and those that reuse it (4.14.1)
            fits[provided] = extra["fit"] = criterion.fit_shared(transformed, domain=domain, source=source,
                                                                 ledger=ledger, scope=scope)
        elif needed is not None:
            extra["fit"] = fits[needed]
        results.append(criterion.release(transformed, candidate, domain=domain, source=source, ledger=ledger,
                                         scope=scope, **extra))
        seconds[f"criterion:{criterion.name}"] = time.perf_counter() - clock
    return FlowOutcome(configuration=configuration, transformation=transformation, candidate=candidate,
                       results=tuple(results), seconds=seconds)


def criteria_from_tables(tables: Sequence[Mapping[str, Any]], *, where: str) -> tuple[AcceptanceCriterion, ...]:
    if not isinstance(tables, Sequence) or not tables:
        raise SpecError(f"{where}: list the acceptance criteria as [[criterion]] tables")
    return tuple(criterion_from_spec(t, where=f"{where} criterion {i + 1}") for i, t in enumerate(tables))


def load_settings(path: str | Path) -> FlowSettings:
    """Read a flow-settings TOML: ``epsilon_generation``, optional ``max_rounds`` and ``zcdp_delta``, and
    ``[[criterion]]`` tables (each ``kind``, ``name``, ``threshold``, ``epsilon`` and its keys).

    Raises:
        SpecError: Missing file, invalid TOML, unknown keys or invalid criteria.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"flow settings file {str(path)!r} does not exist")
    document = read_toml(path, what="flow settings file")[0]  # not UTF-8, not TOML, too deep: a SpecError
    allowed = {"epsilon_generation", "max_rounds", "criterion", "description", "zcdp_delta"}
    unknown = sorted(set(document) - allowed)
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    if "epsilon_generation" not in document:
        raise SpecError(f"{path}: epsilon_generation is required (the synthesizer's ε)")
    return FlowSettings(
        epsilon_generation=document["epsilon_generation"],
        criteria=criteria_from_tables(document.get("criterion", []), where=str(path)),
        max_rounds=document.get("max_rounds", 20),
        zcdp_delta=document.get("zcdp_delta"),
    )
