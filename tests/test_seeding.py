"""Tests of privlab.platform.dp.seeding: stable keys and the derivation of every random stream.

The literal values below were computed once and checked to come out the same in fresh
interpreters with different ``PYTHONHASHSEED`` values (the subprocess test repeats that check).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privlab.platform.dp.seeding import (
    GRID_SAMPLING_STREAM,
    canonical_params,
    fresh_root_seed,
    grid_sampling_generator,
    reservoir_priorities,
    stable_key,
    trial_generator,
    trial_seed_sequence,
)

# stable_key("study", "laplace_mean"): the quickstart's first study key.
STUDY_KEY = 659373810
# stable_key("reservoir", 20261122, 1, 2)
RESERVOIR_KEY = 268623493
# trial_generator(1, 2, 3, 4).integers(0, 2**32, 3)
TRIAL_DRAWS = [3075795541, 1041466633, 3164834377]
# reservoir_priorities(7, [0, 1, 2])
PRIORITIES = [0.3898297483912715, 0.7398170143550824, 0.386768045983934]

PROBE = """
import json
import numpy as np
from privlab.platform.dp.seeding import reservoir_priorities, stable_key, trial_generator
print(json.dumps([
    stable_key("study", "laplace_mean"),
    stable_key("reservoir", 20261122, 1, 2),
    trial_generator(1, 2, 3, 4).integers(0, 2**32, 3).tolist(),
    reservoir_priorities(7, np.array([0, 1, 2])).tolist(),
]))
"""


# --- stable_key -------------------------------------------------------------------------------


def test_stable_key_literal_values() -> None:
    assert stable_key("study", "laplace_mean") == STUDY_KEY
    assert stable_key("reservoir", 20261122, 1, 2) == RESERVOIR_KEY


def test_stable_key_is_blake2b_of_canonical_json() -> None:
    digest = hashlib.blake2b(b'["study","laplace_mean"]', digest_size=4).digest()
    assert stable_key("study", "laplace_mean") == int.from_bytes(digest, "big")


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
def test_stable_key_and_streams_are_the_same_in_another_process(tmp_path: Path, hash_seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == [STUDY_KEY, RESERVOIR_KEY, TRIAL_DRAWS, PRIORITIES]


def test_python_hash_really_is_salted_per_process(tmp_path: Path) -> None:
    # The reason stable_key exists: str hashes differ between interpreters.
    hashes = {
        json.loads(
            subprocess.run(
                [sys.executable, "-c", 'print(hash("study"))'], cwd=tmp_path, capture_output=True, text=True,
                check=True, timeout=60, env={**os.environ, "PYTHONHASHSEED": seed},
            ).stdout
        )
        for seed in ("1", "2")
    }
    assert len(hashes) == 2


def test_stable_key_properties() -> None:
    assert stable_key({"a": 1, "b": 2}) == stable_key({"b": 2, "a": 1})  # key order does not matter
    assert stable_key("a", "b") != stable_key("b", "a")  # argument order does
    assert stable_key("ab") != stable_key("a", "b")
    assert stable_key(1) != stable_key("1")
    keys = {stable_key("config", i) for i in range(2_000)}
    assert len(keys) == 2_000
    assert all(0 <= key < 2**32 for key in keys)
    assert stable_key(Path("/x")) == stable_key("/x")  # non-JSON values via str()


# --- trial streams ----------------------------------------------------------------------------


def draws(generator: np.random.Generator) -> list[int]:
    return generator.integers(0, 2**32, 3).tolist()


def test_trial_generator_literal_and_repeatable() -> None:
    assert draws(trial_generator(1, 2, 3, 4)) == TRIAL_DRAWS
    assert draws(trial_generator(1, 2, 3, 4)) == TRIAL_DRAWS
    sequence = trial_seed_sequence(1, 2, 3, 4)
    assert sequence.entropy == 1 and sequence.spawn_key == (2, 3, 4)


def test_trial_generators_differ_by_every_key() -> None:
    base = (20261122, STUDY_KEY, RESERVOIR_KEY, 0)
    streams = {tuple(draws(trial_generator(*base)))}
    for position in range(4):
        for delta in (1, 2):
            key = list(base)
            key[position] += delta
            streams.add(tuple(draws(trial_generator(*key))))
    assert len(streams) == 9
    by_trial = {tuple(draws(trial_generator(7, 1, 1, t))) for t in range(1_000)}
    assert len(by_trial) == 1_000


def test_trial_stream_does_not_depend_on_what_ran_before() -> None:
    forwards = [draws(trial_generator(5, 6, 7, t)) for t in range(20)]
    backwards = [draws(trial_generator(5, 6, 7, t)) for t in reversed(range(20))][::-1]
    assert forwards == backwards


def test_grid_sampling_stream_is_separate_and_repeatable() -> None:
    first = draws(grid_sampling_generator(20261122, STUDY_KEY))
    assert draws(grid_sampling_generator(20261122, STUDY_KEY)) == first
    assert draws(grid_sampling_generator(20261123, STUDY_KEY)) != first
    assert draws(grid_sampling_generator(20261122, STUDY_KEY + 1)) != first
    assert first != draws(trial_generator(20261122, STUDY_KEY, GRID_SAMPLING_STREAM, 0))
    assert first not in [draws(trial_generator(20261122, STUDY_KEY, c, 0)) for c in range(50)]


def test_fresh_root_seed_is_a_new_128_bit_integer() -> None:
    seeds = [fresh_root_seed() for _ in range(4)]
    assert all(isinstance(s, int) and 0 <= s < 2**128 for s in seeds)
    assert len(set(seeds)) == 4
    assert draws(trial_generator(seeds[0], 1, 2, 3)) != draws(trial_generator(seeds[1], 1, 2, 3))


# --- reservoir priorities ---------------------------------------------------------------------

MASK = 2**64 - 1


def splitmix64_priority(salt: int, index: int) -> float:
    """An independent pure-Python SplitMix64 finaliser, top 53 bits as a fraction."""
    z = ((index ^ (salt & MASK)) + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return (z >> 11) / 2**53


def test_reservoir_priorities_literal_and_reference_implementation() -> None:
    assert reservoir_priorities(7, np.array([0, 1, 2])).tolist() == PRIORITIES
    indices = [0, 1, 2, 12345, 2**31, 2**53 + 1, 2**63, MASK]
    for salt in (0, 7, RESERVOIR_KEY, MASK, -1):
        got = reservoir_priorities(salt, np.array(indices, dtype=np.uint64))
        assert got.dtype == np.float64
        assert got.tolist() == [splitmix64_priority(salt, i) for i in indices]


def test_reservoir_priorities_are_in_unit_interval() -> None:
    indices = np.arange(200_000, dtype=np.int64)
    priorities = reservoir_priorities(RESERVOIR_KEY, indices)
    assert priorities.min() >= 0.0 and priorities.max() < 1.0
    assert len(np.unique(priorities)) == len(indices)
    # a fixed function, so these are deterministic checks of spread, not random tests
    assert abs(priorities.mean() - 0.5) < 0.005
    counts, _ = np.histogram(priorities, bins=10, range=(0.0, 1.0))
    assert counts.min() > 19_000 and counts.max() < 21_000
    extreme = reservoir_priorities(MASK, np.array([MASK, 0, 2**63], dtype=np.uint64))
    assert ((0.0 <= extreme) & (extreme < 1.0)).all()


def test_reservoir_priorities_are_order_free() -> None:
    rng = np.random.default_rng(99)
    indices = rng.choice(10**9, size=5_000, replace=False)
    salt = 123_456
    whole = reservoir_priorities(salt, indices)
    order = rng.permutation(len(indices))
    assert np.array_equal(reservoir_priorities(salt, indices[order]), whole[order])
    parts = np.array_split(np.arange(len(indices)), 17)
    assert np.array_equal(np.concatenate([reservoir_priorities(salt, indices[p]) for p in parts]), whole)
    assert all(reservoir_priorities(salt, indices[i : i + 1])[0] == whole[i] for i in range(0, 5_000, 250))


def test_reservoir_priorities_depend_on_the_salt() -> None:
    indices = np.arange(1_000)
    a, b = reservoir_priorities(1, indices), reservoir_priorities(2, indices)
    assert not np.array_equal(a, b)
    # the bottom-100 sets (what a reservoir keeps) are different samples
    assert set(np.argsort(a)[:100]) != set(np.argsort(b)[:100])


# --- canonical parameters ---------------------------------------------------------------------


def test_canonical_params_sorted_and_compact() -> None:
    assert canonical_params({"b": 1, "a": [1.0, 2]}) == '{"a":[1.0,2],"b":1}'
    assert canonical_params({"z": {"y": 1, "x": 2}}) == '{"z":{"x":2,"y":1}}'
    assert canonical_params({"p": Path("/data")}) == '{"p":"/data"}'
    assert canonical_params({"a": 1, "b": 2}) == canonical_params({"b": 2, "a": 1})
