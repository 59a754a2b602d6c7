"""Small helpers of the command line: the terminal's width and an argument list without some options."""

from __future__ import annotations

import sys
from collections.abc import Sequence

def terminal_width() -> int | None:
    """The terminal's width when stdout is one (tables fit it), else None (no limit)."""
    import shutil

    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def without_options(argv: Sequence[str], options: set[str]) -> list[str]:
    """``argv`` without the given options (``--opt VALUE`` or ``--opt=VALUE``)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        elif arg.split("=", 1)[0] not in options:
            kept.append(arg)
    return kept
