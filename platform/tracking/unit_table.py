"""The per-unit table of a configuration: one row per unit (e.g. each release-flow attempt).

A ``unit_runs`` workload reports every unit's values (each criterion's DP and exact value, its
pass/fail, the timings). They are kept as data, not as MLflow runs: the rows travel with the
configuration's aggregate (merged with the range they belong to, saved in every checkpoint) and
are written once, when the configuration finishes, into its row of a result part on the parent
run (:mod:`~privlab.platform.tracking.result_parts`: columns ``unit_seed_keys``,
``unit_metrics``, ``unit_values``). So an interrupted and resumed run ends with each unit's row
exactly once, a grid of 10⁵ attempts adds 10⁵ table rows instead of 10⁵ runs of ~50 metrics
each, and a configuration run needs no artifact folder of its own for it (a file per run would
cost its parquet footer and the run's folders, ~10 KB a configuration on the births grid). ``[tracking] unit_runs = true`` also logs one run per unit.

Each unit's ``seed_key`` is ``"study_key/config_key/unit"``: the unit's stream is
``SeedSequence(root_seed, spawn_key=(study_key, config_key, unit))``, the root seed is the run's
``privlab.root_seed`` tag. :func:`read_unit_table` returns the table wide: one row per unit, the
workload's metrics as columns; runs logged before the table moved into the parts have it as
their own long ``units.parquet`` (one row per unit and metric), which it reads too.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from privlab.platform.core.errors import ExecutionError
from privlab.platform.tracking.result_parts import read_results
from privlab.platform.tracking.run_tags import PARENT_TAG
from privlab.platform.tracking.tracker import Tracker

UNITS_PATH = "units.parquet"  # a run's own per-unit table, as runs logged before the parts kept it
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


def unit_columns(frame: pd.DataFrame) -> dict[str, Any]:
    """A wide per-unit table (:func:`unit_frame`) as a result part stores it: the units' seed
    keys, in unit order, and each metric's values for the units."""
    metrics = [c for c in frame.columns if c not in _KEYS]
    return {"seed_keys": [str(k) for k in frame["seed_key"]],
            "metrics": {name: frame[name].to_numpy(dtype="float64").tolist() for name in metrics}}


def frame_of_units(units: Mapping[str, Any]) -> pd.DataFrame:
    """The wide table of a part's per-unit columns (:func:`unit_columns`)."""
    seed_keys = list(units["seed_keys"])
    frame = pd.DataFrame({"unit": pd.Series(range(len(seed_keys)), dtype="int64"), "seed_key": seed_keys})
    for name, values in units["metrics"].items():
        frame[name] = pd.Series(values, dtype="float64")
    return frame


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


def read_unit_tables(tracker: Tracker, parent_run_id: str) -> dict[str, pd.DataFrame]:
    """Every per-unit table in a parent run's result parts, by configuration run id (one read
    of the parts, for a whole grid)."""
    rows = read_results(tracker, parent_run_id, units=True)
    return {run_id: frame_of_units(row.units) for run_id, row in rows.items() if row.units is not None}


def read_unit_table(tracker: Tracker, run_id: str) -> pd.DataFrame | None:
    """A configuration run's per-unit table, wide (None when the run has none): from its row
    of its parent's result parts, or from its own ``units.parquet`` (runs logged before)."""
    parent = tracker.get_run(run_id).data.tags.get(PARENT_TAG)
    if parent:
        row = read_results(tracker, parent, units=True, finished=[run_id]).get(run_id)
        if row is not None and row.units is not None:
            return frame_of_units(row.units)
    data = tracker.read_bytes(run_id, UNITS_PATH)
    return None if data is None else wide_unit_table(pd.read_parquet(io.BytesIO(data)))
