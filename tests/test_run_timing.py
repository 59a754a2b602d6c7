"""How long a run took, when it was resumed: every configuration stays timed, and the reports say
that the wall time is the last session's (before, a 14-hour resumed run's page read "Wall time of
the whole run: 4.1 min" and left the cost per simulation of the earlier sessions' configurations
blank)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privlab.platform.configuration_log import logged_timing
from privlab.platform.reports import StudyResults
from privlab.platform.run_summary import with_logged_timing
from privlab.platform.runner import RunInterrupted, RunOptions, run_experiment
from privlab.platform.spec import load_spec
from privlab.platform.tracking import RunTags, Tracker


def _run(spec_path: Path, uri: str, **options: object) -> dict:
    spec = load_spec(spec_path, ["execution.batch_size=5"])
    return run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False, **options))  # type: ignore[arg-type]


def test_a_resumed_run_times_every_configuration_and_says_it_was_resumed(mini_spec: Path, tracking_uri: str) -> None:
    whole = _run(mini_spec, tracking_uri)
    assert whole["timing"]["resumed"] is False
    with pytest.raises(RunInterrupted) as stopped:
        _run(mini_spec, tracking_uri, stop_after_units=45)
    run_id = stopped.value.run_id
    tracker = Tracker(tracking_uri)
    experiment_id = tracker.get_run(run_id).info.experiment_id
    before = {RunTags.of(c).config_id: logged_timing(c.data.metrics) for c in tracker.child_runs(experiment_id, run_id)}
    assert 1 <= len(before) < 5  # some configurations finished in the first session

    resumed = _run(mini_spec, tracking_uri, resume=run_id)
    timing = resumed["timing"]
    assert timing["resumed"] is True
    assert set(timing["configurations"]) == {c["id"] for c in whole["configurations"]}
    for config_id, measured in before.items():  # read back as the first session logged them
        assert timing["configurations"][config_id] == measured
        assert measured["compute_seconds"] > 0


def _summary(timed: dict[str, dict[str, float]], **timing: object) -> dict:
    entries = [{"id": "a"}, {"id": "b.x", "config": "b"}, {"id": "b.y", "config": "b"}]
    return {"configurations": entries, "timing": {"wall_seconds": 240.0, "workers": 2, "configurations": timed} | timing}


def test_an_older_summary_is_timed_from_its_configuration_runs_and_marked_resumed() -> None:
    logged = {"a": {"compute_seconds": 7200.0}, "b.x": {"compute_seconds": 50.0}, "b.y": {"compute_seconds": 50.0}}
    older = _summary({"b": {"compute_seconds": 50.0}})  # only b finished in the last session
    filled = with_logged_timing(older, logged)
    assert filled["timing"]["configurations"] == {"a": {"compute_seconds": 7200.0}, "b": {"compute_seconds": 50.0}}
    assert filled["timing"]["resumed"] is True
    assert "a" not in older["timing"]["configurations"]  # the summary read is left as it was

    complete = with_logged_timing(_summary({"a": {"compute_seconds": 1.0}, "b": {"compute_seconds": 2.0}}), logged)
    assert complete["timing"]["resumed"] is False
    assert complete["timing"]["configurations"]["a"] == {"compute_seconds": 1.0}  # the summary's own wins
    recorded = with_logged_timing(_summary({"a": {}, "b": {}}, resumed=True), {})
    assert recorded["timing"]["resumed"] is True  # a newer run says so itself


def _results(timing: dict) -> StudyResults:
    return StudyResults(study="s", workload="w", run_id="r", experiment="e", spec_name="s", root_seed=1,
                        command=None, entries=(), reservoirs={}, timing=timing)


def test_the_wall_time_sentence_tells_a_resumed_run_from_a_whole_one() -> None:
    whole = _results(_summary({}, resumed=False)["timing"]).wall_time_sentence()
    assert whole == "Wall time of the whole run: 4.0 min on 2 worker(s)."
    timed = {"a": {"compute_seconds": 7200.0}, "b": {"compute_seconds": 1800.0}}
    resumed = _results(_summary(timed, resumed=True)["timing"]).wall_time_sentence()
    assert resumed is not None and "whole run" not in resumed
    assert "last session took 4.0 min on 2 worker(s)" in resumed and "over all sessions was 2.5 h" in resumed
    assert _results({}).wall_time_sentence() is None
