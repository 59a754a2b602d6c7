"""The minimal-occurrence projection (Algorithms 3 and 4 of Hod & Canetti 2024)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.mechanisms.tabular.face_privacy import (
    ALGORITHMS,
    MinOccurrenceProjection,
    project_min_occurrence,
    smallest_count,
)
from privlab.platform.core.errors import SchemaError, SpecError


def random_codes(n: int, sizes: tuple[int, ...], seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    # Skewed codes give a mix of unique, rare and frequent records.
    return pd.DataFrame({f"c{j}": np.minimum(rng.geometric(0.35, n) - 1, size - 1) for j, size in enumerate(sizes)})


def records(frame: pd.DataFrame) -> Counter:
    return Counter(map(tuple, frame.to_numpy().tolist()))


def frame_of(multiset: dict[tuple[int, int], int], seed: int) -> pd.DataFrame:
    rows = [record for record, count in multiset.items() for _ in range(count)]
    order = np.random.default_rng(seed).permutation(len(rows))
    return pd.DataFrame(np.asarray(rows)[order], columns=["a", "b"])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("min_count", [2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_projection_properties(algorithm: str, min_count: int, seed: int) -> None:
    codes = random_codes(3000, (4, 5, 6, 3), seed)
    codes.index = codes.index + 100  # a non-default index is kept
    before = records(codes)
    projected = project_min_occurrence(codes, min_count=min_count, rng=np.random.default_rng(seed),
                                       algorithm=algorithm)
    after = records(projected)
    assert projected.shape == codes.shape and projected.index.equals(codes.index)
    assert list(projected.columns) == list(codes.columns) and (projected.dtypes == np.int64).all()
    assert min(after.values()) >= min_count  # statement 4: no record occurs fewer than m times
    assert set(after) <= set(before)  # statement 1: only records of the input
    assert smallest_count(projected) >= min_count
    # Records already occurring >= m times keep all their rows (statements 2, 3; Remark 1 can
    # only add copies); their rows are unchanged in place.
    frequent_rows = codes.apply(tuple, axis=1).map(before).to_numpy() >= min_count
    pd.testing.assert_frame_equal(projected[frequent_rows], codes[frequent_rows])
    for record, count in before.items():
        if count >= min_count:
            assert after[record] >= count
    # Every surviving rare record kept its own rows (only dropped records' rows are rewritten).
    changed = (projected.to_numpy() != codes.to_numpy()).any(axis=1)
    kept_rare = {r for r, c in before.items() if c < min_count and r in after}
    for position in np.flatnonzero(~frequent_rows & ~changed):
        assert tuple(codes.to_numpy()[position]) in kept_rare
    # Mass of the rare levels is preserved up to rounding (< m^2 rows duplicated, Remark 1).
    rare_mass = sum(c for c in before.values() if c < min_count)
    assert abs(sum(after[r] for r, c in before.items() if c < min_count) - rare_mass) < min_count**2


def test_algorithm3_is_exact_under_its_divisibility_assumption() -> None:
    # m = 3: n_1 = 6 (3 | 1·6) and n_2 = 3 (3 | 2·3), plus records occurring 3 and 5 times.
    multiset = {(0, k): 1 for k in range(6)} | {(1, k): 2 for k in range(3)} | {(2, 0): 3, (2, 1): 5}
    codes = frame_of(multiset, seed=0)
    for seed in range(20):
        after = records(project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(seed)))
        assert after[(2, 0)] == 3 and after[(2, 1)] == 5  # statements 2 and 3, exactly
        # Statement 5: each level keeps its mass exactly: ⌊6/3⌋ = 2 singles, ⌊6/3⌋ = 2 doubles.
        assert sum(after[(0, k)] for k in range(6)) == 6
        assert sum(after[(1, k)] for k in range(3)) == 6
        assert sum(1 for k in range(6) if after[(0, k)]) == 2
        assert sum(after.values()) == len(codes)


def test_algorithm4_is_exact_in_size_and_in_expectation() -> None:
    # m = 3: m!/1! = 6 | n_1 and m!/2! = 3 | n_2, so |R_1| = 3, |R_2| = ⌊2/3 · 6⌋ = 4 (Lemma 1).
    multiset = {(0, k): 1 for k in range(12)} | {(1, k): 2 for k in range(6)} | {(2, 0): 4}
    codes = frame_of(multiset, seed=1)
    singles_mass = []
    for seed in range(400):
        after = records(project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(seed),
                                               algorithm="algorithm4"))
        assert after[(2, 0)] == 4 and sum(after.values()) == len(codes)
        assert sum(1 for r, c in after.items() if r != (2, 0)) == 8  # |R_2| = (12 + 2·6)/3
        assert set(after.values()) <= {3, 4}
        singles_mass.append(sum(after[(0, k)] for k in range(12)))
    # Statement 5 in expectation: E[mass of former singles] = 12 (sd of the mean ≈ 0.15).
    assert abs(np.mean(singles_mass) - 12) < 0.75
    assert len(set(singles_mass)) > 1


def test_same_seed_same_output_and_different_seeds_differ() -> None:
    codes = random_codes(2000, (5, 5, 5), seed=3)
    first = project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(42))
    again = project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(42))
    other = project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(43))
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)


def test_frames_that_already_comply_are_returned_unchanged() -> None:
    codes = frame_of({(0, 0): 3, (1, 2): 4}, seed=2)
    projected = project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(projected, codes)
    assert projected is not codes
    empty = codes.iloc[:0]
    assert project_min_occurrence(empty, min_count=2, rng=np.random.default_rng(0)).empty


def test_tiny_inputs_fall_back_to_one_seeded_record() -> None:
    # Counts 1, 1, 2 with m = 3: both algorithms select nothing; one record fills all rows.
    codes = frame_of({(0, 0): 1, (0, 1): 1, (0, 2): 2}, seed=3)
    for algorithm in ALGORITHMS:
        projected = project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(1), algorithm=algorithm)
        after = records(projected)
        assert len(after) == 1 and sum(after.values()) == 4 and set(after) <= set(records(codes))
    with pytest.raises(SchemaError, match=r"2 row\(s\) cannot hold records that each occur at least min_count \(3\)"):
        project_min_occurrence(codes.iloc[:2], min_count=3, rng=np.random.default_rng(0))


def test_boolean_columns_keep_their_dtype_and_large_codes_are_indexed() -> None:
    rng = np.random.default_rng(5)
    codes = pd.DataFrame({"flag": rng.random(500) < 0.5, "big": rng.integers(0, 2**40, 500) % 7 * 2**40,
                          "x": rng.integers(0, 50, 500)})
    projected = project_min_occurrence(codes, min_count=2, rng=np.random.default_rng(0))
    assert projected["flag"].dtype == bool and smallest_count(projected) >= 2
    assert set(records(projected)) <= set(records(codes))


def test_160k_records_project_in_one_vectorised_pass() -> None:
    codes = random_codes(160_000, (12, 29, 11, 15, 2, 32), seed=9)
    projected = project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(9))
    assert len(projected) == 160_000 and smallest_count(projected) >= 3
    assert smallest_count(codes) == 1


def test_bad_arguments_and_codes_are_rejected_before_any_work() -> None:
    codes = random_codes(100, (3, 3), seed=0)
    rng = np.random.default_rng(0)
    for bad in (1, 0, True, 2.0):
        with pytest.raises(SpecError, match=r"min_count \(.*\) must be an integer >= 2"):
            project_min_occurrence(codes, min_count=bad, rng=rng)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"algorithm \('algorithm5'\) must be one of algorithm3, algorithm4"):
        project_min_occurrence(codes, min_count=2, rng=rng, algorithm="algorithm5")
    with pytest.raises(TypeError, match="rng .* must be a numpy.random.Generator"):
        project_min_occurrence(codes, min_count=2, rng=np.random.RandomState(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a pandas DataFrame of codes"):
        project_min_occurrence(codes.to_numpy(), min_count=2, rng=rng)  # type: ignore[arg-type]
    with_nan = codes.astype(float)
    with_nan.loc[4, "c1"] = np.nan
    with pytest.raises(SchemaError, match="column 'c1' has a missing value at row 4"):
        project_min_occurrence(with_nan, min_count=2, rng=rng)
    with pytest.raises(SchemaError, match="column 'c0' must hold integer codes, not float64"):
        project_min_occurrence(codes.astype({"c0": float}), min_count=2, rng=rng)
    negative = codes.copy()
    negative.loc[6, "c1"] = -1
    with pytest.raises(SchemaError, match="column 'c1' has a negative code at row 6"):
        project_min_occurrence(negative, min_count=2, rng=rng)
    domain = Domain((ColumnDomain(name="c0", labels=("a", "b")), ColumnDomain(name="c1", labels=("a", "b", "c"))))
    with pytest.raises(SchemaError, match=r"column 'c0' has a code at row .* outside 0..1"):
        project_min_occurrence(codes, min_count=2, rng=rng, domain=domain)


def test_the_projection_object_is_a_configurable_step() -> None:
    step = MinOccurrenceProjection(min_count=3, algorithm="algorithm4")
    codes = random_codes(1000, (4, 4, 4), seed=4)
    pd.testing.assert_frame_equal(
        step.apply(codes, rng=np.random.default_rng(1)),
        project_min_occurrence(codes, min_count=3, rng=np.random.default_rng(1), algorithm="algorithm4"),
    )
    with pytest.raises(SpecError, match=r"min_count \(1\) must be an int >= 2"):
        MinOccurrenceProjection(min_count=1)
    with pytest.raises(SpecError, match=r"algorithm \('exact'\) must be one of"):
        MinOccurrenceProjection(min_count=2, algorithm="exact")
