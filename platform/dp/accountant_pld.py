"""The ``pld`` accountant: privacy-loss distributions (Meiser & Mohammadi 2018; dp_accounting).

The exact privacy curve of Laplace, Gaussian, discrete Laplace and discrete Gaussian noise
(subsampled Laplace and Gaussian under add/remove-one), the dominating pair of a generic (ε, δ)-DP
step for the rest, composed by convolution and read at δ''. Pessimistic rounding keeps every
result an upper bound whatever the discretization. A choice of parts whose grid would be too
large keeps its basic guarantee; one with no basic guarantee (Gaussian noise) is refused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from privlab.platform.dp.accountant_base import CurveAccountant, register_accountant
from privlab.platform.dp.composition_tree import Alternative, basic_of, leaf_counts
from privlab.platform.dp.dp_events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    GaussianEvent,
    LaplaceEvent,
    SelfComposed,
    Subsampled,
    basic_guarantee,
)

__all__ = ["PLD_DISCRETIZATION", "PLD_MAX_POINTS", "PldAccountant", "pld_grid_points"]

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


def pld_grid_points(events: Sequence[DpEvent]) -> float:
    """About how many points the composed privacy-loss distribution of ``events`` spans: each
    step widens it by its ε over the discretization interval (:data:`PLD_DISCRETIZATION`)."""
    pairs = [pair for event in events for pair in leaf_counts(event)]
    epsilons = [(g[0] if (g := basic_guarantee(leaf)) is not None else 1.0, count) for leaf, count in pairs]
    if not epsilons:
        return 0.0
    interval = max(PLD_DISCRETIZATION, PLD_DISCRETIZATION * max(e for e, _ in epsilons))
    return math.fsum(count * e / interval for e, count in epsilons)


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
    eps, delta = basic_of(leaf)
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta),
                                       value_discretization_interval=interval)


@functools.lru_cache(maxsize=1024)
def _leaf_pld_composed(leaf: DpEvent, count: int, interval: float):  # type: ignore[no-untyped-def]
    single = _leaf_pld(leaf, interval)
    return single if count == 1 else single.self_compose(count)


def _interval(alt: Alternative) -> float:
    largest = max((g[0] for g in (basic_guarantee(leaf) for leaf in alt) if g is not None), default=0.0)
    return max(PLD_DISCRETIZATION, PLD_DISCRETIZATION * largest)


@register_accountant
class PldAccountant(CurveAccountant):
    name = "pld"

    def event_refusal(self, event: DpEvent) -> str | None:
        if basic_guarantee(event) is None and (points := pld_grid_points([event])) > PLD_MAX_POINTS:
            return (f"{event.label()}: its privacy-loss distribution would span about {points:.3g} points "
                    f"(at most {PLD_MAX_POINTS:.0e}); use the rdp or zcdp accountant for it")
        return None

    def leaf_refusal(self, leaf: DpEvent) -> str | None:
        if isinstance(leaf, Subsampled) and not isinstance(leaf.event, (LaplaceEvent, GaussianEvent)):
            return f"{leaf.label()}: the pld accountant amplifies subsampled Laplace and Gaussian steps only"
        return super().leaf_refusal(leaf)

    def alternative_guarantee(self, alt: Alternative, delta_slack: float) -> tuple[float, float] | None:
        points = pld_grid_points([SelfComposed(leaf, count) for leaf, count in alt.items()])
        if points > PLD_MAX_POINTS:
            if any(basic_guarantee(leaf) is None for leaf in alt):
                from privlab.platform.core.errors import LedgerError

                raise LedgerError(f"the pld accountant refuses this ledger: its privacy-loss distribution would "
                                  f"span about {points:.3g} points (at most {PLD_MAX_POINTS:.0e}); use the rdp or "
                                  "zcdp accountant")
            return None  # too large a grid to build: this choice keeps its (valid) basic guarantee
        total = None
        interval = _interval(alt)
        for leaf, count in sorted(alt.items(), key=lambda item: repr(item[0])):
            piece = _leaf_pld_composed(leaf, count, interval)
            total = piece if total is None else total.compose(piece)
        return float(total.get_epsilon_for_delta(delta_slack)), delta_slack  # type: ignore[union-attr]
