"""Ctrl-C on `privlab run`: a clean stop with exit code 130, a resume hint, and a resumable run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from privlab.platform.tracking import Tracker

SPEC = """
name = "interrupt"
seed = 5
workload = "cpu_burn"
trials = 20000
[params]
size = 40000
sorts = 4
[tracking]
experiment = "interrupt"
"""


def test_sigint_stops_cleanly_and_leaves_a_resumable_run(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    process = subprocess.Popen(
        [sys.executable, "-m", "privlab.platform.cli", "run", str(spec), "--serial", "--tracking-uri", uri],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        tracker = Tracker(uri)
        while time.monotonic() < deadline:  # wait until the parent run exists and work has started
            time.sleep(0.5)
            if (tmp_path / "mlflow.db").exists():
                try:
                    experiment = tracker.experiment_id("interrupt", create=False)
                except Exception:
                    continue
                if tracker.parent_runs(experiment):
                    break
        time.sleep(2.0)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "resume with: privlab run" in err
    parent = tracker.parent_runs(tracker.experiment_id("interrupt", create=False))[0]
    assert parent.info.status == "KILLED"
    assert parent.data.tags["privlab.resumable"] == "true"
    assert f"--resume {parent.info.run_id}" in err
