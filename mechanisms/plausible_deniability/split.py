"""The seeded, disjoint split of a coded dataset into D_T, D_P, D_S and a test set (item 1).

Privacy:
    The split is a :class:`~privlab.platform.dp.positional_split.PositionalSplit`: a uniformly
    random permutation of record *positions*, drawn independently of the data, cut at public
    sizes from the spec (``DataSplit.positions``, which the ledger holds and redraws). So n_T,
    n_P and n_S are public, and under replace-one neighbours (the relation of :mod:`.entropy`)
    the replaced record stays at its position, hence in the same part: D_T feeds structure
    learning (Section 3.3), D_P parameter learning (3.4), D_S the seeds of synthesis and the
    privacy test (3.2, 2), and the test set (the positions in no part) only evaluation.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3 (three non-overlapping subsets) and
    Section 6.1 (≈ 19% / 19% / 49% / rest).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval
from privlab.platform.dp.positional_split import PositionalSplit

__all__ = ["DataSplit", "SplitSizes", "split_dataset"]

PARTS = ("structure", "parameters", "seeds", "test")


_PART_SIZE = Interval(numbers.Integral, 1, None, closed="left")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SplitSizes(ConstrainedParams):
    """How many records go to each part; ``test=None`` gives the test set every other record.

    Raises:
        SpecError: a size is not an int ≥ 1.
    """

    structure: int
    parameters: int
    seeds: int
    test: int | None = None

    _parameter_constraints: ClassVar = {"structure": [_PART_SIZE], "parameters": [_PART_SIZE], "seeds": [_PART_SIZE],
                                        "test": [None, _PART_SIZE]}

    @classmethod
    def from_fractions(cls, n: int, *, structure: float, parameters: float, seeds: float,
                       test: float | None = None) -> SplitSizes:
        """Sizes ``floor(fraction·n)`` of a public record count ``n`` (the paper's ≈ .19/.19/.49)."""
        def part(name: str, f: float) -> int:
            if not (isinstance(f, (int, float)) and 0.0 < f < 1.0):
                raise SpecError(f"{name} ({f!r}) must be a fraction in (0, 1)")
            return int(f * n)
        return cls(structure=part("structure", structure), parameters=part("parameters", parameters),
                   seeds=part("seeds", seeds), test=None if test is None else part("test", test))

    def check_fits(self, n: int) -> None:
        """Raise :class:`SpecError` if the parts need more than ``n`` records."""
        needed = self.structure + self.parameters + self.seeds + (self.test or 0)
        if needed > n:
            raise SpecError(f"split sizes ({needed!r} records: {dataclasses.asdict(self)}) must be <= the "
                            f"number of records ({n}); lower the sizes")
        if self.test is None and needed == n:
            raise SpecError(f"split sizes ({needed!r} records) must leave at least one record for the "
                            "test set when test is None; lower the sizes or set test")


@dataclasses.dataclass(frozen=True)
class DataSplit:
    """The four disjoint parts (frames of codes with a fresh 0..n−1 index), their sizes, and the
    split that cut them (parts: D_T, D_P, D_S; the test set is drawn from the positions in none)."""

    structure: pd.DataFrame
    parameters: pd.DataFrame
    seeds: pd.DataFrame
    test: pd.DataFrame
    positions: PositionalSplit

    @property
    def sizes(self) -> dict[str, int]:
        """``{part: records}``, loggable."""
        return {p: len(getattr(self, p)) for p in PARTS}


def split_dataset(data: pd.DataFrame, *, sizes: SplitSizes, domain: Domain, rng: np.random.Generator) -> DataSplit:
    """Split ``data`` (integer codes over ``domain``) into D_T, D_P, D_S and a test set.

    Args:
        data: The coded dataset (checked against ``domain``).
        sizes: Public part sizes.
        domain: The public domain of the codes.
        rng: The permutation's stream (e.g. ``source.generator(purpose="pd.split")``).

    Returns:
        A :class:`DataSplit`; parts are copies, in permutation order.

    Raises:
        TypeError: ``sizes`` or ``rng`` has the wrong type.
        SpecError: the sizes need more records than ``data`` has (checked before any draw).
        SchemaError: ``data`` does not hold codes of ``domain``.
    """
    if not isinstance(sizes, SplitSizes):
        raise TypeError(f"sizes ({sizes!r}) must be a SplitSizes")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
    sizes.check_fits(len(data))
    codes = domain.validate(data, what="plausible-deniability split")
    split = PositionalSplit.permuted(len(codes), [sizes.structure, sizes.parameters, sizes.seeds], rng=rng)
    rest = split.unassigned()
    test = rest if sizes.test is None else rest[:sizes.test]
    parts = [codes.iloc[rows].reset_index(drop=True) for rows in (*(split.members(k) for k in range(3)), test)]
    return DataSplit(*parts, positions=split)
