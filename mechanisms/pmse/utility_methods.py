"""The method variants of the pMSE utility studies (Table 2 and Section 6 of Snoke & Slavković):
which methods there are, how a spec's ``method`` table is validated, and their labels."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

from privlab.platform.core.validation import ConstraintSpec, Interval, Options, validate_parameters

__all__ = ["BOUNDED", "FAMILY_LABELS", "FM_NORMS", "METHODS", "Method"]

METHODS: tuple[str, ...] = ("non_dp", "pmse_mechanism", "noisy_bppd", "smooth_histogram", "functional_mechanism")
BOUNDED: frozenset[str] = frozenset({"noisy_bppd", "smooth_histogram", "functional_mechanism"})
FM_NORMS: tuple[str, ...] = ("l1", "linf")


_SETTINGS: dict[str, list[ConstraintSpec]] = {
    "max_depth": [Options(str, ("unlimited",)), Interval(numbers.Integral, 1, None, closed="left")],
    "bound_sd": [Interval(numbers.Real, 0, None, closed="neither")],
    "norm": [Options(str, FM_NORMS)],
}
"""The settings a method table may hold (which apply depends on the method)."""


# --- method variants ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Method:
    """One method variant of a configuration (the spec's ``method`` table, validated).

    Attributes:
        name: one of :data:`METHODS`.
        max_depth: the pMSE mechanism's CART depth (None = unlimited); only for it.
        bound_sd: the half-width of the public bounds in population standard deviations;
            required for, and only for, the bounded methods (:data:`BOUNDED`).
        norm: the functional mechanism's noise, ``"l1"`` or ``"linf"``; only for it.
    """

    name: str
    max_depth: int | None = None
    bound_sd: float | None = None
    norm: str | None = None

    @classmethod
    def from_table(cls, table: object, *, allowed: tuple[str, ...]) -> Method:
        """Validate a ``method`` table; every problem is a ValueError naming the key.

        Raises:
            TypeError: ``table`` is not a table (mapping).
            ValueError: an unknown method or key, a key that does not apply to the method, a
                missing bound or depth, or a bad value.
        """
        if not isinstance(table, Mapping):
            raise TypeError(f"method ({table!r}) must be a table such as {{ name = \"non_dp\" }}")
        name = table.get("name")
        validate_parameters({"method name": [Options(str, allowed)]}, {"method name": name}, type_error=ValueError)
        keys = {"name"}
        if name == "pmse_mechanism":
            keys.add("max_depth")
        if name in BOUNDED:
            keys.add("bound_sd")
        if name == "functional_mechanism":
            keys.add("norm")
        unknown = sorted(set(table) - keys)
        if unknown:
            raise ValueError(
                f"method {name!r} key(s) {', '.join(map(repr, unknown))} do not apply; "
                f"allowed keys: {', '.join(sorted(keys))}"
            )
        settings = {key: table.get(key, "l1" if key == "norm" else None) for key in sorted(keys - {"name"})}
        validate_parameters(_SETTINGS, settings, type_error=ValueError, hints={
            "max_depth": "required for the pMSE mechanism",
            "bound_sd": f"the number of standard deviations, required for {name}"})
        depth = settings.get("max_depth")
        max_depth = None if depth in (None, "unlimited") else int(depth)  # type: ignore[arg-type]
        bound = settings.get("bound_sd")
        bound_sd = None if bound is None else float(bound)  # type: ignore[arg-type]
        norm = settings.get("norm")
        return cls(name=str(name), max_depth=max_depth, bound_sd=bound_sd, norm=norm)

    def as_table(self) -> dict[str, Any]:
        """The canonical spec table (only the keys that apply), as logged to MLflow."""
        table: dict[str, Any] = {"name": self.name}
        if self.name == "pmse_mechanism":
            table["max_depth"] = "unlimited" if self.max_depth is None else self.max_depth
        if self.bound_sd is not None:
            table["bound_sd"] = int(self.bound_sd) if self.bound_sd.is_integer() else self.bound_sd
        if self.norm is not None:
            table["norm"] = self.norm
        return table

    @property
    def family(self) -> str:
        """The method with its norm (the functional mechanism's ℓ1 and ℓ∞ are two families)."""
        return f"{self.name}_{self.norm}" if self.name == "functional_mechanism" else self.name

    @property
    def setting(self) -> str:
        """The variant's setting for labels: ``depth 5``, ``4 sd`` or ``""``."""
        if self.name == "pmse_mechanism":
            return f"depth {'unlimited' if self.max_depth is None else self.max_depth}"
        if self.bound_sd is not None:
            return f"{self.bound_sd:g} sd"
        return ""

    @property
    def label(self) -> str:
        base = FAMILY_LABELS[self.family]
        return f"{base} ({self.setting})" if self.setting else base


FAMILY_LABELS: dict[str, str] = {
    "non_dp": "non-DP synthesis",
    "pmse_mechanism": "pMSE mechanism",
    "noisy_bppd": "noisy BPPD",
    "smooth_histogram": "smooth histogram",
    "functional_mechanism_l1": "functional mech. ℓ1",
    "functional_mechanism_linf": "functional mech. ℓ∞",
}
