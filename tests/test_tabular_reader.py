"""A space's [reader] table: data files as published, with no pre-processing script (issue 13 item 2)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pytest

from privlab.mechanisms.release.firewall import load_private_data
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.core.errors import SchemaError, SpecError

SPACE = """
name = "census"
{reader}
[schema.age]
type = "integer"
lower = 17
upper = 90
[schema.workclass]
type = "categorical"
categories = ["Private", "State-gov", "Self-emp-not-inc"]
[schema."hours-per-week"]
type = "integer"
lower = 1
upper = 99
[schema.income]
type = "categorical"
categories = ["<=50K", ">50K"]
[transformations.age_group]
source = "age"
[transformations.age_group.alternatives.decades]
kind = "bins"
edges = [30, 40, 50, 60]
[transformations.work]
source = "workclass"
[transformations.work.alternatives.all]
kind = "categorical"
[transformations.hours]
source = "hours-per-week"
[transformations.hours.alternatives.coarse]
kind = "bins"
edges = [40, 41]
[transformations.income]
source = "income"
[transformations.income.alternatives.all]
kind = "categorical"
[raw_constraints]
drop_missing = true
"""

# UCI's adult.test as published: no header, ", " separators, "?" for missing, a trailing dot on
# every label, and a first line that is not a record.
UCI_TEST = """|1x3 Cross validator
25, Private, 40, <=50K.
38, State-gov, 50, >50K.
28, ?, 40, >50K.
44, Self-emp-not-inc, ?, <=50K.
"""
UCI_READER = """[reader]
header = false
na_values = ["?"]
strip_whitespace = true
strip_trailing_dot = true
skip_rows = 1
"""


def _space(tmp_path: Path, reader: str):
    path = tmp_path / "space.toml"
    path.write_text(textwrap.dedent(SPACE.format(reader=reader)))
    return load_release_space(path)


def test_a_headerless_uci_file_is_read_as_published(tmp_path: Path) -> None:
    data = tmp_path / "adult.test"
    data.write_text(UCI_TEST)
    space = _space(tmp_path, UCI_READER)
    raw = space.read_raw(data, what="test data")
    assert list(raw.columns) == ["age", "workclass", "hours-per-week", "income"]
    assert raw["workclass"].tolist() == ["Private", "State-gov", None, "Self-emp-not-inc"]
    assert raw["income"].tolist() == ["<=50K", ">50K", ">50K", "<=50K"]
    assert raw["hours-per-week"].isna().tolist() == [False, False, False, True]
    cleaned = space.clean_raw(raw)  # drop_missing removes the two records with a "?"
    assert cleaned["age"].tolist() == [25, 38]
    # The release reads it the same way, behind the firewall.
    pd.testing.assert_frame_equal(load_private_data(data, space), cleaned)


def test_without_the_reader_table_the_same_file_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "adult.csv"
    data.write_text("age,workclass,hours-per-week,income\n25, Private, ?, <=50K.\n")
    space = _space(tmp_path, "")
    with pytest.raises(SchemaError, match=r"column 'hours-per-week' \(integer in the schema\) holds text that is "
                                          r"not a number; declare the file's missing-value markers in \[reader\]"):
        space.read_raw(data, what="data")
    fixed = _space(tmp_path, '[reader]\nna_values = ["?"]\nstrip_whitespace = true\n')
    assert fixed.read_raw(data, what="data")["hours-per-week"].isna().all()


def test_parquet_text_columns_get_the_same_clean_ups(tmp_path: Path) -> None:
    data = tmp_path / "adult.parquet"
    pd.DataFrame({"age": [25, 38], "workclass": [" Private", " ?"], "hours-per-week": [40, 50],
                  "income": [" <=50K.", " >50K."]}).to_parquet(data)
    raw = _space(tmp_path, UCI_READER.replace("skip_rows = 1\n", "")).read_raw(data, what="data")
    assert raw["workclass"].tolist() == ["Private", None] and raw["income"].tolist() == ["<=50K", ">50K"]


@pytest.mark.parametrize(("reader", "pattern"), [
    ("[reader]\nheadr = false\n", r"reader: unknown key\(s\) 'headr'; allowed keys: header, delimiter"),
    ("[reader]\ndelimiter = ', '\n", r"reader.delimiter \(', '\) must be one character"),
    ("[reader]\nna_values = '?'\n", r"reader.na_values \('\?'\) must be a list of strings"),
    ("[reader]\nheader = 'no'\n", r"reader.header \('no'\) must be true or false"),
    ("[reader]\nskip_rows = -1\n", r"reader.skip_rows \(-1\) must be an int >= 0"),
])
def test_bad_reader_options_are_spec_errors(tmp_path: Path, reader: str, pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        _space(tmp_path, reader)


def test_a_headerless_file_read_with_a_header_is_explained_and_never_echoed_in_release(tmp_path: Path) -> None:
    """Issue 13 item 11: research mode shows the header line (public data) and says why; the
    release never repeats the first record of a private file."""
    data = tmp_path / "adult.data"
    data.write_text("39, State-gov, 13, <=50K\n50, Private, 45, >50K\n")
    space = _space(tmp_path, "")
    with pytest.raises(SchemaError, match=r"the file's header line reads: 39,  State-gov,  13,  <=50K \(shown "
                                          r"because research data is public; a release never shows it\)\. If that "
                                          r"is a record, the file has no header line: set header = false"):
        space.clean_raw(space.read_raw(data, what="data"))
    with pytest.raises(SchemaError) as caught:
        load_private_data(data, space)
    message = str(caught.value)
    assert str(data) in message
    # The file's path is public and pytest's temporary folder can be numbered pytest-39…: look
    # for the record's values everywhere else.
    outside_path = message.replace(str(data), "<path>")
    assert "State-gov" not in outside_path and "39" not in outside_path and "<=50K" not in outside_path
    assert "lacks the schema column(s) 'age', 'workclass', 'hours-per-week', 'income'" in message
    assert "if the file has no header line, set header = false" in message
