"""A plausible-deniability run's parameters, its table, its plan and its model fit.

Shared by the ``pd_generation`` study (:mod:`.workloads`) and the ``privlab pd-generate``
command (:mod:`.generation_run`). Parameters (a spec's ``[params]``): ``space`` and ``data``
(files, relative to the spec; ``data`` may list several files, concatenated; ``transformation``
names a column's alternative where the space offers several, as release grids do) — or
``toy_records``, the number of records of a generated census-shaped table (:mod:`.census_like`,
for examples that need no data) —, ``buckets`` (:func:`.dataset.bucket_map`), the split
fractions and ``public_records`` (the public record count they are fractions of; unset: the
data's own count, see :meth:`GenerationParams.sizes`), the model's ``model_epsilon``,
``accountant``, ``maxcost``, ``alpha``, ``omega`` (an int, or ``"a-b"`` for ω drawn uniformly
from [a, b] per candidate) and ``omega_rule`` (how the test scores a candidate of a range:
``"per_candidate"``, the paper's, with its own ω, or ``"mixture"``, with the mixture over the
range; :mod:`.synthesis`), the test's ``k``, ``gamma``, ``epsilon0`` (omit it for Test 1,
which has no DP guarantee), ``max_plausible``,
``max_check_plausible`` (unset: every seed is examined, exactly, through the seed index; set
below |D_S|, each candidate draws a random examination order, which costs memory and time in
proportion: a batch may hold at most 2²⁶ order draws), Theorem 1's ``t``, ``candidates``
(tested) in batches of ``batch``, and ``model_seed`` (configurations that share it share the
split, the model and the candidates: :meth:`GenerationParams.state_generator`).

Privacy:
    The plan is the model's K steps (:meth:`.model.PlausibleDeniabilityModel.planned_events`,
    from the public split sizes; scopes ``data/structure`` and ``data/parameters``) and, with
    Test 2, one event composing Theorem 1 over all ``candidates`` runs of Mechanism 1 (scope
    ``data/seeds``, :func:`.privacy_tests.generation_event`). The three scopes are a positional
    partition of ``data`` (:data:`SPLIT_PARTITION`, planned by the workloads' ``partitions`` and
    declared with the split it draws by :func:`fit_split_model`): the split is a seeded
    permutation of record positions, so the parts compose in parallel under replace-one. The fit charges its own ledger and is checked
    against the model part of the plan.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Sections 2–5.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from privlab.mechanisms.plausible_deniability.census_like import census_like
from privlab.mechanisms.plausible_deniability.dataset import CodedTable, bucket_map, load_coded_table
from privlab.mechanisms.plausible_deniability.model import (
    DEFAULT_DELTA_SLACK, PlausibleDeniabilityModel, PlausibleDeniabilityModelParams, part_scopes)
from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams, generation_event
from privlab.mechanisms.plausible_deniability.split import DataSplit, SplitSizes, split_dataset
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import check_conforms
from privlab.platform.dp.positional_split import SplitPlan
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource

__all__ = ["GenerationParams", "check_against_table", "coded_table", "fit_split_model", "model_plan",
           "parse_omega", "run_plan"]

STATE_KEY = 0x70645F7374617465  # "pd_state": the spawn key of a shared model_seed stream

MAX_ORDER_WORDS = 2**26
"""The most examination-order draws one batch may hold (about 1 GB with the orders)."""

_MODEL = PlausibleDeniabilityModelParams._parameter_constraints  # the model's keys, checked where the spec names them
_FRACTION = Interval(numbers.Real, 0, 1, closed="neither")
_COUNT = Interval(numbers.Integral, 1, None, closed="left")

_OMEGA_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_omega(value: int | str, omega_rule: str = "per_candidate") -> SynthesisParams:
    """``10`` → ω fixed at 10; ``"5-11"`` → ω uniform on [5, 11] per candidate, scored by the
    test under ``omega_rule`` (:mod:`.synthesis`).

    Raises:
        SpecError: anything else, bounds < 1 or reversed, or an unknown ``omega_rule``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return SynthesisParams(omega_min=value, omega_max=value, omega_rule=omega_rule)
    match = _OMEGA_RANGE.match(value) if isinstance(value, str) else None
    if match is None:
        raise SpecError(f"omega ({value!r}) must be an int >= 1 or a range 'a-b' such as '5-11'")
    return SynthesisParams(omega_min=int(match.group(1)), omega_max=int(match.group(2)), omega_rule=omega_rule)


def _data_paths(data: str | list[str]) -> tuple[str, ...]:
    return (data,) if isinstance(data, str) else tuple(data)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationParams(ConstrainedParams):
    """Parameters of a plausible-deniability run (module docstring); validated before any work.

    Raises:
        SpecError: a bad value (k < 1, γ ≤ 1, ε₀ ≤ 0, ω malformed, fractions not in (0, 1) or
            summing to ≥ 1, t not in [1, k), …), each named.
    """

    space: str = dataclasses.field(default="", metadata={"path": True})
    data: Any = dataclasses.field(default="", metadata={"path": True})
    toy_records: int | None = dataclasses.field(default=None, metadata={"seed_key": "when_set"})
    transformation: str | None = dataclasses.field(default=None, metadata={"seed_key": "when_set"})
    buckets: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    structure_fraction: float = 0.19
    parameters_fraction: float = 0.19
    seeds_fraction: float = 0.49
    public_records: int | None = dataclasses.field(default=None, metadata={"seed_key": "when_set"})
    model_epsilon: float = 1.0
    accountant: str = "best"
    delta_slack: float = DEFAULT_DELTA_SLACK
    maxcost: int = 64
    alpha: float = 1.0
    omega: Any = "5-11"
    omega_rule: str = dataclasses.field(default="per_candidate", metadata={"seed_key": "unless_default"})
    k: int = 50
    gamma: float = 4.0
    epsilon0: float | None = None
    max_plausible: int | None = 100
    max_check_plausible: int | None = None
    t: int = 10
    candidates: int = 10_000
    batch: int = dataclasses.field(default=2048, metadata={"seed_key": "never"})  # results do not depend on it
    model_seed: int | None = dataclasses.field(default=None, metadata={"seed_key": "when_set"})

    _parameter_constraints: ClassVar = {
        "space": [Unconstrained()], "data": [Unconstrained()],  # file paths, or neither with toy_records
        "toy_records": [None, Interval(numbers.Integral, 10, None, closed="left")],
        "transformation": [Unconstrained()], "buckets": [Unconstrained()],  # checked against the table's domain
        "structure_fraction": [_FRACTION], "parameters_fraction": [_FRACTION], "seeds_fraction": [_FRACTION],
        "public_records": [None, Interval(numbers.Integral, 2, None, closed="left")],
        "model_epsilon": _MODEL["epsilon"], "accountant": _MODEL["accountant"],
        "delta_slack": _MODEL["delta_slack"], "maxcost": _MODEL["maxcost"], "alpha": _MODEL["alpha"],
        "omega": [Unconstrained()],  # an int or a range "a-b": parse_omega
        "omega_rule": SynthesisParams._parameter_constraints["omega_rule"],
        **PrivacyTestParams._parameter_constraints,
        "t": [Unconstrained()],  # Theorem 1's t, checked against k when Test 2 needs it
        "candidates": [_COUNT], "batch": [_COUNT],
        "model_seed": [None, Interval(numbers.Integral, 0, None, closed="left")],
    }
    _parameter_hints: ClassVar = {
        **PrivacyTestParams._parameter_hints,
        "public_records": "a public number of records the split fractions are taken of, or unset"}

    def _check_together(self) -> None:
        if self.toy_records is not None:
            if self.space or self.data:
                raise SpecError(f"toy_records ({self.toy_records!r}) replaces space and data; give one or the other")
        else:
            if not isinstance(self.space, str) or not self.space:
                raise SpecError(f"space ({self.space!r}) must be a file path (or set toy_records)")
            paths = _data_paths(self.data) if isinstance(self.data, (str, list)) else ()
            if not paths or not all(isinstance(p, str) and p for p in paths):
                raise SpecError(f"data ({self.data!r}) must be a file path or a list of file paths")
        fractions = (self.structure_fraction, self.parameters_fraction, self.seeds_fraction)
        if math.fsum(fractions) >= 1.0:
            raise SpecError(f"structure_fraction + parameters_fraction + seeds_fraction ({math.fsum(fractions)!r}) "
                            "must be < 1 (the rest is the test set)")
        self.synthesis()
        test = self.test()
        if test.epsilon0 is not None:
            test.guarantee(self.t)  # t in [1, k)

    def state_generator(self, configuration_rng: np.random.Generator) -> np.random.Generator:
        """The stream of the split, the model and the candidates' key: the configuration's own,
        or, with ``model_seed`` set, one shared by every configuration with that seed (common
        random numbers: a sweep over k, γ, ε₀ or ω then compares tests on one model and one
        stream of candidates, not different DP models)."""
        if self.model_seed is None:
            return configuration_rng
        return np.random.default_rng(np.random.SeedSequence(self.model_seed, spawn_key=(STATE_KEY,)))

    def data_paths(self) -> tuple[str, ...]:
        return _data_paths(self.data)

    def model_params(self) -> PlausibleDeniabilityModelParams:
        return PlausibleDeniabilityModelParams(epsilon=self.model_epsilon, accountant=self.accountant,
                                               delta_slack=self.delta_slack, maxcost=self.maxcost, alpha=self.alpha)

    def synthesis(self) -> SynthesisParams:
        return parse_omega(self.omega, self.omega_rule)

    def test(self) -> PrivacyTestParams:
        return PrivacyTestParams(k=self.k, gamma=self.gamma, epsilon0=self.epsilon0,
                                 max_plausible=self.max_plausible, max_check_plausible=self.max_check_plausible)

    def sizes(self, n: int) -> SplitSizes:
        """The parts' sizes for data of ``n`` records: the split fractions of ``public_records``
        when it is set (sizes fixed by the spec; the data must hold them and at least one record
        more, the rest going to the test set), else of ``n`` itself, which is then treated as
        public (replace-one neighbours keep it): |D_T| fixes the entropies' sensitivity, so a
        ledger shows a function of ``n``.

        Raises:
            SpecError: the parts need more records than the data holds.
        """
        base = n if self.public_records is None else self.public_records
        sizes = SplitSizes.from_fractions(base, structure=self.structure_fraction,
                                          parameters=self.parameters_fraction, seeds=self.seeds_fraction)
        sizes.check_fits(n)
        return sizes

    def published_split(self) -> dict[str, Any]:
        """What a bundle may say about the split: the spec's fractions, ``public_records`` and,
        when that is set, the sizes it fixes — never sizes computed from the data's own count."""
        fractions = {"structure": self.structure_fraction, "parameters": self.parameters_fraction,
                     "seeds": self.seeds_fraction}
        sizes = None
        if self.public_records is not None:
            fixed = SplitSizes.from_fractions(self.public_records, **fractions)
            sizes = {"structure": fixed.structure, "parameters": fixed.parameters, "seeds": fixed.seeds}
        return {"fractions": fractions, "public_records": self.public_records, "sizes": sizes}


SPLIT_PARTITION = ("data", part_scopes("data"))
"""D_T, D_P and D_S as a partition of the data, cut by :func:`.split.split_dataset`'s permutation."""

SPLIT_PLAN = SplitPlan("permuted")
"""The kind of split each trial draws for :data:`SPLIT_PARTITION` (a workload's ``partitions``)."""


TOY_SEED = 20170501
"""The public seed of the generated census-shaped table (``toy_records``)."""


@functools.lru_cache(maxsize=4)
def _toy_table(records: int) -> CodedTable:
    codes, domain = census_like(records, np.random.default_rng(TOY_SEED))
    return CodedTable(codes=codes, domain=domain)


def coded_table(params: GenerationParams) -> CodedTable:
    """The configuration's table, coded (cached per process)."""
    if params.toy_records is not None:
        return _toy_table(params.toy_records)
    return load_coded_table(params.space, params.data_paths(), params.transformation or "")


def check_against_table(params: GenerationParams, table: CodedTable) -> None:
    """What can only be checked with the domain: ω ≤ m, buckets' attributes and categories, the
    split's fit, and the memory of examination orders (drawn only when max_check_plausible < |D_S|)."""
    params.synthesis().check_for(len(table.domain))
    bucket_map(table.domain, params.buckets)
    seeds = params.sizes(len(table.codes)).seeds
    check = params.max_check_plausible
    if check is not None and check < seeds and params.batch * check > MAX_ORDER_WORDS:
        raise SpecError(f"batch ({params.batch!r}) × max_check_plausible ({check!r}) must be at most "
                        f"{MAX_ORDER_WORDS:,} when max_check_plausible < |D_S| ({seeds:,}): a batch draws that many "
                        f"examination-order words (16 bytes each with the orders); lower batch to "
                        f"{MAX_ORDER_WORDS // check} or leave max_check_plausible unset (every seed examined)")


def model_plan(params: GenerationParams, table: CodedTable) -> list[PrivacyEvent]:
    """The model's K steps for this table's public sizes."""
    sizes = params.sizes(len(table.codes))
    return PlausibleDeniabilityModel(params.model_params()).planned_events(
        table.domain, sizes.structure, sizes.parameters, buckets=bucket_map(table.domain, params.buckets))


def run_plan(params: GenerationParams, table: CodedTable) -> list[PrivacyEvent]:
    """The model's steps and, with Test 2, Theorem 1 composed over every candidate tested."""
    plan = model_plan(params, table)
    test = params.test()
    if test.epsilon0 is not None:
        plan.append(generation_event(test, t=params.t, invocations=params.candidates, scope=part_scopes()[2]))
    return plan


def fit_split_model(params: GenerationParams, table: CodedTable, rng: np.random.Generator, *,
                    ledger: Ledger | None = None) -> tuple[DataSplit, PlausibleDeniabilityModel, Ledger]:
    """Split (seeded), then fit the DP model on D_T and D_P, charging ``ledger`` (a fresh one
    with the params' accountant if None); what the fit charged is checked against the plan."""
    split = split_dataset(table.codes, sizes=params.sizes(len(table.codes)), domain=table.domain, rng=rng)
    if ledger is None:
        ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant=params.accountant,
                        delta_slack=None if params.accountant == "basic" else params.delta_slack)
    ledger.declare_partition(*SPLIT_PARTITION, split=split.positions)  # D_T, D_P, D_S: the split just drawn
    before = len(ledger.events)
    model = PlausibleDeniabilityModel(params.model_params()).fit(
        table.codes, split=split.positions, domain=table.domain, ledger=ledger,
        source=SeededSource(rng), buckets=bucket_map(table.domain, params.buckets))
    check_conforms(ledger.events[before:], model_plan(params, table), who="pd model fit", exact_sensitivity=True)
    return split, model, ledger
