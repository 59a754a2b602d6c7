"""The Table-1 workload: exact bound for one split (Theorem 2), and the trials pattern's
determinism on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from privlab.mechanisms.pmse.studies import TABLE1_CONFIGS, SensitivityParams, table1_trial
from privlab.platform.runner import RunOptions, run_experiment
from privlab.platform.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]


def test_depth_one_never_violates_the_bound_and_deeper_trees_sometimes_do() -> None:
    # With one split, greedy = optimal, so Theorem 2's Δu ≤ 1/n must hold on every trial
    # (up to floating-point rounding of the pMSE). Deeper greedy trees may exceed it.
    params = SensitivityParams(n=500)
    differences = np.array([table1_trial(params, np.random.default_rng(seed)) for seed in range(300)])
    depth_one = [i for i, (depth, _) in enumerate(TABLE1_CONFIGS) if depth == 1]
    assert np.all(differences[:, depth_one] <= 1 / params.n + 1e-12)
    assert np.all(np.isfinite(differences)) and np.all(differences >= 0)


def test_sensitivity_spec_runs_and_is_reproducible(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec_path = ROOT / "experiments" / "pmse" / "sensitivity.toml"
    first = run_experiment(load_spec(spec_path, ["trials=60", "params.n=300"]),
                           RunOptions(serial=True, tracking_uri=uri, progress=False))
    second = run_experiment(load_spec(spec_path, ["trials=60", "params.n=300", "execution.batch_size=7"]),
                            RunOptions(serial=True, tracking_uri=uri, progress=False))
    assert first["configurations"] == second["configurations"]
    metrics = first["configurations"][0]["metrics"]
    assert metrics["violation_d1_cp01_count"] == 60
    assert metrics["violation_d1_cp01_rate"] == 0.0
    assert metrics["bound"] == 1 / 300
