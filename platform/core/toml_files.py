"""Reading TOML input files so that any bytes give a document or a :class:`SpecError`.

Specs, release spaces, flow settings and bundle configs are files people (and tools) hand to
privlab; a wrong file must be refused with a message, never end in a traceback. Besides invalid
TOML this covers what ``tomllib`` itself does not turn into ``TOMLDecodeError``: bytes that are
not UTF-8 (a binary file), nesting deep enough to exhaust the interpreter's stack
(``RecursionError``, in the parser or later in ``copy.deepcopy``/``json.dumps``), and integers
longer than Python converts from text (``ValueError``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import SpecError

#: The deepest nesting of tables and arrays accepted; real specs use fewer than ten levels.
MAX_DEPTH = 32


def nesting_depth(value: Any) -> int:
    """How deeply tables and arrays nest in ``value`` (a scalar: 0), counted without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_DEPTH:  # deep enough to refuse: stop walking
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_toml(text: str | bytes, *, where: str) -> dict[str, Any]:
    """Parse TOML ``text`` (bytes must be UTF-8).

    Args:
        text: The document.
        where: What it is, for messages (a path, or ``--set key``).

    Raises:
        SpecError: Not UTF-8, not valid TOML, or nested deeper than :data:`MAX_DEPTH`.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SpecError(f"{where}: not UTF-8 text (byte {error.start} is {text[error.start]:#04x}); is it a "
                            "binary file? Give a TOML text file") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{where}: not valid TOML: {error}") from None
    except RecursionError:
        raise SpecError(f"{where}: tables or arrays nest too deeply to read; at most {MAX_DEPTH} levels are "
                        "accepted") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts from text
        reason = str(error).split(";")[0]  # not Python's advice to raise its limit
        raise SpecError(f"{where}: a value cannot be read ({reason}); fix it in the file") from None
    if nesting_depth(document) > MAX_DEPTH:
        raise SpecError(f"{where}: tables or arrays nest more than {MAX_DEPTH} levels deep; no privlab file needs "
                        "that many, check the file")
    return document


def read_toml(path: str | Path, *, what: str) -> tuple[dict[str, Any], str]:
    """Read and parse the TOML file ``path``; returns the document and its text.

    Args:
        path: The file.
        what: What it is, for messages ("spec file").

    Raises:
        SpecError: ``path`` is missing or not a regular file, or its bytes are refused by
            :func:`parse_toml`.
    """
    path = Path(path)
    if not path.is_file():
        kind = "is not a regular file (a folder, pipe or device)" if path.exists() else "does not exist"
        raise SpecError(f"{what} {str(path)!r} {kind}")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SpecError(f"{what} {str(path)!r} cannot be read ({error.strerror or type(error).__name__})") from None
    document = parse_toml(raw, where=str(path))
    return document, raw.decode("utf-8")
