"""Accountants as plug-ins: the :class:`Accountant` protocol and its registry.

An accountant turns a ledger's typed events into one (ε, δ) guarantee, or refuses, naming the
event and itself, an event it cannot account for. Each lives in a module of its own, registered
with :func:`register_accountant` and found through the ``privlab.accountants`` entry-point group
(:mod:`privlab.platform.core.plugins`), exactly as workloads and synthesizers are: privlab's own
(``basic``, ``advanced``, ``pld``, ``rdp``, ``zcdp``) are listed in ``pyproject.toml`` like a
third party's. This follows dp_accounting's ``PrivacyAccountant`` (``supports``,
``_maybe_compose``, ``get_epsilon``): an accountant says what it cannot compose before it is
asked to.

Every registered accountant is held to one contract (``tests/test_accountant_contract.py``):
nothing composes to (0, 0); a total only grows as events are added; a partition's total lies
between its worst part and the sum of its parts; and no total is below dp_accounting's
optimistic privacy-loss distribution of the same run (the truth's lower bound).

Privacy:
    An accountant's total must be an upper bound on the run's privacy loss under the ledger's
    neighbouring relation for every event it accepts; what it cannot bound it refuses.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import ClassVar, TypeVar

from privlab.platform.core.errors import LedgerError
from privlab.platform.core.plugins import Registry
from privlab.platform.dp.composition_tree import (Alternative, Guarantee, ScopeNode, alternative_basic, alternatives,
                                                  leaf_counts)
from privlab.platform.dp.dp_events import Composed, DpEvent, RandomStoppingEvent, Subsampled
from privlab.platform.dp.positional_split import NeighbouringRelation

__all__ = ["ACCOUNTANT_REGISTRY", "BUILT_IN_ORDER", "Accountant", "AccountantNames", "CurveAccountant",
           "accountant_named", "accountant_names", "register_accountant"]

A = TypeVar("A", bound=type)

BUILT_IN_ORDER = ("basic", "advanced", "pld", "rdp", "zcdp")
"""privlab's own accountants in the order a ledger reports them; others follow by name."""


class Accountant(abc.ABC):
    """What composes a ledger's events into one (ε, δ).

    Subclasses set ``name`` and ``needs_delta_slack`` and implement :meth:`leaf_refusal` and
    :meth:`compose`; :meth:`refusal` applies the rules every accountant shares first.
    """

    name: ClassVar[str]
    needs_delta_slack: ClassVar[bool] = True
    """Whether the accountant reads its bound at a δ'' (the ledger's ``delta_slack``)."""

    def refusal(self, event: DpEvent, *, relation: NeighbouringRelation) -> str | None:
        """Why this accountant cannot account for ``event`` under ``relation`` (``None``: it can)."""
        own = self.event_refusal(event)
        if own is not None:
            return own
        for leaf, _ in leaf_counts(event):
            if isinstance(leaf, Subsampled) and relation != NeighbouringRelation.ADD_REMOVE:
                return (f"{leaf.label()}: amplification by subsampling does not hold as computed for "
                        f"{relation.value} neighbours")
            reason = self.leaf_refusal(leaf)
            if reason is not None:
                return reason
        return None

    def event_refusal(self, event: DpEvent) -> str | None:
        """Why the whole ``event`` cannot be accounted for, before its leaves are looked at."""
        return None

    def leaf_refusal(self, leaf: DpEvent) -> str | None:
        """Why one leaf step cannot be accounted for (``None``: it can). Default: a random
        stopping search is refused (only a Rényi accountant bounds it)."""
        if isinstance(leaf, RandomStoppingEvent):
            return (f"{leaf.label()}: random stopping over flows that are not pure ε-DP has a Rényi-DP bound only "
                    "(Papernot & Steinke 2022); use the rdp accountant")
        return None

    @abc.abstractmethod
    def compose(self, scopes: Sequence[ScopeNode], *, delta_slack: float | None, relation: NeighbouringRelation,
                delta_cap: float | None) -> Guarantee:
        """The run's (ε, δ): ``scopes`` compose sequentially, each partition as its worst part.

        Called only with events :meth:`refusal` accepted, and with ``delta_slack`` set when
        :attr:`needs_delta_slack`.
        """

    def __repr__(self) -> str:
        return f"<accountant {self.name}>"


class CurveAccountant(Accountant):
    """An accountant that composes each choice of parts exactly and reports the worst.

    Subclasses implement :meth:`alternative_guarantee`. Where a choice's basic guarantee is no
    larger in ε (or the curve's δ exceeds the cap), the basic one is kept, so a curve accountant
    never reports more than sequential composition.
    """

    def compose(self, scopes: Sequence[ScopeNode], *, delta_slack: float | None, relation: NeighbouringRelation,
                delta_cap: float | None) -> Guarantee:
        trees = [t for t in (s.as_event() for s in scopes) if t is not None]
        if not trees:
            return Guarantee(0.0, 0.0, self.name)
        tree = trees[0] if len(trees) == 1 else Composed(tuple(trees))
        worst_eps, worst_delta = 0.0, 0.0
        for alt in alternatives(tree):
            basic = alternative_basic(alt)
            curve = self.alternative_guarantee(alt, delta_slack)  # type: ignore[arg-type]
            if curve is None:
                if basic is None:  # pragma: no cover - refused before
                    raise LedgerError(f"the {self.name} accountant cannot compose this ledger")
                eps_a, delta_a = basic
            else:
                eps_a, delta_a = curve
                if basic is not None and (basic[0] <= eps_a or (delta_cap is not None and delta_a > delta_cap)):
                    eps_a, delta_a = basic  # as good in ε and better in δ, or the only one within the δ cap
            worst_eps, worst_delta = max(worst_eps, eps_a), max(worst_delta, delta_a)
        return Guarantee(worst_eps, min(worst_delta, 1.0), self.name)

    @abc.abstractmethod
    def alternative_guarantee(self, alt: Alternative, delta_slack: float) -> tuple[float, float] | None:
        """(ε, δ) of one choice of parts, its leaf steps composed sequentially by the curve;
        ``None`` to keep the choice's basic guarantee instead."""


def _check(name: str, accountant: object) -> None:
    if not (isinstance(accountant, Accountant) and getattr(accountant, "name", None) == name):
        raise TypeError(f"accountant {name!r} must be an Accountant instance whose name is {name!r}")


ACCOUNTANT_REGISTRY: Registry[Accountant] = Registry("accountant", groups=("privlab.accountants",), check=_check)


def register_accountant(cls: A) -> A:
    """Class decorator: register an instance of ``cls`` under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Accountant)):
        raise TypeError(f"{cls!r} must be an Accountant subclass")
    ACCOUNTANT_REGISTRY.register(cls.name, cls())
    return cls


def accountant_names() -> tuple[str, ...]:
    """Every registered accountant: privlab's own in :data:`BUILT_IN_ORDER`, then others by name."""
    names = ACCOUNTANT_REGISTRY.names()
    return (*(n for n in BUILT_IN_ORDER if n in names), *(n for n in names if n not in BUILT_IN_ORDER))


def accountant_named(name: str) -> Accountant:
    """The accountant registered as ``name``.

    Raises:
        LedgerError: no such accountant (the message lists the registered ones).
    """
    if not isinstance(name, str) or name not in ACCOUNTANT_REGISTRY:
        raise LedgerError(f"accountant ({name!r}) must be one of {list(accountant_names())}; an accountant of your "
                          "own is registered with @register_accountant in a module listed under the "
                          "privlab.accountants entry-point group")
    return ACCOUNTANT_REGISTRY.get(name)


class AccountantNames(Sequence[str]):
    """The registered accountants' names, read when used (so a plug-in installed later counts),
    optionally followed by ``extra`` names (``"best"``)."""

    def __init__(self, *extra: str) -> None:
        self._extra = extra

    def _names(self) -> tuple[str, ...]:
        return (*accountant_names(), *self._extra)

    def __getitem__(self, index):  # type: ignore[no-untyped-def,override]
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return repr(list(self._names()))
