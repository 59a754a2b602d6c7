"""Deterministic derivation of every research-mode random stream from one root seed.

A run has one root seed (the spec's ``seed``, or fresh OS entropy that is then logged). Each
random stream is a :class:`numpy.random.Generator` built from
``SeedSequence(root, spawn_key=(study_key, config_key, trial_index[, purpose]))``, so a trial's
stream depends only on *which* trial it is, never on the worker that ran it, the batch it was
in, or the order batches finished. That is what makes results bit-identical for 1, 2 or N
workers, any batch size and after a resume (tests/test_reproducibility.py checks it).

Keys are stable 32-bit hashes of names and canonical parameter JSON, so adding a
configuration to a grid does not change the streams of the configurations already there.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np

# Purposes within one trial: the trial's own stream, and the reservoir priority stream.
TRIAL_STREAM = 0
GRID_SAMPLING_STREAM = 0xFFFF_FFFF


def stable_key(*parts: Any) -> int:
    """A 32-bit key that depends only on ``parts`` (canonical JSON, BLAKE2b).

    Python's ``hash`` is salted per process, so it cannot be used across Ray workers.
    """
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")


def fresh_root_seed() -> int:
    """A new 128-bit root seed from the OS, for specs that do not fix one (it is logged)."""
    return secrets.randbits(128)


def trial_seed_sequence(
    root_seed: int, study_key: int, config_key: int, trial_index: int
) -> np.random.SeedSequence:
    """The seed sequence of one trial (or repetition) of one configuration."""
    return np.random.SeedSequence(root_seed, spawn_key=(study_key, config_key, trial_index))


def trial_generator(
    root_seed: int, study_key: int, config_key: int, trial_index: int
) -> np.random.Generator:
    """The generator of one trial; PCG64 seeded from :func:`trial_seed_sequence`."""
    return np.random.Generator(
        np.random.PCG64(trial_seed_sequence(root_seed, study_key, config_key, trial_index))
    )


def grid_sampling_generator(root_seed: int, study_key: int) -> np.random.Generator:
    """The stream used to draw random grid points for a study (kept apart from trials)."""
    return np.random.Generator(
        np.random.PCG64(
            np.random.SeedSequence(root_seed, spawn_key=(study_key, GRID_SAMPLING_STREAM))
        )
    )


_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def reservoir_priorities(
    salt: int, trial_indices: np.ndarray
) -> np.ndarray:
    """Order-free pseudo-random priorities in [0, 1) for bottom-k reservoir sampling.

    SplitMix64 of ``salt ^ trial_index``: a pure function of the trial index, so the k
    trials with the smallest priorities are the same whatever the batching and merge order.
    These priorities only choose which values are kept for plots and quantiles; they are not
    used for any privacy mechanism.
    """
    with np.errstate(over="ignore"):
        z = np.asarray(trial_indices, dtype=np.uint64) ^ np.uint64(salt & 0xFFFF_FFFF_FFFF_FFFF)
        z = z + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX_1
        z = (z ^ (z >> np.uint64(27))) * _MIX_2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def canonical_params(params: Mapping[str, Any]) -> str:
    """Canonical JSON of a configuration's parameters (sorted keys), used for keys and ids."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
