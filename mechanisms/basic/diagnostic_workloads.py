"""Diagnostic workloads for benchmarks and platform tests (no privacy claims of their own
except ``column_mean``, which is an ordinary ε-DP mean of a file column).

* ``cpu_burn`` (trials): a deterministic CPU-bound trial of a few milliseconds (a numpy sort
  on one core), for measuring scheduling overhead and scaling;
* ``column_mean`` (grid): the Laplace mean of one column of a file dataset, with the column's
  public bounds given as parameters (checks the file-dataset path and the object store);
* ``column_mean_path`` (grid): the same mean, reading the file named in its parameters
  (``Workload.data_key``/``load_data``) and keeping every repetition's values (``unit_runs``:
  a per-unit table, or MLflow runs with ``[tracking] unit_runs = true``);
* ``crash_once`` (trials): kills its Ray worker process during the first trial it runs (a marker file records that it happened), to show that a retried task gives the same
  result. It never kills a process that is not a Ray worker.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload, register_workload


_COUNT = Interval(numbers.Integral, 1, None, closed="left")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BurnParams(ConstrainedParams):
    size: int = 20_000  # elements sorted per trial (≈1.5 ms here)
    sorts: int = 1

    _parameter_constraints: ClassVar = {"size": [_COUNT], "sorts": [_COUNT]}


@register_workload
class CpuBurn(Workload):
    """A deterministic CPU-bound trial (a numpy sort on one core): scheduling overhead and scaling."""

    name = "cpu_burn"
    hidden = True  # benchmarks and tests only
    pattern = Pattern.TRIALS
    Params = BurnParams
    metrics = {"median": MetricKind.VALUE}

    def run_trial(self, params: BurnParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        return {"median": burn(params, source.rng)}


def burn(params: BurnParams, rng: np.random.Generator) -> float:
    value = 0.0
    for _ in range(params.sorts):
        value += float(np.sort(rng.random(params.size))[params.size // 2])
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnMeanParams:
    column: str
    epsilon: float
    lower: float
    upper: float
    n: int  # the public record count (the sensitivity depends on it)

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValueError(f"column ({self.column!r}) must be a non-empty column name")
        if not (isinstance(self.epsilon, (int, float)) and math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"epsilon ({self.epsilon!r}) must be a positive finite number")
        if not self.upper > self.lower:
            raise ValueError(f"upper ({self.upper!r}) must be greater than lower ({self.lower!r})")
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n ({self.n!r}) must be a positive integer")


@register_workload
class ColumnMean(Workload):
    """ε-DP mean of a column of a file dataset (replace-one neighbours, public n and bounds)."""

    name = "column_mean"
    pattern = Pattern.GRID
    Params = ColumnMeanParams
    metrics = {"dp_mean": MetricKind.VALUE, "abs_error": MetricKind.VALUE}
    uses_dataset = True

    @staticmethod
    def sensitivity(params: ColumnMeanParams) -> float:
        return (params.upper - params.lower) / params.n

    def plan(self, params: ColumnMeanParams) -> list[PrivacyEvent]:
        s = self.sensitivity(params)
        return [PrivacyEvent(name="dp_mean", mechanism="laplace", epsilon=params.epsilon, sensitivity=s,
                             noise_scale=s / params.epsilon, scope="data", step="column_mean")]

    def run_trial(self, params: ColumnMeanParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        if data is None or params.column not in data.columns:
            raise ValueError(f"column ({params.column!r}) must be a column of the study's [dataset]")
        if len(data) != params.n:
            raise ValueError(f"n ({params.n!r}) must equal the dataset's public record count ({len(data)})")
        values = np.clip(data[params.column].to_numpy(dtype=np.float64), params.lower, params.upper)
        exact = float(values.mean())
        noisy = laplace_mechanism(exact, sensitivity=self.sensitivity(params), epsilon=params.epsilon,
                                  source=source, ledger=ledger, name="dp_mean", step="column_mean")
        return {"dp_mean": float(noisy), "abs_error": abs(float(noisy) - exact)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnMeanPathParams(ColumnMeanParams):
    path: str = dataclasses.field(metadata={"path": True})  # relative to the spec's folder

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.path, str) or not self.path.endswith((".csv", ".parquet")):
            raise ValueError(f"path ({self.path!r}) must name a .csv or .parquet file")


@register_workload
class ColumnMeanFromPath(ColumnMean):
    """``column_mean`` on a file its parameters name, keeping each repetition's values (``unit_runs``)."""

    name = "column_mean_path"
    Params = ColumnMeanPathParams
    uses_dataset = False
    unit_runs = True

    def data_key(self, params: ColumnMeanPathParams) -> str:
        return str(Path(params.path).resolve())

    def data_files(self, params: ColumnMeanPathParams) -> tuple[str, ...]:
        return (params.path,)

    def load_data(self, params: ColumnMeanPathParams) -> pd.DataFrame:
        path = Path(params.path)
        if not path.is_file():
            raise SpecError(f"path ({params.path!r}) does not exist; give the data file's path")
        frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
        if params.column not in frame.columns:
            raise SchemaError(f"{path.name}: column {params.column!r} is missing; it has {', '.join(frame.columns)}")
        return frame


@dataclasses.dataclass(frozen=True, kw_only=True)
class CrashParams:
    marker_dir: str

    def __post_init__(self) -> None:
        if not isinstance(self.marker_dir, str) or not self.marker_dir:
            raise ValueError(f"marker_dir ({self.marker_dir!r}) must be a directory path")


def _inside_ray_worker() -> bool:
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE


@register_workload
class CrashOnce(Workload):
    """Kills its Ray worker during the first trial it runs, to show a retried task gives the same result."""

    name = "crash_once"
    hidden = True  # tests only: it kills its worker process
    pattern = Pattern.TRIALS
    Params = CrashParams
    metrics = {"value": MetricKind.VALUE}

    def run_trial(self, params: CrashParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        value = float(source.rng.random())
        marker = Path(params.marker_dir) / "crashed"
        if _inside_ray_worker() and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)  # a hard worker death, not an exception: Ray must retry the task
        return {"value": value}
