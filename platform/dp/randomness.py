"""The random-source interface every mechanism draws its randomness from.

Mechanisms receive a :class:`RandomSource` as an argument and never create one:

* :class:`SeededSource` (mode ``"research"``) wraps a seeded ``numpy.random.Generator``;
  runs are reproducible from the seed.
* :class:`SecureSource` (mode ``"release"``) draws every DP noise value from the OS CSPRNG
  through the exact samplers of :mod:`privlab.platform.dp.secure_sampling` and appends every
  draw, and every seed handed to post-processing, to a transcript *before* returning it.
* :class:`ReplaySource` (mode ``"release"``) reads that transcript back, checks each request
  (operation, parameters, shape) against it and returns the recorded values bit-identically.

Laplace noise in release mode lives on the lattice ``2**k * Z`` with
``k = noise_lattice(scale)``. A mechanism adds it to a statistic snapped to the same lattice
and accounts for the snapping in its scale::

    from privlab.platform.dp.secure_sampling import release_laplace_parameters, snap_to_lattice

    if source.noise_lattice(sensitivity / epsilon) is None:  # research: float Laplace
        noisy = value + source.laplace(scale=sensitivity / epsilon)
    else:  # release: exact lattice Laplace; k == source.noise_lattice(scale)
        scale, k = release_laplace_parameters(sensitivity, epsilon)
        noisy = snap_to_lattice(value, k) + source.laplace(scale=scale)

Privacy:
    Release sources never use a seeded or floating-point sampler for noise, which defeats
    seed prediction and Mironov's (2012) floating-point attack. The transcript holds the raw
    noise and is as sensitive as the private data. ``generator(purpose)`` streams are PCG64
    seeded from the CSPRNG and are for post-processing only (e.g. sampling synthetic records
    from a model already fitted with DP); never draw DP noise from them.

References:
    Hod & Canetti (2024), Section 4.11.3 (OS CSPRNG); Canonne, Kamath & Steinke (2020),
    Algorithms 1-2; Mironov (2012); Scientific Python SPEC 7 (seeding).
"""

from __future__ import annotations

import abc
import math
import numbers
import operator
import secrets
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privlab.platform.core.errors import ModeError, TranscriptError
from privlab.platform.dp import secure_sampling
from privlab.platform.dp.seeding import stable_key
from privlab.platform.dp.transcript import TranscriptReader, TranscriptWriter

Size = int | tuple[int, ...] | None
Shape = tuple[int, ...] | None  # None: a scalar was requested

_INT64_MIN, _INT64_END = -(2**63), 2**63
_SEED_BYTES = 32  # 256 bits of CSPRNG entropy per post-processing stream
_SEEDED = (
    np.random.Generator,
    np.random.BitGenerator,
    np.random.SeedSequence,
    np.random.RandomState,
    numbers.Integral,
)


# --- validation --------------------------------------------------------------------------


def _check_size(size: object) -> Shape:
    if size is None:
        return None
    dims = size if isinstance(size, tuple) else (size,)
    shape = []
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"size ({size!r}) must be None, an int or a tuple of ints")
        if dim < 0:
            raise ValueError(f"size ({size!r}) must be non-negative")
        shape.append(operator.index(dim))
    return tuple(shape)


def _check_scale(scale: object) -> float:
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale ({scale!r}) must be a real number")
    value = float(scale)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"scale ({scale!r}) must be positive and finite")
    return value


def _check_p(p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"p ({p!r}) must be a real number")
    value = float(p)
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise ValueError(f"p ({p!r}) must be in [0, 1]")
    return value


def _check_bounds(low: object, high: object) -> tuple[int, int]:
    bounds = []
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} ({value!r}) must be an int")
        bounds.append(operator.index(value))
    lo, hi = bounds
    if lo >= hi:
        raise ValueError(f"high ({high!r}) must be > low ({low!r})")
    if lo < _INT64_MIN:
        raise ValueError(f"low ({low!r}) must be >= -2**63 (the int64 range)")
    if hi > _INT64_END:
        raise ValueError(f"high ({high!r}) must be <= 2**63 (the int64 range)")
    return lo, hi


def _check_purpose(purpose: object) -> str:
    if not isinstance(purpose, str):
        raise TypeError(f"purpose ({purpose!r}) must be a str")
    if not purpose:
        raise ValueError(f"purpose ({purpose!r}) must be a non-empty str")
    return purpose


def _scalar_or_array(values: Any, shape: Shape, kind: type) -> Any:
    if shape is None:
        return kind(np.asarray(values).item())
    return np.asarray(values)


# --- the interface -----------------------------------------------------------------------


class RandomSource(abc.ABC):
    """Where a mechanism gets its randomness; see the module docstring for the three kinds.

    The public methods validate their arguments (keyword-only) and delegate to the ``_draw_*``
    hooks, which receive the normalised shape (``None`` for a scalar request). A scalar
    request returns a Python ``float``/``int``/``bool``; a ``size`` returns an ndarray.

    Privacy:
        Mechanisms must take the source as an argument and never construct one, so a
        release run cannot silently fall back to a seeded generator.

    References:
        Scientific Python SPEC 7; Hod & Canetti (2024), Section 4.11.3.
    """

    mode: ClassVar[str]

    def laplace(self, *, scale: float, size: Size = None) -> float | np.ndarray:
        """Centred Laplace noise with density proportional to ``exp(-|x| / scale)``.

        Args:
            scale: Positive and finite.
            size: ``None`` for one float, or an int / tuple of ints for an array.

        Returns:
            A float or a float64 array. Release sources return exact multiples of
            ``2**noise_lattice(scale)``.

        Raises:
            ValueError: If ``scale`` or ``size`` is invalid.

        Privacy:
            Laplace mechanism noise: for a statistic of sensitivity ``Delta`` use
            ``scale = Delta / epsilon`` in research mode and
            ``release_laplace_parameters(Delta, epsilon)`` on a snapped statistic in release.

        References:
            Dwork, McSherry, Nissim & Smith (2006); Mironov (2012).
        """
        shape = _check_size(size)
        return _scalar_or_array(self._draw_laplace(_check_scale(scale), shape), shape, float)

    def gaussian(self, *, sigma: float, size: Size = None) -> float | np.ndarray:
        """Centred Gaussian noise of standard deviation ``sigma``, for integer statistics.

        Research sources draw continuous ``N(0, sigma**2)`` floats from the seeded stream.
        Release sources draw the discrete Gaussian on the integers with parameter ``sigma``
        (variance parameter exactly ``Fraction(sigma)**2``) from the OS CSPRNG
        (:func:`~privlab.platform.dp.secure_sampling.discrete_gaussian`), as float64 integers.

        Args:
            sigma: Positive and finite.
            size: ``None`` for one float, or an int / tuple of ints for an array.

        Raises:
            ValueError: If ``sigma`` or ``size`` is invalid.

        Privacy:
            Added to a statistic of l2 sensitivity ``Delta`` it is ``Delta**2/(2 sigma**2)``-zCDP:
            for the continuous Gaussian (Bun & Steinke 2016, Proposition 1.6) and for the
            discrete one on an integer statistic (Canonne, Kamath & Steinke 2020, Theorem 14).
            Release mode needs an integer-valued statistic (counts), so the sum is exact.

        References:
            Bun & Steinke (2016); Canonne, Kamath & Steinke (2020), Algorithm 3.
        """
        shape = _check_size(size)
        return _scalar_or_array(self._draw_gaussian(_check_scale(sigma), shape), shape, float)

    def integers(self, *, low: int, high: int, size: Size = None) -> int | np.ndarray:
        """Integers uniform on ``[low, high)`` (int64 range).

        Raises:
            ValueError: If ``low >= high``, the bounds leave int64, or ``size`` is invalid.

        Privacy:
            Exact uniform draws; in release mode from the OS CSPRNG.
        """
        shape = _check_size(size)
        lo, hi = _check_bounds(low, high)
        return _scalar_or_array(self._draw_integers(lo, hi, shape), shape, int)

    def uniform(self, *, size: Size = None) -> float | np.ndarray:
        """Floats uniform on [0, 1) (release sources: on the ``2**-53`` grid).

        Raises:
            ValueError: If ``size`` is invalid.

        Privacy:
            Do not turn these into DP noise by floating-point transforms; use ``laplace``.
        """
        shape = _check_size(size)
        return _scalar_or_array(self._draw_uniform(shape), shape, float)

    def bernoulli(self, *, p: float, size: Size = None) -> bool | np.ndarray:
        """Booleans that are ``True`` with probability ``p``.

        Raises:
            ValueError: If ``p`` is outside [0, 1] or ``size`` is invalid.

        Privacy:
            Release sources use the float ``p`` converted exactly to a Fraction, so the
            probability is exactly ``p``.
        """
        shape = _check_size(size)
        return _scalar_or_array(self._draw_bernoulli(_check_p(p), shape), shape, bool)

    def generator(self, *, purpose: str) -> np.random.Generator:
        """A fresh ``numpy.random.Generator`` for post-processing (non-DP) randomness.

        Args:
            purpose: What the stream is for (recorded in release transcripts).

        Raises:
            ValueError: If ``purpose`` is not a non-empty str.

        Privacy:
            Only for post-processing of DP outputs; never for DP noise.
        """
        return self._generator(_check_purpose(purpose))

    def dp_generator(self, *, purpose: str) -> np.random.Generator:
        """A ``numpy.random.Generator`` whose draws *are* DP noise (e.g. an MCMC chain that
        samples a posterior or an exponential-mechanism density): research sources only.

        This is where a mechanism declares that it is not release-safe: a seeded PRNG with
        floating-point samplers is predictable and open to Mironov's (2012) attack, and only
        the exact samplers of a release source are allowed near a release. Research sources
        derive the stream exactly as :meth:`generator` does.

        Raises:
            ValueError: ``purpose`` is not a non-empty str.
            ModeError: this is a release source (the message names ``purpose``).
        """
        purpose = _check_purpose(purpose)
        if self.mode == "release":
            raise ModeError(
                f"{purpose}: this mechanism draws DP noise from a seeded floating-point generator and is not "
                "release-safe; run it in research mode, or use a mechanism built on the exact samplers")
        return self._generator(purpose)

    @abc.abstractmethod
    def noise_lattice(self, scale: float) -> int | None:
        """The lattice exponent ``k`` that ``laplace(scale=scale)`` uses, or None (research)."""

    @abc.abstractmethod
    def _draw_laplace(self, scale: float, shape: Shape) -> Any: ...

    def _draw_gaussian(self, sigma: float, shape: Shape) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not draw Gaussian noise")

    @abc.abstractmethod
    def _draw_integers(self, low: int, high: int, shape: Shape) -> Any: ...

    @abc.abstractmethod
    def _draw_uniform(self, shape: Shape) -> Any: ...

    @abc.abstractmethod
    def _draw_bernoulli(self, p: float, shape: Shape) -> Any: ...

    @abc.abstractmethod
    def _generator(self, purpose: str) -> np.random.Generator: ...


# --- research ----------------------------------------------------------------------------


class SeededSource(RandomSource):
    """Research-mode source delegating to a seeded ``numpy.random.Generator``.

    ``generator(purpose)`` derives a child stream from four words
    ``rng.integers(0, 2**63, size=4)`` drawn from this source, keyed by a stable hash of
    ``purpose``: it is deterministic given the seed and the order of calls, and it advances
    the parent stream only through that ordinary draw (no hidden ``SeedSequence.spawn``
    counter is touched).

    Args:
        rng: The generator to draw from (shared, not copied).

    Raises:
        TypeError: If ``rng`` is not a ``numpy.random.Generator``.

    Privacy:
        Research only: a seeded PRNG is predictable and its float Laplace sampler is open to
        Mironov's (2012) attack; release runs refuse it.

    References:
        Scientific Python SPEC 7.
    """

    mode: ClassVar[str] = "research"

    def __init__(self, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
        self._rng = rng

    @classmethod
    def from_seed_sequence(cls, seed_sequence: np.random.SeedSequence) -> SeededSource:
        """A source on ``Generator(PCG64(seed_sequence))``."""
        if not isinstance(seed_sequence, np.random.SeedSequence):
            raise TypeError(f"seed_sequence ({seed_sequence!r}) must be a numpy SeedSequence")
        return cls(np.random.Generator(np.random.PCG64(seed_sequence)))

    def noise_lattice(self, scale: float) -> None:
        _check_scale(scale)
        return None

    @property
    def rng(self) -> np.random.Generator:
        """The stream itself, for simulation that is not DP noise (a workload's data, a
        neighbouring dataset, a candidate); shared, so draws interleave with the source's."""
        return self._rng

    def _draw_laplace(self, scale: float, shape: Shape) -> Any:
        return self._rng.laplace(0.0, scale, shape)

    def _draw_gaussian(self, sigma: float, shape: Shape) -> Any:
        return self._rng.normal(0.0, sigma, size=shape)

    def _draw_integers(self, low: int, high: int, shape: Shape) -> Any:
        return self._rng.integers(low, high, size=shape, dtype=np.int64)

    def _draw_uniform(self, shape: Shape) -> Any:
        return self._rng.random(shape)

    def _draw_bernoulli(self, p: float, shape: Shape) -> Any:
        return self._rng.random(shape) < p

    def _generator(self, purpose: str) -> np.random.Generator:
        words = [int(w) for w in self._rng.integers(0, 2**63, size=4)]
        seed = np.random.SeedSequence(words, spawn_key=(stable_key("generator", purpose),))
        return np.random.Generator(np.random.PCG64(seed))


# --- release -----------------------------------------------------------------------------


class _ReleaseSource(RandomSource):
    """Shared request encoding of the recording and the replaying release sources."""

    mode: ClassVar[str] = "release"

    def noise_lattice(self, scale: float) -> int:
        return secure_sampling.lattice_exponent(_check_scale(scale))

    @abc.abstractmethod
    def _draw(
        self,
        op: str,
        params: Mapping[str, Any],
        shape: tuple[int, ...],
        dtype: type,
        sample: Callable[[], Any],
    ) -> np.ndarray:
        """Values for one request: drawn with ``sample`` per element, or replayed."""

    def _draw_laplace(self, scale: float, shape: Shape) -> Any:
        k = secure_sampling.lattice_exponent(scale)
        return self._draw(
            "laplace",
            {"scale": scale, "k": k},
            shape or (),
            np.float64,
            lambda: secure_sampling.laplace_on_lattice(scale, k),
        )

    def _draw_gaussian(self, sigma: float, shape: Shape) -> Any:
        variance = Fraction(sigma) ** 2  # the float's exact value, squared exactly
        values = self._draw(
            "discrete_gaussian",
            {"sigma": sigma},
            shape or (),
            np.int64,
            lambda: secure_sampling.discrete_gaussian(variance),
        )
        return values.astype(np.float64)

    def _draw_integers(self, low: int, high: int, shape: Shape) -> Any:
        return self._draw(
            "integers",
            {"low": low, "high": high},
            shape or (),
            np.int64,
            lambda: secure_sampling.uniform_int(low, high),
        )

    def _draw_uniform(self, shape: Shape) -> Any:
        return self._draw("uniform", {}, shape or (), np.float64, secure_sampling.uniform_float)

    def _draw_bernoulli(self, p: float, shape: Shape) -> Any:
        exact = Fraction(p)
        return self._draw(
            "bernoulli",
            {"p": p},
            shape or (),
            np.bool_,
            lambda: secure_sampling.bernoulli_exact(exact),
        )

    def _generator(self, purpose: str) -> np.random.Generator:
        entropy = self._draw(
            "seed",
            {"purpose": purpose},
            (_SEED_BYTES,),
            np.uint8,
            lambda: secrets.randbits(8),
        )
        seed = np.random.SeedSequence(int.from_bytes(entropy.tobytes(), "big"))
        return np.random.Generator(np.random.PCG64(seed))


class SecureSource(_ReleaseSource):
    """Release-mode source: OS CSPRNG, exact samplers, every draw appended to a transcript.

    Each request is recorded (op, params including the lattice exponent ``k`` for Laplace,
    shape, values) and flushed before the values are returned. ``generator(purpose)`` draws
    256 bits from ``secrets``, records them as op ``"seed"``, and returns
    ``Generator(PCG64(SeedSequence(entropy)))``.

    Args:
        transcript: An open :class:`TranscriptWriter` (the caller closes it).

    Raises:
        ModeError: If given a seeded generator, bit generator, seed sequence or seed.
        TypeError: If given anything else that is not a :class:`TranscriptWriter`.

    Privacy:
        DP noise comes only from ``secrets`` through exact rational samplers, and Laplace
        noise lies on the lattice ``2**noise_lattice(scale)``; no seed exists that could
        predict it. The transcript is as sensitive as the private data.

    References:
        Hod & Canetti (2024), Section 4.11.3; Canonne, Kamath & Steinke (2020).
    """

    def __init__(self, transcript: TranscriptWriter) -> None:
        if isinstance(transcript, _SEEDED):
            raise ModeError(
                "release mode draws from the OS CSPRNG; a seeded generator is refused "
                "(pass a TranscriptWriter; use SeededSource for research runs)"
            )
        if not isinstance(transcript, TranscriptWriter):
            raise TypeError(f"transcript ({transcript!r}) must be a TranscriptWriter")
        self._transcript = transcript

    @property
    def transcript(self) -> TranscriptWriter:
        return self._transcript

    def _draw(
        self,
        op: str,
        params: Mapping[str, Any],
        shape: tuple[int, ...],
        dtype: type,
        sample: Callable[[], Any],
    ) -> np.ndarray:
        count = math.prod(shape)
        values = np.fromiter((sample() for _ in range(count)), dtype=dtype, count=count)
        values = values.reshape(shape)
        self._transcript.append(op, params, values)
        return values


class ReplaySource(_ReleaseSource):
    """Release-mode source that replays a transcript bit-identically.

    Every request must match the next record exactly (op, params, shape); otherwise a
    :class:`~privlab.platform.core.errors.TranscriptError` names the record and the first differing
    field. Call :meth:`finish` at the end to check that no recorded draw was left over.

    Args:
        reader: The :class:`TranscriptReader` to consume.

    Raises:
        TypeError: If ``reader`` is not a :class:`TranscriptReader`.

    Privacy:
        Consumes no fresh randomness; reproduces a release run for audit or debugging. It
        returns the raw recorded noise, as sensitive as the private data.

    References:
        Hod & Canetti (2024), Section 4.11.3.
    """

    def __init__(self, reader: TranscriptReader) -> None:
        if not isinstance(reader, TranscriptReader):
            raise TypeError(f"reader ({reader!r}) must be a TranscriptReader")
        self._reader = reader

    def _draw(
        self,
        op: str,
        params: Mapping[str, Any],
        shape: tuple[int, ...],
        dtype: type,
        sample: Callable[[], Any],
    ) -> np.ndarray:
        values = self._reader.next_record(op, params, shape)
        if values.dtype != np.dtype(dtype):
            raise TranscriptError(
                f"transcript record for {op!r} holds {values.dtype.str!r}, expected "
                f"{np.dtype(dtype).str!r}; it was written by an incompatible privlab"
            )
        return values

    def finish(self) -> None:
        """Raise :class:`TranscriptError` if recorded draws were not consumed."""
        self._reader.finish()
