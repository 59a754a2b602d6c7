"""Commands that need neither Ray nor MLflow do not import them (issue 14, item 12).

Each command runs in a fresh interpreter, which then reports the modules it loaded; heavy
packages (Ray, MLflow, matplotlib, numba, scipy.stats, scipy.sparse, scipy.linalg) may only be
imported by the commands that use them: loading the plug-ins, which every run does before it
starts, stays light. A wall-clock limit would be flaky on a loaded machine; what is imported is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("ray", "mlflow", "matplotlib", "numba", "scipy.stats", "scipy.sparse", "scipy.linalg")
PROBE = """
import json, sys
from privlab.platform.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
sys.exit(code)
"""


def loaded_modules(*args: str, cwd: Path = REPO) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def heavy(modules: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return sorted(h for h in HEAVY
                  if h not in allowed and (h in modules or any(m.startswith(h + ".") for m in modules)))


@pytest.mark.parametrize("args", [["validate", "experiments/quickstart.toml"], ["workloads"], ["audit", "--list"]])
def test_commands_without_ray_or_mlflow_import_neither(args: list[str]) -> None:
    assert heavy(loaded_modules(*args)) == []


@pytest.mark.slow  # several subprocesses: kept out of the default run's 6-minute budget
def test_compare_and_ledger_of_a_local_store_import_neither_mlflow_nor_ray_nor_plotting(mini_spec: Path,
                                                                                        tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    summary = tmp_path / "summary.json"
    subprocess.run([sys.executable, "-m", "privlab.platform.cli", "run", str(mini_spec), "--serial", "--no-progress",
                    "--tracking-uri", uri, "--summary-json", str(summary), "--set", "study.loss.trials=200"],
                   check=True, capture_output=True, cwd=REPO, timeout=300)
    run_id = json.loads(summary.read_text())["run_id"]
    # a local store is read with sqlite3 (platform/tracking/sqlite_reader.py): MLflow's import was most of
    # a new process's compare
    assert heavy(loaded_modules("compare", "mini", "--tracking-uri", uri)) == []
    assert heavy(loaded_modules("ledger", run_id, "--tracking-uri", uri)) == []
