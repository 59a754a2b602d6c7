"""What data a run read, described for MLflow's dataset inputs (the runs view's Dataset column).

Each dataset a run reads on its driver (a study's ``[dataset]`` file, or the data a workload's
parameters name: :meth:`~privlab.platform.experiment.registry.Workload.data_key`) is described once: a name,
a digest, where it came from and its columns. A dataset read from files gets the SHA-256 of the
files' bytes (the digest shows its first 12 hex digits, MLflow keeps at most 36; the source keeps
each file's whole hash) and a ``local`` source naming the file; one a workload generates on the
driver (the quickstart's census-shaped table) gets the SHA-256 of its values and a ``code``
source naming the generator. Data drawn inside each trial (a ``[dataset] generator``) is not read
by the run as one table and is not described.

The schema is built from the frame's dtypes, not inferred from its values (MLflow's inference
scans every object column: 0.8 s for 160,000 rows), and the profile gives the number of rows.
The parent run gets every dataset the run read, each configuration run the one it read
(:meth:`~privlab.platform.tracking.tracker.Tracker.log_datasets`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

DIGEST_LENGTH = 12
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetDescription:
    """A dataset as MLflow's ``Dataset`` entity holds it (every field text, JSON where MLflow reads JSON)."""

    name: str
    digest: str
    source_type: str  # "local" (files) | "code" (generated on the driver)
    source: str  # JSON: {"uri": ..., "files": {path: sha256}} or {"tags": {"generator": ...}}
    schema: str  # JSON: {"mlflow_colspec": [{"type", "name", "required"}, ...]}
    profile: str  # JSON: {"num_rows", "num_elements"}

    def to_record(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> DatasetDescription:
        return cls(**record)


def describe_files(key: str, files: Sequence[str | Path], frame: pd.DataFrame) -> DatasetDescription:
    """A dataset read from ``files`` (its data key ``key``) as the frame the configurations got."""
    paths = [Path(f).resolve() for f in files]
    hashes = {str(p): file_sha256(p) for p in paths}
    combined = next(iter(hashes.values())) if len(hashes) == 1 else \
        hashlib.sha256("".join(f"{h}  {p}\n" for p, h in hashes.items()).encode()).hexdigest()
    uri = str(paths[0]) if len(paths) == 1 else str(_common_folder(paths))
    return DatasetDescription(name=_name(paths[0].stem if len(paths) == 1 else paths[0].parent.name or key),
                              digest=combined[:DIGEST_LENGTH], source_type="local",
                              source=json.dumps({"uri": uri, "files": hashes}), schema=_schema(frame),
                              profile=_profile(frame))


def describe_generated(key: str, frame: pd.DataFrame) -> DatasetDescription:
    """A dataset a workload generated on the driver (data key ``key``, no file)."""
    values = hashlib.sha256(json.dumps([str(c) for c in frame.columns]).encode())
    values.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return DatasetDescription(name=_name(key), digest=values.hexdigest()[:DIGEST_LENGTH], source_type="code",
                              source=json.dumps({"tags": {"generator": key}}), schema=_schema(frame),
                              profile=_profile(frame))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _common_folder(paths: Sequence[Path]) -> Path:
    return Path(os.path.commonpath([str(p.parent) for p in paths]))


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", text).strip("_")[:200] or "data"


def _mlflow_type(dtype: Any) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "long"
    if pd.api.types.is_float_dtype(dtype):
        return "double"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    return "string"  # categories, text, objects


def _schema(frame: pd.DataFrame) -> str:
    columns = [{"type": _mlflow_type(dtype), "name": str(name), "required": True}
               for name, dtype in frame.dtypes.items()]
    return json.dumps({"mlflow_colspec": columns})


def _profile(frame: pd.DataFrame) -> str:
    return json.dumps({"num_rows": int(frame.shape[0]), "num_elements": int(frame.size)})
