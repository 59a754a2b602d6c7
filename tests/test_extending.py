"""The three ways to extend privlab, each as the smallest complete example (ARCHITECTURE.md).

Each example is what a mechanism's own module would hold: a class, registered with one
decorator (``@register_workload``, ``@register_synthesizer``, ``@register_criterion``) and, in a
real package, one entry-point line in pyproject.toml. The test uses it through the platform
exactly as a built-in one is used; none of them touches platform code. Here the decorators are
applied by a fixture for the duration of each test, so the examples never leak into other
tests' registries.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.acceptance.base import CRITERIA, AcceptanceCriterion, criterion_from_spec, register_criterion
from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.synthesizers.base import (
    SYNTHESIZERS,
    BudgetStep,
    Synthesizer,
    register_synthesizer,
    split_epsilon,
    synthesizer_from_spec,
)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource, SeededSource
from privlab.platform.experiment.registry import WORKLOADS, MetricKind, Pattern, Workload, register_workload
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunOptions, run_experiment

@pytest.fixture(autouse=True)
def registered_examples() -> Iterator[None]:
    """``@register_workload`` etc., as the examples' module would apply them, undone afterwards."""
    register_workload(ExampleNoisyCount)
    register_synthesizer(ExampleFirstColumn)
    register_criterion(ExampleShareOfCodeZero)
    try:
        yield
    finally:
        WORKLOADS.unregister(ExampleNoisyCount.name)
        SYNTHESIZERS.unregister(ExampleFirstColumn.name)
        CRITERIA.unregister(ExampleShareOfCodeZero.kind)


# --- 1. a workload: a study the runner schedules, aggregates and logs -------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoisyCountParams:
    epsilon: float = 1.0

    def __post_init__(self) -> None:
        if not self.epsilon > 0:
            raise ValueError(f"epsilon ({self.epsilon!r}) must be > 0")


class ExampleNoisyCount(Workload):
    """The absolute error of an ε-DP count (sensitivity 1): E|Lap(1/ε)| = 1/ε."""

    name = "example_noisy_count"
    pattern = Pattern.TRIALS
    Params = NoisyCountParams
    metrics = {"abs_error": MetricKind.VALUE}

    def plan(self, params: NoisyCountParams) -> list[PrivacyEvent]:
        return [PrivacyEvent(name="count", mechanism="laplace", epsilon=params.epsilon, sensitivity=1.0,
                             noise_scale=1.0 / params.epsilon, scope="data", step="count")]

    def run_trial(self, params: NoisyCountParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        noisy = laplace_mechanism(100.0, sensitivity=1.0, epsilon=params.epsilon, source=source,
                                  ledger=ledger, name="count", step="count")
        return {"abs_error": abs(noisy - 100.0)}


def test_a_new_workload_runs_on_the_platform(tmp_path: Path, tracking_uri: str) -> None:
    spec = tmp_path / "example.toml"
    spec.write_text('name = "example"\nseed = 1\nworkload = "example_noisy_count"\ntrials = 4000\n'
                    '[grid]\nepsilon = [0.5, 2.0]\n[tracking]\nexperiment = "example"\n')
    summary = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False, tracking_uri=tracking_uri))
    errors = {entry["params"]["params.epsilon"]: entry["metrics"]["abs_error_mean"] for entry in summary["configurations"]}
    # E|Lap(b)| = b = 1/ε; sd of the mean of 4,000 draws is b/√4000 ≈ 0.016·b: ±10% is > 6 sd.
    assert errors[0.5] == pytest.approx(2.0, rel=0.1) and errors[2.0] == pytest.approx(0.5, rel=0.1)
    assert summary["epsilon_total"] == 2.0


# --- 2. a synthesizer: fits on private codes with DP, samples synthetic records ----------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class FirstColumnParams:
    """No hyperparameters."""


class ExampleFirstColumn(Synthesizer):
    """A noisy histogram of the first column (L1 sensitivity 2 under replace-one: one count
    moves from one code to another); every other column uniform. All of ε on one Laplace step."""

    name: ClassVar[str] = "example_first_column"
    Params: ClassVar[type] = FirstColumnParams

    def budget_steps(self, epsilon: float, domain: Domain, n: int) -> tuple[BudgetStep, ...]:
        (share,) = split_epsilon(epsilon, [1.0])
        return (BudgetStep(name=f"{self.name}/histogram", mechanism="laplace", epsilon=share, sensitivity=2.0),)

    def _fit(self, codes: np.ndarray, *, domain: Domain, steps: tuple[BudgetStep, ...], ledger: Ledger,
             source: RandomSource, scope: str) -> None:
        counts = np.bincount(codes[0], minlength=domain[domain.names[0]].size).astype(np.float64)
        noisy = np.clip(self._laplace(steps[0], counts, ledger=ledger, source=source, scope=scope), 0.0, None)
        self.first_ = noisy / noisy.sum() if noisy.sum() > 0 else np.full(noisy.size, 1.0 / noisy.size)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        first = rng.choice(self.first_.size, size=n, p=self.first_)
        rest = [rng.integers(0, column.size, size=n) for column in list(self.domain_)[1:]]
        return np.vstack([first, *rest]).astype(np.int64)


def test_a_new_synthesizer_is_built_from_a_spec_and_charges_its_plan() -> None:
    domain = Domain.from_columns([ColumnDomain(name="a", labels=("x", "y", "z")),
                                  ColumnDomain(name="b", labels=("p", "q"))])
    data = pd.DataFrame({"a": np.array([0] * 900 + [2] * 100), "b": np.zeros(1000, dtype=int)})
    synthesizer = synthesizer_from_spec("example_first_column", {}, where="test")
    ledger = Ledger(epsilon_cap=1.0)
    synthesizer.fit(data, domain=domain, epsilon=1.0, ledger=ledger, source=SeededSource(np.random.default_rng(3)))
    (event,) = ledger.events
    assert (event.epsilon, event.sensitivity, event.noise_scale) == (1.0, 2.0, 2.0)
    sample = synthesizer.sample(20_000, rng=np.random.default_rng(4))
    # Noise of scale 2 on counts of 900 and 100 moves the shares by < 1%; sampling sd ≈ 0.002.
    assert sample["a"].eq(0).mean() == pytest.approx(0.9, abs=0.02)
    assert set(sample["b"]) == {0, 1}


# --- 3. an acceptance criterion: an error measure, a threshold, a DP release ------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExampleShareOfCodeZero(AcceptanceCriterion):
    """|share of code 0 in ``column`` in R − the same in S|. Replacing one record of R moves the
    share by at most 1/n, so the sensitivity is 1/n (n public)."""

    kind: ClassVar[str] = "example_share_of_code_zero"
    column: str

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        return abs(float(transformed[self.column].eq(0).mean()) - float(candidate[self.column].eq(0).mean()))

    def sensitivity(self, n: int) -> float:
        return 1.0 / n


def test_a_new_criterion_is_built_from_a_spec_and_releases_with_its_sensitivity() -> None:
    criterion = criterion_from_spec({"kind": "example_share_of_code_zero", "name": "zeros", "threshold": 0.05,
                                     "epsilon": 0.5, "column": "a"}, where="test")
    original = pd.DataFrame({"a": [0] * 600 + [1] * 400})
    candidate = pd.DataFrame({"a": [0] * 580 + [1] * 420})
    ledger = Ledger(epsilon_cap=0.5)
    result = criterion.release(original, candidate, domain=None, source=SeededSource(np.random.default_rng(5)),  # type: ignore[arg-type]
                               ledger=ledger)
    assert result.sensitivity == 1.0 / 1000 and result.noise_scale == pytest.approx(1.0 / 1000 / 0.5)
    # exact error 0.02; noise of scale 0.002 exceeds 0.03 with probability e^-15 ≈ 3e-7.
    assert result.passed and abs(result.dp_value - 0.02) < 0.03
    assert math.isclose(ledger.total().epsilon, 0.5)
