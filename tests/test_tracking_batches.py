"""Configuration runs logged in batches (issue 31): the background writer forms the batches,
a local sqlite store takes each in one transaction, and what lands is what MLflow's client
would have written; a local store is read back without MLflow."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pytest

from privlab.platform.tracking.background_writer import BackgroundWriter
from privlab.platform.tracking.result_parts import read_results
from privlab.platform.tracking.sqlite_reader import SqliteStoreReader
from privlab.platform.tracking.store_location import default_tracking_uri
from privlab.platform.tracking.tracker import Tracker

STANDARD = {"mlflow.user": "someone", "mlflow.source.name": "spec.toml", "mlflow.source.type": "LOCAL"}


def _uploads(tracker: Tracker, experiment_id: str, parent: str, count: int) -> list:
    uploads = []
    for i in range(count):
        entry = {"id": f"s-{i:03d}", "metrics": {"a_mean": 0.5 + i, "a_sd": 0.1}, "ledger": {"events": []}}
        uploads.append(tracker.result_upload(
            experiment_id, parent_id=parent, name=f"s[i={i}]", params={"params.i": i, "params.name": "x"},
            metrics={"a_mean": 0.5 + i, "nan_metric": math.nan, "inf_metric": math.inf}, files={},
            config_id=f"s-{i:03d}", group=f"s-{i:03d}", study="s", workload="w", standard_tags=STANDARD,
            result=json.dumps(entry), timing={"wall_seconds": 0.25}, reservoir={"a": [1.0, 2.0]},
            ledger_text="ledger table"))
    return uploads


def _parent(tracker: Tracker) -> tuple[str, str]:
    experiment_id = tracker.experiment_id("batches", create=True)
    parent = tracker.start_parent_run(experiment_id, name="p", params={}, description="", root_seed=1,
                                      mode="research", spec_name="s", spec_sha256="-", command="-", version="-",
                                      git_commit="-", driver={})
    return experiment_id, parent


def _as_logged(run) -> dict:
    metrics = {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in run.data.metrics.items()}
    tags = {k: v for k, v in run.data.tags.items()}
    return {"name": run.info.run_name, "status": run.info.status, "user": run.info.user_id, "tags": tags,
            "params": dict(run.data.params), "metrics": metrics}


def test_a_batch_in_one_transaction_lands_as_mlflow_would_write_it(tmp_path: Path, new_store, monkeypatch: pytest.MonkeyPatch) -> None:
    through_client = Tracker(new_store("client.db"), bulk=False)
    in_batches = Tracker(new_store("batch.db"))
    monkeypatch.chdir(tmp_path)
    logged = []
    for tracker in (through_client, in_batches):
        experiment_id, parent = _parent(tracker)
        run_ids = tracker.send_results(_uploads(tracker, experiment_id, parent, 3))
        runs = [tracker.get_run(run_id) for run_id in run_ids]
        assert all(run.data.tags["mlflow.parentRunId"] == parent for run in runs)
        logged.append([_as_logged(run) | {"tags": {k: v for k, v in run.data.tags.items()
                                                   if k != "mlflow.parentRunId"}} for run in runs])
        stored = read_results(tracker, parent, reservoirs=True)
        assert sorted(stored) == sorted(run_ids)  # their results: one part on the parent run
        assert stored[run_ids[1]].entry["id"] == "s-001" and stored[run_ids[1]].timing == {"wall_seconds": 0.25}
        assert stored[run_ids[1]].reservoir == {"a": [1.0, 2.0]}
        children = tracker.configuration_runs(experiment_id, parent)
        assert sorted(c.info.run_id for c in children) == sorted(run_ids)
    assert logged[0] == logged[1]
    assert logged[1][0]["tags"]["privlab.ledger"] == "ledger table" and logged[1][0]["status"] == "FINISHED"


def test_the_sqlite_reader_sees_the_runs_mlflow_sees(tmp_path: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tracker = Tracker(tracking_uri)
    experiment_id, parent = _parent(tracker)
    tracker.send_results(_uploads(tracker, experiment_id, parent, 2))
    tracker.log_texts(parent, {"notes/a.txt": "hello"})
    reader = SqliteStoreReader.open(tracking_uri)
    assert reader is not None and reader.require_experiment("batches") == experiment_id
    for mine, theirs in zip(reader.configuration_runs(experiment_id, parent),
                            tracker.configuration_runs(experiment_id, parent)):
        assert mine.info.run_id == theirs.info.run_id and mine.data.tags == theirs.data.tags
        assert mine.data.params == theirs.data.params
        assert json.dumps(mine.data.metrics, sort_keys=True) == json.dumps(theirs.data.metrics, sort_keys=True)
    assert [p.info.run_id for p in reader.parent_runs(experiment_id)] == [parent]
    assert reader.read_text(parent, "notes/a.txt") == "hello" and reader.list_artifacts(parent, "notes") == ["notes/a.txt"]
    assert reader.read_bytes(parent, "missing") is None
    with pytest.raises(Exception, match="no experiment named 'nope'"):
        reader.require_experiment("nope")


def test_the_writer_sends_consecutive_batchable_items_together_in_order() -> None:
    calls: list[object] = []
    gate = threading.Event()
    writer = BackgroundWriter(linger_s=0.0)
    writer.submit(gate.wait)  # holds the writer while the queue fills
    send = calls.append
    for item in ("a", "b", "c"):
        writer.submit_batched(send, item)
    writer.submit(lambda: calls.append("plain"))
    writer.submit_batched(send, "d")
    gate.set()
    writer.flush()
    writer.close()
    assert calls == [["a", "b", "c"], "plain", ["d"]]


def test_a_failed_batch_keeps_every_item_for_the_resume() -> None:
    writer = BackgroundWriter(linger_s=0.0, outage_wait_s=0.0, retry_interval_s=0.0)
    gate = threading.Event()
    writer.submit(gate.wait)

    def refuse(items: list[str]) -> None:
        raise ConnectionError("the tracking server went away")

    for item in ("a", "b"):
        writer.submit_batched(refuse, item, keep=item)
    gate.set()
    with pytest.raises(Exception):
        writer.flush()
    writer.close()
    assert writer.unsent == ["a", "b"]


def test_the_default_store_is_mlflows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_tracking_uri() == mlflow.get_tracking_uri()


def test_a_run_does_not_read_its_own_parts_back_for_its_reports(tmp_path: Path, tracking_uri: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Its reports' reservoir samples are in memory (a resume reads the stored ones once): reading
    # every part again for each configuration took 20 minutes for 200 configurations at load 17.
    from privlab.platform.run.runner import RunOptions, run_experiment
    from privlab.platform.experiment.spec import load_spec

    spec = tmp_path / "small.toml"
    spec.write_text('name = "small"\nseed = 3\nworkload = "laplace_mean"\nrepetitions = 5\n'
                    '[params]\nlower = 0.0\nupper = 1.0\n[grid]\nepsilon = [0.5, 1.0]\nn = [10, 20]\n'
                    '[budget]\nepsilon = 2.0\n[tracking]\nexperiment = "small"\nplots = false\n')
    reads: list[str] = []
    read_bytes = Tracker.read_bytes
    monkeypatch.setattr(Tracker, "read_bytes", lambda self, run_id, path: reads.append(path) or
                        read_bytes(self, run_id, path))
    monkeypatch.chdir(tmp_path)
    summary = run_experiment(load_spec(spec), RunOptions(serial=True, tracking_uri=tracking_uri, progress=False))
    assert len(summary["configurations"]) == 4
    assert not [path for path in reads if path.startswith("results/")]


def test_flush_does_not_wait_for_a_batch_to_fill() -> None:
    calls: list[object] = []
    writer = BackgroundWriter(linger_s=30.0)
    writer.submit_batched(calls.append, "a")
    began = time.perf_counter()
    writer.flush()
    writer.close()
    assert calls == [["a"]] and time.perf_counter() - began < 10.0


def test_a_call_lets_the_caller_work_meanwhile_and_returns_the_writers_value() -> None:
    # The run's end: the backend stops on the driver's thread while the writer logs the summary.
    writer = BackgroundWriter()
    both_running = threading.Barrier(2, timeout=10)
    threads: dict[str, str] = {}

    def on_the_writer() -> str:
        threads["task"] = threading.current_thread().name
        both_running.wait()  # returns only while the caller's work runs too
        return "summary"

    def on_the_caller() -> None:
        threads["meanwhile"] = threading.current_thread().name
        both_running.wait()

    assert writer.call(on_the_writer, meanwhile=on_the_caller) == "summary"
    writer.close()
    assert threads == {"task": "privlab-tracking", "meanwhile": threading.current_thread().name}


class _ServerClient:
    """MLflow's client as a tracking server answers it, slow enough that overlapping calls show."""

    def __init__(self, *, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0
        self.created: list[str] = []
        self.finished: list[str] = []
        self.artifacts: list[str] = []

    def _call(self) -> None:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.02)
        with self.lock:
            self.running -= 1

    def create_run(self, experiment_id: str, *, run_name: str, tags: dict, start_time: int | None = None) -> object:
        self._call()
        with self.lock:
            self.created.append(run_name)
        return type("Run", (), {"info": type("Info", (), {"run_id": f"id-{run_name}"})()})()

    def log_batch(self, run_id: str, **_: object) -> None:
        self._call()
        if run_id == self.refuse:
            raise RuntimeError("the server refused this batch")

    def log_artifacts(self, run_id: str, folder: str) -> None:
        self.artifacts.append(run_id)

    def set_terminated(self, run_id: str, status: str, end_time: int | None = None) -> None:
        self._call()
        with self.lock:
            self.finished.append(run_id)


def test_a_tracking_servers_runs_are_sent_side_by_side_and_a_failed_one_goes_on_where_it_stopped() -> None:
    tracker = Tracker("http://127.0.0.1:9")  # nothing listens: the client below answers instead
    client = tracker.client = _ServerClient(refuse="id-s[i=3]")  # type: ignore[assignment]
    uploads = _uploads(tracker, "1", "parent", 6)
    with pytest.raises(RuntimeError, match="refused"):
        tracker.send_results(uploads)
    assert client.most_at_once > 1  # the runs' calls overlapped
    assert sorted(client.created) == [f"s[i={i}]" for i in range(6)] and client.artifacts == ["parent"]  # one part
    assert sorted(client.finished) == [f"id-s[i={i}]" for i in range(6) if i != 3]
    assert [u.finished for u in uploads] == [True, True, True, False, True, True]
    client.refuse = None
    assert tracker.send_results(uploads) == [f"id-s[i={i}]" for i in range(6)]  # in the uploads' order
    assert sorted(client.created) == [f"s[i={i}]" for i in range(6)] and client.artifacts == ["parent"]  # not again
    assert client.finished[-1] == "id-s[i=3]" and len(client.finished) == 6
