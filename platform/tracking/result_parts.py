"""The configurations' full results, stored as parts on the parent run (``results/*.parquet``).

A configuration run's MLflow params and metrics are what the UI and ``privlab compare`` show; its
summary entry (every statistic of every metric, its ledger, its parameters: what ``result.json``
held) and its reservoir sample (each metric's kept per-trial values) are rows of a part: one
parquet file per batch of configuration runs logged together, on the parent run. A part is
written before its configuration runs are marked finished, so a finished configuration run's
result can always be read back (a resume never logs it twice); a part whose runs were never
finished (the driver died in between) names run ids the store does not hold as finished and is
ignored.

Why parts and not a file per run: a configuration run's own artifacts cost a folder and one file
per artifact (a ~2 KB ``result.json`` and a ~7 KB ``reservoir.parquet`` for a small
configuration, each parquet file with its own footer), and reading 10⁴ of them back one by one
takes minutes; a part of a few hundred rows is compressed together (zstd) and read in one call.

Columns: ``entry_id``, ``run_id``, ``result`` (the entry as compact JSON), ``timing`` (JSON: the
configuration's wall and compute seconds and the workload's ``timing_*`` metrics, kept out of the
entry so that results do not vary run to run), the reservoir as
``reservoir_metrics`` (list of names, in the sample's order) and ``reservoir_values`` (a list of
float64 values per metric); the reservoir lists are null when the run kept no artifacts. A
``unit_runs`` workload's per-unit table (:mod:`~privlab.platform.tracking.unit_table`) is three
more columns: ``unit_seed_keys`` (one per unit, in unit order), ``unit_metrics`` and
``unit_values`` (per metric, its value for each unit); null for other workloads, and absent
from parts written before the table moved here (it was then the run's ``units.parquet``).
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

PART_FOLDER = "results"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResultRow:
    """One configuration run's row of a part."""

    entry_id: str
    run_id: str
    result: str  # the summary entry, compact JSON
    timing: Mapping[str, float] | None = None  # the configuration's timing (kept out of the entry)
    reservoir: Mapping[str, Sequence[float]] | None = None  # metric → kept values, in order
    units: Mapping[str, Any] | None = None  # the per-unit table: {"seed_keys": [...], "metrics": {name: values}}

    @property
    def entry(self) -> dict[str, Any]:
        return json.loads(self.result)



def entry_text(entry: Mapping[str, Any]) -> str:
    """A summary entry as a part stores it (compact JSON; non-JSON values as text)."""
    return json.dumps(entry, separators=(",", ":"), default=str)


def part_name(first_run_id: str) -> str:
    """The artifact path of the part whose first row is run ``first_run_id`` (unique per batch,
    and the same when a batch is sent again after an outage)."""
    return f"{PART_FOLDER}/{first_run_id}.parquet"


def compact_parquet_bytes(table: Any) -> bytes:
    """An Arrow table as parquet bytes with the smallest footer that reads back the same table
    (and, through pandas, the same frame): zstd, no column statistics (nothing filters on them),
    no stored Arrow or pandas schema (a copy of every column's type and name, ~300 bytes a
    column), dictionaries only for text. A wide table's footer is most of its size: the births
    grid's 24-row results table of 339 columns took 285 KB written with the defaults, 89 KB so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = [field.name for field in table.schema if pa.types.is_string(field.type) or pa.types.is_large_string(field.type)]
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", write_statistics=False, store_schema=False,
                   use_dictionary=text)
    return buffer.getvalue()


def part_bytes(rows: Sequence[ResultRow]) -> bytes:
    """The rows as one zstd-compressed parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    metrics = [None if r.reservoir is None else list(r.reservoir) for r in rows]
    values = [None if r.reservoir is None else [np.asarray(v, np.float64) for v in r.reservoir.values()]
              for r in rows]
    columns = {
        "entry_id": pa.array([r.entry_id for r in rows], pa.string()),
        "run_id": pa.array([r.run_id for r in rows], pa.string()),
        "result": pa.array([r.result for r in rows], pa.string()),
        "timing": pa.array([None if r.timing is None else json.dumps(dict(r.timing)) for r in rows], pa.string()),
        "reservoir_metrics": pa.array(metrics, pa.list_(pa.string())),
        "reservoir_values": pa.array(values, pa.list_(pa.list_(pa.float64()))),
    }
    if any(r.units is not None for r in rows):
        columns |= {
            "unit_seed_keys": pa.array([None if r.units is None else list(r.units["seed_keys"]) for r in rows],
                                       pa.list_(pa.string())),
            "unit_metrics": pa.array([None if r.units is None else list(r.units["metrics"]) for r in rows],
                                     pa.list_(pa.string())),
            "unit_values": pa.array([None if r.units is None else
                                     [np.asarray(v, np.float64) for v in r.units["metrics"].values()] for r in rows],
                                    pa.list_(pa.list_(pa.float64()))),
        }
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer, compression="zstd", write_statistics=False, store_schema=False,
                   use_dictionary=["entry_id", "reservoir_metrics", "unit_metrics"])
    return buffer.getvalue()


UNIT_COLUMNS = ("unit_seed_keys", "unit_metrics", "unit_values")


def rows_of(data: bytes, *, reservoirs: bool = True, units: bool = False) -> list[ResultRow]:
    """The rows of a part's bytes (without their reservoirs unless ``reservoirs``, without their
    per-unit tables unless ``units``)."""
    import pyarrow.parquet as pq

    columns = ["entry_id", "run_id", "result", "timing"]
    extra = ["reservoir_metrics", "reservoir_values"] if reservoirs else []
    source = pq.ParquetFile(io.BytesIO(data))
    with_units = units and all(c in source.schema_arrow.names for c in UNIT_COLUMNS)
    table = source.read(columns=columns + extra + (list(UNIT_COLUMNS) if with_units else []))
    ids, run_ids, results, timings = (table.column(c).to_pylist() for c in columns)
    timings = [None if t is None else json.loads(t) for t in timings]
    count = len(ids)
    names, values = ((table.column(c).to_pylist() for c in extra) if reservoirs else ([None] * count, [None] * count))
    unit_tables: list[dict[str, Any] | None] = [None] * count
    if with_units:
        seed_keys, unit_metrics, unit_values = (table.column(c).to_pylist() for c in UNIT_COLUMNS)
        unit_tables = [None if k is None else {"seed_keys": k, "metrics": dict(zip(m, v))}
                       for k, m, v in zip(seed_keys, unit_metrics, unit_values)]
    return [ResultRow(entry_id=e, run_id=r, result=t, timing=s, reservoir=None if m is None else dict(zip(m, v)),
                      units=u)
            for e, r, t, s, m, v, u in zip(ids, run_ids, results, timings, names, values, unit_tables)]


def read_results(tracker: Any, parent_run_id: str, *, reservoirs: bool = False, units: bool = False,
                 finished: Iterable[str] | None = None) -> dict[str, ResultRow]:
    """The result rows of a parent run's parts, by run id; with ``finished``, only the rows of
    those run ids (the finished configuration runs: a part written by a driver that died before
    finishing its runs holds others)."""
    keep = None if finished is None else set(finished)
    rows: dict[str, ResultRow] = {}
    for path in sorted(tracker.list_artifacts(parent_run_id, PART_FOLDER)):
        if not path.endswith(".parquet"):
            continue
        data = tracker.read_bytes(parent_run_id, path)
        if data is None:
            continue
        for row in rows_of(data, reservoirs=reservoirs, units=units):
            if keep is None or row.run_id in keep:
                rows[row.run_id] = row
    return rows
