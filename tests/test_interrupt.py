"""Ctrl-C on `privlab run`: a clean stop with exit code 130, a resume hint, and a resumable run."""

from __future__ import annotations

import os
import signal
import re
import subprocess
import sys
import threading
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
PROGRESS_LINE = re.compile(r"^\[[.#=> -]*\]\s+[\d.]+% .*units")


def test_sigint_stops_cleanly_and_leaves_a_resumable_run(tmp_path: Path) -> None:
    # Deterministic: SIGINT is sent as soon as the run prints its first progress line. That line
    # is drawn inside the runner's try block (after the parent run is opened and the backend is
    # up, right before the units run), so the interrupt cannot land in the window between
    # opening the parent run and entering the block that marks it KILLED and resumable — the
    # race the old "parent run exists, then sleep 2 s" version left open. The 120 s timeout only
    # bounds a hang; the run itself (20,000 units) takes far longer than it takes to react.
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    process = subprocess.Popen(
        [sys.executable, "-m", "privlab.platform.cli", "run", str(spec), "--serial", "--tracking-uri", uri],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        # A test process started in the background (nohup, `cmd &` in a script) has SIGINT
        # ignored, the child inherits that, and Python then installs no KeyboardInterrupt handler:
        # the interrupt would be lost. A user's terminal delivers it; so does this.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    started = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if PROGRESS_LINE.match(line):
                started.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert started.wait(timeout=120), "no progress line within 120 s:\n" + "".join(lines)
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=60)  # stderr reaches EOF once the process has exited
    assert not reader.is_alive()
    err = "".join(lines)
    assert process.returncode == 130, err
    assert "resume with: privlab run" in err
    tracker = Tracker(uri)
    parent = tracker.parent_runs(tracker.experiment_id("interrupt", create=False))[0]
    assert parent.info.status == "KILLED"
    assert parent.data.tags["privlab.resumable"] == "true"
    assert f"--resume {parent.info.run_id}" in err
    # Issue 15 item 6: the run id and the exact resume command (with --tracking-uri, which the old
    # printed command dropped) are printed when the run starts, so even a killed driver leaves them.
    first = next(line for line in lines if "if it stops, resume with:" in line)
    assert lines.index(first) < next(i for i, line in enumerate(lines) if PROGRESS_LINE.match(line))
    for text in (first, err.rsplit("resume with:", 1)[1]):
        assert f"--tracking-uri {uri}" in text and f"--resume {parent.info.run_id}" in text
