"""The release's privacy guarantee: pure ε for PrivBayes-only shortlists, (ε, δ) with zCDP flows.

Two accountings, chosen by the shortlist, both settled before any data is read:

* **Pure ε** (every configuration's synthesizer is pure ε-DP, e.g. PrivBayes): each flow is
  ε₁-DP, private selection with a known threshold is (2ε₁ + ε₀)-DP (Liu & Talwar 2019; Hod &
  Canetti, Theorem 3) and the release is ``ε_count + 2ε₁ + ε₀``-DP, δ = 0
  (:attr:`~privlab.mechanisms.release.spec.ReleaseSpec.total_epsilon`). The spec has no
  ``delta``.
* **Rényi DP** (some configuration's synthesizer is budgeted in zCDP: MST, AIM). Such a flow is
  ρ-zCDP in its fit — ρ = the fit's ``rho_for(ε_generation, zcdp_delta)``, the largest ρ that
  converts to ε_generation at the flow settings' δ'' — composed with the pure ε_acceptance-DP
  criteria; a pure-ε configuration's flow is ε₁-DP. Each flow has the RDP curve
  ρλ + RR(ε, λ) (:func:`~privlab.platform.dp.selection_accounting.flow_event`), the base
  mechanism the largest of them, and the search — Algorithm 1 with γ > 0, T = ∞, ε₀ = 0 — is
  random stopping with a geometric number of runs: Papernot & Steinke (2022), Theorem 2 (the
  statement and why it applies: :mod:`privlab.platform.dp.selection_accounting`). The DP record
  count (a pure ε_count-DP step, randomized response's RDP curve) composes with it in RDP, and
  the sum is converted once, at the spec's ``delta``, by dp_accounting's conversion (Canonne,
  Kamath & Steinke 2020, Proposition 12). The release ledger is that of the ``rdp`` accountant
  with ``delta_slack = delta``, so the bundle's ledger states the same (ε, δ).

The δ'' at which a zCDP synthesizer reads its ε_generation only sets its ρ; it is not part of the
release's δ, which is the spec's ``delta`` alone.

Privacy:
    Replace-one neighbours with n public after the DP record count, as in
    :mod:`~privlab.mechanisms.release.run_release`. In the Rényi path a flow must stay within its
    event: its plan is checked at the DP record count before any flow runs (the synthesizer's
    steps within ρ, the criteria within ε_acceptance: :func:`check_flow_plans`); a zCDP flow's
    scratch ledger is capped at its whole zCDP budget, so an adaptive fit is stopped step by step;
    and each flow's spend is checked against its plan after it runs (:func:`renyi_base`).

References:
    Papernot & Steinke (ICLR 2022), Theorem 2; Liu & Talwar (STOC 2019); Hod & Canetti,
    Algorithm 1 and Theorem 3; Bun & Steinke (TCC 2016); Mironov (CSF 2017).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from privlab.mechanisms.release.flow import FlowConfiguration, FlowSettings
from privlab.mechanisms.release.shortlist import Shortlist
from privlab.mechanisms.release.spec import ReleaseSpec, check_budget, resolve_budget
from privlab.mechanisms.selection.private_selection import RenyiBase
from privlab.mechanisms.synthesizers.base import synthesizer_class
from privlab.mechanisms.synthesizers.zcdp import ZcdpSynthesizer
from privlab.platform.core.errors import BudgetExceededError, LedgerError, SpecError
from privlab.platform.dp import accountants
from privlab.platform.dp.dp_events import EpsilonDeltaEvent, RandomStoppingEvent
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import check_conforms, zcdp_cost
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.selection_accounting import PURE_STEPS_THEOREM, check_random_stopping, flow_event
from privlab.platform.dp.zcdp_conversion import zcdp_to_epsilon

__all__ = ["FlowBudget", "ReleaseGuarantee", "check_flow_plans", "flow_budget", "flow_budgets", "release_guarantee",
           "renyi_base", "uses_zcdp"]

RHO_ROUNDING_MARGIN = 1e-8
"""Relative margin added to a zCDP fit's ρ in its flow's event: the fit's steps sum to its ρ up
to float rounding (and the spend checks allow 1e-9 of it), and the event must bound what they spend."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlowBudget:
    """What one kind of flow may spend: a ρ-zCDP part and a pure ε-DP part.

    Attributes:
        synthesizers: the synthesizers of the shortlist with this budget.
        rho: ρ of the zCDP part (0 for a pure-ε synthesizer).
        epsilon: ε of the pure part (ε₁ for a pure-ε synthesizer, ε_acceptance otherwise).
    """

    synthesizers: tuple[str, ...]
    rho: float
    epsilon: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseGuarantee:
    """The release's (ε, δ) and how it was reached (public: from the spec and shortlist only).

    Attributes:
        epsilon: the total ε.
        delta: the δ (0 for the pure path).
        budget: the ε cap it was checked against.
        flows: each kind of flow's budget (empty for the pure path).
        selection_event: the search's ledger event in the Rényi path, else ``None``.
    """

    epsilon: float
    delta: float
    budget: float
    flows: tuple[FlowBudget, ...] = ()
    selection_event: RandomStoppingEvent | None = None

    @property
    def is_pure(self) -> bool:
        return self.selection_event is None

    def ledger(self) -> Ledger:
        """The release run's ledger: pure DP capped at the budget, or the rdp accountant at δ."""
        if self.is_pure:
            return Ledger(epsilon_cap=self.budget, delta_cap=0.0)
        return Ledger(epsilon_cap=self.budget, delta_cap=self.delta, accountant="rdp", delta_slack=self.delta)


def uses_zcdp(shortlist: Shortlist) -> bool:
    """Whether some configuration's synthesizer is budgeted in zCDP (MST, AIM)."""
    return any(_is_zcdp(c) for c in shortlist.configurations)


def _is_zcdp(configuration: FlowConfiguration) -> bool:
    return issubclass(synthesizer_class(configuration.synthesizer), ZcdpSynthesizer)


def flow_budget(configuration: FlowConfiguration, settings: FlowSettings) -> tuple[float, float]:
    """(ρ, ε) one flow on ``configuration`` may spend: a zCDP fit's ρ (the largest that converts to
    ε_generation at ``zcdp_delta``, plus :data:`RHO_ROUNDING_MARGIN`) and the criteria's ε; (0, ε₁)
    for a pure-ε synthesizer."""
    if not _is_zcdp(configuration):
        return 0.0, settings.epsilon_flow
    synthesizer = configuration.build_synthesizer()
    rho = synthesizer.rho_for(settings.epsilon_generation, settings.zcdp_delta)  # type: ignore[attr-defined]
    return rho * (1.0 + RHO_ROUNDING_MARGIN), settings.epsilon_acceptance


def flow_budgets(shortlist: Shortlist) -> tuple[FlowBudget, ...]:
    """Every distinct flow budget of the shortlist, with the synthesizers that have it."""
    names: dict[tuple[float, float], list[str]] = {}
    for configuration in shortlist.configurations:
        key = flow_budget(configuration, shortlist.settings)
        if configuration.synthesizer not in names.setdefault(key, []):
            names[key].append(configuration.synthesizer)
    return tuple(FlowBudget(synthesizers=tuple(v), rho=rho, epsilon=eps) for (rho, eps), v in names.items())


def release_guarantee(spec: ReleaseSpec, shortlist: Shortlist, budget: float | None) -> ReleaseGuarantee:
    """The release's (ε, δ), checked against the budget (``budget``, else the spec's), before any data is read.

    Raises:
        SpecError: no budget; ``delta`` given for a pure-ε shortlist, or missing (or not in
            (0, 1), refused when the spec is read) for a shortlist naming a zCDP synthesizer; a
            stopping rule the Rényi accounting does not cover; flow settings without
            ``zcdp_delta``.
        BudgetExceededError: the total ε exceeds the budget (nothing was read or written).
    """
    if not uses_zcdp(shortlist):
        if spec.delta is not None:
            raise SpecError(
                f"{spec.path}: delta ({spec.delta!r}) applies only when the shortlist names a synthesizer budgeted in "
                "zCDP (mst, aim); this shortlist's flows are pure ε-DP and the release is pure ε-DP (δ = 0): remove "
                "delta")
        return ReleaseGuarantee(epsilon=spec.total_epsilon, delta=0.0, budget=check_budget(spec, budget))
    zcdp = sorted({c.synthesizer for c in shortlist.configurations if _is_zcdp(c)})
    if spec.delta is None:
        raise SpecError(
            f"{spec.path}: the shortlist names {', '.join(zcdp)}, which measure with Gaussian noise (zCDP): the "
            "release is then (ε, δ)-DP, accounted in Rényi DP (Papernot & Steinke 2022). Declare its δ with "
            "delta = 1e-9 (say) at the top of the spec, and a random-stopping rule in [selection]: gamma = 0.05, "
            "steps = \"inf\", epsilon0 = 0. No data was read and no budget spent")
    s = spec.selection
    try:
        check_random_stopping(gamma=s.gamma, steps=s.steps, epsilon0=s.epsilon0)
    except LedgerError as error:
        raise SpecError(f"{spec.path}: [selection]: {error}") from None
    if shortlist.settings.zcdp_delta is None:
        raise SpecError(f"{shortlist.settings_path}: zcdp_delta is required when the shortlist names "
                        f"{', '.join(zcdp)} (the δ'' their epsilon_generation is read at)")
    cap = resolve_budget(spec, budget)
    flows = flow_budgets(shortlist)
    event = RandomStoppingEvent(tuple(flow_event(rho=f.rho, epsilon=f.epsilon) for f in flows), s.gamma)
    total = accountants.compose(
        [accountants.ScopeNode("data", (EpsilonDeltaEvent(spec.epsilon_count, 0.0, PURE_STEPS_THEOREM), event))],
        accountant="rdp", delta_slack=spec.delta, neighbouring="replace_one")
    if total.epsilon > cap:
        raise BudgetExceededError(
            f"the release spec {spec.path} needs total ε = {total.epsilon:.6g} at δ = {spec.delta:g} (record count "
            f"ε = {spec.epsilon_count:g}, then private selection by random stopping with γ = {s.gamma:g} over "
            f"{_describe(flows)}; Papernot & Steinke's Rényi-DP bound), more than the budget {cap:g}; nothing was "
            "read or written. Lower the spec's ε split, raise gamma or delta, or raise --budget")
    return ReleaseGuarantee(epsilon=total.epsilon, delta=spec.delta, budget=cap, flows=flows, selection_event=event)


def _describe(flows: Sequence[FlowBudget]) -> str:
    return "; ".join(f"{'/'.join(f.synthesizers)} flows (ρ = {f.rho:.6g} and ε = {f.epsilon:g})" for f in flows)


def _split(plan: list[PrivacyEvent], settings: FlowSettings, m: int) -> tuple[list[PrivacyEvent], list[PrivacyEvent]]:
    """A zCDP configuration's plan as (the synthesizer's fit, the criteria): the criteria come last."""
    criteria = [e for c in settings.criteria for e in c.planned_events(m)]
    return plan[:len(plan) - len(criteria)], plan[len(plan) - len(criteria):]


def _pure_step(event: PrivacyEvent) -> tuple[object, ...]:
    return event.name, event.epsilon, event.delta, event.scope, event.step, event.sampling_rate


def renyi_base(guarantee: ReleaseGuarantee, shortlist: Shortlist, *, plans: dict[int, list[PrivacyEvent]], m: int
               ) -> RenyiBase[FlowConfiguration]:
    """The base mechanisms of the Rényi path: each configuration's scratch ledger and spend check.

    ``plans`` holds every configuration's planned events at the DP record count (by index), as
    checked by :func:`check_flow_plans`.
    """
    settings = shortlist.settings
    index = {id(c): i for i, c in enumerate(shortlist.configurations)}

    def scratch(configuration: FlowConfiguration) -> Ledger:
        if not _is_zcdp(configuration):
            return Ledger(epsilon_cap=settings.epsilon_flow, delta_cap=0.0)
        # Capped at the flow's whole zCDP budget (its fit's ρ and ε²/2 per criterion), read at δ'' as
        # the ledger reads it: an adaptive fit (AIM's filter) is stopped step by step there; the
        # exact split (fit within ρ, criteria within ε) is checked after the flow.
        rho, _ = flow_budget(configuration, settings)
        total = rho + math.fsum(c.epsilon * c.epsilon / 2.0 for c in settings.criteria)
        return Ledger(epsilon_cap=zcdp_to_epsilon(total, settings.zcdp_delta), delta_cap=settings.zcdp_delta,
                      accountant="zcdp", delta_slack=settings.zcdp_delta)

    def check(configuration: FlowConfiguration, ledger: Ledger) -> None:
        if not _is_zcdp(configuration):
            return  # its scratch ledger is capped at ε₁ in pure DP, as in the pure path
        fit_plan, criteria_plan = _split(plans[index[id(configuration)]], settings, m)
        spent = ledger.events
        cut = len(spent) - len(criteria_plan)
        who = f"a {configuration.synthesizer} flow"
        check_conforms(spent[:max(cut, 0)], fit_plan, who=who, exact_sensitivity=False)
        # A criterion's noise scale follows public facts known at run time; its privacy is its ε.
        if cut < 0 or [_pure_step(e) for e in spent[cut:]] != [_pure_step(e) for e in criteria_plan]:
            raise LedgerError(f"{who} charged its criteria {[e.name for e in spent[max(cut, 0):]]} other than planned "
                              f"{[e.name for e in criteria_plan]} (or with another ε)")

    if guarantee.selection_event is None:
        raise ValueError("renyi_base needs the guarantee of a shortlist with zCDP flows")
    return RenyiBase(flow_events=guarantee.selection_event.events, scratch_ledger=scratch, check_spent=check)


def check_flow_plans(shortlist: Shortlist, plans: dict[int, list[PrivacyEvent]], *, m: int) -> None:
    """Every configuration's plan at the DP record count ``m`` stays within its flow's budget.

    A zCDP configuration's synthesizer steps must spend at most its ρ (each step's zCDP cost:
    Δ²/2σ² for Gaussian noise, ε²/2 for an exponential-mechanism choice) and its criteria at most
    ε_acceptance; a pure-ε configuration at most ε₁ (its plan on a scratch ledger capped there).

    Raises:
        BudgetExceededError: a plan exceeds its budget (the message names the configuration).
    """
    settings = shortlist.settings
    for i, configuration in enumerate(shortlist.configurations):
        plan = plans[i]
        if not _is_zcdp(configuration):
            Ledger(epsilon_cap=settings.epsilon_flow, delta_cap=0.0).check_plan(plan)
            continue
        rho, epsilon = flow_budget(configuration, settings)
        fit, criteria = _split(plan, settings, m)
        costs = [zcdp_cost(e) for e in fit]
        spent_rho = math.fsum(c for c in costs if c is not None)
        spent_eps = math.fsum(e.epsilon for e in criteria if e.epsilon is not None)
        if (any(c is None for c in costs) or any(e.epsilon is None or e.delta != 0.0 for e in criteria)
                or spent_rho > rho or spent_eps > epsilon * (1.0 + 1e-12)):
            raise BudgetExceededError(
                f"shortlist configuration {i + 1} ({configuration.as_dict()}) plans ρ = {spent_rho:.6g} for its fit "
                f"and ε = {spent_eps:.6g} for its criteria, more than its flow's ρ = {rho:.6g} and ε = {epsilon:g} "
                "(or a step zCDP cannot account for); no flow ran")

