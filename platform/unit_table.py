"""The per-unit table of a configuration: one row per unit (e.g. each release-flow attempt).

A ``unit_runs`` workload reports every unit's values (each criterion's DP and exact value, its
pass/fail, the timings). They are kept as data, not as MLflow runs: the rows travel with the
configuration's aggregate (merged with the range they belong to, saved in every checkpoint) and
are written once, as ``units.parquet`` on the configuration's run, when it finishes. So an
interrupted and resumed run ends with each unit's row exactly once, and a grid of 10⁵ attempts
adds 10⁵ table rows instead of 10⁵ runs of ~50 metrics each. ``[tracking] unit_runs = true``
also logs one run per unit, as before.

Columns: ``unit`` (the unit's index), ``seed_key`` (``"study_key/config_key/unit"``: the unit's
stream is ``SeedSequence(root_seed, spawn_key=(study_key, config_key, unit))``, the root seed is
the run's ``privlab.root_seed`` tag), then the workload's metrics in its order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from privlab.platform.errors import ExecutionError
from privlab.platform.reports import parquet_bytes, parquet_frame
from privlab.platform.tracking import Tracker

UNITS_PATH = "units.parquet"


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
    return parquet_bytes(frame)


def read_unit_table(tracker: Tracker, run_id: str) -> pd.DataFrame | None:
    """A configuration run's per-unit table (None when the run has none)."""
    return parquet_frame(tracker.read_bytes(run_id, UNITS_PATH))
