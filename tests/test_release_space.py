"""The births release space (experiments/births/space.toml) and its loader's strictness."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.tabular.face_privacy import project_min_occurrence, smallest_count
from privlab.mechanisms.tabular.space import ReleaseSpace, load_release_space
from privlab.platform.core.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "experiments" / "births" / "space.toml"
NVSS = Path(__file__).resolve().parents[2] / "shared" / "data" / "nvss"
NVSS_10K = NVSS / "birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"

# Section 4.7.1 of the paper, with its two typos read as omissions (parity "5", gestation "30"
# and "41"; see the comments in space.toml).
PAPER_LABELS = {
    ("birth_month", "month"): [str(m) for m in range(1, 13)],
    ("mother_age", "coarse"): ["<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<"],
    ("mother_age", "medium"): ["<18", "18-19", "20-24", "25-29", "30-34", "35-36", "37-39", "40-42", "43-44", "44<"],
    ("mother_age", "fine"): ["<18", *map(str, range(18, 45)), "44<"],
    ("parity", "coarse"): ["1", "2-3", "4-6", "7-10", "10<"],
    ("parity", "fine"): [*map(str, range(1, 11)), "10<"],
    ("gestation_week", "coarse"): ["<29", "29-31", "32-33", "34-36", "37-41", "41<"],
    ("gestation_week", "fine"): ["<29", *map(str, range(29, 42)), "41<"],
    ("birth_sex", "MF"): ["M", "F"],
    ("birth_weight", "grams100"): ["<1500", *(f"{g}-{g + 99}" for g in range(1500, 4500, 100)), "4499<"],
}


@pytest.fixture(scope="module")
def births() -> ReleaseSpace:
    return load_release_space(BIRTHS)


def test_the_births_space_has_the_papers_alternatives(births: ReleaseSpace) -> None:
    space = births.transformations
    assert space.names == ("birth_month", "mother_age", "parity", "gestation_week", "birth_sex", "birth_weight")
    assert len(space) == 12 and len(set(space.ids())) == 12
    for (column, option), labels in PAPER_LABELS.items():
        assert list(space.columns[space.names.index(column)][option].domain.labels) == labels, (column, option)
    assert sum(len(space.alternatives(c)) for c in space.names) == len(PAPER_LABELS)
    # The table's names map explicitly to the NVSS columns.
    sources = {c.name: c.source for c in space.columns}
    assert sources["birth_month"] == "date_of_birth" and sources["birth_sex"] == "is_female"
    assert births.schema.names == ("mother_age", "parity", "gestation_week", "is_female", "birth_weight",
                                   "date_of_birth")
    assert births.min_counts == (2, 3) and [p.min_count for p in births.projections()] == [2, 3]


def test_the_births_constraints_are_the_papers(births: ReleaseSpace) -> None:
    assert births.raw_constraints.drop_missing
    assert len(births.raw_constraints) == 9  # rules 2-10 of Section 4.8.1 (rule 1 is drop_missing)
    assert len(births.synthetic_constraints) == 4
    assert set(births.synthetic_constraints.rules) <= set(births.raw_constraints.rules)
    assert "gestation_week < 29 and birth_weight > 2999" in births.synthetic_constraints.rules


@pytest.mark.usefixtures("nvss_10k")  # skipped with a reason if absent, an error under CI=true
def test_nvss_10k_cleans_and_transforms_under_every_configuration(births: ReleaseSpace) -> None:
    raw = pd.read_csv(NVSS_10K)
    cleaned = births.clean_raw(raw, source=NVSS_10K.name)
    assert 0.97 * len(raw) < len(cleaned) < len(raw)
    assert not births.raw_constraints.matches(cleaned).any()
    assert cleaned["birth_weight"].between(500, 5500).all() and cleaned["gestation_week"].between(22, 44).all()
    rng = np.random.default_rng(2024)
    for config_id in births.transformations.ids():
        transformation = births.transformation(config_id)
        codes = transformation.apply(cleaned)
        domain = transformation.domain
        assert codes.shape == (len(cleaned), 6) and list(codes.columns) == list(domain.names)
        pd.testing.assert_frame_equal(domain.validate(codes, what=config_id), codes)
        # Independent check of the bins: a code's label contains the clipped raw value.
        weights = cleaned["birth_weight"].clip(1400, 4600).to_numpy()
        expected = np.clip((weights - 1400) // 100, 0, 31)
        assert (codes["birth_weight"].to_numpy() == expected).all()
        assert (codes["birth_month"].to_numpy() + 1 == cleaned["date_of_birth"].dt.month.to_numpy()).all()
        assert (codes["birth_sex"].to_numpy() == cleaned["is_female"].to_numpy()).all()
        # Round trips: drawn values are schema-valid raw data with the same codes; representative
        # values re-encode to the same codes.
        drawn = transformation.decode(codes, rng=rng)
        pd.testing.assert_frame_equal(transformation.apply(drawn), codes)
        representative = transformation.decode(codes)
        for transform in transformation.columns:
            assert (transform.encode(representative[transform.column.name]) == codes[transform.name]).all()
        # Synthetic constraints evaluate on codes; the face-privacy projection applies.
        valid = births.synthetic_filter(transformation).valid_mask(codes)
        assert valid.shape == (len(codes),) and valid.mean() > 0.99
        projected = project_min_occurrence(codes, min_count=3, rng=rng, domain=domain)
        assert len(projected) == len(codes) and smallest_count(projected) >= 3


MINI = """
name = "mini"
[schema.age]
type = "integer"
lower = 10
upper = 60
[schema.female]
type = "boolean"
[transformations.age_group.alternatives.coarse]
kind = "bins"
edges = [20, 40]
[transformations.age_group]
source = "age"
[transformations.sex]
source = "female"
[transformations.sex.alternatives.MF]
kind = "boolean"
[raw_constraints]
rules = ["age < 12"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_minimal_space_loads_with_defaults(tmp_path: Path) -> None:
    space = load_release_space(write(tmp_path, MINI))
    assert space.name == "mini" and len(space.transformations) == 1
    assert space.transformations.ids() == ("age_group=coarse,sex=MF",)
    assert len(space.synthetic_constraints) == 0 and space.min_counts == () and space.projections() == ()
    assert not space.raw_constraints.drop_missing


@pytest.mark.parametrize(
    ("addition", "pattern"),
    [
        ("[projection]\nmin_count = [1, 3]\n", r"min_count \(1\) must be an int >= 2"),
        ("[projection]\nmin_count = [2, 2]\n", r"projection.min_count \(\[2, 2\]\) must be distinct"),
        ("[projection]\nmin_count = 2\n", r"projection.min_count \(2\) must be a list"),
        ("[projection]\nminimum = [2]\n", r"projection: unknown key\(s\) 'minimum'"),
        ('[projection]\nalgorithm = "greedy"\n', r"projection.algorithm \('greedy'\) must be one of"),
        ("[synthetic_constraints]\ndrop_missing = true\n", r"synthetic_constraints: unknown key\(s\) 'drop_missing'"),
        ('[synthetic_constraints]\nrules = ["mother_age < 20"]\n',
         r"synthetic_constraints.rules\[0\]: constraint 'mother_age < 20': unknown column 'mother_age'"),
        ("[raw_constraints.extra]\nx = 1\n", r"raw_constraints: unknown key\(s\) 'extra'"),
        ("[transformations.age_group.alternatives.fine]\nkind = \"bins\"\nedges = [20]\nbins = 3\n",
         r"transformations.age_group.alternatives.fine: unknown key\(s\) 'bins' for kind 'bins'"),
        ("[schema.parity]\ntype = \"integer\"\nlower = 1\nupper = 24\n",
         r"transformations: raw column\(s\) 'parity' have no transform"),
        ("[transformations.parity.alternatives.a]\nkind = \"identity\"\n",
         r"transformations.parity.source \('parity'\) must be a schema column"),
        ("[schema.age.extra]\n", r"schema.age: unknown key\(s\) 'extra'"),
    ],
)
def test_bad_spaces_name_the_offending_key(tmp_path: Path, addition: str, pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        load_release_space(write(tmp_path, MINI + addition))


def test_missing_keys_files_and_broken_toml_are_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"unknown top-level key\(s\) 'colour'"):
        load_release_space(write(tmp_path, 'colour = "blue"\n' + MINI))
    with pytest.raises(SpecError, match=r"missing key\(s\) name"):
        load_release_space(write(tmp_path, MINI.replace('name = "mini"', "")))
    with pytest.raises(SpecError, match="does not exist"):
        load_release_space(tmp_path / "nope.toml")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_release_space(write(tmp_path, MINI + "[schema\n"))
