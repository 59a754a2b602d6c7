"""Leases, heartbeats and hard stops (issue 15 items 5 and 6).

Two resumes at once used to log every configuration twice; a resume of a finished run was
accepted; a SIGKILLed driver left its parent RUNNING with nothing to say it was gone; a triple
Ctrl-C exited 1 with a traceback.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from privlab.platform.cli.commands import finished_summary
from privlab.platform.core.errors import ExecutionError
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunInterrupted, RunOptions, run_experiment
from privlab.platform.tracking import liveness
from privlab.platform.tracking.run_tags import driver_tags
from privlab.platform.tracking.runs import list_runs
from privlab.platform.tracking.tracker import Tracker

CLI = [sys.executable, "-m", "privlab.platform.cli"]


def _run(spec_path: Path, uri: str, **options: object) -> dict:
    return run_experiment(load_spec(spec_path), RunOptions(serial=True, tracking_uri=uri, progress=False,
                                                           **options))  # type: ignore[arg-type]


def _interrupted_run(spec_path: Path, uri: str) -> str:
    with pytest.raises(RunInterrupted) as stopped:
        _run(spec_path, uri, stop_after_units=10)
    return stopped.value.run_id


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_driver_state_on_this_host() -> None:
    me = liveness.this_driver()
    assert liveness.driver_state(driver_tags(me)) == "live"
    gone = dict(me, pid=_dead_pid())
    assert liveness.driver_state(driver_tags(gone)) == "gone"
    # A reused PID has another start time: the recorded driver is gone even though the PID exists.
    reused = dict(me, pid_start="1")
    assert liveness.driver_state(driver_tags(reused)) == "gone"
    assert liveness.driver_state({}) == "unknown"


def test_driver_state_from_another_host_reads_the_heartbeat() -> None:
    elsewhere = dict(liveness.this_driver(), host=socket.gethostname() + "-elsewhere")
    tags = driver_tags(elsewhere, now=1_000_000.0)
    assert liveness.driver_state(tags, now=1_000_000.0 + liveness.STALE_SECONDS - 1) == "live"
    assert liveness.driver_state(tags, now=1_000_000.0 + liveness.STALE_SECONDS + 1) == "gone"


def test_a_finished_run_is_not_resumed(mini_spec: Path, tracking_uri: str) -> None:
    finished = _run(mini_spec, tracking_uri)
    with pytest.raises(ExecutionError, match="already finished"):
        _run(mini_spec, tracking_uri, resume=finished["run_id"])
    tracker = Tracker(tracking_uri)
    run = tracker.get_run(finished["run_id"])
    assert run.info.status == "FINISHED"
    assert len(tracker.child_runs(run.info.experiment_id, run.info.run_id)) == 5


def test_a_run_with_a_live_driver_is_not_resumed(mini_spec: Path, tracking_uri: str) -> None:
    run_id = _interrupted_run(mini_spec, tracking_uri)
    tracker = Tracker(tracking_uri)
    # Another process on this host holds the lease (this test process stands in for it).
    tracker.record_driver(run_id, liveness.this_driver())
    with pytest.raises(ExecutionError, match=f"PID {os.getpid()}"):
        _run(mini_spec, tracking_uri, resume=run_id)
    tracker.record_driver(run_id, dict(liveness.this_driver(), pid=_dead_pid()))
    summary = _run(mini_spec, tracking_uri, resume=run_id)  # its driver is gone: the resume goes on
    assert summary["run_id"] == run_id
    # The lease is released at the end: the tag is deleted (issue 34 item 8: an empty tag showed in the UI).
    assert liveness.DRIVER_TAG not in tracker.get_run(run_id).data.tags


@pytest.mark.slow  # several privlab processes at once: large, run by .ci/run's -m slow
def test_two_resumes_at_once_log_each_configuration_once(mini_spec: Path, tracking_uri: str) -> None:
    reference = _run(mini_spec, tracking_uri)
    run_id = _interrupted_run(mini_spec, tracking_uri)
    command = [*CLI, "run", str(mini_spec), "--serial", "--no-progress", "--tracking-uri", tracking_uri,
               "--resume", run_id]
    resumes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in resumes]  # type: ignore[union-attr]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 4], outcomes
    refused = next(err for code, err in outcomes if code == 4)
    assert "being driven right now" in refused or "already finished" in refused, refused
    tracker = Tracker(tracking_uri)
    run = tracker.get_run(run_id)
    children = tracker.child_runs(run.info.experiment_id, run_id)
    assert sorted(c.data.tags["privlab.config_id"] for c in children) == \
        sorted(c["id"] for c in reference["configurations"])
    _, summary = finished_summary(tracker, run_id, hint="")
    assert summary["configurations"] == reference["configurations"]


@pytest.mark.slow  # a driver killed mid-run: ~7 s
def test_a_killed_driver_shows_as_gone_and_resumes(long_run) -> None:
    run, uri = long_run("hard-stop", checkpoint_interval_s=0)
    run.signal(signal.SIGKILL)
    run.finish()
    printed = next(line for line in run.lines if "if it stops, resume with:" in line)
    run_id = re.search(r"run (\w+);", printed).group(1)  # type: ignore[union-attr]
    tracker = Tracker(uri)
    assert tracker.get_run(run_id).info.status == "RUNNING"
    (row,) = list_runs(tracker, "hard-stop")
    assert (row.run_id, row.status) == (run_id, "driver gone (resumable)")
    shown = subprocess.run([*CLI, "runs", "--tracking-uri", uri], capture_output=True, text=True, timeout=120)
    assert "driver gone (resumable)" in shown.stdout, shown


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
def test_ctrl_c_three_times_exits_130_with_the_resume_command(long_run) -> None:
    run, _ = long_run("hard-stop", checkpoint_interval_s=0)
    run.signal(signal.SIGINT, times=3)
    code = run.finish()
    err = run.stderr
    assert code == 130, err
    assert "Traceback" not in err, err
    assert "resume with: privlab run" in err and "--tracking-uri" in err.rsplit("resume with:", 1)[1]


SHIELD_CHILD = textwrap.dedent("""
    import sys, time
    from privlab.platform.execution.interrupts import shielded_cleanup
    with shielded_cleanup(lambda: print("abandoned run-123", file=sys.stderr, flush=True)):
        print("saving", file=sys.stderr, flush=True)
        time.sleep(120)
    print("saved", file=sys.stderr, flush=True)
""")


def test_the_shield_counts_presses_and_the_second_abandons() -> None:
    process = subprocess.Popen([sys.executable, "-c", SHIELD_CHILD], stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stderr is not None
    try:
        assert process.stderr.readline().strip() == "saving"
        process.send_signal(signal.SIGINT)
        assert "press Ctrl-C again" in process.stderr.readline() + process.stderr.readline()
        assert process.poll() is None  # the first press inside the shield does not stop the save
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        assert "abandoned run-123" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
