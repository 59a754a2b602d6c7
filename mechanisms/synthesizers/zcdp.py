"""Synthesizers whose budget is ρ-zCDP: Gaussian measurements and exponential-mechanism choices.

A :class:`ZcdpSynthesizer` is fitted with the same ``epsilon`` as every synthesizer, read as an
(ε, δ'') guarantee through the ledger's ``zcdp`` accountant: the fit spends the largest ρ whose
zCDP-to-DP conversion at the ledger's δ'' (``delta_slack``) is ε
(:func:`~privlab.platform.dp.zcdp_conversion.zcdp_rho_for_epsilon`; Canonne, Kamath & Steinke 2020,
Corollary 13). Its steps are declared in ρ (:meth:`ZcdpSynthesizer.zcdp_steps`): Gaussian
measurements with their own ρ and exponential-mechanism choices (:class:`SelectionStep`) at
ε = sqrt(8ρ): the exponential mechanism is ε-bounded range, hence ε²/8-zCDP (Cesar & Rogers 2021,
Lemma 3.2), the bound MST's and AIM's papers use, which the ledger's zcdp accountant applies to a
step recorded as bounded range (a generic ε-DP step costs ε²/2, Bun & Steinke 2016, Proposition
1.4); their ρ sum to the fit's ρ. A mechanism that chooses the number and size of some steps from its own DP
outputs (AIM's rounds) declares them as a :class:`ZcdpFilter`, a budget of ρ for the steps
named with its prefix (:data:`~privlab.platform.dp.plan_conformance.ZCDP_FILTER`).

A ledger whose accountant is not ``zcdp`` is refused before anything is spent: the basic and
advanced accountants cannot account for Gaussian noise, and the curve accountants (pld, rdp)
would compose the discrete Gaussian of a release with the continuous one's curve.

Privacy:
    Under replace-one neighbouring with ``n`` public a count vector's ℓ2 sensitivity is √2 (one
    cell −1, another +1), twice the ℓ2² of add/remove-one's 1, so a marginal measured with
    noise σ costs ρ = 2/(2σ²) = 1/σ²; an ℓ1 error ‖M(D) − M̂‖₁ has sensitivity 2. (Under
    add/remove-one, the relation of the MST and AIM papers and their reference code, these are 1
    and 1: the same noise buys half the ρ there, and a utility's choice a quarter; privlab's
    ledger is replace-one, so a replace-one guarantee at ρ needs these.) The steps
    compose sequentially in zCDP; adaptively sized steps under a filter whose running total never
    exceeds its ρ compose to that ρ (Whitehouse, Ramdas, Rogers & Wu 2023).

References:
    Bun & Steinke (2016), "Concentrated Differential Privacy", TCC; Canonne, Kamath & Steinke
    (2020), NeurIPS; Cesar & Rogers (2021), "Bounding, Concentrating, and Truncating: Unifying
    Privacy Loss Composition for Data Analytics", ALT, Lemma 3.2; McKenna, Miklau & Sheldon (2021), JPC 11(3), Section 4 (MST's budget in
    zCDP); McKenna, Mullins, Sheldon & Miklau (2022), VLDB, Section 4 (AIM's).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from privlab.mechanisms.basic.exponential import exponential_mechanism
from privlab.mechanisms.synthesizers.base import BudgetStep, Synthesizer
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import LedgerError, SpecError
from privlab.platform.core.validation import check_count, check_positive_finite, check_text
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import zcdp_filter_event
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource
from privlab.platform.dp.zcdp_conversion import zcdp_rho_for_epsilon

__all__ = ["COUNT_L1_SENSITIVITY", "COUNT_L2_SENSITIVITY", "SelectionStep", "ZcdpFilter", "ZcdpSynthesizer", "hyperparameter_count",
           "hyperparameter_positive", "selection_epsilon"]


def hyperparameter_count(label: str, value: object, minimum: int) -> int:
    """:func:`~privlab.platform.core.validation.check_count`, a wrong value being a spec's
    :class:`SpecError` (MST's and AIM's hyper-parameters come from specs)."""
    try:
        return check_count(label, value, minimum=minimum)
    except TypeError:
        raise
    except ValueError as error:
        raise SpecError(str(error)) from None


def hyperparameter_positive(label: str, value: object) -> float:
    """:func:`~privlab.platform.core.validation.check_positive_finite`, a wrong value being a :class:`SpecError`."""
    try:
        return check_positive_finite(label, value)
    except TypeError:
        raise
    except ValueError as error:
        raise SpecError(str(error)) from None

COUNT_L2_SENSITIVITY = math.sqrt(2.0)
"""ℓ2 sensitivity of a marginal's count vector under replace-one: one count −1, another +1."""

COUNT_L1_SENSITIVITY = 2.0
"""ℓ1 sensitivity of a marginal's count vector under replace-one, hence of ‖M(D) − M̂‖₁ for a
fixed (already released) M̂, by the triangle inequality."""


def selection_epsilon(rho: float) -> float:
    """ε of an exponential-mechanism choice given its ρ: sqrt(8ρ) (ε-bounded range is ε²/8-zCDP)."""
    return math.sqrt(8.0 * check_positive_finite("rho", rho))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelectionStep:
    """One exponential-mechanism choice at ``epsilon`` among candidates whose utilities have
    sensitivity ``sensitivity``, recorded as ε-bounded range: ρ = ε²/8.

    Research mode samples it by Gumbel-max, release mode by exact rejection sampling
    (:func:`~privlab.mechanisms.basic.exponential.exponential_mechanism` with ``bounded_range``).
    """

    name: str
    epsilon: float
    sensitivity: float

    mechanism: ClassVar[str] = "exponential_bounded_range"

    def __post_init__(self) -> None:
        check_text("name", self.name)
        for label in ("epsilon", "sensitivity"):
            object.__setattr__(self, label, check_positive_finite(label, getattr(self, label)))

    @property
    def noise_scale(self) -> float:
        """2Δ/ε: the utility scale of the exponential mechanism's weights exp(u/scale)."""
        return 2.0 * self.sensitivity / self.epsilon

    @property
    def zcdp_rho(self) -> float:
        return self.epsilon * self.epsilon / 8.0

    def event(self, *, scope: str, step: str) -> PrivacyEvent:
        """The event a research-mode run records for this step (bit-identical)."""
        return PrivacyEvent(name=self.name, mechanism=self.mechanism, epsilon=self.epsilon,
                            sensitivity=self.sensitivity, noise_scale=self.noise_scale, scope=scope, step=step)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZcdpFilter:
    """A budget of ``rho`` for the adaptively chosen steps named ``prefix…`` (AIM's rounds)."""

    prefix: str
    rho: float

    def __post_init__(self) -> None:
        check_text("prefix", self.prefix)
        object.__setattr__(self, "rho", check_positive_finite("rho", self.rho))

    @property
    def zcdp_rho(self) -> float:
        return self.rho

    def event(self, *, scope: str, step: str) -> PrivacyEvent:
        return zcdp_filter_event(prefix=self.prefix, rho=self.rho, scope=scope, step=step)


Step = BudgetStep | SelectionStep | ZcdpFilter


class ZcdpSynthesizer(Synthesizer):
    """A :class:`Synthesizer` budgeted in ρ-zCDP (module docstring).

    Subclasses implement :meth:`zcdp_steps`, ``_fit`` and ``_sample``; ``fit`` passes them
    the declared steps in order.

    Fitted attributes (beyond :class:`Synthesizer`'s): ``rho_`` (the ρ spent) and
    ``delta_`` (the δ'' it was converted at).
    """

    def zcdp_steps(self, rho: float, domain: Domain, n: int) -> tuple[Step, ...]:
        """The DP steps of a fit with budget ``rho``, from public inputs only; their ρ sum to
        ``rho`` (to rounding).

        Raises:
            SchemaError: the domain or ``n`` cannot be handled (the message says why).
        """
        raise NotImplementedError

    def budget_steps(self, epsilon: float, domain: Domain, n: int) -> tuple[BudgetStep, ...]:
        raise LedgerError(
            f"{self.name} is budgeted in zCDP: its steps depend on the δ'' its ε is read at; call "
            "planned_events(epsilon, domain, n, delta=...) or fit with a zcdp ledger")

    def rho_for(self, epsilon: float, delta: float) -> float:
        """The ρ a fit with ``epsilon`` spends when read at δ'' = ``delta``."""
        return zcdp_rho_for_epsilon(check_positive_finite("epsilon", epsilon), delta)

    def _zcdp_validated(self, rho: float, domain: Domain, n: int) -> tuple[Step, ...]:
        steps = tuple(self.zcdp_steps(rho, domain, n))
        if not steps:
            raise LedgerError(f"{self.name}: zcdp_steps returned no DP step for rho {rho!r}")
        total = math.fsum(step.zcdp_rho for step in steps)
        if abs(total - rho) > 1e-9 * rho:
            raise LedgerError(f"{self.name}: the declared steps spend ρ = {total!r}, not {rho!r}")
        return steps

    def planned_events(  # type: ignore[override]
        self, epsilon: float, domain: Domain, n: int, *, scope: str = "data", delta: float | None = None
    ) -> list[PrivacyEvent]:
        """The events a research-mode fit records, for ``epsilon`` read at δ'' = ``delta``.

        Raises:
            LedgerError: ``delta`` is missing.
            SchemaError: the synthesizer cannot handle this domain or ``n``.
        """
        epsilon, n, scope = self._plan_arguments(epsilon, domain, n, scope)
        if delta is None:
            raise LedgerError(f"{self.name} is budgeted in zCDP: give the δ'' its ε is read at (delta=...)")
        steps = self._zcdp_validated(self.rho_for(epsilon, delta), domain, n)
        return [step.event(scope=scope, step=self._ledger_step) for step in steps]

    def _fit_steps(self, epsilon: float, domain: Domain, n: int, *, ledger: Ledger) -> tuple[BudgetStep, ...]:
        if ledger.accountant != "zcdp" or ledger.delta_slack is None:
            raise LedgerError(
                f"{self.name} measures with Gaussian noise and is budgeted in zCDP; its ledger's accountant is "
                f"{ledger.accountant!r}: use [budget] accountant = \"zcdp\" with delta_slack (δ'') and a delta cap "
                "at least delta_slack")
        if ledger.neighbouring != "replace_one":
            raise LedgerError(
                f"{self.name}'s guarantee is for replace-one neighbours with the record count n public (its "
                f"sensitivities are replace-one's and its model's total is n); the ledger states "
                f"{ledger.neighbouring!r}: use neighbouring = \"replace_one\"")
        rho = self.rho_for(epsilon, ledger.delta_slack)
        self._read_at = ledger.delta_slack
        return self._zcdp_validated(rho, domain, n)  # type: ignore[return-value]

    def _select(self, step: SelectionStep, utilities: np.ndarray, *, ledger: Ledger, source: RandomSource,
                scope: str) -> int:
        """The candidate a declared :class:`SelectionStep` chooses (charges the ledger first)."""
        if not isinstance(step, SelectionStep):
            raise LedgerError(f"{self.name}: step {step!r} is not a bounded-range selection step")
        return exponential_mechanism(utilities, sensitivity=step.sensitivity, epsilon=step.epsilon, source=source,
                                     ledger=ledger, name=step.name, scope=scope, step=self._ledger_step,
                                     bounded_range=True)

    def _record_budget(self, steps: tuple[Step, ...]) -> None:
        """Set ``rho_`` and ``delta_`` (call from ``_fit``)."""
        self.rho_ = math.fsum(step.zcdp_rho for step in steps)
        self.delta_ = self._read_at
