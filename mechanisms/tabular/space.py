"""A release space from TOML: raw schema, transformation space, constraints, projection space.

Everything dataset-specific of a release flow (column bounds, bins, rules) lives in one TOML
file, e.g. ``experiments/births/space.toml``; :func:`load_release_space` parses and checks it
strictly (unknown keys anywhere are a :class:`SpecError` naming their path). Format::

    name = "births"
    description = "..."

    [reader]                             # how the data files are written (optional; see .reader)
    na_values = ["?"]

    [schema.mother_age]                  # one table per raw column, in column order
    type = "integer"                     # integer | float | boolean | categorical | date
    lower = 12
    upper = 60

    [schema.date_of_birth]
    type = "date"
    format = "%Y-%m-%d"
    lower = "2019-01-01"
    upper = "2019-12-31"

    [transformations.birth_month]        # one table per output (coded) column, in order
    source = "date_of_birth"             # the raw column (defaults to the output name)
    [transformations.birth_month.alternatives.month]
    kind = "month"

    [transformations.mother_age.alternatives.coarse]
    kind = "bins"
    clip = [17, 46]
    edges = [18, 20, 25, 30, 35, 40, 43, 45]

    [raw_constraints]                    # records matching a rule are removed
    drop_missing = true
    rules = ["birth_weight < 500 or birth_weight > 5500"]

    [synthetic_constraints]
    rules = ["gestation_week < 29 and birth_weight > 2999"]

    [projection]                         # the face-privacy projection space (optional)
    min_count = [2, 3]
    algorithm = "algorithm3"

See :mod:`.schema`, :mod:`.transforms`, :mod:`.constraints` and :mod:`.face_privacy` for each
section's keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.mechanisms.tabular.constraints import CodeConstraints, ConstraintSet
from privlab.mechanisms.tabular.face_privacy import ALGORITHMS, MinOccurrenceProjection
from privlab.mechanisms.tabular.reader import ReaderOptions, read_raw_table
from privlab.mechanisms.tabular.schema import RawSchema
from privlab.mechanisms.tabular.transforms import Transformation, TransformationSpace
from privlab.platform.core.errors import SpecError
from privlab.platform.core.toml_files import read_toml

_TOP_LEVEL = frozenset(
    {"name", "description", "reader", "schema", "transformations", "raw_constraints", "synthetic_constraints",
     "projection"}
)
_REQUIRED = ("name", "schema", "transformations")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseSpace:
    """What a release flow may vary and must enforce, for one dataset.

    Args:
        name: The space's name.
        description: Free text.
        schema: The raw schema (public bounds and categories).
        transformations: The transformation alternatives and their configurations.
        raw_constraints: Cleaning rules for the raw data.
        synthetic_constraints: Rejection rules for synthetic records (on decoded values).
        min_counts: The face-privacy ``min_count`` values to try (empty: no projection).
        projection_algorithm: ``"algorithm3"`` or ``"algorithm4"``.
        reader: How the space's data files are written (:mod:`.reader`).
    """

    name: str
    description: str = ""
    schema: RawSchema
    transformations: TransformationSpace
    raw_constraints: ConstraintSet
    synthetic_constraints: ConstraintSet
    min_counts: tuple[int, ...] = ()
    projection_algorithm: str = "algorithm3"
    reader: ReaderOptions = ReaderOptions()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"name ({self.name!r}) must be a non-empty string")
        for label, part in (("transformations", self.transformations), ("raw_constraints", self.raw_constraints),
                            ("synthetic_constraints", self.synthetic_constraints)):
            if part.schema != self.schema:
                raise SpecError(f"{label} must be built on the space's schema")
        if self.synthetic_constraints.drop_missing:
            raise SpecError("synthetic_constraints: drop_missing only applies to raw data")
        for value in self.min_counts:
            MinOccurrenceProjection(min_count=value, algorithm=self.projection_algorithm)
        if len(set(self.min_counts)) != len(self.min_counts):
            raise SpecError(f"projection.min_count ({list(self.min_counts)!r}) must be distinct")

    def read_raw(self, path: str | Path, *, what: str) -> pd.DataFrame:
        """A data file of this space, read as its ``[reader]`` table says (not yet validated)."""
        return read_raw_table(path, schema=self.schema, options=self.reader, what=what)

    def clean_raw(self, raw: pd.DataFrame, *, source: str = "raw data") -> pd.DataFrame:
        """Validate and clean raw data with the raw constraints (see ``ConstraintSet.clean``)."""
        return self.raw_constraints.clean(raw, source=source)

    def transformation(self, config_id: str) -> Transformation:
        """The transformation of one configuration id."""
        return self.transformations.get(config_id)

    def synthetic_filter(self, transformation: Transformation) -> CodeConstraints:
        """The synthetic constraints on codes frames of ``transformation``."""
        return self.synthetic_constraints.on_codes(transformation)

    def projection(self, min_count: int | None) -> MinOccurrenceProjection | None:
        """The face-privacy projection of a configuration's ``min_count`` (None: no projection).

        The space's ``[projection] min_count`` list is the one source of truth: a configuration
        (a grid point, a shortlist entry, an evaluated configuration) may only name one of its
        values.

        Raises:
            SpecError: ``min_count`` is not in the space's list (or the space declares none).
        """
        if min_count is None:
            return None
        if min_count not in self.min_counts:
            declared = (f"declares min_count = {list(self.min_counts)}" if self.min_counts
                        else "declares no projection space")
            raise SpecError(f"min_count {min_count!r} is not in the space {self.name!r}, which {declared}; "
                            "use one of its values (or 0 for no projection), or add it to [projection] min_count")
        return MinOccurrenceProjection(min_count=min_count, algorithm=self.projection_algorithm)

    def projections(self) -> tuple[MinOccurrenceProjection, ...]:
        """One projection per ``min_count`` of the projection space."""
        return tuple(MinOccurrenceProjection(min_count=m, algorithm=self.projection_algorithm)
                     for m in self.min_counts)


def release_space_from_spec(document: Mapping[str, Any], *, where: str = "space") -> ReleaseSpace:
    """Build a :class:`ReleaseSpace` from a parsed TOML document (format in the module docstring).

    Raises:
        SpecError: Unknown or missing keys, or any invalid part (naming its path).
    """
    if not isinstance(document, Mapping):
        raise SpecError(f"{where} must be a table")
    unknown = sorted(set(document) - _TOP_LEVEL)
    if unknown:
        raise SpecError(f"{where}: unknown top-level key(s) {', '.join(map(repr, unknown))}; allowed: "
                        f"{', '.join(sorted(_TOP_LEVEL))}")
    missing = [key for key in _REQUIRED if key not in document]
    if missing:
        raise SpecError(f"{where}: missing key(s) {', '.join(missing)}")
    name = document["name"]
    description = document.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{where}.description ({description!r}) must be a string")
    reader = ReaderOptions.from_spec(document.get("reader", {}), where="reader")
    schema = RawSchema.from_spec(document["schema"], where="schema")
    transformations = TransformationSpace.from_spec(document["transformations"], schema=schema,
                                                    where="transformations")
    raw_constraints = ConstraintSet.from_spec(document.get("raw_constraints", {}), schema=schema,
                                              where="raw_constraints")
    synthetic_constraints = ConstraintSet.from_spec(document.get("synthetic_constraints", {}), schema=schema,
                                                    where="synthetic_constraints", allow_drop_missing=False)
    projection = document.get("projection", {})
    if not isinstance(projection, Mapping):
        raise SpecError("projection must be a table with 'min_count' (and optionally 'algorithm')")
    unknown = sorted(set(projection) - {"min_count", "algorithm"})
    if unknown:
        raise SpecError(f"projection: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: algorithm, "
                        "min_count")
    min_counts = projection.get("min_count", [])
    if not isinstance(min_counts, list):
        raise SpecError(f"projection.min_count ({min_counts!r}) must be a list of integers >= 2")
    algorithm = projection.get("algorithm", "algorithm3")
    if algorithm not in ALGORITHMS:
        raise SpecError(f"projection.algorithm ({algorithm!r}) must be one of {', '.join(ALGORITHMS)}")
    try:
        return ReleaseSpace(
            name=name,
            description=description,
            schema=schema,
            transformations=transformations,
            raw_constraints=raw_constraints,
            synthetic_constraints=synthetic_constraints,
            min_counts=tuple(min_counts),
            projection_algorithm=algorithm,
            reader=reader,
        )
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from error


def load_release_space(path: str | Path) -> ReleaseSpace:
    """Read and check a release-space TOML file.

    Raises:
        SpecError: The file is missing, is not valid TOML, or fails any check.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"release space file {str(path)!r} does not exist")
    document = read_toml(path, what="release space file")[0]  # not UTF-8, not TOML, too deep: a SpecError
    return release_space_from_spec(document, where=str(path))


def resolve_transformation(space: ReleaseSpace, transformation_id: str) -> Transformation:
    """The space's transformation for a (possibly partial) id: a column with one alternative
    may be omitted; a column with several must be named."""
    choices: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in transformation_id.split(","))):
        column, sep, option = part.partition("=")
        if not sep:
            raise SpecError(f"transformation id part {part!r} must look like column=alternative")
        choices[column.strip()] = option.strip()
    space_t = space.transformations
    unknown = sorted(set(choices) - set(space_t.names))
    if unknown:
        raise SpecError(f"transformation {transformation_id!r}: unknown column(s) {', '.join(unknown)}; "
                        f"the space has {', '.join(space_t.names)}")
    for column in space_t.names:
        if column not in choices:
            options = space_t.alternatives(column)
            if len(options) != 1:
                raise SpecError(f"transformation {transformation_id!r}: choose {column}= one of {', '.join(options)}")
            choices[column] = options[0]
    return space_t.get(space_t.id_of(choices))
