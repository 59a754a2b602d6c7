"""Checks of scalar arguments, worded the one way privlab words them (CONVENTIONS §2).

Every message has the form ``f"{name} ({value!r}) must be {constraint}"`` (OpenDP's), so a user
sees which argument is wrong, its value and what it must be. ``bool`` is never a number here.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["check_count", "check_positive_finite", "check_real", "check_text"]


def check_real(name: str, value: object) -> float:
    """``value`` as a float.

    Raises:
        TypeError: ``value`` is not a real number (``bool`` excluded).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} ({value!r}) must be a real number")
    return float(value)


def check_positive_finite(name: str, value: object) -> float:
    """``value`` as a float if it is a real number, finite and > 0.

    Raises:
        TypeError: not a real number.
        ValueError: not finite or not > 0.
    """
    result = check_real(name, value)
    if not (math.isfinite(result) and result > 0.0):
        raise ValueError(f"{name} ({value!r}) must be positive and finite")
    return result


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (``bool`` excluded) ``>= minimum``.

    Raises:
        TypeError: not an integer.
        ValueError: smaller than ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} ({value!r}) must be an int")
    if value < minimum:
        raise ValueError(f"{name} ({value!r}) must be >= {minimum}")
    return int(value)


def check_text(name: str, value: object) -> str:
    """``value`` if it is a string with something other than whitespace in it.

    Raises:
        TypeError: not a string.
        ValueError: empty or blank.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} ({value!r}) must be a str")
    if not value.strip():
        raise ValueError(f"{name} ({value!r}) must be a non-empty string")
    return value
