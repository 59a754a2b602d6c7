"""Did a step spend what it planned: :func:`check_conforms`, and the zCDP filter a plan may name.

Workload trials and synthesizer fits declare their DP steps before they run (a plan); after, the
steps they charged must match it in everything accounting depends on. A release source may use a
planned mechanism's exact counterpart; an adaptive run of Gaussian steps (AIM's rounds) is planned
as one zCDP filter of budget ρ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from privlab.platform.core.errors import LedgerError
from privlab.platform.dp.dp_events import BoundedRangeEvent, DiscreteGaussianEvent, GaussianEvent
from privlab.platform.dp.privacy_event import PrivacyEvent

__all__ = ["RELEASE_COUNTERPART", "ZCDP_FILTER", "check_conforms", "zcdp_cost", "zcdp_filter_event"]

#: The release-mode counterpart of a research-mode mechanism (exact, floating-point safe).
RELEASE_COUNTERPART = {"laplace": "laplace_lattice", "exponential": "permute_and_flip", "gaussian": "discrete_gaussian",
                       "exponential_bounded_range": "exponential_rejection"}


ZCDP_FILTER = "zcdp_filter"
"""The mechanism name of a planned zCDP *filter*: a budget of ρ for a run of steps whose number
and sizes a mechanism chooses adaptively from its own DP outputs (AIM's rounds). Its details name
the steps' common ``prefix`` and the ``rho`` they may spend together; its typed event is a
Gaussian of that ρ, so a preflight counts the whole budget. Fully adaptive composition holds for
zCDP when the running total never exceeds ρ (a privacy filter: Whitehouse, Ramdas, Rogers & Wu
2023), which the ledger's cap enforces step by step and :func:`check_conforms` checks after."""


def zcdp_filter_event(*, prefix: str, rho: float, scope: str, step: str) -> PrivacyEvent:
    """The planned event of a zCDP filter of budget ``rho`` for the steps named ``prefix…``."""
    if not (isinstance(rho, float) and math.isfinite(rho) and rho > 0):
        raise LedgerError(f"rho ({rho!r}) must be a positive finite float")
    sigma = 1.0 / math.sqrt(2.0 * rho)
    return PrivacyEvent.from_dp_event(GaussianEvent(1.0, sigma), name=f"{prefix}*", mechanism=ZCDP_FILTER,
                                      scope=scope, step=step, sensitivity=1.0, noise_scale=sigma,
                                      details=(("prefix", prefix), ("rho", rho)))


def zcdp_cost(event: PrivacyEvent) -> float | None:
    """ρ of one step under the zcdp accountant: Δ²/2σ² for (discrete) Gaussian noise, ε²/8 for an
    exponential-mechanism choice recorded as bounded range (Cesar & Rogers 2021), ε²/2 for any other
    pure ε-DP step (Bun & Steinke 2016, Proposition 1.4); ``None`` for anything else."""
    typed = event.typed
    if isinstance(typed, (GaussianEvent, DiscreteGaussianEvent, BoundedRangeEvent)):
        return typed.rho
    if event.epsilon is not None and event.delta == 0.0 and event.sampling_rate is None:
        return event.epsilon * event.epsilon / 2.0
    return None


def check_conforms(spent: Sequence[PrivacyEvent], plan: Sequence[PrivacyEvent], *, who: str,
                   exact_sensitivity: bool) -> None:
    """The one "did it spend what it planned" check (workload trials, synthesizer fits).

    Each spent step must match its planned step in what accounting depends on — name, ε, δ,
    scope, pipeline step and sampling rate — and in mechanism, where a release source may use
    the planned mechanism's exact counterpart (:data:`RELEASE_COUNTERPART`) with a noise scale at
    least the planned one. With ``exact_sensitivity`` the sensitivity must equal the planned one
    (and, with the same mechanism, so must the noise scale); without it the plan may state a
    worst case that a public value known only at run time improves on.

    Raises:
        LedgerError: the spend differs from the plan (the message names ``who`` and both lists).
    """
    def matches(s: PrivacyEvent, p: PrivacyEvent) -> bool:
        if (s.name, s.epsilon, s.delta, s.scope, s.step, s.sampling_rate) != \
                (p.name, p.epsilon, p.delta, p.scope, p.step, p.sampling_rate):
            return False
        if s.mechanism == p.mechanism:
            return not exact_sensitivity or (s.sensitivity == p.sensitivity and s.noise_scale == p.noise_scale
                                             and s.details == p.details)
        if s.mechanism != RELEASE_COUNTERPART.get(p.mechanism):
            return False
        scales = s.noise_scale is not None and p.noise_scale is not None and s.noise_scale >= p.noise_scale
        return scales and (not exact_sensitivity or s.sensitivity == p.sensitivity)

    def refuse() -> None:
        raise LedgerError(f"{who} charged {len(spent)} DP step(s) {[e.name for e in spent]} but planned "
                          f"{[e.name for e in plan]}; it must charge exactly the steps it declares")

    if any(p.mechanism == ZCDP_FILTER for p in plan):
        position = 0
        for p in plan:
            if p.mechanism != ZCDP_FILTER:
                if position >= len(spent) or not matches(spent[position], p):
                    refuse()
                position += 1
                continue
            known = dict(p.details)
            prefix, budget = str(known["prefix"]), float(known["rho"])
            end = position
            while end < len(spent) and spent[end].name.startswith(prefix):
                end += 1
            costs = [zcdp_cost(e) for e in spent[position:end]]
            if (any(c is None for c in costs) or any((e.scope, e.step) != (p.scope, p.step) for e in spent[position:end])
                    or math.fsum(costs) > budget * (1.0 + 1e-9)):  # type: ignore[arg-type]
                raise LedgerError(f"{who}: the steps {prefix}… spent ρ = {math.fsum(c or 0.0 for c in costs)!r}, "
                                  f"more than their zCDP filter's {budget!r}, or a step zCDP cannot account for")
            position = end
        if position != len(spent):
            refuse()
        return
    if len(spent) != len(plan) or not all(matches(s, p) for s, p in zip(spent, plan, strict=False)):
        raise LedgerError(f"{who} charged {len(spent)} DP step(s) {[e.name for e in spent]} but planned "
                          f"{[e.name for e in plan]}; it must charge exactly the steps it declares")
