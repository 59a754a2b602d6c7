"""How long a run took, when it was resumed: every configuration stays timed, and the reports say
that the wall time is the last session's (before, a 14-hour resumed run's page read "Wall time of
the whole run: 4.1 min" and left the cost per simulation of the earlier sessions' configurations
blank). A resume reading every configuration's timing back is checked in
test_reproducibility.py."""

from __future__ import annotations

from privlab.platform.reports import StudyResults
from privlab.platform.run_summary import with_logged_timing


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
