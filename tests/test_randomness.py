"""Tests of the exact CSPRNG samplers, the random sources and the randomness transcript.

The secure-sampler tests draw from the real OS CSPRNG, so they are random. Each one fails
falsely with probability below 1e-9: the bounds are Chernoff bounds computed from the exact
moment generating function (rigorous), except the chi-square tests, which use the asymptotic
chi-square tail (see ``_assert_pmf``).
"""

from __future__ import annotations

import errno
import math
import shutil
import stat
import struct
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, special, stats

from privlab.platform.core.errors import ModeError, TranscriptError
from privlab.platform.dp.randomness import ReplaySource, SecureSource, SeededSource
from privlab.platform.dp.secure_sampling import (
    bernoulli_exact,
    bernoulli_exp_neg,
    discrete_laplace,
    laplace_on_lattice,
    lattice_exponent,
    release_laplace_parameters,
    release_laplace_scale,
    snap_to_lattice,
    uniform_float,
    uniform_int,
)
from privlab.platform.dp.transcript import (
    MAGIC,
    MAGIC_V1,
    TranscriptReader,
    TranscriptWriter,
    read_records,
)

CONTEXT = {"spec_sha256": "ab12", "data_sha256": "cd34"}


# --- rigorous tail bounds ----------------------------------------------------------------


def _chernoff_interval(
    values: np.ndarray, probs: np.ndarray, n: int, delta: float
) -> tuple[float, float]:
    """(lo, hi) with P(mean of n iid draws < lo) <= delta and P(mean > hi) <= delta.

    Chernoff: P(mean >= a) <= exp(-n I(a)), I(a) = sup_lam (lam a - log E exp(lam X)), for a
    distribution on finitely many values. The numerical sup is a lower estimate of I, which
    only widens the interval (the bound stays valid).
    """
    width = float(np.max(np.abs(values))) or 1.0
    x = np.asarray(values, dtype=float) / width
    log_p = np.log(np.asarray(probs, dtype=float))
    mean = float(np.exp(log_p) @ x)
    target = math.log(1.0 / delta) / n

    def rate(a: float) -> float:
        sign = 1.0 if a >= mean else -1.0
        result = optimize.minimize_scalar(
            lambda lam: -(sign * lam * a - special.logsumexp(sign * lam * x + log_p)),
            bounds=(0.0, 1e4),
            method="bounded",
            options={"xatol": 1e-10},
        )
        return -float(result.fun)

    hi = optimize.brentq(lambda a: rate(a) - target, mean, float(x.max()), xtol=1e-12)
    lo = optimize.brentq(lambda a: rate(a) - target, float(x.min()), mean, xtol=1e-12)
    return (lo - 1e-9) * width, (hi + 1e-9) * width


def _assert_frequency(hits: int, n: int, p: float) -> None:
    """Two-sided Chernoff check of a Bernoulli(p) count; false failure <= 2 * 4e-10."""
    if p in (0.0, 1.0):
        assert hits == n * p
        return
    lo, hi = _chernoff_interval(np.array([0.0, 1.0]), np.array([1 - p, p]), n, 4e-10)
    assert lo <= hits / n <= hi, (hits / n, p, lo, hi)


def _discrete_laplace_pmf(scale: Fraction, xs: np.ndarray) -> np.ndarray:
    q = math.exp(-1 / scale)
    return (1 - q) / (1 + q) * q ** np.abs(xs)


def _assert_pmf(samples: np.ndarray, scale: Fraction) -> None:
    """Chi-square goodness of fit against the exact discrete Laplace pmf.

    Every bin (the central values and the two lumped tails) expects at least 1000 draws, so
    the asymptotic chi-square tail is accurate; the test fails at p < 1e-10, a factor 10
    below the 1e-9 false-failure target to absorb the approximation error.
    """
    n = len(samples)
    q = math.exp(-1 / scale)
    p0 = (1 - q) / (1 + q)
    edge = int(math.floor(math.log(1000 / (n * p0)) / math.log(q)))  # p(edge) * n >= 1000
    xs = np.arange(-edge, edge + 1)
    tail = q ** (edge + 1) / (1 + q)  # P(X > edge) = P(X < -edge)
    expected = n * np.concatenate([[tail], _discrete_laplace_pmf(scale, xs), [tail]])
    observed = np.concatenate(
        [[np.sum(samples < -edge)], [np.sum(samples == x) for x in xs], [np.sum(samples > edge)]]
    )
    assert expected.min() >= 1000
    expected *= n / expected.sum()  # remove float rounding of the total
    assert stats.chisquare(observed, expected).pvalue > 1e-10


def _draws(sampler: Callable[[], int], n: int) -> np.ndarray:
    return np.fromiter((sampler() for _ in range(n)), dtype=np.int64, count=n)


# --- secure samplers ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def laplace_scale_2() -> np.ndarray:
    return _draws(lambda: discrete_laplace(Fraction(2)), 60_000)


@pytest.mark.statistical
def test_discrete_laplace_pmf_integer_scale(laplace_scale_2: np.ndarray) -> None:
    _assert_pmf(laplace_scale_2, Fraction(2))


@pytest.mark.statistical
def test_discrete_laplace_pmf_rational_scale() -> None:
    scale = Fraction(7, 3)  # exercises the s/t decomposition (s = 3)
    _assert_pmf(_draws(lambda: discrete_laplace(scale), 40_000), scale)


def _clipped_moment_interval(
    scale: Fraction, n: int, moment: Callable[[np.ndarray], np.ndarray]
) -> tuple[float, float]:
    """Interval for the sample mean of moment(X), failing with probability < 1e-9.

    X is clipped to [-m, m] with n P(|X| > m) <= 1e-10 (so clipping changes nothing except
    with that probability), and the clipped variable gets a two-sided Chernoff bound at
    4e-10 per side: 1e-10 + 8e-10 < 1e-9.
    """
    q = math.exp(-1 / scale)
    m = math.ceil(math.log(1e-10 * (1 + q) / (2 * n)) / math.log(q))  # 2 q^(m+1)/(1+q) n <= 1e-10
    xs = np.arange(-m, m + 1)
    probs = _discrete_laplace_pmf(scale, xs)
    probs[0] = probs[-1] = q**m / (1 + q)  # the tails sit on the clip points
    return _chernoff_interval(moment(xs.astype(float)), probs, n, 4e-10)


@pytest.mark.statistical
def test_discrete_laplace_mean(laplace_scale_2: np.ndarray) -> None:
    lo, hi = _clipped_moment_interval(Fraction(2), len(laplace_scale_2), lambda x: x)
    assert lo <= laplace_scale_2.mean() <= hi
    assert hi - lo < 0.2  # about 7% of the standard deviation: tight enough to mean something


@pytest.mark.statistical
def test_discrete_laplace_variance(laplace_scale_2: np.ndarray) -> None:
    q = math.exp(-1 / 2)
    variance = 2 * q / (1 - q) ** 2
    lo, hi = _clipped_moment_interval(Fraction(2), len(laplace_scale_2), np.square)
    second_moment = float(np.mean(laplace_scale_2.astype(float) ** 2))  # the mean is 0
    assert lo <= second_moment <= hi
    assert lo < variance < hi and (hi - lo) / variance < 0.25


@pytest.mark.statistical
def test_discrete_laplace_huge_scale() -> None:
    t = 2**40  # no O(scale) loop: this must be as fast as scale 1
    n = 20_000
    samples = _draws(lambda: discrete_laplace(Fraction(t) + Fraction(1, 3)), n)
    # P(|X| >= t) = 2 q^t / (1 + q) with q = exp(-1 / scale); q^t computed as one exp.
    q_to_t = math.exp(-t / (t + 1 / 3))
    _assert_frequency(int(np.sum(np.abs(samples) >= t)), n, 2 * q_to_t / (1 + q_to_t ** (1 / t)))


@pytest.mark.statistical
@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(3, 2), Fraction(0), Fraction(4)])
def test_bernoulli_exp_neg_frequency(gamma: Fraction) -> None:
    n = 40_000
    hits = sum(bernoulli_exp_neg(gamma) for _ in range(n))
    _assert_frequency(hits, n, math.exp(-gamma))


@pytest.mark.statistical
def test_bernoulli_exact_frequency() -> None:
    n = 40_000
    assert not any(bernoulli_exact(Fraction(0)) for _ in range(100))
    assert all(bernoulli_exact(Fraction(1)) for _ in range(100))
    _assert_frequency(sum(bernoulli_exact(Fraction(2, 7)) for _ in range(n)), n, 2 / 7)


@pytest.mark.statistical
def test_uniform_int_and_float_support() -> None:
    # Missing one of 7 values in 10_000 draws has probability <= 7 (6/7)^10000 < 1e-600.
    values = {uniform_int(-3, 4) for _ in range(10_000)}
    assert values == set(range(-3, 4))
    assert uniform_int(2**70, 2**70 + 1) == 2**70
    floats = [uniform_float() for _ in range(1000)]
    assert all(0.0 <= f < 1.0 and (f * 2**53).is_integer() for f in floats)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: discrete_laplace(0.5), TypeError),  # floats must be wrapped in Fraction
        (lambda: discrete_laplace(Fraction(0)), ValueError),
        (lambda: discrete_laplace(True), TypeError),
        (lambda: bernoulli_exact(Fraction(3, 2)), ValueError),
        (lambda: bernoulli_exp_neg(Fraction(-1)), ValueError),
        (lambda: uniform_int(3, 3), ValueError),
        (lambda: lattice_exponent(0.0), ValueError),
        (lambda: lattice_exponent(math.inf), ValueError),
        (lambda: laplace_on_lattice(1.0, -1075), ValueError),
        (lambda: laplace_on_lattice(1.0, -60), ValueError),  # scale / 2**k > 2**40
        (lambda: snap_to_lattice(math.nan, 0), ValueError),
        (lambda: release_laplace_parameters(1.0, 2.0**-30), ValueError),
    ],
)
def test_secure_sampler_validation(call: Callable[[], object], error: type) -> None:
    with pytest.raises(error, match=r"\(.*\) must be"):
        call()


def test_lattice_exponent_is_exact() -> None:
    assert lattice_exponent(1.0) == -30
    assert lattice_exponent(math.nextafter(1.0, 0.0)) == -31
    assert lattice_exponent(3.0) == -29
    assert lattice_exponent(2.0**-1074) == -1104


@pytest.mark.parametrize("scale", [1e-6, 0.37, 1.0, 3e5])
def test_lattice_laplace_is_on_the_lattice_and_adds_exactly(scale: float) -> None:
    k = lattice_exponent(scale)
    grid = Fraction(2) ** k
    value = snap_to_lattice(123.456 * scale, k)
    for _ in range(300):
        noise = laplace_on_lattice(scale, k)
        assert (Fraction(noise) / grid).denominator == 1
        assert Fraction(value + noise) == Fraction(value) + Fraction(noise)


@pytest.mark.statistical
def test_lattice_laplace_tail_frequency() -> None:
    n = 20_000
    scale = 0.37
    k = lattice_exponent(scale)
    hits = sum(abs(laplace_on_lattice(scale, k)) >= scale for _ in range(n))
    # The lattice pmf falls by q = exp(-2**k / scale) per step; P(|N| >= m) = 2 q^m / (1 + q).
    m = math.ceil(scale / 2.0**k)
    q = math.exp(-(2.0**k) / scale)
    _assert_frequency(hits, n, 2 * math.exp(-m * 2.0**k / scale) / (1 + q))


def test_snap_to_lattice_is_exact_rounding() -> None:
    rng = np.random.default_rng(7)
    for value in rng.normal(0, 100, size=500).tolist() + [0.0, -0.0, 1e300, -5e-324]:
        for k in (-40, -3, 0, 5):
            snapped = snap_to_lattice(value, k)
            n = round(Fraction(value) / Fraction(2) ** k)
            assert Fraction(snapped) == n * Fraction(2) ** k
            assert abs(Fraction(snapped) - Fraction(value)) <= Fraction(2) ** (k - 1)


def test_snap_to_lattice_ties_to_even_and_keeps_lattice_points() -> None:
    assert snap_to_lattice(2.5, 0) == 2.0
    assert snap_to_lattice(3.5, 0) == 4.0
    assert snap_to_lattice(-2.5, 0) == -2.0
    assert snap_to_lattice(0.375, -2) == 0.5  # 1.5 quarters -> 2 quarters
    assert snap_to_lattice(12.0, 2) == 12.0
    assert snap_to_lattice(2.0**60 + 2.0**8, -30) == 2.0**60 + 2.0**8  # ulp already coarser


def test_release_laplace_scale_rounds_up_exactly() -> None:
    rng = np.random.default_rng(11)
    rounded_down = 0
    for sensitivity, epsilon in rng.uniform(0.01, 10, size=(500, 2)).tolist():
        k = lattice_exponent(sensitivity / epsilon)
        scale = release_laplace_scale(sensitivity, epsilon, k)
        exact = (Fraction(sensitivity) + Fraction(2) ** k) / Fraction(epsilon)
        assert Fraction(scale) >= exact
        assert Fraction(math.nextafter(scale, -math.inf)) < exact  # the smallest such float
        rounded_down += Fraction(float(exact)) < exact
    assert rounded_down > 0  # the nextafter branch was exercised


@pytest.mark.parametrize(
    ("sensitivity", "epsilon"),
    [(1.0, 1.0), (math.nextafter(1.0, 0.0), 1.0), (1.0, 0.1), (3.0, 1e-6), (1e-12, 5.0)],
)
def test_release_laplace_parameters_are_consistent(sensitivity: float, epsilon: float) -> None:
    scale, k = release_laplace_parameters(sensitivity, epsilon)
    assert lattice_exponent(scale) == k
    assert Fraction(scale) >= (Fraction(sensitivity) + Fraction(2) ** k) / Fraction(epsilon)


# --- SeededSource ------------------------------------------------------------------------


def _exercise(source: SeededSource | SecureSource | ReplaySource) -> list[bytes]:
    """A mixed sequence of calls; every output as bytes, for bit-identical comparison."""
    out = [
        struct.pack("<d", source.laplace(scale=1.5)),
        source.laplace(scale=0.25, size=(2, 3)).tobytes(),
        struct.pack("<q", source.integers(low=-10, high=10)),
        source.integers(low=0, high=2**40, size=5).tobytes(),
        struct.pack("<d", source.uniform()),
        source.uniform(size=4).tobytes(),
        struct.pack("<?", source.bernoulli(p=0.3)),
        source.bernoulli(p=0.5, size=7).tobytes(),
        source.laplace(scale=2.0, size=0).tobytes(),
    ]
    post = source.generator(purpose="sample synthetic rows")
    out += [post.random(5).tobytes(), post.integers(0, 100, size=5).tobytes()]
    out.append(struct.pack("<d", source.laplace(scale=1e-3)))
    return out


def test_seeded_source_reproducible() -> None:
    first = _exercise(SeededSource(np.random.default_rng(123)))
    again = _exercise(SeededSource(np.random.default_rng(123)))
    other = _exercise(SeededSource(np.random.default_rng(124)))
    assert first == again
    assert first != other
    assert first[1] != other[1] and first[9] != other[9]  # noise array, post-processing stream
    ss = np.random.SeedSequence(99)
    assert _exercise(SeededSource.from_seed_sequence(ss)) == _exercise(
        SeededSource(np.random.Generator(np.random.PCG64(np.random.SeedSequence(99))))
    )


def test_seeded_source_generators_depend_on_purpose_and_order() -> None:
    a = SeededSource(np.random.default_rng(5)).generator(purpose="a").random(3)
    b = SeededSource(np.random.default_rng(5)).generator(purpose="b").random(3)
    source = SeededSource(np.random.default_rng(5))
    first, second = source.generator(purpose="a"), source.generator(purpose="a")
    assert not np.array_equal(a, b)
    assert np.array_equal(first.random(3), a)
    assert not np.array_equal(second.random(3), a)


def test_seeded_source_types_and_mode() -> None:
    source = SeededSource(np.random.default_rng(0))
    assert source.mode == "research"
    assert source.noise_lattice(1.0) is None
    assert type(source.laplace(scale=1.0)) is float
    assert type(source.integers(low=0, high=3)) is int
    assert type(source.uniform()) is float
    assert type(source.bernoulli(p=0.5)) is bool
    assert source.laplace(scale=1.0, size=(2, 0)).shape == (2, 0)
    with pytest.raises(TypeError, match=r"rng \(.*\) must be a numpy.random.Generator"):
        SeededSource(np.random.RandomState(0))  # type: ignore[arg-type]


@pytest.mark.statistical
def test_seeded_source_laplace_scale() -> None:
    scale = 3.0
    noise = SeededSource(np.random.default_rng(2024)).laplace(scale=scale, size=200_000)
    assert abs(np.mean(np.abs(noise)) / scale - 1) < 0.01  # E|X| = scale
    assert abs(np.var(noise) / (2 * scale**2) - 1) < 0.03  # Var X = 2 scale^2


@pytest.fixture(params=["seeded", "secure"])
def any_source(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SeededSource | SecureSource]:
    if request.param == "seeded":
        yield SeededSource(np.random.default_rng(0))
        return
    with TranscriptWriter(tmp_path / "t.bin", context=CONTEXT) as writer:
        yield SecureSource(writer)


def test_sources_cover_the_int64_range(any_source: SeededSource | SecureSource) -> None:
    values = any_source.integers(low=-(2**63), high=2**63, size=3)
    assert values.dtype == np.int64 and values.shape == (3,)
    assert any_source.integers(low=2**63 - 1, high=2**63) == 2**63 - 1


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.laplace(scale=0.0), ValueError, r"scale \(0.0\) must be positive and finite"),
        (lambda s: s.laplace(scale=-1), ValueError, r"scale \(-1\) must be positive"),
        (lambda s: s.laplace(scale=math.inf), ValueError, r"scale \(inf\) must be"),
        (lambda s: s.laplace(scale=math.nan), ValueError, r"scale \(nan\) must be"),
        (lambda s: s.laplace(scale="1"), TypeError, r"scale \('1'\) must be a real number"),
        (lambda s: s.laplace(scale=1.0, size=-1), ValueError, r"size \(-1\) must be non-negative"),
        (lambda s: s.uniform(size=(2, -1)), ValueError, r"size \(\(2, -1\)\) must be"),
        (lambda s: s.uniform(size=1.5), TypeError, r"size \(1.5\) must be None, an int"),
        (lambda s: s.uniform(size=True), TypeError, r"size \(True\) must be"),
        (lambda s: s.bernoulli(p=1.5), ValueError, r"p \(1.5\) must be in \[0, 1\]"),
        (lambda s: s.bernoulli(p=math.nan), ValueError, r"p \(nan\) must be in \[0, 1\]"),
        (lambda s: s.integers(low=3, high=3), ValueError, r"high \(3\) must be > low \(3\)"),
        (lambda s: s.integers(low=0, high=2**63 + 1), ValueError, r"high \(\d+\) must be <= 2"),
        (lambda s: s.integers(low=-(2**63) - 1, high=0), ValueError, r"low \(-\d+\) must be >="),
        (lambda s: s.integers(low=0.0, high=3), TypeError, r"low \(0.0\) must be an int"),
        (lambda s: s.generator(purpose=""), ValueError, r"purpose \(''\) must be a non-empty"),
    ],
)
def test_source_validation(
    any_source: SeededSource | SecureSource,
    call: Callable[[SeededSource | SecureSource], object],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        call(any_source)
    if isinstance(any_source, SecureSource):
        assert any_source.transcript.count == 0  # a refused request records nothing


# --- release sources and the transcript --------------------------------------------------


def test_transcript_round_trip_is_bit_identical(tmp_path: Path) -> None:
    path = tmp_path / "release.transcript"
    with TranscriptWriter(path, context=CONTEXT) as writer:
        source = SecureSource(writer)
        assert source.mode == "release"
        recorded = _exercise(source)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    replay = ReplaySource(TranscriptReader(path, expected_context=CONTEXT))
    assert _exercise(replay) == recorded
    replay.finish()

    ops = [record.op for record in read_records(path)]
    assert ops == ["laplace", "laplace", "integers", "integers", "uniform", "uniform",
                   "bernoulli", "bernoulli", "laplace", "seed", "laplace"]  # fmt: skip
    first = next(iter(read_records(path)))
    assert first.params == {"scale": 1.5, "k": lattice_exponent(1.5)} and first.shape == ()


def test_secure_laplace_is_on_the_source_lattice(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.bin", context=CONTEXT) as writer:
        source = SecureSource(writer)
        scale, k = release_laplace_parameters(1.0, 0.5)
        assert source.noise_lattice(scale) == k
        noise = source.laplace(scale=scale, size=200)
    assert all((Fraction(x) / Fraction(2) ** k).denominator == 1 for x in noise.tolist())


def test_draw_is_recorded_and_flushed_before_it_is_returned(tmp_path: Path) -> None:
    path, killed = tmp_path / "t.bin", tmp_path / "killed.bin"
    with TranscriptWriter(path, context=CONTEXT) as writer:
        source = SecureSource(writer)
        values = [source.laplace(scale=1.0), source.uniform()]
        shutil.copy(path, killed)  # what a process killed now would leave behind
    seen = []
    with pytest.raises(TranscriptError, match=r"ends without its end record, .* interrupted"):
        for record in read_records(killed):
            seen.append(record.array.item())
    assert seen == values
    with pytest.raises(TranscriptError, match="ends without its end record") as error:
        TranscriptReader(killed)
    assert "2" not in str(error.value).replace(str(killed), "")  # no count of the records


def test_a_full_disk_breaks_the_writer_for_good(tmp_path: Path, transcript_disk: dict[str, int | bool]) -> None:
    """Issue 30 item 1: a write that fails (ENOSPC) is kept as ``failure``; the writer is closed
    unsealed, refuses every later write, and neither ``close`` nor ``discard`` raises again, so
    a caller's cleanup cannot mask the error; the file reads as interrupted."""
    path = tmp_path / "t.bin"
    writer = TranscriptWriter(path, context=CONTEXT)
    source = SecureSource(writer)
    source.laplace(scale=1.0)
    assert writer.failure is None
    transcript_disk["full"] = True
    with pytest.raises(OSError) as error:
        source.laplace(scale=1.0)
    assert error.value.errno == errno.ENOSPC and writer.failure is error.value
    with pytest.raises(TranscriptError, match="an earlier write failed .*cannot be sealed"):
        source.uniform()
    writer.close()
    writer.discard()
    with pytest.raises(TranscriptError, match="not closed yet"):
        _ = writer.seal
    with pytest.raises(TranscriptError, match="interrupted"):
        TranscriptReader(path)
    # The end record on a full disk: close raises once, then the writer is closed and unsealed.
    transcript_disk["full"] = False
    sealing = TranscriptWriter(tmp_path / "s.bin", context=CONTEXT)
    transcript_disk["full"] = True
    with pytest.raises(OSError):
        sealing.close()
    assert sealing.failure is not None and sealing.failure.errno == errno.ENOSPC
    sealing.close()
    with pytest.raises(TranscriptError, match="not closed yet"):
        _ = sealing.seal


def test_discard_leaves_an_unsealed_transcript(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    writer = TranscriptWriter(path, context=CONTEXT)
    SecureSource(writer).laplace(scale=1.0)
    writer.discard()
    writer.discard()
    with pytest.raises(TranscriptError, match="interrupted"):
        TranscriptReader(path)


def _record_three(path: Path) -> None:
    with TranscriptWriter(path, context=CONTEXT) as writer:
        source = SecureSource(writer)
        source.laplace(scale=1.0, size=3)
        source.integers(low=0, high=10)
        source.uniform(size=2)


@pytest.mark.parametrize(
    ("replay", "message"),
    [
        (lambda s: s.uniform(size=3), r"request in op \(values withheld\)"),
        (lambda s: s.laplace(scale=1.5, size=3), r"request in params\['scale'\] \(values withheld\)"),
        (lambda s: s.laplace(scale=1.0, size=4), r"request in shape \(values withheld\)"),
        (lambda s: s.laplace(scale=1.0), r"request in shape \(values withheld\)"),
    ],
)
def test_replay_refuses_a_different_request(
    tmp_path: Path, replay: Callable[[ReplaySource], object], message: str
) -> None:
    path = tmp_path / "t.bin"
    _record_three(path)
    reader = TranscriptReader(path)
    with pytest.raises(TranscriptError, match=r"the next recorded draw differs from this run's " + message) as error:
        replay(ReplaySource(reader))
    for value in ("laplace", "1.0", "1.5", "[3]", "[4]", "seq"):  # neither values nor positions
        assert value not in str(error.value)
    assert reader.remaining() == 3  # a refused request consumes nothing


def test_replay_refuses_a_different_later_request(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    _record_three(path)
    source = ReplaySource(TranscriptReader(path))
    source.laplace(scale=1.0, size=3)
    with pytest.raises(TranscriptError, match=r"request in params\['high'\] \(values withheld\)") as error:
        source.integers(low=0, high=11)
    assert "10" not in str(error.value) and "11" not in str(error.value)


def test_replay_refuses_a_different_context(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    _record_three(path)
    with pytest.raises(
        TranscriptError,
        match=r"recorded for a different data_sha256 than this run's; replay needs the same",
    ) as error:
        TranscriptReader(path, expected_context={**CONTEXT, "data_sha256": "ef56"})
    assert "cd34" not in str(error.value) and "ef56" not in str(error.value)  # the data's hash is withheld
    with pytest.raises(TranscriptError, match=r"no context entry 'seed'"):
        TranscriptReader(path, expected_context={"seed": "1"})
    assert TranscriptReader(path, expected_context={"spec_sha256": "ab12"}).context == CONTEXT


def test_replay_detects_unconsumed_and_missing_draws(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    _record_three(path)
    source = ReplaySource(TranscriptReader(path))
    source.laplace(scale=1.0, size=3)
    with pytest.raises(TranscriptError, match=r"recorded draws remain unconsumed; the replayed run made fewer") as error:
        source.finish()
    assert not any(ch.isdigit() for ch in str(error.value))
    source.integers(low=0, high=10)
    source.uniform(size=2)
    source.finish()
    with pytest.raises(TranscriptError, match=r"no record left but this run requests another 'uniform' draw") as error:
        source.uniform()
    assert "3" not in str(error.value)


@pytest.mark.parametrize(("chop", "complete"), [(5, 3), (160, 2)])
def test_truncated_transcript_is_reported(tmp_path: Path, chop: int, complete: int) -> None:
    path = tmp_path / "t.bin"
    _record_three(path)
    data = path.read_bytes()
    path.write_bytes(data[:-chop])  # 5 bytes: into the end record (≈ 130 bytes with its seal); 160: into the last draw
    with pytest.raises(TranscriptError, match=r"ends without its end record, .*interrupted"):
        TranscriptReader(path)
    assert len(list(_prefix(path))) == complete


def _prefix(path: Path) -> list[object]:
    records: list[object] = []
    try:
        records.extend(read_records(path))
    except TranscriptError:
        pass
    return records


def test_writer_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "existing.bin"
    path.write_bytes(b"keep me")
    with pytest.raises(TranscriptError, match=rf"{path.name}' already exists"):
        TranscriptWriter(path, context=CONTEXT)
    assert path.read_bytes() == b"keep me"


def test_writer_refuses_bad_input_and_use_after_close(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="context"):
        TranscriptWriter(tmp_path / "a.bin", context={"seed": 1})  # type: ignore[dict-item]
    writer = TranscriptWriter(tmp_path / "b.bin", context=CONTEXT)
    with pytest.raises(TypeError, match="JSON-serializable"):
        writer.append("op", {"x": math.nan}, np.zeros(1))
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(TranscriptError, match="is closed"):
        writer.append("op", {}, np.zeros(1))


@pytest.mark.parametrize("content", [b"", b"not a transcript at all\n", MAGIC[:-1]])
def test_reader_refuses_a_non_transcript(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "other.bin"
    path.write_bytes(content)
    with pytest.raises(TranscriptError, match="is not a privlab transcript"):
        TranscriptReader(path)


def test_writer_stores_explicit_little_endian(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    big_endian = np.arange(6, dtype=">i4").reshape(2, 3).T  # neither native nor C order
    with TranscriptWriter(path, context={}) as writer:
        writer.append("custom", {"note": "x"}, big_endian)
    (record,) = read_records(path)
    assert record.dtype == "<i4" and record.shape == (3, 2)
    assert np.array_equal(record.array, big_endian)


@pytest.mark.parametrize(
    "seeded",
    [
        np.random.default_rng(0),
        np.random.PCG64(0),
        np.random.SeedSequence(0),
        np.random.RandomState(0),
        42,
    ],
)
def test_secure_source_refuses_seeded_generators(seeded: object) -> None:
    with pytest.raises(ModeError, match="OS CSPRNG; a seeded generator is refused"):
        SecureSource(seeded)  # type: ignore[arg-type]


def test_release_sources_refuse_other_objects(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    _record_three(path)
    with pytest.raises(TypeError, match="must be a TranscriptWriter"):
        SecureSource(TranscriptReader(path))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a TranscriptReader"):
        ReplaySource(path)  # type: ignore[arg-type]


def test_secure_generators_are_fresh_and_recorded(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.bin", context=CONTEXT) as writer:
        source = SecureSource(writer)
        a, b = source.generator(purpose="x"), source.generator(purpose="x")
        assert not np.array_equal(a.random(4), b.random(4))
    seeds = [r for r in read_records(tmp_path / "t.bin") if r.op == "seed"]
    assert len(seeds) == 2 and all(r.array.dtype == np.uint8 and r.shape == (32,) for r in seeds)


def test_the_seal_is_the_hash_chain_head_and_is_salted(tmp_path: Path) -> None:
    import hashlib
    import json
    import struct

    from privlab.platform.dp.transcript import SEAL_TAG

    seals = []
    for name in ("a.bin", "b.bin"):
        path = tmp_path / name
        with TranscriptWriter(path, context=CONTEXT) as writer:
            for value in (1.0, 2.0):
                writer.append("laplace", {"scale": 1.0}, np.array(value))
        assert TranscriptReader(path).seal == writer.seal
        # Recompute the chain independently: h0 = H(tag | magic | context frame), hi = H(h(i-1) | frame i).
        data, position, frames = path.read_bytes(), len(MAGIC), []
        while position < len(data):
            (head_length,) = struct.unpack(">I", data[position:position + 4])
            (payload_length,) = struct.unpack(">Q", data[position + 4 + head_length:position + 12 + head_length])
            end = position + 12 + head_length + payload_length
            frames.append((json.loads(data[position + 4:position + 4 + head_length]), data[position:end]))
            position = end
        head = hashlib.sha256(SEAL_TAG + MAGIC + frames[0][1]).digest()
        for _, raw in frames[1:-1]:
            head = hashlib.sha256(head + raw).digest()
        assert frames[-1][0] == {"kind": "end", "records": 2, "seal": head.hex()} and writer.seal == head.hex()
        assert len(frames[0][0]["salt"]) == 64
        seals.append(writer.seal)
    assert seals[0] != seals[1]  # same context and draws, different salts: the seal reveals nothing


def test_an_unsealed_version_1_transcript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.bin"
    path.write_bytes(MAGIC_V1 + b"\x00\x00\x00\x02{}")
    with pytest.raises(TranscriptError, match="unsealed version-1 transcript"):
        TranscriptReader(path)


def test_dp_noise_from_a_prng_is_research_only(tmp_path: Path) -> None:
    # Issue 9 item 4: a mechanism whose DP draws come from a seeded generator (the pMSE chain)
    # declares it by asking for dp_generator; a release source refuses, a research source gives
    # the same stream as generator() would.
    seeded = SeededSource(np.random.default_rng(1)).dp_generator(purpose="chain").random(3)
    assert np.array_equal(seeded, SeededSource(np.random.default_rng(1)).generator(purpose="chain").random(3))
    with TranscriptWriter(tmp_path / "t.bin", context=CONTEXT) as writer:
        with pytest.raises(ModeError, match="chain: this mechanism draws DP noise from a seeded"):
            SecureSource(writer).dp_generator(purpose="chain")
