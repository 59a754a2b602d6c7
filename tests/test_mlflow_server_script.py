"""cluster/mlflow-server.sh keeps what it and the server write to the user alone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "cluster" / "mlflow-server.sh"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow  # starts an MLflow server (about 15 s, ~480 MB)
def test_the_server_log_state_and_artifacts_are_private(tmp_path: Path) -> None:
    """Issue 30 item 6: the server's log was 0644 and its artifacts 0755 (files 0644)."""
    from mlflow import MlflowClient

    from privlab.platform.execution.local_cluster import _free_port

    state, artifacts = tmp_path / "server", tmp_path / "artifacts"
    for folder in (state, artifacts):  # left by an earlier start, with the old modes
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    (state / "mlflow-server.log").write_text("an earlier server's log\n")
    (state / "mlflow-server.log").chmod(0o644)
    port = _free_port()
    env = {**os.environ, "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{tmp_path / 'server.db'}",
           "MLFLOW_SERVER_PORT": str(port), "MLFLOW_SERVER_STATE_DIR": str(state),
           "MLFLOW_ARTIFACTS_DESTINATION": str(artifacts), "PYTHON": sys.executable}
    env.pop("MLFLOW_TRACKING_URI", None)
    started = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=150)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        client = MlflowClient(tracking_uri=f"http://127.0.0.1:{port}")
        run = client.create_run(client.create_experiment("private"))
        client.log_text(run.info.run_id, "{}", "result.json")
        uploaded = list(artifacts.rglob("result.json"))
        assert len(uploaded) == 1
        assert _mode(state) == 0o700 and _mode(state / "mlflow-server.log") == 0o600
        assert _mode(state / "mlflow-server.pid") == 0o600
        assert _mode(uploaded[0]) == 0o600
        assert [path for path in [artifacts, *artifacts.rglob("*")] if path.is_dir() and _mode(path) != 0o700] == []
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=60)
