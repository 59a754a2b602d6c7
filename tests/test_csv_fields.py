"""Ragged CSV records are a schema error before any work, never silent (issue 30 item 7)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from privlab.mechanisms.release.firewall import load_private_data
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.core.columns import Schema
from privlab.platform.core.csv_fields import check_field_counts, count_field_mismatches
from privlab.platform.core.errors import SCHEMA_PROBLEMS, SchemaError
from privlab.platform.experiment.datasets import FileDataset

SPACE = Path(__file__).resolve().parents[1] / "experiments" / "births" / "space.toml"
HEADER = "mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth\n"
GOOD = ["33,2,39,False,3490,2019-03-15", "34,3,31,True,1055,2019-07-15", "29,1,40,True,3311,2019-01-02"]
# Record 2 has an extra field (7777), record 4 lacks its date; both values must never be echoed.
RAGGED = [GOOD[0], "31,1,38,False,3205,2019-02-11,7777", GOOD[1], "27,1,40,True,3150", GOOD[2]]


def _write(path: Path, lines: list[str], header: str = HEADER) -> Path:
    path.write_text(header + "\n".join(lines) + "\n")
    return path


def test_counts_records_with_too_many_and_too_few_fields(tmp_path: Path) -> None:
    found = count_field_mismatches(_write(tmp_path / "d.csv", RAGGED))
    assert found is not None
    assert (found.expected, found.too_many, found.too_few) == (6, 1, 1)
    assert (found.first_too_many, found.first_too_few) == ((2,), (4,))
    # What pandas reads without a word: the short record padded with a missing date.
    assert pd.read_csv(tmp_path / "d.csv", index_col=False, on_bad_lines="skip")["date_of_birth"].isna().any()


def test_quotes_blank_lines_gzip_and_headerless_files_are_read_as_pandas_reads_them(tmp_path: Path) -> None:
    quoted = tmp_path / "q.csv"
    quoted.write_text('a,b,c\n1,"x,y",3\n\n4,"two\nlines",6\n')
    assert count_field_mismatches(quoted).ragged == 0  # type: ignore[union-attr]
    zipped = tmp_path / "d.csv.gz"
    zipped.write_bytes(gzip.compress((HEADER + "\n".join(RAGGED) + "\n").encode()))
    assert count_field_mismatches(zipped).ragged == 2  # type: ignore[union-attr]
    headerless = _write(tmp_path / "h.data", ["1, 2, 3", "4, 5", "6, 7, 8, 9", "10, 11, 12"], header="junk\n")
    found = count_field_mismatches(headerless, header=False, n_columns=3, skip_rows=1)
    assert found is not None and (found.too_few, found.too_many) == (1, 1)
    assert (found.first_too_few, found.first_too_many) == ((2,), (3,))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert count_field_mismatches(empty) is None  # pandas' own error names that problem


def test_research_message_names_file_counts_and_records_never_values(tmp_path: Path) -> None:
    path = _write(tmp_path / "private.csv", RAGGED)
    space = load_release_space(SPACE)
    with pytest.raises(SchemaError) as raised:
        space.read_raw(path, what="data file 'private.csv'")
    assert raised.value.problem == "ragged" and raised.value.column is None
    message = str(raised.value)
    assert message.startswith("data file 'private.csv' has 2 record(s) whose number of fields differs from "
                              "the header line's 6: 1 with more fields (record 2) and 1 with fewer fields "
                              "(record 4)")
    assert "7777" not in message and "3150" not in message and "3205" not in message


def test_release_withholds_counts_positions_and_values(tmp_path: Path) -> None:
    path = _write(tmp_path / "private.csv", RAGGED)
    with pytest.raises(SchemaError) as raised:
        load_private_data(path, load_release_space(SPACE))
    message = str(raised.value).replace(str(path), "PATH")
    assert message.startswith(f"private data 'PATH': the data holds {SCHEMA_PROBLEMS['ragged']}")
    assert "withheld" in message
    for leaked in ("7777", "3150", "record 2", "record 4", "2 record", "1 with"):
        assert leaked not in message


def test_a_research_dataset_file_with_a_short_record_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.csv", ["1,2", "3", "5,6"], header="x,y\n")
    schema = Schema.from_spec({"x": {"type": "integer", "lower": 0, "upper": 9},
                               "y": {"type": "integer", "lower": 0, "upper": 9}}, where="columns")
    with pytest.raises(SchemaError, match=r"d.csv' has 1 record\(s\) whose number of fields differs from the "
                                          r"header line's 2: 1 with fewer fields \(record 2\)"):
        FileDataset(path=path, format="csv", schema=schema).load()


def test_check_passes_on_the_public_births_sample() -> None:
    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "nvss" / \
        "birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"
    if not path.is_file():
        pytest.skip("public data not available")
    check_field_counts(path, what="births sample")
