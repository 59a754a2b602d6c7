"""Reading a raw table as the space describes its file: header, delimiter, missing-value markers.

A space's optional ``[reader]`` table says how its data files are written, so that a file as
published (a headerless UCI file with ``", "`` separators, ``"?"`` for missing and a trailing
dot on every label of the test split) needs no pre-processing script::

    [reader]
    header = false                  # no header line: columns are the schema's, in schema order,
    columns = ["age", "fnlwgt", …]   #   or, when given, these names (the file's fields, in order;
                                    #   columns the schema does not declare are ignored)
    delimiter = ","                 # one character
    na_values = ["?"]               # strings that mean "missing" (besides pandas' defaults)
    strip_whitespace = true         # " Private" -> "Private" in every text field
    strip_trailing_dot = true       # ">50K." -> ">50K" in every text field
    skip_rows = 0                   # lines to skip before the header or the first record

Parquet files carry their own types and column names; the text clean-ups and ``na_values``
apply to their text columns too. A text file's records must all have as many fields as its header
(or its columns): a ragged record is a :class:`~privlab.platform.core.errors.SchemaError`, not a record
silently truncated or padded with missing values. After the clean-ups, text columns the schema declares as
integer or float are converted to numbers; one that does not convert is a
:class:`~privlab.platform.core.errors.SchemaError` naming the column (the offending values are not
repeated: the file may be private).

Privacy:
    Reading is a per-record map fixed by the spec before any data is seen; it neither reads
    statistics of the data nor changes the neighbouring relation.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from privlab.mechanisms.tabular.schema import RawSchema
from privlab.platform.core.csv_fields import check_field_counts
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.validation import BOOLEAN, ConstrainedParams, Interval, Unconstrained

__all__ = ["ReaderOptions", "read_raw_table"]

_KEYS = ("header", "delimiter", "na_values", "strip_whitespace", "strip_trailing_dot", "skip_rows", "columns")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReaderOptions(ConstrainedParams):
    """How a space's data files are written (module docstring); the defaults read a plain CSV."""

    header: bool = True
    columns: tuple[str, ...] | None = None
    delimiter: str = ","
    na_values: tuple[str, ...] = ()
    strip_whitespace: bool = False
    strip_trailing_dot: bool = False
    skip_rows: int = 0

    _parameter_constraints: ClassVar = {
        "header": [BOOLEAN], "strip_whitespace": [BOOLEAN], "strip_trailing_dot": [BOOLEAN],
        "delimiter": [Unconstrained()], "na_values": [Unconstrained()], "columns": [Unconstrained()],
        "skip_rows": [Interval(numbers.Integral, 0, None, closed="left")]}
    _type_error: ClassVar = SpecError  # a space's [reader] table: every mistake is the spec's

    def _message_prefix(self) -> str:
        return "reader."

    def _check_together(self) -> None:
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1 or self.delimiter in "\"\n\r":
            raise SpecError(f"reader.delimiter ({self.delimiter!r}) must be one character (not a quote or newline)")
        if not isinstance(self.na_values, tuple) or not all(isinstance(v, str) for v in self.na_values):
            raise SpecError(f"reader.na_values ({self.na_values!r}) must be a list of strings")
        if self.columns is not None:
            if self.header:
                raise SpecError("reader.columns names the fields of a headerless file; set header = false")
            if not isinstance(self.columns, tuple) or not self.columns or \
                    not all(isinstance(c, str) and c for c in self.columns):
                raise SpecError(f"reader.columns ({self.columns!r}) must be a non-empty list of column names")
            if len(set(self.columns)) != len(self.columns):
                raise SpecError(f"reader.columns ({list(self.columns)!r}) must not repeat a name")

    @classmethod
    def from_spec(cls, table: object, *, where: str = "reader") -> ReaderOptions:
        """Build from a space's ``[reader]`` table.

        Raises:
            SpecError: not a table, an unknown key (the allowed ones are listed) or a bad value.
        """
        if not isinstance(table, Mapping):
            raise SpecError(f"{where} must be a table with keys among {', '.join(_KEYS)}")
        unknown = sorted(set(table) - set(_KEYS), key=str)
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: {', '.join(_KEYS)}")
        values: dict[str, Any] = dict(table)
        for key in ("na_values", "columns"):
            if isinstance(values.get(key), list):
                values[key] = tuple(values[key])
        return cls(**values)


def _clean_text(values: pd.Series, options: ReaderOptions) -> pd.Series:
    text = values.astype("string")
    if options.strip_whitespace:
        text = text.str.strip()
    if options.strip_trailing_dot:
        text = text.str.removesuffix(".")
    if options.na_values:
        text = text.mask(text.isin(options.na_values))
    return text.astype(object).where(text.notna(), None)


def read_raw_table(path: str | Path, *, schema: RawSchema, options: ReaderOptions, what: str) -> pd.DataFrame:
    """Read a CSV (optionally gzipped) or parquet file as ``options`` describe it.

    Args:
        path: The file (``.csv``, ``.csv.gz``, ``.data``, ``.test``, ``.txt`` or ``.parquet``).
        schema: The raw schema: column names for a headerless file, types for the conversion.
        options: The space's reader options.
        what: What the file is, for messages (e.g. ``"private data 'x.csv'"``).

    Returns:
        The raw frame (not yet validated against the schema).

    Raises:
        SpecError: the file does not exist or has an unknown suffix.
        SchemaError: a text file with a record of more or fewer fields than its header (or
            than a headerless file's columns; :mod:`privlab.platform.core.csv_fields`), or a numeric
            schema column whose text does not convert to numbers.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{what} does not exist")
    if path.suffix == ".parquet":
        raw = pd.read_parquet(path)
    elif path.name.endswith((".csv", ".csv.gz", ".data", ".test", ".txt")):
        names = None if options.header else list(options.columns or schema.names)
        if options.columns is not None:
            undeclared = [c for c in schema.names if c not in options.columns]
            if undeclared:
                raise SpecError(f"reader.columns must name every schema column; missing: {', '.join(undeclared)}")
        check_field_counts(path, what=what, delimiter=options.delimiter, header=options.header,
                           n_columns=None if names is None else len(names), skip_rows=options.skip_rows)
        raw = pd.read_csv(path, sep=options.delimiter, header=0 if options.header else None, names=names,
                          index_col=False, skiprows=options.skip_rows, na_values=list(options.na_values),
                          skipinitialspace=options.strip_whitespace)
    else:
        raise SpecError(f"{what} must be .csv, .csv.gz, .data, .test, .txt or .parquet")
    declared = {column.name: column for column in schema.columns}
    for name in raw.columns:
        if raw[name].dtype != object and not pd.api.types.is_string_dtype(raw[name].dtype):
            continue
        raw[name] = _clean_text(raw[name], options)
        column = declared.get(name)
        if column is not None and column.type in ("integer", "float"):
            try:
                raw[name] = pd.to_numeric(raw[name])
            except (TypeError, ValueError):
                raise SchemaError(f"{what}: column {name!r} ({column.type} in the schema) holds text that is not a "
                                  "number; declare the file's missing-value markers in [reader] na_values",
                                  column=name, problem="kind") from None
    return raw
