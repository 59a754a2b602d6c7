"""The per-unit table of a configuration: one row per unit (e.g. each release-flow attempt).

A ``unit_runs`` workload reports every unit's values (each criterion's DP and exact value, its
pass/fail, the timings). They are kept as data, not as MLflow runs: the rows travel with the
configuration's aggregate (merged with the range they belong to, saved in every checkpoint) and
are written once, as ``units.parquet`` on the configuration's run, when it finishes. So an
interrupted and resumed run ends with each unit's row exactly once, and a grid of 10⁵ attempts
adds 10⁵ table rows instead of 10⁵ runs of ~50 metrics each. ``[tracking] unit_runs = true``
also logs one run per unit, as before.

Stored long ("tidy"): one row per unit and metric, columns ``unit`` (the unit's index),
``seed_key`` (``"study_key/config_key/unit"``: the unit's stream is
``SeedSequence(root_seed, spawn_key=(study_key, config_key, unit))``, the root seed is the run's
``privlab.root_seed`` tag), ``metric`` and ``value``, without pandas metadata or statistics: a
wide parquet file of ~50 columns spends ~30 KB on its footer, more than 2 attempts' values, while
the long one holds 2 attempts in ~2 KB (measured in benchmarks/tracking_scale.py).
:func:`read_unit_table` returns it wide: one row per unit, the workload's metrics as columns.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import pandas as pd

from privlab.platform.core.errors import ExecutionError
from privlab.platform.tracking.tracker import Tracker

UNITS_PATH = "units.parquet"
_KEYS = ("unit", "seed_key")


def unit_frame(
    records: Iterable[tuple[int, dict[str, float]]],
    *,
    metrics: Sequence[str],
    study_key: int,
    config_key: int,
    units: int,
    where: str,
) -> pd.DataFrame:
    """The rows of a finished configuration's ``units`` units, ordered by unit.

    Raises:
        ExecutionError: a unit's row is missing or present twice (a bookkeeping error that
            would make the table disagree with the aggregates).
    """
    ordered = sorted(records, key=lambda record: record[0])
    indices = [index for index, _ in ordered]
    if indices != list(range(units)):
        missing = sorted(set(range(units)) - set(indices))
        repeated = sorted({i for i in indices if indices.count(i) > 1})
        raise ExecutionError(f"{where}: the per-unit table must hold units 0..{units - 1} once each; "
                             f"missing {missing[:10]}, repeated {repeated[:10]}")
    frame = pd.DataFrame({
        "unit": pd.Series(indices, dtype="int64"),
        "seed_key": [f"{study_key}/{config_key}/{index}" for index in indices],
    })
    for name in metrics:
        frame[name] = pd.Series([values[name] for _, values in ordered], dtype="float64")
    return frame


def unit_table_bytes(frame: pd.DataFrame) -> bytes:
    """A wide per-unit table (:func:`unit_frame`) as the long parquet artifact's bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    metrics = [c for c in frame.columns if c not in _KEYS]
    long = pa.table({
        "unit": pa.array(frame["unit"].to_numpy().repeat(len(metrics)), pa.int64()),
        "seed_key": pa.array(frame["seed_key"].to_numpy().repeat(len(metrics)), pa.string()),
        "metric": pa.array(metrics * len(frame), pa.string()),
        "value": pa.array(frame[metrics].to_numpy(dtype="float64").ravel(), pa.float64()),
    })
    buffer = io.BytesIO()
    pq.write_table(long, buffer, write_statistics=False)
    return buffer.getvalue()


def wide_unit_table(long: pd.DataFrame) -> pd.DataFrame:
    """The long artifact's rows as the wide table: one row per unit, metrics in logged order."""
    metrics = list(dict.fromkeys(long["metric"]))
    units = list(dict.fromkeys(long["unit"]))
    frame = pd.DataFrame({
        "unit": pd.Series(units, dtype="int64"),
        "seed_key": list(dict.fromkeys(long["seed_key"])),
    })
    values = long["value"].to_numpy(dtype="float64").reshape(len(units), len(metrics))
    for column, name in enumerate(metrics):
        frame[name] = values[:, column]
    return frame


def read_unit_table(tracker: Tracker, run_id: str) -> pd.DataFrame | None:
    """A configuration run's per-unit table, wide (None when the run has none)."""
    data = tracker.read_bytes(run_id, UNITS_PATH)
    return None if data is None else wide_unit_table(pd.read_parquet(io.BytesIO(data)))
