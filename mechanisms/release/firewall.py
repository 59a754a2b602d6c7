"""Reading the private data behind the privacy firewall.

Errors name the column and the kind of problem, never rows, values or counts: anything computed
from the private data without DP must not reach a message, a log or a file.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from privlab.mechanisms.tabular.space import ReleaseSpace
from privlab.platform.core.errors import SCHEMA_PROBLEMS, SchemaError, SpecError


def _withheld(error: Exception, *, what: str, space: ReleaseSpace) -> SchemaError:
    """A data error's message without anything computed from the data (rows, values, counts).

    Built from the error's structured fields (:class:`SchemaError` ``column`` and ``problem``),
    never from its message, which names rows, values and counts.
    """
    problem = SCHEMA_PROBLEMS.get(getattr(error, "problem", None) or "", "values that break the schema")
    column = getattr(error, "column", None)
    column = column if column in space.schema.names else None
    where = f"column {column!r}" if column else "the data"
    bounds = ""
    if column is not None:
        declared = next(c for c in space.schema.columns if c.name == column)
        if getattr(declared, "lower", None) is not None:
            bounds = f" (public bounds [{declared.lower}, {declared.upper}])"
    return SchemaError(
        f"{what}: {where}{bounds} holds {problem}. In release mode the offending rows, values and counts "
        "are withheld because they are computed from the private data; inspect the file inside the "
        "secure environment and fix it, or correct the space's schema", column=column, problem=None)


def load_private_data(path: Path, space: ReleaseSpace) -> pd.DataFrame:
    """Read, validate and clean the private data; errors never show rows, values or counts.

    Raises:
        SpecError: The file is missing or of an unknown format.
        SchemaError: Empty data, missing columns, values outside the schema, nothing left.
    """
    what = f"private data {str(path)!r}"
    try:
        raw = space.read_raw(path, what=what)
    except pd.errors.EmptyDataError:
        raise SchemaError(f"{what} is empty: it has no header and no records") from None
    except SpecError:
        raise
    except SchemaError as error:  # names the column, never values
        raise _withheld(error, what=what, space=space) from None
    except Exception as error:  # parser messages quote lines of the file
        raise SchemaError(f"{what} could not be read as {path.suffix or 'a table'} "
                          f"({type(error).__name__}; details withheld in release mode)") from None
    if len(raw) == 0:
        raise SchemaError(f"{what} has no records")
    missing = [c for c in space.schema.names if c not in raw.columns]
    if missing:
        hint = ("; if the file has no header line, set header = false in the space's [reader] table"
                if len(missing) == len(space.schema.names) and space.reader.header else "")
        raise SchemaError(f"{what} lacks the schema column(s) {', '.join(map(repr, missing))}; the release space "
                          f"needs {', '.join(space.schema.names)}{hint}")
    for column in space.schema.names:  # the cleaning rules would drop every record: name the column instead
        if raw[column].isna().all():
            raise SchemaError(f"{what}: column {column!r} is empty (no value in any record); check that the file "
                              "is the right one and that the column was exported")
    try:
        return space.clean_raw(raw, source="private data")
    except (SchemaError, SpecError, TypeError, ValueError) as error:
        raise _withheld(error, what=what, space=space) from None
