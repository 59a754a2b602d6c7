"""Total variation distance of single attributes and of pairs (Section 6.2, Figures 3–4).

For two tables A and B of integer codes over the same public domain, the distance of
attribute j is the total variation ("statistical") distance of the empirical distributions

    TV_j(A, B) = ½ Σ_v |A_j(v) − B_j(v)|,   A_j(v) = #{r ∈ A : r_j = v} / |A|,

and of a pair j < k the same over the joint value (v, w), encoded as the single code
v·|x_k| + w so that one :func:`numpy.bincount` gives the whole joint histogram. The paper
compares reals, marginals and synthetics each against (other) reals and draws the distances
of all attributes (Figure 3) and of all pairs (Figure 4) as box plots; :func:`tvd_summary`
gives the numbers such a box plot shows.

Privacy:
    Not a DP step (an evaluation of released data against held-out reals).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 6.2, Figures 3 and 4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.evaluation_data import check_sizes, coded_table
from privlab.platform.core.errors import SchemaError

__all__ = ["PairwiseTVD", "attribute_tvd", "pairwise_tvd", "tvd_summary", "tvd_table"]


class PairwiseTVD(NamedTuple):
    """The distance of every pair of attributes.

    Attributes:
        pairs: ``(P, 2)`` int array of attribute indices ``(j, k)``, ``j < k``, in
            lexicographic order (P = m(m − 1)/2).
        tvd: ``(P,)`` float array, the distance of each pair.
    """

    pairs: np.ndarray
    tvd: np.ndarray


def _two_tables(first: np.ndarray | pd.DataFrame, second: np.ndarray | pd.DataFrame,
                sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    sizes = check_sizes(sizes)
    a = coded_table(first, sizes, name="first")
    b = coded_table(second, sizes, name="second")
    for name, table in (("first", a), ("second", b)):
        if len(table) == 0:
            raise SchemaError(f"{name} (0 records) must hold at least one record")
    return a, b, sizes


def _distance(a: np.ndarray, b: np.ndarray, cells: int) -> float:
    p = np.bincount(a, minlength=cells) / len(a)
    q = np.bincount(b, minlength=cells) / len(b)
    return 0.5 * float(np.abs(p - q).sum())


def attribute_tvd(first: np.ndarray | pd.DataFrame, second: np.ndarray | pd.DataFrame,
                  sizes: Sequence[int]) -> np.ndarray:
    """TV distance of each attribute's empirical distribution in two tables.

    Args:
        first, second: ``(n₁, m)`` and ``(n₂, m)`` integer codes (sizes may differ).
        sizes: The public number of categories of each attribute.

    Returns:
        ``(m,)`` float array in [0, 1].

    Raises:
        SchemaError: a table is empty, not over ``sizes``, or the column counts differ.
    """
    a, b, sizes = _two_tables(first, second, sizes)
    return np.array([_distance(a[:, j], b[:, j], size) for j, size in enumerate(sizes)])


def pairwise_tvd(first: np.ndarray | pd.DataFrame, second: np.ndarray | pd.DataFrame,
                 sizes: Sequence[int]) -> PairwiseTVD:
    """TV distance of the joint distribution of every pair of attributes in two tables.

    Args:
        first, second: ``(n₁, m)`` and ``(n₂, m)`` integer codes, m ≥ 2.
        sizes: The public number of categories of each attribute.

    Returns:
        A :class:`PairwiseTVD` of the m(m − 1)/2 pairs.

    Raises:
        SchemaError: as :func:`attribute_tvd`, or m < 2.
    """
    a, b, sizes = _two_tables(first, second, sizes)
    m = len(sizes)
    if m < 2:
        raise SchemaError(f"sizes ({sizes!r}) must have at least two attributes for pairs")
    pairs = np.array([(j, k) for j in range(m) for k in range(j + 1, m)], dtype=np.int64)
    tvd = np.array([_distance(a[:, j] * sizes[k] + a[:, k], b[:, j] * sizes[k] + b[:, k], sizes[j] * sizes[k])
                    for j, k in pairs])
    return PairwiseTVD(pairs=pairs, tvd=tvd)


def tvd_summary(values: np.ndarray | Sequence[float]) -> dict[str, float]:
    """What a box plot of distances shows (Figures 3–4), plus the mean.

    Whiskers follow the usual 1.5·IQR rule: the most extreme values within 1.5 IQR of the
    quartiles (quartiles by linear interpolation, numpy's default).

    Returns:
        ``{"count", "mean", "min", "q25", "median", "q75", "max", "whisker_low", "whisker_high"}``.

    Raises:
        ValueError: ``values`` is empty or holds a non-finite number.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"values ({x!r}) must be a non-empty array of finite numbers")
    q25, median, q75 = np.quantile(x, [0.25, 0.5, 0.75])
    iqr = q75 - q25
    inside = x[(x >= q25 - 1.5 * iqr) & (x <= q75 + 1.5 * iqr)]
    return {"count": float(x.size), "mean": float(x.mean()), "min": float(x.min()), "q25": float(q25),
            "median": float(median), "q75": float(q75), "max": float(x.max()),
            "whisker_low": float(inside.min()), "whisker_high": float(inside.max())}


def tvd_table(reference: np.ndarray | pd.DataFrame, tables: Mapping[str, np.ndarray | pd.DataFrame], *,
              sizes: Sequence[int], names: Sequence[str] | None = None) -> pd.DataFrame:
    """Every attribute's and pair's distance of each table to the reference reals (Figures 3–4).

    Args:
        reference: The (other) reals every table is compared with.
        tables: Tables by name, e.g. ``{"reals": …, "marginals": …, "omega=11": …}``.
        sizes: The public number of categories of each attribute.
        names: Attribute names for the labels (default ``"0"``, ``"1"``, …).

    Returns:
        A long DataFrame with columns ``table``, ``kind`` (``"attribute"`` or ``"pair"``),
        ``attributes`` (``"age"`` or ``"age×sex"``) and ``tvd``: one row per table and
        attribute, then per table and pair — one box of Figure 3 or 4 per (table, kind).

    Raises:
        SchemaError: as :func:`pairwise_tvd`; ``names`` of the wrong length.
    """
    sizes = check_sizes(sizes)
    labels = [str(j) for j in range(len(sizes))] if names is None else [str(n) for n in names]
    if len(labels) != len(sizes):
        raise SchemaError(f"names ({list(labels)!r}) must name each of the {len(sizes)} attributes")
    rows = []
    for table_name, table in tables.items():
        for j, value in enumerate(attribute_tvd(reference, table, sizes)):
            rows.append((table_name, "attribute", labels[j], float(value)))
        pairs = pairwise_tvd(reference, table, sizes)
        for (j, k), value in zip(pairs.pairs, pairs.tvd):
            rows.append((table_name, "pair", f"{labels[j]}×{labels[k]}", float(value)))
    frame = pd.DataFrame(rows, columns=["table", "kind", "attributes", "tvd"])
    return frame.sort_values("kind", kind="stable").reset_index(drop=True)
