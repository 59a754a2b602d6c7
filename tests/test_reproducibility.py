"""Bit-identical results whatever the batching, and after an interrupted run is resumed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from privlab.platform.execution.progress import Progress
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run import runner
from privlab.platform.run.runner import RunInterrupted, RunOptions, run_experiment
from privlab.platform.tracking.result_parts import read_results
from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import Tracker


def _run(spec_path: Path, uri: str, *overrides: str, **options: object) -> dict:
    spec = load_spec(spec_path, list(overrides))
    return run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False, **options))  # type: ignore[arg-type]


# Slow suite: kept under the default run's 6-minute budget (CI runs it with -m slow).
@pytest.mark.slow
def test_batch_size_does_not_change_results(mini_spec: Path, tracking_uri: str) -> None:
    auto = _run(mini_spec, tracking_uri)
    small = _run(mini_spec, tracking_uri, "execution.batch_size=7")
    large = _run(mini_spec, tracking_uri, "execution.batch_size=113")
    assert auto["configurations"] == small["configurations"] == large["configurations"]
    assert len(auto["configurations"]) == 5


# Slow suite: kept under the default run's 6-minute budget (CI runs it with -m slow).
@pytest.mark.slow
def test_a_different_seed_changes_results(mini_spec: Path, tracking_uri: str) -> None:
    first = _run(mini_spec, tracking_uri)
    second = _run(mini_spec, tracking_uri, "seed=8")
    assert first["configurations"] != second["configurations"]


def test_resume_finishes_without_recomputing_or_double_counting(
    mini_spec: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference = _run(mini_spec, tracking_uri, "execution.batch_size=5")
    with pytest.raises(RunInterrupted) as stopped:
        # --max-units counts units of work (issue 14 item 2): 45 units = the 9 batches of 5 this stopped after.
        _run(mini_spec, tracking_uri, "execution.batch_size=5", stop_after_units=45)
    run_id = stopped.value.run_id
    tracker = Tracker(tracking_uri)
    run = tracker.get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["privlab.resumable"] == "true"
    stored = read_results(tracker, run_id)  # a configuration's timing is kept beside its result
    first_session = {RunTags.of(c).config_id: stored[c.info.run_id].timing
                     for c in tracker.child_runs(run.info.experiment_id, run_id)}
    assert 1 <= len(first_session) < 5  # the 24-repetition configurations finish after 5 batches each

    # A second interruption mid-way, then the final resume.
    with pytest.raises(RunInterrupted):
        _run(mini_spec, tracking_uri, "execution.batch_size=5", resume=run_id, stop_after_units=250)
    seeded: dict[str, float] = {}

    class RecordingProgress(Progress):
        def resume_from(self, done: int, **kwargs: Any) -> None:
            seeded.update(kwargs.get("seconds_per_unit") or {})
            super().resume_from(done, **kwargs)

    monkeypatch.setattr(runner, "Progress", RecordingProgress)
    resumed = _run(mini_spec, tracking_uri, "execution.batch_size=5", resume=run_id)
    # The ETA of a resumed run starts from the cost per unit its earlier sessions measured, for
    # the classes they ran (here one class per study): at least those of the first session's
    # finished configurations.
    study_of = {c["id"]: c["study"] for c in reference["configurations"]}
    assert {study_of[c] for c in first_session} <= set(seeded) <= set(study_of.values())
    assert all(cost > 0 for cost in seeded.values())

    assert resumed["run_id"] == run_id
    assert resumed["configurations"] == reference["configurations"]
    children = tracker.child_runs(run.info.experiment_id, run_id)
    ids = sorted(c.data.tags["privlab.config_id"] for c in children)
    assert ids == sorted(c["id"] for c in reference["configurations"])  # each logged exactly once
    assert tracker.get_run(run_id).info.status == "FINISHED"
    # Its summary says it was resumed and times every configuration, those of the first session
    # as they were logged then (the reports state the wall time as the last session's).
    assert resumed["timing"]["resumed"] is True and reference["timing"]["resumed"] is False
    assert set(resumed["timing"]["configurations"]) == set(ids)
    for config_id, measured in first_session.items():
        assert resumed["timing"]["configurations"][config_id] == measured and measured["compute_seconds"] > 0


def test_resume_refuses_a_different_spec(mini_spec: Path, tracking_uri: str) -> None:
    with pytest.raises(RunInterrupted) as stopped:
        _run(mini_spec, tracking_uri, stop_after_units=2)
    with pytest.raises(Exception, match="different spec"):
        _run(mini_spec, tracking_uri, "seed=99", resume=stopped.value.run_id)


@pytest.mark.parametrize("batch", ["auto", pytest.param("7", marks=pytest.mark.slow)])  # 7: slow, for time
def test_max_units_stops_after_exactly_that_many_units_and_resumes_identically(
    mini_spec: Path, tracking_uri: str, batch: str,
) -> None:
    # Issue 14 item 2: --max-units counted result batches (a limit of 5 ran 1,200 units).
    reference = _run(mini_spec, tracking_uri, f"execution.batch_size={batch}")
    with pytest.raises(RunInterrupted, match=r"^after 30 units of work, as --max-units asked$") as stopped:
        _run(mini_spec, tracking_uri, f"execution.batch_size={batch}", stop_after_units=30)
    assert stopped.value.requested  # the stop asked for: `privlab run` exits 0, not 130 (issue 34 item 3)
    run_id = stopped.value.run_id
    checkpoint = json.loads(Tracker(tracking_uri).read_text(run_id, "checkpoint/checkpoint.json"))
    units = {c.id: c.units for c in load_spec(mini_spec).configurations}
    done = sum(units[cid] for cid in checkpoint["completed"])
    done += sum(b - a for state in checkpoint["partial"].values() for a, b in state["done"])
    assert done == 30
    resumed = _run(mini_spec, tracking_uri, f"execution.batch_size={batch}", resume=run_id)
    assert resumed["configurations"] == reference["configurations"]


def test_a_finished_configuration_keeps_no_samples_on_the_driver(
    mini_spec: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once logged, a configuration's reservoir samples and its hold on Ray's data are freed:
    a grid's driver does not grow by every finished configuration's samples."""
    from privlab.platform.run.configuration_log import ConfigurationLog

    logged: list[Any] = []
    log = ConfigurationLog.log_configuration

    def capture(self: ConfigurationLog, state: Any) -> None:
        assert any(acc.reservoir().size for acc in state.aggregate.metrics.values())  # its samples, when logged
        logged.append(state)
        log(self, state)

    monkeypatch.setattr(ConfigurationLog, "log_configuration", capture)
    summary = _run(mini_spec, tracking_uri)
    assert len(logged) == len(summary["configurations"]) == 5
    for state in logged:
        assert all(acc.reservoir().size == 0 for acc in state.aggregate.metrics.values())
        assert state.data_ref is None and state.aggregate.done.covered() == state.config.units
