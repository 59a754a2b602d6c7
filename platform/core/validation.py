"""Checks of arguments, worded the one way privlab words them (CONVENTIONS §2).

Every message has the form ``f"{name} ({value!r}) must be {constraint}"`` (OpenDP's), so a user
sees which argument is wrong, its value and what it must be. ``bool`` is never a number here.

Two styles share that format:

* ``check_*`` functions for one scalar argument at a time;
* declarative constraints in the style of scikit-learn's ``_parameter_constraints``: a dict
  ``{parameter: [constraint, ...]}`` whose values are :class:`Interval`, :class:`Options`,
  :class:`InstanceOf`, :class:`Text`, :class:`RealPair`, :class:`Unconstrained` or ``None`` (the
  value ``None`` is allowed), checked
  at once by :func:`validate_parameters`. A frozen ``Params`` dataclass declares them once by
  subclassing :class:`ConstrainedParams`, which checks every field when it is built. A value passes when one of its constraints accepts
  it. When none does, the error is a ``TypeError`` if no constraint accepts the *kind* of value
  (a string where a number is expected) and a ``ValueError`` if one does but not the value
  (``0`` where an ``int >= 1`` is expected); the message lists every alternative.
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Mapping, Sequence
import dataclasses
from typing import Any, ClassVar

import numpy as np

from privlab.platform.core.errors import SpecError

__all__ = ["BOOLEAN", "MAX_INT64", "MAX_RECORDS", "ConstrainedParams", "Constraint", "InstanceOf", "Interval", "Options", "RealPair",
           "Text", "Unconstrained", "as_float", "check_count", "check_path_text", "closest", "shown",
           "check_positive_finite", "check_real", "check_text", "describe_constraints", "validate_parameters"]


#: The largest integer a count, size, index or grid value may take unless its constraint says
#: otherwise: what numpy's int64 (array sizes, indices, counts) holds. A larger one (a TOML file
#: may hold a 400-digit integer) would otherwise fail deep inside numpy, or as an
#: ``OverflowError`` when converted to a float, after the run started.
MAX_INT64 = 2**63 - 1

#: The most records a generated dataset or one trial's draw may hold (a declared bound of the
#: workloads and generators that allocate ``n`` values: 0.8 GB per float64 column). Larger ones
#: are refused when the spec is read, not by numpy in a worker after the run started.
MAX_RECORDS = 10**8

#: An integer with more digits than this is shown by its length, not its digits, in messages;
#: a longer string by its first characters and its length.
_SHOWN_DIGITS = 30
_SHOWN_CHARACTERS = 80


def shown(value: object) -> str:
    """``repr(value)`` for a message, but a huge integer as its number of digits (a 400-digit
    ``epsilon`` in a spec is named, not printed over five lines)."""
    if isinstance(value, int) and not isinstance(value, bool):
        digits = len(str(abs(value))) if abs(value) < 10**4300 else None  # str() refuses > 4300 digits
        if digits is None or digits > _SHOWN_DIGITS:
            return f"an integer of {'over 4,300' if digits is None else f'{digits:,}'} digits"
    if isinstance(value, str) and len(value) > _SHOWN_CHARACTERS:
        return f"{value[:40]!r}… ({len(value):,} characters)"
    text = repr(value)
    if len(text) > 4 * _SHOWN_CHARACTERS:  # a nested table or long list: its start, and its size
        return f"{text[:_SHOWN_CHARACTERS]}… (a {type(value).__name__} of {len(text):,} characters as text)"
    return text


def closest(unknown: Sequence[object], allowed: Sequence[str] | set[str] | frozenset[str]) -> str:
    """``"; did you mean 'epsilon'?"`` for the unknown names that are near an allowed one (a
    typo), else ``""``: appended to an "unknown key" message after its list of allowed keys."""
    import difflib

    guesses = []
    for name in unknown:
        match = difflib.get_close_matches(str(name), sorted(allowed), n=1, cutoff=0.6)
        if match:
            guesses.append(f"{match[0]!r} for {str(name)!r}" if len(unknown) > 1 else repr(match[0]))
    return f"; did you mean {', '.join(guesses)}?" if guesses else ""


#: The longest file or folder name (one path component) and whole path, in bytes, that Linux
#: and macOS file systems take: a longer one fails every file operation with ENAMETOOLONG.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095


def check_path_text(text: str, what: str) -> str:
    """``text`` if it can name a file: no NUL character, no component over
    :data:`MAX_NAME_BYTES` and at most :data:`MAX_PATH_BYTES` in all (UTF-8). Checked when a
    spec is read, so a path no file can have is bad input, not an ``OSError`` traceback.

    Raises:
        SpecError: the text cannot be a path.
    """
    if "\x00" in text:
        raise SpecError(f"{what} holds a NUL character; no file can be named so")
    size = len(text.encode("utf-8", "surrogatepass"))
    longest = max((len(part.encode("utf-8", "surrogatepass")) for part in text.split("/")), default=0)
    if size > MAX_PATH_BYTES or longest > MAX_NAME_BYTES:
        raise SpecError(f"{what} is {size:,} bytes long with a name of {longest:,}; a file's path may take "
                        f"{MAX_PATH_BYTES:,} bytes and each of its names {MAX_NAME_BYTES}: give the file's real path")
    return text


def as_float(value: object) -> float | None:
    """``float(value)`` for a real number, or None when it cannot be one (a 400-digit integer
    overflows a float)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return None


def check_real(name: str, value: object) -> float:
    """``value`` as a float.

    Raises:
        TypeError: ``value`` is not a real number (``bool`` excluded).
        ValueError: ``value`` is an integer too large for a float.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} ({shown(value)}) must be a real number")
    result = as_float(value)
    if result is None:
        raise ValueError(f"{name} ({shown(value)}) must be a finite real number (it is too large for a float)")
    return result


def check_positive_finite(name: str, value: object) -> float:
    """``value`` as a float if it is a real number, finite and > 0.

    Raises:
        TypeError: not a real number.
        ValueError: not finite or not > 0.
    """
    result = check_real(name, value)
    if not (math.isfinite(result) and result > 0.0):
        raise ValueError(f"{name} ({shown(value)}) must be positive and finite")
    return result


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (``bool`` excluded) ``>= minimum``.

    Raises:
        TypeError: not an integer.
        ValueError: smaller than ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} ({shown(value)}) must be an int")
    if value < minimum:
        raise ValueError(f"{name} ({shown(value)}) must be >= {minimum}")
    if value > MAX_INT64:
        raise ValueError(f"{name} ({shown(value)}) must be at most {MAX_INT64:,} (2**63 - 1)")
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


# --- declarative constraints (scikit-learn's ``_parameter_constraints`` style) ------------------


def _is_real(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def _is_int(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


class Constraint(abc.ABC):
    """One acceptable kind of value for a parameter, with the words that describe it."""

    @abc.abstractmethod
    def accepts_type(self, value: object) -> bool:
        """Whether ``value`` is of the kind this constraint is about (a wrong value of the right
        kind is a ``ValueError``; a value of no listed kind is a ``TypeError``)."""

    @abc.abstractmethod
    def accepts(self, value: object) -> bool:
        """Whether ``value`` satisfies the constraint."""

    @abc.abstractmethod
    def __str__(self) -> str:
        """The constraint as it follows "must be" in an error message."""


class Interval(Constraint):
    """A finite number of a kind (``numbers.Real`` or ``numbers.Integral``) in an interval.

    Args:
        kind: ``numbers.Real`` (any finite real number, ``bool`` excluded) or
            ``numbers.Integral`` (any integer, ``bool`` excluded).
        left, right: the bounds; ``None`` for an unbounded side.
        closed: which bounds belong to the interval: ``"left"``, ``"right"``, ``"both"`` or
            ``"neither"``.

        largest: for an integer kind, the largest magnitude accepted where ``left`` or ``right``
            is ``None`` (default :data:`MAX_INT64`; a root seed takes 128-bit entropy); named in
            the message only when a value exceeds it.

    Raises:
        TypeError: ``kind`` is not ``numbers.Real`` or ``numbers.Integral``.
        ValueError: ``closed`` is not one of the four names, or ``left > right``.
    """

    def __init__(self, kind: type, left: float | None, right: float | None, *, closed: str,
                 largest: int = MAX_INT64) -> None:
        if kind not in (numbers.Real, numbers.Integral):
            raise TypeError(f"kind ({kind!r}) must be numbers.Real or numbers.Integral")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed ({closed!r}) must be one of ['left', 'right', 'both', 'neither']")
        if left is not None and right is not None and left > right:
            raise ValueError(f"left ({left!r}) must be <= right ({right!r})")
        self.kind, self.left, self.right, self.closed, self.largest = kind, left, right, closed, largest

    def accepts_type(self, value: object) -> bool:
        return _is_int(value) if self.kind is numbers.Integral else _is_real(value)

    def too_large(self, value: object) -> bool:
        """Whether ``value`` is an integer beyond what this constraint can hold (:data:`MAX_INT64`
        for an integer kind; a float for a real one), whatever its bounds say."""
        if not _is_int(value):
            return False
        if self.kind is numbers.Integral:
            return abs(int(value)) > self.largest  # type: ignore[call-overload]
        return as_float(value) is None

    def accepts(self, value: object) -> bool:
        if not self.accepts_type(value) or self.too_large(value):
            return False
        x = float(value)  # type: ignore[arg-type]
        if not math.isfinite(x):
            return False
        left_ok = self.left is None or (x >= self.left if self.closed in ("left", "both") else x > self.left)
        right_ok = self.right is None or (x <= self.right if self.closed in ("right", "both") else x < self.right)
        return left_ok and right_ok

    def __str__(self) -> str:
        kind = "an int" if self.kind is numbers.Integral else "a finite real number"
        lower_closed = self.closed in ("left", "both")
        upper_closed = self.closed in ("right", "both")
        if self.left is not None and self.right is not None:
            return (f"{kind} in {'[' if lower_closed else '('}{self.left!r}, {self.right!r}"
                    f"{']' if upper_closed else ')'}")
        if self.left is not None:
            return f"{kind} {'>=' if lower_closed else '>'} {self.left!r}"
        if self.right is not None:
            return f"{kind} {'<=' if upper_closed else '<'} {self.right!r}"
        return kind


class Options(Constraint):
    """One of a fixed set of values of one type (``Options(str, {"full", "disjoint"})``).

    Args:
        kind: the values' type (``str`` for named options).
        values: the allowed values, named in messages in their order (a set's sorted).
        description: what follows "must be" (default: ``"one of [...]"``).
    """

    def __init__(self, kind: type, values: Sequence[Any] | set[Any] | frozenset[Any], *,
                 description: str | None = None) -> None:
        self.kind = kind
        # A live sequence (the registered accountants, say) is kept as it is, so later plug-ins count.
        self.values = (tuple(values) if isinstance(values, (list, tuple)) else values if isinstance(values, Sequence)
                       else tuple(sorted(values, key=repr)))
        self.description = description

    def accepts_type(self, value: object) -> bool:
        return isinstance(value, self.kind) and not (self.kind is not bool and isinstance(value, bool))

    def accepts(self, value: object) -> bool:
        return self.accepts_type(value) and value in self.values

    def __str__(self) -> str:
        if self.description is not None:
            return self.description
        if len(self.values) == 1:
            return repr(self.values[0])
        return f"one of {list(self.values)!r}"


class InstanceOf(Constraint):
    """Any instance of a type (or of one of several types), described in words.

    Args:
        kinds: a type or a tuple of types.
        description: what follows "must be", e.g. ``"a numpy.random.Generator"``.
    """

    def __init__(self, kinds: type | tuple[type, ...], description: str) -> None:
        self.kinds, self.description = kinds, description

    def accepts_type(self, value: object) -> bool:
        return isinstance(value, self.kinds) and not isinstance(value, bool)

    def accepts(self, value: object) -> bool:
        return self.accepts_type(value)

    def __str__(self) -> str:
        return self.description


class Text(Constraint):
    """A non-empty string, described in words (``Text("a column name")``)."""

    def __init__(self, description: str = "a non-empty string") -> None:
        self.description = description

    def accepts_type(self, value: object) -> bool:
        return isinstance(value, str)

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value != ""

    def __str__(self) -> str:
        return self.description


class Unconstrained(Constraint):
    """Any value: the parameter is a structure (a list of columns, a table) that its class checks
    and normalises itself, in :meth:`ConstrainedParams._check_together` (scikit-learn's
    ``"no_validation"``)."""

    def accepts_type(self, value: object) -> bool:
        return True

    def accepts(self, value: object) -> bool:
        return True

    def __str__(self) -> str:
        return "anything"


class RealPair(Constraint):
    """A pair ``(lower, upper)`` of finite real numbers with ``lower < upper`` (public bounds)."""

    def accepts_type(self, value: object) -> bool:
        return isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes))

    def accepts(self, value: object) -> bool:
        if not self.accepts_type(value) or len(value) != 2:  # type: ignore[arg-type]
            return False
        lower, upper = (as_float(v) if _is_real(v) else None for v in value)  # type: ignore[union-attr]
        return lower is not None and upper is not None and math.isfinite(lower) and math.isfinite(upper) \
            and lower < upper

    def __str__(self) -> str:
        return "a pair (lower, upper) of finite real numbers with lower < upper"


BOOLEAN = Options(bool, {False, True}, description="true or false")
"""``True`` or ``False`` (and not ``0``, ``1`` or ``"true"``)."""

ConstraintSpec = Constraint | None
"""An entry of a constraint list: a :class:`Constraint`, or ``None`` (the value ``None`` is allowed)."""


def describe_constraints(constraints: Sequence[ConstraintSpec]) -> str:
    """The alternatives of one parameter in words: ``"None, 'sqrt' or an int >= 1"``."""
    words = ["None" if c is None else str(c) for c in constraints]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def validate_parameters(constraints: Mapping[str, Sequence[ConstraintSpec]], params: Mapping[str, object], *,
                        value_error: type[ValueError] = ValueError, type_error: type[Exception] = TypeError,
                        prefix: str = "", hints: Mapping[str, str] | None = None) -> None:
    """Check every parameter against its constraints (module docstring), in ``params``' order.

    Args:
        constraints: ``{name: [constraint, ...]}``; every name of ``params`` must have an entry.
        params: ``{name: value}``, e.g. an estimator's ``get_params(deep=False)``.
        value_error: the error for a wrong value (a ``Params`` dataclass built from a spec
            raises :class:`~privlab.platform.core.errors.SpecError`, a ``ValueError``).
        type_error: the error for a value of no accepted kind (``TypeError``; a spec section
            that reports every mistake as a ``SpecError`` passes that).
        prefix: words before every message that name the owner (``"criterion 'x': "``).
        hints: per parameter, what to do instead, appended to its message after ``"; "``.

    Raises:
        TypeError: a value of a kind no constraint of its parameter is about.
        ValueError: (``value_error``) a value of an accepted kind outside every constraint; or
            a parameter without constraints (a bug in the code that declares them).
    """
    missing = [name for name in params if name not in constraints]
    if missing:
        raise ValueError(f"parameters ({missing!r}) must have declared constraints")
    for name, value in params.items():
        alternatives = constraints[name]
        if any(value is None if c is None else c.accepts(value) for c in alternatives):
            continue
        kind_ok = any(c is not None and c.accepts_type(value) for c in alternatives)
        error = value_error if kind_ok else type_error
        hint = (hints or {}).get(name)
        limit = next((c for c in alternatives if isinstance(c, Interval) and c.too_large(value)
                      and (c.kind is numbers.Real or c.left is None or c.right is None)), None)
        if limit is not None:
            hint = (f"this integer is beyond what it can hold (at most {limit.largest:,} in magnitude)"
                    if limit.kind is numbers.Integral else "this integer is too large for a float") \
                + (f"; {hint}" if hint else "")
        raise error(f"{prefix}{name} ({shown(value)}) must be {describe_constraints(alternatives)}"
                    + (f"; {hint}" if hint else ""))


class ConstrainedParams:
    """Base of a frozen ``Params`` dataclass whose fields declare their constraints once.

    A subclass sets ``_parameter_constraints`` (every field, :func:`validate_parameters`'s
    format); building an instance checks every field in declaration order — a value of no
    accepted kind is a ``TypeError``, a wrong value a :class:`~privlab.platform.core.errors.SpecError`
    naming the field — and then calls :meth:`_check_together` for the rules that tie fields
    together (exactly one of two set, an order between two bounds).

    A class whose errors name their owner (``"criterion 'x': ..."``) overrides
    :meth:`_message_prefix`; one whose every mistake is a spec's sets ``_type_error`` to
    ``SpecError``; ``_parameter_hints`` add what to do to a field's message.
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[ConstraintSpec]]]
    _type_error: ClassVar[type[Exception]] = TypeError
    _parameter_hints: ClassVar[Mapping[str, str]] = {}
    #: Whether a field may go undeclared (its class checks it itself): a base that plugins extend
    #: sets it, so that a plugin's own fields need no declaration.
    _undeclared_fields_allowed: ClassVar[bool] = False

    def __post_init__(self) -> None:
        fields = dataclasses.fields(self)  # type: ignore[arg-type]
        constraints = self._parameter_constraints
        if self._undeclared_fields_allowed:
            constraints = {**{f.name: [Unconstrained()] for f in fields}, **constraints}
        validate_parameters(constraints, {f.name: getattr(self, f.name) for f in fields},
                            value_error=SpecError, type_error=self._type_error, prefix=self._message_prefix(),
                            hints=self._parameter_hints)
        self._check_together()

    def _message_prefix(self) -> str:
        """Words before every error message that name the owner; none by default."""
        return ""

    def _check_together(self) -> None:
        """Rules over several fields, after each field passed its own constraints."""
