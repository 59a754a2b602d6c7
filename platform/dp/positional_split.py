"""Splits of a dataset the ledger can check, the only ground for parallel composition.

A ledger composes the parts of a partition in parallel (the worst part, not the sum) only when
it holds the split object that cut them, and only when that kind of split supports parallel
composition under the ledger's neighbouring relation. A split is built here, from the public
record count ``n`` and a random stream that never saw the data, and from nothing else: no
constructor takes record values, and a split records what it needs to be re-derived (its kind,
``n``, the part sizes and the stream's state), so a ledger read back from JSON redraws it
instead of trusting a label.

Two kinds, and the argument for each:

``permuted`` (:meth:`PositionalSplit.permuted`): a uniformly random permutation of the positions
    ``0 … n−1`` cut at public sizes.

    *Replace-one (valid).* D and D′ differ in the record at one position i. The split depends on
    ``n`` and the stream only, so it is the same for both: position i is in the same part j,
    every other part holds the same records in D and D′, and releasing (M_1(D_1), …, M_K(D_K))
    changes its distribution only through M_j. It is (max ε_k, max δ_k)-DP (McSherry 2009,
    Theorem 4).

    *Add/remove-one (refused).* Adding a record changes ``n``: the permutation is of n + 1
    positions and the sizes are cut from n + 1, so *every* part may change, not one. Exact
    counterexample (tests/test_split_soundness.py enumerates it): two parts of sizes
    ``array_split(n, 2)``, each releasing its count of ones with Laplace(1/ε), ε = 1;
    D = [1, 1], D′ = [1, 1, 0]. On D both parts hold a 1; on D′ the 0 falls in the part of
    size 1 with probability 1/3, which then holds no 1. The worst output ratio is
    ln(2/3 + e²/3) = 1.141 > 1 = max ε_k.

``independent`` (:meth:`PositionalSplit.independent`): each position's part drawn on its own,
    i.i.d. from public weights; the part sizes are whatever the draws give.

    *Both relations (valid).* A record's part is a function of that record's own draw. Under
    replace-one the argument above holds. Under add/remove-one, D′ = D ∪ {x}: the draws of D's
    records have the same joint law in D and D′ (they are i.i.d. and exchangeable), so couple
    them to be equal; x lands in one part j, every other part holds the same records, and the
    release is (max ε_k, max δ_k)-DP. A mechanism on a part must not use the part's size as
    public under add/remove-one (it is not).

A split by record *values* (age > 40) has neither property under replace-one (a replaced
record can move from one part to another and change two parts), and this module offers none.

Planning: before a split is drawn (a workload's plan, an estimator's preflight) a
:class:`SplitPlan` names the kind that will be drawn. A ledger holding a planned partition is a
*plan* (:attr:`privlab.platform.dp.ledger.Ledger.is_plan`); its trials' ledgers must declare the
drawn split of that kind before spending on its parts, which the runner checks.

References:
    McSherry, "Privacy Integrated Queries" (SIGMOD 2009), Theorem 4; Bindschaedler, Shokri &
    Gunter (VLDB 2017), Section 3.5 (the max over the disjoint D_T and D_P).
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privlab.platform.core.errors import LedgerError

__all__ = ["SPLIT_KINDS", "NeighbouringRelation", "PositionalSplit", "SplitPlan", "split_from_dict"]


class NeighbouringRelation(enum.StrEnum):
    """The neighbouring relation a ledger's guarantee is stated for."""

    REPLACE_ONE = "replace_one"
    """D and D′ have the same size and differ in one record (``n`` public)."""
    ADD_REMOVE = "add_remove"
    """D′ is D with one record added or removed."""

    @classmethod
    def parse(cls, value: object) -> NeighbouringRelation:
        """``value`` as a relation: a member, or its exact name.

        Raises:
            TypeError: ``value`` is not a str.
            LedgerError: ``value`` names no relation.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise TypeError(f"neighbouring ({value!r}) must be a NeighbouringRelation or its name")
        try:
            return cls(value)
        except ValueError:
            raise LedgerError(f"neighbouring ({value!r}) must be one of {[r.value for r in cls]}") from None


SPLIT_KINDS = ("permuted", "independent")
"""The kinds of split this module draws (module docstring)."""

_VALID_UNDER = {
    "permuted": (NeighbouringRelation.REPLACE_ONE,),
    "independent": (NeighbouringRelation.REPLACE_ONE, NeighbouringRelation.ADD_REMOVE),
}

_WHY_NOT = {
    ("permuted", NeighbouringRelation.ADD_REMOVE): (
        "a permutation cut at sizes is not a parallel split under add/remove neighbours: adding a "
        "record changes n, the cut points move and every part can change (two parts of D = [1, 1] "
        "vs D' = [1, 1, 0] releasing counts at ε = 1 leak ln(2/3 + e²/3) = 1.141); draw "
        "PositionalSplit.independent(...) instead, or state the guarantee for replace-one neighbours"),
}

_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
"""Bit generators whose recorded state a split can be redrawn from."""

_SEAL = object()

WITHHELD = "the record count and the stream's state"
"""What a published ledger leaves out of a drawn split's record."""


def _kind(kind: object) -> str:
    if not isinstance(kind, str):
        raise TypeError(f"kind ({kind!r}) must be a str")
    if kind not in SPLIT_KINDS:
        raise LedgerError(f"kind ({kind!r}) must be one of {list(SPLIT_KINDS)}")
    return kind


def _count(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise LedgerError(f"n ({n!r}) must be an int >= 2 (the public record count)")
    return int(n)


def _sizes(sizes: object, n: int) -> tuple[int, ...]:
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


def _weights(weights: object, parts: int) -> tuple[float, ...]:
    if weights is None:
        return tuple([1.0 / parts] * parts)
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise TypeError(f"weights ({weights!r}) must be a sequence of numbers")
    out = [float(w) for w in weights]
    if len(out) != parts or not all(np.isfinite(w) and w >= 0.0 for w in out) or not abs(sum(out) - 1.0) <= 1e-9:
        raise LedgerError(f"weights ({list(weights)!r}) must be {parts} finite numbers >= 0 adding up to 1")
    return tuple(out)


def relation_refusal(kind: str, relation: NeighbouringRelation) -> str | None:
    """Why a split of ``kind`` does not support parallel composition under ``relation`` (``None``
    when it does; module docstring)."""
    if relation in _VALID_UNDER[kind]:
        return None
    return _WHY_NOT[(kind, relation)]


@dataclass(frozen=True)
class SplitPlan:
    """The kind of split a trial or fit will draw, before it is drawn (public; no positions).

    Attributes:
        kind: one of :data:`SPLIT_KINDS`.
    """

    kind: str = "permuted"

    def __post_init__(self) -> None:
        _kind(self.kind)

    def refusal(self, relation: NeighbouringRelation) -> str | None:
        """Why this kind of split cannot compose in parallel under ``relation`` (``None``: it can)."""
        return relation_refusal(self.kind, relation)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "planned": True}

    def public_dict(self) -> dict[str, Any]:
        return self.to_dict()


class PositionalSplit:
    """Disjoint parts of the positions ``0 … n−1``, drawn from ``n`` and a random stream alone.

    Build one with :meth:`permuted` or :meth:`independent` (the constructor is not public);
    rebuild one from its record with :meth:`from_dict`, which redraws it. Positions in no part
    (when a permutation's sizes add up to less than ``n``) belong to no part.

    Attributes:
        kind: ``"permuted"`` or ``"independent"``.
        n: the public record count.
        sizes: the size of each part (public for ``permuted``; as drawn for ``independent``).
    """

    __slots__ = ("_assignment", "_order", "_record", "kind", "n", "sizes")

    def __init__(self, *, _seal: object, kind: str, n: int, assignment: np.ndarray, order: np.ndarray,
                 record: dict[str, Any]) -> None:
        if _seal is not _SEAL:
            raise TypeError("PositionalSplit is drawn with PositionalSplit.permuted(...) or .independent(...), "
                            "never built from an assignment")
        self.kind = kind
        self.n = n
        self._assignment = assignment
        self._order = order
        self._record = record
        self.sizes = tuple(int(s) for s in np.bincount(assignment[assignment >= 0], minlength=record["parts"]))
        self._assignment.setflags(write=False)
        self._order.setflags(write=False)

    # --- drawing ------------------------------------------------------------------------------

    @classmethod
    def permuted(cls, n: int, sizes: Sequence[int], *, rng: np.random.Generator) -> PositionalSplit:
        """Cut a uniformly random permutation of the positions, drawn from ``rng``, at ``sizes``.

        ``rng`` must be a stream that never saw the data (a seeded child stream, or a release
        source's ``generator(purpose)``); its state before the draw is recorded so the split can
        be redrawn. Valid for parallel composition under replace-one only (module docstring).
        """
        n = _count(n)
        sizes = _sizes(sizes, n)
        state = _stream_state(rng)
        return cls._permuted(n, sizes, rng, state)

    @classmethod
    def _permuted(cls, n: int, sizes: tuple[int, ...], rng: np.random.Generator,
                  state: dict[str, Any]) -> PositionalSplit:
        order = rng.permutation(n)
        assignment = np.full(n, -1, dtype=np.int64)
        assignment[order[: sum(sizes)]] = np.repeat(np.arange(len(sizes)), sizes)
        record = {"kind": "permuted", "n": n, "parts": len(sizes), "sizes": list(sizes), "stream": state}
        return cls(_seal=_SEAL, kind="permuted", n=n, assignment=assignment, order=order, record=record)

    @classmethod
    def independent(cls, n: int, parts: int, *, rng: np.random.Generator,
                    weights: Sequence[float] | None = None) -> PositionalSplit:
        """Draw each position's part on its own from ``weights`` (default: equal), from ``rng``.

        Valid for parallel composition under both relations (module docstring); the part sizes
        are random.
        """
        n = _count(n)
        if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 2:
            raise LedgerError(f"parts ({parts!r}) must be an int >= 2")
        probabilities = _weights(weights, int(parts))
        state = _stream_state(rng)
        return cls._independent(n, int(parts), probabilities, rng, state)

    @classmethod
    def _independent(cls, n: int, parts: int, weights: tuple[float, ...], rng: np.random.Generator,
                     state: dict[str, Any]) -> PositionalSplit:
        assignment = rng.choice(parts, size=n, p=np.asarray(weights)).astype(np.int64)
        record = {"kind": "independent", "n": n, "parts": parts, "weights": list(weights), "stream": state}
        return cls(_seal=_SEAL, kind="independent", n=n, assignment=assignment,
                   order=np.arange(n, dtype=np.int64), record=record)

    # --- record -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """What redraws this split: kind, ``n``, sizes or weights, and the stream's state."""
        return copy.deepcopy(self._record)

    def public_dict(self) -> dict[str, Any]:
        """What a published ledger says of the split: its kind only (``n`` and the stream would
        disclose the record count); such a record cannot be redrawn."""
        return {"kind": self.kind, "withheld": WITHHELD}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PositionalSplit:
        """Redraw a split from its :meth:`to_dict` record.

        Raises:
            TypeError: ``d`` is not a mapping.
            LedgerError: a missing or unknown key, a kind not in :data:`SPLIT_KINDS`, sizes that
                do not fit ``n``, or a stream state that cannot be restored.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"split ({d!r}) must be a mapping")
        kind = _kind(d.get("kind"))
        expected = {"kind", "n", "parts", "stream", "sizes" if kind == "permuted" else "weights"}
        if set(d) != expected:
            raise LedgerError(f"split keys ({sorted(d)!r}) must be {sorted(expected)} to redraw a {kind} split")
        n = _count(d["n"])
        rng = _restore_stream(d["stream"])
        if kind == "permuted":
            sizes = _sizes(d["sizes"], n)
            if len(sizes) != d["parts"]:
                raise LedgerError(f"split parts ({d['parts']!r}) must equal the number of sizes ({len(sizes)})")
            return cls._permuted(n, sizes, rng, copy.deepcopy(dict(d["stream"])))
        parts = d["parts"]
        if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2:
            raise LedgerError(f"split parts ({parts!r}) must be an int >= 2")
        return cls._independent(n, parts, _weights(d["weights"], parts), rng, copy.deepcopy(dict(d["stream"])))

    # --- use ----------------------------------------------------------------------------------

    @property
    def n_parts(self) -> int:
        return int(self._record["parts"])

    @property
    def plan(self) -> SplitPlan:
        """The kind of this split, as a plan names it."""
        return SplitPlan(self.kind)

    def refusal(self, relation: NeighbouringRelation) -> str | None:
        """Why this split cannot compose in parallel under ``relation`` (``None``: it can)."""
        return relation_refusal(self.kind, relation)

    def check_record_count(self, n: int, *, what: str = "the data") -> None:
        """Raise unless the split was drawn for ``n`` records.

        Raises:
            LedgerError: ``n`` differs from the split's (the message names both).
        """
        if n != self.n:
            raise LedgerError(f"split n ({self.n}) must equal the number of records of {what} ({n}); draw the "
                              "split for this data")

    def part_of(self, position: int) -> int:
        """The part holding ``position``, or −1 when it is in none."""
        return int(self._assignment[position])

    def positions(self, part: int) -> np.ndarray:
        """The positions of ``part``, in increasing order."""
        self._check_part(part)
        return np.flatnonzero(self._assignment == part)

    def members(self, part: int) -> np.ndarray:
        """The positions of ``part`` in the order they were drawn (a permutation's order)."""
        self._check_part(part)
        return self._order[self._assignment[self._order] == part]

    def unassigned(self) -> np.ndarray:
        """The positions in no part, in the order they were drawn."""
        return self._order[self._assignment[self._order] < 0]

    def _check_part(self, part: int) -> None:
        if not 0 <= part < self.n_parts:
            raise LedgerError(f"part ({part!r}) must be in [0, {self.n_parts})")

    def __repr__(self) -> str:
        return f"PositionalSplit(kind={self.kind!r}, n={self.n}, sizes={self.sizes})"


def split_from_dict(d: Mapping[str, Any]) -> PositionalSplit | SplitPlan:
    """A partition's recorded split: a plan (``{"kind", "planned": true}``) or a drawn split,
    which is redrawn (:meth:`PositionalSplit.from_dict`)."""
    if isinstance(d, Mapping) and "withheld" in d:
        raise LedgerError(f"split ({dict(d)!r}) was published without {WITHHELD}; a published ledger cannot be "
                          "read back as a ledger (read the run's own ledger, e.g. privlab ledger RUN_ID)")
    if isinstance(d, Mapping) and d.get("planned") is True:
        if set(d) != {"kind", "planned"}:
            raise LedgerError(f"planned split keys ({sorted(d)!r}) must be ['kind', 'planned']")
        return SplitPlan(_kind(d["kind"]))
    return PositionalSplit.from_dict(d)


def _stream_state(rng: object) -> dict[str, Any]:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
    state = rng.bit_generator.state
    if state.get("bit_generator") not in _BIT_GENERATORS:
        raise LedgerError(f"rng's bit generator ({state.get('bit_generator')!r}) must be one of "
                          f"{list(_BIT_GENERATORS)} so the split can be redrawn")
    return _plain(state)


def _plain(value: Any) -> Any:
    """A bit generator's state as JSON-ready data (arrays become lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [int(x) for x in value.tolist()]
    if isinstance(value, np.integer):
        return int(value)
    return value


def _restore_stream(state: object) -> np.random.Generator:
    if not isinstance(state, Mapping) or state.get("bit_generator") not in _BIT_GENERATORS:
        raise LedgerError(f"split stream ({state!r}) must be a recorded state of one of {list(_BIT_GENERATORS)}")
    bit_generator = getattr(np.random, state["bit_generator"])()
    restored = {k: (np.asarray(v, dtype=np.uint64) if isinstance(v, list) else v) for k, v in state.items()}
    if isinstance(restored.get("state"), Mapping):
        inner = np.uint32 if state["bit_generator"] == "MT19937" else np.uint64
        restored["state"] = {k: (np.asarray(v, dtype=inner) if isinstance(v, list) else v)
                             for k, v in restored["state"].items()}
    try:
        bit_generator.state = restored
    except (TypeError, ValueError, KeyError) as error:
        raise LedgerError(f"split stream ({state!r}) cannot be restored: {error}") from None
    return np.random.Generator(bit_generator)
