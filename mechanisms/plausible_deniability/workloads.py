"""Plausible-deniability studies on the platform's runner.

* ``pd_generation`` (actor pool): Mechanism 1 on a stream of candidates. The configuration's
  state — the seeded split, the DP model fitted on D_T and D_P, D_S and its seed index
  (:class:`~.batched.BatchTester`) and the candidates' Philox key — is built once and put in
  the object store; actors take batches of candidate indices and return, per candidate,
  whether it passed, its k' (plausible seeds found, capped by max_plausible) and its ω. Every
  candidate's draws are keyed by its index (:mod:`.streams`), so the results are identical for
  any number of workers and any batch size. Figure 6's sweep is this workload on a k × ω grid.

Spec parameters: ``space`` and ``data`` (files, relative to the spec; ``data`` may list several
files, concatenated) — or ``toy_records``, the number of records of a generated census-shaped
table (:mod:`.census_like`, for examples that need no data) —, ``buckets`` (:func:`.dataset.bucket_map`), the split fractions, the
model's ``model_epsilon``, ``maxcost``, ``alpha``, ``omega`` (an int, or ``"a-b"`` for ω drawn
uniformly from [a, b] per candidate), the test's ``k``, ``gamma``, ``epsilon0`` (omit it for
Test 1, which has no DP guarantee), ``max_plausible``, ``max_check_plausible``, Theorem 1's
``t``, and ``candidates`` (tested) in batches of ``batch``.

Privacy:
    A configuration's ledger (its ``plan``) holds the model's K steps (scope ``data``; with
    the model's default ``accountant = "advanced"``, as the paper composes them, the spec's
    ``[budget]`` must use that accountant with the model's ``delta_slack``) and, with Test 2, one event composing Theorem 1 over
    all ``candidates`` runs of Mechanism 1 (scope ``seeds``; see
    :func:`.privacy_tests.record_generation`). The state's fit charges its own ledger, which
    is checked against the model part of the plan before any candidate is drawn. Research
    only: the candidates' streams are a seeded PRNG.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Sections 2–6.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.batched import BatchTester, draw_batch, laplace_from_uniform
from privlab.mechanisms.plausible_deniability.census_like import census_like
from privlab.mechanisms.plausible_deniability.dataset import CodedTable, bucket_map, load_coded_table
from privlab.mechanisms.plausible_deniability.model import (
    DEFAULT_DELTA_SLACK, PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams, generation_event
from privlab.mechanisms.plausible_deniability.split import DataSplit, SplitSizes, split_dataset
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams
from privlab.mechanisms.tabular.domain import CODE_DTYPE
from privlab.platform.errors import SpecError
from privlab.platform.ledger import Ledger, PrivacyEvent, check_conforms
from privlab.platform.randomness import SeededSource
from privlab.platform.registry import ActorPoolWorkload, MetricKind, register_workload

__all__ = ["GenerationParams", "PlausibleDeniabilityGeneration", "parse_omega"]

_OMEGA_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_omega(value: int | str) -> SynthesisParams:
    """``10`` → ω fixed at 10; ``"5-11"`` → ω uniform on [5, 11] per candidate.

    Raises:
        SpecError: anything else, or bounds < 1 or reversed.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return SynthesisParams.fixed(value)
    match = _OMEGA_RANGE.match(value) if isinstance(value, str) else None
    if match is None:
        raise SpecError(f"omega ({value!r}) must be an int >= 1 or a range 'a-b' such as '5-11'")
    return SynthesisParams(omega_min=int(match.group(1)), omega_max=int(match.group(2)))


def _data_paths(data: str | list[str]) -> tuple[str, ...]:
    return (data,) if isinstance(data, str) else tuple(data)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationParams:
    """Parameters of a plausible-deniability run (module docstring); validated before any work.

    Raises:
        SpecError: a bad value (k < 1, γ ≤ 1, ε₀ ≤ 0, ω malformed, fractions not in (0, 1) or
            summing to ≥ 1, t not in [1, k), …), each named.
    """

    space: str = dataclasses.field(default="", metadata={"path": True})
    data: Any = dataclasses.field(default="", metadata={"path": True})
    toy_records: int | None = dataclasses.field(default=None, metadata={"seed_key": "when_set"})
    buckets: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    structure_fraction: float = 0.19
    parameters_fraction: float = 0.19
    seeds_fraction: float = 0.49
    model_epsilon: float = 1.0
    accountant: str = "advanced"
    delta_slack: float = DEFAULT_DELTA_SLACK
    maxcost: int = 64
    alpha: float = 1.0
    omega: Any = "5-11"
    k: int = 50
    gamma: float = 4.0
    epsilon0: float | None = None
    max_plausible: int | None = 100
    max_check_plausible: int | None = 50_000
    t: int = 10
    candidates: int = 10_000
    batch: int = dataclasses.field(default=2048, metadata={"seed_key": "never"})  # results do not depend on it

    def __post_init__(self) -> None:
        if self.toy_records is not None:
            if isinstance(self.toy_records, bool) or not isinstance(self.toy_records, int) or self.toy_records < 10:
                raise SpecError(f"toy_records ({self.toy_records!r}) must be an int >= 10")
            if self.space or self.data:
                raise SpecError(f"toy_records ({self.toy_records!r}) replaces space and data; give one or the other")
        else:
            if not isinstance(self.space, str) or not self.space:
                raise SpecError(f"space ({self.space!r}) must be a file path (or set toy_records)")
            paths = _data_paths(self.data) if isinstance(self.data, (str, list)) else ()
            if not paths or not all(isinstance(p, str) and p for p in paths):
                raise SpecError(f"data ({self.data!r}) must be a file path or a list of file paths")
        fractions = (self.structure_fraction, self.parameters_fraction, self.seeds_fraction)
        for name, value in zip(("structure_fraction", "parameters_fraction", "seeds_fraction"), fractions):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
                raise SpecError(f"{name} ({value!r}) must be a fraction in (0, 1)")
        if math.fsum(fractions) >= 1.0:
            raise SpecError(f"structure_fraction + parameters_fraction + seeds_fraction ({math.fsum(fractions)!r}) "
                            "must be < 1 (the rest is the test set)")
        for name in ("candidates", "batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{name} ({value!r}) must be an int >= 1")
        self.model_params()
        self.synthesis()
        test = self.test()
        if test.epsilon0 is not None:
            test.guarantee(self.t)  # t in [1, k)

    def data_paths(self) -> tuple[str, ...]:
        return _data_paths(self.data)

    def model_params(self) -> PlausibleDeniabilityModelParams:
        return PlausibleDeniabilityModelParams(epsilon=self.model_epsilon, accountant=self.accountant,
                                               delta_slack=self.delta_slack, maxcost=self.maxcost, alpha=self.alpha)

    def synthesis(self) -> SynthesisParams:
        return parse_omega(self.omega)

    def test(self) -> PrivacyTestParams:
        return PrivacyTestParams(k=self.k, gamma=self.gamma, epsilon0=self.epsilon0,
                                 max_plausible=self.max_plausible, max_check_plausible=self.max_check_plausible)

    def sizes(self, n: int) -> SplitSizes:
        sizes = SplitSizes.from_fractions(n, structure=self.structure_fraction, parameters=self.parameters_fraction,
                                          seeds=self.seeds_fraction)
        sizes.check_fits(n)
        return sizes


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
    return load_coded_table(params.space, params.data_paths())


def check_against_table(params: GenerationParams, table: CodedTable) -> None:
    """What can only be checked with the domain: ω ≤ m, buckets' attributes and categories."""
    params.synthesis().check_for(len(table.domain))
    bucket_map(table.domain, params.buckets)
    params.sizes(len(table.codes))


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
        plan.append(generation_event(test, t=params.t, invocations=params.candidates, delta_slack=params.delta_slack))
    return plan


def fit_split_model(params: GenerationParams, table: CodedTable, rng: np.random.Generator
                    ) -> tuple[DataSplit, PlausibleDeniabilityModel, Ledger]:
    """Split (seeded), then fit the DP model on D_T and D_P with a ledger checked against the plan."""
    split = split_dataset(table.codes, sizes=params.sizes(len(table.codes)), domain=table.domain, rng=rng)
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant=params.accountant, delta_slack=params.delta_slack)
    model = PlausibleDeniabilityModel(params.model_params()).fit(
        split.structure, parameter_data=split.parameters, domain=table.domain, ledger=ledger,
        source=SeededSource(rng), buckets=bucket_map(table.domain, params.buckets))
    check_conforms(ledger.events, model_plan(params, table), who="pd model fit", exact_sensitivity=True)
    return split, model, ledger


@dataclasses.dataclass(frozen=True)
class GenerationState:
    """What every actor holds: the tester (model + D_S index) and the candidates' stream key."""

    tester: BatchTester
    key: tuple[int, int]
    n_seeds: int
    m: int
    synthesis: SynthesisParams
    test: PrivacyTestParams


@register_workload
class PlausibleDeniabilityGeneration(ActorPoolWorkload):
    """Mechanism 1 (seed, synthesize, test) on ``candidates`` candidates (module docstring)."""

    name = "pd_generation"
    Params = GenerationParams
    metrics = {"passed": MetricKind.RATE, "plausible_seeds": MetricKind.VALUE, "omega_drawn": MetricKind.VALUE}

    def data_key(self, params: GenerationParams) -> str:
        if params.toy_records is not None:
            return f"census_like:{params.toy_records}"
        return f"{params.space}|{'|'.join(params.data_paths())}"

    def load_data(self, params: GenerationParams) -> pd.DataFrame:
        table = coded_table(params)
        check_against_table(params, table)
        return table.codes

    def plan(self, params: GenerationParams) -> list[PrivacyEvent]:
        table = coded_table(params)
        check_against_table(params, table)
        return run_plan(params, table)

    def item_count(self, params: GenerationParams) -> int:
        return math.ceil(params.candidates / params.batch)

    def build_state(self, params: GenerationParams, *, data: pd.DataFrame | None,
                    rng: np.random.Generator) -> GenerationState:
        if data is None:
            raise SpecError("pd_generation needs its data (the runner passes the files named by 'data')")
        table = CodedTable(codes=data, domain=coded_table(params).domain)
        split, model, _ = fit_split_model(params, table, rng)
        seeds = split.seeds.to_numpy(dtype=CODE_DTYPE)
        words = rng.integers(0, 2**64, size=2, dtype=np.uint64)
        test = params.test()
        tester = BatchTester(model, seeds, params.synthesis(), test.gamma, test.max_plausible)
        return GenerationState(tester=tester, key=(int(words[0]), int(words[1])), n_seeds=len(seeds), m=model.m,
                               synthesis=params.synthesis(), test=test)

    def items(self, params: GenerationParams, *, rng: np.random.Generator) -> Iterator[tuple[int, int]]:
        for start in range(0, params.candidates, params.batch):
            yield start, min(start + params.batch, params.candidates)

    def process(self, state: GenerationState, item: tuple[int, int], *,
                source: SeededSource) -> Mapping[str, np.ndarray]:
        start, stop = item
        test = state.test
        draws = draw_batch(state.key, start, stop, n_seeds=state.n_seeds, m=state.m, synthesis=state.synthesis,
                           test_noise=test.epsilon0 is not None, check=test.max_check_plausible)
        _, found = state.tester.run(draws)
        thresholds = np.full(len(found), float(test.k))
        if test.epsilon0 is not None:
            thresholds = test.k + laplace_from_uniform(draws.noise, 1.0 / test.epsilon0)
        return {"passed": (found >= thresholds).astype(np.float64), "plausible_seeds": found.astype(np.float64),
                "omega_drawn": draws.omegas.astype(np.float64)}
