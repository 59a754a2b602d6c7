"""The empirical trade-off curve of an audit against its claim's curve, as a PNG."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privlab.platform.audit.audit_statistics import TradeoffPoint, gdp_tradeoff


def tradeoff_png(points: Sequence[TradeoffPoint], *, title: str, claimed_mu: float | None, mu_lower: float,
                 epsilon: float | None = None, delta: float = 0.0) -> bytes:
    """FPR against FNR of every test of the audit (empirical, and its upper confidence corner),
    with the GDP curves ``G_μ`` of the claim and of the audit's lower bound, and the (ε, δ)
    region's boundary when ``epsilon`` is given. A point below a claimed curve (its corner too)
    would be a violation. Tests no better than chance (FPR + FNR ≥ 1, the reversed direction of
    an informative one) are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from privlab.platform.results.reports import figure_png

    alpha = np.linspace(1e-4, 1 - 1e-4, 400)
    figure, ax = plt.subplots(figsize=(4.6, 4.4))
    ax.plot(alpha, 1 - alpha, color="0.7", lw=0.8, label="no privacy loss")
    if claimed_mu is not None:
        ax.plot(alpha, gdp_tradeoff(alpha, claimed_mu), color="C3", lw=1.6, label=f"claim: G_μ, μ = {claimed_mu:.3g}")
    if mu_lower > 0:
        ax.plot(alpha, gdp_tradeoff(alpha, mu_lower), color="C0", lw=1.2, ls="--",
                label=f"audit: G_μ at the lower bound μ = {mu_lower:.3g}")
    if epsilon is not None:
        e = np.exp(epsilon)
        bound = np.maximum.reduce([np.zeros_like(alpha), 1 - delta - e * alpha, np.exp(-epsilon) * (1 - delta - alpha)])
        ax.plot(alpha, bound, color="C1", lw=1.0, ls=":", label=f"claim: (ε, δ) = ({epsilon:.3g}, {delta:.3g})")
    points = [p for p in points if p.fpr + p.fnr < 1.0]  # a test worse than chance constrains nothing
    fpr = np.array([p.fpr for p in points])
    fnr = np.array([p.fnr for p in points])
    ax.scatter(fpr, fnr, s=10, color="k", label="tests (empirical)", zorder=3)
    ax.scatter([p.fpr_upper for p in points], [p.fnr_upper for p in points], s=10, marker="x", color="C0",
               label="upper confidence corners", zorder=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("false-positive rate (type I)")
    ax.set_ylabel("false-negative rate (type II)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    png = figure_png(figure)
    plt.close(figure)
    return png
