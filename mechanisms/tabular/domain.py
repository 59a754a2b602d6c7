"""The discrete domain of a transformed dataset: what every release-flow step agrees on.

After the spec's transformation (clip, bin, month-of-date, …) a dataset is a
``pandas.DataFrame`` of **integer codes**: column ``c`` takes values ``0 .. size(c) − 1``.
A :class:`Domain` says, for each column in order, how many codes it has, a human label for
each code (``"1500-1599"``, ``"F"``) and, for ordered numeric columns, the numeric value each
code stands for (used by criteria such as conditional means and regressions, and by constraints
evaluated on synthetic records). The domain is built from the spec alone — public knowledge —
so nothing about it is ever read from the private data.

Synthesizers fit on and sample such frames; acceptance criteria compare two of them (the
transformed private data and the release candidate); the face-privacy projection rewrites one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from privlab.platform.core.errors import SchemaError, SpecError

CODE_DTYPE = np.int64


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnDomain:
    """One discrete column: ``size`` codes with labels and optional numeric values.

    Args:
        name: Column name.
        labels: One label per code, in code order.
        values: One finite number per code (ordered numeric columns), or ``None`` for nominal
            columns whose codes carry no numeric meaning.
    """

    name: str
    labels: tuple[str, ...]
    values: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"column name ({self.name!r}) must be a non-empty string")
        if len(self.labels) < 1:
            raise SpecError(f"column {self.name!r}: labels ({self.labels!r}) must list at least one code")
        if len(set(self.labels)) != len(self.labels):
            raise SpecError(f"column {self.name!r}: labels ({self.labels!r}) must be distinct")
        if self.values is not None:
            if len(self.values) != len(self.labels):
                raise SpecError(
                    f"column {self.name!r}: values ({len(self.values)}) must have one entry per "
                    f"label ({len(self.labels)})"
                )
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in self.values):
                raise SpecError(f"column {self.name!r}: values ({self.values!r}) must be finite numbers")

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def numeric(self) -> bool:
        return self.values is not None

    def value_array(self) -> np.ndarray:
        """The numeric value of each code (raises for nominal columns)."""
        if self.values is None:
            raise SchemaError(f"column {self.name!r} is nominal: its codes have no numeric values")
        return np.asarray(self.values, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class Domain:
    """An ordered collection of :class:`ColumnDomain` (the columns of a transformed frame)."""

    columns: tuple[ColumnDomain, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if not names:
            raise SpecError("a domain needs at least one column")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SpecError(f"domain columns must be distinct; repeated: {', '.join(duplicates)}")

    @classmethod
    def from_columns(cls, columns: Sequence[ColumnDomain]) -> Domain:
        return cls(tuple(columns))

    def __iter__(self) -> Iterator[ColumnDomain]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.columns)

    def size_of(self, names: Sequence[str]) -> int:
        """Number of cells of the joint domain of ``names`` (``1`` for no columns)."""
        return math.prod(self[n].size for n in names)

    def __getitem__(self, name: str) -> ColumnDomain:
        for column in self.columns:
            if column.name == name:
                return column
        raise SchemaError(f"unknown column {name!r}; the domain has: {', '.join(self.names)}")

    def project(self, names: Sequence[str]) -> Domain:
        return Domain(tuple(self[n] for n in names))

    def as_mapping(self) -> Mapping[str, int]:
        return {c.name: c.size for c in self.columns}

    def validate(self, frame: pd.DataFrame, *, what: str) -> pd.DataFrame:
        """Check ``frame`` holds exactly this domain's columns as in-range integer codes.

        Returns the frame with columns in domain order and dtype ``int64``. Raises
        :class:`SchemaError` naming the column (and the first offending row) otherwise.
        """
        missing = [n for n in self.names if n not in frame.columns]
        if missing:
            raise SchemaError(f"{what}: missing column(s) {', '.join(missing)}")
        extra = [c for c in frame.columns if c not in self.names]
        if extra:
            raise SchemaError(f"{what}: unexpected column(s) {', '.join(map(str, extra))}")
        out = {}
        for column in self.columns:
            series = frame[column.name]
            if series.isna().any():
                row = _plain(series.index[series.isna().to_numpy()][0])
                raise SchemaError(f"{what}: column {column.name!r} has a missing value at row {row!r}")
            if not (pd.api.types.is_integer_dtype(series) or pd.api.types.is_bool_dtype(series)):
                raise SchemaError(
                    f"{what}: column {column.name!r} must hold integer codes, not {series.dtype}"
                )
            codes = series.to_numpy().astype(CODE_DTYPE, copy=False)
            bad = (codes < 0) | (codes >= column.size)
            if bad.any():
                row = _plain(series.index[bad][0])
                raise SchemaError(
                    f"{what}: column {column.name!r} has a code at row {row!r} "
                    f"outside 0..{column.size - 1}"
                )
            out[column.name] = codes
        return pd.DataFrame(out, index=frame.index)

    def to_dict(self) -> dict[str, object]:
        return {
            "columns": [
                {"name": c.name, "labels": list(c.labels), "values": None if c.values is None else list(c.values)}
                for c in self.columns
            ]
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Domain:
        columns = d.get("columns")
        if not isinstance(columns, list):
            raise SchemaError(f"a serialized domain needs a 'columns' list, got {columns!r}")
        return cls(
            tuple(
                ColumnDomain(
                    name=c["name"],
                    labels=tuple(c["labels"]),
                    values=None if c["values"] is None else tuple(float(v) for v in c["values"]),
                )
                for c in columns
            )
        )


def _plain(value: object) -> object:
    """A numpy scalar index label as the Python value (so messages read ``row 3``)."""
    return value.item() if isinstance(value, np.generic) else value
