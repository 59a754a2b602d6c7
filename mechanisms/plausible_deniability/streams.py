"""Per-candidate random streams keyed by candidate index, drawn one at a time or in batches.

Candidate j of a run owns counter-based streams of Philox4x64-10 (Salmon et al., SC 2011),
the bit generator numpy ships as :class:`numpy.random.Philox`: with the run's 128-bit key K,
lane ℓ of candidate j is the sequence of 64-bit words of the blocks

    Philox_K(b, j, ℓ, 0),  b = 1, 2, …    (each block gives 4 words, in order)

which is exactly what ``numpy.random.Philox(key=K, counter=[0, j, ℓ, 0]).random_raw()``
returns (numpy increments the first counter word before each block). A word is therefore a
pure function of (K, j, ℓ, position), so

* :class:`CandidateStream` (the **reference**) reads a candidate's words from numpy's own
  Philox, one candidate at a time;
* :func:`philox4x64` computes the same blocks for many counters at once with numpy uint64
  arithmetic (the 64×64→128-bit products from four 32-bit partial products),

and the two agree bit for bit (``tests/test_plausible_deniability_tests.py`` checks them
against each other), whatever the batch. This replaces the earlier keying, one
``SeedSequence(root, spawn_key=(j,))`` + PCG64 + ``Generator`` per candidate: hashing a seed
sequence and seeding a generator cost ≈ 19 µs per candidate in Python, more than the whole
per-candidate budget of the issue's target (10 µs), and cannot be batched.

Lanes and draws (each draw a fixed function of fixed words, so batched == reference):

* lane :data:`LANE_MAIN`: word 0 → the seed row, uniform on [0, |D_S|); word 1 → ω, uniform on
  [ω₋, ω₊]; word 2 → the Test 2 noise's uniform (:func:`open_uniform`); word 3 unused;
* lane :data:`LANE_SYNTHESIS`: word p → the uniform of σ-position p in eq. (3)
  (:func:`uniform`, m words whatever ω);
* lane :data:`LANE_ORDER`: word s → step s of the partial Fisher–Yates shuffle that draws the
  examination order (only when max_check_plausible < |D_S|);
* lane :data:`LANE_RETRY` + slot: the words a bounded draw uses after a rejection (slot 0: the
  seed row, 1: ω, 2 + s: order step s).

A bounded integer on [0, r) is Lemire's multiply-shift: with x a word, x·r = hi·2⁶⁴ + lo, the
draw is hi unless lo < (2⁶⁴ − r) mod r, in which case the word is rejected and the next word of
the draw's retry lane is tried. This is exactly uniform; a rejection has probability < r/2⁶⁴
(< 10⁻¹⁴ for any D_S that fits in memory), so the batched path flags the candidates that hit
one and recomputes them with the reference stream.

Privacy:
    The streams are a seeded PRNG, so everything drawn from them (the seed, the resampling,
    the Test 2 noise) is research-only: the key comes from ``source.dp_generator``, which
    release sources refuse.

References:
    Salmon, Moraes, Dror & Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3" (SC 2011);
    Lemire, "Fast Random Integer Generation in an Interval" (ACM TOMACS 2019).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "LANE_MAIN",
    "LANE_ORDER",
    "LANE_RETRY",
    "LANE_SYNTHESIS",
    "CandidateStream",
    "bounded",
    "bounded_batch",
    "lane_words",
    "open_uniform",
    "philox4x64",
    "uniform",
]

LANE_MAIN, LANE_SYNTHESIS, LANE_ORDER, LANE_RETRY = 0, 1, 2, 16

_M0 = np.uint64(0xD2E7470EE14C6C93)
_M1 = np.uint64(0xCA5A826395121157)
_W0 = np.uint64(0x9E3779B97F4A7C15)
_W1 = np.uint64(0xBB67AE8584CAA73B)
_LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)
_11 = np.uint64(11)
_2_POW_64 = 1 << 64


def _mulhilo(a: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) of the 128-bit product a·b, elementwise, for a uint64 constant a."""
    a0, a1 = a & _LOW, a >> _32
    b0, b1 = b & _LOW, b >> _32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _32) + (p01 & _LOW) + (p10 & _LOW)
    hi = p11 + (p01 >> _32) + (p10 >> _32) + (mid >> _32)
    return hi, a * b


def philox4x64(counter: tuple[np.ndarray, ...], key: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Philox4x64-10 of each counter (four uint64 arrays of one shape) under ``key``.

    Returns four uint64 arrays: the block's words in the order numpy's ``random_raw`` emits
    them.
    """
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0 = np.full(c0.shape, key[0], dtype=np.uint64)
    k1 = np.full(c0.shape, key[1], dtype=np.uint64)
    for r in range(10):
        if r:
            k0 = k0 + _W0
            k1 = k1 + _W1
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def lane_words(key: tuple[int, int], candidates: np.ndarray, lane: int, count: int) -> np.ndarray:
    """The first ``count`` words of ``lane`` for each candidate index: shape (len, count)."""
    candidates = np.asarray(candidates, dtype=np.uint64)
    blocks = -(-count // 4)
    b = np.repeat(np.arange(1, blocks + 1, dtype=np.uint64)[None, :], len(candidates), axis=0)
    j = np.repeat(candidates[:, None], blocks, axis=1)
    words = philox4x64((b, j, np.full_like(b, lane), np.zeros_like(b)), key)
    return np.stack(words, axis=2).reshape(len(candidates), blocks * 4)[:, :count]


def uniform(words: np.ndarray) -> np.ndarray:
    """u = ⌊x/2¹¹⌋·2⁻⁵³ ∈ [0, 1) (numpy's ``random()`` conversion), exact in float64."""
    return (np.asarray(words, dtype=np.uint64) >> _11).astype(np.float64) * 2.0**-53


def open_uniform(words: np.ndarray) -> np.ndarray:
    """u = (⌊x/2¹¹⌋ + ½)·2⁻⁵³ ∈ (0, 1), exact in float64: never 0, so a Laplace needs no rejection."""
    return ((np.asarray(words, dtype=np.uint64) >> _11).astype(np.float64) + 0.5) * 2.0**-53


def bounded(word: int, r: int) -> int | None:
    """Lemire's draw on [0, r) from one word, or None when the word is rejected (module docstring)."""
    product = int(word) * r
    lo = product % _2_POW_64
    if lo < r and lo < (_2_POW_64 - r) % r:
        return None
    return product >> 64


def bounded_batch(words: np.ndarray, r: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bounded` elementwise for 1 ≤ r < 2³²: (draws, rejected mask); draws of rejected
    words are meaningless."""
    words = np.asarray(words, dtype=np.uint64)
    r = np.asarray(r, dtype=np.uint64)
    p0 = (words & _LOW) * r
    p1 = (words >> _32) * r
    hi = (p1 + (p0 >> _32)) >> _32
    lo = words * r
    threshold = (np.uint64(0) - r) % r  # (2^64 − r) mod r
    return hi.astype(np.int64), lo < threshold


class CandidateStream:
    """The reference: one candidate's lanes read from numpy's :class:`numpy.random.Philox`.

    Args:
        key: The run's two 64-bit key words.
        index: The candidate's index j ≥ 0.
    """

    def __init__(self, key: tuple[int, int], index: int) -> None:
        self._key = np.array(key, dtype=np.uint64)
        self._index = int(index)

    def words(self, lane: int, count: int) -> np.ndarray:
        """The first ``count`` words of ``lane``."""
        bits = np.random.Philox(key=self._key, counter=np.array([0, self._index, lane, 0], dtype=np.uint64))
        return bits.random_raw(count).astype(np.uint64)

    def bounded(self, word: int, r: int, slot: int) -> int:
        """A uniform draw on [0, r) from ``word``, continuing on retry lane ``slot`` after rejections."""
        value = bounded(word, r)
        position = 0
        while value is None:
            position += 1
            value = bounded(int(self.words(LANE_RETRY + slot, position)[-1]), r)
        return value
