"""Writing a bundle of public files: atomically, with checksums, in deterministic formats.

A bundle is a folder that either exists whole or not at all (:func:`atomic_directory` stages it
in a hidden ``.<name>.partial-*`` folder next to it and renames it into place), whose files are
deterministic functions of their inputs (no clock, host or path inside: :func:`json_text`,
:func:`config_toml`, :func:`write_released`) and are listed with their SHA-256 in
``SHA256SUMS`` (:func:`write_checksums`, :func:`verify_checksums`). The release
(:mod:`privlab.mechanisms.release.bundle`) and plausible deniability's ``pd-generate`` write
theirs with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.platform.core.errors import SpecError

__all__ = ["CHECKSUMS", "PARTIAL_MARKER", "atomic_directory", "bundle_entries", "check_destination", "config_toml",
           "file_list_differences", "json_text", "partial_prefix", "stale_partials", "verify_checksums",
           "write_checksums", "write_released", "write_text"]

CHECKSUMS = "SHA256SUMS"


PARTIAL_MARKER = ".partial-"


def partial_prefix(out: Path) -> str:
    """The name prefix of ``out``'s staging folders (hidden, next to ``out``)."""
    return f".{out.name}{PARTIAL_MARKER}"


def check_destination(out: Path) -> None:
    """Refuse an existing or unwritable ``out`` before any work.

    The nearest existing ancestor of ``out`` is probed by creating (and removing) a hidden folder
    in it, which is what the release will do: permission bits alone do not tell (root ignores
    them; read-only mounts do not show in them).

    Raises:
        SpecError: ``out`` exists, its parent is not a folder, or no folder can be created there.
    """
    if out.exists() or out.is_symlink():
        raise SpecError(f"--out {str(out)!r} already exists; a release bundle is never overwritten, "
                        "choose a new folder")
    if out.parent.exists() and not out.parent.is_dir():
        raise SpecError(f"--out {str(out)!r}: its parent {str(out.parent)!r} is not a folder")
    ancestor = out.parent.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".privlab-write-probe-", dir=ancestor))
    except OSError as error:
        raise SpecError(f"--out {str(out)!r} cannot be created: {str(ancestor)!r} is not writable "
                        f"({error.strerror or type(error).__name__}); choose a writable folder") from None


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            with open(Path(folder) / name, "rb") as stream:
                os.fsync(stream.fileno())
    with contextlib.suppress(OSError):
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_directory(out: Path, *, private_dir: str | None = None,
                     on_failure: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Stage a folder next to ``out`` and rename it to ``out`` when the block succeeds.

    ``private_dir``, if given, is made inside the staging folder with mode 0o700 before the
    block runs (it keeps that mode in ``out``).

    On any exception (including ``KeyboardInterrupt``) ``on_failure(staging)`` is called (to
    rescue what must outlive the failure; its own errors are suppressed), then the staging folder
    is removed and ``out`` is not created. A process killed with SIGKILL cannot clean up: it leaves a hidden
    ``.<name>.partial-*`` folder (never ``out`` itself), which :func:`stale_partials` finds.

    Raises:
        SpecError: ``out`` exists (before and after the block; nothing is replaced).
    """
    out = Path(out)
    check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=partial_prefix(out), dir=out.parent))
    try:
        if private_dir is not None:
            (staging / private_dir).mkdir(mode=0o700)
        yield staging
        _fsync_tree(staging)
        if out.exists():
            raise SpecError(f"--out {str(out)!r} appeared while the release ran; nothing was replaced")
        staging.chmod(0o755)  # mkdtemp's 0o700 is for the staging phase; private_dir stays 0o700
        os.rename(staging, out)
    except BaseException:
        with _interrupts_held():  # a second Ctrl-C or SIGTERM must not cut the rescue or the deletion short
            if on_failure is not None:
                with contextlib.suppress(Exception):
                    on_failure(staging)
            shutil.rmtree(staging, ignore_errors=True)
        raise


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the body runs (main thread only; elsewhere a no-op); one
    that arrived raises ``KeyboardInterrupt`` after it, so it still stops the command."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {number: signal.signal(number, lambda signum, _frame: arrived.append(signum))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if arrived:
        raise KeyboardInterrupt


def stale_partials(out: Path) -> list[Path]:
    """The staging folders next to ``out`` — of any bundle, not only ``out``'s — that a run left.

    A killed run (SIGKILL, a power cut) cannot clean up, and its ``.<name>.partial-*`` folder
    may hold ``private/transcript.bin``, as sensitive as the private data. They are found here
    for the command line to name them, never deleted: nothing records which process owns a
    staging folder, so a release running right now into the same folder (another terminal,
    another machine on a shared file system) has one of the same shape, and deleting it would
    break that run. Only the operator knows; the cost of asking is a message.
    """
    parent = Path(out).parent
    try:
        return sorted(p for p in parent.iterdir()
                      if p.name.startswith(".") and PARTIAL_MARKER in p.name and p.is_dir() and not p.is_symlink())
    except OSError:  # a missing or unreadable folder: the release itself will say what is wrong
        return []


def write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as stream:
        stream.write(text)


def write_released(folder: Path, released: pd.DataFrame) -> None:
    """``released.csv`` and ``released.parquet`` (dates as ``YYYY-MM-DD`` text in the CSV)."""
    csv_frame = released.copy()
    for column in csv_frame.columns:
        if pd.api.types.is_datetime64_any_dtype(csv_frame[column]):
            csv_frame[column] = csv_frame[column].dt.strftime("%Y-%m-%d")
    write_text(folder / "released.csv", csv_frame.to_csv(index=False, lineterminator="\n"))
    released.reset_index(drop=True).to_parquet(folder / "released.parquet", index=False)


def write_checksums(folder: Path, names: Sequence[str]) -> str:
    """Write ``SHA256SUMS`` (``sha256sum -c`` format) for ``names``; return its text."""
    lines = []
    for name in names:
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        lines.append(f"{digest}  {name}\n")
    text = "".join(lines)
    write_text(folder / CHECKSUMS, text)
    return text


def verify_checksums(folder: Path) -> list[str]:
    """The public files whose SHA-256 differs from ``SHA256SUMS`` (empty: all match).

    Raises:
        SpecError: ``SHA256SUMS`` is missing or malformed.
    """
    path = Path(folder) / CHECKSUMS
    if not path.is_file():
        raise SpecError(f"{str(folder)!r} has no {CHECKSUMS}; it is not a release bundle")
    bad = []
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise SpecError(f"{path}: malformed line {line!r}")
        target = Path(folder) / name
        if not target.is_file() or hashlib.sha256(target.read_bytes()).hexdigest() != digest:
            bad.append(name)
    return bad


def bundle_entries(folder: Path) -> set[str]:
    """Everything in ``folder``, as relative POSIX paths: each file (or link, pipe…), each empty
    or linked folder with a trailing ``/`` (a linked folder is not followed)."""
    folder = Path(folder)
    found: set[str] = set()
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        found.update((base / name).as_posix() for name in files)
        found.update(f"{(base / name).as_posix()}/" for name in dirs if (Path(root) / name).is_symlink())
        if not dirs and not files and base != Path("."):
            found.add(f"{base.as_posix()}/")
    return found


def file_list_differences(found: set[str], expected: Sequence[str],
                          optional: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The ``expected`` entries missing from ``found``, and the entries of ``found`` that are neither
    expected nor ``optional`` (both sorted)."""
    missing = sorted(set(expected) - found)
    extra = sorted(found - set(expected) - set(optional))
    return missing, extra


def _toml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return '"inf"' if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise SpecError(f"cannot write {value!r} to TOML")


def config_toml(tables: Mapping[str, Mapping[str, Any]], *, header: str) -> str:
    """A TOML document of flat tables (``None`` values are left out)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for table, entries in tables.items():
        lines += ["", f"[{table}]"]
        lines += [f"{key} = {_toml_scalar(value)}" for key, value in entries.items() if value is not None]
    return "\n".join(lines) + "\n"


def json_text(value: Any) -> str:
    """Strict, deterministic JSON text with a trailing newline."""
    return json.dumps(value, indent=2, sort_keys=False, allow_nan=False, ensure_ascii=False) + "\n"
