"""Plausible-deniability studies on the platform's runner.

* ``pd_generation`` (actor pool): Mechanism 1 on a stream of candidates. The configuration's
  state — the seeded split, the DP model fitted on D_T and D_P, D_S and its seed index
  (:class:`~.batched.BatchTester`) and the candidates' Philox key — is built once and put in
  the object store; actors take batches of candidate indices and return, per candidate,
  whether it passed, its k' (plausible seeds found, capped by max_plausible) and its ω. Every
  candidate's draws are keyed by its index (:mod:`.streams`), so the results are identical for
  any number of workers and any batch size. Figure 6's sweep is this workload on a k × ω grid.

Spec parameters: :mod:`.generation_params`.

Privacy:
    A configuration's ledger is a plan: the split of ``data`` into D_T, D_P and D_S each trial
    draws (:meth:`partitions`, declared with the drawn split by the trial's fit) and its ``plan``: the model's K steps (scopes ``data/structure`` and
    ``data/parameters``; the spec's ``[budget]`` must use the model's ``accountant``, default
    ``"best"``, with the model's ``delta_slack``) and, with Test 2, one event composing Theorem 1
    over all ``candidates`` runs of Mechanism 1 (scope ``data/seeds``; see
    :func:`.privacy_tests.record_generation`). The state's fit charges its own ledger, which
    is checked against the model part of the plan before any candidate is drawn. Research
    only: the candidates' streams are a seeded PRNG.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Sections 2–6.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.batched import BatchTester, draw_batch, laplace_from_uniform
from privlab.mechanisms.plausible_deniability.dataset import CodedTable
from privlab.mechanisms.plausible_deniability.generation_params import (
    SPLIT_PARTITION, SPLIT_PLAN, GenerationParams, check_against_table, coded_table, fit_split_model, run_plan)
from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams
from privlab.mechanisms.tabular.domain import CODE_DTYPE
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import BOOLEAN, Interval, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import SplitPlan
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import ActorPoolWorkload, MetricKind, Pattern, Workload, register_workload

__all__ = ["GenerationState", "PlausibleDeniabilityGeneration"]


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

    def data_files(self, params: GenerationParams) -> tuple[str, ...]:
        return () if params.toy_records is not None else params.data_paths()

    def partitions(self, params: GenerationParams) -> list[tuple[str, tuple[str, ...], SplitPlan]]:
        return [(*SPLIT_PARTITION, SPLIT_PLAN)]

    def plan(self, params: GenerationParams) -> list[PrivacyEvent]:
        table = coded_table(params)
        check_against_table(params, table)
        return run_plan(params, table)

    def report(self, results: Any) -> dict[str, str | bytes]:
        from privlab.mechanisms.plausible_deniability.reports_generation import generation_report

        return generation_report(results)

    def item_count(self, params: GenerationParams) -> int:
        return math.ceil(params.candidates / params.batch)

    def build_state(self, params: GenerationParams, *, data: pd.DataFrame | None,
                    rng: np.random.Generator) -> GenerationState:
        if data is None:
            raise SpecError("pd_generation needs its data (the runner passes the files named by 'data')")
        table = CodedTable(codes=data, domain=coded_table(params).domain)
        rng = params.state_generator(rng)
        split, model, _ = fit_split_model(params, table, rng)
        seeds = split.seeds.to_numpy(dtype=CODE_DTYPE)
        # The key as generate_candidates draws it, so `privlab pd-generate` reproduces this state.
        words = SeededSource(rng).dp_generator(purpose="pd.candidates").integers(0, 2**64, size=2, dtype=np.uint64)
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluationParams(GenerationParams):
    """A generation's parameters plus what to measure (:mod:`.evaluation_run`).

    Raises:
        SpecError: unknown ``parts``, or ``baseline_epsilon`` ≤ 0.
    """

    parts: Any = ("tvd", "classifiers", "dp_baselines", "distinguishing", "model_accuracy")
    target: str = "income"
    baseline_epsilon: float = 1.0
    forest_accuracy: bool = False
    evaluation_records: int | None = dataclasses.field(default=None, metadata={"seed_key": "when_set"})

    _parameter_constraints: ClassVar = {
        **GenerationParams._parameter_constraints, "parts": [Unconstrained()], "target": [Unconstrained()],
        "baseline_epsilon": [Interval(numbers.Real, 0, None, closed="neither")], "forest_accuracy": [BOOLEAN],
        "evaluation_records": [None, Interval(numbers.Integral, 100, None, closed="left")]}

    def _check_together(self) -> None:
        super()._check_together()
        from privlab.mechanisms.plausible_deniability.evaluation_run import check_parts

        if not isinstance(self.parts, (list, tuple)):
            raise SpecError(f"parts ({self.parts!r}) must be a list of evaluation parts")
        check_parts(tuple(self.parts))


@register_workload
class PlausibleDeniabilityEvaluation(Workload):
    """One repetition of the paper's Section 6 evaluation per unit (:mod:`.evaluation_run`)."""

    name = "pd_evaluation"
    pattern = Pattern.GRID
    Params = EvaluationParams
    metrics: Mapping[str, MetricKind] = {}  # they depend on the parts and the table's attributes

    def data_key(self, params: EvaluationParams) -> str:
        return PlausibleDeniabilityGeneration.data_key(self, params)  # type: ignore[arg-type]

    def load_data(self, params: EvaluationParams) -> pd.DataFrame:
        return PlausibleDeniabilityGeneration.load_data(self, params)  # type: ignore[arg-type]

    def data_files(self, params: EvaluationParams) -> tuple[str, ...]:
        return PlausibleDeniabilityGeneration.data_files(self, params)  # type: ignore[arg-type]

    def partitions(self, params: EvaluationParams) -> list[tuple[str, tuple[str, ...], SplitPlan]]:
        return [(*SPLIT_PARTITION, SPLIT_PLAN)]

    def plan(self, params: EvaluationParams) -> list[PrivacyEvent]:
        table = coded_table(params)
        check_against_table(params, table)
        if params.target not in table.domain.names:
            raise SpecError(f"target ({params.target!r}) must be an attribute: {', '.join(table.domain.names)}")
        return run_plan(params, table)

    def metric_kinds(self, params: EvaluationParams) -> dict[str, MetricKind]:
        from privlab.mechanisms.plausible_deniability.evaluation_run import metric_names

        names = metric_names(tuple(params.parts), coded_table(params).domain.names)
        if params.forest_accuracy and "model_accuracy" in params.parts:
            names += [f"model_accuracy_forest_{a}" for a in coded_table(params).domain.names]
        return {name: MetricKind.VALUE for name in names}

    def run_trial(self, params: EvaluationParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        from privlab.mechanisms.plausible_deniability.evaluation_run import evaluate

        if data is None:
            raise SpecError("pd_evaluation needs its data (the runner passes the files named by 'data')")
        table = CodedTable(codes=data, domain=coded_table(params).domain)
        return evaluate(params, table, parts=tuple(params.parts), target=params.target,
                        baseline_epsilon=params.baseline_epsilon, forest_accuracy=params.forest_accuracy,
                        rng=source.rng, ledger=ledger, evaluation_records=params.evaluation_records)

    def report(self, results: Any) -> dict[str, str | bytes]:
        from privlab.mechanisms.plausible_deniability.reports_evaluation import evaluation_report

        return evaluation_report(results)
