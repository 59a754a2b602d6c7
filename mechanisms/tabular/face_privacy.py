"""Face privacy: the minimal-occurrence projection of a synthetic codes frame.

Stakeholders expect a privacy-protecting release to contain no unique rows (Hod & Canetti
2024, Sections 3.5.2 and 4.6). The projection rewrites a synthetic dataset ``D`` of ``n``
records into a release candidate ``D'`` of ``n`` records in which every distinct record appears
at least ``m = min_count`` times, using only records that already occur in ``D``.

Algorithms (``algorithm=``):

``"algorithm3"`` (default) — Algorithm 3 of Section 4.6
    For ``k = 1 .. m−1``: among the distinct records occurring exactly ``k`` times, sample
    ``⌊k·n_k/m⌋`` without replacement and give each ``m`` copies; records occurring ``≥ m``
    times keep their count; the other rare records are dropped. The mass of each level is kept
    exactly up to rounding (Proposition 11, statement 5).
``"algorithm4"`` — Algorithm 4 of Section 4.14.3 (what the 2014 release actually ran)
    ``R_0 = ∅``; for ``k = 1 .. m−1``: ``R'_k = R_{k−1} ∪ Rec(D, #=k)`` and ``R_k`` samples
    ``⌊k/(k+1)·|R'_k|⌋`` records of ``R'_k`` without replacement; every record of ``R_{m−1}``
    gets ``m`` copies (the mass of each level is kept in expectation, Proposition 12).
    The paper's ``⌊k/(k+1)⌋`` is read as ``⌊k/(k+1)·|R'_k|⌋``, the only reading under which
    Lemma 1 (``|R_k| = Σ_{t≤k} t·n_t/(k+1)``) holds.

Deviations from the paper, both only where its divisibility assumptions fail:

* Remark 1: when rounding leaves ``D'`` short of ``n`` records, the missing ``n − |D'|`` rows
  are duplicates of rows of ``D'`` drawn uniformly without replacement (with replacement only
  if more are missing than ``D'`` has rows). Duplicating only raises counts, so every record
  still appears ``≥ m`` times. At most ``Σ_{k<m} (m−1) < m²`` rows are added this way for
  Algorithm 3.
* When the sampling selects nothing and no record occurs ``≥ m`` times (tiny inputs such as
  ``n = 4, m = 3`` with counts ``1, 1, 2``), ``D'`` would be empty; one record is then drawn
  with probability proportional to its count, given ``m`` copies, and the rest is filled as
  in Remark 1. A frame with ``0 < n < m`` rows cannot be projected and raises.

Row placement (the paper treats datasets as multisets; a frame has row positions): every row
whose record keeps its rows — occurring ``≥ m`` times, or selected — is left unchanged; the
rows of dropped records are overwritten, in uniformly random order, by the extra copies of the
selected records and the Remark-1 duplicates. So each output row is either its input row or a
copy of a record that occurs in the input.

Everything is vectorised (records are keyed by ``numpy.unique`` over a packed integer key);
160,000 rows take a few tens of milliseconds.

Privacy:
    The projection reads only the synthetic frame (a sample of an ε-DP model) and its own
    ``rng``; it never touches the private data. By the post-processing property of
    differential privacy it costs no privacy budget (Section 3.5.2). Choosing ``min_count``
    by comparing candidates against private data is a selection step and is charged there.

References:
    Hod & Canetti (2024), Section 4.6 (Algorithm 3, Proposition 11, Remark 1) and Section
    4.14.3 (Algorithm 4, Proposition 12).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval, Options

ALGORITHMS = ("algorithm3", "algorithm4")


@dataclasses.dataclass(frozen=True)
class RecordIndex:
    """Distinct records of a codes frame.

    Attributes:
        ids: Per row, the index of its distinct record (records sorted by packed key).
        counts: Per distinct record, how many rows hold it.
        first_rows: Per distinct record, the position of its first row.
    """

    ids: np.ndarray
    counts: np.ndarray
    first_rows: np.ndarray


def _code_matrix(codes: pd.DataFrame, *, domain: Domain | None, what: str) -> np.ndarray:
    if not isinstance(codes, pd.DataFrame):
        raise TypeError(f"{what}: expected a pandas DataFrame of codes, got {type(codes).__name__}")
    if domain is not None:
        codes = domain.validate(codes, what=what)
    if codes.shape[1] == 0:
        raise SchemaError(f"{what}: the frame has no columns")
    for name in codes.columns:
        null = codes[name].isna().to_numpy()
        if null.any():
            raise SchemaError(f"{what}: column {name!r} has a missing value at row {int(np.flatnonzero(null)[0])}")
    for name in codes.columns:
        series = codes[name]
        if not (pd.api.types.is_integer_dtype(series) or pd.api.types.is_bool_dtype(series)):
            raise SchemaError(f"{what}: column {name!r} must hold integer codes, not {series.dtype}")
    values = codes.to_numpy(dtype=CODE_DTYPE)
    negative = values < 0
    if negative.any():
        row, col = np.argwhere(negative)[0]
        raise SchemaError(f"{what}: column {codes.columns[col]!r} has a negative code at row {int(row)}")
    return values


def index_records(values: np.ndarray) -> RecordIndex:
    """Group the rows of a non-negative integer matrix into distinct records.

    Columns are packed one at a time into an ``int64`` key that is re-factorised after each
    column, so the key stays below ``n · (max code + 1)`` whatever the domain size.
    """
    n, d = values.shape
    key = np.zeros(n, dtype=np.int64)
    for j in range(d):
        column = values[:, j]
        span = int(column.max()) + 1 if n else 1
        if span > np.iinfo(np.int64).max // max(n, 1):
            raise SchemaError(f"codes in column {j} are too large to index ({span - 1})")
        key = key * span + column
        if j < d - 1:
            key = pd.factorize(key)[0].astype(np.int64)
    _, first_rows, ids, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    return RecordIndex(ids=ids.reshape(-1), counts=counts, first_rows=first_rows)


def smallest_count(codes: pd.DataFrame) -> int:
    """How often the rarest distinct record of ``codes`` occurs (0 for an empty frame)."""
    values = _code_matrix(codes, domain=None, what="codes frame")
    if len(values) == 0:
        return 0
    return int(index_records(values).counts.min())


def _select_algorithm3(counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    selected = []
    for k in range(1, m):
        level = np.flatnonzero(counts == k)
        take = (k * len(level)) // m
        if take:
            selected.append(rng.choice(level, size=take, replace=False))
    return np.concatenate(selected) if selected else np.empty(0, dtype=np.int64)


def _select_algorithm4(counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    kept = np.empty(0, dtype=np.int64)
    for k in range(1, m):
        pool = np.concatenate([kept, np.flatnonzero(counts == k)])
        take = (k * len(pool)) // (k + 1)
        kept = rng.choice(pool, size=take, replace=False) if take else np.empty(0, dtype=np.int64)
    return kept


def project_min_occurrence(
    codes: pd.DataFrame,
    *,
    min_count: int,
    rng: np.random.Generator,
    algorithm: str = "algorithm3",
    domain: Domain | None = None,
) -> pd.DataFrame:
    """Project ``codes`` so every distinct record occurs at least ``min_count`` times.

    Args:
        codes: A frame of non-negative integer codes (one synthetic record per row).
        min_count: The minimal number of occurrences ``m`` (an integer >= 2).
        rng: The generator for the sampling steps; the output is a deterministic function of
            ``codes`` and the generator's state.
        algorithm: ``"algorithm3"`` (Section 4.6) or ``"algorithm4"`` (Section 4.14.3).
        domain: If given, ``codes`` is first checked against it.

    Returns:
        A frame with the same index, columns and number of rows, whose records all occur in
        ``codes`` and each at least ``min_count`` times (see the module docstring for which
        rows change).

    Raises:
        SpecError: ``min_count`` or ``algorithm`` invalid.
        TypeError: ``codes`` is not a DataFrame or ``rng`` not a ``numpy.random.Generator``.
        SchemaError: Missing values, non-integer or negative codes (naming column and row),
            codes outside ``domain``, or ``0 < len(codes) < min_count``.

    Privacy:
        Post-processing of a DP synthetic sample; no privacy cost (module docstring).
    """
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 2:
        raise SpecError(f"min_count ({min_count!r}) must be an integer >= 2 (1 would leave the data unchanged)")
    if algorithm not in ALGORITHMS:
        raise SpecError(f"algorithm ({algorithm!r}) must be one of {', '.join(ALGORITHMS)}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
    values = _code_matrix(codes, domain=domain, what="codes frame")
    n = len(values)
    m = int(min_count)
    if n == 0:
        return codes.copy()
    if n < m:
        raise SchemaError(
            f"codes frame: {n} row(s) cannot hold records that each occur at least min_count ({m}) times"
        )
    records = index_records(values)
    counts = records.counts
    row_counts = counts[records.ids]
    rare_rows = row_counts < m
    if not rare_rows.any():
        return codes.copy()

    selector = _select_algorithm3 if algorithm == "algorithm3" else _select_algorithm4
    selected = np.sort(selector(counts, m, rng))
    frequent = np.flatnonzero(counts >= m)
    if len(selected) == 0 and len(frequent) == 0:
        # Degenerate tiny input: seed D' with one record drawn proportionally to its count.
        selected = records.ids[rng.integers(n)][None]

    # Rows of selected records stay; rows of dropped rare records are free to overwrite.
    is_selected = np.zeros(len(counts), dtype=bool)
    is_selected[selected] = True
    free_rows = np.flatnonzero(rare_rows & ~is_selected[records.ids])
    extra = np.repeat(selected, m - counts[selected])
    deficit = len(free_rows) - len(extra)  # >= 0: m·|selected| <= Σ_{k<m} k·n_k (Props. 11, 12)
    if deficit > 0:
        # Remark 1: duplicate rows of D' (frequent rows, plus selected records with m copies).
        projected_records = np.concatenate([records.ids[row_counts >= m], np.repeat(selected, m)])
        duplicates = rng.choice(projected_records, size=deficit, replace=deficit > len(projected_records))
        extra = np.concatenate([extra, duplicates])
    fill = rng.permutation(extra)

    out = values.copy()
    out[free_rows] = values[records.first_rows[fill]]
    result = pd.DataFrame(out, columns=codes.columns, index=codes.index)
    for name in codes.columns:
        if pd.api.types.is_bool_dtype(codes[name]):
            result[name] = result[name].astype(bool)
    return result


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinOccurrenceProjection(ConstrainedParams):
    """The face-privacy projection as a configurable post-processing step.

    Args:
        min_count: Minimal occurrences of every released record (>= 2; the births release
            tuned it over {2, 3}, Section 4.7.3).
        algorithm: ``"algorithm3"`` or ``"algorithm4"`` (see the module docstring).

    Privacy:
        Post-processing; no privacy cost.
    """

    min_count: int
    algorithm: str = "algorithm3"

    _parameter_constraints: ClassVar = {"min_count": [Interval(numbers.Integral, 2, None, closed="left")],
                                        "algorithm": [Options(str, ALGORITHMS)]}
    _type_error: ClassVar = SpecError  # a spec's projection table: every mistake is the spec's

    def apply(self, codes: pd.DataFrame, *, rng: np.random.Generator, domain: Domain | None = None) -> pd.DataFrame:
        """See :func:`project_min_occurrence`."""
        return project_min_occurrence(codes, min_count=self.min_count, rng=rng, algorithm=self.algorithm,
                                      domain=domain)
