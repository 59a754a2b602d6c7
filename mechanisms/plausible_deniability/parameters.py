"""DP parameter learning: noisy conditional counts and the Dirichlet estimator (Section 3.4).

For attribute i with parent set P (from :mod:`.structure`), a *configuration* c is a joint value
of the bucketised parents (bkt(x_j))_{j∈P}, indexed in mixed radix with the last parent
varying fastest (:func:`configuration_index`); there are #c = ∏_{j∈P} |bkt(x_j)| ≤ maxcost.

1. **Counts**: n^c_{i,l} = #records of D_P with configuration c and x_i = l, the whole
   (#c × |x_i|) table at once.
2. **Noise** (eq. 14): ñ^c_{i,l} = max(0, n^c_{i,l} + Lap(Δ/ε_step)) for every cell, **eagerly**
   for every configuration, with Δ = 2 (below). Negative noisy counts are set to 0 as in
   eq. (14); that is post-processing. A configuration whose noisy counts are all 0 falls back
   to the prior alone, which is why α must be > 0.
3. **Estimator**: ``"posterior_sample"`` draws p^c_i ~ Dir(α + ñ^c_i) (eq. 12; "this is what we
   do in our generative model") from a post-processing stream; ``"posterior_mean"`` takes
   p^c_{i,l} = (α + ñ^c_{i,l}) / Σ_l (α + ñ^c_{i,l}) (eq. 13). α is the same for every cell.

Privacy:
    Replace-one neighbours (n_P public): a replaced record leaves one cell of attribute i's
    table and enters one, so the table's L1 sensitivity is **2** (the paper's 1 is for
    add/remove-one, where a record only enters or leaves). One Laplace release per attribute,
    recorded in the ledger with Δ = 2 and scale 2/ε_step; the m releases compose with the
    entropies (:mod:`.accounting`). Steps 2's clamp and step 3 are post-processing.

    Order independence and release safety: every cell of every configuration is noised in one
    call, in the table's fixed order, so the result does not depend on the order in which
    synthesis meets configurations, and all DP noise comes from the source's own Laplace
    sampler (exact lattice Laplace and a transcript in release mode). The paper's tool learns
    configurations lazily and keys each one's noise by a hash of the configuration (Section
    5); such a keyed PRNG stream would be research-only (release sources refuse
    ``dp_generator``), and with maxcost bounding #c the eager table is small, so privlab does
    not provide the lazy variant.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3.4, eqs. (11)–(14), Section 3.4.1,
    Section 5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.plausible_deniability.structure import Bucketing
from privlab.mechanisms.tabular import bayesian_network
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = ["COUNT_SENSITIVITY", "ESTIMATORS", "conditional_tables", "configuration_index", "configuration_sizes"]

COUNT_SENSITIVITY = 2.0
"""L1 sensitivity of one attribute's count table under replace-one (module docstring)."""

ESTIMATORS = ("posterior_sample", "posterior_mean")


def configuration_sizes(parents: Sequence[int], bucketing: Bucketing) -> tuple[int, ...]:
    return tuple(bucketing.size(j) for j in parents)


def configuration_index(codes: np.ndarray, parents: Sequence[int], bucketing: Bucketing) -> np.ndarray:
    """Configuration index of each row of ``codes`` ((n, m) or (m,)) for ``parents``: the
    bucketised parents numbered by :func:`.bayesian_network.configuration_index`."""
    codes = np.asarray(codes)
    return bayesian_network.configuration_index([bucketing.maps[j][codes[..., j]] for j in parents],
                                                configuration_sizes(parents, bucketing), codes.shape[:-1])


def conditional_tables(
    codes: np.ndarray, *, sizes: Sequence[int], parents: Sequence[Sequence[int]], bucketing: Bucketing,
    epsilons: Sequence[float], alpha: float, estimator: str, source: RandomSource, ledger: Ledger,
    scope: str, names: Sequence[str],
) -> tuple[np.ndarray, ...]:
    """p_i[c, l] = Pr{x_i = l | configuration c} for every attribute (module docstring).

    Args:
        codes: D_P as an (n_P, m) int64 array of codes in domain order.
        sizes: |x_i| for each attribute.
        parents: Each attribute's parent indices (sorted).
        epsilons: ε_step of each attribute's release, in attribute order.
        alpha: Dirichlet prior α > 0 of every cell.
        estimator: One of :data:`ESTIMATORS`.

    Returns:
        One float64 array of shape (#c_i, |x_i|) per attribute, rows summing to 1.
    """
    dirichlet = source.generator(purpose="pd.dirichlet") if estimator == "posterior_sample" else None
    tables = []
    for i, (size, pa, eps) in enumerate(zip(sizes, parents, epsilons, strict=True)):
        counts = bayesian_network.count_table(
            configuration_index(codes, pa, bucketing), codes[:, i], size=size,
            n_configurations=bayesian_network.configuration_count(configuration_sizes(pa, bucketing)))
        noisy = laplace_mechanism(counts, sensitivity=COUNT_SENSITIVITY, epsilon=eps, source=source,
                                  ledger=ledger, name=f"pd.counts {names[i]}", scope=scope, step="pd.parameters")
        posterior = alpha + np.maximum(0.0, noisy)
        if dirichlet is None:
            table = posterior / posterior.sum(axis=1, keepdims=True)
        else:
            table = np.stack([dirichlet.dirichlet(row) for row in posterior])
        tables.append(np.ascontiguousarray(table, dtype=np.float64))
    return tuple(tables)
