"""The index of a run's configuration runs: what ``privlab compare`` reads in one artifact.

Reading every configuration's child run back through MLflow's search takes seconds per
thousand runs (a page of 1,000 runs with their params, metrics and tags), so a run of 10⁴
configurations took minutes to compare. A finished run therefore also writes
``configurations.parquet`` on its parent run: one row per configuration run with its id, study,
workload, run id, and the params and metrics exactly as they were logged on that run (params as
the logged text in one JSON column, each metric a float64 column). ``compare`` reads it for a
complete run; a run still going or interrupted has no index yet, and its child runs are put in
the same table (:func:`index_table`), so both give the same comparison.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from privlab.platform.tracking.run_tags import RunTags
from privlab.platform.tracking.tracker import Tracker, param_texts

INDEX_PATH = "configurations.parquet"
# A configuration run's summary entry, every statistic of every metric included (its MLflow
# metrics may hold only the summary statistics: [tracking] run_statistics).
RESULT_PATH = "result.json"
#: Summary metrics a configuration run logs under another name in MLflow: its ledger's ε is
#: ``eps_configuration``, as the parent's largest is ``eps_max_configuration``.
MLFLOW_METRIC_NAMES = {"eps_total": "eps_configuration"}
SUMMARY_METRIC_NAMES = {logged: name for name, logged in MLFLOW_METRIC_NAMES.items()}

ID_FIELDS = ("config_id", "study", "workload", "run_id")
METRIC_PREFIX = "metric."  # a metric's column; null where the run did not log it (NaN is a logged NaN)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndexRow:
    """One configuration run as logged: its tags' ids, run id, params (text) and metrics."""

    config_id: str
    study: str
    workload: str
    run_id: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]

    @classmethod
    def of_run(cls, run: Any, entry: Mapping[str, Any] | None, timing: Mapping[str, float] | None = None) -> IndexRow:
        """The row of a configuration child run read back from MLflow: its logged metrics,
        completed by the metrics of its summary ``entry`` (from the run's result part, or its
        ``result.json``), which holds the statistics the run did not log as MLflow metrics, and
        by its ``timing`` (``timing_*``), kept beside the entry."""
        tags = RunTags.of(run)
        logged = {SUMMARY_METRIC_NAMES.get(k, k): v for k, v in run.data.metrics.items()}
        metrics = {k: float(v) for k, v in (entry or {}).get("metrics", {}).items()} | logged
        metrics |= {f"timing_{k}": float(v) for k, v in (timing or {}).items()}
        params = dict(run.data.params) if entry is None else run_params_of(entry)
        return cls(config_id=tags.config_id or "", study=tags.study or "", workload=tags.workload or "",
                   run_id=run.info.run_id, params=params, metrics=metrics)

    @classmethod
    def read(cls, tracker: Tracker, run: Any) -> IndexRow:
        """:meth:`of_run` with the run's ``result.json`` read from the store."""
        text = tracker.read_text(run.info.run_id, RESULT_PATH)
        return cls.of_run(run, json.loads(text) if text else None)


def run_params_of(entry: Mapping[str, Any]) -> dict[str, str]:
    """The params of a configuration's index row, as text: its entry's parameters, its workload,
    study and units (:func:`~privlab.platform.tracking.tracker.param_texts`)."""
    return param_texts(dict(entry["params"]) | {"workload": entry["workload"], "study": entry["study"],
                                                "units": entry["units"]})


def index_table(rows: Iterable[IndexRow]) -> Any:
    """The rows as an Arrow table: the ids, ``params`` (JSON text of the logged params) and one
    float64 column per metric, ``metric.NAME``, null where a run lacks that metric."""
    import pyarrow as pa

    rows = list(rows)
    names = list(dict.fromkeys(name for r in rows for name in r.metrics))
    columns: dict[str, Any] = {field: pa.array([getattr(r, field) for r in rows], pa.string()) for field in ID_FIELDS}
    columns["params"] = pa.array([json.dumps(dict(r.params)) for r in rows], pa.string())
    for name in names:
        columns[METRIC_PREFIX + name] = pa.array([_float(r.metrics.get(name)) for r in rows], pa.float64())
    return pa.table(columns)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def index_bytes(rows: Iterable[IndexRow]) -> bytes:
    """The index as parquet bytes (see :func:`index_table`), footer kept small
    (:func:`~privlab.platform.tracking.result_parts.compact_parquet_bytes`)."""
    from privlab.platform.tracking.result_parts import compact_parquet_bytes

    return compact_parquet_bytes(index_table(rows))


def read_index_table(tracker: Tracker, parent_run_id: str) -> Any | None:
    """The index a finished run wrote, as an Arrow table (None when it has none: a run still
    going, interrupted, or logged before the index existed)."""
    import pyarrow.parquet as pq

    data = tracker.read_bytes(parent_run_id, INDEX_PATH)
    return None if data is None else pq.read_table(io.BytesIO(data))


def read_index(tracker: Tracker, parent_run_id: str) -> list[IndexRow] | None:
    """The index a finished run wrote, as rows (None when it has none)."""
    table = read_index_table(tracker, parent_run_id)
    if table is None:
        return None
    metrics = [c for c in table.column_names if c.startswith(METRIC_PREFIX)]
    values = {c: table.column(c).to_pylist() for c in metrics}
    ids = {field: table.column(field).to_pylist() for field in ID_FIELDS}
    params = table.column("params").to_pylist()
    return [IndexRow(**{field: ids[field][i] for field in ID_FIELDS}, params=json.loads(params[i]),
                     metrics={c.removeprefix(METRIC_PREFIX): values[c][i] for c in metrics if values[c][i] is not None})
            for i in range(table.num_rows)]
