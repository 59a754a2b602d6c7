"""A table's transformations: one :class:`~.column_transforms.ColumnTransform` per column, and
the space of named alternatives a release spec declares.

A :class:`Transformation` is one transform per schema column; a :class:`TransformationSpace`
holds named alternatives per output column (declared in TOML) and enumerates their Cartesian
product with stable ids such as ``"birth_month=month,mother_age=fine,parity=coarse"``.

The transform kinds are :mod:`.column_transforms`; how a spec table becomes one, :mod:`.transform_specs`.

Privacy:
    A transformation applies one public column transform per column, a per-record map fixed by
    the spec (:mod:`.column_transforms` gives the argument); a space only enumerates public
    alternatives. Neither reads the data.

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of
    Live Births", Sections 3.6 and 4.7.1 (data transformation space).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.column_transforms import ColumnTransform, check_name
from privlab.mechanisms.tabular.domain import Domain
from privlab.mechanisms.tabular.schema import RawSchema
from privlab.mechanisms.tabular.transform_specs import column_transform_from_spec
from privlab.platform.core.errors import SchemaError, SpecError


@dataclasses.dataclass(frozen=True, kw_only=True)
class Transformation:
    """One transform per raw column: raw frame ↔ codes frame over :attr:`domain`.

    Args:
        schema: The raw schema; every schema column is the source of exactly one transform.
        columns: The transforms, in output-column order.
        id: The configuration id in its :class:`TransformationSpace` (informational).

    Raises:
        SpecError: A schema column without a transform, one with several, a transform whose
            source is not in the schema (or declared differently), repeated output names.
    """

    schema: RawSchema
    columns: tuple[ColumnTransform, ...]
    id: str = ""

    def __post_init__(self) -> None:
        if not self.columns:
            raise SpecError("a transformation needs at least one column transform")
        sources = [t.column.name for t in self.columns]
        for transform in self.columns:
            if transform.column.name not in self.schema:
                raise SpecError(f"{transform.what}: source column {transform.column.name!r} is not in the schema")
            if transform.column != self.schema[transform.column.name]:
                raise SpecError(f"{transform.what}: its source declaration differs from the schema's")
        repeated = sorted({s for s in sources if sources.count(s) > 1})
        if repeated:
            raise SpecError(
                f"raw column(s) {', '.join(map(repr, repeated))} must be transformed once, not several times"
            )
        untransformed = [n for n in self.schema.names if n not in sources]
        if untransformed:
            raise SpecError(
                f"raw column(s) {', '.join(map(repr, untransformed))} have no transform; every schema "
                "column needs exactly one"
            )
        Domain(tuple(t.domain for t in self.columns))  # distinct output names, valid domains

    @property
    def domain(self) -> Domain:
        """The domain of the codes frame (output names, in order)."""
        return Domain(tuple(t.domain for t in self.columns))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.columns)

    def __getitem__(self, name: str) -> ColumnTransform:
        for transform in self.columns:
            if transform.name == name:
                return transform
        raise SchemaError(f"unknown output column {name!r}; the transformation has: {', '.join(self.names)}")

    def apply(self, raw: pd.DataFrame, *, source: str = "raw data") -> pd.DataFrame:
        """Validate ``raw`` against the schema, then encode every column.

        Args:
            raw: The raw frame (extra columns are ignored).
            source: What the frame is, for error messages.

        Returns:
            A frame of ``int64`` codes with the output columns in order and a fresh index.

        Raises:
            SchemaError: ``raw`` fails the schema (see :meth:`RawSchema.validate`).
        """
        typed = self.schema.validate(raw, source=source)
        return pd.DataFrame({t.name: t.encode(typed[t.column.name]) for t in self.columns}, index=typed.index)

    def decode(self, codes: pd.DataFrame, *, rng: np.random.Generator | None = None) -> pd.DataFrame:
        """Map a codes frame back to a raw-like frame (schema column names and order).

        Args:
            codes: A frame of codes over :attr:`domain`.
            rng: Without it, each code becomes its representative value; with it, a uniform
                value inside its bin (see the module docstring).

        Returns:
            A typed raw-like frame with the codes frame's index.

        Raises:
            SchemaError: ``codes`` has missing/extra columns, NaN or out-of-range codes.
            TypeError: ``rng`` is not a ``numpy.random.Generator``.
        """
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator or None")
        valid = self.domain.validate(codes, what="codes frame")
        by_source = {t.column.name: t for t in self.columns}
        decoded = {
            name: by_source[name].decode(valid[by_source[name].name].to_numpy(), rng=rng) for name in self.schema.names
        }
        frame = pd.DataFrame({k: (v.to_numpy() if isinstance(v, pd.Series) else v) for k, v in decoded.items()})
        frame.index = valid.index
        return frame


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnAlternatives:
    """The named alternative transforms of one output column (declaration order kept)."""

    name: str
    options: tuple[tuple[str, ColumnTransform], ...]

    def __post_init__(self) -> None:
        check_name(self.name, what="output column name")
        if not self.options:
            raise SpecError(f"column {self.name!r}: needs at least one alternative")
        names = [n for n, _ in self.options]
        for option, transform in self.options:
            check_name(option, what=f"column {self.name!r}: alternative name")
            if transform.name != self.name:
                raise SpecError(f"column {self.name!r}: alternative {option!r} outputs {transform.name!r}")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise SpecError(
                f"column {self.name!r}: alternative names must be distinct; repeated: {', '.join(repeated)}"
            )
        sources = {t.column.name for _, t in self.options}
        if len(sources) != 1:
            raise SpecError(
                f"column {self.name!r}: all alternatives must read the same raw column, not {sorted(sources)}"
            )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.options)

    @property
    def source(self) -> str:
        return self.options[0][1].column.name

    def __getitem__(self, option: str) -> ColumnTransform:
        for name, transform in self.options:
            if name == option:
                return transform
        raise SpecError(
            f"column {self.name!r} has no alternative {option!r}; alternatives: {', '.join(self.names)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransformationSpace:
    """The Cartesian product of per-column alternatives, with stable configuration ids.

    An id lists every output column in declaration order as ``column=alternative`` joined by
    commas, e.g. ``"birth_month=month,mother_age=fine,parity=coarse,..."``. Enumeration order
    is the product in declaration order (the last column varies fastest).

    Args:
        schema: The raw schema every configuration transforms.
        columns: The alternatives per output column, in output order.

    Raises:
        SpecError: The columns do not cover each schema column exactly once.
    """

    schema: RawSchema
    columns: tuple[ColumnAlternatives, ...]

    def __post_init__(self) -> None:
        if not self.columns:
            raise SpecError("a transformation space needs at least one column")
        names = [c.name for c in self.columns]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise SpecError(f"output columns must be distinct; repeated: {', '.join(repeated)}")
        # One full configuration checks the coverage of the schema.
        Transformation(schema=self.schema, columns=tuple(c.options[0][1] for c in self.columns))

    @classmethod
    def from_spec(cls, table: Mapping[str, Any], *, schema: RawSchema, where: str) -> TransformationSpace:
        """Build a space from ``[<where>.<output>]`` tables.

        Each output table has ``source`` (the raw column; defaults to the output name) and
        ``[<where>.<output>.alternatives.<name>]`` tables, each a transform spec (``kind`` and
        its parameters, see :func:`column_transform_from_spec`).

        Raises:
            SpecError: Unknown keys, unknown source columns, bad transforms, incomplete coverage.
        """
        if not isinstance(table, Mapping) or not table:
            raise SpecError(f"{where} must be a non-empty table of output columns ([{where}.<column>])")
        columns = []
        for name, decl in table.items():
            here = f"{where}.{name}"
            if not isinstance(decl, Mapping):
                raise SpecError(f"{here} must be a table with 'source' and 'alternatives'")
            unknown = sorted(set(decl) - {"source", "alternatives"})
            if unknown:
                raise SpecError(
                    f"{here}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: alternatives, source"
                )
            source = decl.get("source", name)
            if source not in schema:
                raise SpecError(
                    f"{here}.source ({source!r}) must be a schema column; the schema has: {', '.join(schema.names)}"
                )
            alternatives = decl.get("alternatives")
            if not isinstance(alternatives, Mapping) or not alternatives:
                raise SpecError(f"{here} needs at least one [{here}.alternatives.<name>] table")
            options = []
            for option, spec in alternatives.items():
                check_name(option, what=f"{here}.alternatives name")
                transform = column_transform_from_spec(
                    spec, name=str(name), column=schema[source], where=f"{here}.alternatives.{option}"
                )
                options.append((str(option), transform))
            try:
                columns.append(ColumnAlternatives(name=str(name), options=tuple(options)))
            except SpecError as error:
                raise SpecError(f"{here}: {error}") from error
        try:
            return cls(schema=schema, columns=tuple(columns))
        except SpecError as error:
            raise SpecError(f"{where}: {error}") from error

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def __len__(self) -> int:
        return math.prod(len(c.options) for c in self.columns)

    def ids(self) -> tuple[str, ...]:
        """Every configuration id, in enumeration order."""
        combos = itertools.product(*(c.names for c in self.columns))
        return tuple(self.id_of(dict(zip(self.names, combo))) for combo in combos)

    def __iter__(self) -> Iterator[Transformation]:
        for config_id in self.ids():
            yield self.get(config_id)

    def id_of(self, choices: Mapping[str, str]) -> str:
        """The id of the configuration choosing ``choices[column]`` for every column.

        Raises:
            SpecError: An unknown or missing column, or an unknown alternative.
        """
        unknown = sorted(set(choices) - set(self.names))
        if unknown:
            raise SpecError(
                f"unknown column(s) {', '.join(map(repr, unknown))}; the space has: {', '.join(self.names)}"
            )
        missing = [n for n in self.names if n not in choices]
        if missing:
            raise SpecError(f"a configuration must choose an alternative for column(s) {', '.join(map(repr, missing))}")
        for column in self.columns:
            column[choices[column.name]]  # raises for an unknown alternative
        return ",".join(f"{c.name}={choices[c.name]}" for c in self.columns)

    def parse_id(self, config_id: str) -> dict[str, str]:
        """The ``{column: alternative}`` choices of an id (any column order accepted).

        Raises:
            SpecError: A malformed id, or unknown/missing/repeated columns or alternatives.
        """
        if not isinstance(config_id, str) or not config_id:
            raise SpecError(f"configuration id ({config_id!r}) must be a non-empty string")
        choices: dict[str, str] = {}
        for part in config_id.split(","):
            column, sep, option = part.partition("=")
            column, option = column.strip(), option.strip()
            if not sep or not column or not option:
                raise SpecError(
                    f"configuration id ({config_id!r}): part {part!r} must look like column=alternative"
                )
            if column in choices:
                raise SpecError(f"configuration id ({config_id!r}) chooses column {column!r} twice")
            choices[column] = option
        self.id_of(choices)
        return choices

    def get(self, config_id: str) -> Transformation:
        """The transformation of configuration ``config_id`` (see :meth:`parse_id`)."""
        choices = self.parse_id(config_id)
        columns = tuple(c[choices[c.name]] for c in self.columns)
        return Transformation(schema=self.schema, columns=columns, id=self.id_of(choices))

    def alternatives(self, column: str) -> tuple[str, ...]:
        """The alternative names of one output column."""
        for c in self.columns:
            if c.name == column:
                return c.names
        raise SpecError(f"unknown column {column!r}; the space has: {', '.join(self.names)}")

