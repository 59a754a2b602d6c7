"""The release firewall reads a data error's structured fields, never its message (issue 9 item 7)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from privlab.mechanisms.release.firewall import _withheld, load_private_data
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.core.errors import SCHEMA_PROBLEMS, SchemaError

SPACE = Path(__file__).resolve().parents[1] / "experiments" / "births" / "space.toml"


def test_the_withheld_message_comes_from_column_and_problem_not_from_the_text() -> None:
    space = load_release_space(SPACE)
    # A message that mentions bounds, rows and a value; the fields say: missing values in parity.
    error = SchemaError("column 'mother_age' has 3 value(s) outside bounds (first at row 17: 99)",
                        column="parity", problem="missing")
    withheld = _withheld(error, what="private data 'x.csv'", space=space)
    text = str(withheld)
    assert "column 'parity'" in text and SCHEMA_PROBLEMS["missing"] in text
    assert "mother_age" not in text and "17" not in text and "99" not in text
    unknown = _withheld(ValueError("row 5 holds 'abc'"), what="private data", space=space)
    assert "the data holds values that break the schema" in str(unknown) and "abc" not in str(unknown)
    with pytest.raises(ValueError, match="problem .* must be one of"):
        SchemaError("x", problem="weird")


@pytest.mark.parametrize(("column", "value", "problem"), [
    ("mother_age", 99, "bounds"),
    ("is_female", "maybe", "boolean"),
    ("date_of_birth", "2019-13-45", "date_format"),
    ("parity", 1.5, "fractional"),
])
def test_each_kind_of_bad_value_is_named_by_column_and_problem(tmp_path: Path, column: str, value: object,
                                                               problem: str) -> None:
    space = load_release_space(SPACE)
    frame = pd.DataFrame({"mother_age": [30, 31], "parity": [1, 2], "gestation_week": [39, 40],
                          "is_female": [True, False], "birth_weight": [3300, 3400],
                          "date_of_birth": ["2019-05-01", "2019-06-02"]})
    frame[column] = frame[column].astype(object)
    frame.loc[1, column] = value
    path = tmp_path / "private.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(SchemaError) as raised:
        load_private_data(path, space)
    message = str(raised.value).replace(str(path), "PATH")
    assert f"column {column!r}" in message and SCHEMA_PROBLEMS[problem] in message
    assert str(value) not in message and "first at row" not in message
