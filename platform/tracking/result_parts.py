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
entry so that results do not vary run to run), and the reservoir as
``reservoir_metrics`` (list of names, in the sample's order) and ``reservoir_values`` (a list of
float64 values per metric); the reservoir lists are null when the run kept no artifacts.
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


def part_bytes(rows: Sequence[ResultRow]) -> bytes:
    """The rows as one zstd-compressed parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    metrics = [None if r.reservoir is None else list(r.reservoir) for r in rows]
    values = [None if r.reservoir is None else [np.asarray(v, np.float64) for v in r.reservoir.values()]
              for r in rows]
    table = pa.table({
        "entry_id": pa.array([r.entry_id for r in rows], pa.string()),
        "run_id": pa.array([r.run_id for r in rows], pa.string()),
        "result": pa.array([r.result for r in rows], pa.string()),
        "timing": pa.array([None if r.timing is None else json.dumps(dict(r.timing)) for r in rows], pa.string()),
        "reservoir_metrics": pa.array(metrics, pa.list_(pa.string())),
        "reservoir_values": pa.array(values, pa.list_(pa.list_(pa.float64()))),
    })
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", use_dictionary=["entry_id", "reservoir_metrics"])
    return buffer.getvalue()


def rows_of(data: bytes, *, reservoirs: bool = True) -> list[ResultRow]:
    """The rows of a part's bytes (without their reservoirs unless ``reservoirs``)."""
    import pyarrow.parquet as pq

    columns = ["entry_id", "run_id", "result", "timing"]
    table = pq.read_table(io.BytesIO(data), columns=columns + (["reservoir_metrics", "reservoir_values"]
                                                               if reservoirs else []))
    ids, run_ids, results, timings = (table.column(c).to_pylist() for c in columns)
    timings = [None if t is None else json.loads(t) for t in timings]
    if not reservoirs:
        return [ResultRow(entry_id=e, run_id=r, result=t, timing=s) for e, r, t, s in zip(ids, run_ids, results, timings)]
    names, values = table.column("reservoir_metrics").to_pylist(), table.column("reservoir_values").to_pylist()
    return [ResultRow(entry_id=e, run_id=r, result=t, timing=s, reservoir=None if m is None else dict(zip(m, v)))
            for e, r, t, s, m, v in zip(ids, run_ids, results, timings, names, values)]


def read_results(tracker: Any, parent_run_id: str, *, reservoirs: bool = False,
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
        for row in rows_of(data, reservoirs=reservoirs):
            if keep is None or row.run_id in keep:
                rows[row.run_id] = row
    return rows
