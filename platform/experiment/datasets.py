"""Datasets: a declared schema with public bounds (:mod:`privlab.platform.core.columns`), loaded from
parquet/CSV or generated.

Bounds and categories always come from the spec (public knowledge), never from the data: a
value outside its declared bounds is an error that names the column, not something to clip
silently. Loading validates everything before any work starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from privlab.platform.core.columns import Schema
from privlab.platform.core.csv_fields import check_field_counts
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.validation import check_path_text, closest, shown

FILE_FORMATS = ("parquet", "csv")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FileDataset:
    """A dataset read once on the driver from a parquet or CSV file and validated."""

    path: Path
    format: str
    schema: Schema

    def load(self) -> pd.DataFrame:
        if not self.path.is_file():
            raise SchemaError(
                f"dataset file {str(self.path)!r} does not exist; check [dataset] path "
                "(relative paths in the spec file are resolved against the spec's folder, those given with --set "
                "against the working directory)"
            )
        if self.format == "parquet":
            frame = pq.read_table(self.path).to_pandas()
        else:
            check_field_counts(self.path, what=f"dataset file {str(self.path)!r}")
            frame = pd.read_csv(self.path)
        return self.schema.validate(frame, source=str(self.path))


@dataclasses.dataclass(frozen=True, kw_only=True)
class GeneratedDataset:
    """A dataset drawn by a registered generator from each trial's own random stream."""

    generator: str
    params: Mapping[str, Any]


def dataset_from_spec(table: Mapping[str, Any], *, spec_dir: Path, where: str) -> FileDataset | GeneratedDataset:
    """Parse a ``[dataset]`` table (file with schema, or generator with params)."""
    if "path" in table and "generator" in table:
        raise SpecError(f"{where}: give either 'path' (a file) or 'generator', not both")
    if "generator" in table:
        allowed = {"generator", "params"}
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise SpecError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys for a "
                f"generated dataset: {', '.join(sorted(allowed))}{closest(unknown, allowed)}"
            )
        params = table.get("params", {})
        if not isinstance(params, Mapping):
            raise SpecError(f"{where}.params must be a table")
        return GeneratedDataset(generator=str(table["generator"]), params=dict(params))
    if "path" in table:
        allowed = {"path", "format", "columns"}
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise SpecError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys for a "
                f"file dataset: {', '.join(sorted(allowed))}{closest(unknown, allowed)}"
            )
        path = Path(check_path_text(str(table["path"]), f"{where}.path"))
        if not path.is_absolute():
            path = (spec_dir / path).resolve()
        fmt = table.get("format", path.suffix.lstrip(".").lower())
        if fmt not in FILE_FORMATS:
            raise SpecError(f"{where}.format ({shown(fmt)}) must be one of {', '.join(FILE_FORMATS)}")
        if not path.is_file():
            raise SpecError(
                f"{where}.path: file {str(path)!r} does not exist (relative paths are resolved against the "
                "spec's folder when the spec file writes them, against the working directory when --set gives them)"
            )
        if "columns" not in table:
            raise SpecError(
                f"{where}: a file dataset needs [dataset.columns.<name>] tables declaring each "
                "column's type and public bounds"
            )
        return FileDataset(path=path, format=fmt, schema=Schema.from_spec(table["columns"], where=f"{where}.columns"))
    raise SpecError(f"{where} needs either 'path' (a file with columns) or 'generator'")
