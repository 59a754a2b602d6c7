"""``privlab evaluate`` reads its candidate as the space reads its data (issue 46 item 4)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from privlab.mechanisms.release.evaluate import read_candidate
from privlab.mechanisms.tabular.space import load_release_space

ROOT = Path(__file__).resolve().parents[1]
ACS = ROOT / "experiments" / "acs" / "space.toml"
ADULT = ROOT / "experiments" / "plausible_deniability" / "adult_space.toml"


def test_a_raw_acs_file_as_the_candidate_reads_its_missing_marker_as_missing(tmp_path: Path) -> None:
    """ACS writes "N" for not applicable (the space's na_values): a raw data file given as the
    candidate was read as plain CSV, and 27,253 MSP values "N" were reported outside the
    declared categories."""
    space = load_release_space(ACS)
    names = list(space.schema.names)
    row = {name: "1" for name in names} | {"AGEP": "10", "MSP": "N", "PINCP": "N", "DENSITY": "2731.2"}
    path = tmp_path / "candidate.csv"
    path.write_text("PUMA," + ",".join(names) + "\n" + "01-01301," + ",".join(row[n] for n in names) + "\n")
    candidate = read_candidate(path, space=space, what="--candidate")
    assert candidate["MSP"].isna().all() and candidate["PINCP"].isna().all()
    assert pd.api.types.is_numeric_dtype(candidate["PINCP"]) and candidate["AGEP"].tolist() == [10]


def test_a_headerless_space_reads_a_released_file_with_its_header_and_a_raw_file_without(tmp_path: Path) -> None:
    space = load_release_space(ADULT)
    released = tmp_path / "released.csv"  # what a release or pd-generate writes: a header, no padding
    released.write_text(",".join(space.schema.names) + "\n"
                        "39,State-gov,Bachelors,Never-married,Adm-clerical,Not-in-family,White,Male,40,"
                        "North America,<=50K\n")
    read = read_candidate(released, space=space, what="--candidate")
    assert list(read.columns) == list(space.schema.names) and read["age"].tolist() == [39]
    raw = tmp_path / "adult.test"  # the space's own raw format: no header, ", " and trailing dots
    raw.write_text("39, ?, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, "
                   "40, United-States, <=50K.\n")
    read = read_candidate(raw, space=space, what="--candidate")
    assert read["age"].tolist() == [39] and read["workclass"].isna().all() and read["income"].tolist() == ["<=50K"]
