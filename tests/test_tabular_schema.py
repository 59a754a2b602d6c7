"""The raw schema: declarations from the spec and validation into a typed frame."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.tabular.schema import RawColumn, RawSchema
from privlab.platform.core.errors import SchemaError, SpecError

SPEC = {
    "age": {"type": "integer", "lower": 12, "upper": 60},
    "weight": {"type": "float", "lower": 0.2, "upper": 8.2},
    "female": {"type": "boolean"},
    "group": {"type": "categorical", "categories": ["a", "b", "c"]},
    "born": {"type": "date", "format": "%Y-%m-%d", "lower": "2019-01-01", "upper": "2019-12-31"},
}


@pytest.fixture
def schema() -> RawSchema:
    return RawSchema.from_spec(SPEC, where="schema")


def good_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "born": ["2019-01-15", "2019-12-31", "2019-06-01"],
            "age": [12, 60, 33],
            "weight": [0.2, 3.5, 8.2],
            "female": [True, False, True],
            "group": ["a", "c", "b"],
            "extra": [1, 2, 3],
        },
        index=[10, 11, 12],
    )


def test_validate_returns_a_typed_frame_in_schema_order(schema: RawSchema) -> None:
    typed = schema.validate(good_frame())
    assert list(typed.columns) == ["age", "weight", "female", "group", "born"]
    assert list(typed.index) == [0, 1, 2]
    assert typed["age"].dtype == np.int64
    assert typed["weight"].dtype == np.float64
    assert typed["female"].dtype == bool
    assert isinstance(typed["group"].dtype, pd.CategoricalDtype)
    assert list(typed["group"].cat.categories) == ["a", "b", "c"]
    assert pd.api.types.is_datetime64_any_dtype(typed["born"])
    assert typed["born"].dt.month.tolist() == [1, 12, 6]
    assert typed["age"].tolist() == [12, 60, 33]


def test_alternative_boolean_and_integer_encodings_are_accepted(schema: RawSchema) -> None:
    frame = good_frame()
    frame["female"] = ["True", "false", "TRUE"]
    frame["age"] = [12.0, 60.0, 33.0]
    typed = schema.validate(frame)
    assert typed["female"].tolist() == [True, False, True]
    assert typed["age"].dtype == np.int64
    frame["female"] = [1, 0, 1]
    assert schema.validate(frame)["female"].tolist() == [True, False, True]


def test_already_typed_dates_are_accepted(schema: RawSchema) -> None:
    frame = good_frame()
    frame["born"] = pd.to_datetime(frame["born"])
    assert schema.validate(frame)["born"].dt.day.tolist() == [15, 31, 1]


def test_the_schema_lists_its_columns(schema: RawSchema) -> None:
    assert schema.names == ("age", "weight", "female", "group", "born")
    assert "age" in schema and "nope" not in schema
    assert schema["born"].type == "date"
    with pytest.raises(SchemaError, match="unknown column 'nope'"):
        schema["nope"]


@pytest.mark.parametrize(
    ("column", "values", "pattern"),
    [
        ("age", [12, None, 33], r"column 'age' has 1 missing/NaN value\(s\) \(first at row 1\)"),
        ("age", [12, 61, 70], r"column 'age' has 2 value\(s\) outside its public bounds \[12, 60\] \(first at row 1\)"),
        ("age", [12, 3.5, 33], r"column 'age' is declared integer but row 1 holds a fractional value"),
        ("age", ["12", "x", "13"], r"column 'age' is declared integer but holds"),
        ("weight", [0.2, 3.0, float("inf")], r"column 'weight' has 1 value\(s\) outside .* \(first at row 2\)"),
        ("group", ["a", "z", "b"], r"column 'group' has 1 value\(s\) outside its declared categories \(first at row 1\)"),
        ("female", ["True", "yes", "False"], r"boolean column 'female' has 1 value\(s\) .* \(first at row 1\)"),
        ("female", [1, 2, 0], r"boolean column 'female' holds 1 integer\(s\) other than 0/1 \(first at row 1\)"),
        ("female", [0.0, 1.0, 0.5], r"boolean column 'female' holds float64 values"),
        ("born", ["2019-01-15", "15/01/2019", "2019-02-30"],
         r"date column 'born' has 2 value\(s\) that do not parse with the format '%Y-%m-%d' \(first at row 1\)"),
        ("born", ["2019-01-15", "2018-12-31", "2020-01-01"],
         r"date column 'born' has 2 value\(s\) outside its public bounds .* \(first at row 1\)"),
        ("born", [20190115, 20190116, 20190117], r"date column 'born' holds int64 values"),
        ("born", ["2019-01-15", 5, "2019-01-16"], r"date column 'born' has 1 non-text value\(s\) \(first at row 1\)"),
    ],
)
def test_bad_values_name_the_column_and_the_first_row(
    schema: RawSchema, column: str, values: list, pattern: str
) -> None:
    frame = good_frame()
    frame[column] = values
    with pytest.raises(SchemaError, match=pattern):
        schema.validate(frame, source="births.csv")


def test_messages_never_echo_the_offending_value(schema: RawSchema) -> None:
    frame = good_frame()
    frame["born"] = ["2019-01-15", "secret-4711", "2019-01-16"]
    with pytest.raises(SchemaError) as info:
        schema.validate(frame)
    assert "secret" not in str(info.value) and "4711" not in str(info.value)


def test_missing_columns_and_empty_data_are_errors(schema: RawSchema) -> None:
    with pytest.raises(SchemaError, match=r"births.csv: missing column\(s\) 'female', 'born'"):
        schema.validate(good_frame().drop(columns=["female", "born"]), source="births.csv")
    with pytest.raises(SchemaError, match="the dataset is empty"):
        schema.validate(good_frame().iloc[:0])
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        schema.validate(good_frame().to_dict())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ({"x": {"type": "text"}}, r"schema.x.type \('text'\) must be one of"),
        ({"x": {"type": "integer", "lower": 0, "upper": 5, "lowr": 1}}, r"schema.x: unknown key\(s\) 'lowr'"),
        ({"x": {"type": "boolean", "lower": 0}}, r"schema.x: unknown key\(s\) 'lower' for a boolean column"),
        ({"x": {"type": "integer", "lower": 5, "upper": 5}}, r"lower \(5\) must be < upper \(5\)"),
        ({"x": {"type": "integer", "upper": 5}}, r"lower \(None\) must be a finite number"),
        ({"x": {"type": "integer", "lower": 0.5, "upper": 5}}, r"bounds \(0.5, 5\) must be integers"),
        ({"x": {"type": "categorical"}}, "categorical columns need a non-empty 'categories' list"),
        ({"x": {"type": "categorical", "categories": ["a", "a"]}}, "must be distinct"),
        ({"x": {"type": "categorical", "categories": "ab"}}, r"schema.x.categories \('ab'\) must be a list"),
        ({"x": {"type": "date", "lower": "2019-01-01", "upper": "2019-12-31"}}, r"format \(None\) must be a strftime"),
        ({"x": {"type": "date", "format": "%Y-%m-%d", "lower": "2019-13-01", "upper": "2019-12-31"}},
         r"lower \('2019-13-01'\) must be a date written as '%Y-%m-%d'"),
        ({"x": {"type": "date", "format": "%Y-%m-%d", "lower": "2019-12-31", "upper": "2019-01-01"}},
         "must be <= upper"),
        ({"x": 3}, r"schema.x must be a table"),
        ({}, "must be a non-empty table"),
    ],
)
def test_bad_declarations_are_spec_errors(spec: dict, pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        RawSchema.from_spec(spec, where="schema")


def test_toml_dates_are_accepted_as_bounds() -> None:
    column = RawColumn(name="d", type="date", format="%d/%m/%Y", lower=dt.date(2014, 1, 1), upper="31/12/2014")
    lower, upper = column.date_bounds
    assert (lower.year, upper.month, upper.day) == (2014, 12, 31)


def test_repeated_column_names_are_rejected() -> None:
    column = RawColumn(name="a", type="boolean")
    with pytest.raises(SpecError, match="repeated: a"):
        RawSchema(columns=(column, column))
