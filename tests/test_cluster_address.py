"""`--address` to a cluster that cannot be reached fails in seconds with a message saying what to do."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privlab.platform.core.errors import ExecutionError
from privlab.platform.execution.backends import _check_reachable

SPEC = """name = "q"
seed = 1
workload = "laplace_mean"
repetitions = 2
[params]
n = 10
epsilon = 1.0
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
def test_an_address_where_nothing_listens_fails_fast_with_advice(tmp_path: Path) -> None:
    (tmp_path / "q.toml").write_text(SPEC)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "privlab.platform.cli", "run", "q.toml", "--no-progress",
                             "--address", f"127.0.0.1:{_free_port()}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 4, result.stderr
    assert "no Ray cluster is running there" in result.stderr and "privlab cluster up" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60  # Ray alone retried for minutes


def test_the_reachability_check_passes_a_listening_port_and_ignores_other_forms() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        _check_reachable(f"127.0.0.1:{server.getsockname()[1]}")
    for address in ("auto", "ray://127.0.0.1:10001"):
        _check_reachable(address)  # left to Ray
    with pytest.raises(ExecutionError, match="nothing answers at 127.0.0.1:"):
        _check_reachable(f"127.0.0.1:{_free_port()}", timeout=1.0)
