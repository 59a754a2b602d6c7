"""Datasets through the runner: a registered generator (drawn per trial) and a parquet file
(validated once, put in the object store once)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.platform.core.errors import SchemaError
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunOptions, run_experiment


def _run(spec: Path, uri: str) -> dict:
    return run_experiment(load_spec(spec), RunOptions(serial=True, tracking_uri=uri, progress=False))


def test_generated_dataset_is_drawn_per_trial(tmp_path: Path, tracking_uri: str) -> None:
    spec = tmp_path / "gen.toml"
    spec.write_text(
        'name = "gen"\nseed = 4\nworkload = "column_mean"\nrepetitions = 400\n'
        '[params]\ncolumn = "x1"\nlower = -4.0\nupper = 4.0\nn = 500\n'
        '[grid]\nepsilon = [0.5, 2.0]\n'
        '[dataset]\ngenerator = "bounded_normal"\n[dataset.params]\nn = 500\nmean = 1.0\n'
    )
    summary = _run(spec, tracking_uri)
    low, high = summary["configurations"]
    # The DP mean over fresh N(1, 1) samples of 500 is centred on 1 with sd ≈ sqrt(1/500 + 2b²).
    for entry, epsilon in ((low, 0.5), (high, 2.0)):
        b = 8.0 / 500 / epsilon
        sd = np.sqrt(1 / 500 + 2 * b * b)
        assert abs(entry["metrics"]["dp_mean_mean"] - 1.0) < 5 * sd / np.sqrt(400)
        assert entry["metrics"]["dp_mean_sd"] == pytest.approx(sd, rel=0.15)
        assert entry["metrics"]["abs_error_mean"] == pytest.approx(b, rel=0.15)  # E|Lap(b)| = b
    assert low["params"]["dataset.mean"] == 1.0


def test_file_dataset_is_validated_and_shared(tmp_path: Path, tracking_uri: str) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.integers(17, 91, size=300), "hours": rng.uniform(0, 99, size=300)})
    data = tmp_path / "people.parquet"
    frame.to_parquet(data)
    spec = tmp_path / "file.toml"
    spec.write_text(
        'name = "file"\nseed = 4\nworkload = "column_mean"\nrepetitions = 50\n'
        '[params]\ncolumn = "age"\nlower = 17.0\nupper = 90.0\nn = 300\nepsilon = 1.0\n'
        '[dataset]\npath = "people.parquet"\n'
        '[dataset.columns.age]\ntype = "integer"\nlower = 17\nupper = 90\n'
        '[dataset.columns.hours]\ntype = "float"\nlower = 0\nupper = 99\n'
    )
    entry = _run(spec, tracking_uri)["configurations"][0]
    b = 73.0 / 300
    assert entry["metrics"]["dp_mean_mean"] == pytest.approx(frame["age"].mean(), abs=5 * b)

    frame.loc[7, "age"] = 95  # outside the declared public bounds
    frame.to_parquet(data)
    runs_before = _parent_count(tracking_uri)
    with pytest.raises(SchemaError, match=r"'age'.*outside its public bounds.*row 7"):
        _run(spec, tracking_uri)
    assert _parent_count(tracking_uri) == runs_before, "nothing may be logged before the data validates"


def test_a_data_error_on_a_new_store_creates_no_store(tmp_path: Path) -> None:
    # Issue 30: the driver opened (and so created) the tracking store before reading the data.
    pd.DataFrame({"age": [17, 95]}).to_parquet(tmp_path / "people.parquet")
    spec = tmp_path / "file.toml"
    spec.write_text(
        'name = "file"\nseed = 4\nworkload = "column_mean"\nrepetitions = 5\n'
        '[params]\ncolumn = "age"\nlower = 17.0\nupper = 90.0\nn = 2\nepsilon = 1.0\n'
        '[dataset]\npath = "people.parquet"\n[dataset.columns.age]\ntype = "integer"\nlower = 17\nupper = 90\n'
    )
    store = tmp_path / "store"
    store.mkdir()
    with pytest.raises(SchemaError, match=r"'age'.*outside its public bounds"):
        _run(spec, f"sqlite:///{store / 'mlflow.db'}")
    assert not list(store.iterdir())


def _parent_count(uri: str) -> int:
    from privlab.platform.tracking.tracker import Tracker

    tracker = Tracker(uri)
    return len(tracker.parent_runs(tracker.experiment_id("file", create=False)))


def test_workload_named_data_is_loaded_once_up_front_and_each_unit_is_a_row_of_its_table(
    tmp_path: Path, tracking_uri: str
) -> None:
    from privlab.platform.core.errors import SpecError
    from privlab.platform.tracking.run_tags import CONFIG_TAG, KIND_TAG, UNIT_TAG
    from privlab.platform.tracking.tracker import Tracker
    from privlab.platform.tracking.unit_table import read_unit_table

    frame = pd.DataFrame({"age": np.random.default_rng(1).integers(17, 91, size=200)})
    frame.to_csv(tmp_path / "ages.csv", index=False)
    spec = tmp_path / "path.toml"
    spec.write_text(
        'name = "path"\nseed = 5\nworkload = "column_mean_path"\nrepetitions = 7\n'
        '[params]\npath = "ages.csv"\ncolumn = "age"\nlower = 17.0\nupper = 90.0\nn = 200\n'
        '[grid]\nepsilon = [0.5, 2.0]\n[tracking]\nexperiment = "path"\n'
    )
    summary = _run(spec, tracking_uri)
    assert [e["metrics"]["dp_mean_count"] for e in summary["configurations"]] == [7, 7]
    tracker = Tracker(tracking_uri)
    experiment_id = tracker.experiment_id("path", create=False)
    children = tracker.child_runs(experiment_id, summary["run_id"])
    assert [c.data.tags.get(KIND_TAG) for c in children] == ["configuration", "configuration"]  # no run per unit
    first = summary["configurations"][0]["id"]
    (run,) = [c for c in children if c.data.tags[CONFIG_TAG] == first]
    table = read_unit_table(tracker, run.info.run_id)
    assert table is not None and table["unit"].tolist() == list(range(7))
    assert table["dp_mean"].mean() == pytest.approx(summary["configurations"][0]["metrics"]["dp_mean_mean"], rel=1e-12)

    # The option of one MLflow run per unit: the same values, as runs too.
    with_runs = run_experiment(load_spec(spec, ["tracking.unit_runs=true"]),
                               RunOptions(serial=True, tracking_uri=tracking_uri, progress=False))
    assert with_runs["configurations"] == summary["configurations"]
    children = tracker.child_runs(experiment_id, with_runs["run_id"])
    units = sorted((c for c in children if c.data.tags.get(KIND_TAG) == "unit" and c.data.tags[CONFIG_TAG] == first),
                   key=lambda c: int(c.data.tags[UNIT_TAG]))
    assert len(children) == 16 and [int(c.data.tags[UNIT_TAG]) for c in units] == list(range(7))
    assert [c.data.metrics["dp_mean"] for c in units] == table["dp_mean"].tolist()

    (tmp_path / "ages.csv").unlink()
    before = len(tracker.parent_runs(tracker.experiment_id("path", create=False)))
    with pytest.raises(SpecError, match="does not exist"):
        _run(spec, tracking_uri)
    assert len(tracker.parent_runs(tracker.experiment_id("path", create=False))) == before


def test_a_file_dataset_is_put_once_when_first_read_and_let_go_after_its_last_state(tmp_path: Path) -> None:
    from privlab.platform.run.configuration_state import StateBuilder, configurations_to_run, load_run_data

    pd.DataFrame({"age": np.arange(17, 91)}).to_parquet(tmp_path / "people.parquet")
    spec_path = tmp_path / "file.toml"
    spec_path.write_text(
        'name = "file"\nseed = 4\nworkload = "column_mean"\nrepetitions = 5\n'
        '[params]\ncolumn = "age"\nlower = 17.0\nupper = 90.0\nn = 74\n[grid]\nepsilon = [0.5, 1.0, 2.0]\n'
        '[dataset]\npath = "people.parquet"\n[dataset.columns.age]\ntype = "integer"\nlower = 17\nupper = 90\n'
    )
    spec = load_spec(spec_path)
    put: list[pd.DataFrame] = []

    def place(frame: pd.DataFrame) -> object:
        put.append(frame)
        return object()  # an object store's reference

    configurations = configurations_to_run(spec, {})
    builder = StateBuilder(spec, root_seed=4, data=load_run_data(spec), put=place, checkpoint=None,
                           configurations=configurations)
    assert put == []  # nothing is put before a state reads it
    states = [builder.build(c) for c in configurations[:2]]
    assert len(put) == 1 and states[0].data_ref is states[1].data_ref and builder.refs
    last = builder.build(configurations[2])
    assert last.data_ref is states[0].data_ref and len(put) == 1
    assert builder.refs == {}  # only the states hold the reference now
