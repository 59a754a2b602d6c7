"""How long a run took, when it was resumed: every configuration stays timed, and the reports say
that the wall time is the last session's (before, a 14-hour resumed run's page read "Wall time of
the whole run: 4.1 min" and left the cost per simulation of the earlier sessions' configurations
blank). A resume reading every configuration's timing back is checked in
test_reproducibility.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from privlab.platform.experiment.spec import load_spec
from privlab.platform.results.reports import StudyResults
from privlab.platform.run.run_summary import with_logged_timing


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


def test_the_warm_up_runs_before_the_progress_bar_and_outside_the_timed_units(
        tmp_path: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 34 item 7: a unit that compiles its kernels stalled inside a study and set its ETA.
    from privlab.platform.experiment import registry
    from privlab.platform.run import runner

    workload = type(registry.get_workload("laplace_mean"))
    calls: list[str] = []

    def slow_the_first_time(self: object, params: object) -> None:
        if not calls:
            time.sleep(0.5)  # a compilation
        calls.append("warm_up")

    class Bar(runner.Progress):
        def __init__(self, *args: object, **kwargs: object) -> None:
            calls.append("progress")
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(workload, "warm_up", slow_the_first_time, raising=False)
    monkeypatch.setattr(runner, "Progress", Bar)
    spec = tmp_path / "s.toml"
    spec.write_text('name = "warm"\nseed = 1\nworkload = "laplace_mean"\nrepetitions = 20\n'
                    '[params]\nepsilon = 1.0\nn = 10\n[grid]\nlower = [0.0, -1.0]\n[tracking]\nplots = false\n')
    summary = runner.run_experiment(load_spec(spec), runner.RunOptions(serial=True, tracking_uri=tracking_uri,
                                                                       progress=False))
    assert calls[:3] == ["warm_up", "warm_up", "progress"]  # each configuration, on the driver, first
    assert calls.count("warm_up") > 3  # and again before each range a worker times (at once by then)
    assert all(t["compute_seconds"] < 0.4 for t in summary["timing"]["configurations"].values())
