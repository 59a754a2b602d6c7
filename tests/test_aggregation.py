"""Tests of privlab.platform.execution.aggregation: exact sums, order-free merging, intervals, state.

The central property: an aggregate is bit-identical (compared with ``==``, never approx) for
any partition of the trials into batches and any merge order. The data used here is chosen
so that ordinary floating-point summation *does* depend on the order (checked in the tests),
so the equalities below would fail for a non-exact implementation.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privlab.platform.dp.seeding import reservoir_priorities
from privlab.platform.execution.aggregation import (
    ConfigAggregate,
    ExactSum,
    IntervalSet,
    MetricAccumulator,
    wilson_interval,
)
from privlab.platform.experiment.registry import MetricKind

N = 10_000
SALT = 0x5EED_1234
KINDS = {"value": MetricKind.VALUE, "rate": MetricKind.RATE}


def adversarial_values(rng: np.random.Generator, n: int = N) -> np.ndarray:
    """Values spanning ~40 orders of magnitude around a large offset: naive sums are order-dependent."""
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, size=n) + 1e6
    values[rng.integers(0, n, size=50)] = 1e16
    values[rng.integers(0, n, size=50)] = -1e16
    return values


def exact_total(values: list[float]) -> Fraction:
    return sum((Fraction(v) for v in values), Fraction(0))


# --- ExactSum ----------------------------------------------------------------------------------

ADVERSARIAL = [
    [1e16, 1.0, -1e16],
    [1e100, 1.0, -1e100, 1e-100],
    [0.1] * 10,
    [1e308, -1e308, 5e-324, 5e-324],
    [2.0**53, 1.0, 1.0, -(2.0**53)],
    [1.0, 1e-16, 1e-16, 1e-16, 1e-16],
    # a tie at half an ulp broken by a far smaller term: summing the partials naively
    # rounds the tie to even (1.0); the correctly rounded sum is 1 + 2⁻⁵².
    [1.0, 2.0**-53, 2.0**-106],
    [-0.0],
    [3.0, -3.0],
    [],
]


@pytest.mark.parametrize("values", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_exact_sum_equals_fsum_and_the_exact_rational_sum(values: list[float]) -> None:
    total = ExactSum()
    total.add(values)
    assert total.value() == math.fsum(values)
    assert math.copysign(1.0, total.value()) == math.copysign(1.0, math.fsum(values))
    assert total.fraction() == exact_total(values)


def test_exact_sum_beats_naive_summation() -> None:
    # Guard that the adversarial cases are adversarial: plain left-to-right summation fails.
    assert sum([1e16, 1.0, -1e16]) == 0.0
    total = ExactSum()
    total.add([1e16, 1.0, -1e16])
    assert total.value() == 1.0


def test_exact_sum_is_order_independent_on_random_permutations() -> None:
    rng = np.random.default_rng(20260101)
    values = adversarial_values(rng, 2_000).tolist() + [1e16, 1.0, -1e16, 1e-300, -1e-300, 5e-324]
    expected_fraction = exact_total(values)
    expected_value = math.fsum(values)
    naive = set()
    for _ in range(20):
        order = rng.permutation(len(values))
        permuted = [values[i] for i in order]
        total = ExactSum()
        total.add(permuted)
        assert total.fraction() == expected_fraction
        assert total.value() == expected_value
        naive.add(sum(permuted))
    assert len(naive) > 1  # the same values, summed naively, depend on the order


def test_exact_sum_merge_of_any_split_in_any_order() -> None:
    rng = np.random.default_rng(7)
    values = adversarial_values(rng, 3_000).tolist()
    expected = exact_total(values)
    for _ in range(10):
        cuts = sorted(rng.choice(np.arange(1, len(values)), size=rng.integers(1, 30), replace=False))
        parts = []
        for chunk in np.split(np.array(values), cuts):
            part = ExactSum()
            part.add(chunk.tolist())
            parts.append(part)
        merged = ExactSum()
        for i in rng.permutation(len(parts)):
            merged.merge(parts[i])
        assert merged.fraction() == expected
        assert merged.value() == math.fsum(values)


# --- MetricAccumulator / ConfigAggregate: order-free merging ------------------------------------


def batch_aggregate(values: np.ndarray, rates: np.ndarray, start: int, stop: int, reservoir_size: int) -> ConfigAggregate:
    aggregate = ConfigAggregate.empty(KINDS, salt=SALT, reservoir_size=reservoir_size)
    aggregate.add_batch({"value": values[start:stop], "rate": rates[start:stop]}, np.arange(start, stop, dtype=np.int64))
    aggregate.done.add(start, stop)
    return aggregate


def random_partition(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    cuts = sorted(rng.choice(np.arange(1, n), size=int(rng.integers(1, 200)), replace=False).tolist())
    bounds = [0, *cuts, n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def merged(values: np.ndarray, rates: np.ndarray, parts: list[tuple[int, int]], order: np.ndarray, reservoir_size: int) -> ConfigAggregate:
    total = ConfigAggregate.empty(KINDS, salt=SALT, reservoir_size=reservoir_size)
    for i in order:
        total.merge(batch_aggregate(values, rates, *parts[i], reservoir_size))
    return total


@pytest.mark.parametrize("reservoir_size", [250, N, 2 * N])
def test_any_partition_and_merge_order_gives_identical_results(reservoir_size: int) -> None:
    rng = np.random.default_rng(42)
    values = adversarial_values(rng)
    rates = (rng.random(N) < 0.3).astype(np.float64)
    reference = batch_aggregate(values, rates, 0, N, reservoir_size)  # one batch, trial order
    expected = reference.summary()
    expected_reservoir = {name: acc.reservoir() for name, acc in reference.metrics.items()}
    for _ in range(6):
        parts = random_partition(rng, N)
        order = rng.permutation(len(parts))
        result = merged(values, rates, parts, order, reservoir_size)
        assert result.summary() == expected
        for name, acc in result.metrics.items():
            assert np.array_equal(acc.reservoir(), expected_reservoir[name])
            assert sorted(acc.res_index.tolist()) == sorted(reference.metrics[name].res_index.tolist())
        assert result.done.ranges == [(0, N)]
    # The same batches added one after another into a single aggregate (no merge at all).
    parts = random_partition(rng, N)
    sequential = ConfigAggregate.empty(KINDS, salt=SALT, reservoir_size=reservoir_size)
    for i in rng.permutation(len(parts)):
        start, stop = parts[i]
        sequential.add_batch({"value": values[start:stop], "rate": rates[start:stop]}, np.arange(start, stop))
    assert sequential.summary() == expected
    # Guard: a float sum in these orders is not order-free, so the equalities above are real.
    assert len({float(np.sum(values[rng.permutation(N)])) for _ in range(5)}) > 1


def test_summary_of_a_value_metric_matches_a_direct_computation() -> None:
    rng = np.random.default_rng(3)
    values = rng.gamma(2.0, 3.0, size=N)
    aggregate = batch_aggregate(values, np.zeros(N), 0, N, reservoir_size=N)
    summary = aggregate.summary()["value"]
    assert summary["count"] == N
    assert summary["mean"] == float(exact_total(values.tolist()) / N)
    assert summary["mean"] == pytest.approx(np.mean(values), rel=1e-14)
    assert summary["sd"] == pytest.approx(np.std(values, ddof=1), rel=1e-12)
    assert (summary["min"], summary["max"]) == (values.min(), values.max())
    # the reservoir holds every value, so its quantiles are the exact sample quantiles
    assert [summary["p05"], summary["p50"], summary["p95"]] == np.quantile(values, [0.05, 0.5, 0.95]).tolist()


def test_t_interval_of_the_mean_matches_scipy() -> None:
    rng = np.random.default_rng(11)
    for n in (2, 5, 37, 1000):
        values = rng.normal(5.0, 2.0, size=n)
        accumulator = MetricAccumulator(kind=MetricKind.VALUE)
        accumulator.add(values, np.arange(n), salt=1)
        summary = accumulator.summary()
        low, high = stats.t.interval(0.95, n - 1, loc=np.mean(values), scale=stats.sem(values))
        assert summary["ci_low"] == pytest.approx(low, rel=1e-12)
        assert summary["ci_high"] == pytest.approx(high, rel=1e-12)
        assert summary["sd"] == pytest.approx(np.std(values, ddof=1), rel=1e-12)


def test_single_value_and_empty_summaries() -> None:
    one = MetricAccumulator(kind=MetricKind.VALUE)
    one.add(np.array([2.5]), np.array([0]), salt=1)
    summary = one.summary()
    assert summary["mean"] == 2.5 and summary["p50"] == 2.5
    assert math.isnan(summary["sd"]) and math.isnan(summary["ci_low"]) and math.isnan(summary["ci_high"])
    assert MetricAccumulator(kind=MetricKind.VALUE).summary() == {"count": 0.0}
    empty = MetricAccumulator(kind=MetricKind.VALUE)
    empty.add(np.array([]), np.array([], dtype=np.int64), salt=1)
    assert empty.count == 0 and empty.summary() == {"count": 0.0}


def test_rate_summary_uses_the_wilson_interval() -> None:
    accumulator = MetricAccumulator(kind=MetricKind.RATE)
    accumulator.add(np.array([1.0] * 8 + [0.0] * 2), np.arange(10), salt=1)
    summary = accumulator.summary()
    # Issue 34 item 8: a rate's number of values is its trials (violation_trials = 2000), not a
    # "count" that reads as the number of events (those are its successes).
    assert summary["trials"] == 10 and summary["successes"] == 8 and summary["rate"] == 0.8
    assert "count" not in summary
    assert summary["ci_low"] == pytest.approx(0.4902, abs=1e-4)
    assert summary["ci_high"] == pytest.approx(0.9433, abs=1e-4)


def test_reservoir_is_the_bottom_k_by_trial_priority() -> None:
    rng = np.random.default_rng(5)
    values = rng.random(N)
    k = 300
    parts = random_partition(rng, N)
    aggregate = merged(values, values, parts, rng.permutation(len(parts)), k)
    accumulator = aggregate.metrics["value"]
    priorities = reservoir_priorities(SALT, np.arange(N))
    expected_indices = np.sort(np.argsort(priorities, kind="stable")[:k])
    assert np.array_equal(np.sort(accumulator.res_index), expected_indices)
    assert np.array_equal(accumulator.reservoir(), values[expected_indices])  # in trial order
    assert accumulator.count == N  # the statistics still cover every trial
    assert accumulator.summary()["max"] == values.max()


def test_reservoir_keeps_everything_in_trial_order_when_it_fits() -> None:
    values = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    accumulator = MetricAccumulator(kind=MetricKind.VALUE, reservoir_size=5)
    accumulator.add(values[3:], np.array([3, 4]), salt=9)
    accumulator.add(values[:3], np.array([0, 1, 2]), salt=9)
    assert accumulator.reservoir().tolist() == values.tolist()
    accumulator.add(np.array([6.0]), np.array([5]), salt=9)
    assert len(accumulator.reservoir()) == 5


# --- Wilson interval ---------------------------------------------------------------------------


def test_wilson_interval_against_hand_computed_values() -> None:
    # centre = (p + z²/2n)/(1 + z²/n), half = z·sqrt(p(1−p)/n + z²/4n²)/(1 + z²/n), z = 1.959963984540054,
    # z² = 3.841458820694125; worked out with `decimal` at 40 digits:
    # 8 of 10: centre 0.71674016004113324, half 0.22657768850449150
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)
    assert low == pytest.approx(0.49016247153664174, rel=1e-13)
    assert high == pytest.approx(0.94331784854562474, rel=1e-13)
    # 0 of 10: centre = half = (z²/20)/(1 + z²/10), so the lower bound is exactly 0, the upper z²/(10 + z²)
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.27753279986288920, rel=1e-13)
    # 10 of 10 mirrors it: the upper bound is exactly 1
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.72246720013711080, rel=1e-13)
    assert high == 1.0


def test_wilson_interval_bounds_are_exact_at_zero_and_all_successes() -> None:
    # centre ∓ half cancels exactly only on paper; the bounds must still be exactly 0 and 1
    # (a lower bound of 7e-18 for 0 of 50 turned a derived log(ci_high/ci_low) finite).
    for n in range(1, 2001):
        assert wilson_interval(0, n)[0] == 0.0
        assert wilson_interval(n, n)[1] == 1.0


def test_wilson_interval_is_symmetric_and_contains_the_rate() -> None:
    for k in range(0, 51):
        low, high = wilson_interval(k, 50)
        mirror_low, mirror_high = wilson_interval(50 - k, 50)
        assert low == pytest.approx(1 - mirror_high, abs=1e-12)
        assert high == pytest.approx(1 - mirror_low, abs=1e-12)
        assert 0.0 <= low <= k / 50 <= high <= 1.0
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    narrow = wilson_interval(800, 1000)
    assert narrow[1] - narrow[0] < wilson_interval(8, 10)[1] - wilson_interval(8, 10)[0]


def test_wilson_interval_other_confidence() -> None:
    z99 = float(stats.norm.ppf(0.995))
    low95, high95 = wilson_interval(30, 100)
    low99, high99 = wilson_interval(30, 100, z=z99)
    assert low99 < low95 and high99 > high95


# --- IntervalSet ---------------------------------------------------------------------------------


def test_interval_set_merges_adjacent_and_keeps_gaps() -> None:
    done = IntervalSet()
    done.add(10, 20)
    done.add(0, 5)
    done.add(30, 40)
    assert done.ranges == [(0, 5), (10, 20), (30, 40)]
    assert done.covered() == 25
    assert done.missing(50) == [(5, 10), (20, 30), (40, 50)]
    done.add(5, 10)  # touches both neighbours: merged into one range
    assert done.ranges == [(0, 20), (30, 40)]
    done.add(20, 30)
    assert done.ranges == [(0, 40)]
    assert done.missing(40) == [] and done.missing(45) == [(40, 45)]
    assert IntervalSet().missing(3) == [(0, 3)]
    assert IntervalSet([(4, 6), (0, 2)]).ranges == [(0, 2), (4, 6)]


@pytest.mark.parametrize("start, stop", [(5, 15), (15, 25), (0, 100), (12, 13), (10, 20)])
def test_interval_set_overlap_raises_and_changes_nothing(start: int, stop: int) -> None:
    done = IntervalSet([(0, 2), (10, 20), (30, 31)])
    with pytest.raises(ValueError, match=rf"units \[{start}, {stop}\) overlap finished units .*double counting"):
        done.add(start, stop)
    assert done.ranges == [(0, 2), (10, 20), (30, 31)]


def test_config_aggregate_merge_with_overlap_changes_nothing() -> None:
    values = np.arange(100, dtype=np.float64)
    target = batch_aggregate(values, values, 50, 60, reservoir_size=10)
    before = json.dumps(target.state(), sort_keys=True)
    other = merged(values, values, [(0, 10), (55, 70)], np.array([0, 1]), reservoir_size=10)
    with pytest.raises(ValueError, match="double counting"):
        target.merge(other)
    # neither the finished ranges nor the metrics were half-merged
    assert json.dumps(target.state(), sort_keys=True) == before


# --- state round trip ----------------------------------------------------------------------------


def roundtrip(aggregate: ConfigAggregate) -> ConfigAggregate:
    return ConfigAggregate.from_state(json.loads(json.dumps(aggregate.state())))


def test_state_round_trip_is_exact() -> None:
    rng = np.random.default_rng(8)
    values = adversarial_values(rng)
    rates = (rng.random(N) < 0.5).astype(np.float64)
    parts = random_partition(rng, N)
    aggregate = merged(values, rates, parts[: len(parts) // 2], rng.permutation(len(parts) // 2), 500)
    aggregate.compute_seconds = 1.25
    restored = roundtrip(aggregate)
    assert json.loads(json.dumps(restored.state())) == json.loads(json.dumps(aggregate.state()))
    assert restored.summary() == aggregate.summary()
    assert restored.done.ranges == aggregate.done.ranges and restored.salt == SALT
    assert restored.compute_seconds == 1.25
    for name, acc in aggregate.metrics.items():
        other = restored.metrics[name]
        assert other.kind is acc.kind and other.reservoir_size == 500 and other.count == acc.count
        assert other.total.fraction() == acc.total.fraction()
        assert other.total_sq.fraction() == acc.total_sq.fraction()
        assert np.array_equal(other.res_priority, acc.res_priority)
        assert np.array_equal(other.res_index, acc.res_index) and other.res_index.dtype == np.int64
        assert np.array_equal(other.res_value, acc.res_value)
    # A restored aggregate continues exactly as if it had never been saved (checkpoint + resume).
    rest = merged(values, rates, parts[len(parts) // 2 :], rng.permutation(len(parts) - len(parts) // 2), 500)
    restored.merge(rest)
    aggregate.merge(rest)
    assert restored.summary() == aggregate.summary() == batch_aggregate(values, rates, 0, N, 500).summary()


def test_state_round_trip_of_an_empty_aggregate() -> None:
    empty = ConfigAggregate.empty(KINDS, salt=3, reservoir_size=7)
    restored = roundtrip(empty)
    assert restored.summary() == {"value": {"count": 0.0}, "rate": {"trials": 0.0}}
    accumulator = restored.metrics["value"]
    assert accumulator.minimum == math.inf and accumulator.maximum == -math.inf
    assert accumulator.reservoir_size == 7 and restored.salt == 3
    assert restored.done.ranges == []


def test_metric_state_preserves_every_bit() -> None:
    accumulator = MetricAccumulator(kind=MetricKind.VALUE, reservoir_size=4)
    tricky = np.array([0.1, -0.0, 5e-324, 1e150, -1e-300, 2.0**-1074 * 3])
    accumulator.add(tricky, np.arange(len(tricky)), salt=12)
    restored = MetricAccumulator.from_state(json.loads(json.dumps(accumulator.state())))
    assert restored.total.partials == accumulator.total.partials
    assert [p.hex() for p in restored.total.partials] == [p.hex() for p in accumulator.total.partials]
    assert restored.res_value.tobytes() == accumulator.res_value.tobytes()
    assert restored.minimum == -1e-300 and restored.maximum == 1e150


def test_the_integer_fast_path_adds_exactly_what_the_partials_would() -> None:
    """ExactSum.add_array's int64 path (integer values, |max| · n < 2⁶²) holds the same exact
    total as Shewchuk's partials, including sums beyond 2⁵³ that need a remainder term."""
    rng = np.random.default_rng(11)
    for scale in (1.0, 100.0, 2.0**40, 2.0**52, 2.0**60):
        for n in (1, 7, 5000):
            values = np.trunc(rng.standard_normal(n) * scale)
            fast, slow = ExactSum(), ExactSum()
            fast.add_array(values)
            slow.add(values.tolist())
            assert fast.fraction() == slow.fraction() and fast.value() == slow.value()
    fractional = np.array([0.1, 0.2, 0.3])
    fast, slow = ExactSum(), ExactSum()
    fast.add_array(fractional)
    slow.add(fractional.tolist())
    assert fast.partials == slow.partials  # not integers: the general path


def test_reservoir_preselection_keeps_the_full_sorts_first_k() -> None:
    rng = np.random.default_rng(12)
    for _ in range(300):
        size, n = int(rng.integers(1, 40)), int(rng.integers(41, 200))
        priority = rng.integers(0, 4, n).astype(float)  # many ties
        index = rng.permutation(n).astype(np.int64)
        value = rng.random(n)
        accumulator = MetricAccumulator(kind=MetricKind.VALUE, reservoir_size=size)
        accumulator._keep(priority, index, value)
        order = np.lexsort((index, priority))[:size]
        assert np.array_equal(accumulator.res_index, index[order]) and np.array_equal(accumulator.res_value, value[order])


def _long_reservoir_artifact(values: dict[str, np.ndarray]) -> bytes:
    """A ``reservoir.parquet`` as runs logged before result parts wrote it: ``(metric, value)``
    rows in each metric's order, the metric names dictionary-encoded, the layout and the metrics'
    order in the schema's metadata."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [name for name, kept in values.items() for _ in range(len(kept))]
    flat = np.concatenate([np.asarray(kept, np.float64) for kept in values.values()])
    table = pa.table({"metric": pa.array(names, pa.string()).dictionary_encode(), "value": pa.array(flat, pa.float64())})
    metadata = {b"privlab.layout": b"long", b"privlab.metrics": json.dumps(list(values)).encode()}
    buffer = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(metadata), buffer)
    return buffer.getvalue()


def test_older_runs_reservoir_artifacts_read_back_as_the_frame_they_came_from() -> None:
    """Reservoir samples of runs logged before result parts (long, and wide before that) read
    back as the frame built in memory: NaN padding for shorter samples, NaN values kept, an
    empty sample kept as a column."""
    from privlab.platform.results.reports import parquet_bytes, parquet_frame, reservoir_frame

    values = {"a": np.array([1.0, np.nan, 3.0]), "b": np.array([0.5]), "c": np.array([], np.float64),
              "d": np.array([2, 4])}
    expected = reservoir_frame(values)
    assert list(expected.columns) == ["a", "b", "c", "d"] and expected["b"].isna().tolist() == [False, True, True]
    pd.testing.assert_frame_equal(parquet_frame(_long_reservoir_artifact(values)), expected)
    pd.testing.assert_frame_equal(parquet_frame(parquet_bytes(expected)), expected)  # the wide layout
    assert parquet_frame(None) is None and parquet_frame(b"") is None


def test_drop_samples_frees_the_reservoirs_and_keeps_the_totals() -> None:
    rng = np.random.default_rng(3)
    aggregate = ConfigAggregate.empty(KINDS, salt=SALT, reservoir_size=50)
    aggregate.add_batch({"value": rng.normal(size=200), "rate": rng.integers(0, 2, 200).astype(float)}, np.arange(200))
    aggregate.done.add(0, 200)
    aggregate.unit_records.append((0, {"value": 1.0}))
    before = {name: (acc.count, acc.total.value(), acc.minimum, acc.maximum) for name, acc in aggregate.metrics.items()}
    assert all(acc.reservoir().size == 50 for acc in aggregate.metrics.values())
    aggregate.drop_samples()
    assert all(acc.reservoir().size == 0 for acc in aggregate.metrics.values())
    assert aggregate.unit_records == []
    assert {name: (acc.count, acc.total.value(), acc.minimum, acc.maximum)
            for name, acc in aggregate.metrics.items()} == before
    assert aggregate.done.covered() == 200
