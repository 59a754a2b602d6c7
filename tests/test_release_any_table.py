"""The release scheme on a table that is not births (issue 13): a census-like file as published.

The file is headerless, separated by ", ", writes "?" for missing values and ends every label
with a dot (UCI adult.test); column names are not identifiers (``hours-per-week``); one column
has 40 levels, merged into groups; education enters a regression through declared numbers.
Nothing pre-processes it. A grid search, its report, a shortlist, a release, its replay and
``privlab verify`` run on it, and every document and message they produce is searched for
births column names and paths (issue 13 item 1).
"""

from __future__ import annotations

import io
import json
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from privlab.platform.cli.main import EXIT_OK, main

N = 2400
BIRTHS_WORDS = ("mother_age", "parity", "gestation", "birth_weight", "birth_month", "birth_sex", "is_female",
                "date_of_birth", "experiments/births", "nvss", "SINGLETON")
COUNTRIES = ["United-States", "Mexico", "Philippines", "Germany", "Canada"] + [f"Country-{i:02d}" for i in range(35)]
EDUCATION = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad", "Some-college",
             "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school", "Doctorate"]
MARITAL = ["Married-civ-spouse", "Married-AF-spouse", "Divorced", "Separated", "Widowed", "Never-married"]


def _census_file(path: Path) -> None:
    """A seeded census-like table written as UCI writes adult.test."""
    rng = np.random.default_rng(2026)
    age = rng.integers(17, 91, N)
    education = np.minimum(rng.poisson(8 + (age > 30), N), 15)
    hours = np.clip(np.round(20 + 1.5 * education + rng.normal(0, 8, N)), 1, 99).astype(int)
    country = np.where(rng.random(N) < 0.85, 0, rng.integers(1, 40, N))
    married = np.where(age > 25, rng.choice([0, 2, 4], N, p=[0.6, 0.3, 0.1]), 5)
    married[rng.random(N) < 0.02] = 1
    married[rng.random(N) < 0.03] = 3
    income = np.where(education + rng.normal(0, 3, N) > 11, ">50K", "<=50K")
    lines = ["|1x3 Cross validator"]
    for i in range(N):
        workclass = "?" if i % 97 == 0 else rng.choice(["Private", "Self-emp", "State-gov"])
        lines.append(f"{age[i]}, {workclass}, {EDUCATION[education[i]]}, {MARITAL[married[i]]}, {hours[i]}, "
                     f"{COUNTRIES[country[i]]}, {income[i]}.")
    path.write_text("\n".join(lines) + "\n")


SPACE = """
name = "census"
description = "A census-like table (UCI adult style), as published"

[reader]
header = false
na_values = ["?"]
strip_whitespace = true
strip_trailing_dot = true
skip_rows = 1

[schema.age]
type = "integer"
lower = 17
upper = 90
[schema.workclass]
type = "categorical"
categories = ["Private", "Self-emp", "State-gov"]
[schema.education]
type = "categorical"
categories = {education}
[schema.marital-status]
type = "categorical"
categories = {marital}
[schema.hours-per-week]
type = "integer"
lower = 1
upper = 99
[schema.native-country]
type = "categorical"
categories = {countries}
[schema.income]
type = "categorical"
categories = ["<=50K", ">50K"]

[transformations.age]
source = "age"
[transformations.age.alternatives.decades]
kind = "bins"
edges = [25, 35, 45, 55, 65]
[transformations.age.alternatives.halves]
kind = "bins"
edges = [40]
[transformations.workclass]
source = "workclass"
[transformations.workclass.alternatives.all]
kind = "categorical"
[transformations.schooling]
source = "education"
[transformations.schooling.alternatives.grouped]
kind = "groups"
groups = {{ "no diploma" = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"], "high school" = ["HS-grad"], "college" = ["Some-college", "Assoc-voc", "Assoc-acdm"], "degree" = ["Bachelors", "Masters", "Prof-school", "Doctorate"] }}
values = [8, 12, 13.5, 17]
[transformations.marital-status]
source = "marital-status"
[transformations.marital-status.alternatives.grouped]
kind = "groups"
groups = {{ "married" = ["Married-civ-spouse", "Married-AF-spouse"], "never married" = ["Never-married"] }}
other = "previously married"
[transformations.hours]
source = "hours-per-week"
[transformations.hours.alternatives.coarse]
kind = "bins"
edges = [35, 41, 50]
[transformations.country]
source = "native-country"
[transformations.country.alternatives.us]
kind = "groups"
groups = {{ "United-States" = ["United-States"] }}
other = "elsewhere"
[transformations.income]
source = "income"
[transformations.income.alternatives.two]
kind = "categorical"

[raw_constraints]
drop_missing = true
rules = ["`hours-per-week` > 98 and age > 89"]

[synthetic_constraints]
rules = ["`marital-status` == 'Married-AF-spouse' and age > 89"]

[projection]
min_count = [2]
"""

FLOW = """
description = "census flow"
epsilon_generation = 4.0

[[criterion]]
kind = "marginals_absolute"
name = "marginals_absolute"
threshold = 1e9
epsilon = 0.01

[[criterion]]
kind = "marginals_relative"
name = "marginals_relative"
threshold = 2.0
epsilon = 0.30
ratio_clip = 2.0

[[criterion]]
kind = "conditional_mean"
name = "hours_mean"
threshold = 1e9
epsilon = 0.20
target = "hours"
target_bounds = [1, 99]
by = ["income"]
resize_margin = 0.01

[[criterion]]
kind = "regression_coefficients"
name = "regression_coefficients"
threshold = 1e9
epsilon = 0.40
response = "hours"
covariates = ["age", "schooling"]
response_bounds = [1, 99]

[[criterion]]
kind = "regression_mae"
name = "regression_mae"
threshold = 1e9
epsilon = 0.07
response = "hours"
covariates = ["age", "schooling"]
response_bounds = [1, 99]

[[criterion]]
kind = "faithfulness"
name = "faithfulness"
threshold = 1.0
epsilon = 0.01
exact = ["workclass", "schooling", "marital-status", "country", "income"]
within_one_bin = ["age", "hours"]
max_fuzzy_columns = 1
"""

GRID = """
name = "census-grid"
seed = 7
[tracking]
experiment = "census-grid"
plots = false
[[study]]
name = "degree"
workload = "release_flow"
repetitions = 2
[study.params]
space = "space.toml"
settings = "flow.toml"
data = "adult.test"
synthesizer = "privbayes"
degree = 1
epsilon_split = 0.3
min_count = 2
[study.grid]
transformation = ["age=decades", "age=halves"]
"""

RELEASE = """
name = "census-release"
description = "Synthetic census records released with differential privacy"
shortlist = "shortlist.toml"
budget = 10.0
decode = "representative"

[epsilon]
generation = 4.0
acceptance = 0.99
record_count = 0.02

[selection]
gamma = 0.0
steps = "inf"
epsilon0 = 0.0
unbounded_ok = true

[datasheet]
title = "Census: a differentially private synthetic dataset"
publisher = "privlab tests"
population = "Adults of a census-like survey"
"""


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Grid search → report → shortlist → release → replay → verify, all through the CLI."""
    base = tmp_path_factory.mktemp("census")
    spec = base / "spec"
    spec.mkdir()
    _census_file(spec / "adult.test")
    (spec / "space.toml").write_text(textwrap.dedent(SPACE).format(
        education=json.dumps(EDUCATION), marital=json.dumps(MARITAL), countries=json.dumps(COUNTRIES)))
    (spec / "flow.toml").write_text(FLOW)
    (spec / "grid.toml").write_text(GRID)
    (spec / "release.toml").write_text(RELEASE)
    store = f"sqlite:///{base / 'mlflow.db'}"
    outputs: dict[str, object] = {"base": base, "spec": spec, "codes": {}}
    messages = io.StringIO()
    mp = pytest.MonkeyPatch()
    try:
        mp.chdir(base)
        mp.setattr(sys, "stdout", messages)
        mp.setattr(sys, "stderr", messages)
        codes = outputs["codes"]
        codes["missing shortlist"] = main(["release", str(spec / "release.toml"), "--data", str(spec / "adult.test"),
                                           "--out", str(base / "never")])
        summary = base / "summary.json"
        codes["run"] = main(["run", str(spec / "grid.toml"), "--serial", "--no-progress", "--tracking-uri", store,
                             "--summary-json", str(summary)])
        run_id = json.loads(summary.read_text())["run_id"]
        codes["report"] = main(["report", run_id, "--out", str(base / "report"), "--tracking-uri", store])
        codes["shortlist"] = main(["shortlist", run_id, "--min-prob", "0", "--out", str(spec / "shortlist.toml"),
                                   "--tracking-uri", store])
        codes["release"] = main(["release", str(spec / "release.toml"), "--data", str(spec / "adult.test"),
                                 "--out", str(base / "bundle")])
        codes["replay"] = main(["release", str(spec / "release.toml"), "--data", str(spec / "adult.test"),
                                "--out", str(base / "replayed"), "--replay",
                                str(base / "bundle" / "private" / "transcript.bin")])
        codes["verify"] = main(["verify", str(base / "bundle"), "--spec", str(spec / "release.toml"), "--data",
                                str(spec / "adult.test"), "--transcript",
                                str(base / "bundle" / "private" / "transcript.bin")])
    finally:
        mp.undo()
    outputs["messages"] = messages.getvalue()
    return outputs


def test_the_whole_scheme_runs_on_the_file_as_published(census: dict[str, object]) -> None:
    codes = census["codes"]
    assert codes == {"missing shortlist": 2, "run": EXIT_OK, "report": EXIT_OK, "shortlist": EXIT_OK,
                     "release": EXIT_OK, "replay": EXIT_OK, "verify": EXIT_OK}
    base = census["base"]
    bundle, replayed = base / "bundle", base / "replayed"
    public = sorted(p.name for p in bundle.iterdir() if p.is_file())
    assert public and all((bundle / name).read_bytes() == (replayed / name).read_bytes() for name in public)
    data = (bundle / "released.csv").read_text().splitlines()
    assert data[0] == "age,workclass,education,marital-status,hours-per-week,native-country,income"
    # Integer columns decode to integers; merged groups decode to one of their categories.
    # The bundle's Δ is the one used for the released candidate, and says so (issue 13 item 12).
    assert "| sensitivity (this candidate) |" in (bundle / "acceptance.md").read_text()
    first = data[1].split(",")
    assert first[0].isdigit() and first[4].isdigit()
    assert first[5] in ("United-States", "Mexico")


def test_no_births_text_in_any_document_or_message(census: dict[str, object],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    base = census["base"]
    texts = {str(p): p.read_text(errors="replace") for folder in ("bundle", "report")
             for p in (base / folder).rglob("*") if p.is_file() and p.suffix in (".md", ".txt", ".toml", ".json", ".csv")}
    texts["shortlist"] = (census["spec"] / "shortlist.toml").read_text()
    for command in (["release", "--help"], ["shortlist", "--help"], ["evaluate", "--help"], ["verify", "--help"]):
        with pytest.raises(SystemExit):
            main(command)
    texts["help"] = capsys.readouterr().out
    texts["messages"] = census["messages"]
    assert "shortlist" in census["messages"]  # the missing-shortlist error is among them
    assert any("README.md" in name for name in texts) and len(texts) > 6
    for name, text in texts.items():
        found = [word for word in BIRTHS_WORDS if re.search(re.escape(word), text, re.IGNORECASE)]
        assert not found, f"{name} mentions {found}"
