"""Column declarations with public bounds: the part of a dataset's description DP depends on.

Bounds and categories always come from configuration (public knowledge), never from the data:
a value outside its declared bounds is an error that names the column, not something to clip
silently. Part of the DP core's layer (mechanisms use it; it imports only the core).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privlab.platform.core.errors import SchemaError, SpecError

COLUMN_TYPES = ("integer", "float", "categorical")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnSchema:
    """One column: its type and public domain (bounds for numbers, categories otherwise)."""

    name: str
    type: str
    lower: float | None = None
    upper: float | None = None
    categories: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in COLUMN_TYPES:
            raise SpecError(
                f"dataset column {self.name!r}: type ({self.type!r}) must be one of "
                f"{', '.join(COLUMN_TYPES)}"
            )
        if self.type == "categorical":
            if not self.categories:
                raise SpecError(
                    f"dataset column {self.name!r}: categorical columns need a non-empty "
                    "'categories' list (the public domain)"
                )
        else:
            for bound in ("lower", "upper"):
                value = getattr(self, bound)
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                    raise SpecError(
                        f"dataset column {self.name!r}: {bound} ({value!r}) must be a finite "
                        "number declared in the spec (public bounds are never read from data)"
                    )
            if self.lower >= self.upper:  # type: ignore[operator]
                raise SpecError(
                    f"dataset column {self.name!r}: lower ({self.lower!r}) must be < upper "
                    f"({self.upper!r})"
                )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Schema:
    columns: tuple[ColumnSchema, ...]

    @classmethod
    def from_spec(cls, table: Mapping[str, Any], *, where: str) -> Schema:
        if not isinstance(table, Mapping):
            raise SpecError(
                f"{where} must be a table of column declarations ([dataset.columns.<name>] with "
                f"'type' and bounds), got {type(table).__name__}"
            )
        columns = []
        for name, decl in table.items():
            if not isinstance(decl, Mapping):
                raise SpecError(f"{where}.{name} must be a table with 'type' and bounds")
            allowed = {"type", "lower", "upper", "categories"}
            unknown = sorted(set(decl) - allowed)
            if unknown:
                raise SpecError(
                    f"{where}.{name}: unknown key(s) {', '.join(map(repr, unknown))}; "
                    f"allowed keys: {', '.join(sorted(allowed))}"
                )
            cats = decl.get("categories")
            columns.append(
                ColumnSchema(
                    name=name,
                    type=decl.get("type", ""),
                    lower=decl.get("lower"),
                    upper=decl.get("upper"),
                    categories=tuple(cats) if cats is not None else None,
                )
            )
        if not columns:
            raise SpecError(f"{where} must declare at least one column")
        return cls(columns=tuple(columns))

    def validate(self, frame: pd.DataFrame, *, source: str) -> pd.DataFrame:
        """Check ``frame`` against the schema; returns it restricted to the declared columns.

        Raises:
            SchemaError: a missing column, a NaN, a non-numeric value in a numeric column,
                a value outside the declared bounds or an undeclared category; the message
                names the column and the first offending row.
        """
        if len(frame) == 0:
            raise SchemaError(f"{source}: the dataset is empty", problem="empty")
        missing = [c.name for c in self.columns if c.name not in frame.columns]
        if missing:
            raise SchemaError(
                f"{source}: missing column(s) {', '.join(map(repr, missing))}; "
                f"the file has: {', '.join(map(str, frame.columns))}",
                problem="missing_column", column=missing[0],
            )
        for column in self.columns:
            values = frame[column.name]
            null = values.isna().to_numpy()
            if null.any():
                row = int(np.flatnonzero(null)[0])
                raise SchemaError(
                    f"{source}: column {column.name!r} has {int(null.sum())} missing/NaN "
                    f"value(s) (first at row {row}); clean the data or drop those rows first",
                    column=column.name, problem="missing",
                )
            if column.type == "categorical":
                allowed = set(column.categories or ())
                bad = ~values.isin(allowed).to_numpy()
                if bad.any():
                    row = int(np.flatnonzero(bad)[0])
                    raise SchemaError(
                        f"{source}: column {column.name!r} has {int(bad.sum())} value(s) outside "
                        f"its declared categories (first at row {row}); declare every category "
                        "in the spec",
                        column=column.name, problem="categories",
                    )
                continue
            if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
                not_numbers = pd.to_numeric(values, errors="coerce").isna().to_numpy()
                row = int(np.flatnonzero(not_numbers)[0]) if not_numbers.any() else 0
                raise SchemaError(
                    f"{source}: column {column.name!r} is declared {column.type} but holds "
                    f"{values.dtype} values (first non-numeric at row {row})",
                    column=column.name, problem="kind",
                )
            numbers = values.to_numpy(dtype=np.float64)
            if column.type == "integer" and not np.all(numbers == np.round(numbers)):
                row = int(np.flatnonzero(numbers != np.round(numbers))[0])
                raise SchemaError(
                    f"{source}: column {column.name!r} is declared integer but row {row} "
                    "holds a fractional value",
                    column=column.name, problem="fractional",
                )
            outside = (numbers < column.lower) | (numbers > column.upper) | ~np.isfinite(numbers)
            if outside.any():
                row = int(np.flatnonzero(outside)[0])
                raise SchemaError(
                    f"{source}: column {column.name!r} has {int(outside.sum())} value(s) outside "
                    f"its public bounds [{column.lower}, {column.upper}] (first at row {row}); "
                    "fix the data or widen the bounds in the spec",
                    column=column.name, problem="bounds",
                )
        return frame[[c.name for c in self.columns]].reset_index(drop=True)
