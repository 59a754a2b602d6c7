"""Ctrl-C or SIGTERM on `privlab run`: a clean stop with exit code 130, a resume hint, and a resumable run."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from privlab.platform.cli.main import main
from privlab.platform.execution.interrupts import shielded_cleanup, sigterm_as_interrupt
from privlab.platform.execution.progress import Progress
from privlab.platform.run.checkpoints import read_checkpoint
from privlab.platform.tracking.tracker import Tracker


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


def test_sigterm_stops_a_run_as_cleanly_as_ctrl_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # kill, timeout and batch schedulers stop a job with SIGTERM, and a run started in the
    # background by a script ignores SIGINT; before, SIGTERM killed the driver outright, losing
    # the work since the last checkpoint and leaving the parent run RUNNING. In process (no new
    # interpreter to start): the signal is sent to this process as the first units are counted.
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "terminated"\nseed = 5\nworkload = "cpu_burn"\ntrials = 2000\n'
                    '[params]\nsize = 2000\nsorts = 1\n[tracking]\nexperiment = "terminated"\n')
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    counted = Progress.update

    def terminate_on_first_units(self: Progress, units: int = 0, **kwargs: Any) -> None:
        counted(self, units, **kwargs)
        if units:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Progress, "update", terminate_on_first_units)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["run", str(spec), "--serial", "--no-progress", "--tracking-uri", uri]) == 130
    assert signal.getsignal(signal.SIGTERM) == before  # the command restores the handler it found
    err = capsys.readouterr().err
    tracker = Tracker(uri)
    parent = tracker.parent_runs(tracker.experiment_id("terminated", create=False))[0]
    assert parent.info.status == "KILLED" and parent.data.tags["privlab.resumable"] == "true"
    assert f"run {parent.info.run_id} stopped (interrupted); finished work is saved" in err
    assert f"--resume {parent.info.run_id}" in err
    checkpoint = read_checkpoint(tracker, parent.info.run_id)
    assert checkpoint is not None and checkpoint["partial"]  # the units done before the signal


def test_a_sigterm_while_a_stopped_run_saves_is_noted_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    saved = []
    with sigterm_as_interrupt(), shielded_cleanup(lambda: None):
        os.kill(os.getpid(), signal.SIGTERM)
        saved.append(True)
    assert saved == [True]
    assert "saving finished work before stopping" in capsys.readouterr().err
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
