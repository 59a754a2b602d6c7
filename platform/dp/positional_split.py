"""Splits of a dataset by record position, the kind parallel composition holds for under replace-one.

A :class:`PositionalSplit` assigns each record *position* 0 … n−1 to one part, either in
contiguous blocks or through a uniformly random permutation drawn from a generator that never
sees the data. It is built from the public record count ``n``, public part sizes and a random
stream only; there is no constructor that takes record values, so a split made here cannot
depend on them.

Privacy:
    Let D and D' be replace-one neighbours: they differ in the record at one position i. A
    positional split sends position i to the same part j in both, and every other part holds
    the same records in D and D'. A mechanism that runs M_k on part k alone therefore changes
    its output distribution only through M_j, and releasing (M_1, …, M_K) is
    (max ε_k, max δ_k)-DP under replace-one; under add/remove-one the same holds with the
    usual argument (the added or removed record is in one part). A split by record *values*
    (age > 40, say) has no such guarantee under replace-one: the replaced record can move from
    one part to another and change both. :meth:`privlab.platform.dp.ledger.Ledger.declare_partition`
    accepts a partition under replace-one only with a :class:`PositionalSplit`.

References:
    McSherry, "Privacy Integrated Queries" (SIGMOD 2009), Theorem 4; Bindschaedler, Shokri &
    Gunter (VLDB 2017), Section 3.5 (the max over the disjoint D_T and D_P).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privlab.platform.core.errors import LedgerError

__all__ = ["PositionalSplit"]


def _sizes(sizes: Sequence[int], n: int) -> tuple[int, ...]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise TypeError(f"sizes ({sizes!r}) must be a sequence of ints")
    out = []
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise LedgerError(f"sizes ({list(sizes)!r}) must be ints >= 0")
        out.append(int(size))
    if len(out) < 2:
        raise LedgerError(f"sizes ({list(sizes)!r}) must name at least 2 parts")
    if sum(out) > n:
        raise LedgerError(f"sizes ({list(sizes)!r}) must add up to at most the record count ({n})")
    return tuple(out)


class PositionalSplit:
    """Disjoint parts of the positions ``0 … n−1``, chosen without looking at record values.

    Build one with :meth:`contiguous` or :meth:`permuted`. Positions left out of every part
    (when the sizes add up to less than ``n``) belong to no part.

    Attributes:
        n: the public record count.
        sizes: the public size of each part.
    """

    __slots__ = ("_assignment", "n", "sizes")

    def __init__(self, *, n: int, assignment: np.ndarray, sizes: tuple[int, ...]) -> None:
        self.n = n
        self.sizes = sizes
        self._assignment = assignment
        self._assignment.setflags(write=False)

    @classmethod
    def contiguous(cls, n: int, sizes: Sequence[int]) -> PositionalSplit:
        """Part k holds the next ``sizes[k]`` positions, in order."""
        n = cls._count(n)
        sizes = _sizes(sizes, n)
        assignment = np.full(n, -1, dtype=np.int64)
        assignment[: sum(sizes)] = np.repeat(np.arange(len(sizes)), sizes)
        return cls(n=n, assignment=assignment, sizes=sizes)

    @classmethod
    def permuted(cls, n: int, sizes: Sequence[int], *, rng: np.random.Generator) -> PositionalSplit:
        """Cut a uniformly random permutation of the positions, drawn from ``rng``, at ``sizes``.

        ``rng`` must be a stream that never saw the data (a seeded child stream or the
        release's secure source); the split is then independent of every record value.
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
        n = cls._count(n)
        sizes = _sizes(sizes, n)
        order = rng.permutation(n)
        assignment = np.full(n, -1, dtype=np.int64)
        assignment[order[: sum(sizes)]] = np.repeat(np.arange(len(sizes)), sizes)
        return cls(n=n, assignment=assignment, sizes=sizes)

    @staticmethod
    def _count(n: object) -> int:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
            raise LedgerError(f"n ({n!r}) must be an int >= 2 (the public record count)")
        return int(n)

    @property
    def n_parts(self) -> int:
        return len(self.sizes)

    def part_of(self, position: int) -> int:
        """The part holding ``position``, or −1 when it is in none."""
        return int(self._assignment[position])

    def positions(self, part: int) -> np.ndarray:
        """The positions of ``part``, in increasing order."""
        if not 0 <= part < self.n_parts:
            raise LedgerError(f"part ({part!r}) must be in [0, {self.n_parts})")
        return np.flatnonzero(self._assignment == part)

    def __repr__(self) -> str:
        return f"PositionalSplit(n={self.n}, sizes={self.sizes})"
