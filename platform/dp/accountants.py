"""Accountants: turn a ledger's typed events into one (ε, δ) guarantee.

The ledger hands an accountant its scopes (:class:`ScopeNode`: the events that touched one
part of the data, and the partitions of that part, each over a split it checked); the accountant
returns the run's (ε, δ) or refuses, with a :class:`~privlab.platform.core.errors.LedgerError`
naming the event and itself, an event it cannot account for. Accountants are plug-ins
(:mod:`privlab.platform.dp.accountant_base`), one module each, found through the
``privlab.accountants`` entry-point group; this module is the one door to them.

=========  ===================================================================================
basic      :mod:`~privlab.platform.dp.accountant_basic`: sequential composition (Dwork & Roth
           3.16), parallel composition over a checked split (McSherry 2009): the largest part.
advanced   :mod:`~privlab.platform.dp.accountant_advanced`: Dwork & Roth 3.20 within each scope.
pld        :mod:`~privlab.platform.dp.accountant_pld`: privacy-loss distributions (dp_accounting).
rdp        :mod:`~privlab.platform.dp.accountant_rdp`: Rényi DP; the only one that composes
           private selection by random stopping.
zcdp       :mod:`~privlab.platform.dp.accountant_zcdp`: zero-concentrated DP (an exponential-
           mechanism choice recorded as bounded range costs ε²/8).
=========  ===================================================================================

Every accountant but ``basic`` reads its bound at the ledger's δ'' (``delta_slack``); steps with a
δ of their own that a curve has no curve for are added outside it by sequential composition;
each curve accountant keeps the basic guarantee where that is no larger in ε, so none reports
more than ``basic``. Parallel composition under a curve accountant: a neighbouring pair differs
in one record, which lies in one part of each partition; the run's guarantee is the worst over
the choices of one part per partition, each composed exactly
(:mod:`privlab.platform.dp.composition_tree`).

Privacy:
    Every total here is an upper bound on the run's privacy loss under the ledger's neighbouring
    relation, given that each event's sensitivity was derived for that relation. Subsampling
    amplification is computed for add/remove-one neighbours only; every accountant refuses it
    under replace-one.

References:
    Dwork & Roth (2014), Theorems 3.16 and 3.20; McSherry (SIGMOD 2009), Theorem 4; Mironov,
    "Rényi Differential Privacy" (CSF 2017), Propositions 3, 6 and 10; Bun & Steinke, "Concentrated
    Differential Privacy" (TCC 2016), Propositions 1.3, 1.4 and 1.6; Canonne, Kamath & Steinke,
    "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), Corollary 13; Meiser &
    Mohammadi (CCS 2018) and Google's dp_accounting for privacy-loss distributions.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from privlab.platform.core.errors import LedgerError
from privlab.platform.dp.accountant_base import AccountantNames, accountant_named
from privlab.platform.dp.composition_tree import Guarantee, ScopeNode
from privlab.platform.dp.dp_events import DpEvent, ExponentialEvent, LaplaceEvent, SelfComposed
from privlab.platform.dp.positional_split import NeighbouringRelation

__all__ = [
    "ACCOUNTANTS",
    "SELECTABLE",
    "Guarantee",
    "ScopeNode",
    "compose",
    "largest_step_epsilon",
    "needs_delta_slack",
    "refusal",
]

ACCOUNTANTS = AccountantNames()
"""Every registered accountant, in the order the ledger reports them (read when used)."""

SELECTABLE = AccountantNames("best")
"""What ``[budget] accountant`` may name; ``"best"`` enforces the smallest valid total."""


def needs_delta_slack(accountant: str) -> bool:
    """Whether ``accountant`` (or ``"best"``) reads its bound at a δ''."""
    return accountant == "best" or accountant_named(accountant).needs_delta_slack


def refusal(event: DpEvent, accountant: str, *, neighbouring: NeighbouringRelation | str) -> str | None:
    """Why ``accountant`` cannot account for ``event`` (``None`` when it can)."""
    return _refusal(accountant, event, NeighbouringRelation.parse(neighbouring))


@functools.lru_cache(maxsize=4096)
def _refusal(accountant: str, event: DpEvent, relation: NeighbouringRelation) -> str | None:
    """Cached: a ledger asks every accountant about every event it spends, and events repeat."""
    return accountant_named(accountant).refusal(event, relation=relation)


def _check(accountant: str, scopes: Sequence[ScopeNode], relation: NeighbouringRelation,
           delta_slack: float | None) -> None:
    plugin = accountant_named(accountant)
    if plugin.needs_delta_slack and delta_slack is None:
        raise LedgerError(f"the {accountant} accountant needs delta_slack (δ'' at which it reads its bound); "
                          "set [budget] delta_slack in the spec")
    for scope in scopes:
        for node in scope.walk():
            for event in node.events:
                reason = plugin.refusal(event, relation=relation)
                if reason is not None:
                    raise LedgerError(f"scope {node.name!r}: the {accountant} accountant refuses {reason}")


def compose(scopes: Sequence[ScopeNode], *, accountant: str, delta_slack: float | None,
            neighbouring: NeighbouringRelation | str, delta_cap: float | None = None) -> Guarantee:
    """The run's (ε, δ) under ``accountant`` (module docstring).

    Args:
        scopes: the ledger's top-level scopes; they compose sequentially.
        accountant: a registered accountant's name.
        delta_slack: δ'' (required by every accountant that reads its bound at one).
        neighbouring: the ledger's relation (subsampling is refused under replace-one).
        delta_cap: where a curve accountant's δ would exceed it, the basic guarantee is kept.

    Raises:
        LedgerError: an unknown accountant, a missing δ'', or an event the accountant cannot
            account for (the message names both).
    """
    relation = NeighbouringRelation.parse(neighbouring)
    _check(accountant, scopes, relation, delta_slack)
    return accountant_named(accountant).compose(scopes, delta_slack=delta_slack, relation=relation,
                                                delta_cap=delta_cap)


def largest_step_epsilon(epsilon: float, count: int, *, accountant: str, delta_slack: float | None,
                         step: str = "laplace") -> float:
    """The largest ε_step such that ``count`` equal pure ε_step-DP steps compose to at most ``epsilon``.

    ``step`` names the steps' curve: ``"laplace"`` (Laplace noise, whose curve a curve accountant
    knows exactly) or ``"pure"`` (any ε-DP step). The answer is the largest float found by
    bisection for which :func:`compose` of ``SelfComposed(step, count)`` gives ε ≤ ``epsilon``,
    so the ledger that later composes these steps with the same accountant accepts them.

    Raises:
        LedgerError: an unknown accountant or step, or no ε_step > 0 fits (the message names both).
    """
    if step not in ("laplace", "pure"):
        raise LedgerError(f"step ({step!r}) must be 'laplace' or 'pure'")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise LedgerError(f"count ({count!r}) must be an int >= 1")
    if accountant == "basic":
        return epsilon / count
    return _largest_step(float(epsilon), count, accountant, delta_slack, step)


STEP_TOLERANCE = 1e-7
"""Relative precision of :func:`largest_step_epsilon`'s bisection (the answer always fits)."""


@functools.lru_cache(maxsize=256)
def _largest_step(epsilon: float, count: int, accountant: str, delta_slack: float | None, step: str) -> float:
    def total(e: float) -> float:
        leaf = LaplaceEvent(1.0, 1.0 / e) if step == "laplace" else ExponentialEvent(e)
        scope = ScopeNode("solve", (SelfComposed(leaf, count),))
        return compose([scope], accountant=accountant, delta_slack=delta_slack, neighbouring="replace_one").epsilon

    low = epsilon / count  # basic always fits: every accountant keeps the basic guarantee
    if total(low) > epsilon * (1.0 + 1e-12):
        raise LedgerError(f"no step ε fits: {count} steps of ε/{count} compose to more than {epsilon!r} under "
                          f"the {accountant} accountant")
    if total(low * (1.0 + STEP_TOLERANCE)) > epsilon:
        return low  # the accountant is no tighter than basic composition here
    high = epsilon
    if total(high) <= epsilon:
        return high
    for _ in range(200):
        mid = (low + high) / 2.0
        if mid in (low, high) or (high - low) <= STEP_TOLERANCE * low:
            break
        if total(mid) <= epsilon:
            low = mid
        else:
            high = mid
    return low
