"""Append-only binary transcript of every random draw made in a release run.

File format (all integers big-endian)::

    magic    b"PRIVLAB-TRANSCRIPT\\x00v1\\n"
    record*  u32 header length | UTF-8 JSON header | u64 payload length | payload

The first record is the context header ``{"kind": "context", "context": {...}}`` (e.g. the
spec and data hashes) with an empty payload. Each draw record has the JSON header
``{"seq", "op", "params", "shape", "dtype"}`` and the array's bytes as payload (C order,
explicit little-endian dtype such as ``"<f8"``, ``"<i8"``, ``"|b1"``, ``"|u1"``). A clean
:meth:`TranscriptWriter.close` appends the end record ``{"kind": "end", "records": N}``.

The writer flushes after every record, so a killed process leaves a readable prefix; a file
without an end record (or cut inside a record) is reported as interrupted, with the number
of complete records, and cannot be replayed.

Privacy:
    A transcript holds the raw noise. Together with the released output it reveals the
    un-noised statistics, so it is exactly as sensitive as the private data: keep it where
    the data is, never release or export it. Files are created with mode 0o600.

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of
    Live Births", Section 4.11.3 (OS CSPRNG) and Appendix (transcript of all randomness).
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from privlab.platform.errors import TranscriptError

MAGIC = b"PRIVLAB-TRANSCRIPT\x00v1\n"
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
        self._file.write(MAGIC)
        self._write({"kind": "context", "context": self._context}, b"")

    @property
    def path(self) -> Path:
        return self._path

    @property
    def count(self) -> int:
        """Number of draw records written so far."""
        return self._count

    def _write(self, header: Mapping[str, Any], payload: bytes) -> None:
        if self._file is None:
            raise TranscriptError(f"transcript {str(self._path)!r} is closed")
        self._file.write(_encode(header, payload))
        self._file.flush()

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
        self._write(header, data.tobytes(order="C"))
        self._count += 1
        return self._count - 1

    def close(self) -> None:
        """Write the end record, flush and fsync, and close. Idempotent."""
        if self._file is None:
            return
        try:
            self._write({"kind": "end", "records": self._count}, b"")
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
            self._file = None

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- reading -----------------------------------------------------------------------------


class _Truncated(Exception):
    pass


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise _Truncated
    return data


def _read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """The next (header, payload), None at a clean end of file; _Truncated inside a record."""
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
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TranscriptError(f"corrupt record header: {error}") from None
    if not isinstance(header, dict):
        raise TranscriptError(f"corrupt record header: {header!r}")
    return header, payload


def _interrupted(path: Path, complete: int) -> TranscriptError:
    return TranscriptError(
        f"transcript {str(path)!r} ends after record {complete}: it holds {complete} complete "
        "draw records and no end marker, so the run that wrote it was interrupted; it cannot "
        "be replayed"
    )


def _draw_record(
    path: Path, header: Mapping[str, Any], payload: bytes, seq: int
) -> TranscriptRecord:
    try:
        if header["seq"] != seq:
            raise TranscriptError(
                f"transcript {str(path)!r}: record seq {header['seq']!r} found where "
                f"seq {seq} was expected; the file is corrupt"
            )
        dtype = np.dtype(header["dtype"])
        shape = tuple(operator.index(n) for n in header["shape"])
        op, params = header["op"], header["params"]
        if not (isinstance(op, str) and isinstance(params, dict) and min(shape, default=0) >= 0):
            raise ValueError(f"op {op!r}, params {params!r}, shape {list(shape)}")
    except (KeyError, TypeError, ValueError) as error:
        raise TranscriptError(
            f"transcript {str(path)!r}: record {seq} has a corrupt header ({error})"
        ) from None
    if dtype.kind not in _KINDS or dtype.str[0] not in "<|":
        raise TranscriptError(f"transcript {str(path)!r}: record {seq} has dtype {dtype.str!r}")
    if len(payload) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise TranscriptError(
            f"transcript {str(path)!r}: record {seq} payload has {len(payload)} bytes, "
            f"which does not fit shape {list(shape)} of {dtype.str!r}"
        )
    array = np.frombuffer(payload, dtype=dtype).reshape(shape).copy()
    return TranscriptRecord(
        seq=seq, op=op, params=params, shape=shape, dtype=dtype.str, array=array
    )


def _scan(path: Path) -> Iterator[dict[str, str] | TranscriptRecord]:
    """Yields the context, then each draw record; raises when the file is not complete."""
    with open(path, "rb") as stream:
        magic = stream.read(len(MAGIC))
        if magic != MAGIC:
            raise TranscriptError(
                f"{str(path)!r} is not a privlab transcript (bad magic bytes {magic[:24]!r})"
            )
        seq = 0
        try:
            frame = _read_frame(stream)
            if frame is None or frame[0].get("kind") != "context":
                raise TranscriptError(f"transcript {str(path)!r} has no context header")
            try:
                context = _check_context(frame[0].get("context"))  # type: ignore[arg-type]
            except TypeError as error:
                raise TranscriptError(f"transcript {str(path)!r}: bad context ({error})") from None
            yield context
            while (frame := _read_frame(stream)) is not None:
                header, payload = frame
                if header.get("kind") == "end":
                    if header.get("records") != seq or stream.read(1):
                        raise TranscriptError(
                            f"transcript {str(path)!r}: end record says "
                            f"{header.get('records')!r} records but {seq} precede it, or "
                            "data follows it; the file is corrupt"
                        )
                    return
                yield _draw_record(path, header, payload, seq)
                seq += 1
        except _Truncated:
            pass
        raise _interrupted(path, seq)


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


def _mismatch(seq: int, field: str, recorded: Any, requested: Any) -> TranscriptError:
    return TranscriptError(
        f"transcript record seq {seq}: {field} differs: recorded {recorded!r}, requested "
        f"{requested!r}; the replayed run does not make the same draws as the recorded one"
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
        self._position = 0
        if expected_context is not None:
            self._check_context(_check_context(expected_context))

    def _check_context(self, expected: Mapping[str, str]) -> None:
        for key, value in expected.items():
            if key not in self._context:
                raise TranscriptError(
                    f"the transcript has no context entry {key!r} but this run has "
                    f"{key}={value!r}; replay needs a transcript recorded for the same "
                    "data and spec"
                )
            if self._context[key] != value:
                raise TranscriptError(
                    f"the transcript was recorded for {key}={self._context[key]!r} but this "
                    f"run has {value!r}; replay needs the same data and spec"
                )

    @property
    def path(self) -> Path:
        return self._path

    @property
    def context(self) -> dict[str, str]:
        return dict(self._context)

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
            TranscriptError: If no record is left or the next one differs (the message names
                the sequence number and the first differing field). The record is then not
                consumed.
        """
        if self._position >= len(self._records):
            raise TranscriptError(
                f"the transcript has no record left ({len(self._records)} were recorded) but "
                f"this run requests {op!r} {dict(params)!r}; the replayed run makes more draws "
                "than the recorded one"
            )
        record = self._records[self._position]
        if record.op != op:
            raise _mismatch(record.seq, "op", record.op, op)
        requested = json.loads(_canonical_json(dict(params)))
        for key in [*requested, *(key for key in record.params if key not in requested)]:
            if key not in record.params or key not in requested or _canonical_json(
                record.params[key]
            ) != _canonical_json(requested[key]):
                raise _mismatch(
                    record.seq, f"params[{key!r}]", record.params.get(key), requested.get(key)
                )
        if record.shape != tuple(shape):
            raise _mismatch(record.seq, "shape", list(record.shape), list(shape))
        self._position += 1
        return record.array.copy()

    def finish(self) -> None:
        """Check every record was consumed.

        Raises:
            TranscriptError: If records remain (the replayed run made fewer draws).
        """
        if self.remaining():
            record = self._records[self._position]
            raise TranscriptError(
                f"{self.remaining()} recorded draws were not consumed (the next is seq "
                f"{record.seq}, op {record.op!r}); the replayed run made fewer draws than the "
                "recorded one"
            )
