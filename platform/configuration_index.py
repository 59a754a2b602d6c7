"""The index of a run's configuration runs: what ``privlab compare`` reads in one artifact.

Reading every configuration's child run back through MLflow's search takes seconds per
thousand runs (a page of 1,000 runs with their params, metrics and tags), so a run of 10⁴
configurations took tens of seconds to compare. A finished run therefore also writes
``configurations.parquet`` on its parent run: one row per configuration run with its id, study,
workload, run id, and the params and metrics exactly as they were logged on that run (params as
the logged text, metrics as the logged floats, both as JSON). ``compare`` reads it for a
complete run and builds the same rows as from the child runs; a run still going or interrupted
has no index yet and is read from its child runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from privlab.platform.reports import parquet_bytes, parquet_frame
from privlab.platform.tracking import RunTags, Tracker

INDEX_PATH = "configurations.parquet"
_COLUMNS = ["config_id", "study", "workload", "run_id", "params", "metrics"]


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
    def of_run(cls, run: Any) -> IndexRow:
        """The row of a configuration child run read back from MLflow."""
        tags = RunTags.of(run)
        return cls(config_id=tags.config_id or "", study=tags.study or "", workload=tags.workload or "",
                   run_id=run.info.run_id, params=dict(run.data.params), metrics=dict(run.data.metrics))


def index_bytes(rows: Iterable[IndexRow]) -> bytes:
    """The index as parquet bytes (params and metrics as JSON text: exact, any keys)."""
    records = [{"config_id": r.config_id, "study": r.study, "workload": r.workload, "run_id": r.run_id,
                "params": json.dumps(dict(r.params)), "metrics": json.dumps({k: float(v) for k, v in r.metrics.items()})}
               for r in rows]
    return parquet_bytes(pd.DataFrame(records, columns=_COLUMNS))


def read_index(tracker: Tracker, parent_run_id: str) -> list[IndexRow] | None:
    """The index a finished run wrote (None when it has none: a run still going, interrupted,
    or logged before the index existed)."""
    frame = parquet_frame(tracker.read_bytes(parent_run_id, INDEX_PATH))
    if frame is None:
        return None
    return [IndexRow(config_id=c, study=s, workload=w, run_id=r, params=json.loads(p), metrics=json.loads(m))
            for c, s, w, r, p, m in zip(*(frame[column].tolist() for column in _COLUMNS), strict=True)]
