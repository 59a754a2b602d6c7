"""Per-unit detail as data (issue 16): the per-unit tables survive an interrupt with each row
exactly once, and ``privlab compare`` gives the same table from a run's index as from its
child runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.platform.core.errors import ExecutionError, SpecError
from privlab.platform.experiment.spec import load_spec
from privlab.platform.results import compare
from privlab.platform.results.compare import comparison_frame
from privlab.platform.run.runner import RunInterrupted, RunOptions, run_experiment
from privlab.platform.tracking.run_tags import CONFIG_TAG
from privlab.platform.tracking.tracker import Tracker
from privlab.platform.tracking.unit_table import read_unit_table, read_unit_tables, unit_frame

REPETITIONS = 7


SPEC = (
    f'name = "path"\nseed = 5\nworkload = "column_mean_path"\nrepetitions = {REPETITIONS}\n'
    '[params]\npath = "ages.csv"\ncolumn = "age"\nlower = 17.0\nupper = 90.0\nn = 200\n'
    '[grid]\nepsilon = [0.5, 1.0, 2.0]\n[tracking]\nexperiment = "path"\n[execution]\nbatch_size = 2\n'
)


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("unit-tables")
    frame = pd.DataFrame({"age": np.random.default_rng(1).integers(17, 91, size=200)})
    frame.to_csv(folder / "ages.csv", index=False)
    (folder / "path.toml").write_text(SPEC)
    return folder / "path.toml"


@pytest.fixture(scope="module")
def runs(spec_path: Path) -> dict:
    """One run never stopped, and one stopped twice (after 3 units, mid-range and mid-configuration,
    then after 5 more) and resumed to the end; the comparison of the stopped run as it was."""
    uri = f"sqlite:///{spec_path.parent / 'mlflow.db'}"
    spec = load_spec(spec_path)
    whole = run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False))
    run_id = None
    for stop in (3, 5):
        with pytest.raises(RunInterrupted) as stopped:
            run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False,
                                            stop_after_units=stop, resume=run_id))
        run_id = stopped.value.run_id
    interrupted = comparison_frame(Tracker(uri), "path", run_id=run_id)
    resumed = run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False, resume=run_id))
    return {"uri": uri, "whole": whole, "resumed": resumed, "interrupted_comparison": interrupted}


def _tables(tracker: Tracker, run_id: str) -> dict[str, pd.DataFrame]:
    experiment_id = tracker.get_run(run_id).info.experiment_id
    tables = {}
    every = read_unit_tables(tracker, run_id)  # the whole grid's, from one read of the parts
    for child in tracker.configuration_runs(experiment_id, run_id):
        table = read_unit_table(tracker, child.info.run_id)
        assert table is not None, f"{child.data.tags[CONFIG_TAG]} has no per-unit table"
        pd.testing.assert_frame_equal(every[child.info.run_id], table)
        tables[child.data.tags[CONFIG_TAG]] = table
    return tables


def test_an_interrupted_and_resumed_run_ends_with_every_units_row_exactly_once(runs: dict) -> None:
    """Every configuration's table holds units 0..6 once each, with the values of the run never
    stopped (the column_mean_path workload reports no timings, so whole rows compare)."""
    whole, resumed = runs["whole"], runs["resumed"]
    assert resumed["configurations"] == whole["configurations"]
    tracker = Tracker(runs["uri"])
    expected, tables = _tables(tracker, whole["run_id"]), _tables(tracker, resumed["run_id"])
    assert sorted(tables) == [c["id"] for c in whole["configurations"]]
    for config_id, table in tables.items():
        assert table["unit"].tolist() == list(range(REPETITIONS))
        pd.testing.assert_frame_equal(table, expected[config_id])


def test_compare_reads_a_finished_runs_index_and_gets_the_child_runs_answer(
    runs: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = Tracker(runs["uri"])
    searched: list[str] = []
    original = tracker.configuration_runs

    def counting(experiment_id: str, parent_id: str, **kwargs: object) -> list:
        searched.append(parent_id)
        return original(experiment_id, parent_id, **kwargs)

    monkeypatch.setattr(tracker, "configuration_runs", counting)
    for summary in (runs["whole"], runs["resumed"]):  # the resumed run's index holds runs of both drivers
        searched.clear()
        indexed = comparison_frame(tracker, "path", run_id=summary["run_id"])
        assert searched == [], "a complete run is compared from its index, without searching its child runs"
        with monkeypatch.context() as patch:
            patch.setattr(compare, "read_index_table", lambda tracker, run_id: None)
            from_children = comparison_frame(tracker, "path", run_id=summary["run_id"])
        assert searched == [summary["run_id"]]
        assert len(indexed) == 3 and "timing_wall_seconds" in indexed.columns
        pd.testing.assert_frame_equal(indexed, from_children)
        assert compare.render_table(indexed) == compare.render_table(from_children)
        assert compare.to_csv(indexed) == compare.to_csv(from_children)


def test_an_interrupted_run_is_compared_from_its_child_runs(runs: dict) -> None:
    # 8 units of 7 per configuration: the first configuration finished before the second stop
    assert runs["interrupted_comparison"]["config_id"].tolist() == ["path-000"]


def test_a_missing_or_repeated_row_is_refused() -> None:
    records = [(0, {"x": 1.0}), (2, {"x": 3.0})]
    with pytest.raises(ExecutionError, match=r"units 0..2 once each; missing \[1\], repeated \[\]"):
        unit_frame(records, metrics=["x"], study_key=1, config_key=2, units=3, where="c")
    with pytest.raises(ExecutionError, match=r"missing \[\], repeated \[0\]"):
        unit_frame([(0, {"x": 1.0}), (0, {"x": 1.0})], metrics=["x"], study_key=1, config_key=2, units=1, where="c")
    frame = unit_frame([(1, {"x": 2.0}), (0, {"x": 1.0})], metrics=["x"], study_key=1, config_key=2, units=2, where="c")
    assert frame.to_dict("list") == {"unit": [0, 1], "seed_key": ["1/2/0", "1/2/1"], "x": [1.0, 2.0]}


def test_the_unit_runs_option_must_be_a_boolean(spec_path: Path) -> None:
    assert load_spec(spec_path).tracking.unit_runs is False
    assert load_spec(spec_path, ["tracking.unit_runs=true"]).tracking.unit_runs is True
    with pytest.raises(SpecError, match=r"\[tracking\] unit_runs \('yes'\) must be true or false"):
        load_spec(spec_path, ["tracking.unit_runs=yes"])


BEYOND_SUMMARY = ("_count", "_trials", "_sd", "_min", "_max", "_p05", "_p50", "_p95")


def test_configuration_runs_log_the_summary_statistics_and_the_index_holds_every_statistic(
    runs: dict, spec_path: Path
) -> None:
    """By default ([tracking] run_statistics = "centre") a configuration run's MLflow metrics are
    each metric's centre; the other statistics are in the run's result parts and index, so
    compare shows them all. With "all" the run logs them too, and compare's answer is the same."""
    tracker = Tracker(runs["uri"])
    experiment_id = tracker.get_run(runs["whole"]["run_id"]).info.experiment_id
    for child in tracker.configuration_runs(experiment_id, runs["whole"]["run_id"]):
        logged = child.data.metrics
        assert not any(k.endswith("_ci_low") for k in logged) and any(k.endswith("_mean") for k in logged)
        assert not [k for k in logged if k.endswith(BEYOND_SUMMARY)]
    summary_mode = comparison_frame(tracker, "path", run_id=runs["whole"]["run_id"])
    assert [c for c in summary_mode.columns if c.endswith(BEYOND_SUMMARY)]

    uri = f"sqlite:///{spec_path.parent / 'all-statistics.db'}"
    everything = run_experiment(load_spec(spec_path, ['tracking.run_statistics="all"']),
                                RunOptions(serial=True, tracking_uri=uri, progress=False))
    assert everything["configurations"] == runs["whole"]["configurations"]
    other = Tracker(uri)
    experiment_id = other.get_run(everything["run_id"]).info.experiment_id
    for child in other.configuration_runs(experiment_id, everything["run_id"]):
        assert [k for k in child.data.metrics if k.endswith(BEYOND_SUMMARY)]
    all_mode = comparison_frame(other, "path", run_id=everything["run_id"])
    same = [c for c in summary_mode.columns if c not in ("parent_run_id", "run_id") and not c.startswith("timing_")]
    pd.testing.assert_frame_equal(summary_mode[same], all_mode[same])
