"""The Table-1 workload: exact bound for one split (Theorem 2), and the trials pattern's
determinism on it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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
    # One summary entry per Table-1 configuration (facets of the one executed configuration).
    entries = {(e["params"]["depth"], e["params"]["cp"]): e for e in first["configurations"]}
    assert set(entries) == {(d, c) for d in (1, 2, 5, "unlimited") for c in (0.01, 0.001)}
    for entry in entries.values():
        metrics = entry["metrics"]
        assert metrics["violation_count"] == 60
        assert metrics["violation_ci_low"] <= metrics["violation_rate"] <= metrics["violation_ci_high"]
        assert metrics["max_abs_diff"] == metrics["abs_diff_max"] >= 0
        assert metrics["bound"] == 1 / 300
    assert entries[(1, 0.01)]["metrics"]["violation_rate"] == 0.0
    assert entries[(1, 0.01)]["metrics"]["max_abs_diff"] <= 1 / 300 + 1e-12


def test_sensitivity_report_has_table1_and_figure1(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec_path = ROOT / "experiments" / "pmse" / "sensitivity.toml"
    report_dir = tmp_path / "report"
    summary = run_experiment(load_spec(spec_path, ["trials=40", "params.n=200"]),
                             RunOptions(serial=True, tracking_uri=uri, progress=False, report_dir=report_dir,
                                        command="privlab run sensitivity.toml"))
    table = (report_dir / "pmse-sensitivity" / "table1.md").read_text()
    assert summary["run_id"] in table and "40 trials per configuration" in table
    assert table.count("\n| ") == 10  # header, rule and the 8 configurations
    assert "| unlimited | 0.001 |" in table and "2.5%" in table  # the paper's value beside ours
    png = (report_dir / "pmse-sensitivity" / "figure1.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_privlab_report_redraws_a_finished_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privlab.platform.cli import main

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec_path = str(ROOT / "experiments" / "pmse" / "sensitivity.toml")
    assert main(["run", spec_path, "--serial", "--no-progress", "--set", "trials=30", "--set", "params.n=200",
                 "--tracking-uri", uri, "--summary-json", "s.json", "--report-dir", "live"]) == 0
    run_id = json.loads((tmp_path / "s.json").read_text())["run_id"]
    assert main(["report", run_id, "--out", "again", "--tracking-uri", uri]) == 0
    live = (tmp_path / "live" / "pmse-sensitivity" / "table1.md").read_text()
    again = (tmp_path / "again" / "pmse-sensitivity" / "table1.md").read_text()
    assert live == again and "Command: `privlab run " in live
    assert (tmp_path / "again" / "pmse-sensitivity" / "figure1.png").stat().st_size > 10_000
    # A folder that is not a report folder is never overwritten.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert main(["report", run_id, "--out", "mine", "--tracking-uri", uri]) == 2
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert main(["report", "0" * 32, "--out", "x", "--tracking-uri", uri]) != 0
