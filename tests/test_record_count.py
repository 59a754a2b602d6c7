"""The DP record count and the resize to it (issue 15 item 2; mechanisms/release/record_count.py)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from privlab.mechanisms.release import record_count
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

BIRTHS_SPACE = Path(__file__).resolve().parents[1] / "experiments" / "births" / "space.toml"


def test_margin_is_the_laplace_tail_quantile() -> None:
    # P[Lap(b) > t] = ½·exp(−t/b) ≤ 1e-6  ⇔  t ≥ b·ln(5e5); ln(5e5) = 13.122363…
    assert record_count.count_margin(0.02) == 657  # 13.122363/0.02 = 656.12 → 657
    assert record_count.count_margin(1.0) == 14
    assert record_count.count_margin(0.1, beta=0.05) == 24  # 10·ln(10) = 23.03 → 24


def test_the_count_is_charged_with_sensitivity_one_and_scale_one_over_epsilon() -> None:
    ledger = Ledger(epsilon_cap=10.0)
    record_count.dp_record_count(10_000, epsilon=0.5, source=SeededSource(np.random.default_rng(1)), ledger=ledger)
    (event,) = ledger.events
    assert (event.name, event.mechanism, event.epsilon, event.sensitivity, event.noise_scale) == (
        "record_count", "laplace", 0.5, 1.0, 2.0)
    assert record_count.planned_event(0.5).noise_scale == 2.0 and record_count.planned_event(0.5).sensitivity == 1.0


def test_the_count_is_n_plus_laplace_noise_minus_the_margin() -> None:
    # m + t − n = round(Lap(b)), b = 1/ε = 20. E|Lap(b)| = b and P[Lap(b) > 0] = ½. 4,000 seeded draws:
    # the sample mean of |Z| has standard error b/√4000 ≈ 0.32; ±2.0 is more than 6 standard errors.
    epsilon, n = 0.05, 50_000
    margin = record_count.count_margin(epsilon)
    rng = np.random.default_rng(20261125)
    z = np.array([record_count.dp_record_count(n, epsilon=epsilon, source=SeededSource(rng), ledger=Ledger(epsilon_cap=10.0))
                  for _ in range(4000)]) + margin - n
    assert abs(np.mean(np.abs(z)) - 20.0) < 2.0
    assert abs(np.mean(z > 0) - 0.5) < 0.05  # standard error 0.008
    assert abs(np.mean(z)) < 2.0  # unbiased once the margin is added back


def test_the_count_never_goes_below_one() -> None:
    assert record_count.dp_record_count(0, epsilon=1.0, source=SeededSource(np.random.default_rng(0)),
                                        ledger=Ledger(epsilon_cap=10.0)) == 1


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"mother_age": np.arange(n) % 30 + 18, "parity": 1, "gestation_week": 39,
                         "is_female": True, "birth_weight": 3000 + np.arange(n), "date_of_birth": "2019-05-01"})


def test_resize_down_takes_a_uniform_subset_in_random_order() -> None:
    space = load_release_space(BIRTHS_SPACE)
    cleaned = _frame(10)
    rng = np.random.default_rng(3)
    counts: Counter[int] = Counter()
    firsts: Counter[int] = Counter()
    for _ in range(3000):
        resized = record_count.resize(cleaned, 4, space=space, rng=rng)
        assert len(resized) == 4 and resized["birth_weight"].is_unique
        assert set(resized["birth_weight"]) <= set(cleaned["birth_weight"])
        counts.update(resized["birth_weight"])
        firsts[int(resized["birth_weight"].iloc[0])] += 1
    # Each record is kept with probability 4/10 (1,200 of 3,000 expected, sd ≈ 27) and is first
    # with probability 1/10 (300 expected, sd ≈ 16): ±120 and ±90 are more than 4.4 sd.
    assert all(abs(c - 1200) < 120 for c in counts.values()) and len(counts) == 10
    assert all(abs(c - 300) < 90 for c in firsts.values()) and len(firsts) == 10
    same = record_count.resize(cleaned, 10, space=space, rng=np.random.default_rng(0))
    assert sorted(same["birth_weight"]) == list(cleaned["birth_weight"])


def test_resize_up_keeps_every_record_and_pads_with_valid_public_records() -> None:
    space = load_release_space(BIRTHS_SPACE)
    cleaned = space.clean_raw(_frame(20))
    resized = record_count.resize(cleaned, 120, space=space, rng=np.random.default_rng(5))
    assert len(resized) == 120
    assert set(cleaned["birth_weight"]) <= set(resized["birth_weight"])
    assert len(space.clean_raw(resized)) == 120  # padding passes the schema and every raw constraint
    padding = record_count.padding_records(space, 2000, rng=np.random.default_rng(9))
    assert len(padding) == 2000
    # Uniform over the declared categories: is_female is True half of the time (sd ≈ 0.011).
    assert abs(padding["is_female"].astype(bool).mean() - 0.5) < 0.06
    assert padding["mother_age"].between(space.schema["mother_age"].lower, space.schema["mother_age"].upper).all()


def test_resize_is_reproducible_from_its_generator() -> None:
    space = load_release_space(BIRTHS_SPACE)
    cleaned = _frame(50)
    first = record_count.resize(cleaned, 30, space=space, rng=np.random.default_rng(11))
    second = record_count.resize(cleaned, 30, space=space, rng=np.random.default_rng(11))
    pd.testing.assert_frame_equal(first, second)
    assert not math.isnan(first["birth_weight"].sum())
