"""Accountants: turn a ledger's typed events into one (ε, δ) guarantee.

The ledger hands an accountant its scopes (:class:`ScopeNode`: the events that touched one
part of the data, and the positional partitions of that part); the accountant returns the run's
(ε, δ) or refuses, with a :class:`~privlab.platform.core.errors.LedgerError` naming the event and
itself, an event it cannot account for.

=========  ===================================================================================
basic      Sequential composition (Dwork & Roth 3.16): the sums of each event's basic (ε, δ);
           parallel composition over a positional partition (McSherry 2009): the largest part.
advanced   Dwork & Roth 3.20 within each scope, with k = the number of the scope's leaf steps
           (a ``SelfComposed`` counts ``count`` times), ε = their largest ε, δ = their largest
           δ, plus δ'' once per scope; a scope keeps its basic total where that is no larger.
           Scopes add up and partitions take their largest part, as under ``basic``.
pld        Privacy-loss distributions (dp_accounting): the exact privacy curve of Laplace,
           Gaussian, discrete Laplace and discrete Gaussian noise, the dominating pair of a
           generic (ε, δ)-DP step for the rest, composed by convolution and read at δ''.
rdp        Rényi DP (Mironov 2017): each step's RDP curve on dp_accounting's orders (Laplace and
           Gaussian exactly; a pure ε-DP step by randomized response's curve, which dominates
           every ε-DP mechanism), summed, converted at δ'' by dp_accounting. The only one that
           composes private selection by random stopping (``RandomStoppingEvent``: Papernot &
           Steinke 2022, :mod:`privlab.platform.dp.selection_accounting`).
zcdp       Zero-concentrated DP (Bun & Steinke 2016): ρ = Δ²/2σ² for (discrete) Gaussian
           noise, ε²/8 for an exponential-mechanism choice (bounded range), ε²/2 for any other
           pure ε-DP step, summed, converted at δ'' (Canonne, Kamath & Steinke
           2020, Corollary 13).
=========  ===================================================================================

``pld``, ``rdp`` and ``zcdp`` read the composed curve at the ledger's δ'' (``delta_slack``).
Steps with a δ > 0 of their own that an accountant has no curve for (a guarantee proven
elsewhere, under ``rdp`` and ``zcdp``) are added outside the curve by sequential composition:
(ε_curve + Σε_i, δ'' + Σδ_i). Each of these three also keeps the basic guarantee where that is
no larger in ε (it is then at least as good in δ), so none of them ever reports more than
``basic``.

Parallel composition under a curve accountant: a neighbouring pair differs in one record, at
one position, so it touches one part of each positional partition. The run's guarantee is the
worst over the choices of one part per partition (the "alternatives"); each alternative is
composed exactly and the largest ε is reported. A partition into identical parts has one
alternative.

Privacy:
    Every total here is an upper bound on the run's privacy loss under the ledger's neighbouring
    relation, given that each event's sensitivity was derived for that relation. Subsampling
    amplification is computed for add/remove-one neighbours only; the ledger refuses it under
    replace-one before any accountant sees it.

References:
    Dwork & Roth (2014), Theorems 3.16 and 3.20; McSherry (SIGMOD 2009), Theorem 4; Mironov,
    "Rényi Differential Privacy" (CSF 2017), Propositions 3, 6 and 10; Bun & Steinke, "Concentrated
    Differential Privacy" (TCC 2016), Propositions 1.3, 1.4 and 1.6; Canonne, Kamath & Steinke,
    "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), Corollary 13; Meiser &
    Mohammadi (CCS 2018) and Google's dp_accounting for privacy-loss distributions.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privlab.platform.core.errors import LedgerError
from privlab.platform.dp import composition, selection_accounting
from privlab.platform.dp.dp_events import (
    Composed,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    EpsilonDeltaEvent,
    BoundedRangeEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    ParallelByPosition,
    PrivateSelectionEvent,
    RandomizedResponseEvent,
    RandomStoppingEvent,
    SelfComposed,
    Subsampled,
    basic_guarantee,
)
from privlab.platform.dp.zcdp_conversion import zcdp_to_epsilon

__all__ = [
    "ACCOUNTANTS",
    "CURVE_ACCOUNTANTS",
    "SELECTABLE",
    "Guarantee",
    "ScopeNode",
    "compose",
    "largest_step_epsilon",
    "pld_grid_points",
    "refusal",
]

ACCOUNTANTS = ("basic", "advanced", "pld", "rdp", "zcdp")
"""Every accountant, in the order the ledger reports them."""

CURVE_ACCOUNTANTS = ("pld", "rdp", "zcdp")
"""Accountants that read a composed privacy curve at δ'' (they need ``delta_slack``)."""

SELECTABLE = (*ACCOUNTANTS, "best")
"""What ``[budget] accountant`` may name; ``"best"`` enforces the smallest valid total."""

MAX_ALTERNATIVES = 4096
"""Most choices of one part per partition a curve accountant composes one by one."""

PLD_DISCRETIZATION = 1e-4
"""dp_accounting's value discretization interval (its default), used while every step's ε is at
most 1; above that, 1e-4 × the largest step ε (the error it adds stays 1e-4 of that step's ε per
step, and the privacy-loss grid stays small). Pessimistic rounding keeps every PLD result an
upper bound whatever the interval."""

PLD_MAX_POINTS = 2e6
"""The largest privacy-loss grid the PLD accountant builds (tens of MB, about a second to compose).
A choice of parts whose composition would span more keeps its basic guarantee (valid, and for so
many or so large steps close to what a PLD would give); one without a basic guarantee (Gaussian
noise) is refused."""

RDP_ORDERS = np.array([1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
                      dtype=float)
"""dp_accounting's default Rényi orders."""


@dataclass(frozen=True)
class Guarantee:
    """An (ε, δ) guarantee and the accountant that gave it."""

    epsilon: float
    delta: float
    accountant: str


@dataclass(frozen=True)
class ScopeNode:
    """One scope of a ledger: its events, in order, and its positional partitions, each a tuple
    of part scopes (which nest)."""

    name: str
    events: tuple[DpEvent, ...]
    partitions: tuple[tuple[ScopeNode, ...], ...] = ()
    basics: tuple[tuple[float, float] | None, ...] = ()
    """Each event's basic (ε, δ) as its record states it (the ledger's effective ε and δ, exact to
    the last bit); empty: :func:`~privlab.platform.dp.dp_events.basic_guarantee` of each event."""

    def basic_of(self, index: int) -> tuple[float, float]:
        if self.basics:
            g = self.basics[index]
        else:
            g = basic_guarantee(self.events[index])
        if g is None:  # pragma: no cover - refused before
            raise LedgerError(f"{self.events[index].label()} has no basic guarantee")
        return g

    def as_event(self) -> DpEvent | None:
        """The scope as one event tree (``None`` when nothing was spent on it)."""
        items: list[DpEvent] = list(self.events)
        for parts in self.partitions:
            trees = [p.as_event() for p in parts]
            spent = [t for t in trees if t is not None]
            if len(spent) == 1:
                items.append(spent[0])
            elif spent:
                items.append(ParallelByPosition(tuple(spent)))
        if not items:
            return None
        return items[0] if len(items) == 1 else Composed(tuple(items))


# --- support ------------------------------------------------------------------------------------


def _leaf_counts(event: DpEvent, times: int = 1) -> list[tuple[DpEvent, int]]:
    if isinstance(event, SelfComposed):
        return _leaf_counts(event.event, times * event.count)
    if event.children() and not isinstance(event, (Subsampled, RandomStoppingEvent)):
        return [pair for child in event.children() for pair in _leaf_counts(child, times)]
    return [(event, times)]


def pld_grid_points(events: Sequence[DpEvent]) -> float:
    """About how many points the composed privacy-loss distribution of ``events`` spans: each
    step widens it by its ε over the discretization interval (:data:`PLD_DISCRETIZATION`)."""
    pairs = [pair for event in events for pair in _leaf_counts(event)]
    epsilons = [(g[0] if (g := basic_guarantee(leaf)) is not None else 1.0, count) for leaf, count in pairs]
    if not epsilons:
        return 0.0
    interval = max(PLD_DISCRETIZATION, PLD_DISCRETIZATION * max(e for e, _ in epsilons))
    return math.fsum(count * e / interval for e, count in epsilons)


def refusal(event: DpEvent, accountant: str, *, neighbouring: str) -> str | None:
    """Why ``accountant`` cannot account for ``event`` (``None`` when it can)."""
    if (accountant == "pld" and basic_guarantee(event) is None
            and (points := pld_grid_points([event])) > PLD_MAX_POINTS):
        return (f"{event.label()}: its privacy-loss distribution would span about {points:.3g} points "
                f"(at most {PLD_MAX_POINTS:.0e}); use the rdp or zcdp accountant for it")
    for leaf, _ in _leaf_counts(event):
        if isinstance(leaf, RandomStoppingEvent) and (
                reason := selection_accounting.refusal(leaf, accountant, flow_rdp=_flow_rdp)) is not None:
            return reason
        if isinstance(leaf, Subsampled):
            if neighbouring != "add_remove":
                return (f"{leaf.label()}: amplification by subsampling does not hold as computed for "
                        f"{neighbouring} neighbours")
            if accountant in ("zcdp",):
                return f"{leaf.label()}: the {accountant} accountant has no amplification by subsampling"
            if accountant == "pld" and not isinstance(leaf.event, (LaplaceEvent, GaussianEvent)):
                return f"{leaf.label()}: the pld accountant amplifies subsampled Laplace and Gaussian steps only"
            if accountant == "rdp" and not isinstance(leaf.event, GaussianEvent):
                return f"{leaf.label()}: the rdp accountant amplifies subsampled Gaussian steps only"
            if accountant in ("basic", "advanced") and isinstance(leaf.event, (GaussianEvent, DiscreteGaussianEvent)):
                return f"{leaf.label()}: Gaussian noise has no pure-ε guarantee; use pld or rdp"
        if accountant in ("basic", "advanced") and isinstance(leaf, (GaussianEvent, DiscreteGaussianEvent)):
            return (f"{leaf.label()}: Gaussian noise has no pure-ε guarantee for the {accountant} accountant; "
                    "use pld, rdp or zcdp")
    return None


# --- basic and advanced -------------------------------------------------------------------------


def _basic(event: DpEvent) -> tuple[float, float]:
    g = basic_guarantee(event)
    if g is None:  # pragma: no cover - refused before
        raise LedgerError(f"{event.label()} has no basic guarantee")
    return g


def _basic_scope_terms(node: ScopeNode) -> tuple[list[float], list[float]]:
    eps = [node.basic_of(i)[0] for i in range(len(node.events))]
    dels = [node.basic_of(i)[1] for i in range(len(node.events))]
    for parts in node.partitions:
        pe, pd = composition.parallel([composition.sequential(*_basic_scope_terms(p)) for p in parts])
        eps.append(pe)
        dels.append(pd)
    return eps, dels


def _advanced_leaf_terms(event: DpEvent) -> list[tuple[float, float, int]]:
    """(ε, δ, count) of each leaf step for Theorem 3.20 (a parallel block or a subsample counts
    as one step with its basic guarantee)."""
    if isinstance(event, SelfComposed):
        return [(e, d, c * event.count) for e, d, c in _advanced_leaf_terms(event.event)]
    if isinstance(event, Composed):
        return [t for child in event.events for t in _advanced_leaf_terms(child)]
    e, d = _basic(event)
    return [(e, d, 1)]


def _advanced_scope_terms(node: ScopeNode, delta_slack: float) -> tuple[list[float], list[float]]:
    basic_eps = [node.basic_of(i)[0] for i in range(len(node.events))]
    basic_dels = [node.basic_of(i)[1] for i in range(len(node.events))]
    eps: list[float] = []
    dels: list[float] = []
    if node.events:
        leaves = [t for i, e in enumerate(node.events)
                  for t in (_advanced_leaf_terms(e) if isinstance(e, (SelfComposed, Composed))
                            else [(*node.basic_of(i), 1)])]
        adv_e, adv_d = composition.advanced(
            epsilon=max(e for e, _, _ in leaves), delta=max(d for _, d, _ in leaves),
            k=sum(c for _, _, c in leaves), delta_slack=delta_slack)
        if math.fsum(basic_eps) <= adv_e:  # basic dominates: no larger ε, smaller δ
            eps, dels = basic_eps, basic_dels
        else:
            eps, dels = [adv_e], [adv_d]
    for parts in node.partitions:
        pe, pd = composition.parallel([composition.sequential(*_advanced_scope_terms(p, delta_slack))
                                       for p in parts])
        eps.append(pe)
        dels.append(pd)
    return eps, dels


# --- curve accountants ----------------------------------------------------------------------------

Alternative = Counter  # leaf event -> how many times it runs


def _alternatives(event: DpEvent) -> list[Alternative]:
    """Every choice of one part per positional partition, as a multiset of leaf steps."""
    if isinstance(event, ParallelByPosition):
        out: dict[frozenset, Alternative] = {}
        for part in event.parts:
            for alt in _alternatives(part):
                out.setdefault(frozenset(alt.items()), alt)
        return list(out.values())
    if isinstance(event, Composed):
        combined: dict[frozenset, Alternative] = {}
        per_child = [_alternatives(child) for child in event.events]
        n = math.prod(len(a) for a in per_child)
        if n > MAX_ALTERNATIVES:
            raise LedgerError(f"{event.label()}: {n} choices of one part per partition exceed {MAX_ALTERNATIVES}; "
                              "use the basic or advanced accountant for this ledger")
        for combo in itertools.product(*per_child):
            alt: Alternative = Counter()
            for c in combo:
                alt.update(c)
            combined.setdefault(frozenset(alt.items()), alt)
        return list(combined.values())
    if isinstance(event, SelfComposed):
        inner = _alternatives(event.event)
        if len(inner) > 1:
            # The same split may be redrawn for each run, so a record can be in a different part each
            # time: compose the runs explicitly (Composed) to account for that.
            raise LedgerError(f"{event.label()}: a self-composed event over a parallel split is ambiguous; "
                              "compose its runs explicitly")
        return [Counter({leaf: count * event.count for leaf, count in inner[0].items()})]
    return [Counter({event: 1})]


def _alternative_basic(alt: Alternative) -> tuple[float, float] | None:
    terms = [basic_guarantee(leaf) for leaf in alt]
    if any(t is None for t in terms):
        return None
    return (math.fsum(c * t[0] for t, c in zip(terms, alt.values())),  # type: ignore[index]
            min(math.fsum(c * t[1] for t, c in zip(terms, alt.values())), 1.0))  # type: ignore[index]


def _pure_epsilon(leaf: DpEvent) -> float | None:
    if isinstance(leaf, (ExponentialEvent, BoundedRangeEvent, RandomizedResponseEvent, PrivateSelectionEvent,
                         LaplaceEvent, DiscreteLaplaceEvent)):
        return leaf.epsilon
    if isinstance(leaf, EpsilonDeltaEvent) and leaf.delta == 0.0:
        return leaf.epsilon
    return None


@functools.lru_cache(maxsize=512)
def _leaf_pld(leaf: DpEvent, interval: float):  # type: ignore[no-untyped-def]
    from dp_accounting.pld import common, privacy_loss_distribution as pld

    if isinstance(leaf, LaplaceEvent):
        return pld.from_laplace_mechanism(leaf.scale / leaf.sensitivity, value_discretization_interval=interval)
    if isinstance(leaf, GaussianEvent):
        return pld.from_gaussian_mechanism(leaf.sigma / leaf.sensitivity, value_discretization_interval=interval)
    if isinstance(leaf, DiscreteLaplaceEvent):
        return pld.from_discrete_laplace_mechanism(1.0 / leaf.scale, sensitivity=leaf.sensitivity,
                                                   value_discretization_interval=interval)
    if isinstance(leaf, DiscreteGaussianEvent):
        return pld.from_discrete_gaussian_mechanism(leaf.sigma, sensitivity=leaf.sensitivity,
                                                    value_discretization_interval=interval)
    if isinstance(leaf, Subsampled):
        inner = leaf.event
        if isinstance(inner, LaplaceEvent):
            return pld.from_laplace_mechanism(inner.scale / inner.sensitivity, sampling_prob=leaf.rate,
                                              value_discretization_interval=interval)
        return pld.from_gaussian_mechanism(inner.sigma / inner.sensitivity,  # type: ignore[attr-defined]
                                           sampling_prob=leaf.rate, value_discretization_interval=interval)
    eps, delta = _basic(leaf)
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta),
                                       value_discretization_interval=interval)


@functools.lru_cache(maxsize=1024)
def _leaf_pld_composed(leaf: DpEvent, count: int, interval: float):  # type: ignore[no-untyped-def]
    single = _leaf_pld(leaf, interval)
    return single if count == 1 else single.self_compose(count)


def _pld_interval(alt: Alternative) -> float:
    largest = max((g[0] for g in (basic_guarantee(leaf) for leaf in alt) if g is not None), default=0.0)
    return max(PLD_DISCRETIZATION, PLD_DISCRETIZATION * largest)


def _pld_epsilon(alt: Alternative, delta_slack: float) -> tuple[float, float]:
    total = None
    interval = _pld_interval(alt)
    for leaf, count in sorted(alt.items(), key=lambda item: repr(item[0])):
        piece = _leaf_pld_composed(leaf, count, interval)
        total = piece if total is None else total.compose(piece)
    return float(total.get_epsilon_for_delta(delta_slack)), delta_slack  # type: ignore[union-attr]


def _laplace_rdp(scale_over_sensitivity: float, orders: np.ndarray) -> np.ndarray:
    """Mironov (2017), Proposition 6: Laplace with b/Δ = λ has RDP
    (1/(α−1))·log(α/(2α−1)·e^((α−1)/λ) + (α−1)/(2α−1)·e^(−α/λ)) at order α > 1."""
    lam = scale_over_sensitivity
    a = orders
    logs = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) / lam, np.log((a - 1) / (2 * a - 1)) - a / lam)
    return logs / (a - 1)


def _pure_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP of randomized response at ε, which dominates every ε-DP mechanism (Mironov 2017,
    Proposition 10): (1/(α−1))·log((e^(αε) + e^(−(α−1)ε)) / (1 + e^ε)), capped at ε."""
    a = orders
    logs = np.logaddexp(a * epsilon, -(a - 1) * epsilon) - np.logaddexp(0.0, epsilon)
    return np.minimum(logs / (a - 1), epsilon)


def _rdp_and_outside(alt: Alternative) -> tuple[np.ndarray, float, float]:
    rdp = np.zeros_like(RDP_ORDERS)
    out_eps: list[float] = []
    out_dels: list[float] = []
    for leaf, count in alt.items():
        if isinstance(leaf, LaplaceEvent):
            rdp += count * _laplace_rdp(leaf.scale / leaf.sensitivity, RDP_ORDERS)
        elif isinstance(leaf, (GaussianEvent, DiscreteGaussianEvent)):
            rdp += count * leaf.rho * RDP_ORDERS
        elif isinstance(leaf, RandomStoppingEvent):
            rdp += count * selection_accounting.random_stopping_curve(leaf, RDP_ORDERS, flow_rdp=_flow_rdp)
        elif isinstance(leaf, Subsampled):
            from dp_accounting import dp_event as dpe
            from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

            inner = leaf.event
            noise = dpe.GaussianDpEvent(inner.sigma / inner.sensitivity)  # type: ignore[attr-defined]
            accountant = rdp_module.RdpAccountant(list(RDP_ORDERS))
            accountant.compose(dpe.PoissonSampledDpEvent(leaf.rate, noise), count)
            rdp += np.asarray(accountant._rdp)  # noqa: SLF001 - the RDP curve dp_accounting computed
        elif (pure := _pure_epsilon(leaf)) is not None:
            rdp += count * _pure_rdp(pure, RDP_ORDERS)
        else:
            eps, delta = _basic(leaf)
            out_eps.append(count * eps)
            out_dels.append(count * delta)
    return rdp, math.fsum(out_eps), math.fsum(out_dels)


def _flow_rdp(flow: DpEvent) -> np.ndarray | None:
    """A base mechanism's RDP curve on :data:`RDP_ORDERS` (its worst part choice), or ``None`` when a
    step has no curve of its own (an (ε, δ) guarantee, a subsampled or nested selection step)."""
    curve = np.zeros_like(RDP_ORDERS)
    for alt in _alternatives(flow):
        if any(isinstance(step, (Subsampled, RandomStoppingEvent)) for step in alt):
            return None
        rdp, out_eps, out_delta = _rdp_and_outside(alt)
        if out_eps or out_delta:
            return None
        curve = np.maximum(curve, rdp)
    return curve


def _rdp_epsilon(alt: Alternative, delta_slack: float) -> tuple[float, float]:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

    rdp, out_eps, out_delta = _rdp_and_outside(alt)
    if not rdp.any():
        return out_eps, out_delta
    eps, _ = rdp_module.compute_epsilon(RDP_ORDERS, rdp, delta_slack)
    return float(eps) + out_eps, delta_slack + out_delta


def _zcdp_epsilon(alt: Alternative, delta_slack: float) -> tuple[float, float]:
    rho: list[float] = []
    out_eps: list[float] = []
    out_dels: list[float] = []
    for leaf, count in alt.items():
        if isinstance(leaf, (GaussianEvent, DiscreteGaussianEvent, BoundedRangeEvent)):
            rho.append(count * leaf.rho)  # a bounded-range choice: ε²/8 (Cesar & Rogers 2021)
        elif (pure := _pure_epsilon(leaf)) is not None:
            rho.append(count * pure * pure / 2.0)  # Bun & Steinke, Proposition 1.4
        else:
            eps, delta = _basic(leaf)
            out_eps.append(count * eps)
            out_dels.append(count * delta)
    total_rho = math.fsum(rho)
    if total_rho == 0.0:
        return math.fsum(out_eps), math.fsum(out_dels)
    return zcdp_to_epsilon(total_rho, delta_slack) + math.fsum(out_eps), delta_slack + math.fsum(out_dels)


_CURVES = {"pld": _pld_epsilon, "rdp": _rdp_epsilon, "zcdp": _zcdp_epsilon}


# --- the one entry point ----------------------------------------------------------------------------


def _check(accountant: str, scopes: Sequence[ScopeNode], neighbouring: str, delta_slack: float | None) -> None:
    if accountant not in ACCOUNTANTS:
        raise LedgerError(f"accountant ({accountant!r}) must be one of {list(SELECTABLE)}")
    if accountant != "basic" and delta_slack is None:
        raise LedgerError(f"the {accountant} accountant needs delta_slack (δ'' at which it reads its bound); "
                          "set [budget] delta_slack in the spec")

    def walk(node: ScopeNode) -> None:
        for event in node.events:
            reason = refusal(event, accountant, neighbouring=neighbouring)
            if reason is not None:
                raise LedgerError(f"scope {node.name!r}: the {accountant} accountant refuses {reason}")
        for parts in node.partitions:
            for part in parts:
                walk(part)

    for scope in scopes:
        walk(scope)


def compose(scopes: Sequence[ScopeNode], *, accountant: str, delta_slack: float | None,
            neighbouring: str, delta_cap: float | None = None) -> Guarantee:
    """The run's (ε, δ) under ``accountant`` (module docstring).

    Args:
        scopes: the ledger's top-level scopes; they compose sequentially.
        accountant: one of :data:`ACCOUNTANTS`.
        delta_slack: δ'' (required by every accountant but ``basic``).
        neighbouring: the ledger's relation (refuses subsampling under replace-one).
        delta_cap: where a curve accountant's δ would exceed it, the basic guarantee is kept.

    Raises:
        LedgerError: an unknown accountant, a missing δ'', or an event the accountant cannot
            account for (the message names both).
    """
    _check(accountant, scopes, neighbouring, delta_slack)
    if accountant == "basic":
        eps: list[float] = []
        dels: list[float] = []
        for scope in scopes:
            e, d = _basic_scope_terms(scope)
            eps += e
            dels += d
        return Guarantee(*composition.sequential(eps, dels), accountant="basic")
    if accountant == "advanced":
        eps, dels = [], []
        for scope in scopes:
            e, d = _advanced_scope_terms(scope, delta_slack)  # type: ignore[arg-type]
            eps += e
            dels += d
        return Guarantee(*composition.sequential(eps, dels), accountant="advanced")
    trees = [t for t in (s.as_event() for s in scopes) if t is not None]
    if not trees:
        return Guarantee(0.0, 0.0, accountant)
    tree = trees[0] if len(trees) == 1 else Composed(tuple(trees))
    worst_eps, worst_delta = 0.0, 0.0
    for alt in _alternatives(tree):
        basic = _alternative_basic(alt)
        if accountant == "pld" and (points := pld_grid_points([SelfComposed(l, c) for l, c in alt.items()])) \
                > PLD_MAX_POINTS:
            if basic is None:
                raise LedgerError(f"the pld accountant refuses this ledger: its privacy-loss distribution would "
                                  f"span about {points:.3g} points (at most {PLD_MAX_POINTS:.0e}); use the rdp or "
                                  "zcdp accountant")
            worst_eps, worst_delta = max(worst_eps, basic[0]), max(worst_delta, basic[1])
            continue  # too large a grid to build: this part keeps its (valid) basic guarantee
        eps_a, delta_a = _CURVES[accountant](alt, delta_slack)  # type: ignore[arg-type]
        if basic is not None and (basic[0] <= eps_a or (delta_cap is not None and delta_a > delta_cap)):
            eps_a, delta_a = basic  # as good in ε and better in δ, or the only one within the δ cap
        worst_eps, worst_delta = max(worst_eps, eps_a), max(worst_delta, delta_a)
    return Guarantee(worst_eps, min(worst_delta, 1.0), accountant)


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
