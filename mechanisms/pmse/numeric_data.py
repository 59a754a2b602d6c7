"""Numeric tables and their public bounds, as the pMSE paper's mechanisms read them.

Every mechanism of the pMSE paper's comparisons (:mod:`.continuous`) takes a table of numeric
columns in model order; the bounded ones (noisy BPPD, smooth histogram, functional mechanism)
also take public per-column bounds, clip the data to them, and (except the histogram) work in
coordinates scaled to [−1, 1]. This module validates those inputs and does the clipping and
scaling; its parameter checks word their messages alike (``"{name} ({value!r}) must be …"``).

Clipping, not raising: Snoke & Slavković, Section 6, run every bounded baseline "truncating
the data at different assumed bounds" of 2, 4, 5 or 10 standard deviations, with the
2-sd bounds deliberately narrower than the data. Out-of-bounds values are therefore expected
input, and they are clipped (winsorised) to the nearest bound. Dropping the rows instead
would change ``n``, which these mechanisms treat as public (replace-one neighbours).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd

from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import Interval, check_count, check_real

__all__ = [
    "COUNT",
    "EPSILON",
    "FRACTION",
    "NONNEGATIVE",
    "check_count",
    "check_fraction",
    "check_nonnegative",
    "clip_and_scale",
    "data_matrix",
    "validate_bounds",
]


# --- parameter validation (messages: f"{name} ({value!r}) must be {constraint}") ----------

# Declared constraints of the mechanisms' Params (:class:`~privlab.platform.core.validation.ConstrainedParams`).
EPSILON = Interval(numbers.Real, 0, None, closed="neither")
NONNEGATIVE = Interval(numbers.Real, 0, None, closed="left")
FRACTION = Interval(numbers.Real, 0, 1, closed="neither")
COUNT = Interval(numbers.Integral, 1, None, closed="left")


def check_nonnegative(name: str, value: object) -> float:
    """``value`` as a float if it is a real number, finite and >= 0."""
    x = check_real(name, value)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"{name} ({value!r}) must be finite and >= 0")
    return x


def check_fraction(name: str, value: object) -> float:
    """``value`` as a float if it lies strictly between 0 and 1."""
    x = check_real(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} ({value!r}) must be in (0, 1)")
    return x


def validate_bounds(lower: object, upper: object) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Public per-column bounds as two equal-length tuples of finite floats, lower < upper.

    Lists (as a TOML spec gives them) are accepted and converted to tuples.

    Raises:
        TypeError: a bound is not a sequence of real numbers.
        ValueError: empty, unequal lengths, non-finite, or ``lower[j] >= upper[j]``.
    """
    out = []
    for name, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} ({value!r}) must be a sequence of numbers, one per column")
        if len(value) == 0:
            raise ValueError(f"{name} ({value!r}) must name at least one column's bound")
        items = []
        for item in value:
            x = check_real(f"{name} item", item)
            if not math.isfinite(x):
                raise ValueError(f"{name} ({value!r}) must hold finite numbers")
            items.append(x)
        out.append(tuple(items))
    lo, hi = out
    if len(lo) != len(hi):
        raise ValueError(f"upper ({upper!r}) must have as many entries as lower ({len(lo)})")
    for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if not a < b:
            raise ValueError(f"upper[{j}] ({b!r}) must be > lower[{j}] ({a!r})")
    return lo, hi


# --- data ---------------------------------------------------------------------------------


def data_matrix(
    data: object, *, columns: int | None = None, min_rows: int = 1
) -> tuple[np.ndarray, tuple[str, ...]]:
    """A fresh float64 copy of ``data`` and its column names.

    Args:
        data: a DataFrame of numeric columns (in model order: each column is regressed on
            the ones before it), or a 2-D array (columns named ``x1, x2, …``).
        columns: the number of columns the public bounds declare, if any.
        min_rows: the fewest rows the mechanism can use.

    Returns:
        ``(matrix, names)``; ``matrix`` never shares memory with ``data``.

    Raises:
        TypeError: ``data`` is neither a DataFrame nor a 2-D array.
        SchemaError: a wrong number of columns, too few rows, a non-numeric column, a NaN
            or an infinite value.
    """
    if isinstance(data, pd.DataFrame):
        names = tuple(str(c) for c in data.columns)
        for name in data.columns:
            dtype = data[name].dtype
            if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
                raise SchemaError(f"column {name!r} ({dtype}) must be numeric; encode it first")
        matrix = data.to_numpy(dtype=np.float64, copy=True)
    elif isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise SchemaError(f"data (an array of shape {data.shape}) must be 2-D (rows, columns)")
        matrix = np.array(data, dtype=np.float64, copy=True)
        names = tuple(f"x{j + 1}" for j in range(matrix.shape[1]))
    else:
        raise TypeError(f"data ({type(data).__name__}) must be a pandas DataFrame or a 2-D array")
    n, q = matrix.shape
    if columns is not None and q != columns:
        raise SchemaError(
            f"data has {q} column(s) but the public bounds declare {columns}; pass one "
            "lower/upper bound per column, in model order"
        )
    if q < 1:
        raise SchemaError("data must have at least one column")
    if n < min_rows:
        raise SchemaError(f"data has {n} row(s); this mechanism needs at least {min_rows}")
    if not np.all(np.isfinite(matrix)):
        raise SchemaError("data must be finite: drop or impute NaN/inf values first")
    return matrix, names


def clip_and_scale(
    matrix: np.ndarray, lower: Sequence[float], upper: Sequence[float]
) -> np.ndarray:
    """Clip each column to its public ``[lower, upper]`` and map it affinely onto [−1, 1].

    ``x̃ = (x − c) / h`` with centre ``c = (lower + upper) / 2`` and half-width
    ``h = (upper − lower) / 2``; a new array is returned.
    """
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    clipped = np.clip(matrix, lo, hi)
    return np.clip((clipped - (lo + hi) / 2.0) / ((hi - lo) / 2.0), -1.0, 1.0)
