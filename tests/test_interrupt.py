"""Ctrl-C on `privlab run`: a clean stop with exit code 130, a resume hint, and a resumable run."""

from __future__ import annotations

import signal

from privlab.platform.tracking import Tracker


def test_sigint_stops_cleanly_and_leaves_a_resumable_run(long_run) -> None:
    # Deterministic: SIGINT is sent as soon as the run prints its first progress line. That line
    # is drawn inside the runner's try block (after the parent run is opened and the backend is
    # up, right before the units run), so the interrupt cannot land in the window between
    # opening the parent run and entering the block that marks it KILLED and resumable — the
    # race the old "parent run exists, then sleep 2 s" version left open. The 120 s timeout only
    # bounds a hang; the run itself (20,000 units) takes far longer than it takes to react.
    run, uri = long_run("interrupt")
    run.signal(signal.SIGINT)
    code = run.finish()
    err, lines = run.stderr, run.lines
    assert code == 130, err
    assert "resume with: privlab run" in err
    tracker = Tracker(uri)
    parent = tracker.parent_runs(tracker.experiment_id("interrupt", create=False))[0]
    assert parent.info.status == "KILLED"
    assert parent.data.tags["privlab.resumable"] == "true"
    assert f"--resume {parent.info.run_id}" in err
    # Issue 15 item 6: the run id and the exact resume command (with --tracking-uri, which the old
    # printed command dropped) are printed when the run starts, so even a killed driver leaves them.
    first = next(line for line in lines if "if it stops, resume with:" in line)
    assert lines.index(first) < run.first_progress_line()
