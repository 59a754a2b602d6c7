"""The raw schema of a release dataset: column types and public domains, and its validation.

A release flow starts from a raw table (one record per person) whose columns are declared in
the spec with a type and a *public* domain: bounds for numbers and dates, categories for
categorical columns. :meth:`RawSchema.validate` checks a frame against the declaration before
anything else touches it and returns a *typed* frame that the transformations and constraints
rely on:

========================  ==============================================================
type                      typed column
========================  ==============================================================
``integer``               ``int64`` in ``[lower, upper]``
``float``                 ``float64`` in ``[lower, upper]``
``boolean``               ``bool`` (accepted input: bool, 0/1, "true"/"false" any case)
``categorical``           ``category`` dtype whose categories are the declared ones
``date``                  ``datetime64`` parsed with the declared ``strftime`` ``format``
                          and inside ``[lower, upper]`` (given in the same format)
========================  ==============================================================

Integer, float and categorical columns reuse :class:`privlab.platform.experiment.datasets.ColumnSchema`
(declaration checks) and :class:`privlab.platform.experiment.datasets.Schema` (validation); this module
adds booleans and dates and the typed output.

Error messages name the column and the first offending row (0-based position in the frame)
and never echo the offending value: the frame is usually private data, and exception text ends
up in logs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from privlab.platform.core.columns import ColumnSchema, Schema
from privlab.platform.core.errors import SchemaError, SpecError

logger = logging.getLogger(__name__)

RAW_COLUMN_TYPES = ("integer", "float", "boolean", "categorical", "date")
NUMERIC_TYPES = ("integer", "float")
_DELEGATED_TYPES = ("integer", "float", "categorical")
_ALLOWED_KEYS: Mapping[str, frozenset[str]] = {
    "integer": frozenset({"type", "lower", "upper"}),
    "float": frozenset({"type", "lower", "upper"}),
    "boolean": frozenset({"type"}),
    "categorical": frozenset({"type", "categories"}),
    "date": frozenset({"type", "format", "lower", "upper"}),
}
_TRUE_STRINGS = frozenset({"true"})
_FALSE_STRINGS = frozenset({"false"})


def parse_date(value: Any, *, fmt: str, what: str) -> pd.Timestamp:
    """Parse a public date (a spec value or a constraint literal) with a ``strftime`` format.

    Args:
        value: A string in ``fmt``, or a ``datetime.date``/``datetime.datetime`` (TOML dates).
        fmt: The ``strftime`` format, e.g. ``"%Y-%m-%d"``.
        what: Where the value comes from, for the error message.

    Returns:
        The date as a ``pandas.Timestamp``.

    Raises:
        SpecError: The value is not a date in ``fmt``.
    """
    if isinstance(value, (dt.date, dt.datetime)) and not isinstance(value, bool):
        return pd.Timestamp(value)
    if not isinstance(value, str):
        raise SpecError(f"{what} ({value!r}) must be a date written as {fmt!r}")
    try:
        return pd.Timestamp(dt.datetime.strptime(value, fmt))
    except ValueError as error:
        raise SpecError(f"{what} ({value!r}) must be a date written as {fmt!r}") from error


@dataclasses.dataclass(frozen=True, kw_only=True)
class RawColumn:
    """One raw column: its type and public domain.

    Args:
        name: Column name in the raw data.
        type: One of ``integer``, ``float``, ``boolean``, ``categorical``, ``date``.
        lower: Public lower bound (numbers: a number; dates: a string in ``format`` or a date).
        upper: Public upper bound, inclusive, same kind as ``lower``.
        categories: The public categories of a categorical column, in code order.
        format: The ``strftime`` format of a date column's values (e.g. ``"%Y-%m-%d"``).

    Raises:
        SpecError: A type-inappropriate or missing domain declaration.
    """

    name: str
    type: str
    lower: Any = None
    upper: Any = None
    categories: tuple[Any, ...] | None = None
    format: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"column name ({self.name!r}) must be a non-empty string")
        if self.type not in RAW_COLUMN_TYPES:
            raise SpecError(
                f"column {self.name!r}: type ({self.type!r}) must be one of {', '.join(RAW_COLUMN_TYPES)}"
            )
        if self.type in _DELEGATED_TYPES:
            if self.format is not None:
                raise SpecError(f"column {self.name!r}: format ({self.format!r}) must only be given for dates")
            self.as_column_schema()  # the shared declaration checks (bounds, categories)
            if self.type == "integer" and (self.lower != int(self.lower) or self.upper != int(self.upper)):
                raise SpecError(
                    f"column {self.name!r}: bounds ({self.lower!r}, {self.upper!r}) must be integers for an "
                    "integer column"
                )
            if self.type == "categorical" and len(set(self.categories or ())) != len(self.categories or ()):
                raise SpecError(f"column {self.name!r}: categories ({self.categories!r}) must be distinct")
            if self.type != "categorical" and self.categories is not None:
                raise SpecError(f"column {self.name!r}: categories must only be given for categorical columns")
            return
        if self.categories is not None:
            raise SpecError(f"column {self.name!r}: categories must only be given for categorical columns")
        if self.type == "boolean":
            for key in ("lower", "upper", "format"):
                if getattr(self, key) is not None:
                    raise SpecError(f"column {self.name!r}: a boolean column takes no {key}")
            return
        # date
        if not isinstance(self.format, str) or "%" not in self.format:
            raise SpecError(
                f"column {self.name!r}: format ({self.format!r}) must be a strftime format such as '%Y-%m-%d'"
            )
        lower = parse_date(self.lower, fmt=self.format, what=f"column {self.name!r}: lower")
        upper = parse_date(self.upper, fmt=self.format, what=f"column {self.name!r}: upper")
        if lower > upper:
            raise SpecError(f"column {self.name!r}: lower ({self.lower!r}) must be <= upper ({self.upper!r})")

    def as_column_schema(self) -> ColumnSchema:
        """The platform's :class:`ColumnSchema` for integer, float and categorical columns."""
        if self.type not in _DELEGATED_TYPES:
            raise SchemaError(f"column {self.name!r}: type {self.type!r} has no platform ColumnSchema")
        return ColumnSchema(
            name=self.name, type=self.type, lower=self.lower, upper=self.upper, categories=self.categories
        )

    @property
    def numeric(self) -> bool:
        return self.type in NUMERIC_TYPES

    @property
    def date_bounds(self) -> tuple[pd.Timestamp, pd.Timestamp]:
        """The public ``(lower, upper)`` of a date column as timestamps."""
        if self.type != "date" or self.format is None:
            raise SchemaError(f"column {self.name!r} is {self.type}, not a date")
        return (
            parse_date(self.lower, fmt=self.format, what=f"column {self.name!r}: lower"),
            parse_date(self.upper, fmt=self.format, what=f"column {self.name!r}: upper"),
        )


def _first_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class RawSchema:
    """The ordered raw columns of a dataset, with validation into a typed frame.

    Args:
        columns: The declared columns, in order (the typed frame uses this order).

    Raises:
        SpecError: No columns, or repeated names.
    """

    columns: tuple[RawColumn, ...]

    def __post_init__(self) -> None:
        if not self.columns:
            raise SpecError("a raw schema needs at least one column")
        names = [c.name for c in self.columns]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise SpecError(f"schema columns must be distinct; repeated: {', '.join(repeated)}")

    @classmethod
    def from_spec(cls, table: Mapping[str, Any], *, where: str) -> RawSchema:
        """Build a schema from ``[<where>.<column>]`` tables.

        Each table has ``type`` and the keys of that type: ``lower``/``upper`` (integer, float,
        date), ``categories`` (categorical), ``format`` (date); booleans take only ``type``.

        Raises:
            SpecError: Unknown or missing keys (naming ``where.<column>.<key>``), bad values.
        """
        if not isinstance(table, Mapping) or not table:
            raise SpecError(f"{where} must be a non-empty table of column declarations ([{where}.<column>])")
        columns = []
        for name, decl in table.items():
            if not isinstance(decl, Mapping):
                raise SpecError(f"{where}.{name} must be a table with 'type' and the column's public domain")
            kind = decl.get("type")
            if kind not in RAW_COLUMN_TYPES:
                raise SpecError(f"{where}.{name}.type ({kind!r}) must be one of {', '.join(RAW_COLUMN_TYPES)}")
            unknown = sorted(set(decl) - _ALLOWED_KEYS[kind])
            if unknown:
                raise SpecError(
                    f"{where}.{name}: unknown key(s) {', '.join(map(repr, unknown))} for a {kind} column; "
                    f"allowed keys: {', '.join(sorted(_ALLOWED_KEYS[kind]))}"
                )
            categories = decl.get("categories")
            if categories is not None and not isinstance(categories, list):
                raise SpecError(f"{where}.{name}.categories ({categories!r}) must be a list")
            try:
                columns.append(
                    RawColumn(
                        name=str(name),
                        type=kind,
                        lower=decl.get("lower"),
                        upper=decl.get("upper"),
                        categories=None if categories is None else tuple(categories),
                        format=decl.get("format"),
                    )
                )
            except SpecError as error:
                raise SpecError(f"{where}.{name}: {error}") from error
        return cls(columns=tuple(columns))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def __iter__(self) -> Iterator[RawColumn]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> RawColumn:
        for column in self.columns:
            if column.name == name:
                return column
        raise SchemaError(f"unknown column {name!r}; the schema has: {', '.join(self.names)}")

    def validate(self, frame: pd.DataFrame, *, source: str = "raw data") -> pd.DataFrame:
        """Check ``frame`` against the schema and return the typed frame.

        Columns not in the schema are dropped (data minimisation); the result has the schema's
        columns in schema order and a fresh ``RangeIndex``. Nothing is clipped or dropped
        silently: every problem raises.

        Args:
            frame: The raw table.
            source: What the frame is (a file name), used in error messages.

        Returns:
            The typed frame (see the module docstring for each type's dtype).

        Raises:
            TypeError: ``frame`` is not a DataFrame.
            SchemaError: Empty data, missing columns, NaN/missing values, values of the wrong
                kind, fractional integers, values outside the public bounds, undeclared
                categories, unparsable or out-of-range dates. The message names the column and
                the first offending row (0-based position).
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{source}: expected a pandas DataFrame, got {type(frame).__name__}")
        if len(frame) == 0:
            raise SchemaError(f"{source}: the dataset is empty", problem="empty")
        missing = [c.name for c in self.columns if c.name not in frame.columns]
        if missing:
            # The header line is shown to help (research data is public); a release never shows it
            # (mechanisms/release/firewall.py). A headerless file's "header" is its first record.
            raise SchemaError(
                f"{source}: missing column(s) {', '.join(map(repr, missing))}; the file's header line reads: "
                f"{', '.join(map(str, frame.columns))} (shown because research data is public; a release never "
                "shows it). If that is a record, the file has no header line: set header = false in the "
                "space's [reader] table",
                problem="missing_column", column=missing[0],
            )
        extra = [str(c) for c in frame.columns if c not in self.names]
        if extra:
            logger.debug("%s: dropping undeclared column(s) %s", source, ", ".join(extra))
        for column in self.columns:
            null = frame[column.name].isna().to_numpy()
            if null.any():
                raise SchemaError(
                    f"{source}: column {column.name!r} has {int(null.sum())} missing/NaN value(s) "
                    f"(first at row {_first_row(null)}); clean the data or drop those rows first",
                    column=column.name, problem="missing",
                )
        delegated = [c for c in self.columns if c.type in _DELEGATED_TYPES]
        if delegated:
            platform_schema = Schema(columns=tuple(c.as_column_schema() for c in delegated))
            platform_schema.validate(frame[[c.name for c in delegated]].reset_index(drop=True), source=source)
        typed = {column.name: self._typed(column, frame[column.name], source) for column in self.columns}
        return pd.DataFrame(typed, index=pd.RangeIndex(len(frame)))

    def _typed(self, column: RawColumn, values: pd.Series, source: str) -> Any:
        values = values.reset_index(drop=True)
        if column.type == "integer":
            return values.to_numpy(dtype=np.float64).astype(np.int64)
        if column.type == "float":
            return values.to_numpy(dtype=np.float64)
        if column.type == "categorical":
            return pd.Categorical(values.astype(object), categories=list(column.categories or ()))
        if column.type == "boolean":
            return _parse_boolean(column, values, source)
        return _parse_dates(column, values, source)


def _parse_boolean(column: RawColumn, values: pd.Series, source: str) -> np.ndarray:
    if pd.api.types.is_bool_dtype(values):
        return values.to_numpy(dtype=bool)
    if pd.api.types.is_integer_dtype(values):
        numbers = values.to_numpy(dtype=np.int64)
        bad = (numbers != 0) & (numbers != 1)
        if bad.any():
            raise SchemaError(
                f"{source}: boolean column {column.name!r} holds {int(bad.sum())} integer(s) other than 0/1 "
                f"(first at row {_first_row(bad)})",
                column=column.name, problem="boolean",
            )
        return numbers == 1
    if pd.api.types.is_float_dtype(values) or pd.api.types.is_datetime64_any_dtype(values):
        raise SchemaError(
            f"{source}: boolean column {column.name!r} holds {values.dtype} values; "
            "give True/False, 0/1 or 'true'/'false'",
            column=column.name, problem="boolean",
        )
    objects = values.astype(object).to_numpy()
    is_true = np.array([v is True or (isinstance(v, str) and v.strip().lower() in _TRUE_STRINGS) for v in objects])
    is_false = np.array(
        [v is False or (isinstance(v, str) and v.strip().lower() in _FALSE_STRINGS) for v in objects]
    )
    bad = ~(is_true | is_false)
    if bad.any():
        raise SchemaError(
            f"{source}: boolean column {column.name!r} has {int(bad.sum())} value(s) that are not "
            f"True/False (first at row {_first_row(bad)}); give True/False, 0/1 or 'true'/'false'",
            column=column.name, problem="boolean",
        )
    return is_true


def _parse_dates(column: RawColumn, values: pd.Series, source: str) -> pd.Series:
    fmt = column.format or ""
    if pd.api.types.is_datetime64_any_dtype(values):
        if getattr(values.dt, "tz", None) is not None:
            raise SchemaError(
                f"{source}: date column {column.name!r} must be timezone-naive",
                column=column.name, problem="kind",
            )
        parsed = values
    elif pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        raise SchemaError(
            f"{source}: date column {column.name!r} holds {values.dtype} values; "
            f"give strings in the format {column.format!r}",
            column=column.name, problem="kind",
        )
    else:
        as_text = values.astype(object)
        not_text = ~as_text.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
        if not_text.any():
            raise SchemaError(
                f"{source}: date column {column.name!r} has {int(not_text.sum())} non-text value(s) "
                f"(first at row {_first_row(not_text)}); give strings in the format {column.format!r}",
                column=column.name, problem="kind",
            )
        parsed = pd.to_datetime(as_text.astype(str), format=fmt, errors="coerce")
        bad = parsed.isna().to_numpy()
        if bad.any():
            raise SchemaError(
                f"{source}: date column {column.name!r} has {int(bad.sum())} value(s) that do not parse "
                f"with the format {column.format!r} (first at row {_first_row(bad)})",
                column=column.name, problem="date_format",
            )
    lower, upper = column.date_bounds
    outside = ((parsed < lower) | (parsed > upper)).to_numpy(dtype=bool)
    if outside.any():
        raise SchemaError(
            f"{source}: date column {column.name!r} has {int(outside.sum())} value(s) outside its public "
            f"bounds [{column.lower}, {column.upper}] (first at row {_first_row(outside)}); fix the data "
            "or widen the bounds in the spec",
            column=column.name, problem="bounds",
        )
    return parsed.reset_index(drop=True)
