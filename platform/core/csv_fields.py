"""Ragged CSV records: rows whose number of fields differs from the header's, found before reading.

pandas' C parser reads a record with too few fields as one with missing values (which cleaning
then drops) and, with ``index_col=False``, may drop a record's extra fields; either way the run
goes on without a word. :func:`check_field_counts` counts such records first, with pyarrow's CSV
parser (one pass, no value converted; it costs well under a pandas read of the same file, see
``benchmarks/csv_field_check.py``), and raises a :class:`SchemaError` (``problem="ragged"``)
naming the file, how many records have too many and too few fields and where the first ones
are. The message never quotes a record; release mode withholds the counts and positions too
(``mechanisms/release/firewall.py`` reports only the problem). Part of the DP core's layer.

Privacy:
    A check of the file's shape before any statistic is computed: it spends no budget and
    changes neither the data nor the neighbouring relation.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from privlab.platform.core.errors import SchemaError

__all__ = ["FieldCounts", "check_field_counts", "count_field_mismatches"]

_LOG = logging.getLogger(__name__)

#: How many positions of ragged records a (research-mode) message names.
FIRST_RECORDS = 5


@dataclasses.dataclass(frozen=True)
class FieldCounts:
    """The records whose number of fields differs from ``expected``.

    ``first_too_many`` and ``first_too_few`` are the positions of the first such records among
    the data records (counted from 1, the header and blank lines not counted, as a pandas
    frame's row ``i`` is record ``i + 1``), at most :data:`FIRST_RECORDS` of each kind.
    """

    expected: int
    too_many: int = 0
    too_few: int = 0
    first_too_many: tuple[int, ...] = ()
    first_too_few: tuple[int, ...] = ()

    @property
    def ragged(self) -> int:
        return self.too_many + self.too_few


def count_field_mismatches(path: str | Path, *, delimiter: str = ",", header: bool = True,
                           n_columns: int | None = None, skip_rows: int = 0) -> FieldCounts | None:
    """Count the records of a CSV file (optionally gzipped) whose number of fields is wrong.

    Args:
        path: The file; a ``.gz`` suffix is decompressed.
        delimiter: The field separator (quotes are ``"``, doubled inside a quoted field; a
            quoted field may hold the delimiter and newlines, as pandas reads them).
        header: Whether the first line (after ``skip_rows``) names the columns; its number of
            fields is then the expected one.
        n_columns: The expected number of fields of a headerless file (required then).
        skip_rows: Lines to skip at the start.

    Returns:
        The counts, or None when pyarrow cannot parse the file at all (empty, unbalanced quotes,
        no header): the caller's own reader then reports what is wrong.
    """
    if not header and (n_columns is None or n_columns < 1):
        raise ValueError(f"n_columns ({n_columns!r}) must be a positive integer for a headerless file")
    positions: dict[str, list[int]] = {"many": [], "few": []}
    counts = {"many": 0, "few": 0}
    expected: list[int] = []

    def handle(row: pa_csv.InvalidRow) -> str:
        kind = "many" if row.actual_columns > row.expected_columns else "few"
        counts[kind] += 1
        if len(positions[kind]) < FIRST_RECORDS and row.number is not None:  # pyarrow counts skipped rows, header
            positions[kind].append(int(row.number) - skip_rows - int(header))
        if not expected:
            expected.append(row.expected_columns)
        return "skip"

    names = None if header else [f"f{i}" for i in range(n_columns)]  # type: ignore[arg-type]
    read = pa_csv.ReadOptions(use_threads=False, skip_rows=skip_rows, column_names=names,
                              autogenerate_column_names=header)
    parse = pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True, invalid_row_handler=handle)
    convert = pa_csv.ConvertOptions(include_columns=["f0"], column_types={"f0": pa.binary()})
    try:
        table = pa_csv.read_csv(Path(path), read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as error:  # the caller's reader names the problem
        _LOG.debug("field-count check skipped for %s: %s", path, type(error).__name__)
        return None
    del table
    return FieldCounts(expected=expected[0] if expected else (n_columns or 0), too_many=counts["many"],
                       too_few=counts["few"], first_too_many=tuple(positions["many"]),
                       first_too_few=tuple(positions["few"]))


def _records(numbers: tuple[int, ...], total: int) -> str:
    shown = ", ".join(map(str, numbers))
    return f" (record{'s' if len(numbers) > 1 else ''} {shown}{', …' if total > len(numbers) else ''})" \
        if numbers else ""


def check_field_counts(path: str | Path, *, what: str, delimiter: str = ",", header: bool = True,
                       n_columns: int | None = None, skip_rows: int = 0) -> None:
    """Raise unless every record of the CSV file has the expected number of fields.

    Args:
        path, delimiter, header, n_columns, skip_rows: As for :func:`count_field_mismatches`.
        what: What the file is, for the message (e.g. ``"private data 'x.csv'"``).

    Raises:
        SchemaError: Some records have too many or too few fields (``problem="ragged"``); the
            message gives the counts and the first records' positions (data records counted from
            1), never a record's text.
    """
    found = count_field_mismatches(path, delimiter=delimiter, header=header, n_columns=n_columns,
                                   skip_rows=skip_rows)
    if found is None or not found.ragged:
        return
    reference = "the header line's" if header else "the declared columns'"
    parts = []
    if found.too_many:
        parts.append(f"{found.too_many:,} with more fields{_records(found.first_too_many, found.too_many)}")
    if found.too_few:
        parts.append(f"{found.too_few:,} with fewer fields{_records(found.first_too_few, found.too_few)}")
    raise SchemaError(
        f"{what} has {found.ragged:,} record(s) whose number of fields differs from {reference} "
        f"{found.expected}: {' and '.join(parts)}, counting data records from 1. Extra fields would be "
        "dropped and missing ones read as missing values without a word; fix those records (quote a field "
        f"that contains the delimiter {delimiter!r}) or check how the file is described (delimiter, header, columns)",
        column=None, problem="ragged")
