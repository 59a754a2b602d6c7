"""The ``rdp`` accountant: Rényi DP (Mironov 2017), converted at δ'' by dp_accounting.

Each step's RDP curve on dp_accounting's orders, summed: Laplace and Gaussian exactly, a pure
ε-DP step by randomized response's curve (which dominates every ε-DP mechanism, Mironov 2017,
Proposition 10), a Poisson-subsampled Gaussian by dp_accounting, and private selection by random
stopping (``RandomStoppingEvent``: Papernot & Steinke 2022,
:mod:`privlab.platform.dp.selection_accounting`) — the only accountant that composes it. Steps
with a δ of their own and no curve are added outside the curve by sequential composition.
"""

from __future__ import annotations

import math

import numpy as np

from privlab.platform.dp import selection_accounting
from privlab.platform.dp.accountant_base import CurveAccountant, register_accountant
from privlab.platform.dp.composition_tree import Alternative, alternatives, basic_of, pure_epsilon
from privlab.platform.dp.dp_events import (
    DiscreteGaussianEvent,
    DpEvent,
    GaussianEvent,
    LaplaceEvent,
    RandomStoppingEvent,
    Subsampled,
)

__all__ = ["RDP_ORDERS", "RdpAccountant", "flow_rdp"]

RDP_ORDERS = np.array([1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
                      dtype=float)
"""dp_accounting's default Rényi orders."""


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
            rdp += count * selection_accounting.random_stopping_curve(leaf, RDP_ORDERS, flow_rdp=flow_rdp)
        elif isinstance(leaf, Subsampled):
            from dp_accounting import dp_event as dpe
            from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

            inner = leaf.event
            noise = dpe.GaussianDpEvent(inner.sigma / inner.sensitivity)  # type: ignore[attr-defined]
            accountant = rdp_module.RdpAccountant(list(RDP_ORDERS))
            accountant.compose(dpe.PoissonSampledDpEvent(leaf.rate, noise), count)
            rdp += np.asarray(accountant._rdp)  # noqa: SLF001 - the RDP curve dp_accounting computed
        elif (pure := pure_epsilon(leaf)) is not None:
            rdp += count * _pure_rdp(pure, RDP_ORDERS)
        else:
            eps, delta = basic_of(leaf)
            out_eps.append(count * eps)
            out_dels.append(count * delta)
    return rdp, math.fsum(out_eps), math.fsum(out_dels)


def flow_rdp(flow: DpEvent) -> np.ndarray | None:
    """A base mechanism's RDP curve on :data:`RDP_ORDERS` (its worst part choice), or ``None`` when a
    step has no curve of its own (an (ε, δ) guarantee, a subsampled or nested selection step)."""
    curve = np.zeros_like(RDP_ORDERS)
    for alt in alternatives(flow):
        if any(isinstance(step, (Subsampled, RandomStoppingEvent)) for step in alt):
            return None
        rdp, out_eps, out_delta = _rdp_and_outside(alt)
        if out_eps or out_delta:
            return None
        curve = np.maximum(curve, rdp)
    return curve


@register_accountant
class RdpAccountant(CurveAccountant):
    name = "rdp"

    def leaf_refusal(self, leaf: DpEvent) -> str | None:
        if isinstance(leaf, RandomStoppingEvent):
            return selection_accounting.refusal(leaf, self.name, flow_rdp=flow_rdp)
        if isinstance(leaf, Subsampled) and not isinstance(leaf.event, GaussianEvent):
            return f"{leaf.label()}: the rdp accountant amplifies subsampled Gaussian steps only"
        return None

    def alternative_guarantee(self, alt: Alternative, delta_slack: float) -> tuple[float, float] | None:
        from dp_accounting.rdp import rdp_privacy_accountant as rdp_module

        rdp, out_eps, out_delta = _rdp_and_outside(alt)
        if not rdp.any():
            return out_eps, out_delta
        eps, _ = rdp_module.compute_epsilon(RDP_ORDERS, rdp, delta_slack)
        return float(eps) + out_eps, delta_slack + out_delta
