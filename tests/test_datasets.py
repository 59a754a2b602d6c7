"""Tests of privlab.platform.experiment.datasets: schemas from the spec, file validation, error messages.

Every validation path is exercised with a parquet file (written with pyarrow) and a CSV file
in ``tmp_path``; messages must name the column and the first offending (0-based) row.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privlab.platform.core.columns import ColumnSchema, Schema
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.experiment.datasets import FileDataset, GeneratedDataset, dataset_from_spec
from privlab.platform.experiment.spec import load_spec

FORMATS = ("parquet", "csv")

COLUMNS: dict[str, dict[str, Any]] = {
    "age": {"type": "integer", "lower": 0, "upper": 120},
    "income": {"type": "float", "lower": 0.0, "upper": 10.0},
    "colour": {"type": "categorical", "categories": ["red", "green", "blue"]},
}


def good_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "notes": ["a", "b", "c", "d", "e"],  # undeclared: dropped on load
        "colour": ["red", "green", "red", "blue", "green"],
        "income": [1.5, 2.5, 0.0, 10.0, 3.25],
        "age": [23, 45, 0, 120, 31],
    })


def write_file(tmp_path: Path, frame: pd.DataFrame, fmt: str, stem: str = "data") -> Path:
    path = tmp_path / f"{stem}.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    else:
        frame.to_csv(path, index=False)
    return path


def file_dataset(path: Path, columns: dict[str, Any] | None = None) -> FileDataset:
    dataset = dataset_from_spec(
        {"path": path.name, "columns": COLUMNS if columns is None else columns},
        spec_dir=path.parent,
        where="[dataset]",
    )
    assert isinstance(dataset, FileDataset)
    return dataset


# --- a valid file ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_valid_file_loads_declared_columns_in_declared_order(tmp_path: Path, fmt: str) -> None:
    path = write_file(tmp_path, good_frame(), fmt)
    dataset = file_dataset(path)
    assert dataset.format == fmt
    assert dataset.path == path.resolve()
    loaded = dataset.load()
    assert list(loaded.columns) == ["age", "income", "colour"]
    assert loaded["age"].tolist() == [23, 45, 0, 120, 31]  # bounds are inclusive
    assert loaded["income"].tolist() == [1.5, 2.5, 0.0, 10.0, 3.25]
    assert loaded["colour"].tolist() == ["red", "green", "red", "blue", "green"]
    assert list(loaded.index) == [0, 1, 2, 3, 4]


def test_format_may_be_given_explicitly(tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    good_frame().to_csv(path, index=False)
    dataset = dataset_from_spec({"path": str(path), "format": "csv", "columns": COLUMNS}, spec_dir=Path("/"), where="[dataset]")
    assert isinstance(dataset, FileDataset) and dataset.path == path
    assert len(dataset.load()) == 5


# --- SchemaError paths -------------------------------------------------------------------------

# (column to replace, its new values, expected message after the file name)
BAD_DATA = {
    "NaN in a float column": (
        "income", [1.0, 2.0, 3.0, np.nan, np.nan],
        "column 'income' has 2 missing/NaN value(s) (first at row 3)",
    ),
    "missing value in an integer column": (
        "age", [1.0, np.nan, 3.0, 4.0, 5.0],
        "column 'age' has 1 missing/NaN value(s) (first at row 1)",
    ),
    "missing category": (
        "colour", ["red", None, "red", "blue", "red"],
        "column 'colour' has 1 missing/NaN value(s) (first at row 1)",
    ),
    "above the upper bound": (
        "income", [1.0, 2.0, 10.5, 3.0, 11.0],
        "column 'income' has 2 value(s) outside its public bounds [0.0, 10.0] (first at row 2)",
    ),
    "below the lower bound": (
        "age", [5, 6, 7, 8, -1],
        "column 'age' has 1 value(s) outside its public bounds [0, 120] (first at row 4)",
    ),
    "infinite value": (
        "income", [1.0, np.inf, 2.0, 3.0, 4.0],
        "column 'income' has 1 value(s) outside its public bounds [0.0, 10.0] (first at row 1)",
    ),
    "undeclared category": (
        "colour", ["red", "green", "purple", "blue", "Red"],
        "column 'colour' has 2 value(s) outside its declared categories (first at row 2)",
    ),
    "integer with a fraction": (
        "age", [20.0, 30.0, 40.0, 50.5, 60.0],
        "column 'age' is declared integer but row 3 holds a fractional value",
    ),
    "text in a numeric column": (
        "income", ["1.0", "2.0", "3.0", "4.0", "lots"],
        "column 'income' is declared float but holds str values (first non-numeric at row 4)",
    ),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("column, values, message", list(BAD_DATA.values()), ids=list(BAD_DATA))
def test_bad_data_raises_schema_error_naming_column_and_row(
    tmp_path: Path, fmt: str, column: str, values: list[Any], message: str
) -> None:
    frame = good_frame()
    frame[column] = values
    path = write_file(tmp_path, frame, fmt)
    dataset = file_dataset(path)  # parsing the spec succeeds: only loading reads the data
    with pytest.raises(SchemaError, match=re.escape(f"{path.resolve()}: {message}")):
        dataset.load()


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_column(tmp_path: Path, fmt: str) -> None:
    path = write_file(tmp_path, good_frame().drop(columns=["income", "age"]), fmt)
    with pytest.raises(SchemaError, match=re.escape("missing column(s) 'age', 'income'; the file has: notes, colour")):
        file_dataset(path).load()


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_data(tmp_path: Path, fmt: str) -> None:
    path = write_file(tmp_path, good_frame().iloc[:0], fmt)
    with pytest.raises(SchemaError, match=re.escape(f"{path.resolve()}: the dataset is empty")):
        file_dataset(path).load()


@pytest.mark.parametrize("fmt", FORMATS)
def test_file_removed_after_parsing(tmp_path: Path, fmt: str) -> None:
    path = write_file(tmp_path, good_frame(), fmt)
    dataset = file_dataset(path)
    path.unlink()
    with pytest.raises(SchemaError, match=re.escape(f"dataset file {str(path.resolve())!r} does not exist")):
        dataset.load()


def test_boolean_column_is_not_numeric() -> None:
    schema = Schema.from_spec({"flag": {"type": "integer", "lower": 0, "upper": 1}}, where="cols")
    with pytest.raises(SchemaError, match=re.escape("src: column 'flag' is declared integer but holds bool values")):
        schema.validate(pd.DataFrame({"flag": [True, False]}), source="src")


def test_schema_error_is_a_value_error() -> None:
    schema = Schema.from_spec({"x": {"type": "float", "lower": 0, "upper": 1}}, where="cols")
    with pytest.raises(ValueError, match="outside its public bounds"):
        schema.validate(pd.DataFrame({"x": [2.0]}), source="src")


def test_validation_does_not_clip_or_modify_the_frame() -> None:
    schema = Schema.from_spec({"x": {"type": "float", "lower": 0, "upper": 1}}, where="cols")
    frame = pd.DataFrame({"x": [0.25, 0.75], "y": [1, 2]}, index=[10, 20])
    out = schema.validate(frame, source="src")
    assert out["x"].tolist() == [0.25, 0.75] and list(out.index) == [0, 1]
    assert list(frame.columns) == ["x", "y"] and list(frame.index) == [10, 20]


# --- schemas: public bounds come from the spec -------------------------------------------------

SCHEMA_ERRORS = {
    "no lower bound": (
        {"x": {"type": "float", "upper": 1.0}},
        "dataset column 'x': lower (None) must be a finite number declared in the spec "
        "(public bounds are never read from data)",
    ),
    "no upper bound": ({"x": {"type": "integer", "lower": 0}}, "dataset column 'x': upper (None) must be a finite number"),
    "infinite bound": ({"x": {"type": "float", "lower": 0, "upper": float("inf")}}, "dataset column 'x': upper (inf) must be a finite number"),
    "string bound": ({"x": {"type": "float", "lower": "0", "upper": 1}}, "dataset column 'x': lower ('0') must be a finite number"),
    "boolean bound": ({"x": {"type": "float", "lower": False, "upper": 1}}, "dataset column 'x': lower (False) must be a finite number"),
    "empty range": ({"x": {"type": "float", "lower": 1.0, "upper": 1.0}}, "dataset column 'x': lower (1.0) must be < upper (1.0)"),
    "unknown type": (
        {"x": {"type": "double", "lower": 0, "upper": 1}},
        "dataset column 'x': type ('double') must be one of integer, float, categorical",
    ),
    "missing type": ({"x": {"lower": 0, "upper": 1}}, "dataset column 'x': type ('') must be one of integer, float, categorical"),
    "categories missing": (
        {"c": {"type": "categorical"}},
        "dataset column 'c': categorical columns need a non-empty 'categories' list (the public domain)",
    ),
    "categories empty": ({"c": {"type": "categorical", "categories": []}}, "dataset column 'c': categorical columns need a non-empty"),
    "unknown column key": (
        {"x": {"type": "float", "lower": 0, "upper": 1, "nullable": True}},
        "[dataset].columns.x: unknown key(s) 'nullable'; allowed keys: categories, lower, type, upper",
    ),
    "column not a table": ({"x": "float"}, "[dataset].columns.x must be a table with 'type' and bounds"),
    "no columns": ({}, "[dataset].columns must declare at least one column"),
    "columns not a table": (["x", "y"], "[dataset].columns must be a table of column declarations"),
}


@pytest.mark.parametrize("columns, message", list(SCHEMA_ERRORS.values()), ids=list(SCHEMA_ERRORS))
def test_schema_declaration_errors(tmp_path: Path, columns: Any, message: str) -> None:
    path = write_file(tmp_path, good_frame(), "csv")
    with pytest.raises(SpecError, match=re.escape(message)):
        file_dataset(path, columns)


def test_column_schema_validates_directly() -> None:
    column = ColumnSchema(name="x", type="integer", lower=-3, upper=3)
    assert (column.lower, column.upper, column.categories) == (-3, 3, None)
    with pytest.raises(SpecError, match=re.escape("dataset column 'x': lower (3) must be < upper (-3)")):
        ColumnSchema(name="x", type="integer", lower=3, upper=-3)


# --- [dataset] tables --------------------------------------------------------------------------


def test_missing_file_is_a_spec_error_at_parse_time(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=re.escape(f"[dataset].path: file {str(tmp_path / 'absent.csv')!r} does not exist")):
        dataset_from_spec({"path": "absent.csv", "columns": COLUMNS}, spec_dir=tmp_path, where="[dataset]")


def test_missing_file_fails_load_spec_before_anything_runs(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "file"\nworkload = "column_mean"\n'
        '[params]\ncolumn = "x"\nepsilon = 1.0\nlower = 0.0\nupper = 1.0\nn = 3\n'
        '[dataset]\npath = "sub/missing.parquet"\n'
        '[dataset.columns.x]\ntype = "float"\nlower = 0.0\nupper = 1.0\n'
    )
    with pytest.raises(SpecError, match=re.escape(f"file {str(tmp_path / 'sub' / 'missing.parquet')!r} does not exist")):
        load_spec(spec)


def test_file_dataset_needs_columns(tmp_path: Path) -> None:
    path = write_file(tmp_path, good_frame(), "parquet")
    with pytest.raises(SpecError, match=re.escape("[dataset]: a file dataset needs [dataset.columns.<name>] tables")):
        dataset_from_spec({"path": str(path)}, spec_dir=tmp_path, where="[dataset]")


def test_file_dataset_unknown_key(tmp_path: Path) -> None:
    path = write_file(tmp_path, good_frame(), "parquet")
    with pytest.raises(
        SpecError, match=re.escape("[dataset]: unknown key(s) 'sep'; allowed keys for a file dataset: columns, format, path")
    ):
        dataset_from_spec({"path": str(path), "columns": COLUMNS, "sep": ";"}, spec_dir=tmp_path, where="[dataset]")


def test_unknown_format(tmp_path: Path) -> None:
    path = write_file(tmp_path, good_frame(), "csv")
    with pytest.raises(SpecError, match=re.escape("[dataset].format ('json') must be one of parquet, csv")):
        dataset_from_spec({"path": str(path), "format": "json", "columns": COLUMNS}, spec_dir=tmp_path, where="[dataset]")


def test_generated_dataset_table() -> None:
    dataset = dataset_from_spec({"generator": "g", "params": {"n": 5}}, spec_dir=Path("."), where="[dataset]")
    assert dataset == GeneratedDataset(generator="g", params={"n": 5})
    with pytest.raises(SpecError, match=re.escape("[dataset].params must be a table")):
        dataset_from_spec({"generator": "g", "params": 5}, spec_dir=Path("."), where="[dataset]")
