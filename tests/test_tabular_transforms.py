"""Per-column transformations, whole-table transformations and the transformation space."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.tabular.column_transforms import (
    MAX_IDENTITY_CODES,
    BinTransform,
    BooleanTransform,
    CategoricalTransform,
    IdentityTransform,
    MonthTransform,
)
from privlab.mechanisms.tabular.schema import RawColumn, RawSchema
from privlab.mechanisms.tabular.transform_specs import column_transform_from_spec
from privlab.mechanisms.tabular.transforms import Transformation, TransformationSpace
from privlab.platform.core.errors import SchemaError, SpecError

AGE = RawColumn(name="age", type="integer", lower=12, upper=60)
PARITY = RawColumn(name="parity", type="integer", lower=1, upper=24)
SCORE = RawColumn(name="score", type="float", lower=0.0, upper=10.0)
FEMALE = RawColumn(name="female", type="boolean")
GROUP = RawColumn(name="group", type="categorical", categories=("x", "y", 3))
BORN = RawColumn(name="born", type="date", format="%Y-%m-%d", lower="2019-01-01", upper="2019-12-31")
SCHEMA = RawSchema(columns=(AGE, PARITY, SCORE, FEMALE, GROUP, BORN))


def raw_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(12, 61, n),
            "parity": rng.integers(1, 25, n),
            "score": rng.uniform(0, 10, n),
            "female": rng.random(n) < 0.5,
            "group": rng.choice(np.array(["x", "y", 3], dtype=object), n),
            "born": pd.to_datetime("2019-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D"),
        }
    )


def make_transformation() -> Transformation:
    return Transformation(
        schema=SCHEMA,
        columns=(
            BinTransform(name="mother_age", column=AGE, clip=(17, 46), edges=(18, 20, 25, 30, 35, 40, 43, 45)),
            BinTransform(name="parity", column=PARITY, clip=(1, 11), edges=(2, 4, 7, 11)),
            BinTransform(name="score", column=SCORE, edges=(2.5, 5.0, 7.5)),
            BooleanTransform(name="sex", column=FEMALE, labels=("M", "F")),
            CategoricalTransform(name="group", column=GROUP),
            MonthTransform(name="birth_month", column=BORN),
        ),
    )


def test_integer_bins_follow_the_papers_labels_and_midpoints() -> None:
    transform = BinTransform(name="mother_age", column=AGE, clip=(17, 46), edges=(18, 20, 25, 30, 35, 40, 43, 45),
                             label_style="paper")
    domain = transform.domain
    assert domain.labels == ("<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<")
    # Without the paper's style (issue 13 item 1), the last open bin reads "45+", for any dataset.
    plain = BinTransform(name="mother_age", column=AGE, clip=(17, 46), edges=(18, 20, 25, 30, 35, 40, 43, 45))
    assert plain.domain.labels == (*domain.labels[:-1], "45+")
    with pytest.raises(SpecError, match=r"label_style \('44<'\) must be one of range, paper"):
        BinTransform(name="mother_age", column=AGE, edges=(18,), label_style="44<")
    # Clipped ranges [17,17], [18,19], ..., [43,44], [45,46].
    assert domain.values == (17.0, 18.5, 22.0, 27.0, 32.0, 37.0, 41.0, 43.5, 45.5)
    parity = BinTransform(name="parity", column=PARITY, clip=(1, 11), edges=(2, 4, 7, 11), label_style="paper")
    assert parity.domain.labels == ("1", "2-3", "4-6", "7-10", "10<")
    unit = BinTransform(name="parity", column=PARITY, edges=tuple(range(2, 25)))
    assert unit.domain.labels[:3] == ("1", "2", "3") and unit.domain.labels[-1] == "24"


def test_integer_bins_assign_edges_to_the_upper_bin_and_clip() -> None:
    transform = BinTransform(name="mother_age", column=AGE, clip=(17, 46), edges=(18, 20, 25))
    codes = transform.encode(pd.Series([12, 17, 18, 19, 20, 24, 25, 60]))
    assert codes.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert codes.dtype == np.int64


def test_float_bins_have_interval_labels_and_round_trip() -> None:
    transform = BinTransform(name="score", column=SCORE, edges=(2.5, 5.0, 7.5))
    assert transform.domain.labels == ("<2.5", "[2.5, 5)", "[5, 7.5)", ">=7.5")
    assert transform.domain.values == (1.25, 3.75, 6.25, 8.75)
    values = pd.Series([0.0, 2.5, 4.999, 7.5, 10.0])
    codes = transform.encode(values)
    assert codes.tolist() == [0, 1, 1, 3, 3]
    drawn = transform.decode(codes, rng=np.random.default_rng(3))
    assert transform.encode(pd.Series(drawn)).tolist() == codes.tolist()


def test_declared_labels_and_values_replace_the_defaults() -> None:
    transform = BinTransform(name="p", column=PARITY, edges=(2, 5), labels=("one", "few", "many"), values=(1, 3, 6))
    assert transform.domain.labels == ("one", "few", "many")
    assert transform.decode(np.array([0, 1, 2])).tolist() == [1.0, 3.0, 6.0]


def test_bin_decoding_draws_uniformly_inside_the_clipped_bin() -> None:
    transform = BinTransform(name="mother_age", column=AGE, clip=(17, 46), edges=(18, 20, 25, 30, 35, 40, 43, 45))
    codes = np.repeat(np.arange(9), 2000)
    drawn = transform.decode(codes, rng=np.random.default_rng(11))
    assert drawn.dtype == np.int64
    assert transform.encode(pd.Series(drawn)).tolist() == codes.tolist()
    assert drawn.min() == 17 and drawn.max() == 46
    # Every integer of the bin "20-24" is drawn.
    assert set(drawn[codes == 2]) == {20, 21, 22, 23, 24}
    # Without an rng an integer column decodes to integers (issue 13 item 6): the integer nearest
    # to each bin's midpoint, ties to the lower one, while the domain keeps the exact midpoints.
    representative = transform.decode(codes[::2000])
    assert representative.dtype == np.int64
    assert transform.domain.values == (17.0, 18.5, 22.0, 27.0, 32.0, 37.0, 41.0, 43.5, 45.5)
    assert representative.tolist() == [17, 18, 22, 27, 32, 37, 41, 43, 45]
    assert transform.encode(pd.Series(representative)).tolist() == list(range(9))


def test_identity_clips_and_counts_one_code_per_integer() -> None:
    transform = IdentityTransform(name="parity", column=PARITY, clip=(1, 11))
    assert transform.domain.size == 11
    assert transform.domain.labels[0] == "1" and transform.domain.values[-1] == 11.0
    codes = transform.encode(pd.Series([1, 5, 11, 24]))
    assert codes.tolist() == [0, 4, 10, 10]
    assert transform.decode(codes).tolist() == [1, 5, 11, 11]
    big = RawColumn(name="grams", type="integer", lower=0, upper=MAX_IDENTITY_CODES)
    with pytest.raises(SpecError, match=rf"must have at most {MAX_IDENTITY_CODES} codes; use kind = 'bins'"):
        IdentityTransform(name="grams", column=big)


def test_month_transform_encodes_months_and_decodes_mid_month() -> None:
    transform = MonthTransform(name="birth_month", column=BORN)
    assert transform.domain.labels == tuple(str(m) for m in range(1, 13))
    dates = pd.Series(pd.to_datetime(["2019-01-01", "2019-02-28", "2019-12-31"]))
    codes = transform.encode(dates)
    assert codes.tolist() == [0, 1, 11]
    decoded = transform.decode(codes)
    assert decoded.dt.strftime("%Y-%m-%d").tolist() == ["2019-01-15", "2019-02-15", "2019-12-15"]
    drawn = transform.decode(np.repeat(np.arange(12), 300), rng=np.random.default_rng(5))
    assert transform.encode(drawn).tolist() == np.repeat(np.arange(12), 300).tolist()
    assert drawn[np.repeat(np.arange(12), 300) == 1].dt.day.max() == 28
    assert drawn.dt.day.min() == 1 and drawn.dt.day.max() == 31


def test_month_transform_needs_a_year_when_the_bounds_span_years() -> None:
    two_years = RawColumn(name="born", type="date", format="%Y-%m-%d", lower="2018-06-01", upper="2019-05-31")
    with pytest.raises(SpecError, match="year must be given because the schema bounds span 2018..2019"):
        MonthTransform(name="m", column=two_years)
    transform = MonthTransform(name="m", column=two_years, year=2019, day=1)
    # Decoded dates are clipped into the public bounds.
    assert transform.decode(np.array([0, 11])).dt.strftime("%Y-%m-%d").tolist() == ["2019-01-01", "2019-05-31"]
    with pytest.raises(SpecError, match=r"year \(2021\) must be an integer within the schema bounds"):
        MonthTransform(name="m", column=two_years, year=2021)
    with pytest.raises(SpecError, match=r"day \(31\) must be an integer in 1..28"):
        MonthTransform(name="m", column=BORN, day=31)


def test_boolean_and_categorical_codes_decode_exactly() -> None:
    sex = BooleanTransform(name="sex", column=FEMALE, labels=("M", "F"))
    assert sex.domain.labels == ("M", "F") and sex.domain.values == (0.0, 1.0)
    assert sex.encode(pd.Series([False, True])).tolist() == [0, 1]
    assert sex.decode(np.array([1, 0])).tolist() == [True, False]
    group = CategoricalTransform(name="group", column=GROUP)
    assert group.domain.labels == ("x", "y", "3") and not group.domain.numeric
    typed = pd.Series(pd.Categorical(["y", 3, "x"], categories=["x", "y", 3]))
    codes = group.encode(typed)
    assert codes.tolist() == [1, 2, 0]
    assert list(group.decode(codes)) == ["y", 3, "x"]


def test_transformation_round_trips_every_column() -> None:
    transformation = make_transformation()
    raw = raw_frame(3000, seed=1)
    codes = transformation.apply(raw)
    assert list(codes.columns) == ["mother_age", "parity", "score", "sex", "group", "birth_month"]
    assert all(codes[c].dtype == np.int64 for c in codes.columns)
    transformation.domain.validate(codes, what="codes")
    # Values drawn inside the bins are schema-valid raw data and re-encode to the same codes.
    drawn = transformation.decode(codes, rng=np.random.default_rng(2))
    assert list(drawn.columns) == list(SCHEMA.names)
    pd.testing.assert_frame_equal(transformation.apply(drawn), codes)
    # Representative values re-encode to the same codes too, and keep the schema's types:
    # integer columns decode to integers (issue 13 item 6), so the decoded frame is valid raw data.
    exact = transformation.decode(codes)
    assert exact["age"].dtype == np.int64 and exact["score"].dtype == np.float64
    SCHEMA.validate(exact, source="decoded representative values")  # raises on a type or bound violation
    for transform in transformation.columns:
        assert transform.encode(exact[transform.column.name]).tolist() == codes[transform.name].tolist()
    assert (exact["female"].to_numpy() == raw["female"].to_numpy()).all()
    assert (exact["group"].astype(object).to_numpy() == raw["group"].to_numpy()).all()
    assert (exact["born"].dt.month.to_numpy() == raw["born"].dt.month.to_numpy()).all()


def test_transformation_checks_input_before_any_work() -> None:
    transformation = make_transformation()
    raw = raw_frame(10, seed=4)
    raw.loc[3, "age"] = 99
    with pytest.raises(SchemaError, match=r"column 'age' has 1 value\(s\) outside its public bounds .*row 3"):
        transformation.apply(raw)
    codes = transformation.apply(raw_frame(10, seed=4))
    codes.loc[2, "parity"] = 5
    with pytest.raises(SchemaError, match=r"column 'parity' has a code at row 2 outside 0..4"):
        transformation.decode(codes)
    with pytest.raises(SchemaError, match=r"missing column\(s\) sex"):
        transformation.decode(codes.drop(columns=["sex"]))
    with pytest.raises(TypeError, match="rng .* must be a numpy.random.Generator"):
        transformation.decode(transformation.apply(raw_frame(10, seed=4)), rng=7)  # type: ignore[arg-type]


def test_transformation_needs_exactly_one_transform_per_schema_column() -> None:
    columns = make_transformation().columns
    with pytest.raises(SpecError, match=r"raw column\(s\) 'born' have no transform"):
        Transformation(schema=SCHEMA, columns=columns[:-1])
    with pytest.raises(SpecError, match=r"raw column\(s\) 'age' must be transformed once"):
        Transformation(schema=SCHEMA, columns=(*columns, IdentityTransform(name="age2", column=AGE, clip=(12, 20))))
    renamed = BinTransform(name="parity", column=SCORE, edges=(5.0,))
    with pytest.raises(SpecError, match="repeated: parity"):
        Transformation(schema=SCHEMA, columns=(*columns[:2], renamed, *columns[3:]))


@pytest.mark.parametrize(
    ("column", "spec", "pattern"),
    [
        (AGE, {"kind": "log"}, r"alt.kind \('log'\) must be one of identity, bins, month, boolean, categorical"),
        (AGE, {"kind": "bins", "edges": [20], "width": 3}, r"unknown key\(s\) 'width' for kind 'bins'"),
        (AGE, {"kind": "bins", "edges": [30, 20]}, r"edges \(\[30, 20\]\) must be strictly increasing"),
        (AGE, {"kind": "bins", "edges": [20.5]}, "must be integers for an integer column"),
        (AGE, {"kind": "bins", "edges": [12, 20]}, r"the first edge \(12\) must be > the clip lower bound \(12\)"),
        (AGE, {"kind": "bins", "edges": [20, 61]}, r"the last edge \(61\) must be <= the clip upper bound \(60\)"),
        (SCORE, {"kind": "bins", "edges": [5, 10]}, r"the last edge \(10\) must be < the clip upper bound"),
        (AGE, {"kind": "bins", "edges": [], "clip": [17, 46]}, "must be a non-empty list"),
        (AGE, {"kind": "bins", "edges": [20], "clip": [10, 46]}, r"clip \(\(10, 46\)\) must lie within the schema"),
        (AGE, {"kind": "bins", "edges": [20], "clip": [30, 20]}, "must have lower < upper"),
        (AGE, {"kind": "bins", "edges": [20], "values": [25, 50]}, r"values\[0\] \(25\) must lie in its bin's"),
        (AGE, {"kind": "bins", "edges": [20], "labels": ["a"]}, r"labels \(\['a'\]\) must be 2 non-empty strings"),
        (AGE, {"kind": "bins", "edges": [20], "labels": ["a", "a"]}, "must be distinct"),
        (AGE, {"kind": "bins", "edges": {"from": 20, "to": 30, "step": 3}}, "'to' must be reached from 'from'"),
        (AGE, {"kind": "bins", "edges": {"from": 20, "to": 30}}, "missing: \\['step'\\]"),
        (AGE, {"kind": "bins", "edges": {"from": 20, "to": 30, "step": 0}}, "step > 0"),
        (AGE, {"kind": "month"}, "a month transform needs a source column of type date, but 'age' is integer"),
        (BORN, {"kind": "bins", "edges": [3]}, "needs a source column of type integer or float"),
        (FEMALE, {"kind": "boolean", "labels": "MF"}, r"labels \('MF'\) must be a list of strings"),
    ],
)
def test_bad_transform_specs_name_the_problem(column: RawColumn, spec: dict, pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        column_transform_from_spec(spec, name="out", column=column, where="alt")


def test_range_tables_expand_to_inclusive_edges() -> None:
    transform = column_transform_from_spec(
        {"kind": "bins", "edges": {"from": 1500, "to": 4500, "step": 100}, "label_style": "paper"},
        name="birth_weight",
        column=RawColumn(name="birth_weight", type="integer", lower=200, upper=8200),
        where="alt",
    )
    assert isinstance(transform, BinTransform)
    assert transform.edges[0] == 1500 and transform.edges[-1] == 4500 and len(transform.edges) == 31
    assert transform.domain.labels[:2] == ("<1500", "1500-1599") and transform.domain.labels[-1] == "4499<"


SPACE_SPEC = {
    "age_group": {
        "source": "age",
        "alternatives": {
            "coarse": {"kind": "bins", "edges": [20, 40]},
            "fine": {"kind": "bins", "edges": [20, 30, 40, 50]},
        },
    },
    "parity": {"alternatives": {"coarse": {"kind": "bins", "edges": [2, 4]}, "exact": {"kind": "identity",
                                                                                       "clip": [1, 11]}}},
    "score": {"alternatives": {"halves": {"kind": "bins", "edges": [5.0]}}},
    "sex": {"source": "female", "alternatives": {"MF": {"kind": "boolean", "labels": ["M", "F"]}}},
    "group": {"alternatives": {"all": {"kind": "categorical"}}},
    "birth_month": {"source": "born", "alternatives": {"month": {"kind": "month"}}},
}


def test_the_space_enumerates_the_cartesian_product_with_stable_ids() -> None:
    space = TransformationSpace.from_spec(SPACE_SPEC, schema=SCHEMA, where="transformations")
    assert len(space) == 4
    ids = space.ids()
    assert ids == (
        "age_group=coarse,parity=coarse,score=halves,sex=MF,group=all,birth_month=month",
        "age_group=coarse,parity=exact,score=halves,sex=MF,group=all,birth_month=month",
        "age_group=fine,parity=coarse,score=halves,sex=MF,group=all,birth_month=month",
        "age_group=fine,parity=exact,score=halves,sex=MF,group=all,birth_month=month",
    )
    assert [t.id for t in space] == list(ids)
    shuffled = "birth_month=month,group=all,sex=MF,score=halves,parity=exact,age_group=fine"
    chosen = space.get(shuffled)
    assert chosen.id == ids[3]
    assert chosen.domain.sizes == (5, 11, 2, 2, 3, 12)
    assert space.alternatives("parity") == ("coarse", "exact")
    assert space.parse_id(ids[1])["parity"] == "exact"


@pytest.mark.parametrize(
    ("config_id", "pattern"),
    [
        ("age_group=medium,parity=coarse,score=halves,sex=MF,group=all,birth_month=month",
         "column 'age_group' has no alternative 'medium'; alternatives: coarse, fine"),
        ("age=fine,parity=coarse,score=halves,sex=MF,group=all,birth_month=month", r"unknown column\(s\) 'age'"),
        ("age_group=fine,parity=coarse", r"must choose an alternative for column\(s\) 'score', 'sex'"),
        ("age_group=fine,age_group=coarse", "chooses column 'age_group' twice"),
        ("age_group:fine", "part 'age_group:fine' must look like column=alternative"),
        ("", "must be a non-empty string"),
    ],
)
def test_unknown_ids_are_spec_errors(config_id: str, pattern: str) -> None:
    space = TransformationSpace.from_spec(SPACE_SPEC, schema=SCHEMA, where="transformations")
    with pytest.raises(SpecError, match=pattern):
        space.get(config_id)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda s: s.pop("group"), r"raw column\(s\) 'group' have no transform"),
        (lambda s: s.update(group2={"source": "group", "alternatives": {"a": {"kind": "categorical"}}}),
         r"raw column\(s\) 'group' must be transformed once"),
        (lambda s: s["sex"].update(source="is_female"), r"transformations.sex.source \('is_female'\) must be a schema"),
        (lambda s: s["sex"].update(alternatives={}), r"needs at least one \[transformations.sex.alternatives"),
        (lambda s: s["sex"].update(labels=["M", "F"]), r"transformations.sex: unknown key\(s\) 'labels'"),
        (lambda s: s["sex"]["alternatives"].update({"a=b": {"kind": "boolean"}}), r"alternatives name \('a=b'\)"),
        (lambda s: s["score"]["alternatives"]["halves"].update(edges=[20.0]),
         r"transformations.score.alternatives.halves: .*the last edge \(20.0\) must be < the clip upper bound"),
    ],
)
def test_bad_space_specs_name_the_path(change, pattern: str) -> None:  # type: ignore[no-untyped-def]
    import copy

    spec = copy.deepcopy(SPACE_SPEC)
    change(spec)
    with pytest.raises(SpecError, match=pattern):
        TransformationSpace.from_spec(spec, schema=SCHEMA, where="transformations")


def test_category_groups_merge_declared_categories_as_an_alternative() -> None:
    """Merging categories (issue 13 item 5): named groups, and rare levels into "other"."""
    from privlab.mechanisms.tabular.column_transforms import CategoryGroupsTransform
    from privlab.mechanisms.tabular.transform_specs import column_transform_from_spec

    marital = RawColumn(name="marital-status", type="categorical",
                        categories=("Never-married", "Married-civ-spouse", "Married-AF-spouse", "Divorced", "Widowed"))
    table = {"kind": "groups", "groups": {"Married": ["Married-civ-spouse", "Married-AF-spouse"]}, "other": "Other"}
    merged = column_transform_from_spec(table, name="marital", column=marital, where="transformations.marital")
    assert isinstance(merged, CategoryGroupsTransform)
    assert merged.domain.labels == ("Married", "Other") and merged.domain.values is None
    values = pd.Series(pd.Categorical(["Widowed", "Married-AF-spouse", "Never-married", "Married-civ-spouse"],
                                      categories=list(marital.categories)))
    assert merged.encode(values).tolist() == [1, 0, 1, 0]
    assert list(merged.decode(np.array([0, 1]))) == ["Married-civ-spouse", "Never-married"]
    drawn = merged.decode(np.repeat([0, 1], 3000), rng=np.random.default_rng(4))
    assert set(drawn[:3000]) == {"Married-civ-spouse", "Married-AF-spouse"}
    assert set(drawn[3000:]) == {"Never-married", "Divorced", "Widowed"}
    assert merged.encode(pd.Series(drawn)).tolist() == [0] * 3000 + [1] * 3000
    # Without "other", unlisted categories keep a code each, in schema order.
    kept = column_transform_from_spec({"kind": "groups", "groups": {"Married": ["Married-civ-spouse", "Married-AF-spouse"]}},
                               name="marital", column=marital, where="t")
    assert kept.domain.labels == ("Married", "Never-married", "Divorced", "Widowed")
    for bad, pattern in [
        ({"Married": ["Maried"]}, "lists 'Maried', which is not a category"),
        ({"A": ["Divorced"], "B": ["Divorced"]}, "'Divorced' is in groups 'A' and 'B'"),
        ({"A": []}, "group 'A' must list at least one category"),
    ]:
        with pytest.raises(SpecError, match=pattern):
            column_transform_from_spec({"kind": "groups", "groups": bad}, name="m", column=marital, where="t")
    with pytest.raises(SpecError, match="other .* would be empty"):
        column_transform_from_spec({"kind": "groups", "groups": {"All": list(marital.categories)}, "other": "Other"},
                            name="m", column=marital, where="t")
