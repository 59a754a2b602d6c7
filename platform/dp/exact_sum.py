"""An exact, mergeable sum of floats: Shewchuk's non-overlapping partials.

The algorithm behind :func:`math.fsum`, kept open so that a sum can grow one term at a time and
two sums can merge: the partials always add up exactly to the sum of every term added, so
:meth:`ExactSum.value` is the correctly rounded total whatever the order of the additions. The
runner's aggregates and the ledger's basic totals are kept this way.

References:
    Shewchuk, "Adaptive Precision Floating-Point Arithmetic and Fast Robust Geometric
    Predicates" (1997); Python's ``math.fsum``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

__all__ = ["ExactSum"]


class ExactSum:
    """An exact, mergeable sum of floats (Shewchuk's non-overlapping partials)."""

    __slots__ = ("partials",)

    def __init__(self, partials: Iterable[float] = ()) -> None:
        self.partials: list[float] = list(partials)

    def add(self, values: Iterable[float]) -> None:
        partials = self.partials
        for x in values:
            i = 0
            for y in partials:
                if abs(x) < abs(y):
                    x, y = y, x
                hi = x + y
                lo = y - (hi - x)
                if lo:
                    partials[i] = lo
                    i += 1
                x = hi
            partials[i:] = [x]

    def add_array(self, values: np.ndarray) -> None:
        """:meth:`add` for a float64 array, with an exact fast path for integer values.

        When every value is an integer and |max value| · size < 2⁶³, their int64 sum is the
        exact sum; it is added as one or two floats (the correctly rounded sum and the integer
        remainder, each exactly representable), which represent the same exact total as adding
        the values one by one. Anything else goes through :meth:`add`.
        """
        if values.size == 0:
            return
        largest = float(np.max(np.abs(values)))
        if largest * values.size < 2.0**62 and np.array_equal(values, np.trunc(values)):
            total = int(values.astype(np.int64).sum())
            rounded = float(total)
            self.add([rounded, float(total - int(rounded))] if total != int(rounded) else [rounded])
            return
        self.add(values.tolist())

    def merge(self, other: ExactSum) -> None:
        self.add(other.partials)

    def fraction(self) -> Fraction:
        return sum((Fraction(p) for p in self.partials), Fraction(0))

    def value(self) -> float:
        return math.fsum(self.partials)
