"""The arithmetic of a discrete Bayesian network: parent configurations, count tables and
ancestral sampling. PrivBayes (:mod:`privlab.mechanisms.synthesizers.privbayes`) and the
plausible-deniability model (:mod:`privlab.mechanisms.plausible_deniability.model`) both use it;
what they learn and how they privatise it stays with them.

**Configurations.** A node with parents ``A₁ … A_k`` of sizes ``s₁ … s_k`` has one conditional
distribution per joint parent value. Joint values are numbered in mixed radix, the first parent
most significant and the last varying fastest::

    c(a₁, …, a_k) = ((a₁·s₂ + a₂)·s₃ + a₃)·… = Σ_j a_j · Π_{l>j} s_l,   0 ≤ c < Π_j s_j.

A node without parents has the one configuration 0. The parents' codes may be bucketised first
(the plausible-deniability model's ``bkt``); the sizes are then the buckets'.

**Count tables.** ``n[c, v]`` is the number of records with parent configuration ``c`` and value
``v``: one ``bincount`` of ``c·|X| + v``.

**Sampling.** With a row's cumulative table ``F[j] = Σ_{l≤j} p[l]`` and ``u`` uniform on
``[0, F[−1])``, the value is the first ``j`` with ``F[j] > u`` — the number of entries ``≤ u``
(``searchsorted(F, u, side="right")``), clipped to the last value so that rounding in ``F`` can
never index past it. A table whose rows sum to exactly 1 (``F[−1] = 1``) takes ``u`` on
``[0, 1)`` as drawn; one whose rows only sum to 1 up to rounding scales ``u`` by ``F[−1]``. Either
way this is post-processing of the released tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privlab.mechanisms.tabular.domain import CODE_DTYPE

__all__ = ["configuration_count", "configuration_index", "count_table", "cumulative_tables", "draw_values"]

_GATHER_ELEMENTS = 1 << 22  # table entries gathered per block when drawing many rows at once


def configuration_index(parent_codes: Sequence[np.ndarray], parent_sizes: Sequence[int],
                        shape: tuple[int, ...]) -> np.ndarray:
    """``c`` of every record (module docstring), as int64 of ``shape``.

    Args:
        parent_codes: Each parent's codes (already bucketised where buckets apply), each of
            ``shape``, in the order that fixes the numbering.
        parent_sizes: The parents' sizes (numbers of codes or buckets), in the same order.
        shape: The records' shape; a node without parents gives zeros of it.
    """
    index = np.zeros(shape, dtype=np.int64)
    for codes, size in zip(parent_codes, parent_sizes, strict=True):
        index *= size
        index += codes
    return index


def count_table(configurations: np.ndarray, values: np.ndarray, *, n_configurations: int,
                size: int) -> np.ndarray:
    """``n[c, v]``, shape ``(n_configurations, size)``, float64 (module docstring)."""
    cells = configurations * size + values
    return np.bincount(cells, minlength=n_configurations * size).reshape(n_configurations, size).astype(np.float64)


def cumulative_tables(tables: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Each conditional table's row-wise cumulative sums ``F``."""
    return tuple(np.cumsum(table, axis=1) for table in tables)


def draw_values(cdf: np.ndarray, rows: np.ndarray | None, u: np.ndarray, *, scale_by_total: bool) -> np.ndarray:
    """One value per uniform ``u``, from row ``rows[i]`` of the cumulative table ``cdf``.

    Args:
        cdf: Cumulative table, one row per configuration.
        rows: The configuration of each draw; ``None`` draws every value from row 0.
        u: Uniforms on ``[0, 1)``, one per draw.
        scale_by_total: Scale ``u`` by the row's total ``F[−1]`` (rows that sum to 1 only up to
            rounding); without it the rows must end in exactly 1.

    Returns:
        The values, of the tables' code dtype.
    """
    last = cdf.shape[1] - 1
    if rows is None:
        target = u * cdf[0, -1] if scale_by_total else u
        return np.minimum(np.searchsorted(cdf[0], target, side="right"), last).astype(CODE_DTYPE)
    out = np.empty(u.shape[0], dtype=CODE_DTYPE)
    block = max(1, _GATHER_ELEMENTS // cdf.shape[1])
    for start in range(0, u.shape[0], block):
        stop = start + block
        selected = cdf[rows[start:stop]]
        target = u[start:stop] * selected[:, -1] if scale_by_total else u[start:stop]
        out[start:stop] = np.minimum(np.count_nonzero(selected <= target[:, None], axis=1), last)
    return out


def configuration_count(sizes: Sequence[int]) -> int:
    """The number of parent configurations, ``Π_j s_j`` (1 without parents)."""
    return math.prod(sizes)
