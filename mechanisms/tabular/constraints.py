"""Record-level constraints: raw cleaning and synthetic rejection with the rules of :mod:`.rules`.

A rule describes records to *remove*, e.g. ``"gestation_week < 29 and birth_weight > 2999"``
(Hod & Canetti 2024, Section 4.8).

:class:`ConstraintSet` is used twice (Section 4.8):

* **raw cleaning** (:meth:`ConstraintSet.clean`): optionally drop records with a missing value
  (rule 1 of 4.8.1), validate against the schema, remove records matching any rule;
* **synthetic rejection** (:meth:`ConstraintSet.on_codes`): rules are evaluated on the
  *representative* decoded values of a codes frame (see :mod:`.transforms`), so a bin counts as
  e.g. "< 23" when its representative value is; rules whose thresholds sit on bin edges are
  exact, others approximate. :func:`rejection_sample` resamples until ``n`` valid records.

Privacy:
    Raw cleaning is a per-record filter applied before any DP step; it is 1-stable (adding or
    removing one raw record adds or removes at most one cleaned record), so a mechanism that is
    ε-DP on the cleaned data is ε-DP on the raw data under add/remove neighbours. How many
    records were removed is itself a statistic of the private data: this module never logs or
    returns such counts for raw data. Synthetic rejection only reads samples of a DP model, so
    it is post-processing and costs no budget.

References:
    Hod & Canetti (2024), Sections 4.8.1 (raw data constraints) and 4.8.2 (synthetic data
    constraints).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.rules import Constraint, check_frame, evaluate
from privlab.mechanisms.tabular.schema import RawSchema
from privlab.mechanisms.tabular.transforms import Transformation
from privlab.platform.core.errors import ExecutionError, SchemaError, SpecError
from privlab.platform.core.validation import BOOLEAN, ConstrainedParams, InstanceOf, Unconstrained

logger = logging.getLogger(__name__)


class RecordFilter(Protocol):
    """Anything that marks the valid rows of a frame (used by :func:`rejection_sample`)."""

    def valid_mask(self, frame: pd.DataFrame) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConstraintSet(ConstrainedParams):
    """Rules over one raw schema; a record matching *any* rule is removed.

    Args:
        schema: The raw schema the rules are written against.
        constraints: The parsed rules.
        drop_missing: For raw cleaning: drop records with a missing value in any schema
            column before validation (Section 4.8.1, rule 1). Otherwise a missing value is an
            error.
    """

    schema: RawSchema
    constraints: tuple[Constraint, ...] = ()
    drop_missing: bool = False

    _parameter_constraints: ClassVar = {"schema": [InstanceOf(RawSchema, "a RawSchema")],
                                        "constraints": [Unconstrained()],  # parsed rules, checked against schema
                                        "drop_missing": [BOOLEAN]}
    _type_error: ClassVar = SpecError  # built from a spec's constraints table: every mistake is the spec's

    def _check_together(self) -> None:
        texts = [c.text for c in self.constraints]
        repeated = sorted({t for t in texts if texts.count(t) > 1})
        if repeated:
            raise SpecError(f"constraints must be distinct; repeated: {', '.join(map(repr, repeated))}")
        for constraint in self.constraints:
            missing = [c for c in constraint.columns if c not in self.schema]
            if missing:
                raise SpecError(f"constraint {constraint.text!r} reads column(s) {missing} that the schema lacks")

    @classmethod
    def from_rules(cls, rules: Sequence[str], *, schema: RawSchema, drop_missing: bool = False) -> ConstraintSet:
        """Parse every rule (see :meth:`Constraint.parse`)."""
        if isinstance(rules, str):
            raise TypeError("rules must be a list of strings, not one string")
        return cls(
            schema=schema,
            constraints=tuple(Constraint.parse(rule, schema=schema) for rule in rules),
            drop_missing=drop_missing,
        )

    @classmethod
    def from_spec(
        cls, table: Mapping[str, Any], *, schema: RawSchema, where: str, allow_drop_missing: bool = True
    ) -> ConstraintSet:
        """Build from a spec table ``{rules = ["...", ...], drop_missing = false}``.

        Raises:
            SpecError: Unknown keys, a non-list ``rules``, a bad rule (naming
                ``where.rules[i]``), or ``drop_missing`` where it is not allowed.
        """
        if not isinstance(table, Mapping):
            raise SpecError(f"{where} must be a table with 'rules'")
        allowed = {"rules", "drop_missing"} if allow_drop_missing else {"rules"}
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: "
                            f"{', '.join(sorted(allowed))}")
        rules = table.get("rules", [])
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise SpecError(f"{where}.rules ({rules!r}) must be a list of strings")
        drop_missing = table.get("drop_missing", False)
        if not isinstance(drop_missing, bool):
            raise SpecError(f"{where}.drop_missing ({drop_missing!r}) must be true or false")
        parsed = []
        for i, rule in enumerate(rules):
            try:
                parsed.append(Constraint.parse(rule, schema=schema))
            except SpecError as error:
                raise SpecError(f"{where}.rules[{i}]: {error}") from error
        try:
            return cls(schema=schema, constraints=tuple(parsed), drop_missing=drop_missing)
        except SpecError as error:
            raise SpecError(f"{where}: {error}") from error

    def __len__(self) -> int:
        return len(self.constraints)

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(c.text for c in self.constraints)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column any rule reads."""
        return tuple(dict.fromkeys(name for c in self.constraints for name in c.columns))

    def matches(self, frame: pd.DataFrame) -> np.ndarray:
        """Mask of the records matching at least one rule (the records to remove).

        Args:
            frame: A typed frame (``RawSchema.validate`` or ``Transformation.decode`` output)
                holding at least the columns the rules read.

        Raises:
            SchemaError: A missing column, a NaN, or a column of the wrong kind (naming it).
        """
        check_frame(frame, self.columns, self.schema, what="constraints")
        result = np.zeros(len(frame), dtype=bool)
        for constraint in self.constraints:
            result |= evaluate(constraint.expression, frame, self.schema)
        return result

    def matches_by_rule(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """One mask per rule (diagnostics on public or synthetic data only: on private data
        the counts are non-private statistics)."""
        check_frame(frame, self.columns, self.schema, what="constraints")
        return {c.text: evaluate(c.expression, frame, self.schema) for c in self.constraints}

    def valid_mask(self, frame: pd.DataFrame) -> np.ndarray:
        """Mask of the records matching no rule (the records to keep)."""
        return ~self.matches(frame)

    def filter(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The records matching no rule, with a fresh index."""
        return frame.loc[self.valid_mask(frame)].reset_index(drop=True)

    def clean(self, raw: pd.DataFrame, *, source: str = "raw data") -> pd.DataFrame:
        """Raw cleaning: drop missing (if enabled), validate, remove records matching a rule.

        Args:
            raw: The raw frame.
            source: What the frame is, for error messages.

        Returns:
            The typed, cleaned frame (fresh index).

        Raises:
            SchemaError: The schema validation fails, or no record is left.

        Privacy:
            A per-record filter before any DP step (see the module docstring); it reports no
            counts.
        """
        if not isinstance(raw, pd.DataFrame):
            raise TypeError(f"{source}: expected a pandas DataFrame, got {type(raw).__name__}")
        if self.drop_missing:
            present = [n for n in self.schema.names if n in raw.columns]
            raw = raw.dropna(subset=present)
        typed = self.schema.validate(raw, source=source)
        cleaned = self.filter(typed)
        if len(cleaned) == 0:
            raise SchemaError(
                f"{source}: every record matches a constraint; nothing is left after cleaning",
                problem="nothing_left",
            )
        return cleaned

    def on_codes(self, transformation: Transformation) -> CodeConstraints:
        """These rules evaluated on codes frames of ``transformation`` (synthetic rejection).

        Raises:
            SpecError: ``transformation`` transforms a different schema.
        """
        if transformation.schema != self.schema:
            raise SpecError("the transformation and the constraints must share one raw schema")
        return CodeConstraints(constraints=self, transformation=transformation)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CodeConstraints:
    """A :class:`ConstraintSet` applied to codes frames through their representative values.

    A coded record is invalid when its decoded record (``Transformation.decode`` without an
    rng: representative value per code) matches any rule.
    """

    constraints: ConstraintSet
    transformation: Transformation

    def matches(self, codes: pd.DataFrame) -> np.ndarray:
        """Mask of the coded records whose decoded record matches a rule.

        Raises:
            SchemaError: ``codes`` is not a valid codes frame of the transformation's domain.
        """
        if not isinstance(codes, pd.DataFrame):
            raise TypeError(f"codes: expected a pandas DataFrame, got {type(codes).__name__}")
        if len(self.constraints) == 0:
            self.transformation.domain.validate(codes, what="codes frame")
            return np.zeros(len(codes), dtype=bool)
        return self.constraints.matches(self.transformation.decode(codes))

    def valid_mask(self, codes: pd.DataFrame) -> np.ndarray:
        return ~self.matches(codes)

    def filter(self, codes: pd.DataFrame) -> pd.DataFrame:
        """The valid coded records, with a fresh index."""
        return codes.loc[self.valid_mask(codes)].reset_index(drop=True)


def rejection_sample(
    sample_fn: Callable[[int], pd.DataFrame],
    n: int,
    constraints: RecordFilter,
    *,
    max_rounds: int,
    min_acceptance: float = 0.01,
    allow_shortfall: bool = False,
) -> pd.DataFrame:
    """Sample until ``n`` records pass ``constraints``.

    Round 1 draws ``n`` records; each later round draws ``ceil(remaining / rate)`` where
    ``rate`` is the acceptance rate so far, floored at ``min_acceptance`` (so a round draws at
    most ``remaining / min_acceptance`` records). The first ``n`` valid records, in draw order,
    are returned. Randomness lives in ``sample_fn`` (e.g. a closure over a seeded generator),
    so the result is deterministic given that generator.

    Args:
        sample_fn: ``sample_fn(k)`` returns a frame of exactly ``k`` records (same columns
            every round).
        n: Number of valid records wanted (>= 1).
        constraints: Marks valid rows (``ConstraintSet`` for raw-like samples,
            ``ConstraintSet.on_codes(...)`` for codes frames).
        max_rounds: The most rounds to draw (>= 1).
        min_acceptance: Floor of the acceptance-rate estimate, in (0, 1].
        allow_shortfall: When the rounds run out, return the fewer than ``n`` valid records
            found (and log a warning) instead of raising.

    Returns:
        ``n`` valid records (fewer only with ``allow_shortfall``), with a fresh index.

    Raises:
        SpecError: Invalid ``n``, ``max_rounds`` or ``min_acceptance``.
        SchemaError: ``sample_fn`` returned the wrong number of rows or different columns, or
            ``constraints`` returned a mask of the wrong shape.
        ExecutionError: Fewer than ``n`` valid records after ``max_rounds`` rounds (the message
            gives the counts and the acceptance rate).

    Privacy:
        Post-processing of samples from a DP model; reads no private data and costs no budget.
    """
    for label, value in (("n", n), ("max_rounds", max_rounds)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise SpecError(f"{label} ({value!r}) must be an integer >= 1")
    if isinstance(min_acceptance, bool) or not isinstance(min_acceptance, (int, float)) or not 0 < min_acceptance <= 1:
        raise SpecError(f"min_acceptance ({min_acceptance!r}) must be in (0, 1]")
    kept: list[pd.DataFrame] = []
    accepted = drawn = rounds = 0
    columns: list[Any] | None = None
    while accepted < n and rounds < max_rounds:
        remaining = n - accepted
        rate = max(accepted / drawn, min_acceptance) if drawn else 1.0
        size = int(math.ceil(remaining / rate))
        batch = sample_fn(size)
        if not isinstance(batch, pd.DataFrame) or len(batch) != size:
            got = f"{len(batch)} rows" if isinstance(batch, pd.DataFrame) else type(batch).__name__
            raise SchemaError(f"rejection_sample: sample_fn({size}) must return a DataFrame of {size} rows, got {got}")
        if columns is None:
            columns = list(batch.columns)
        elif list(batch.columns) != columns:
            raise SchemaError(f"rejection_sample: sample_fn returned columns {list(batch.columns)}, expected {columns}")
        mask = np.asarray(constraints.valid_mask(batch))
        if mask.dtype != bool or mask.shape != (size,):
            raise SchemaError(f"rejection_sample: the constraints returned a mask of shape {mask.shape} "
                              f"and dtype {mask.dtype}, expected ({size},) bool")
        kept.append(batch.loc[mask])
        accepted += int(mask.sum())
        drawn += size
        rounds += 1
    result = pd.concat(kept).iloc[:n].reset_index(drop=True)
    if accepted < n:
        message = (
            f"rejection_sample: only {accepted} of {n} requested records passed the constraints after "
            f"{rounds} round(s) and {drawn} draws (acceptance rate {accepted / drawn:.4g})"
        )
        if not allow_shortfall:
            raise ExecutionError(message + "; raise max_rounds, or check that the constraints leave the model "
                                           "enough mass")
        logger.warning("%s; returning a shortfall of %d", message, n - accepted)
    return result
