"""The embedded MLflow store: concurrent first use works, and a normal run prints no library noise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """name = "tiny"
seed = 1
workload = "laplace_mean"
repetitions = 2
[params]
n = 10
epsilon = 1.0
"""
PRIVLAB = [sys.executable, "-m", "privlab.platform.cli"]


def _environment() -> dict[str, str]:
    """This process's environment without what an in-process ``main()`` call may have set."""
    return {k: v for k, v in os.environ.items() if k != "MLFLOW_LOGGING_LEVEL"}


def _start(folder: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*PRIVLAB, "run", "tiny.toml", "--no-progress", *extra], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment())


@pytest.mark.slow  # several privlab processes at once: large, run by .ci/run's -m slow
def test_several_commands_on_a_new_store_all_succeed(tmp_path: Path) -> None:
    # Issue 14 item 3: without the store lock all six failed here with exit 4 ("Online migration
    # expected to match one row", "table ... already exists").
    (tmp_path / "tiny.toml").write_text(SPEC)
    assert not (tmp_path / "mlflow.db").exists()
    processes = [_start(tmp_path, "--serial") for _ in range(6)]
    results = [(p.wait(timeout=240), p.stderr.read()) for p in processes]
    assert [code for code, _ in results] == [0] * 6, "\n".join(err for _, err in results)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tiny")
    parents = client.search_runs([experiment.experiment_id], filter_string="tags.`privlab.kind` = 'parent'")
    assert len(parents) == 6


@pytest.mark.slow  # two privlab processes, one starting Ray: 15 s, run by .ci/run's -m slow
@pytest.mark.ray
def test_a_normal_run_prints_no_mlflow_or_ray_noise(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(SPEC)
    quiet = _start(tmp_path, "--workers", "1")
    _, err = quiet.communicate(timeout=240)
    assert quiet.returncode == 0, err
    for noise in ("Creating initial MLflow database tables", "Updating database tables",
                  "Token authentication is enabled", "INFO mlflow"):
        assert noise not in err
    verbose = subprocess.run([*PRIVLAB, "-v", "run", "tiny.toml", "--serial", "--no-progress",
                              "--tracking-uri", f"sqlite:///{tmp_path / 'other.db'}"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False, env=_environment())
    assert verbose.returncode == 0, verbose.stderr
    assert "Creating initial MLflow database tables" in verbose.stderr  # --verbose keeps them


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
def test_a_run_says_where_its_results_went(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(SPEC)
    done = subprocess.run([*PRIVLAB, "run", "tiny.toml", "--serial", "--no-progress"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    store = next(line for line in done.stdout.splitlines() if line.startswith("results: tracking store "))
    assert store.endswith(f"sqlite:///{tmp_path / 'mlflow.db'}")
    artifacts = next(line for line in done.stdout.splitlines() if "artifacts of run" in line).split(": ", 1)[1]
    assert (Path(artifacts) / "summary.json").is_file()  # the location printed is where the files are


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
def test_artifacts_go_beside_a_sqlite_store_wherever_the_command_runs(tmp_path: Path) -> None:
    """Issue 13 item 10: MLflow's default put them in ./mlruns of the working folder."""
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    elsewhere.mkdir()
    (elsewhere / "tiny.toml").write_text(SPEC)
    done = subprocess.run([*PRIVLAB, "run", "tiny.toml", "--serial", "--no-progress",
                           "--tracking-uri", f"sqlite:///{store / 'runs.db'}"],
                          cwd=elsewhere, capture_output=True, text=True, timeout=240, check=False, env=_environment())
    assert done.returncode == 0, done.stderr
    assert not (elsewhere / "mlruns").exists()
    artifacts = sorted(p.name for p in (store / "mlruns" / "tiny").rglob("*") if p.is_file())
    result_parts = list((store / "mlruns" / "tiny").rglob("results/*.parquet"))  # the configurations' results
    assert "spec.json" in artifacts and result_parts
    assert "artifacts of run" in done.stdout and str(store / "mlruns" / "tiny") in done.stdout


def test_the_artifact_folder_of_a_local_store_is_private(tmp_path: Path) -> None:
    """Issue 30 item 6: MLflow made the artifacts beside a local store 0755 (files 0644)."""
    import stat

    from privlab.platform.tracking.tracker import Tracker

    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    tracker.experiment_names()
    assert not (tmp_path / "mlruns").exists()  # a command that only reads makes no folder
    run = tracker.client.create_run(tracker.experiment_id("tiny", create=True))
    tracker.log_texts(run.info.run_id, {"result.json": "{}"})
    assert any((tmp_path / "mlruns").rglob("result.json"))
    assert stat.S_IMODE((tmp_path / "mlruns").stat().st_mode) == 0o700
    (tmp_path / "mlruns").chmod(0o755)  # as a store from before was
    tracker.experiment_id("tiny", create=True)
    assert stat.S_IMODE((tmp_path / "mlruns").stat().st_mode) == 0o700
