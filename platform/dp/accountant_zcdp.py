"""The ``zcdp`` accountant: zero-concentrated DP (Bun & Steinke 2016).

ρ = Δ²/2σ² for (discrete) Gaussian noise, ε²/8 for an exponential-mechanism choice recorded as
bounded range (Cesar & Rogers 2021), and ε²/2 for any other pure ε-DP step (Bun & Steinke,
Propositions 1.4 and 1.6), summed, converted at δ'' (Canonne, Kamath & Steinke 2020, Corollary 13). Steps with a δ of
their own are added outside the curve by sequential composition. No amplification by
subsampling.
"""

from __future__ import annotations

import math

from privlab.platform.dp.accountant_base import CurveAccountant, register_accountant
from privlab.platform.dp.composition_tree import Alternative, basic_of, pure_epsilon
from privlab.platform.dp.dp_events import BoundedRangeEvent, DiscreteGaussianEvent, DpEvent, GaussianEvent, Subsampled
from privlab.platform.dp.zcdp_conversion import zcdp_to_epsilon

__all__ = ["ZcdpAccountant"]


@register_accountant
class ZcdpAccountant(CurveAccountant):
    name = "zcdp"

    def leaf_refusal(self, leaf: DpEvent) -> str | None:
        if isinstance(leaf, Subsampled):
            return f"{leaf.label()}: the zcdp accountant has no amplification by subsampling"
        return super().leaf_refusal(leaf)

    def alternative_guarantee(self, alt: Alternative, delta_slack: float) -> tuple[float, float] | None:
        rho: list[float] = []
        out_eps: list[float] = []
        out_dels: list[float] = []
        for leaf, count in alt.items():
            if isinstance(leaf, (GaussianEvent, DiscreteGaussianEvent, BoundedRangeEvent)):
                rho.append(count * leaf.rho)  # a bounded-range choice: ε²/8 (Cesar & Rogers 2021)
            elif (pure := pure_epsilon(leaf)) is not None:
                rho.append(count * pure * pure / 2.0)  # Bun & Steinke, Proposition 1.4
            else:
                eps, delta = basic_of(leaf)
                out_eps.append(count * eps)
                out_dels.append(count * delta)
        total_rho = math.fsum(rho)
        if total_rho == 0.0:
            return math.fsum(out_eps), math.fsum(out_dels)
        return zcdp_to_epsilon(total_rho, delta_slack) + math.fsum(out_eps), delta_slack + math.fsum(out_dels)
