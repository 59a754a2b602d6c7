"""Append-only binary transcript of every random draw made in a release run.

File format (all integers big-endian)::

    magic    b"PRIVLAB-TRANSCRIPT\\x00v2\\n"
    record*  u32 header length | UTF-8 JSON header | u64 payload length | payload

The first record is the context header ``{"kind": "context", "context": {...}, "salt": S}``
(e.g. the spec and data hashes; ``S`` is 32 bytes from the OS CSPRNG, in hex) with an empty
payload. Each draw record has the JSON header ``{"seq", "op", "params", "shape", "dtype"}``
and the array's bytes as payload (C order, explicit little-endian dtype such as ``"<f8"``,
``"<i8"``, ``"|b1"``, ``"|u1"``). A clean :meth:`TranscriptWriter.close` appends the end
record ``{"kind": "end", "records": N, "seal": H}``.

The writer flushes after every record, so a killed process leaves a readable prefix; a file
without an end record (or cut inside a record) is reported as interrupted and cannot be
replayed. A write that fails (a full disk: ``ENOSPC``, ``EDQUOT``; any ``OSError``) breaks
the writer for good: the error is kept as :attr:`TranscriptWriter.failure`, the file is closed
without an end record (a half-flushed record would make any later record, and the seal, lie
about what the file holds), and every later write raises :class:`TranscriptError`. A caller
that sees the run fail can ask :attr:`~TranscriptWriter.failure` whether the transcript was
the cause, however the error was wrapped on its way up.

Seal (format v2):
    A hash chain over the records as written: ``h₀ = SHA-256(TAG ‖ magic ‖ context record)``
    and ``hᵢ = SHA-256(hᵢ₋₁ ‖ draw record i)``; the end record carries ``H = h_N`` in hex, and
    the release bundle publishes ``H`` (``transcript-seal.txt``, covered by ``SHA256SUMS``).
    Reading recomputes the chain, so a record altered, reordered, dropped, inserted or
    appended without recomputing the chain is refused; one altered *with* a recomputed chain
    gives another ``H``, which ``privlab verify`` compares with the published one. Version-1
    files (no seal) are refused.

Privacy:
    A transcript holds the raw noise. Together with the released output it reveals the
    un-noised statistics, so it is exactly as sensitive as the private data: keep it where
    the data is, never release or export it. Files are created with mode 0o600.

    Publishing ``H`` is a hash commitment to the transcript. Its context record includes a
    fresh 256-bit CSPRNG salt that never leaves the transcript, so ``H`` is indistinguishable
    from random to anyone without the transcript (SHA-256 modelled as a random oracle) and
    reveals nothing about the data or the noise even when few draws were made. This is a
    computational argument: the release is DP against adversaries that cannot invert SHA-256
    or guess a 256-bit salt, the standard assumption of every hashed or signed release.

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of
    Live Births", Section 4.11.3 (OS CSPRNG) and Appendix (transcript of all randomness).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from privlab.platform.core.errors import TranscriptError

MAGIC = b"PRIVLAB-TRANSCRIPT\x00v2\n"
MAGIC_V1 = b"PRIVLAB-TRANSCRIPT\x00v1\n"
SEAL_TAG = b"privlab transcript seal v2\x00"
SALT_BYTES = 32
_HEADER_LENGTH = struct.Struct(">I")
_PAYLOAD_LENGTH = struct.Struct(">Q")
_KINDS = frozenset("biuf")  # bool, signed and unsigned integers, floats


@dataclasses.dataclass(frozen=True, kw_only=True)
class TranscriptRecord:
    """One recorded draw: what was requested and the values returned."""

    seq: int
    op: str
    params: dict[str, Any]
    shape: tuple[int, ...]
    dtype: str
    array: np.ndarray


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _encode(header: Mapping[str, Any], payload: bytes) -> bytes:
    head = _canonical_json(header).encode("utf-8")
    return b"".join(
        (_HEADER_LENGTH.pack(len(head)), head, _PAYLOAD_LENGTH.pack(len(payload)), payload)
    )


def _chain_start(context_frame: bytes) -> bytes:
    return hashlib.sha256(SEAL_TAG + MAGIC + context_frame).digest()


def _chain_next(head: bytes, frame: bytes) -> bytes:
    return hashlib.sha256(head + frame).digest()


def _check_context(context: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(context, Mapping):
        raise TypeError(f"context ({context!r}) must be a mapping of str to str")
    for key, value in context.items():
        if not (isinstance(key, str) and isinstance(value, str)):
            raise TypeError(f"context[{key!r}] ({value!r}) must be a str keyed by a str")
    return dict(context)


def _little_endian(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind not in _KINDS:
        raise TypeError(f"array dtype ({array.dtype.str!r}) must be bool, integer or float")
    return array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)


class TranscriptWriter:
    """Writes a transcript; refuses to overwrite an existing file.

    Args:
        path: Where to create the transcript (must not exist).
        context: What the run is bound to, e.g. ``{"spec_sha256": ..., "data_sha256": ...}``;
            a replay checks it key by key.

    Raises:
        TranscriptError: If ``path`` already exists.

    Privacy:
        The file holds raw noise and is as sensitive as the private data (see module doc).

    References:
        Hod & Canetti (2024), Section 4.11.3.
    """

    def __init__(self, path: str | os.PathLike[str], *, context: Mapping[str, str]) -> None:
        self._path = Path(path)
        self._context = _check_context(context)
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise TranscriptError(
                f"transcript {str(self._path)!r} already exists; a transcript is never "
                "overwritten, choose a new path"
            ) from None
        self._file: BinaryIO | None = os.fdopen(fd, "wb")
        self._count = 0
        self._seal: str | None = None
        self._failure: OSError | None = None
        salt = os.urandom(SALT_BYTES).hex()
        context_frame = _encode({"kind": "context", "context": self._context, "salt": salt}, b"")
        self._head = _chain_start(context_frame)
        self._write_frame(MAGIC + context_frame)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def count(self) -> int:
        """Number of draw records written so far."""
        return self._count

    @property
    def seal(self) -> str:
        """The chain head ``H`` in hex (available once :meth:`close` has written the end record)."""
        if self._seal is None:
            raise TranscriptError(f"transcript {str(self._path)!r} is not closed yet; its seal is written at close")
        return self._seal

    @property
    def failure(self) -> OSError | None:
        """The I/O error that broke the writer (a full disk, a lost device), or None."""
        return self._failure

    def _write_frame(self, frame: bytes) -> None:
        if self._failure is not None:
            raise TranscriptError(
                f"transcript {str(self._path)!r} cannot be extended: an earlier write failed "
                f"({self._failure.strerror or type(self._failure).__name__}), so it is incomplete and cannot be "
                "sealed")
        if self._file is None:
            raise TranscriptError(f"transcript {str(self._path)!r} is closed")
        try:
            self._file.write(frame)
            self._file.flush()
        except OSError as error:
            self._broken(error)
            raise

    def _broken(self, error: OSError) -> None:
        """Keep ``error`` and close the file without an end record (the buffer's flush fails too)."""
        self._failure = error
        self._release_file()

    def _release_file(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()  # closes the descriptor even when flushing the buffer fails
            except OSError as error:
                if self._failure is None:
                    self._failure = error

    def append(self, op: str, params: Mapping[str, Any], array: np.ndarray) -> int:
        """Append one draw record and flush it to the OS.

        Args:
            op: The operation name (``"laplace"``, ``"seed"``, ...).
            params: JSON-serializable request parameters (finite numbers, str, lists).
            array: The values drawn (bool, integer or float dtype; any shape).

        Returns:
            The record's sequence number (0-based).

        Raises:
            TranscriptError: If the writer is closed.
            TypeError: If ``op`` is not a non-empty str, ``params`` is not JSON-serializable
                or the array's dtype is not numeric.
        """
        if not (isinstance(op, str) and op):
            raise TypeError(f"op ({op!r}) must be a non-empty str")
        if not isinstance(params, Mapping):
            raise TypeError(f"params ({params!r}) must be a mapping")
        data = _little_endian(np.asarray(array))
        header = {
            "seq": self._count,
            "op": op,
            "params": dict(params),
            "shape": list(data.shape),
            "dtype": data.dtype.str,
        }
        try:
            _canonical_json(header)
        except (TypeError, ValueError) as error:
            raise TypeError(f"params ({params!r}) must be JSON-serializable: {error}") from None
        frame = _encode(header, data.tobytes(order="C"))
        self._write_frame(frame)
        self._head = _chain_next(self._head, frame)
        self._count += 1
        return self._count - 1

    def close(self) -> None:
        """Write the end record, flush and fsync, and close. Idempotent; a broken writer
        (:attr:`failure`) is already closed and has no seal.

        Raises:
            OSError: Writing or syncing the end record failed (kept as :attr:`failure`; the
                file is closed unsealed).
        """
        if self._file is None:
            return
        seal = self._head.hex()
        self._write_frame(_encode({"kind": "end", "records": self._count, "seal": seal}, b""))
        try:
            os.fsync(cast(BinaryIO, self._file).fileno())
        except OSError as error:
            self._broken(error)
            raise
        self._release_file()
        if self._failure is not None:
            raise self._failure
        self._seal = seal

    def discard(self) -> None:
        """Close without the end record, for a run that failed: the file stays unsealed (a reader
        reports it as interrupted). Never raises; idempotent."""
        self._release_file()

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- reading -----------------------------------------------------------------------------


class _Truncated(Exception):
    pass


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    # A length field claims the size; one larger than what is left of the file (cut, or altered to
    # claim 2**62 bytes) is a truncation, found before anything that size is allocated.
    if size > os.fstat(stream.fileno()).st_size - stream.tell():
        raise _Truncated
    data = stream.read(size)
    if len(data) != size:
        raise _Truncated
    return data


def _read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes, bytes] | None:
    """The next (header, payload, raw frame), None at a clean end of file; _Truncated inside a record."""
    first = stream.read(_HEADER_LENGTH.size)
    if not first:
        return None
    if len(first) != _HEADER_LENGTH.size:
        raise _Truncated
    (head_length,) = _HEADER_LENGTH.unpack(first)
    head = _read_exact(stream, head_length)
    (payload_length,) = _PAYLOAD_LENGTH.unpack(_read_exact(stream, _PAYLOAD_LENGTH.size))
    payload = _read_exact(stream, payload_length)
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        raise TranscriptError("a transcript record has a corrupt header; the file was altered or damaged")
    raw = b"".join((first, head, _PAYLOAD_LENGTH.pack(payload_length), payload))
    return header, payload, raw


def _interrupted(path: Path) -> TranscriptError:
    return TranscriptError(
        f"transcript {str(path)!r} ends without its end record, so the run that wrote it was "
        "interrupted (or the file was cut, or a record's length altered); it cannot be replayed"
    )


def _draw_record(
    path: Path, header: Mapping[str, Any], payload: bytes, seq: int
) -> TranscriptRecord:
    # Messages name the kind of damage, never positions, counts or values: a record's position
    # tells how many draws (flows) preceded it, which depends on the private data.
    if header.get("seq") != seq:
        raise TranscriptError(
            f"transcript {str(path)!r}: its draw records are out of order, or one is missing "
            "or inserted; the file was altered"
        )
    try:
        dtype = np.dtype(header["dtype"])
        shape = tuple(operator.index(n) for n in header["shape"])
        op, params = header["op"], header["params"]
        if not (isinstance(op, str) and isinstance(params, dict) and min(shape, default=0) >= 0):
            raise ValueError("bad op, params or shape")
    except (KeyError, TypeError, ValueError):
        raise TranscriptError(
            f"transcript {str(path)!r}: a draw record has a corrupt header; the file was altered or damaged"
        ) from None
    if dtype.kind not in _KINDS or dtype.str[0] not in "<|":
        raise TranscriptError(f"transcript {str(path)!r}: a draw record has a non-numeric or big-endian dtype")
    if len(payload) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise TranscriptError(
            f"transcript {str(path)!r}: a draw record's payload does not fit its shape and dtype; "
            "the file was altered or damaged"
        )
    array = np.frombuffer(payload, dtype=dtype).reshape(shape).copy()
    return TranscriptRecord(
        seq=seq, op=op, params=params, shape=shape, dtype=dtype.str, array=array
    )


@dataclasses.dataclass(frozen=True)
class _Seal:
    head: str


def _scan(path: Path) -> Iterator[dict[str, str] | TranscriptRecord | _Seal]:
    """Yields the context, each draw record, then the verified seal; raises when the file is not
    complete or its chain does not match its seal."""
    with open(path, "rb") as stream:
        magic = stream.read(len(MAGIC))
        if magic == MAGIC_V1:
            raise TranscriptError(
                f"{str(path)!r} is an unsealed version-1 transcript written by an older privlab; it cannot "
                "be replayed or verified (its records could be altered unnoticed). Release again with this version"
            )
        if magic != MAGIC:
            raise TranscriptError(f"{str(path)!r} is not a privlab transcript (bad magic bytes)")
        seq = 0
        try:
            frame = _read_frame(stream)
            if frame is None or frame[0].get("kind") != "context" or not isinstance(frame[0].get("salt"), str):
                raise TranscriptError(f"transcript {str(path)!r} has no context header")
            try:
                context = _check_context(frame[0].get("context"))  # type: ignore[arg-type]
            except TypeError:
                raise TranscriptError(f"transcript {str(path)!r}: its context header is corrupt") from None
            head = _chain_start(frame[2])
            yield context
            while (frame := _read_frame(stream)) is not None:
                header, payload, raw = frame
                if header.get("kind") == "end":
                    if header.get("records") != seq or stream.read(1):
                        raise TranscriptError(
                            f"transcript {str(path)!r}: its end record does not match the records before "
                            "it, or data follows it; the file was altered"
                        )
                    if header.get("seal") != head.hex():
                        raise TranscriptError(
                            f"transcript {str(path)!r}: its records do not match its seal (a record was "
                            "altered, reordered, dropped or inserted); it cannot be replayed"
                        )
                    yield _Seal(head.hex())
                    return
                yield _draw_record(path, header, payload, seq)
                head = _chain_next(head, raw)
                seq += 1
        except _Truncated:
            pass
        raise _interrupted(path)


def read_records(path: str | os.PathLike[str]) -> Iterator[TranscriptRecord]:
    """Iterate over the draw records of a transcript, for auditing and printing.

    The complete records of an interrupted transcript are yielded before the
    :class:`TranscriptError` that says where it ends.

    Args:
        path: The transcript file.

    Yields:
        Each draw record in sequence order.

    Raises:
        TranscriptError: If the file is not a transcript, is corrupt or was interrupted.

    Privacy:
        The records are raw noise, as sensitive as the private data.
    """
    for item in _scan(Path(path)):
        if isinstance(item, TranscriptRecord):
            yield item


def _mismatch(field: str) -> TranscriptError:
    # Neither the values nor the record's position are shown: both may depend on the private data.
    return TranscriptError(
        f"transcript replay: the next recorded draw differs from this run's request in {field} (values "
        "withheld); the replayed run does not make the same draws as the recorded one"
    )


class TranscriptReader:
    """Reads a complete transcript back for replay, checking each request against it.

    The whole file is validated and loaded when the reader is created.

    Args:
        path: The transcript file.
        expected_context: Context entries the run expects (each key must be present in the
            transcript with the same value); ``None`` skips the check.

    Raises:
        TranscriptError: If the file is not a transcript, is corrupt, was interrupted, or
            its context differs from ``expected_context``.

    Privacy:
        The records are raw noise, as sensitive as the private data.

    References:
        Hod & Canetti (2024), Section 4.11.3.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        expected_context: Mapping[str, str] | None = None,
    ) -> None:
        self._path = Path(path)
        items = list(_scan(self._path))
        self._context = cast(dict[str, str], items[0])
        self._records = [item for item in items[1:] if isinstance(item, TranscriptRecord)]
        self._seal = cast(_Seal, items[-1]).head
        self._position = 0
        if expected_context is not None:
            self._check_context(_check_context(expected_context))

    def _check_context(self, expected: Mapping[str, str]) -> None:
        for key, value in expected.items():
            if key not in self._context:
                raise TranscriptError(
                    f"the transcript has no context entry {key!r}; replay needs a transcript "
                    "recorded for the same data and spec"
                )
            if self._context[key] != value:  # values withheld: data_sha256 identifies the private file
                raise TranscriptError(
                    f"the transcript was recorded for a different {key} than this run's; replay needs "
                    "the same data and spec"
                )

    @property
    def path(self) -> Path:
        return self._path

    @property
    def context(self) -> dict[str, str]:
        return dict(self._context)

    @property
    def seal(self) -> str:
        """The verified chain head ``H`` in hex (what a bundle publishes)."""
        return self._seal

    def remaining(self) -> int:
        """Number of draw records not yet consumed."""
        return len(self._records) - self._position

    def next_record(self, op: str, params: Mapping[str, Any], shape: Sequence[int]) -> np.ndarray:
        """Consume the next record after checking it matches the request.

        Args:
            op: The requested operation.
            params: The requested parameters (compared through canonical JSON, so
                ``1`` and ``1.0`` differ).
            shape: The requested output shape (``()`` for a scalar).

        Returns:
            A fresh writable array with the recorded values.

        Raises:
            TranscriptError: If no record is left or the next one differs (the message names the
                first differing field, never values or positions). The record is then not
                consumed.
        """
        if self._position >= len(self._records):
            raise TranscriptError(
                f"the transcript has no record left but this run requests another {op!r} draw; the "
                "replayed run makes more draws than the recorded one"
            )
        record = self._records[self._position]
        if record.op != op:
            raise _mismatch("op")
        requested = json.loads(_canonical_json(dict(params)))
        for key in [*requested, *(key for key in record.params if key not in requested)]:
            if key not in record.params or key not in requested or _canonical_json(
                record.params[key]
            ) != _canonical_json(requested[key]):
                raise _mismatch(f"params[{key!r}]")
        if record.shape != tuple(shape):
            raise _mismatch("shape")
        self._position += 1
        return record.array.copy()

    def finish(self) -> None:
        """Check every record was consumed.

        Raises:
            TranscriptError: If records remain (the replayed run made fewer draws).
        """
        if self.remaining():
            raise TranscriptError(
                "recorded draws remain unconsumed; the replayed run made fewer draws than the recorded one"
            )
