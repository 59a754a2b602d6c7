"""The privacy ledger: a run's DP steps, its caps, and how the steps compose.

A :class:`Ledger` holds a run's :class:`~privlab.platform.dp.privacy_event.PrivacyEvent` records
and caps, composes them with an accountant (:mod:`privlab.platform.dp.accountants`; the basic
total kept exact by :mod:`privlab.platform.dp.basic_totals`), and refuses a step *before* it is
recorded when it would take the run past its cap. Events never compose themselves; that is the
ledger's job (dp_accounting keeps events apart from accountants the same way).

The module is one class over 600 lines: the ledger is one state machine (events, partitions,
caps and running totals, changed together by :meth:`Ledger.spend` and restored together on a
refusal), and its serialisation and table read that same state; splitting it would expose the
state it keeps consistent.
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from privlab.platform.core.errors import BudgetExceededError, LedgerError
from privlab.platform.core.validation import check_real
from privlab.platform.dp import accountants, composition
from privlab.platform.dp.accountants import ScopeNode
from privlab.platform.dp.basic_totals import BasicTotals, Budget
from privlab.platform.dp.dp_events import DpEvent, render_tree
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.privacy_event import SENSITIVITY_NOTE, DetailValue, PrivacyEvent, ledger_text

__all__ = ["ACCOUNTANTS", "CAP_RELATIVE_TOLERANCE", "Ledger"]

ACCOUNTANTS = accountants.SELECTABLE
"""Accountant names :class:`Ledger` accepts (:mod:`privlab.platform.dp.accountants`)."""
NEIGHBOURING = ("replace_one", "add_remove")
"""Neighbouring relations a ledger's guarantee can be stated for."""
PARTITION_BASES = ("membership", "position")
"""How a partition's parts were cut: by membership (add/remove-one only) or by record position."""

CAP_RELATIVE_TOLERANCE = 1e-12
"""A total may exceed its cap by this relative amount (float summation error, not budget)."""


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _effective_cell(event: PrivacyEvent) -> str:
    """What composition charges for the step: ε after amplification by subsampling (and the
    sampling rate), or the step's own ε when it ran on the full data; a step with no pure-ε
    guarantee (Gaussian noise) shows its zCDP ρ."""
    if event.epsilon is None:
        rho = getattr(event.typed, "rho", None)
        return "-" if rho is None else f"ρ={rho:.6g}"
    if event.sampling_rate is None:
        return f"{event.effective_epsilon:.6g}"
    return f"{event.effective_epsilon:.6g} (p={event.sampling_rate:.6g})"


class Ledger:
    """A run's privacy events, caps, neighbouring relation and accountant.

    Composition semantics:

    * Events are grouped by ``scope`` (the data they touched); each is a typed event tree
      (:attr:`PrivacyEvent.typed`). Scopes that are not a declared part are top-level and
      compose sequentially with each other, which is conservative when they overlap.
    * :meth:`declare_partition` splits a scope into disjoint parts. Each partition of a scope
      contributes the parallel composition of its parts (the worst part), computed recursively,
      so partitions nest; that composes sequentially with the scope's own events. A scope can
      have several partitions (e.g. by age and by region); they add up.
    * How events compose is the accountant's (:mod:`privlab.platform.dp.accountants`): ``"basic"``
      (sequential), ``"advanced"`` (Dwork–Roth 3.20 per scope, each scope with events paying
      δ'' once, keeping its basic total where that is no larger), ``"pld"``, ``"rdp"`` and
      ``"zcdp"`` (composed privacy curves read at δ''), and ``"best"``: the smallest total ε
      among the accountants that can account for every event (and stay within the δ cap).
    * Basic totals are kept incrementally as exact partial sums (Shewchuk), so without
      partitions the basic total is exactly the correctly rounded sum of the effective ε, and
      :meth:`spend` is O(1) amortised under ``"basic"``.

    Caps: :meth:`spend` refuses an event (:class:`BudgetExceededError`, nothing recorded) unless
    the run's guarantee with it stays within ``epsilon_cap`` and ``delta_cap`` (relative
    tolerance :data:`CAP_RELATIVE_TOLERANCE`, so fractions of a budget that sum to the cap are
    not refused for float rounding). The guarantee is the enforced accountant's; the basic one is
    accepted too when it fits, since every accountant's total is a valid bound and basic is never
    larger in δ. An accountant that cannot account for an event (Gaussian noise under
    ``"basic"``, say) refuses it with a :class:`LedgerError` naming both.

    Args:
        epsilon_cap: the run's ε budget, finite and > 0, or ``None`` for an uncapped research
            run (totals are still computed and logged).
        delta_cap: the run's δ budget in [0, 1), or ``None`` for uncapped. Default 0: pure DP,
            any δ > 0 is refused.
        accountant: one of :data:`ACCOUNTANTS`; the one whose total is enforced.
        delta_slack: δ'' in (0, 1): advanced composition's δ'', and the δ at which the curve
            accountants read their ε. Required by every accountant but ``"basic"``; optional with
            ``"basic"`` (then :meth:`totals_by_accountant` reports the others too).
        neighbouring: the neighbouring relation the run's guarantee is stated for:
            ``"replace_one"`` (the default: every privlab mechanism's sensitivities are derived
            for it, with n public) or ``"add_remove"``.

    Raises:
        TypeError: an argument has the wrong kind of value.
        LedgerError: an argument has a wrong value, or δ'' alone exceeds ``delta_cap``.

    Privacy:
        The totals bound the whole run's privacy loss under the ledger's neighbouring relation.
        Sequential, advanced and curve composition hold for both relations. Parallel composition
        holds for both when the parts were cut by record position
        (:class:`~privlab.platform.dp.positional_split.PositionalSplit`), and for add/remove-one
        only when cut by membership; amplification by subsampling as computed holds for
        add/remove-one only. A replace-one ledger refuses what does not hold for it
        (:class:`LedgerError`) instead of under-counting.

    References:
        Dwork & Roth (2014), Theorems 3.16 and 3.20; McSherry (SIGMOD 2009), Theorem 4;
        Bindschaedler, Shokri & Gunter (VLDB 2017), Appendix A; Liu & Talwar (STOC 2019) as
        Hod & Canetti, Theorem 3; see :mod:`privlab.platform.dp.accountants` for the curves.
    """

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(
        self,
        *,
        epsilon_cap: float | None,
        delta_cap: float | None = 0.0,
        accountant: str = "basic",
        delta_slack: float | None = None,
        neighbouring: str = "replace_one",
    ) -> None:
        if neighbouring not in NEIGHBOURING:
            raise LedgerError(f"neighbouring ({neighbouring!r}) must be one of {list(NEIGHBOURING)}")
        if epsilon_cap is not None:
            epsilon_cap = check_real("epsilon_cap", epsilon_cap)
            if not (math.isfinite(epsilon_cap) and epsilon_cap > 0.0):
                raise LedgerError(
                    f"epsilon_cap ({epsilon_cap!r}) must be finite and > 0, or None for uncapped"
                )
        if delta_cap is not None:
            delta_cap = check_real("delta_cap", delta_cap)
            if not 0.0 <= delta_cap < 1.0:
                raise LedgerError(f"delta_cap ({delta_cap!r}) must be in [0, 1), or None")
        ledger_text("accountant", accountant, empty_ok=True)
        if accountant not in ACCOUNTANTS:
            raise LedgerError(f"accountant ({accountant!r}) must be one of {list(ACCOUNTANTS)}")
        if delta_slack is not None:
            delta_slack = check_real("delta_slack", delta_slack)
            if not 0.0 < delta_slack < 1.0:
                raise LedgerError(f"delta_slack ({delta_slack!r}) must be in (0, 1), or None")
        if accountant != "basic":
            if delta_slack is None:
                raise LedgerError(
                    f"delta_slack (None) must be set for the {accountant} accountant (its δ'')"
                )
            if delta_cap is not None and delta_slack > delta_cap:
                raise LedgerError(
                    f"delta_slack ({delta_slack!r}) must be <= delta_cap ({delta_cap!r}) with "
                    f"the {accountant} accountant, which adds δ'' to δ; lower delta_slack or raise "
                    "[budget] delta in the spec"
                )
        self._epsilon_cap = epsilon_cap
        self._delta_cap = delta_cap
        self._accountant = accountant
        self._delta_slack = delta_slack
        self._neighbouring = neighbouring
        self._partitions: list[tuple[str, tuple[str, ...]]] = []
        self._partition_basis: list[str] = []
        self._events: list[PrivacyEvent] = []
        self._basic = BasicTotals()
        self._typed: list[DpEvent] = []  # each event's typed tree, in order
        self._has_basic = True  # whether every event has a pure-ε (basic) guarantee
        self._cache: dict[str, tuple[int, Budget]] = {}  # accountant -> (events seen, total)
        self._cleared: collections.deque[PrivacyEvent] = collections.deque()  # a preflighted plan's rest

    # --- properties -------------------------------------------------------------------------

    @property
    def epsilon_cap(self) -> float | None:
        """The ε cap, or ``None`` when uncapped."""
        return self._epsilon_cap

    @property
    def delta_cap(self) -> float | None:
        """The δ cap, or ``None`` when uncapped."""
        return self._delta_cap

    @property
    def accountant(self) -> str:
        """The accountant whose total is enforced."""
        return self._accountant

    @property
    def delta_slack(self) -> float | None:
        """δ'' of the advanced accountant, or ``None``."""
        return self._delta_slack

    @property
    def neighbouring(self) -> str:
        return self._neighbouring

    @property
    def partitions(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Declared partitions as ``(parent, parts)``, in declaration order."""
        return tuple(self._partitions)

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """Recorded events, in order."""
        return tuple(self._events)

    # --- recording --------------------------------------------------------------------------

    def declare_partition(self, parent: str, parts: Sequence[str], *, split: PositionalSplit | None = None,
                          by_position: bool = False) -> None:
        """Declare ``parts`` as disjoint subsets of scope ``parent`` (parallel composition).

        Args:
            parent: the scope split; it may have events, be a part itself, or be new.
            parts: at least two distinct new scope names (not yet used by any event or
                partition), so a partition is declared before anything is spent on its parts.
            split: the :class:`~privlab.platform.dp.positional_split.PositionalSplit` that made the
                parts, one part per name. Required under replace-one neighbours; without it the
                partition is taken to be by membership (valid for add/remove-one only).
            by_position: declare, without the split object at hand, that the parts are or will be
                cut by record position independently of the values (a workload's plan declares
                the split its trials draw later; :meth:`privlab.platform.experiment.registry.Workload.partitions`).

        Raises:
            TypeError: a name is not a str, ``parts`` is not a sequence of names, or ``split``
                is not a :class:`PositionalSplit`.
            LedgerError: fewer than two parts, duplicates, a part name already in use, a split
                with another number of parts, or no positional split under replace-one.

        Privacy:
            Declaring a partition asserts that every record of ``parent`` is in exactly one part.
            Under add/remove-one that suffices (McSherry's Theorem 4). Under replace-one it
            holds only when the parts are cut by record position, independently of the values
            (:mod:`privlab.platform.dp.positional_split`): the replaced record then stays in its
            part. A wrong declaration under-counts the budget.
        """
        self._check_partition(parent, parts, split=split, by_position=by_position)
        self._add_partition(parent, tuple(parts), "position" if split is not None or by_position else "membership")

    def _check_partition(self, parent: str, parts: Sequence[str], *, split: PositionalSplit | None,
                         by_position: bool) -> None:
        """Raise unless :meth:`declare_partition` may declare this partition here (its checks)."""
        ledger_text("parent", parent)
        if split is not None and not isinstance(split, PositionalSplit):
            raise TypeError(f"split ({split!r}) must be a PositionalSplit (a split by record position)")
        if not isinstance(by_position, bool):
            raise TypeError(f"by_position ({by_position!r}) must be a bool")
        if split is None and not by_position and self._neighbouring != "add_remove":
            raise LedgerError(
                f"partition of {parent!r}: parallel composition holds for {self._neighbouring} neighbours "
                "only when the parts are cut by record position, independently of the values (a replaced "
                "record could otherwise move from one part to another); pass split=PositionalSplit(...), "
                "charge the parts sequentially, or state the guarantee for add/remove neighbours "
                "(neighbouring='add_remove')")
        if isinstance(parts, str) or not isinstance(parts, Sequence):
            raise TypeError(f"parts ({parts!r}) must be a sequence of scope names")
        for part in parts:
            ledger_text("part", part)
        if len(parts) < 2:
            raise LedgerError(f"parts ({list(parts)!r}) must name at least 2 scopes")
        if len(set(parts)) != len(parts):
            raise LedgerError(f"parts ({list(parts)!r}) must be distinct")
        if parent in parts:
            raise LedgerError(f"parts ({list(parts)!r}) must not contain the parent ({parent!r})")
        if split is not None and split.n_parts != len(parts):
            raise LedgerError(f"parts ({list(parts)!r}) must name one scope per part of the split "
                              f"({split.n_parts} parts)")
        known = self._scope_names()
        used = [p for p in parts if p in known]
        if used:
            raise LedgerError(
                f"parts ({used!r}) must be new scope names (not used by an event or an earlier "
                "partition); declare partitions before spending on their parts"
            )

    def has_partition(self, parent: str, parts: Sequence[str], *, basis: str = "position") -> bool:
        """Whether ``parent`` is declared split into exactly ``parts`` (in order) on ``basis``."""
        return any(p == parent and tuple(ps) == tuple(parts) and b == basis
                   for (p, ps), b in zip(self._partitions, self._partition_basis, strict=True))

    def _add_partition(self, parent: str, parts: tuple[str, ...], basis: str) -> None:
        self._partitions.append((parent, parts))
        self._partition_basis.append(basis)
        self._basic.declare(parent, parts)
        self._cache.clear()

    def spend(self, event: PrivacyEvent) -> PrivacyEvent:
        """Record ``event`` if the run stays within its caps, else raise without recording.

        Args:
            event: the step about to run.

        Returns:
            ``event``.

        Raises:
            TypeError: ``event`` is not a :class:`PrivacyEvent`.
            LedgerError: the enforced accountant cannot account for the event (the message names
                both), or subsampling under replace-one.
            BudgetExceededError: the run's guarantee would exceed a cap (beyond the relative
                tolerance); nothing is recorded.

        Privacy:
            Call before the step runs, so a refused step never touches the data.
        """
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"event ({event!r}) must be a PrivacyEvent")
        if event.sampling_rate is not None and self._neighbouring != "add_remove":
            raise LedgerError(
                f"event {event.name!r}: amplification by subsampling does not hold as computed for "
                f"{self._neighbouring} neighbours; charge the step without sampling_rate, or state the "
                "guarantee for add/remove neighbours (neighbouring='add_remove')")
        typed = event.typed
        self._check_supported(event, typed)
        cleared = bool(self._cleared) and self._cleared[0] == event
        undo = self._basic.snapshot(event.scope)
        self._record(event, typed)
        if cleared:  # preflight showed the whole plan fits; every prefix of it does too
            self._cleared.popleft()
            return event
        self._cleared.clear()
        refusal = self._cap_refusal(event)
        if refusal is not None:
            self._events.pop()
            self._typed.pop()
            self._has_basic = all(e.epsilon is not None for e in self._events)
            self._basic.restore(undo)
            self._cache.clear()
            raise BudgetExceededError(refusal)
        return event

    def _check_supported(self, event: PrivacyEvent, typed: DpEvent) -> None:
        names = self._applicable_names() if self._accountant == "best" else (self._accountant,)
        reasons = [(name, accountants.refusal(typed, name, neighbouring=self._neighbouring)) for name in names]
        if all(reason is not None for _, reason in reasons):
            name, reason = reasons[0]
            raise LedgerError(f"event {event.name!r} on scope {event.scope!r}: the {name} accountant refuses "
                              f"{reason}; choose another [budget] accountant")

    def _applicable_names(self) -> tuple[str, ...]:
        """Accountants this ledger can compute (every one but basic needs δ'')."""
        return accountants.ACCOUNTANTS if self._delta_slack is not None else ("basic",)

    def _record(self, event: PrivacyEvent, typed: DpEvent) -> None:
        self._events.append(event)
        self._typed.append(typed)
        if event.epsilon is None:
            self._has_basic = False
        else:
            self._basic.add(event.scope, event.effective_epsilon, event.effective_delta)
        self._cache.clear()

    def _fits(self, budget: Budget) -> bool:
        return not (self._over(budget.epsilon, self._epsilon_cap) or self._over(budget.delta, self._delta_cap))

    def _cap_refusal(self, event: PrivacyEvent) -> str | None:
        """Why the ledger as it stands (``event`` just recorded) is over a cap, or ``None``."""
        if self._epsilon_cap is None and self._delta_cap is None:
            return None
        if self._has_basic and self._fits(self._basic.total()):
            return None
        after = self.total()
        if self._fits(after):
            return None
        label = f"step {event.step!r}" if event.step else f"event {event.name!r}"
        where = (f"{label} ({event.mechanism} {event.name!r} on scope {event.scope!r}) would bring the "
                 f"run's {self._accountant} total")
        if self._over(after.epsilon, self._epsilon_cap):
            return (f"{where} ε to {after.epsilon:.12g}, over the cap of {self._epsilon_cap:.12g}; "
                    "lower the step's ε or raise [budget] epsilon in the spec")
        return (f"{where} δ to {after.delta:.12g}, over the cap of {self._delta_cap:.12g}; "
                "lower the step's δ (or use a pure-DP mechanism) or raise [budget] delta in the spec")

    def charge(
        self,
        *,
        name: str,
        mechanism: str,
        epsilon: float,
        delta: float = 0.0,
        sensitivity: float | None = None,
        noise_scale: float | None = None,
        scope: str = "data",
        step: str = "",
        sampling_rate: float | None = None,
        details: tuple[tuple[str, DetailValue], ...] = (),
    ) -> PrivacyEvent:
        """Build a :class:`PrivacyEvent` from the arguments and :meth:`spend` it."""
        return self.spend(
            PrivacyEvent(
                name=name,
                mechanism=mechanism,
                epsilon=epsilon,
                delta=delta,
                sensitivity=sensitivity,
                noise_scale=noise_scale,
                scope=scope,
                step=step,
                sampling_rate=sampling_rate,
                details=details,
            )
        )

    def record_private_selection(
        self,
        *,
        name: str,
        epsilon1: float,
        epsilon0: float,
        gamma: float = 0.0,
        steps: float = math.inf,
        delta1: float = 0.0,
        scope: str = "data",
        step: str = "",
    ) -> PrivacyEvent:
        """Charge one private-selection-with-a-known-threshold search as a single event.

        Args:
            name: what the search selects, e.g. ``"release_candidate"``.
            epsilon1: ε₁ of one iteration of the base mechanism (> 0, pure DP).
            epsilon0: ε₀ in [0, 1], the price of the iteration cap.
            gamma: γ in [0, 1], the per-failure probability of stopping with ⊥.
            steps: the iteration cap T, a positive integer or :data:`math.inf`.
            delta1: δ of the base mechanism; must be 0.
            scope: the data the search touched.
            step: the pipeline step that ran it.

        Returns:
            The recorded event: mechanism ``"private_selection_known_threshold"``, ε = 2ε₁+ε₀,
            details ``epsilon1``, ``epsilon0``, ``gamma``, ``steps`` (``"inf"`` when infinite).

        Raises:
            TypeError: an argument has the wrong kind of value.
            LedgerError: the parameters violate the theorem (the message names the minimum T).
            BudgetExceededError: the search would exceed the cap; nothing is recorded.

        Privacy:
            (2ε₁ + ε₀)-DP for the whole search, however many iterations run, when the base
            mechanism is ε₁-DP; same neighbouring relation as the base mechanism.

        References:
            Liu & Talwar (STOC 2019); Hod & Canetti, Theorem 3.
        """
        composition.validate_private_selection(steps=steps, gamma=gamma, epsilon0=epsilon0)
        epsilon = composition.private_selection_known_threshold(
            epsilon1=epsilon1, epsilon0=epsilon0, delta1=delta1
        )
        steps_detail: DetailValue = "inf" if steps == math.inf else int(steps)
        return self.charge(
            name=name,
            mechanism="private_selection_known_threshold",
            epsilon=epsilon,
            scope=scope,
            step=step,
            details=(
                ("epsilon1", float(epsilon1)),
                ("epsilon0", float(epsilon0)),
                ("gamma", float(gamma)),
                ("steps", steps_detail),
            ),
        )

    # --- planning and totals ----------------------------------------------------------------

    def check_plan(self, events: Sequence[PrivacyEvent]) -> Budget:
        """The total a fresh copy of this ledger reaches after spending ``events`` in order.

        Events already recorded here are not counted; ``self`` is not changed.

        Raises:
            TypeError: an item is not a :class:`PrivacyEvent`.
            LedgerError: the accountant cannot account for an event.
            BudgetExceededError: some event of the plan would exceed a cap.
        """
        trial = self.fresh()
        trial._replay(events)
        return trial.total()

    def preflight(self, plan: Sequence[PrivacyEvent], *,
                  partitions: Sequence[tuple[str, Sequence[str], PositionalSplit | None]] = ()) -> None:
        """Raise now unless ``plan`` fits on top of what is spent; ``self`` is not changed.

        The one "does this plan fit before anything is spent" check: the recorded events, then
        ``plan``, are composed on a fresh copy, so a mechanism of several steps is refused
        before its first release rather than part-way through. A plan that fits is remembered:
        spending exactly its events next, in order, needs no second check (every accountant's
        total only grows as events are added, so every prefix of a plan that fits fits too).

        Args:
            plan: the events about to be spent, in order.
            partitions: ``(parent, parts, split)`` of each positional partition the caller will
                declare before spending the plan (``split`` ``None``: drawn later, by position);
                they are checked against this ledger and counted in the trial.

        Raises:
            TypeError: an item is not a :class:`PrivacyEvent`.
            LedgerError: the accountant cannot account for an event of the plan, or this ledger
                would refuse a partition.
            BudgetExceededError: the plan does not fit (the message names the first step over).
        """
        trial = self.fresh()
        for parent, parts, split in partitions:
            self._check_partition(parent, parts, split=split, by_position=split is None)
            trial.declare_partition(parent, parts, split=split, by_position=split is None)
        trial._replay([*self._events, *plan])
        self._cleared = collections.deque(plan)

    def _replay(self, events: Sequence[PrivacyEvent]) -> None:
        """Spend ``events``: recorded together and checked once, or, when they do not fit, one by
        one so the error names the first step over a cap."""
        for event in events:
            if not isinstance(event, PrivacyEvent):
                raise TypeError(f"event ({event!r}) must be a PrivacyEvent")
        if self._accountant == "basic" or self._epsilon_cap is None and self._delta_cap is None:
            for event in events:
                self.spend(event)
            return
        self._cleared = collections.deque(events)
        try:
            for event in events:
                self.spend(event)
        finally:
            self._cleared.clear()
        if events and self._cap_refusal(events[-1]) is not None:
            replay = self.fresh()
            for event in events:
                replay.spend(event)  # raises at the first step over a cap

    def fresh(self) -> Ledger:
        """A ledger with the same caps, accountant, neighbouring relation and partitions, and no events."""
        copy = Ledger(
            epsilon_cap=self._epsilon_cap,
            delta_cap=self._delta_cap,
            accountant=self._accountant,
            delta_slack=self._delta_slack,
            neighbouring=self._neighbouring,
        )
        for (parent, parts), basis in zip(self._partitions, self._partition_basis, strict=True):
            copy._add_partition(parent, parts, basis)
        return copy

    def total(self, accountant: str | None = None) -> Budget:
        """The run's (ε, δ) under ``accountant`` (default: the enforced one).

        For the enforced accountant, when its δ exceeds the δ cap while the basic total fits
        both caps, the basic total is the run's guarantee and is returned. ``"best"`` is the
        smallest ε among the accountants that can account for every event, preferring those
        within the δ cap.

        Raises:
            LedgerError: unknown accountant, a missing ``delta_slack``, or an event the
                accountant cannot account for.
        """
        enforced = accountant is None
        accountant = self._accountant if accountant is None else accountant
        if accountant not in ACCOUNTANTS:
            raise LedgerError(f"accountant ({accountant!r}) must be one of {list(ACCOUNTANTS)}")
        if accountant != "basic" and self._delta_slack is None:
            raise LedgerError(f"delta_slack (None) must be set on the ledger for the {accountant} accountant")
        if accountant == "best":
            options = self.totals_by_accountant()
            within = {n: b for n, b in options.items() if not self._over(b.delta, self._delta_cap)}
            pool = within or options
            result = min(pool.values(), key=lambda b: (b.epsilon, b.delta))
        else:
            result = self._compose(accountant)
        if enforced and accountant != "basic" and self._has_basic and not self._fits(result):
            basic = self._basic.total()
            if self._fits(basic):
                return basic
        return result

    def totals_by_accountant(self) -> dict[str, Budget]:
        """The run's total under every accountant that can account for all its events (all of
        them need δ'' but ``"basic"``)."""
        out = {}
        for name in self._applicable_names():
            if all(accountants.refusal(t, name, neighbouring=self._neighbouring) is None for t in self._typed):
                try:
                    out[name] = self._compose(name)
                except LedgerError:  # e.g. a privacy-loss grid too large to build: not applicable here
                    if name == self._accountant:
                        raise
        return out

    def _compose(self, accountant: str) -> Budget:
        if accountant == "basic" and self._has_basic:
            return self._basic.total()
        cached = self._cache.get(accountant)
        if cached is not None and cached[0] == len(self._events):
            return cached[1]
        g = accountants.compose(self._scope_nodes(), accountant=accountant, delta_slack=self._delta_slack,
                                neighbouring=self._neighbouring, delta_cap=self._delta_cap)
        budget = Budget(g.epsilon, g.delta)
        self._cache[accountant] = (len(self._events), budget)
        return budget

    def largest_step_epsilon(self, epsilon: float, count: int) -> float:
        """The largest ε_step such that ``count`` equal Laplace steps compose to at most ``epsilon``
        under this ledger's accountant and δ'' (for ``"best"``, under whichever allows most).

        Raises:
            LedgerError: ``count`` < 1, or no step fits.
        """
        names = self._applicable_names() if self._accountant == "best" else (self._accountant,)
        return max(accountants.largest_step_epsilon(epsilon, count, accountant=name, delta_slack=self._delta_slack)
                   for name in names)

    def _scope_nodes(self) -> list[ScopeNode]:
        """The ledger as the accountants see it: top-level scopes, each with its events and its
        positional partitions (nested)."""
        by_scope: dict[str, list[int]] = {}
        for i, event in enumerate(self._events):
            by_scope.setdefault(event.scope, []).append(i)
        children: dict[str, list[tuple[str, ...]]] = {}
        for parent, parts in self._partitions:
            children.setdefault(parent, []).append(parts)
        is_part = {p for _, parts in self._partitions for p in parts}

        def node(scope: str) -> ScopeNode:
            own = by_scope.get(scope, [])
            basics = tuple(None if self._events[i].epsilon is None else
                           (self._events[i].effective_epsilon, self._events[i].effective_delta) for i in own)
            return ScopeNode(scope, tuple(self._typed[i] for i in own),
                             tuple(tuple(node(p) for p in parts) for parts in children.get(scope, [])),
                             basics)

        return [node(s) for s in dict.fromkeys([*by_scope, *children]) if s not in is_part]

    def _scope_names(self) -> set[str]:
        names = {e.scope for e in self._events}
        for parent, parts in self._partitions:
            names.add(parent)
            names.update(parts)
        return names

    @staticmethod
    def _over(value: float, cap: float | None) -> bool:
        return cap is not None and value > cap * (1.0 + CAP_RELATIVE_TOLERANCE)

    # --- serialization and display ----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Caps, accountant, partitions and events as JSON-ready data."""
        return {
            "epsilon_cap": self._epsilon_cap,
            "delta_cap": self._delta_cap,
            "accountant": self._accountant,
            "delta_slack": self._delta_slack,
            "neighbouring": self._neighbouring,
            "partitions": [{"parent": p, "parts": list(parts), "basis": basis}
                           for (p, parts), basis in zip(self._partitions, self._partition_basis, strict=True)],
            "events": [e.to_dict() for e in self._events],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON of :meth:`to_dict`; floats are written by ``repr`` and read back exactly."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ledger:
        """Rebuild a ledger from :meth:`to_dict` output, replaying partitions then events.

        Raises:
            TypeError: ``d`` or a part of it has the wrong kind of value.
            LedgerError: unknown or missing keys, or a malformed event or partition.
            BudgetExceededError: the recorded events exceed the recorded caps.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"ledger ({d!r}) must be a mapping")
        keys = ["epsilon_cap", "delta_cap", "accountant", "delta_slack", "partitions", "events"]
        unknown = sorted(set(d) - set(keys) - {"neighbouring"})
        if unknown:
            raise LedgerError(f"ledger keys ({unknown!r}) must be among {keys + ['neighbouring']}")
        missing = [k for k in keys if k not in d]
        if missing:
            raise LedgerError(f"ledger ({sorted(d)!r}) must have keys {missing}")
        ledger = cls(
            epsilon_cap=d["epsilon_cap"],
            delta_cap=d["delta_cap"],
            accountant=d["accountant"],
            delta_slack=d["delta_slack"],
            # Ledgers written before the relation was recorded were documented for add/remove.
            neighbouring=d.get("neighbouring", "add_remove"),
        )
        for partition in d["partitions"]:
            if not isinstance(partition, Mapping) or not {"parent", "parts"} <= set(partition) <= \
                    {"parent", "parts", "basis"}:
                raise LedgerError(f"partition ({partition!r}) must have keys parent, parts (and basis)")
            basis = partition.get("basis", "membership")
            if basis not in PARTITION_BASES:
                raise LedgerError(f"partition basis ({basis!r}) must be one of {list(PARTITION_BASES)}")
            # A recorded positional split is replayed by its basis: its positions are not kept.
            ledger.declare_partition(partition["parent"], partition["parts"], by_position=basis == "position")
        if not isinstance(d["events"], Sequence) or isinstance(d["events"], str):
            raise TypeError(f"events ({d['events']!r}) must be a list of events")
        ledger._replay([PrivacyEvent.from_dict(event) for event in d["events"]])
        return ledger

    @classmethod
    def from_json(cls, text: str) -> Ledger:
        """Inverse of :meth:`to_json`; see :meth:`from_dict`."""
        return cls.from_dict(json.loads(text))

    def render_table(self) -> str:
        """A fixed-width plain-text table of the events, the totals and the caps."""
        headers = [
            "#", "step", "name", "mechanism", "scope", "ε", "δ", "sensitivity", "noise scale",
            "effective ε",
        ]
        numeric = {0, 5, 6, 7, 8, 9}
        rows = [
            [
                str(i),
                e.step,
                e.name,
                e.mechanism,
                e.scope,
                _fmt(e.epsilon),
                _fmt(e.delta),
                _fmt(e.sensitivity),
                _fmt(e.noise_scale),
                _effective_cell(e),
            ]
            for i, e in enumerate(self._events, start=1)
        ]
        widths = [max(len(r[c]) for r in [headers, *rows]) for c in range(len(headers))]

        def line(cells: list[str]) -> str:
            return "  ".join(
                cell.rjust(w) if c in numeric else cell.ljust(w)
                for c, (cell, w) in enumerate(zip(cells, widths))
            ).rstrip()

        out = [line(headers), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in rows] or ["(no events)"]
        out += [f"#{i} sensitivity: {dict(e.details)[SENSITIVITY_NOTE]}"
                for i, e in enumerate(self._events, start=1) if SENSITIVITY_NOTE in dict(e.details)]
        out += [f"partition {p} ({basis}): {' | '.join(parts)}"
                for (p, parts), basis in zip(self._partitions, self._partition_basis, strict=True)]
        out += ["", "as typed events (how the accountants see the run):", *self._render_tree(), ""]
        for name, budget in self.totals_by_accountant().items():
            label = name if name == "basic" else f"{name}, δ''={self._delta_slack:.6g}"
            enforced = ", enforced" if name == self._accountant else ""
            out.append(
                f"total ({label}{enforced}): ε = {budget.epsilon:.6g}, δ = {budget.delta:.6g}"
            )
        eps_cap = "none" if self._epsilon_cap is None else f"{self._epsilon_cap:.6g}"
        delta_cap = "none" if self._delta_cap is None else f"{self._delta_cap:.6g}"
        out.append(f"cap: ε = {eps_cap}, δ = {delta_cap}")
        return "\n".join(out)

    def _render_tree(self) -> list[str]:
        """Scopes, their events' typed trees (consecutive events that print alike folded: equal
        to 6 significant digits, e.g. an ε split whose last share absorbed a rounding) and partitions."""
        def scope_lines(node: ScopeNode, indent: str) -> list[str]:
            lines = [f"{indent}scope {node.name}"]
            trees = [render_tree(event, indent + "  ") for event in node.events]
            i = 0
            while i < len(trees):
                j = i
                while j + 1 < len(trees) and trees[j + 1] == trees[i]:
                    j += 1
                tree = list(trees[i])
                if j > i:
                    tree[0] += f"  × {j - i + 1}"
                lines += tree
                i = j + 1
            for parts in node.partitions:
                lines.append(f"{indent}  parallel over {len(parts)} parts:")
                for part in parts:
                    lines += scope_lines(part, indent + "    ")
            return lines

        return [line for node in self._scope_nodes() for line in scope_lines(node, "  ")] or ["  (no events)"]

    # --- dunder -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._events)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ledger):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (
            f"Ledger(epsilon_cap={self._epsilon_cap!r}, delta_cap={self._delta_cap!r}, "
            f"accountant={self._accountant!r}, delta_slack={self._delta_slack!r}, "
            f"events={len(self._events)})"
        )


