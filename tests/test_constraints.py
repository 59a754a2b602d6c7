"""The constraint language (parser, type checks, evaluation), cleaning and rejection sampling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.tabular.column_transforms import BinTransform, BooleanTransform
from privlab.mechanisms.tabular.constraints import ConstraintSet, rejection_sample
from privlab.mechanisms.tabular.rules import Constraint
from privlab.mechanisms.tabular.schema import RawColumn, RawSchema
from privlab.mechanisms.tabular.transforms import Transformation
from privlab.platform.core.errors import ExecutionError, SchemaError, SpecError

SCHEMA = RawSchema(
    columns=(
        RawColumn(name="age", type="integer", lower=12, upper=60),
        RawColumn(name="parity", type="integer", lower=1, upper=24),
        RawColumn(name="weight", type="float", lower=200.0, upper=8200.0),
        RawColumn(name="female", type="boolean"),
        RawColumn(name="group", type="categorical", categories=("a", "b", 7)),
        RawColumn(name="born", type="date", format="%Y-%m-%d", lower="2019-01-01", upper="2019-12-31"),
    )
)


def typed_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    raw = pd.DataFrame(
        {
            "age": rng.integers(12, 61, n),
            "parity": rng.integers(1, 25, n),
            "weight": rng.uniform(200, 8200, n),
            "female": rng.random(n) < 0.5,
            "group": rng.choice(np.array(["a", "b", 7], dtype=object), n),
            "born": (pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")).strftime(
                "%Y-%m-%d"
            ),
        }
    )
    return SCHEMA.validate(raw)


def mask(rule: str, frame: pd.DataFrame) -> np.ndarray:
    return Constraint.parse(rule, schema=SCHEMA).matches(frame, schema=SCHEMA)


def test_rules_agree_with_a_numpy_reference() -> None:
    frame = typed_frame(5000, seed=0)
    age, parity, weight = (frame[c].to_numpy() for c in ("age", "parity", "weight"))
    female = frame["female"].to_numpy()
    group = frame["group"].astype(object).to_numpy()
    month = frame["born"].dt.month.to_numpy()
    cases = {
        "age < 23 and parity > 6": (age < 23) & (parity > 6),
        "age < 20 or parity >= 10 and weight <= 1500.5": (age < 20) | ((parity >= 10) & (weight <= 1500.5)),
        "(age < 20 or parity >= 10) and weight <= 1500.5": ((age < 20) | (parity >= 10)) & (weight <= 1500.5),
        "not age == 30": age != 30,
        "not not (age != 30)": age != 30,
        "age < 1 OR female AND NOT False == female": female,  # keywords are case-insensitive
        "female and group == 'b'": female & (group == "b"),
        "not female or group != 7": ~female | (group != 7),
        "female == false": ~female,
        "true == female": female,
        "born < '2019-07-01' and born >= \"2019-03-01\"": (month < 7) & (month >= 3),
        "parity > age": parity > age,
        "30 > age": age < 30,
        "weight > -1e3": np.ones(len(frame), dtype=bool),
        "weight < .5e4": weight < 5000,
    }
    for rule, expected in cases.items():
        got = mask(rule, frame)
        assert got.dtype == bool and got.shape == (len(frame),)
        assert (got == expected).all(), rule
    with pytest.raises(SpecError, match="unknown column 'AGE'"):  # column names are case-sensitive
        mask("AGE < 20", frame)


def test_and_binds_tighter_than_or() -> None:
    frame = typed_frame(2000, seed=1)
    a = mask("age < 20 or parity > 20 and female", frame)
    b = mask("age < 20 or (parity > 20 and female)", frame)
    c = mask("(age < 20 or parity > 20) and female", frame)
    assert (a == b).all() and not (a == c).all()


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("", "the rule is empty"),
        ("age < 20 and", "expected a column, a value or '\\(', found the end of the rule"),
        ("age = 20", "'=' is not an operator; use '=='"),
        ("age < 20 && parity > 3", "use 'and' instead of '&'"),
        ("age < 20 || parity > 3", "use 'or' instead of '\\|'"),
        ("!female", "use 'not'"),
        ("group == 'a", "unterminated string"),
        ("(age < 20", "expected '\\)' to close the '\\(' at position 0, found the end of the rule"),
        ("age < 20)", "unbalanced '\\)'"),
        ("()", "empty parentheses"),
        ("12 < age < 20", "chained comparisons are not supported; combine two comparisons with 'and'"),
        ("age < 20 parity > 3", "expected 'and', 'or' or the end of the rule, found 'parity'"),
        ("20", "expected a comparison operator after '20'"),
        ("age < 29abc", "a number cannot be followed by 'a'"),
        ("age < - parity", "expected a number after '-'"),
        ("__import__('os').system('x')", "unexpected character '\\.'"),
        ("age < 20 ; parity > 3", "unexpected character ';'"),
        ("mother_age < 20", "unknown column 'mother_age'; the schema has: age, parity, weight, female, group, born"),
        ("1 < 2", "compares two constants"),
        ("age > 'old'", "integer column 'age' must be compared with a number, not 'old'"),
        ("age > true", "must be compared with a number, not True"),
        ("female < true", "boolean columns can only be compared with == or !="),
        ("female == 1", "boolean column 'female' must be compared with true or false, not 1"),
        ("group == 'z'", "'z' is not a category of column 'group'; categories: 'a', 'b', 7"),
        ("group == '7'", "'7' is not a category"),
        ("group < 'b'", "categorical columns can only be compared with == or !="),
        ("born < '2019/07/01'", "'2019/07/01' is not a date in the format '%Y-%m-%d' of column 'born'"),
        ("born < 20190701", "date column 'born' must be compared with a quoted date"),
        ("age and parity > 3", "column 'age' is integer, so it must be compared with a value"),
        ("age < born", "cannot compare integer column 'age' with date column 'born'"),
        ("female < female", "boolean columns can only be compared with == or !="),
    ],
)
def test_parser_errors_name_the_rule_the_problem_and_the_position(rule: str, problem: str) -> None:
    with pytest.raises(SpecError, match=problem) as info:
        Constraint.parse(rule, schema=SCHEMA)
    message = str(info.value)
    assert message.startswith(f"constraint {rule!r}: ")
    assert " at position " in message and message.rstrip().endswith("^")


def test_the_caret_points_at_the_problem() -> None:
    with pytest.raises(SpecError) as info:
        Constraint.parse("age < 20 and parity = 3", schema=SCHEMA)
    lines = str(info.value).splitlines()
    assert "at position 20" in lines[0]
    assert lines[2].index("^") - lines[1].index("a") == 20


def test_non_string_rules_are_type_errors() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        Constraint.parse(3, schema=SCHEMA)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a list of strings, not one string"):
        ConstraintSet.from_rules("age < 3", schema=SCHEMA)


def test_evaluation_checks_the_frame() -> None:
    constraints = ConstraintSet.from_rules(["age < 20 and born < '2019-02-01'"], schema=SCHEMA)
    frame = typed_frame(50, seed=2)
    with pytest.raises(SchemaError, match=r"missing column\(s\) 'born' used by the constraints"):
        constraints.matches(frame.drop(columns=["born"]))
    with_nan = frame.astype({"age": float})
    with_nan.loc[7, "age"] = np.nan
    with pytest.raises(SchemaError, match=r"column 'age' has 1 missing/NaN value\(s\) \(first at row 7\)"):
        constraints.matches(with_nan)
    untyped = frame.assign(born=frame["born"].dt.strftime("%Y-%m-%d"))
    with pytest.raises(SchemaError, match="column 'born' is declared date but the frame holds"):
        constraints.matches(untyped)


def test_cleaning_drops_missing_validates_and_filters() -> None:
    raw = typed_frame(400, seed=3).assign(born=lambda f: f["born"].dt.strftime("%Y-%m-%d"),
                                          group=lambda f: f["group"].astype(object))
    raw = raw.astype({"age": float})
    raw.loc[[5, 9], "age"] = np.nan
    rules = ["age < 23 and parity > 6", "weight < 500 or weight > 5500"]
    strict = ConstraintSet.from_rules(rules, schema=SCHEMA)
    with pytest.raises(SchemaError, match=r"column 'age' has 2 missing/NaN value\(s\) \(first at row 5\)"):
        strict.clean(raw)
    lenient = ConstraintSet.from_rules(rules, schema=SCHEMA, drop_missing=True)
    cleaned = lenient.clean(raw)
    complete = raw.dropna()
    expected = ~(((complete["age"] < 23) & (complete["parity"] > 6))
                 | (complete["weight"] < 500) | (complete["weight"] > 5500)).to_numpy()
    assert len(cleaned) == int(expected.sum()) < len(raw) - 2
    assert cleaned["age"].dtype == np.int64 and list(cleaned.index) == list(range(len(cleaned)))
    assert not lenient.matches(cleaned).any()
    per_rule = lenient.matches_by_rule(cleaned)
    assert list(per_rule) == rules and not any(m.any() for m in per_rule.values())
    with pytest.raises(SchemaError, match="every record matches a constraint"):
        ConstraintSet.from_rules(["age >= 12"], schema=SCHEMA).clean(complete)


def test_spec_tables_are_checked_strictly() -> None:
    good = ConstraintSet.from_spec({"rules": ["age < 20"], "drop_missing": True}, schema=SCHEMA, where="raw")
    assert good.rules == ("age < 20",) and good.drop_missing and good.columns == ("age",)
    cases = [
        ({"rule": ["age < 20"]}, r"raw: unknown key\(s\) 'rule'; allowed keys: drop_missing, rules"),
        ({"rules": "age < 20"}, r"raw.rules \('age < 20'\) must be a list of strings"),
        ({"rules": [], "drop_missing": "yes"}, r"raw.drop_missing \('yes'\) must be true or false"),
        ({"rules": ["age < 20", "age <"]}, r"raw.rules\[1\]: constraint 'age <'"),
        ({"rules": ["age < 20", "age < 20"]}, "constraints must be distinct"),
    ]
    for table, pattern in cases:
        with pytest.raises(SpecError, match=pattern):
            ConstraintSet.from_spec(table, schema=SCHEMA, where="raw")
    with pytest.raises(SpecError, match=r"synthetic: unknown key\(s\) 'drop_missing'"):
        ConstraintSet.from_spec({"drop_missing": True}, schema=SCHEMA, where="synthetic", allow_drop_missing=False)


def coded() -> tuple[Transformation, ConstraintSet]:
    schema = RawSchema(columns=(RawColumn(name="gestation", type="integer", lower=17, upper=47),
                                RawColumn(name="weight", type="integer", lower=200, upper=8200),
                                RawColumn(name="female", type="boolean")))
    transformation = Transformation(
        schema=schema,
        columns=(BinTransform(name="gestation", column=schema["gestation"], clip=(28, 43), edges=(29, 32, 34, 37, 42)),
                 BinTransform(name="weight", column=schema["weight"], clip=(1400, 4600),
                              edges=tuple(range(1500, 4501, 100))),
                 BooleanTransform(name="sex", column=schema["female"], labels=("M", "F"))),
    )
    rules = ["gestation < 29 and weight > 2999", "gestation < 34 and weight > 3999"]
    return transformation, ConstraintSet.from_rules(rules, schema=schema)


def test_synthetic_rules_are_evaluated_on_representative_values() -> None:
    transformation, constraints = coded()
    on_codes = constraints.on_codes(transformation)
    codes = pd.DataFrame({"gestation": [0, 0, 1, 2, 3, 2], "weight": [15, 16, 5, 26, 31, 25], "sex": [0, 1, 0, 1, 0, 1]})
    # gestation bins <29, 29-31, 32-33, 34-36; weight code 15 = "2900-2999", 16 = "3000-3099", 26 = "4000-4099".
    assert on_codes.matches(codes).tolist() == [False, True, False, True, False, False]
    assert len(on_codes.filter(codes)) == 4
    bad = codes.assign(weight=[0, 0, 0, 0, 0, 40])
    with pytest.raises(SchemaError, match=r"column 'weight' has a code at row 5 outside 0..31"):
        on_codes.valid_mask(bad)
    empty_rules = ConstraintSet(schema=transformation.schema).on_codes(transformation)
    assert empty_rules.valid_mask(codes).all()


def test_rejection_sampling_returns_n_valid_records_deterministically() -> None:
    transformation, constraints = coded()
    on_codes = constraints.on_codes(transformation)
    sizes = transformation.domain.sizes

    def run(seed: int) -> tuple[pd.DataFrame, list[int]]:
        rng = np.random.default_rng(seed)
        calls: list[int] = []

        def sample(k: int) -> pd.DataFrame:
            calls.append(k)
            return pd.DataFrame({name: rng.integers(0, size, k) for name, size in
                                 zip(transformation.domain.names, sizes)})

        return rejection_sample(sample, 5000, on_codes, max_rounds=10), calls

    result, calls = run(7)
    assert len(result) == 5000 and on_codes.valid_mask(result).all()
    assert list(result.index) == list(range(5000))
    assert calls[0] == 5000 and len(calls) >= 2  # about 10% of uniform codes are rejected
    again, _ = run(7)
    pd.testing.assert_frame_equal(result, again)
    other, _ = run(8)
    assert not result.equals(other)


def test_rejection_sampling_stops_at_the_round_limit() -> None:
    transformation, constraints = coded()
    on_codes = constraints.on_codes(transformation)

    def always_invalid(k: int) -> pd.DataFrame:
        return pd.DataFrame({"gestation": np.zeros(k, dtype=np.int64), "weight": np.full(k, 20), "sex": np.zeros(k, int)})

    with pytest.raises(ExecutionError, match=r"only 0 of 10 requested records passed the constraints after 3 round\(s\)"):
        rejection_sample(always_invalid, 10, on_codes, max_rounds=3)
    rng = np.random.default_rng(0)

    def mostly_invalid(k: int) -> pd.DataFrame:
        frame = always_invalid(k)
        frame.loc[rng.random(k) < 0.001, "gestation"] = 5
        return frame

    partial = rejection_sample(mostly_invalid, 1000, on_codes, max_rounds=2, allow_shortfall=True)
    assert 0 < len(partial) < 1000 and on_codes.valid_mask(partial).all()


def test_rejection_sampling_checks_its_arguments_and_the_sampler() -> None:
    transformation, constraints = coded()
    on_codes = constraints.on_codes(transformation)
    frame = pd.DataFrame({"gestation": [5, 5], "weight": [1, 1], "sex": [0, 1]})
    with pytest.raises(SpecError, match=r"n \(0\) must be an integer >= 1"):
        rejection_sample(lambda k: frame, 0, on_codes, max_rounds=1)
    with pytest.raises(SpecError, match=r"max_rounds \(0\) must be an integer >= 1"):
        rejection_sample(lambda k: frame, 2, on_codes, max_rounds=0)
    with pytest.raises(SpecError, match=r"min_acceptance \(0\) must be in \(0, 1\]"):
        rejection_sample(lambda k: frame, 2, on_codes, max_rounds=1, min_acceptance=0)
    with pytest.raises(SchemaError, match=r"sample_fn\(3\) must return a DataFrame of 3 rows, got 2 rows"):
        rejection_sample(lambda k: frame, 3, on_codes, max_rounds=1)


def test_columns_that_are_not_identifiers_are_quoted_with_backticks() -> None:
    """Census-style names (issue 13 item 3): `marital-status`, `hours per week`."""
    schema = RawSchema(columns=(
        RawColumn(name="marital-status", type="categorical", categories=("Divorced", "Married")),
        RawColumn(name="hours per week", type="integer", lower=1, upper=99),
    ))
    frame = schema.validate(pd.DataFrame({"marital-status": ["Divorced", "Married", "Married"],
                                          "hours per week": [60, 70, 20]}))
    rule = Constraint.parse("`marital-status` == 'Married' and `hours per week` > 40", schema=schema)
    assert rule.matches(frame, schema=schema).tolist() == [False, True, False]
    with pytest.raises(SpecError, match=r"'marital-status' is not a plain name; .*between backticks: `marital-status`"):
        Constraint.parse("marital-status == 'Married'", schema=schema)
    with pytest.raises(SpecError, match="unknown column 'marital status'"):
        Constraint.parse("`marital status` == 'Married'", schema=schema)
    with pytest.raises(SpecError, match="unterminated or empty `column name`"):
        Constraint.parse("`` == 1", schema=schema)
