"""A tracking server that goes away mid-run (issue 30 item 2).

Before: all 16 configurations finished in 17 s, then the driver spent 746 s in MLflow's HTTP
retries and exited 1 with 17 chained tracebacks, and the resume computed 84k of 127k units again.
Now a short outage is waited out, a long one stops the run within ``[tracking] outage_wait_s``
(exit 4, the resume command printed) with what it computed kept in the run's outbox, and the
resume logs that before it goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mlflow.exceptions import MlflowException, RestException

from privlab.platform.core.errors import TrackingOutage
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run import outbox, runner
from privlab.platform.run.runner import RunOptions, run_experiment
from privlab.platform.tracking import liveness
from privlab.platform.tracking.background_writer import BackgroundWriter
from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import Tracker
from privlab.platform.tracking.tracking_outage import is_unreachable

REFUSED = ("API request to http://127.0.0.1:9/api/2.0/mlflow/runs/create failed with exception "
           "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: ... Connection refused")


def _run(spec_path: Path, uri: str, *overrides: str, **options: object) -> dict:
    spec = load_spec(spec_path, list(overrides))
    return run_experiment(spec, RunOptions(serial=True, tracking_uri=uri, progress=False, **options))  # type: ignore[arg-type]


def test_transport_failures_are_an_outage_and_refusals_are_not() -> None:
    assert is_unreachable(MlflowException(REFUSED))
    assert is_unreachable(MlflowException("API request to http://h/api failed with timeout exception Read timed out."))
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise RuntimeError("upload failed") from cause
    except RuntimeError as chained:
        assert is_unreachable(chained)
    refused = RestException({"error_code": "INVALID_PARAMETER_VALUE", "message": "Param value too long"})
    assert not is_unreachable(refused)
    assert not is_unreachable(ValueError("API request to nowhere"))


def test_the_writer_waits_out_a_short_outage_and_stops_after_a_long_one() -> None:
    failures = iter([True, True, False])  # down twice, then back
    done: list[str] = []

    def flaky() -> None:
        if next(failures):
            raise MlflowException(REFUSED)
        done.append("sent")

    writer = BackgroundWriter(outage_wait_s=30.0, retry_interval_s=0.01)
    writer.submit(flaky)
    writer.submit(lambda: done.append("next"))
    writer.flush()
    assert done == ["sent", "next"] and writer.outage_began is None

    def down() -> None:
        raise MlflowException(REFUSED)

    writer = BackgroundWriter(outage_wait_s=0.2, retry_interval_s=0.05)
    began = time.monotonic()
    writer.submit(down, keep="first")
    writer.submit(lambda: done.append("never"), keep="second")
    with pytest.raises(TrackingOutage, match=r"could not be reached for 0 s \(\[tracking\] outage_wait_s = 0\.2\)"):
        writer.flush()
    assert 0.2 <= time.monotonic() - began < 5
    assert writer.unsent == ["first", "second"] and "never" not in done
    with pytest.raises(TrackingOutage):
        writer.submit(lambda: None)  # nothing is logged behind the kept work's back


def test_a_run_whose_server_goes_away_keeps_its_results_and_the_resume_logs_them(
    mini_spec: Path, tmp_path: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("PRIVLAB_STATE_DIR", str(tmp_path / "state"))
    uri = tracking_uri
    send = Tracker.send_results
    sent: list[str] = []

    def send_until_the_server_goes(self: Tracker, uploads: list) -> list[str]:
        run_ids = []
        for upload in uploads:  # the server goes away in the middle of a batch
            if len(sent) >= 2 and not upload.finished:
                raise MlflowException(REFUSED)
            if not upload.finished:
                sent.append(upload.config_id)
            run_ids += send(self, [upload])
        return run_ids

    monkeypatch.setattr(Tracker, "send_results", send_until_the_server_goes)
    # The driver exits after an outage; in this process, its lease must look like a dead one's.
    monkeypatch.setattr(runner, "this_driver", lambda: {**liveness.this_driver(), "pid_start": "exited"})
    with pytest.raises(TrackingOutage, match=r"Nothing computed is lost; kept in .*: the results of \d+ finished configuration\(s\)") as stopped:
        _run(mini_spec, uri, "tracking.outage_wait_s=0.3")
    run_id = stopped.value.run_id
    kept = outbox.outbox_path(run_id)
    assert kept.is_file() and kept.stat().st_mode & 0o077 == 0 and kept.parent.stat().st_mode & 0o077 == 0
    held = json.loads(kept.read_text())
    held_ids = {u["tags"]["privlab.config_id"] for u in held["uploads"]}
    assert held_ids and not held_ids & set(sent)
    kept_timing = {u["tags"]["privlab.config_id"]: u["timing"]["compute_seconds"] for u in held["uploads"]}
    kept_results = {u["tags"]["privlab.config_id"]: json.loads(u["result"]) for u in held["uploads"]}

    monkeypatch.setattr(Tracker, "send_results", send)  # the server is back
    monkeypatch.setattr(runner, "this_driver", liveness.this_driver)
    resumed = _run(mini_spec, uri, "tracking.outage_wait_s=0.3", resume=run_id)

    tracker = Tracker(uri)
    children = tracker.child_runs(tracker.get_run(run_id).info.experiment_id, run_id)
    assert sorted(RunTags.of(c).config_id for c in children) == sorted(c["id"] for c in resumed["configurations"])
    assert len(resumed["configurations"]) == len(load_spec(mini_spec).configurations)
    # What the outage held back was logged, not computed again: its results and timing are the
    # first session's. (The slow test below compares a resumed run with an uninterrupted one.)
    for entry in resumed["configurations"]:
        if entry["id"] in kept_results:
            assert entry == kept_results[entry["id"]]
    for config_id, seconds in kept_timing.items():
        assert resumed["timing"]["configurations"][config_id]["compute_seconds"] == seconds
    assert not kept.exists()
    assert f"run {run_id}: logged what the tracking outage of its last session held back" in caplog.text


@pytest.mark.slow  # the default run's 6-minute budget; the test above covers the outbox there
def test_a_stop_asked_for_during_an_outage_keeps_the_work_too(
    mini_spec: Path, tmp_path: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--max-units`` (or Ctrl-C) while the server is gone: the outbox, not a lost checkpoint."""
    monkeypatch.setenv("PRIVLAB_STATE_DIR", str(tmp_path / "state"))

    log_texts = Tracker.log_texts

    def unreachable(*args: object, **kwargs: object) -> None:
        raise MlflowException(REFUSED)

    def checkpoints_unreachable(self: Tracker, run_id: str, files: dict) -> None:
        if "checkpoint/checkpoint.json" in files:
            raise MlflowException(REFUSED)
        log_texts(self, run_id, files)

    monkeypatch.setattr(Tracker, "send_results", unreachable)
    monkeypatch.setattr(Tracker, "log_texts", checkpoints_unreachable)  # the checkpoint cannot go up either
    monkeypatch.setattr(runner, "this_driver", lambda: {**liveness.this_driver(), "pid_start": "exited"})
    with pytest.raises(TrackingOutage, match="Nothing computed is lost") as stopped:
        _run(mini_spec, tracking_uri, "tracking.outage_wait_s=0.2", stop_after_units=60)
    held = json.loads(outbox.outbox_path(stopped.value.run_id).read_text())
    units = {c.id: c.units for c in load_spec(mini_spec).configurations}
    done = sum(units[u["tags"]["privlab.config_id"]] for u in held["uploads"])
    done += sum(b - a for state in held["checkpoint"]["partial"].values() for a, b in state["done"])
    assert done == 60  # every unit the run computed before it stopped is in the outbox


# --- a real MLflow server on loopback, stopped mid-run ----------------------------------------

CLUSTER = Path(__file__).resolve().parents[1] / "cluster"
SLOW_SPEC = """
name = "outage"
seed = 11
[tracking]
experiment = "outage"
outage_wait_s = 4
checkpoint_interval_s = 1
[[study]]
name = "burn"
workload = "cpu_burn"
trials = 300
[study.params]
size = 40000
[study.grid]
sorts = [1, 2, 3, 4, 5, 6]
"""


def _server(action: str, env: dict[str, str]) -> None:
    done = subprocess.run(["bash", str(CLUSTER / "mlflow-server.sh"), action], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_run_outlives_its_mlflow_server_going_away_and_the_resume_loses_nothing(tmp_path: Path) -> None:
    from privlab.platform.execution.local_cluster import _free_port

    port = _free_port()
    env = {**os.environ, "MLFLOW_SERVER_PORT": str(port), "MLFLOW_SERVER_STATE_DIR": str(tmp_path / "server"),
           "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{tmp_path / 'server.db'}",
           "MLFLOW_ARTIFACTS_DESTINATION": str(tmp_path / "artifacts"), "PYTHON": sys.executable,
           "PRIVLAB_STATE_DIR": str(tmp_path / "state")}
    spec = tmp_path / "outage.toml"
    spec.write_text(SLOW_SPEC)
    uri = f"http://127.0.0.1:{port}"
    _server("start", env)
    try:
        command = [sys.executable, "-m", "privlab.platform.cli", "run", str(spec), "--serial", "--tracking-uri", uri]
        run = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)  # type: ignore[arg-type]
        reader.start()
        deadline = time.monotonic() + 120
        while not any("configs 2/6" in line for line in "".join(lines).split("\r")) and time.monotonic() < deadline:
            time.sleep(0.2)
        _server("stop", env)
        stopped_at = time.monotonic()
        assert run.wait(timeout=180) == 4
        reader.join(timeout=10)
        waited = time.monotonic() - stopped_at
        text = "".join(lines)
        assert "Traceback" not in text, text
        assert "Nothing computed is lost" in text and "resume with: " in text, text
        resume = text.rsplit("resume with: ", 1)[1].split("\n", 1)[0].split()
        assert waited < 90, f"the driver took {waited:.0f} s to give up"

        _server("start", env)
        again = subprocess.run([sys.executable, "-m", "privlab.platform.cli", *resume[1:], "--summary-json",
                                str(tmp_path / "resumed.json")], env=env, capture_output=True, text=True,
                               cwd=tmp_path, timeout=300)
        assert again.returncode == 0, again.stderr
        assert "held back" in again.stderr
        fresh = subprocess.run([*command, "--summary-json", str(tmp_path / "fresh.json")], env=env,
                               capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert fresh.returncode == 0, fresh.stderr
        resumed = json.loads((tmp_path / "resumed.json").read_text())
        reference = json.loads((tmp_path / "fresh.json").read_text())
        assert resumed["configurations"] == reference["configurations"]
        tracker = Tracker(uri)
        run_id = resumed["run_id"]
        children = tracker.child_runs(tracker.get_run(run_id).info.experiment_id, run_id)
        assert sorted(RunTags.of(c).config_id for c in children) == sorted(c["id"] for c in reference["configurations"])
    finally:
        _server("stop", env)


def test_the_outage_message_counts_configurations_as_a_user_does() -> None:
    """Issue 46 item 4: "the partial results of 0 configuration(s)" after a long outage; a
    facetted configuration's runs were counted as configurations."""
    from privlab.platform.tracking.tracker import ResultRunUpload

    def upload(config: str, kind: str = "configuration") -> ResultRunUpload:
        return ResultRunUpload(experiment_id="1", name=config, tags={"privlab.kind": kind, "privlab.config_id": config},
                               params={}, metrics={}, files={})

    held = outbox.HeldBack(run_id="r", tracking_uri="u", checkpoint={"partial": {}},
                           uploads=[upload("a-000"), upload("a-000"), upload("a-001"), upload("a-001", "unit")])
    assert held.describe() == "the results of 2 finished configuration(s) (3 runs), 1 unit run(s)"
    held = outbox.HeldBack(run_id="r", tracking_uri="u", uploads=[upload("b-000")],
                           checkpoint={"partial": {"a-002": {}, "a-003": {}}})
    assert held.describe() == ("the results of 1 finished configuration(s), the partial results of 2 unfinished "
                               "configuration(s)")
    assert "0" not in outbox.HeldBack(run_id="r", tracking_uri="u", uploads=[], checkpoint={"partial": {}}).describe()
