"""Reversible per-column transforms from raw values to integer codes: the kinds a space declares.

A :class:`ColumnTransform` maps one raw column (typed by :class:`RawSchema.validate`) to codes
``0 .. size − 1`` of one :class:`ColumnDomain`, and maps codes back to raw-like values. Kinds:

``identity`` (integer columns)
    Clip to ``[lo, hi]`` and use one code per integer (``code = value − lo``); for small
    ranges only (at most :data:`MAX_IDENTITY_CODES` codes). Value of a code: the integer.
``bins`` (integer and float columns)
    Clip to ``[lo, hi]`` and cut at the public interior ``edges`` ``e_0 < … < e_{m−1}``:
    bins ``[lo, e_0), [e_0, e_1), …, [e_{m−1}, hi]`` (``m + 1`` codes). Integer labels are
    ``"<18"``, ``"18-19"``, ``"25"``, ``"45+"``, or with ``label_style = "paper"`` the paper's
    Table (Section 4.7.1): ``"<18"``, ``"18-19"``, ``"25"``, ``"44<"``; the first
    (last) bin is labelled by its single value when the *schema* bound leaves only one integer
    in it (parity ``"1"``). Float labels are ``"<a"``, ``"[a, b)"``, ``">=b"``. Value of a
    code: the midpoint of the bin's clipped range (for integers the midpoint of its first and
    last integer, e.g. ``"18-19"`` → 18.5), or the per-code ``values`` declared in the spec.
``month`` (date columns)
    The month of the date, codes ``0 .. 11`` labelled ``"1" .. "12"``; value of a code: the
    month number.
``boolean``
    ``False`` → 0, ``True`` → 1, labels declared (``["M", "F"]``) or ``"False"/"True"``;
    values ``0.0/1.0``.
``categorical``
    The schema's categories in declared order; nominal, unless ``values`` declares a public
    number per category (then it can be a regression covariate).
``groups`` (categorical columns)
    Categories merged into public groups, ``groups = { Married = ["Married-civ-spouse",
    "Married-AF-spouse"] }``, optionally with ``other = "Other"`` collecting every unlisted
    category (:class:`CategoryGroupsTransform`); nominal.

``[lo, hi]`` is the transformation's ``clip`` range if declared (it must lie inside the
schema's bounds), else the schema's public bounds: nothing is ever read from the data.

Decoding (:meth:`ColumnTransform.decode`) returns raw-like values under the *source* column's
name: without an ``rng`` every code becomes its representative value (``float64`` for bins,
``int64`` for identity, a date on day ``day`` of the month for months); with an ``rng``, a
uniformly random value inside the bin's clipped range (integers for integer columns, a
uniformly random day of the month for months). Boolean and categorical codes decode exactly.

Privacy:
    A transformation is fixed by the spec (public edges, clip ranges and categories) before any
    data is seen, and applying it is a per-record map, so it neither reads private statistics
    nor changes the neighbouring relation: a mechanism that is ε-DP on the codes is ε-DP on
    the raw records. Decoding reads only codes (synthetic data) and is post-processing.

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of
    Live Births", Sections 3.6 and 4.7.1 (data transformation space).
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.domain import CODE_DTYPE, ColumnDomain
from privlab.mechanisms.tabular.schema import RawColumn
from privlab.platform.core.errors import SpecError

MAX_IDENTITY_CODES = 1000
"""Largest integer range the ``identity`` transform accepts (use ``bins`` beyond it)."""


_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]+$")


def check_name(value: str, *, what: str) -> None:
    if not isinstance(value, str) or not _NAME_PATTERN.match(value):
        raise SpecError(
            f"{what} ({value!r}) must be a non-empty name of letters, digits, '_', '.' or '-' "
            "(it becomes part of a configuration id)"
        )


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and math.isfinite(
        value
    )


LABEL_STYLES = ("range", "paper")
"""Default label styles of integer bins (:class:`BinTransform`)."""


def _check_code_values(values: tuple[float, ...] | None, *, size: int, what: str) -> None:
    """Declared numbers of a nominal column's codes: ``size`` finite numbers, not all equal."""
    if values is None:
        return
    if len(values) != size or not all(is_number(v) for v in values):
        raise SpecError(f"{what}: values ({list(values)!r}) must be {size} finite numbers, one per code")


def _check_labels(labels: tuple[str, ...] | None, *, size: int, what: str) -> None:
    if labels is None:
        return
    if len(labels) != size or not all(isinstance(label, str) and label for label in labels):
        raise SpecError(f"{what}: labels ({list(labels)!r}) must be {size} non-empty strings, one per code")
    if len(set(labels)) != len(labels):
        raise SpecError(f"{what}: labels ({list(labels)!r}) must be distinct")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnTransform(abc.ABC):
    """Base class: one raw column (``column``) to one coded column (``name``).

    Args:
        name: The output (coded) column name; may differ from the raw column's name.
        column: The raw column's declaration (type and public domain).
    """

    kind: ClassVar[str]
    source_types: ClassVar[tuple[str, ...]]

    name: str
    column: RawColumn

    def __post_init__(self) -> None:
        check_name(self.name, what="output column name")
        if not isinstance(self.column, RawColumn):
            raise SpecError(f"column {self.name!r}: column ({self.column!r}) must be a RawColumn")
        if self.column.type not in self.source_types:
            raise SpecError(
                f"column {self.name!r}: a {self.kind} transform needs a source column of type "
                f"{' or '.join(self.source_types)}, but {self.column.name!r} is {self.column.type}"
            )

    @property
    def what(self) -> str:
        return f"transform {self.name!r} ({self.kind} of {self.column.name!r})"

    @property
    @abc.abstractmethod
    def domain(self) -> ColumnDomain:
        """The coded column's domain (labels, and values for ordered columns)."""

    @abc.abstractmethod
    def encode(self, values: pd.Series) -> np.ndarray:
        """Codes (``int64``) of a typed raw column (as returned by ``RawSchema.validate``)."""

    @abc.abstractmethod
    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> Any:
        """Raw-like values of valid codes: representative values, or uniform in the bin with ``rng``."""

    def representative_values(self) -> tuple[float, ...] | None:
        """What each code decodes to without an ``rng``, when that is a number (None otherwise):
        the domain's values, except where a subclass decodes to something else."""
        return self.domain.values

    def code_descriptions(self) -> tuple[str, ...]:
        """Per code, its label and what it decodes to without an ``rng`` (for datasheets):
        ``"25-34 → 29.5"`` for a bin, the label alone where the label is the value."""
        values = self.representative_values()
        if values is None:
            return self.domain.labels
        return tuple(label if label == f"{value:g}" else f"{label} → {value:g}"
                     for label, value in zip(self.domain.labels, values, strict=True))


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ClippedNumeric(ColumnTransform):
    """Shared ``clip`` handling for numeric transforms."""

    clip: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.clip is None:
            return
        if len(self.clip) != 2 or not all(is_number(v) for v in self.clip):
            raise SpecError(f"{self.what}: clip ({self.clip!r}) must be two finite numbers [lower, upper]")
        lo, hi = self.clip
        if self.column.type == "integer" and (lo != int(lo) or hi != int(hi)):
            raise SpecError(f"{self.what}: clip ({self.clip!r}) must be integers for an integer column")
        if not lo < hi:
            raise SpecError(f"{self.what}: clip ({self.clip!r}) must have lower < upper")
        if lo < self.column.lower or hi > self.column.upper:
            raise SpecError(
                f"{self.what}: clip ({self.clip!r}) must lie within the schema bounds "
                f"[{self.column.lower}, {self.column.upper}]"
            )

    @property
    def bounds(self) -> tuple[float, float]:
        """The clip range ``[lo, hi]`` (declared, else the schema's public bounds)."""
        lo, hi = self.clip if self.clip is not None else (self.column.lower, self.column.upper)
        if self.column.type == "integer":
            return int(lo), int(hi)
        return float(lo), float(hi)

    def _clipped(self, values: pd.Series) -> np.ndarray:
        lo, hi = self.bounds
        numbers = np.asarray(values.to_numpy(), dtype=np.float64)
        return np.clip(numbers, lo, hi)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IdentityTransform(_ClippedNumeric):
    """One code per integer of ``[lo, hi]`` (values outside are clipped first)."""

    kind: ClassVar[str] = "identity"
    source_types: ClassVar[tuple[str, ...]] = ("integer",)

    def __post_init__(self) -> None:
        super().__post_init__()
        lo, hi = self.bounds
        if hi - lo + 1 > MAX_IDENTITY_CODES:
            raise SpecError(
                f"{self.what}: the range [{lo}, {hi}] ({hi - lo + 1} codes) must have at most "
                f"{MAX_IDENTITY_CODES} codes; use kind = 'bins' or a narrower clip"
            )

    @property
    def domain(self) -> ColumnDomain:
        lo, hi = self.bounds
        return ColumnDomain(
            name=self.name,
            labels=tuple(str(v) for v in range(lo, hi + 1)),
            values=tuple(float(v) for v in range(lo, hi + 1)),
        )

    def encode(self, values: pd.Series) -> np.ndarray:
        lo, _ = self.bounds
        return self._clipped(values).astype(CODE_DTYPE) - lo

    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> np.ndarray:
        lo, _ = self.bounds
        return np.asarray(codes, dtype=np.int64) + lo


@dataclasses.dataclass(frozen=True, kw_only=True)
class BinTransform(_ClippedNumeric):
    """Clip to ``[lo, hi]``, then bin at the public interior ``edges``.

    Args:
        edges: Strictly increasing interior cut points; ``lo < edges[0]`` and ``edges[-1] <= hi``
            (``< hi`` for floats), so that every bin holds at least one value.
        clip: Optional ``[lo, hi]`` inside the schema bounds (defaults to them).
        labels: Optional label per bin (defaults described in the module docstring).
        values: Optional representative value per bin; each must lie inside its bin's clipped
            range. Defaults to the bin midpoints.
        label_style: Default labels of an integer column's last open bin: ``"range"`` (``"45+"``)
            or ``"paper"`` (Hod & Canetti's ``"44<"``, "more than 44").
    """

    kind: ClassVar[str] = "bins"
    source_types: ClassVar[tuple[str, ...]] = ("integer", "float")

    edges: tuple[float, ...]
    labels: tuple[str, ...] | None = None
    values: tuple[float, ...] | None = None
    label_style: str = "range"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.label_style not in LABEL_STYLES:
            raise SpecError(f"{self.what}: label_style ({self.label_style!r}) must be one of {', '.join(LABEL_STYLES)}")
        edges = self.edges
        if not isinstance(edges, tuple) or len(edges) < 1 or not all(is_number(e) for e in edges):
            raise SpecError(f"{self.what}: edges ({edges!r}) must be a non-empty list of finite numbers")
        if any(b <= a for a, b in zip(edges, edges[1:])):
            raise SpecError(f"{self.what}: edges ({list(edges)!r}) must be strictly increasing")
        integer = self.column.type == "integer"
        if integer and any(e != int(e) for e in edges):
            raise SpecError(f"{self.what}: edges ({list(edges)!r}) must be integers for an integer column")
        lo, hi = self.bounds
        if not edges[0] > lo:
            raise SpecError(
                f"{self.what}: the first edge ({edges[0]!r}) must be > the clip lower bound ({lo!r}) "
                "so that the first bin is not empty"
            )
        if not (edges[-1] <= hi if integer else edges[-1] < hi):
            raise SpecError(
                f"{self.what}: the last edge ({edges[-1]!r}) must be {'<=' if integer else '<'} the clip "
                f"upper bound ({hi!r}) so that the last bin is not empty"
            )
        _check_labels(self.labels, size=len(edges) + 1, what=self.what)
        if self.values is not None:
            if len(self.values) != len(edges) + 1 or not all(is_number(v) for v in self.values):
                raise SpecError(
                    f"{self.what}: values ({self.values!r}) must be {len(edges) + 1} finite numbers, one per bin"
                )
            lows, highs = self._ranges()
            for k, (v, a, b) in enumerate(zip(self.values, lows, highs)):
                if not a <= v <= b:
                    raise SpecError(
                        f"{self.what}: values[{k}] ({v!r}) must lie in its bin's clipped range [{a}, {b}]"
                    )

    def _ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, the clipped range: integers ``[first, last]``; floats ``[a, b]``."""
        lo, hi = self.bounds
        edges = np.asarray(self.edges, dtype=np.float64)
        lows = np.concatenate([[lo], edges])
        if self.column.type == "integer":
            highs = np.concatenate([edges - 1, [hi]])
        else:
            highs = np.concatenate([edges, [hi]])
        return lows, highs

    def _default_labels(self) -> tuple[str, ...]:
        edges = self.edges
        if self.column.type != "integer":
            middle = [f"[{a:g}, {b:g})" for a, b in zip(edges, edges[1:])]
            return (f"<{edges[0]:g}", *middle, f">={edges[-1]:g}")

        def span(a: int, b: int) -> str:
            if a == b:
                return str(a)
            return f"{a}-{b}" if a >= 0 else f"{a}..{b}"

        ints = [int(e) for e in edges]
        first = str(ints[0] - 1) if int(self.column.lower) == ints[0] - 1 else f"<{ints[0]}"
        if int(self.column.upper) == ints[-1]:
            last = str(ints[-1])
        else:
            last = f"{ints[-1] - 1}<" if self.label_style == "paper" else f"{ints[-1]}+"
        return (first, *(span(a, b - 1) for a, b in zip(ints, ints[1:])), last)

    @property
    def domain(self) -> ColumnDomain:
        if self.values is not None:
            values = tuple(float(v) for v in self.values)
        else:
            lows, highs = self._ranges()
            values = tuple(float(v) for v in (lows + highs) / 2)
        return ColumnDomain(name=self.name, labels=self.labels or self._default_labels(), values=values)

    def encode(self, values: pd.Series) -> np.ndarray:
        edges = np.asarray(self.edges, dtype=np.float64)
        return np.searchsorted(edges, self._clipped(values), side="right").astype(CODE_DTYPE)

    def representative_values(self) -> tuple[float, ...]:
        """Per bin, the value a code decodes to without an ``rng``.

        For a float column, the domain's value (declared, else the bin midpoint). For an integer
        column, the integer nearest to it, ties to the lower one (``80-85`` → 82, not 82.5), so
        decoded data keeps the column's type and re-encodes to the same codes: the bin's clipped
        range has integer ends, so the nearest integer to a value inside it lies inside it too.
        The domain keeps the exact value for the criteria and constraints computed on codes.
        """
        values = tuple(float(v) for v in self.domain.value_array())
        if self.column.type != "integer":
            return values
        return tuple(float(math.ceil(v - 0.5)) for v in values)

    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.int64)
        if rng is None:
            representative = np.asarray(self.representative_values())
            return representative.astype(np.int64)[codes] if self.column.type == "integer" else representative[codes]
        lows, highs = self._ranges()
        if self.column.type == "integer":
            return rng.integers(lows[codes].astype(np.int64), highs[codes].astype(np.int64), endpoint=True)
        return rng.uniform(lows[codes], highs[codes])


@dataclasses.dataclass(frozen=True, kw_only=True)
class MonthTransform(ColumnTransform):
    """The month of a date: 12 codes, labels ``"1" .. "12"`` (or declared), values 1..12.

    Args:
        labels: Optional 12 labels (e.g. month names).
        day: The day of the month a code decodes to without an ``rng`` (1..28; default 15,
            mid-month).
        year: The year decoded dates get; defaults to the year of the schema bounds, which must
            then lie in one calendar year. Decoded dates are clipped into the schema bounds.
    """

    kind: ClassVar[str] = "month"
    source_types: ClassVar[tuple[str, ...]] = ("date",)

    labels: tuple[str, ...] | None = None
    day: int = 15
    year: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_labels(self.labels, size=12, what=self.what)
        if isinstance(self.day, bool) or not isinstance(self.day, int) or not 1 <= self.day <= 28:
            raise SpecError(f"{self.what}: day ({self.day!r}) must be an integer in 1..28")
        lower, upper = self.column.date_bounds
        if self.year is None:
            if lower.year != upper.year:
                raise SpecError(
                    f"{self.what}: year must be given because the schema bounds span {lower.year}..{upper.year} "
                    "(a month code alone does not say which year to decode to)"
                )
        elif isinstance(self.year, bool) or not isinstance(self.year, int) or not lower.year <= self.year <= upper.year:
            raise SpecError(
                f"{self.what}: year ({self.year!r}) must be an integer within the schema bounds "
                f"{lower.year}..{upper.year}"
            )

    @property
    def decode_year(self) -> int:
        return self.year if self.year is not None else self.column.date_bounds[0].year

    @property
    def domain(self) -> ColumnDomain:
        return ColumnDomain(
            name=self.name,
            labels=self.labels or tuple(str(m) for m in range(1, 13)),
            values=tuple(float(m) for m in range(1, 13)),
        )

    def encode(self, values: pd.Series) -> np.ndarray:
        return values.dt.month.to_numpy().astype(CODE_DTYPE) - 1

    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> pd.Series:
        months = np.asarray(codes, dtype=np.int64) + 1
        year = self.decode_year
        if rng is None:
            days = np.full(len(months), self.day, dtype=np.int64)
        else:
            lengths = np.array([pd.Timestamp(year=year, month=m, day=1).days_in_month for m in range(1, 13)])
            days = rng.integers(1, lengths[months - 1], endpoint=True)
        dates = pd.to_datetime(pd.DataFrame({"year": np.full(len(months), year), "month": months, "day": days}))
        lower, upper = self.column.date_bounds
        return dates.clip(lower=lower, upper=upper)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BooleanTransform(ColumnTransform):
    """``False`` → 0, ``True`` → 1; ``labels`` name the two codes (false first)."""

    kind: ClassVar[str] = "boolean"
    source_types: ClassVar[tuple[str, ...]] = ("boolean",)

    labels: tuple[str, str] = ("False", "True")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_labels(self.labels, size=2, what=self.what)

    @property
    def domain(self) -> ColumnDomain:
        return ColumnDomain(name=self.name, labels=tuple(self.labels), values=(0.0, 1.0))

    def encode(self, values: pd.Series) -> np.ndarray:
        return values.to_numpy(dtype=bool).astype(CODE_DTYPE)

    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> np.ndarray:
        return np.asarray(codes) == 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class CategoricalTransform(ColumnTransform):
    """The schema's categories, in declared order, as codes.

    Nominal unless ``values`` declares a public number per category (e.g. years of schooling
    for education levels); then the column is numeric and can be a regression covariate.
    """

    kind: ClassVar[str] = "categorical"
    source_types: ClassVar[tuple[str, ...]] = ("categorical",)

    labels: tuple[str, ...] | None = None
    values: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_labels(self.labels, size=len(self.categories), what=self.what)
        if self.labels is None and len({str(c) for c in self.categories}) != len(self.categories):
            raise SpecError(f"{self.what}: categories print alike; declare distinct labels")
        _check_code_values(self.values, size=len(self.categories), what=self.what)

    @property
    def categories(self) -> tuple[Any, ...]:
        return tuple(self.column.categories or ())

    @property
    def domain(self) -> ColumnDomain:
        return ColumnDomain(name=self.name, labels=self.labels or tuple(str(c) for c in self.categories),
                            values=None if self.values is None else tuple(float(v) for v in self.values))

    def representative_values(self) -> None:
        """None: codes decode to the schema's categories (declared ``values`` are for the criteria)."""
        return None

    def code_descriptions(self) -> tuple[str, ...]:
        return tuple(label if label == str(category) else f"{label} → {category}"
                     for label, category in zip(self.domain.labels, self.categories, strict=True))

    def encode(self, values: pd.Series) -> np.ndarray:
        typed = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype(
            pd.CategoricalDtype(list(self.categories))
        )
        if list(typed.cat.categories) != list(self.categories):
            typed = typed.cat.set_categories(list(self.categories))
        return typed.cat.codes.to_numpy().astype(CODE_DTYPE)

    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> pd.Categorical:
        return pd.Categorical.from_codes(np.asarray(codes, dtype=np.int64), categories=list(self.categories))


@dataclasses.dataclass(frozen=True, kw_only=True)
class CategoryGroupsTransform(ColumnTransform):
    """Categories merged into public groups: named groups, and optionally one for the rest.

    ``groups`` maps a group's label to the schema categories it merges (``"Never-married"`` →
    ``["Never-married"]``, ``"Married"`` → ``["Married-civ-spouse", "Married-AF-spouse"]``). With
    ``other`` set, every category no group lists falls into one group of that label (rare
    levels, declared in the spec, never found from the data); without it, each keeps a code of
    its own. Codes: the listed groups in spec order, then the unlisted categories in schema
    order (or the ``other`` group). Nominal unless ``values`` declares a number per group.

    Decoding without an ``rng`` gives a group's first listed category; with an ``rng``, a
    uniformly random member of the group.

    Privacy:
        A per-record map fixed by the spec; the groups are public.
    """

    kind: ClassVar[str] = "groups"
    source_types: ClassVar[tuple[str, ...]] = ("categorical",)

    groups: tuple[tuple[str, tuple[Any, ...]], ...]
    other: str | None = None
    values: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        categories = list(self.column.categories or ())
        if not isinstance(self.groups, tuple) or not self.groups:
            raise SpecError(f"{self.what}: groups must be a non-empty table of label = [categories]")
        seen: dict[Any, str] = {}
        for label, members in self.groups:
            if not isinstance(label, str) or not label:
                raise SpecError(f"{self.what}: group label ({label!r}) must be a non-empty string")
            if not members:
                raise SpecError(f"{self.what}: group {label!r} must list at least one category")
            for member in members:
                if member not in categories:
                    raise SpecError(f"{self.what}: group {label!r} lists {member!r}, which is not a category of "
                                    f"{self.column.name!r} (declared: {', '.join(map(str, categories))})")
                if member in seen:
                    raise SpecError(f"{self.what}: category {member!r} is in groups {seen[member]!r} and {label!r}")
                seen[member] = label
        rest = [c for c in categories if c not in seen]
        if self.other is not None:
            if not isinstance(self.other, str) or not self.other:
                raise SpecError(f"{self.what}: other ({self.other!r}) must be a non-empty string")
            if not rest:
                raise SpecError(f"{self.what}: other ({self.other!r}) would be empty: the groups list every category")
        _check_labels(self.domain.labels, size=len(self.domain.labels), what=self.what)
        _check_code_values(self.values, size=len(self.domain.labels), what=self.what)

    def _members(self) -> list[tuple[str, tuple[Any, ...]]]:
        """Every code's label and categories, in code order."""
        listed = {member for _, members in self.groups for member in members}
        rest = tuple(c for c in self.column.categories or () if c not in listed)
        if self.other is not None:
            return [*self.groups, (self.other, rest)]
        return [*self.groups, *((str(c), (c,)) for c in rest)]

    def representative_values(self) -> None:
        """None: codes decode to categories (a group's first listed member), not numbers."""
        return None

    def code_descriptions(self) -> tuple[str, ...]:
        return tuple(f"{label} ({', '.join(map(str, members))}) → {members[0]}" for label, members in self._members())

    @property
    def domain(self) -> ColumnDomain:
        return ColumnDomain(name=self.name, labels=tuple(label for label, _ in self._members()),
                            values=None if self.values is None else tuple(float(v) for v in self.values))

    def encode(self, values: pd.Series) -> np.ndarray:
        categories = list(self.column.categories or ())
        code_of = np.empty(len(categories), dtype=CODE_DTYPE)
        for code, (_, members) in enumerate(self._members()):
            for member in members:
                code_of[categories.index(member)] = code
        typed = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype(
            pd.CategoricalDtype(categories))
        if list(typed.cat.categories) != categories:
            typed = typed.cat.set_categories(categories)
        return code_of[typed.cat.codes.to_numpy()]

    def decode(self, codes: np.ndarray, *, rng: np.random.Generator | None = None) -> pd.Categorical:
        categories = list(self.column.categories or ())
        members = [[categories.index(m) for m in group] for _, group in self._members()]
        codes = np.asarray(codes, dtype=np.int64)
        if rng is None:
            chosen = np.array([group[0] for group in members], dtype=np.int64)[codes]
        else:
            sizes = np.array([len(group) for group in members])
            table = np.full((len(members), int(sizes.max())), -1, dtype=np.int64)
            for code, group in enumerate(members):
                table[code, :len(group)] = group
            chosen = table[codes, (rng.random(codes.shape) * sizes[codes]).astype(np.int64)]
        return pd.Categorical.from_codes(chosen, categories=categories)
