"""Shared fixtures: a small spec exercising all three patterns, and a private MLflow store."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

# Every Ray instance and cluster the tests start listens on loopback; this makes Ray resolve
# "this node" to 127.0.0.1 too (it is read when Ray is imported, so set it first).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

MINI_SPEC = """
name = "mini"
description = "a small spec covering the grid, trials and actor-pool patterns"
seed = 7

[budget]
epsilon = 1.5

[tracking]
experiment = "mini"

[[study]]
name = "mean"
workload = "laplace_mean"
repetitions = 24
[study.grid]
epsilon = [0.5, 1.0]
n = [50]

[[study]]
name = "loss"
workload = "laplace_privacy_loss"
trials = 3000
[study.grid]
epsilon = [0.5, 1.0]

[[study]]
name = "seeds"
workload = "plausible_seeds"
[study.params]
records = 1500
candidates = 240
chunk = 40
"""


@pytest.fixture
def mini_spec(tmp_path: Path) -> Path:
    path = tmp_path / "mini.toml"
    path.write_text(textwrap.dedent(MINI_SPEC))
    return path


@pytest.fixture
def tracking_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"



@pytest.fixture(scope="session")
def mini_spec_text() -> str:
    return textwrap.dedent(MINI_SPEC)
