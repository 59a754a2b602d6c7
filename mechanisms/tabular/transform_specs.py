"""Column transforms from spec tables (``{kind = "bins", edges = [...]}``), checked key by key.

Every error names the table's path in the spec. The kinds and their parameters are
:mod:`.column_transforms`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from privlab.mechanisms.tabular.column_transforms import (
    BinTransform,
    BooleanTransform,
    CategoricalTransform,
    CategoryGroupsTransform,
    ColumnTransform,
    IdentityTransform,
    MonthTransform,
    is_number,
)
from privlab.mechanisms.tabular.schema import RawColumn
from privlab.platform.core.errors import SpecError

TRANSFORM_KINDS: Mapping[str, type[ColumnTransform]] = {
    cls.kind: cls
    for cls in (IdentityTransform, BinTransform, MonthTransform, BooleanTransform, CategoricalTransform,
                CategoryGroupsTransform)
}


_KIND_KEYS: Mapping[str, frozenset[str]] = {
    "identity": frozenset({"kind", "clip"}),
    "bins": frozenset({"kind", "edges", "clip", "labels", "values", "label_style"}),
    "month": frozenset({"kind", "labels", "day", "year"}),
    "boolean": frozenset({"kind", "labels"}),
    "categorical": frozenset({"kind", "labels", "values"}),
    "groups": frozenset({"kind", "groups", "other", "values"}),
}


def _edges_from_spec(value: Any, *, where: str) -> tuple[float, ...]:
    if isinstance(value, list):
        if not all(is_number(v) for v in value):
            raise SpecError(f"{where} ({value!r}) must be a list of finite numbers")
        return tuple(value)
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"from", "to", "step"})
        missing = sorted({"from", "to", "step"} - set(value))
        if unknown or missing:
            raise SpecError(
                f"{where}: a range table needs exactly the keys from, to, step (inclusive ends); "
                f"unknown: {unknown or 'none'}, missing: {missing or 'none'}"
            )
        start, stop, step = value["from"], value["to"], value["step"]
        if not all(is_number(v) for v in (start, stop, step)) or step <= 0 or stop < start:
            raise SpecError(f"{where} ({dict(value)!r}) must have numbers with step > 0 and from <= to")
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        edges = tuple(start + k * step for k in range(count))
        if not math.isclose(edges[-1], stop, rel_tol=0, abs_tol=1e-9 * max(1.0, abs(step))):
            raise SpecError(f"{where} ({dict(value)!r}): 'to' must be reached from 'from' in whole steps")
        return edges
    raise SpecError(f"{where} ({value!r}) must be a list of numbers or a table {{from, to, step}}")


def _string_tuple(value: Any, *, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where} ({value!r}) must be a list of strings")
    return tuple(value)


def column_transform_from_spec(
    table: Mapping[str, Any], *, name: str, column: RawColumn, where: str
) -> ColumnTransform:
    """Build one transform from a spec table ``{kind = "...", ...}``.

    Args:
        table: The alternative's table.
        name: The output column name.
        column: The source column's declaration.
        where: The table's path in the spec, for error messages.

    Raises:
        SpecError: Unknown kind or keys, or invalid values (naming ``where``).
    """
    if not isinstance(table, Mapping):
        raise SpecError(f"{where} must be a table with 'kind' and the transform's parameters")
    kind = table.get("kind")
    if kind not in TRANSFORM_KINDS:
        raise SpecError(f"{where}.kind ({kind!r}) must be one of {', '.join(TRANSFORM_KINDS)}")
    unknown = sorted(set(table) - _KIND_KEYS[kind])
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))} for kind {kind!r}; "
            f"allowed keys: {', '.join(sorted(_KIND_KEYS[kind]))}"
        )
    params: dict[str, Any] = {}
    for key, value in table.items():
        if key == "kind":
            continue
        if key == "edges":
            params[key] = _edges_from_spec(value, where=f"{where}.edges")
        elif key == "labels":
            params[key] = _string_tuple(value, where=f"{where}.labels")
        elif key == "groups":
            if not isinstance(value, Mapping) or not all(isinstance(v, list) for v in value.values()):
                raise SpecError(f"{where}.groups ({value!r}) must be a table of label = [categories]")
            params[key] = tuple((label, tuple(members)) for label, members in value.items())
        elif key in ("clip", "values"):
            if not isinstance(value, list):
                raise SpecError(f"{where}.{key} ({value!r}) must be a list of numbers")
            params[key] = tuple(value)
        else:
            params[key] = value
    try:
        return TRANSFORM_KINDS[kind](name=name, column=column, **params)
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from error
