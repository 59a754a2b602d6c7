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
from privlab.platform.dp.positional_split import NeighbouringRelation, PositionalSplit, SplitPlan, split_from_dict
from privlab.platform.dp.privacy_event import SENSITIVITY_NOTE, DetailValue, PrivacyEvent, ledger_text

__all__ = ["ACCOUNTANTS", "CAP_RELATIVE_TOLERANCE", "Ledger", "NeighbouringRelation"]

ACCOUNTANTS = accountants.SELECTABLE
"""Accountant names :class:`Ledger` accepts (:mod:`privlab.platform.dp.accountants`)."""
NEIGHBOURING = tuple(r.value for r in NeighbouringRelation)
"""Neighbouring relations a ledger's guarantee can be stated for (:class:`NeighbouringRelation`)."""

Split = PositionalSplit | SplitPlan
"""What a partition is declared with: the drawn split, or (in a plan) the kind to be drawn."""

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


def _split_label(split: Split) -> str:
    if isinstance(split, SplitPlan):
        return f"{split.kind} split, planned: each trial draws it"
    return f"{split.kind} split"


class Ledger:
    """A run's privacy events, caps, neighbouring relation and accountant.

    Composition semantics:

    * Events are grouped by ``scope`` (the data they touched); each is a typed event tree
      (:attr:`PrivacyEvent.typed`). Scopes that are not a declared part are top-level and
      compose sequentially with each other, which is conservative when they overlap.
    * :meth:`declare_partition` splits a scope into disjoint parts, with the
      :class:`~privlab.platform.dp.positional_split.PositionalSplit` that cut them (checked
      against the neighbouring relation, and recorded so it is redrawn when the ledger is read
      back). Each partition of a scope contributes the parallel composition of its parts (the
      worst part), computed recursively, so partitions nest; that composes sequentially with
      the scope's own events. A scope can have several partitions; they add up.
    * A partition declared with a :class:`~privlab.platform.dp.positional_split.SplitPlan` (the
      kind of split a trial will draw) makes the ledger a *plan* (:attr:`is_plan`): what a
      research configuration's trials will spend, each of which must declare the drawn split
      (:meth:`for_trial` gives their ledger; the runner checks them). A plan is never charged by
      an estimator's fit.
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
        neighbouring: the neighbouring relation the run's guarantee is stated for, a
            :class:`NeighbouringRelation` or its name: ``"replace_one"`` (the default: every
            privlab mechanism's sensitivities are derived for it, with n public) or
            ``"add_remove"``.

    Raises:
        TypeError: an argument has the wrong kind of value.
        LedgerError: an argument has a wrong value, or δ'' alone exceeds ``delta_cap``.

    Privacy:
        The totals bound the whole run's privacy loss under the ledger's neighbouring relation.
        Sequential, advanced and curve composition hold for both relations. Parallel composition
        holds only over a split the ledger holds and that supports it under the relation
        (:mod:`privlab.platform.dp.positional_split`: a permutation cut at sizes under
        replace-one, independent per-record draws under both); amplification by subsampling as
        computed holds for add/remove-one only. Every spend leaves the ledger either within its
        caps with the event recorded or unchanged with a refusal; what does not hold is refused
        (:class:`LedgerError`) instead of under-counted.

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
        neighbouring: NeighbouringRelation | str = NeighbouringRelation.REPLACE_ONE,
    ) -> None:
        neighbouring = NeighbouringRelation.parse(neighbouring)
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
        if accountants.needs_delta_slack(accountant):
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
        self._splits: list[Split] = []
        self._events: list[PrivacyEvent] = []
        self._basic = BasicTotals()
        self._typed: list[DpEvent] = []  # each event's typed tree, in order
        self._has_basic = True  # whether every event has a pure-ε (basic) guarantee
        self._viable = self._applicable_names()  # accountants that can account for every event
        self._cache: dict[str, tuple[int, Budget]] = {}  # accountant -> (events seen, total)
        self._cleared: collections.deque[PrivacyEvent] = collections.deque()  # a preflighted plan's rest
        self._cleared_shape: tuple[tuple[str, tuple[str, ...], str], ...] = ()  # the partitions it assumed

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
    def neighbouring(self) -> NeighbouringRelation:
        return self._neighbouring

    @property
    def partitions(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Declared partitions as ``(parent, parts)``, in declaration order."""
        return tuple(self._partitions)

    @property
    def is_plan(self) -> bool:
        """Whether a partition is only planned (a :class:`SplitPlan`): the ledger then records
        what trials will spend, each on a ledger of its own (:meth:`for_trial`) that declares
        the drawn split."""
        return any(isinstance(split, SplitPlan) for split in self._splits)

    def split_of(self, parent: str, parts: Sequence[str]) -> Split | None:
        """The split ``parent`` is declared split into ``parts`` with (in order), or ``None``."""
        for (p, ps), split in zip(self._partitions, self._splits, strict=True):
            if p == parent and ps == tuple(parts):
                return split
        return None

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """Recorded events, in order."""
        return tuple(self._events)

    # --- recording --------------------------------------------------------------------------

    def declare_partition(self, parent: str, parts: Sequence[str], *, split: Split | None = None,
                          by_position: bool = False) -> None:
        """Declare ``parts`` as disjoint subsets of scope ``parent``, cut by ``split`` (parallel composition).

        Args:
            parent: the scope split; it may have events, be a part itself, or be new.
            parts: at least two distinct new scope names (not yet used by any event or
                partition), one per part of ``split``, so a partition is declared before
                anything is spent on its parts.
            split: the :class:`~privlab.platform.dp.positional_split.PositionalSplit` that cut
                the parts (drawn from ``n`` and a random stream alone; recorded, and redrawn
                when the ledger is read back), or a
                :class:`~privlab.platform.dp.positional_split.SplitPlan` naming the kind a trial
                will draw, which makes this ledger a plan (:attr:`is_plan`).
            by_position: refused when true: a promise that parts were cut by position is not a
                split the ledger can check (kept so such a call gets a reason, not a silent
                acceptance).

        Raises:
            TypeError: a name is not a str, ``parts`` is not a sequence of names, or ``split``
                is not a split.
            LedgerError: no split, a split that does not support parallel composition under the
                ledger's relation (a permutation under add/remove), fewer than two parts,
                duplicates, a part name already in use, the partition declared twice, or a
                split with another number of parts.

        Privacy:
            See :mod:`privlab.platform.dp.positional_split` for why each kind of split
            composes in parallel under which relation, and why a split by values does not.
        """
        self._check_partition(parent, parts, split=split, by_position=by_position)
        self._add_partition(parent, tuple(parts), split)  # type: ignore[arg-type]

    def _check_partition(self, parent: str, parts: Sequence[str], *, split: Split | None,
                         by_position: bool = False) -> None:
        """Raise unless :meth:`declare_partition` may declare this partition here (its checks)."""
        ledger_text("parent", parent)
        if by_position is not False:
            raise LedgerError(
                f"partition of {parent!r}: by_position=True is not accepted: parallel composition needs the "
                "split that cut the parts, so the ledger can check it and redraw it; draw one with "
                "PositionalSplit.permuted(n, sizes, rng=...) (replace-one) or PositionalSplit.independent(n, parts, "
                "rng=...) (either relation) and pass split=..., or charge the parts sequentially (no partition)")
        if split is None:
            raise LedgerError(
                f"partition of {parent!r}: parallel composition needs the split that cut the parts (split=...), "
                "drawn from the record count and a random stream alone (PositionalSplit.permuted or .independent); "
                "a split by record values does not compose in parallel under replace-one neighbours, and a split "
                "the ledger cannot check is not accepted under either; charge the parts sequentially instead")
        if not isinstance(split, (PositionalSplit, SplitPlan)):
            raise TypeError(f"split ({split!r}) must be a PositionalSplit (drawn) or a SplitPlan (planned)")
        reason = split.refusal(self._neighbouring)
        if reason is not None:
            raise LedgerError(f"partition of {parent!r}: {reason}")
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
        if isinstance(split, PositionalSplit) and split.n_parts != len(parts):
            raise LedgerError(f"parts ({list(parts)!r}) must name one scope per part of the split "
                              f"({split.n_parts} parts)")
        if self.split_of(parent, parts) is not None:
            raise LedgerError(f"partition of {parent!r} into {list(parts)!r} is already declared; declare it once")
        known = self._scope_names()
        used = [p for p in parts if p in known]
        if used:
            raise LedgerError(
                f"parts ({used!r}) must be new scope names (not used by an event or an earlier "
                "partition); declare partitions before spending on their parts"
            )

    def has_partition(self, parent: str, parts: Sequence[str]) -> bool:
        """Whether ``parent`` is declared split into exactly ``parts`` (in order), drawn or planned."""
        return self.split_of(parent, parts) is not None

    def _add_partition(self, parent: str, parts: tuple[str, ...], split: Split) -> None:
        self._partitions.append((parent, parts))
        self._splits.append(split)
        self._basic.declare(parent, parts)
        self._cache.clear()

    def _partition_shape(self) -> tuple[tuple[str, tuple[str, ...], str], ...]:
        """The partitions as composition sees them: names and the kind of each split."""
        return tuple((p, ps, split.kind) for (p, ps), split in zip(self._partitions, self._splits, strict=True))

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
        if event.sampling_rate is not None and self._neighbouring != NeighbouringRelation.ADD_REMOVE:
            raise LedgerError(
                f"event {event.name!r}: amplification by subsampling does not hold as computed for "
                f"{self._neighbouring} neighbours; charge the step without sampling_rate, or state the "
                "guarantee for add/remove neighbours (neighbouring='add_remove')")
        typed = event.typed
        viable = self._viable_with(event, typed)
        # Cleared by preflight only while the ledger is as preflight composed it: the plan's next
        # event, on the partitions it assumed (a partition planned but not declared would
        # otherwise be composed in parallel without ever being declared).
        cleared = (bool(self._cleared) and self._cleared[0] == event
                   and self._partition_shape() == self._cleared_shape)
        undo = (self._basic.snapshot(event.scope), self._has_basic, self._viable)
        self._record(event, typed, viable)
        if cleared:  # preflight showed the whole plan fits; every prefix of it does too
            self._cleared.popleft()
            return event
        self._cleared.clear()
        try:
            refusal = self._cap_refusal(event)
        except BaseException:
            self._unrecord(undo)
            raise
        if refusal is not None:
            self._unrecord(undo)
            raise BudgetExceededError(refusal)
        return event

    def _viable_with(self, event: PrivacyEvent, typed: DpEvent) -> tuple[str, ...]:
        """The accountants that can account for every recorded event and ``event``; raise when the
        enforced one cannot (or, under ``"best"``, when none can)."""
        if self._accountant != "best":
            reason = accountants.refusal(typed, self._accountant, neighbouring=self._neighbouring)
            if reason is not None:
                raise LedgerError(f"event {event.name!r} on scope {event.scope!r}: the {self._accountant} accountant "
                                  f"refuses {reason}; choose another [budget] accountant")
        reasons = {name: accountants.refusal(typed, name, neighbouring=self._neighbouring) for name in self._viable}
        viable = tuple(name for name in self._viable if reasons[name] is None)
        if self._accountant == "best" and not viable:
            why = "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
            earlier = [n for n in self._applicable_names() if n not in self._viable]
            raise LedgerError(
                f"event {event.name!r} on scope {event.scope!r}: no accountant can account for this ledger with it "
                f"({why}{'; refused by an earlier event: ' + ', '.join(earlier) if earlier else ''}); "
                "choose an accountant that composes every step of the run")
        return viable

    def _unrecord(self, undo: tuple[Any, bool, tuple[str, ...]]) -> None:
        """Take back the event :meth:`_record` just added (a refusal leaves the ledger unchanged)."""
        snapshot, has_basic, viable = undo
        self._events.pop()
        self._typed.pop()
        self._has_basic = has_basic
        self._viable = viable
        self._basic.restore(snapshot)
        self._cache.clear()

    def _applicable_names(self) -> tuple[str, ...]:
        """Accountants this ledger can compute (every one but basic needs δ'')."""
        return tuple(name for name in accountants.ACCOUNTANTS
                     if self._delta_slack is not None or not accountants.needs_delta_slack(name))

    def _record(self, event: PrivacyEvent, typed: DpEvent, viable: tuple[str, ...]) -> None:
        self._events.append(event)
        self._typed.append(typed)
        self._viable = viable
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

    def check_plan(self, events: Sequence[PrivacyEvent], *,
                   partitions: Sequence[tuple[str, Sequence[str], Split]] = ()) -> Budget:
        """The total a fresh copy of this ledger reaches after declaring ``partitions`` and
        spending ``events`` in order.

        Events already recorded here are not counted; ``self`` is not changed.

        Raises:
            TypeError: an item is not a :class:`PrivacyEvent`.
            LedgerError: the accountant cannot account for an event, or a partition is refused.
            BudgetExceededError: some event of the plan would exceed a cap.
        """
        trial = self.fresh()
        for parent, parts, split in partitions:
            trial.declare_partition(parent, parts, split=split)
        trial._replay(events)
        return trial.total()

    def preflight(self, plan: Sequence[PrivacyEvent], *,
                  partitions: Sequence[tuple[str, Sequence[str], Split]] = ()) -> None:
        """Raise now unless ``plan`` fits on top of what is spent; ``self`` is not changed.

        The one "does this plan fit before anything is spent" check: the recorded events, then
        ``plan``, are composed on a fresh copy, so a mechanism of several steps is refused
        before its first release rather than part-way through. A plan that fits is remembered:
        spending exactly its events next, in order, on a ledger that by then holds exactly the
        partitions the preflight composed (the ones here declared), needs no second check (every
        accountant's total only grows as events are added, so every prefix of a plan that fits
        fits too). Any other spend is checked in full.

        Args:
            plan: the events about to be spent, in order.
            partitions: ``(parent, parts, split)`` of each partition the caller will declare
                before spending the plan: the drawn split, or a
                :class:`~privlab.platform.dp.positional_split.SplitPlan` of the kind it will
                draw after the preflight. They are checked against this ledger and counted in the
                trial.

        Raises:
            TypeError: an item is not a :class:`PrivacyEvent`.
            LedgerError: the accountant cannot account for an event of the plan, or this ledger
                would refuse a partition.
            BudgetExceededError: the plan does not fit (the message names the first step over).
        """
        self._cleared.clear()
        trial = self.fresh()
        for parent, parts, split in partitions:
            self._check_partition(parent, parts, split=split)
            trial.declare_partition(parent, parts, split=split)
        trial._replay([*self._events, *plan])
        self._cleared = collections.deque(plan)
        self._cleared_shape = trial._partition_shape()

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
        self._cleared_shape = self._partition_shape()
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
        """A ledger with the same caps, accountant, neighbouring relation and partitions (drawn and
        planned), and no events."""
        copy = self._empty_copy()
        for (parent, parts), split in zip(self._partitions, self._splits, strict=True):
            copy._add_partition(parent, parts, split)
        return copy

    def for_trial(self) -> Ledger:
        """The ledger one trial of this plan charges: same caps, accountant and relation, the
        drawn partitions, and none of the planned ones, which the trial declares with the split it
        draws (a trial that spends on a planned part without declaring it composes that part
        sequentially; the runner then refuses the trial)."""
        copy = self._empty_copy()
        for (parent, parts), split in zip(self._partitions, self._splits, strict=True):
            if isinstance(split, PositionalSplit):
                copy._add_partition(parent, parts, split)
        return copy

    def _empty_copy(self) -> Ledger:
        return Ledger(epsilon_cap=self._epsilon_cap, delta_cap=self._delta_cap, accountant=self._accountant,
                      delta_slack=self._delta_slack, neighbouring=self._neighbouring)

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
        if accountants.needs_delta_slack(accountant) and self._delta_slack is None:
            raise LedgerError(f"delta_slack (None) must be set on the ledger for the {accountant} accountant")
        if accountant == "best":
            options = self.totals_by_accountant()
            if not options:
                raise LedgerError(f"no accountant can compose this ledger's {len(self._events)} events together; "
                                  "choose an accountant that composes every step of the run")
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
            if name in self._viable:
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

    def to_dict(self, *, published: bool = False) -> dict[str, Any]:
        """Caps, accountant, partitions and events as JSON-ready data.

        ``published``: for a document released beside data, each drawn split is written by its
        kind only (its ``n`` and stream would disclose the record count); such a record cannot be
        read back (:meth:`from_dict` refuses it).
        """
        return {
            "epsilon_cap": self._epsilon_cap,
            "delta_cap": self._delta_cap,
            "accountant": self._accountant,
            "delta_slack": self._delta_slack,
            "neighbouring": self._neighbouring.value,
            "partitions": [{"parent": p, "parts": list(parts),
                            "split": split.public_dict() if published else split.to_dict()}
                           for (p, parts), split in zip(self._partitions, self._splits, strict=True)],
            "events": [e.to_dict() for e in self._events],
        }

    def to_json(self, indent: int | None = 2, *, published: bool = False) -> str:
        """Strict JSON of :meth:`to_dict`; floats are written by ``repr`` and read back exactly."""
        return json.dumps(self.to_dict(published=published), indent=indent, allow_nan=False, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ledger:
        """Rebuild a ledger from :meth:`to_dict` output, replaying partitions then events.

        Raises:
            TypeError: ``d`` or a part of it has the wrong kind of value.
            LedgerError: unknown or missing keys, a malformed event or partition, or a partition
                whose split cannot be redrawn or does not hold under the recorded relation.
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
        if not isinstance(d["partitions"], Sequence) or isinstance(d["partitions"], str):
            raise TypeError(f"partitions ({d['partitions']!r}) must be a list of partitions")
        for partition in d["partitions"]:
            if not isinstance(partition, Mapping) or set(partition) != {"parent", "parts", "split"}:
                raise LedgerError(
                    f"partition ({partition!r}) must have keys parent, parts and split: a partition is composed in "
                    "parallel only with the split that cut it, recorded so it can be redrawn (a partition recorded "
                    "by its basis alone, as privlab wrote before it checked splits, cannot be re-derived and is not "
                    "trusted)")
            ledger.declare_partition(partition["parent"], partition["parts"], split=split_from_dict(partition["split"]))
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
        out += [f"partition {p} ({_split_label(split)}): {' | '.join(parts)}"
                for (p, parts), split in zip(self._partitions, self._splits, strict=True)]
        out += ["", "as typed events (how the accountants see the run):", *self._render_tree(), ""]
        for name, budget in self.totals_by_accountant().items():
            label = f"{name}, δ''={self._delta_slack:.6g}" if accountants.needs_delta_slack(name) else name
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
            f"events={len(self._events)}{', plan' if self.is_plan else ''})"
        )


