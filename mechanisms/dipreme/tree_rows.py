"""Which record positions each tree of a forest sees, drawn without looking at the data.

``partition="disjoint"``: tree t sees part t of a uniformly random permutation of the positions
``0 … n−1`` cut at public sizes (:func:`tree_sizes`), a
:class:`~privlab.platform.dp.positional_split.PositionalSplit` the fit declares on the ledger
(parallel composition, valid under replace-one only: see that module for why a permutation cut at
``n``-dependent sizes is not a parallel split under add/remove-one); ``partition="full"``: every
tree sees every row. The permutation comes from ``source.generator`` (public randomness).
"""

from __future__ import annotations

import numpy as np

from privlab.platform.dp.ledger import Ledger
from privlab.platform.core.errors import LedgerError
from privlab.platform.dp.positional_split import PositionalSplit, SplitPlan
from privlab.platform.dp.randomness import RandomSource

__all__ = ["RowDraw", "all_rows", "assign_rows", "forest_part_names", "forest_slot", "positional_split", "rows_are_disjoint",
           "rows_of", "tree_sizes"]

def tree_sizes(n: int, n_estimators: int, partition: str) -> np.ndarray:
    """Rows per tree: public, a function of n, T and the partition rule only."""
    if partition == "disjoint":
        return np.array([len(p) for p in np.array_split(np.arange(n), n_estimators)])
    return np.full(n_estimators, n)


def positional_split(n: int, n_estimators: int, rng: np.random.Generator) -> PositionalSplit:
    """The disjoint forest's rows: a uniformly random permutation of the positions ``0 … n−1``
    drawn from ``rng`` (never from the data), cut into T near-equal public sizes."""
    return PositionalSplit.permuted(n, [int(s) for s in tree_sizes(n, n_estimators, "disjoint")], rng=rng)


def forest_slot(ledger: Ledger, scope: str, n_estimators: int) -> tuple[int, bool]:
    """Which disjoint forest of ``scope`` a fit on ``ledger`` is, and whether its partition is
    already declared.

    A run declares a trial's partition before the trial fits (a workload's ``partitions()``,
    the parts of :func:`forest_part_names`): the first such partition of ``scope`` with nothing
    spent on its parts is this fit's. Otherwise the fit is the first forest index whose names
    are unused, and declares its partition itself.
    """
    spent_on = {e.scope for e in ledger.events}
    declared = {tuple(parts) for parent, parts in ledger.partitions if parent == scope}
    named = spent_on | {name for _, parts in ledger.partitions for name in parts}
    index = 0
    while True:
        names = tuple(forest_part_names(scope, n_estimators, index))
        if names in declared and spent_on.isdisjoint(names):
            return index, True
        if named.isdisjoint(names):
            return index, False
        index += 1


class RowDraw:
    """The disjoint forest's :func:`positional_split`, drawn from ``source.generator(purpose)``
    when first asked for — after the preflight, so a refused fit draws nothing — or the split the
    ledger already holds for the forest's parts (``held``), which must be drawn for ``n`` rows."""

    def __init__(self, n: int, n_estimators: int, source: RandomSource, *, purpose: str,
                 held: PositionalSplit | SplitPlan | None = None) -> None:
        if held is not None:
            if not isinstance(held, PositionalSplit):
                raise LedgerError(f"the ledger's partition of the forest's trees is only planned ({held!r}); fit on a "
                                  "trial's ledger (Ledger.for_trial()), which the fit declares the drawn split on")
            held.check_record_count(n, what="the training data")
        self._n, self._n_estimators, self._source, self._purpose = n, n_estimators, source, purpose
        self._split: PositionalSplit | None = held

    @property
    def plan(self) -> SplitPlan:
        """The kind of split drawn (for a preflight before the draw)."""
        return SplitPlan("permuted")

    def __call__(self) -> PositionalSplit:
        if self._split is None:
            self._split = positional_split(self._n, self._n_estimators, self._source.generator(purpose=self._purpose))
        return self._split


def all_rows(n: int, n_estimators: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, tree) pairs of trees that each see every row."""
    return np.tile(np.arange(n), n_estimators), np.repeat(np.arange(n_estimators), n)


def rows_of(split: PositionalSplit) -> tuple[np.ndarray, np.ndarray]:
    parts = [split.positions(t) for t in range(split.n_parts)]
    rows = np.concatenate(parts).astype(np.int64)
    return rows, np.repeat(np.arange(split.n_parts), [len(p) for p in parts])


def assign_rows(n: int, n_estimators: int, partition: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(row, tree) pairs: the parts of :func:`positional_split` ("disjoint", T ≥ 2), or every row
    for every tree."""
    if partition == "disjoint" and n_estimators > 1:
        return rows_of(positional_split(n, n_estimators, rng))
    return all_rows(n, n_estimators)


def rows_are_disjoint(rows: np.ndarray, n: int) -> bool:
    """Whether no row is assigned to two trees (the condition for parallel composition)."""
    return bool(np.bincount(rows, minlength=n).max(initial=0) <= 1)


def forest_part_names(scope: str, n_estimators: int, forest_index: int = 0) -> list[str]:
    """The ledger scopes of a disjoint forest's trees: parts of ``scope``, numbered by how many
    partitions of ``scope`` the ledger already holds (``forest_index``), so fits on one ledger
    never reuse a name."""
    return [f"{scope}/forest{forest_index}/tree{t}" for t in range(n_estimators)]
