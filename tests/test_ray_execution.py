"""Real Ray: local instances with 1 and 2 workers, a three-node loopback cluster, a worker
killed mid-run — all must give exactly the single-process results."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from privlab.platform.execution.interrupts import sigterm_as_interrupt
from privlab.platform.execution.progress import Progress
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunOptions, run_experiment

pytestmark = pytest.mark.ray


def _run(spec_path: Path, uri: str, *overrides: str, **options: object) -> dict:
    spec = load_spec(spec_path, list(overrides))
    return run_experiment(spec, RunOptions(tracking_uri=uri, progress=False, **options))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, mini_spec_text: str) -> tuple[Path, str, dict]:
    folder = tmp_path_factory.mktemp("reference")
    spec = folder / "mini.toml"
    spec.write_text(mini_spec_text)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    return spec, uri, _run(spec, uri, serial=True)


# One worker is the slow step's (13 s): the default run keeps Ray's parallel case.
@pytest.mark.parametrize("workers", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_local_ray_matches_serial(reference: tuple[Path, str, dict], workers: int,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    spec, uri, serial = reference
    # As the command line runs it: SIGTERM stops the run cleanly, also after ray.init (which
    # installs a handler of its own) started Ray.
    handlers_while_counting = set()
    counted = Progress.update

    def note_the_handler(self: Progress, units: int = 0, **kwargs: Any) -> None:
        handlers_while_counting.add(signal.getsignal(signal.SIGTERM))
        counted(self, units, **kwargs)

    monkeypatch.setattr(Progress, "update", note_the_handler)
    with sigterm_as_interrupt():
        ours = signal.getsignal(signal.SIGTERM)
        summary = _run(spec, uri, workers=workers)
    assert handlers_while_counting == {ours}
    assert summary["timing"]["backend"] == "ray"
    assert summary["timing"]["workers"] == workers
    assert summary["configurations"] == serial["configurations"]


def _listeners(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    addresses = []
    for line in out.splitlines():
        if any(f"pid={pid}," in line for pid in pids):
            addresses.append(line.split()[3])
    return addresses


@pytest.mark.slow  # a three-node ray.cluster_utils.Cluster and a killed worker (about 15 s)
def test_three_node_cluster_matches_serial_and_survives_a_killed_worker(
    reference: tuple[Path, str, dict], tmp_path: Path
) -> None:
    from ray.cluster_utils import Cluster

    spec, uri, serial = reference
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        pids = {p.process.pid for node in [cluster.head_node, *cluster.worker_nodes]
                for infos in node.all_processes.values() for p in infos}
        listeners = _listeners(pids)
        assert listeners, "expected the cluster's processes to listen on TCP ports"
        loopback = ("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")
        assert all(a.startswith(loopback) for a in listeners), listeners

        summary = _run(spec, uri, address=cluster.address)
        assert summary["timing"]["ray_nodes"] == 3
        assert summary["configurations"] == serial["configurations"]
        nodes_used = max(t["nodes"] for t in summary["timing"]["configurations"].values())
        assert nodes_used >= 2, "units should spread over the cluster's nodes"

        # A worker process dies (os._exit) in the middle of a task: Ray retries the task and,
        # because every trial's seed is fixed, the results equal the serial reference.
        crash_spec = tmp_path / "crash.toml"
        crash_spec.write_text(
            'name = "crash"\nseed = 3\nworkload = "crash_once"\ntrials = 400\n'
            f'[params]\nmarker_dir = "{tmp_path}"\n[execution]\nbatch_size = 50\n'
        )
        crashed = _run(crash_spec, uri, address=cluster.address)
        assert (tmp_path / "crashed").exists(), "the worker was not killed; the test proved nothing"
        clean = _run(crash_spec, uri, serial=True)
        assert crashed["configurations"] == clean["configurations"]
    finally:
        cluster.shutdown()
