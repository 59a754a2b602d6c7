"""Shared fixtures: a small spec exercising all three patterns, and a private MLflow store."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

# Every Ray instance and cluster the tests start listens on loopback; this makes Ray resolve
# "this node" to 127.0.0.1 too (it is read when Ray is imported, so set it first).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The diagnostic workloads (cpu_burn, crash_once, column_mean…) are not in the installed
# registry; the tests, their subprocesses and Ray workers (which inherit the environment)
# load them as a plug-in (privlab.platform.plugins).
os.environ["PRIVLAB_PLUGINS"] = "privlab.mechanisms.basic.diagnostic_workloads"

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


# --- public datasets ------------------------------------------------------------------------
#
# The public datasets live outside the checkout, in ../shared/data relative to it. A test that
# needs one asks for it through :func:`shared_dataset` (or the ``nvss_10k`` fixture). When the
# file is missing the test is skipped with a reason naming the file, where it is expected and
# why — except under ``CI=true``, where a missing dataset is an error: CI must run these tests,
# and a silent skip there would hide 40-odd end-to-end release tests.

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NVSS_10K_NAME = "nvss/birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def shared_dataset(relative: str) -> Path:
    """The path of a public dataset under ../shared/data; skip (or fail under CI=true) if absent."""
    path = SHARED_DATA / relative
    if path.is_file():
        return path
    reason = (
        f"public dataset {relative!r} is missing: expected at {path} (../shared/data/{relative} relative to "
        f"the checkout {Path(__file__).resolve().parents[1]}); see {SHARED_DATA / relative.split('/')[0]}/README.md"
    )
    if running_in_ci():
        pytest.fail(f"CI=true and {reason}; CI must run the tests that need it, so this is an error, not a skip",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def nvss_10k() -> Path:
    """The public NVSS 10K births sample (session scope, so it is checked before any module
    fixture reads it): skipped with a reason when absent, an error under ``CI=true``."""
    return shared_dataset(NVSS_10K_NAME)
