"""Named plug-ins of every kind through one mechanism: a :class:`Registry` per kind.

privlab is extended by registering things under a name: workloads, dataset generators,
synthesizers, acceptance criteria, auditables, pMSE synthesis models. Each kind has one
:class:`Registry`, filled by a decorator in the module that defines the thing and found
through a Python entry-point group, ``privlab.<kind>``, whose entries name modules to import.
privlab's own modules are listed in ``pyproject.toml`` exactly like a third party's, so adding a
mechanism means writing its module and adding one registration line there (then reinstalling:
``pip install -e .`` regenerates the entry points).

Modules named in the ``PRIVLAB_PLUGINS`` environment variable (comma-separated) are imported
too: diagnostic plug-ins that tests and benchmarks use stay out of the installed registry.

:func:`build` is the one builder from spec tables: a frozen keyword-only dataclass from a
TOML table, every problem a :class:`~privlab.platform.core.errors.SpecError` that names the key.

This module belongs to the DP core's layer: it imports only the standard library and
:mod:`privlab.platform.core.errors`.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from privlab.platform.core.errors import RegistryError, SpecError
from privlab.platform.core.validation import closest, shown

T = TypeVar("T")

PLUGINS_VARIABLE = "PRIVLAB_PLUGINS"


def extra_modules() -> tuple[str, ...]:
    """The modules named in ``PRIVLAB_PLUGINS`` (tests' diagnostic plug-ins)."""
    return tuple(filter(None, (m.strip() for m in os.environ.get(PLUGINS_VARIABLE, "").split(","))))


class Registry(Generic[T]):
    """The plug-ins of one kind, by name.

    Args:
        kind: What is registered, for messages ("workload", "synthesizer", ...).
        groups: The entry-point groups whose modules register this kind (loaded on first use).
        check: Validates ``(name, value)`` at registration; raises ``TypeError`` with the reason.
        identity: What makes two registrations the same definition (default: module.qualname).
        listed_as: How an unknown-name message introduces the list (default "registered <kind>s").
    """

    def __init__(self, kind: str, *, groups: Iterable[str], check: Callable[[str, T], None] | None = None,
                 identity: Callable[[T], str] | None = None, listed_as: str | None = None) -> None:
        self.kind = kind
        self.listed_as = listed_as or f"registered {kind}s"
        self.groups = tuple(groups)
        self._check = check
        self._identity = identity or _qualname
        self._entries: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str, value: T) -> T:
        """Register ``value`` as ``name``; re-registering the same definition (a re-import) is allowed.

        Raises:
            TypeError: ``check`` refused it.
            RegistryError: Another definition already has the name.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"{self.kind} name ({name!r}) must be a non-empty string")
        if self._check is not None:
            self._check(name, value)
        existing = self._entries.get(name)
        if existing is not None and self._identity(existing) != self._identity(value):
            raise RegistryError(f"{self.kind} name {name!r} is already registered by {self._identity(existing)}")
        self._entries[name] = value
        return value

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests and examples that register a plug-in for their own duration)."""
        self._entries.pop(name, None)

    def load(self) -> None:
        """Import every module the entry-point groups and ``PRIVLAB_PLUGINS`` name (once)."""
        if self._loaded:
            return
        self._loaded = True
        modules = [ep.value.split(":", 1)[0] for group in self.groups
                   for ep in importlib.metadata.entry_points(group=group)]
        for module in (*modules, *extra_modules()):
            importlib.import_module(module)

    def get(self, name: str) -> T:
        """The plug-in registered as ``name``.

        Raises:
            RegistryError: No such name (the message lists the registered ones).
        """
        self.load()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise RegistryError(f"unknown {self.kind} {shown(name)}; {self.listed_as}: "
                                f"{', '.join(self.names()) or 'none'}. "
                                "A plug-in of your own must be listed under its entry-point group "
                                f"({', '.join(self.groups)}) and installed (pip install -e .)") from None

    def names(self) -> list[str]:
        self.load()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def items(self) -> list[tuple[str, T]]:
        self.load()
        return sorted(self._entries.items())


def _qualname(value: Any) -> str:
    target = value if isinstance(value, type) or callable(value) else type(value)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def require_frozen_kw_only(owner: str, params: Any) -> None:
    """Raise ``TypeError`` unless ``params`` is a frozen keyword-only dataclass (a plug-in's ``Params``)."""
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)
            and params.__dataclass_params__.frozen  # type: ignore[attr-defined]
            and all(f.kw_only for f in dataclasses.fields(params))):
        raise TypeError(f"{owner}.Params must be a frozen keyword-only dataclass")


def build(params_type: type, values: Mapping[str, Any], *, where: str) -> Any:
    """A parameter dataclass from a spec table, every problem a SpecError naming ``where``.

    ``where`` names the spec location (e.g. ``study 'laplace' params``) for the message.

    Raises:
        SpecError: Unknown keys (the allowed ones listed), missing required keys, or a value
            the dataclass's own validation refuses (its message names the key).
    """
    fields = {f.name: f for f in dataclasses.fields(params_type)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys: {', '.join(sorted(fields))}{closest(unknown, set(fields))}"
        )
    missing = sorted(
        name
        for name, f in fields.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise SpecError(f"{where}: missing required key(s) {', '.join(map(repr, missing))}")
    try:
        return params_type(**values)
    except ValueError as error:  # the dataclass's own validation names the key
        raise SpecError(f"{where}: {error}") from None
    except TypeError as error:
        text = str(error)
        if any(text.startswith(f"{name} (") for name in fields):  # declared constraints name the key
            raise SpecError(f"{where}: {text}") from None
        # e.g. a str compared with a float in hand-written checks: name the key ourselves
        raise SpecError(f"{where}: {_wrong_types(params_type, values) or text}") from None


_KINDS_OF = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def _wrong_types(params_type: type, values: Mapping[str, Any]) -> str:
    """``key (value) must be a T`` for values whose type contradicts a plain annotation (``""`` if none).

    Only consulted after construction failed, so it never changes which parameters are accepted;
    it names the key that a bare ``TypeError`` (e.g. comparing a str with a float) does not.
    """
    problems = []
    for field in dataclasses.fields(params_type):
        if field.name not in values:
            continue
        annotation = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
        kinds = _KINDS_OF.get(annotation.replace(" | None", ""))
        value = values[field.name]
        if kinds is None or (value is None and annotation.endswith("| None")):
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            kind = "a number" if float in kinds else {"int": "an int"}.get(kinds[0].__name__, f"a {kinds[0].__name__}")
            problems.append(f"{field.name} ({value!r}) must be {kind}")
    return "; ".join(problems)


def describe_params(params_type: type, *, none: str = "None") -> list[str]:
    """``name=default`` (``name (required)`` without one) for each field of a parameter dataclass.

    ``none`` is how a ``None`` default reads (e.g. ``"unlimited"`` for a depth).
    """
    described = []
    for field in dataclasses.fields(params_type):
        if field.default is not dataclasses.MISSING:
            described.append(f"{field.name}={none if field.default is None else repr(field.default)}")
        elif field.default_factory is not dataclasses.MISSING:
            described.append(f"{field.name}={field.default_factory()!r}")
        else:
            described.append(f"{field.name} (required)")
    return described
