"""Files a command writes as its result: whole or not at all.

A result file (``--summary-json``, a shortlist) is written to a temporary file in its own folder
and renamed over the target, so a reader, or a run stopped half-way, never leaves half a file
where the result belongs. JSON is streamed to the file as it is encoded: a 10⁴-configuration
run's summary is tens of megabytes of text, which ``json.dumps`` would first build in memory
(with ``indent``, as millions of small pieces).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


@contextlib.contextmanager
def atomic_text_file(path: str | Path) -> Iterator[TextIO]:
    """A text stream whose content replaces ``path`` when the block ends without an error (the
    folder is created if needed); on an error, nothing is left behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            yield stream
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | Path, text: str) -> None:
    """``text`` to ``path``, whole or not at all."""
    with atomic_text_file(path) as stream:
        stream.write(text)


def write_json_atomically(path: str | Path, document: Any, *, indent: int | None = 2) -> None:
    """``document`` as JSON (values JSON does not know as their text), streamed to ``path``."""
    with atomic_text_file(path) as stream:
        json.dump(document, stream, indent=indent, default=str)
