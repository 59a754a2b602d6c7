"""A property check of the ledger against an oracle that shares none of its composition code.

Random ledgers (relation, accountant, δ'', caps), random splits (each kind, under each relation,
nested), random events (Laplace, Gaussian, discrete Gaussian, generic (ε, δ) steps, Laplace steps
run k times, subsampled Laplace and Gaussian steps), spent through every path a caller has
(``spend``, ``preflight`` then spending the plan with or without declaring the partitions it
assumed, ``from_dict`` of the result), are held to two properties:

* **A cap nothing bypasses**: every spend leaves the ledger either within its caps with the event
  recorded, or exactly as it was with a refusal (:class:`BudgetExceededError` or
  :class:`LedgerError`).
* **No total below the truth**: every total the ledger reports, (ε, δ) under each accountant it
  reports, is at least the oracle's ε at that δ. The oracle is dp_accounting's privacy-loss
  distribution of each event, built here from the event's own parameters with
  ``pessimistic_estimate=False`` (an *optimistic* discretisation, so a lower bound on the true
  privacy curve), composed by convolution; a partition whose split composes in parallel under the
  relation (the oracle's own rule) contributes its worst part, every choice of one part per
  partition composed exactly, and any other partition's parts compose sequentially. A generic (ε, δ) step is the worst (ε, δ)-DP pair
  (dp_accounting's ``from_privacy_parameters``), which no valid accountant may undercut.

``benchmarks/accounting.py`` runs it at 10⁴ ledgers and prints ``under_reporting_cases_found``;
``tests/test_ledger_property.py`` runs a bounded number in the default suite and 10⁴ in the slow
one.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privlab.platform.core.errors import BudgetExceededError, LedgerError
from privlab.platform.dp.dp_events import (
    Composed,
    DiscreteGaussianEvent,
    DpEvent,
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    SelfComposed,
    Subsampled,
)
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import NeighbouringRelation, PositionalSplit
from privlab.platform.dp.privacy_event import PrivacyEvent

__all__ = ["PropertyReport", "check_ledgers", "check_ledgers_in_processes", "merge_reports", "oracle_epsilon"]

ORACLE_INTERVAL = 1e-3
"""The oracle's privacy-loss discretisation; optimistic rounding keeps it a lower bound at any
interval."""

TOLERANCE = 1e-9
"""Relative slack on the comparison (float summation, not privacy)."""

ACCOUNTANT_CHOICES = ("basic", "advanced", "pld", "rdp", "zcdp", "best")


@dataclass
class PropertyReport:
    """What :func:`check_ledgers` found."""

    cases: int = 0
    spends: int = 0
    refusals: int = 0
    totals_checked: int = 0
    under_reporting: list[str] = field(default_factory=list)
    invariant_violations: list[str] = field(default_factory=list)

    @property
    def under_reporting_cases(self) -> int:
        return len(self.under_reporting)


# --- the oracle ----------------------------------------------------------------------------------


def _leaves(event: DpEvent, times: int = 1) -> list[tuple[DpEvent, int]]:
    if isinstance(event, SelfComposed):
        return _leaves(event.event, times * event.count)
    if isinstance(event, Composed):
        return [pair for child in event.events for pair in _leaves(child, times)]
    return [(event, times)]


@functools.lru_cache(maxsize=1024)
def _composed_pld(leaf: DpEvent, count: int):  # type: ignore[no-untyped-def]
    single = _leaf_pld(leaf)
    return single if count == 1 else single.self_compose(count)


@functools.lru_cache(maxsize=256)
def _leaf_pld(leaf: DpEvent):  # type: ignore[no-untyped-def]
    from dp_accounting.pld import common, privacy_loss_distribution as pld

    kw: dict[str, Any] = {"value_discretization_interval": ORACLE_INTERVAL, "pessimistic_estimate": False}
    connect = {"use_connect_dots": False}  # connect-the-dots has no optimistic estimate
    if isinstance(leaf, LaplaceEvent):
        return pld.from_laplace_mechanism(leaf.scale, sensitivity=leaf.sensitivity, **kw, **connect)
    if isinstance(leaf, GaussianEvent):
        return pld.from_gaussian_mechanism(leaf.sigma, sensitivity=leaf.sensitivity, **kw, **connect)
    if isinstance(leaf, DiscreteGaussianEvent):
        return pld.from_discrete_gaussian_mechanism(leaf.sigma, sensitivity=leaf.sensitivity, **kw)
    if isinstance(leaf, Subsampled) and isinstance(leaf.event, LaplaceEvent):
        return pld.from_laplace_mechanism(leaf.event.scale, sensitivity=leaf.event.sensitivity,
                                          sampling_prob=leaf.rate, **kw, **connect)
    if isinstance(leaf, Subsampled) and isinstance(leaf.event, GaussianEvent):
        return pld.from_gaussian_mechanism(leaf.event.sigma, sensitivity=leaf.event.sensitivity,
                                           sampling_prob=leaf.rate, **kw, **connect)
    if isinstance(leaf, EpsilonDeltaEvent):
        # The worst (ε', δ)-DP pair (losses ±ε' and +∞ with mass δ) at ε' = ε rounded down to the
        # grid: its losses lie on the grid, and the (ε, δ) pair dominates it, so it is a lower bound.
        k = int(np.floor(leaf.epsilon / ORACLE_INTERVAL))
        e = k * ORACLE_INTERVAL
        pmf = {k: (1 - leaf.delta) / (1 + np.exp(-e)), -k: (1 - leaf.delta) / (1 + np.exp(e))}
        return pld.PrivacyLossDistribution.create_from_rounded_probability(
            pmf, leaf.delta, ORACLE_INTERVAL, pessimistic_estimate=False)
    raise TypeError(f"the oracle has no privacy curve for {leaf.label()}")


def _composes_in_parallel(split: object, relation: NeighbouringRelation) -> bool:
    """The oracle's own rule (not the ledger's): a permutation cut at sizes is a parallel split
    under replace-one only; independent per-record draws under both; anything else is not, and
    its parts compose sequentially."""
    kind = getattr(split, "kind", None)
    return kind == "independent" or (kind == "permuted" and relation == NeighbouringRelation.REPLACE_ONE)


def _alternatives(ledger: Ledger) -> list[Counter]:
    """Every choice of one part per partition, as a multiset of leaf steps (the ledger's public
    state read directly: its events, scopes and partitions)."""
    by_scope: dict[str, list[DpEvent]] = {}
    for event in ledger.events:
        by_scope.setdefault(event.scope, []).append(event.typed)
    children: dict[str, list[tuple[str, ...]]] = {}
    for parent, parts in ledger.partitions:
        if _composes_in_parallel(ledger.split_of(parent, parts), ledger.neighbouring):
            children.setdefault(parent, []).append(parts)
    is_part = {p for parts_list in children.values() for parts in parts_list for p in parts}

    def scope(name: str) -> list[Counter]:
        own: Counter = Counter()
        for tree in by_scope.get(name, []):
            for leaf, count in _leaves(tree):
                own[leaf] += count
        options = [own]
        for parts in children.get(name, []):
            per_part = [alt for part in parts for alt in scope(part)]
            options = [a + b for a, b in itertools.product(options, per_part)]
        return options

    tops = [s for s in dict.fromkeys([*by_scope, *children]) if s not in is_part]
    combined = [Counter()]
    for top in tops:
        combined = [a + b for a, b in itertools.product(combined, scope(top))]
    return combined


def merge_reports(reports: list[PropertyReport]) -> PropertyReport:
    """One report of several ranges of cases."""
    merged = PropertyReport()
    for report in reports:
        merged.cases += report.cases
        merged.spends += report.spends
        merged.refusals += report.refusals
        merged.totals_checked += report.totals_checked
        merged.under_reporting += report.under_reporting
        merged.invariant_violations += report.invariant_violations
    return merged


def check_ledgers_in_processes(cases: int, *, seed: int = 0, processes: int = 2) -> PropertyReport:
    """:func:`check_ledgers` over ``cases`` split into ``processes`` ranges run side by side
    (the same cases, the same report, whatever the number of processes)."""
    from concurrent.futures import ProcessPoolExecutor

    bounds = np.linspace(0, cases, processes + 1).astype(int)
    with ProcessPoolExecutor(max_workers=processes) as pool:
        futures = [pool.submit(check_ledgers, int(b - a), seed=seed, first=int(a)) for a, b in zip(bounds, bounds[1:])]
        return merge_reports([f.result() for f in futures])


def oracle_epsilon(ledger: Ledger, delta: float) -> float:
    """A lower bound on the smallest ε for which the ledger's run is (ε, δ)-DP: the worst choice
    of parts, each composed by dp_accounting's optimistic privacy-loss distributions."""
    worst = 0.0
    for alt in _alternatives(ledger):
        total = None
        for leaf, count in sorted(alt.items(), key=lambda item: repr(item[0])):
            piece = _composed_pld(leaf, count)
            total = piece if total is None else total.compose(piece)
        if total is not None:
            # Composition moves tails below 1e-15 to the infinite loss: read the curve at δ + 1e-12
            # (ε(δ) only falls as δ grows, so this stays a lower bound).
            worst = max(worst, float(total.get_epsilon_for_delta(min(delta + 1e-12, 1.0))))
    return worst


# --- random ledgers -------------------------------------------------------------------------------


EPSILONS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
SIGMAS = (1.0, 2.0, 4.0)
RATES = (0.1, 0.3)
"""Parameters are drawn from small sets, so each curve is built once and cached (by the ledger's
accountants and by the oracle alike); the randomness that matters is in how steps, scopes,
splits, caps, accountants and spending paths combine."""


def _random_event(rng: np.random.Generator, scope: str, i: int) -> PrivacyEvent:
    kind = rng.choice(["laplace", "laplace_k", "gaussian", "discrete_gaussian", "epsilon_delta", "subsampled"],
                      p=[0.25, 0.15, 0.15, 0.1, 0.25, 0.1])
    name = f"e{i}"
    epsilon = float(rng.choice(EPSILONS))
    if kind == "laplace":
        sensitivity = float(rng.choice([1.0, 2.0]))
        return PrivacyEvent(name=name, mechanism="laplace", epsilon=epsilon, sensitivity=sensitivity,
                            noise_scale=sensitivity / epsilon, scope=scope)
    if kind == "laplace_k":
        leaf = LaplaceEvent(1.0, 1.0 / epsilon)
        return PrivacyEvent.from_dp_event(SelfComposed(leaf, int(rng.integers(2, 6))), name=name, scope=scope)
    if kind == "gaussian":
        return PrivacyEvent.from_dp_event(GaussianEvent(1.0, float(rng.choice(SIGMAS))), name=name, scope=scope)
    if kind == "discrete_gaussian":
        return PrivacyEvent.from_dp_event(DiscreteGaussianEvent(1, float(rng.choice(SIGMAS))), name=name, scope=scope)
    if kind == "epsilon_delta":
        return PrivacyEvent.from_dp_event(EpsilonDeltaEvent(epsilon, float(rng.choice([0.0, 1e-9, 1e-7])),
                                                            "a proven bound"), name=name, scope=scope)
    # Subsampling holds as computed under add/remove only; under replace-one the ledger must refuse it.
    rate = float(rng.choice(RATES))
    if rng.random() < 0.5:
        return PrivacyEvent(name=name, mechanism="laplace", epsilon=1.0, sensitivity=1.0, noise_scale=1.0,
                            scope=scope, sampling_rate=rate)
    return PrivacyEvent.from_dp_event(Subsampled(GaussianEvent(1.0, float(rng.choice(SIGMAS[1:]))), rate),
                                      name=name, scope=scope)


def _random_ledger(rng: np.random.Generator) -> Ledger:
    accountant = str(rng.choice(ACCOUNTANT_CHOICES))
    slack = None if accountant == "basic" and rng.random() < 0.5 else float(rng.choice([1e-6, 1e-9]))
    epsilon_cap = None if rng.random() < 0.25 else float(rng.uniform(0.5, 4.0))
    delta_cap = rng.choice([None, 0.0, 1e-5, 1e-3]) if slack is None else rng.choice([None, 1e-5, 1e-3])
    relation = NeighbouringRelation.ADD_REMOVE if rng.random() < 0.5 else NeighbouringRelation.REPLACE_ONE
    return Ledger(epsilon_cap=epsilon_cap, delta_cap=None if delta_cap is None else float(delta_cap),
                  accountant=accountant, delta_slack=slack, neighbouring=relation)


def _random_split(rng: np.random.Generator, parts: int) -> PositionalSplit:
    n = int(rng.integers(parts + 2, 40))
    if rng.random() < 0.5:
        sizes = [n // parts] * parts
        return PositionalSplit.permuted(n, sizes, rng=rng)
    return PositionalSplit.independent(n, parts, rng=rng)


# --- the check ---------------------------------------------------------------------------------


def _try(report: PropertyReport, ledger: Ledger, label: str, action: Any) -> bool:
    """Run ``action``; a refusal must leave the ledger as it was. Returns whether it succeeded."""
    before = ledger.to_dict()
    try:
        action()
    except (BudgetExceededError, LedgerError):
        report.refusals += 1
        if ledger.to_dict() != before:
            report.invariant_violations.append(f"{label}: a refusal changed the ledger")
        return False
    return True


def _check_caps(report: PropertyReport, ledger: Ledger, label: str) -> None:
    total = ledger.total()
    cap_e, cap_d = ledger.epsilon_cap, ledger.delta_cap
    over = (cap_e is not None and total.epsilon > cap_e * (1 + 1e-12)) or \
        (cap_d is not None and total.delta > cap_d * (1 + 1e-12))
    if over:
        report.invariant_violations.append(f"{label}: total {total} over the caps ({cap_e}, {cap_d})")


def _check_totals(report: PropertyReport, ledger: Ledger, label: str) -> None:
    if not ledger.events:
        return
    totals = dict(ledger.totals_by_accountant())
    totals["enforced"] = ledger.total()
    for name, budget in totals.items():
        if budget.delta >= 1.0:
            continue
        truth = oracle_epsilon(ledger, budget.delta)
        report.totals_checked += 1
        if budget.epsilon < truth * (1 - TOLERANCE) - TOLERANCE:
            report.under_reporting.append(f"{label}: {name} reports ε = {budget.epsilon!r} at δ = {budget.delta!r}; "
                                          f"the oracle's lower bound is {truth!r}")


def check_ledgers(cases: int, *, seed: int = 0, first: int = 0) -> PropertyReport:
    """Draw ``cases`` random ledgers and spending paths (case ``first`` onwards, each from its
    own stream ``[seed, case]``, so ranges can run apart and add up); check both properties."""
    report = PropertyReport()
    for case in range(first, first + cases):
        rng = np.random.default_rng([seed, case])
        ledger = _random_ledger(rng)
        label = f"case {case} ({ledger.accountant}, {ledger.neighbouring.value})"
        scopes = ["data", "other"]
        partitions = []
        for _ in range(int(rng.integers(0, 3))):
            parent = str(rng.choice(scopes))
            parts = tuple(f"{parent}/p{len(scopes)}_{k}" for k in range(int(rng.integers(2, 4))))
            split = _random_split(rng, len(parts))
            if _try(report, ledger, label, lambda: ledger.declare_partition(parent, parts, split=split)):
                scopes += parts
                partitions.append((parent, parts, split))
        events = [_random_event(rng, str(rng.choice(scopes)), i)
                  for i in range(int(rng.integers(1, 7)))]
        if rng.random() < 0.3:  # a preflighted plan on partitions declared only afterwards (or never)
            parent = str(rng.choice(["data", "other"]))
            parts = tuple(f"{parent}/late{k}" for k in range(2))
            split = _random_split(rng, 2)
            plan = [_random_event(rng, str(rng.choice(parts)), 100 + k) for k in range(3)]
            if _try(report, ledger, label, lambda: ledger.preflight(plan, partitions=[(parent, parts, split.plan)])):
                if rng.random() < 0.5:
                    _try(report, ledger, label, lambda: ledger.declare_partition(parent, parts, split=split))
                events = plan + events
        for event in events:
            report.spends += 1
            if _try(report, ledger, label, lambda: ledger.spend(event)):
                _check_caps(report, ledger, label)
        try:
            _check_totals(report, ledger, label)
            again = Ledger.from_dict(ledger.to_dict())
            if again.total() != ledger.total():
                report.invariant_violations.append(f"{label}: from_dict reports {again.total()} for {ledger.total()}")
        except LedgerError as error:  # a total the ledger cannot compute is a refusal, not a report
            if "no accountant can compose" not in str(error):
                report.invariant_violations.append(f"{label}: {error}")
        report.cases += 1
    return report

