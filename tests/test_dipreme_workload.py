"""The ``private_forests`` workload and the DiPriMe specs (issue 11).

Every spec under experiments/dipreme loads; its public bounds cover every column of its dataset
and every value in it (the estimators refuse data outside them); one trial charges exactly the
workload's plan. Tests that read ../shared/data skip with a reason when it is absent, and
fail under CI=true (the pattern of tests/conftest.py::shared_dataset).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from privlab.mechanisms.dipreme.datasets import TARGET
from privlab.mechanisms.dipreme.inputs import encode_features, layout_for
from privlab.mechanisms.dipreme.workloads import ForestStudy, ForestStudyParams
from privlab.platform.core.errors import BudgetExceededError, LedgerError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment import registry
from privlab.platform.experiment.spec import load_spec

SPECS = sorted((Path(__file__).resolve().parents[1] / "experiments" / "dipreme").glob("*.toml"))


def _require(path: str) -> None:
    if Path(path).is_file():
        return
    reason = f"public dataset {path!r} is missing; see {Path(path).parent}/README.md"
    if os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def _first_params(spec_path: Path) -> ForestStudyParams:
    spec = load_spec(spec_path)
    return ForestStudyParams(**spec.configurations[0].params)


def test_there_is_a_spec_per_table_and_figure() -> None:
    assert {p.stem for p in SPECS} >= {"table2_banknote", "table2_credit", "table2_robot", "table1_parkinsons",
                                       "table1_appliances", "figure3_depth", "figure3_trees"}


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.stem)
def test_every_spec_loads_and_its_bounds_cover_its_dataset(spec_path: Path) -> None:
    params = _first_params(spec_path)
    _require(params.data)
    frame = ForestStudy().load_data(params)
    columns = [c for c in frame.columns if c != TARGET]
    bounds, cats = params.features(columns)
    layout, categories = layout_for(bounds, cats, len(columns), required=True)
    encode_features(frame[columns].to_numpy(float), layout, {j: np.asarray(v) for j, v in categories.items()},
                    training=True, bounds_known=True)  # raises SchemaError on a value outside them
    target = frame[TARGET].to_numpy()
    if params.task == "regression":
        assert params.target_bounds[0] <= target.min() and target.max() <= params.target_bounds[1]
    else:
        assert set(np.unique(target)) <= set(params.classes)


@pytest.mark.parametrize("method", ["dipreme", "dpert", "dpdf", "median", "random_forest"])
def test_a_trial_charges_exactly_the_estimators_plan_on_the_replace_one_ledger(method: str) -> None:
    base = _first_params(next(p for p in SPECS if p.stem == "table2_banknote"))
    _require(base.data)
    params = ForestStudyParams(**{**base.__dict__, "method": method, "epsilon": 0.7, "n_estimators": 3,
                                  "max_depth": 2})
    workload = ForestStudy()
    frame = workload.load_data(params)
    # The runner's trial ledger: replace-one by default, for_trial() of the configuration's plan (which
    # holds the workload's partitions as planned); the trial's fit declares the split it draws.
    plan = workload.declare_partitions(params, Ledger(epsilon_cap=0.7))
    assert plan.is_plan == (method in ("dipreme", "dpert"))
    ledger = plan.for_trial()
    metrics = workload.run_trial(params, data=frame, source=SeededSource(np.random.default_rng(3)), ledger=ledger)
    assert list(ledger.events) == workload.plan(params)
    registry.check_declared_partitions(workload, params, ledger, who="test")
    private = method in ("dipreme", "dpert", "dpdf")
    assert ledger.total().epsilon == pytest.approx(0.7 if private else 0.0, rel=1e-12)
    assert all(e.name != "forest_fit" for e in ledger.events)  # no hand-written event
    if private:  # the estimator's own steps, with replace-one sensitivities (twice add/remove-one's)
        assert ledger.events and all(e.step.endswith("Classifier") for e in ledger.events)
        assert any(e.sensitivity == 2.0 and e.name == "leaf_class_counts" for e in ledger.events)
    if method in ("dipreme", "dpert"):  # disjoint trees: parallel over a positional split
        [partition] = ledger.to_dict()["partitions"]
        assert partition["split"]["kind"] == "permuted" and len(partition["parts"]) == 3
        assert {e.scope for e in ledger.events} == set(partition["parts"])
    else:
        assert workload.partitions(params) == [] and ledger.partitions == ()
    assert 0.0 <= metrics["test_error"] < 0.5
    # Standalone, on a ledger without the partition, the fit declares the same one itself.
    alone = Ledger(epsilon_cap=0.7)
    workload.run_trial(params, data=frame, source=SeededSource(np.random.default_rng(3)), ledger=alone)
    assert alone.events == ledger.events and alone.to_dict() == ledger.to_dict()
    # A plan is never charged by a fit: a trial that forgot for_trial() is refused before anything is drawn.
    if plan.is_plan:
        with pytest.raises(LedgerError, match="the ledger is a plan"):
            workload.run_trial(params, data=frame, source=SeededSource(np.random.default_rng(3)), ledger=plan)
        assert len(plan) == 0


def test_the_robot_task_is_the_papers_binary_one_and_depth_is_the_papers_where_stated() -> None:
    binary = _first_params(next(p for p in SPECS if p.stem == "table2_robot"))
    _require(binary.data)
    target = ForestStudy().load_data(binary)[TARGET]
    assert list(binary.classes) == ["Move-Forward", "Turn"]
    assert float((target == "Move-Forward").mean()) == pytest.approx(0.404, abs=5e-4)  # the majority-class error
    four = ForestStudy().load_data(_first_params(next(p for p in SPECS if p.stem == "table2_robot_4class")))
    assert four[TARGET].nunique() == 4
    for stem in ("table1_parkinsons", "table1_appliances", "figure3_trees"):  # Section 4.1: depth 5 (UCI regression)
        assert _first_params(next(p for p in SPECS if p.stem == stem)).max_depth == 5


def test_the_runner_checks_the_plan_with_its_partition_against_the_cap() -> None:
    base = _first_params(next(p for p in SPECS if p.stem == "table2_banknote"))
    params = ForestStudyParams(**{**base.__dict__, "method": "dipreme", "epsilon": 0.7, "n_estimators": 10})
    workload = ForestStudy()
    probe = workload.declare_partitions(params, Ledger(epsilon_cap=0.7))
    assert probe.check_plan(workload.plan(params)).epsilon == pytest.approx(0.7, rel=1e-12)  # 10 trees in parallel
    without_partition = Ledger(epsilon_cap=0.7)  # the trees would compose sequentially: 10 × 0.7
    with pytest.raises(BudgetExceededError, match="over the cap"):
        without_partition.check_plan(workload.plan(params))
    extra = workload.declare_partitions(params, Ledger(epsilon_cap=None))
    extra.declare_partition("other", ["a", "b"], split=PositionalSplit.permuted(4, [2, 2], rng=np.random.default_rng(0)))
    with pytest.raises(LedgerError, match="holds partitions"):  # a trial that declared one not planned
        registry.check_declared_partitions(workload, params, extra, who="a trial")
    with pytest.raises(LedgerError, match="holds partitions"):  # planned, never drawn
        registry.check_declared_partitions(workload, params, workload.declare_partitions(params, Ledger(epsilon_cap=None)),
                                           who="a trial")


def test_bad_study_parameters_are_refused_when_the_spec_is_built() -> None:
    base = _first_params(next(p for p in SPECS if p.stem == "table1_parkinsons")).__dict__
    with pytest.raises(ValueError, match=r"method \('dpdf'\) must be a regression method"):
        ForestStudyParams(**{**base, "method": "dpdf"})
    with pytest.raises(ValueError, match=r"target_bounds \(\(\)\) must be \[lower, upper\]"):
        ForestStudyParams(**{**base, "target_bounds": ()})
    with pytest.raises(ValueError, match=r"epsilon \(0.0\) must be a finite real number > 0"):
        ForestStudyParams(**{**base, "epsilon": 0.0})
    with pytest.raises(ValueError, match=r"split_fraction \(1.5\) must be"):
        ForestStudyParams(**{**base, "split_fraction": 1.5})
