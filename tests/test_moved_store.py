"""A local store moved with its run folder keeps working; a resume never logs a configuration twice.

Issue 30 item 3: ``privlab run SPEC --max-units N``, ``mv dir dir2``, resume in ``dir2`` logged
14 child runs for 8 configurations and re-created ``dir/mlruns``: MLflow records absolute
artifact paths, and a finished child whose result could not be read was taken as not done.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from privlab.platform.core.errors import TrackingError
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunInterrupted, RunOptions, run_experiment
from privlab.platform.tracking.result_parts import read_results
from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import Tracker


def _run(spec_path: Path, uri: str, **options: object) -> dict:
    return run_experiment(load_spec(spec_path), RunOptions(serial=True, tracking_uri=uri, progress=False,
                                                           **options))  # type: ignore[arg-type]


def _interrupted_run(tmp_path: Path, mini_spec_text: str) -> tuple[Path, str]:
    """A run folder ``tmp_path/run`` (spec, mlflow.db, mlruns/) holding a run stopped part-way;
    returns the folder and the run id."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "mini.toml").write_text(mini_spec_text)
    with pytest.raises(RunInterrupted) as stopped:
        _run(folder / "mini.toml", f"sqlite:///{folder / 'mlflow.db'}", stop_after_units=60)
    return folder, stopped.value.run_id


def _config_ids(uri: str, run_id: str) -> list[str]:
    tracker = Tracker(uri)
    experiment = tracker.get_run(run_id).info.experiment_id
    return sorted(RunTags.of(c).config_id for c in tracker.child_runs(experiment, run_id))


@pytest.mark.slow  # two sessions of a run: ~4 s
def test_a_run_folder_moved_between_sessions_resumes_with_each_configuration_logged_once(
    tmp_path: Path, mini_spec_text: str, caplog: pytest.LogCaptureFixture,
) -> None:
    folder, run_id = _interrupted_run(tmp_path, mini_spec_text)
    logged_before = _config_ids(f"sqlite:///{folder / 'mlflow.db'}", run_id)
    assert logged_before  # the first session finished some configurations
    moved = tmp_path / "moved"
    folder.rename(moved)
    uri = f"sqlite:///{moved / 'mlflow.db'}"

    resumed = _run(moved / "mini.toml", uri, resume=run_id)

    ids = _config_ids(uri, run_id)
    assert ids == sorted(c["id"] for c in resumed["configurations"])  # each exactly once
    assert set(logged_before) < set(ids)
    assert not folder.exists()  # nothing re-created at the old path
    assert "tracking store was moved" in caplog.text
    with sqlite3.connect(moved / "mlflow.db") as db:
        uris = [row[0] for row in db.execute("SELECT artifact_uri FROM runs")]
    assert uris and all(u.startswith(str(moved / "mlruns")) for u in uris)
    # The first session's child runs are readable where they now are.
    tracker = Tracker(uri)
    first = next(c for c in tracker.child_runs(tracker.get_run(run_id).info.experiment_id, run_id)
                 if RunTags.of(c).config_id == logged_before[0])
    assert first.info.run_id in read_results(tracker, run_id)


def test_a_resume_whose_finished_results_cannot_be_read_stops_naming_the_path(
    tmp_path: Path, mini_spec_text: str,
) -> None:
    folder, run_id = _interrupted_run(tmp_path, mini_spec_text)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    logged_before = _config_ids(uri, run_id)
    shutil.rmtree(folder / "mlruns")  # the database without its artifacts

    with pytest.raises(TrackingError, match=r"is finished, but its result cannot be read \(from the parts under "
                                            r"results/ of the parent run, or result\.json of .*mlruns"):
        _run(folder / "mini.toml", uri, resume=run_id)
    assert _config_ids(uri, run_id) == logged_before  # nothing logged twice
