"""Record-level faithfulness: the share of candidate records left without a similar private one.

A candidate ``S`` is β-faithful to the transformed private data ``R`` (``|S| = |R| = n``) when
some one-to-one matching pairs at least ``βn`` candidate records with a private record at cost
``c(s, r) ≤ 1``. The criterion's error measure is ``1 − β_max(R, S)``, where ``β_max`` is the
largest such share (Hod & Canetti 2024, Definitions 4-5), released with the Laplace mechanism
at sensitivity ``1/n`` (Proposition 10).

The cost rule (``c ≤ 1``) is declared in the spec and is dataset-agnostic. With the paper's
rule (Section 4.5.5) over the NVSS-style columns::

    [[acceptance]]
    kind = "faithfulness"
    name = "faithfulness"
    threshold = 0.05
    epsilon = 0.01
    exact = ["date_of_birth", "parity", "is_female"]
    within_one_bin = ["mother_age", "gestation_week", "birth_weight"]
    max_fuzzy_columns = 1
    exact_if_bin_contains = { mother_age = [37] }

Two records are then within cost 1 when

* every ``exact`` column has the same code;
* every ``within_one_bin`` column differs by at most one code (the codes of an ordered numeric
  column are its bins in order, so one code is one bin up or down), and at most
  ``max_fuzzy_columns`` of them differ at all;
* a *pinned* bin matches only itself: when either record's code in a ``within_one_bin``
  column is pinned, the two codes must be equal. A bin is pinned by ``exact_bins`` (its label)
  or by ``exact_if_bin_contains``: a bin whose label describes an interval with one of the
  listed values strictly inside it, not on an edge as written. ``"35-39"`` pins for 37,
  ``"37-39"`` and ``"35-37"`` do not, so the rule follows the binning alternative without
  changing the spec (the paper's footnote on the value 37).
* Columns in ``ignore`` are not compared. Every domain column must be in exactly one of
  ``exact``, ``within_one_bin`` and ``ignore``, so a new column is never silently skipped.

Labels read by ``exact_if_bin_contains`` (spaces ignored; ``a``, ``b`` are numbers):
``a-b`` / ``a–b`` / ``a..b`` (the closed range ``[a, b]``), interval notation ``[a, b)``,
``(a, b]`` and so on, one-sided ``<a``, ``<=a``, ``≤a``, ``>a``, ``>=a``, ``≥a``, ``a<``
("above a", the paper's ``44<``), ``a<=``, ``a≤``, ``a+``, and a single number ``a`` (no
interior). Any other label in that column is a :class:`SpecError`; pin such bins by label with
``exact_bins`` instead.

Algorithm. Records are discrete and repeat, so the matching is computed between equivalence
classes (distinct records) with their multiplicities as capacities: a maximum flow on
``source → S-classes → R-classes → sink``. Each record is packed into one int64 key (the
``exact`` columns ranked to a dense id, the ``within_one_bin`` codes in mixed radix), so a
neighbour one bin away in column ``j`` is the key ``± stride_j``; each S-class looks up its
at most ``Σ_{i ≤ k} C(F, i)·2^i`` neighbours (``1 + 2F`` for ``k = 1``, ``F`` fuzzy columns)
among the sorted R-class keys with a binary search. Neither the ``n × n`` nor the
classes × classes matrix is ever built. The flow is Dinic's algorithm
(:func:`scipy.sparse.csgraph.maximum_flow`) on integer capacities; an integral maximum flow
decomposes into a row-level matching of the same size and vice versa, so the flow value is
``n·β_max``. Cost: ``O(n log n)`` for the keys and classes, ``O(C·m log C)`` for the
``m = Σ C(F, i)·2^i`` look-ups of ``C`` classes, then Dinic on ``O(C)`` vertices and
``O(C·m)`` edges: 0.1-0.6 s for a whole release on 160,000-166,000 births-like records per
side on one core (``benchmarks/faithfulness.py``).

Privacy:
    Replace-one neighbouring with ``n`` and the candidate ``S`` public (Section 4.4.2). Replacing
    one private record changes the maximum matching by at most one pair (Proposition 10), so the
    error ``1 − β_max`` has sensitivity ``1/n``; the criterion spends its whole ε on one Laplace
    release, charged to the ledger with that sensitivity and scale (research: ``(1/n)/ε``;
    release: the lattice scale of :func:`~privlab.mechanisms.basic.laplace.laplace_mechanism`).
    The exact error and the :class:`ClassGraph` are not private: the exact value leaves only in
    research mode (base class), and the graph is for tests, reports and benchmarks in research.
    The run time of the flow depends on the private data (a timing side channel this module does
    not hide).

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of Live
    Births", Section 3.5.1 (Definitions 4-5) and Section 4.5.5 (cost rule, T = 0.05,
    Proposition 10); Dinic (1970) for the maximum flow.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import maximum_flow

from privlab.mechanisms.acceptance.base import (
    AcceptanceCriterion,
    check_same_size,
    checked_record_count,
    register_criterion,
)
from privlab.mechanisms.tabular.domain import CODE_DTYPE, ColumnDomain, Domain
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import Interval, Unconstrained

_KEY_LIMIT = 2**62  # packed record keys stay below this, so key ± stride never overflows int64
_MAX_ROWS = 2**31 - 1  # scipy's maximum_flow takes int32 capacities


# --- interval labels ------------------------------------------------------------------------

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^({_NUMBER})(?:-|–|—|\.\.)({_NUMBER})$")
_BRACKETS = re.compile(rf"^[\[(]({_NUMBER}),({_NUMBER})[\])]$")
_BELOW = re.compile(rf"^(?:<|<=|≤)({_NUMBER})$|^({_NUMBER})(?:>|>=|≥)$")
_ABOVE = re.compile(rf"^(?:>|>=|≥)({_NUMBER})$|^({_NUMBER})(?:<|<=|≤|\+)$")
_SINGLE = re.compile(rf"^({_NUMBER})$")

LABEL_GRAMMAR = "a-b, a..b, [a, b), (a, b], <a, <=a, ≤a, >a, >=a, ≥a, a<, a<=, a≤, a+, or a single number a"


def bin_interval(label: str) -> tuple[float, float] | None:
    """The bounds ``(low, high)`` a bin label describes, as written; ``None`` if not an interval.

    Open sides are infinite. Whether an end is open or closed does not matter to
    :func:`value_in_interior`, which asks for a value strictly between the bounds.

    Examples: ``"35-39"`` → ``(35, 39)``; ``"<18"`` → ``(-inf, 18)``; ``"44<"`` → ``(44, inf)``;
    ``"[1500, 1600)"`` → ``(1500, 1600)``; ``"37"`` → ``(37, 37)``; ``"F"`` → ``None``.
    """
    text = re.sub(r"\s+", "", label)
    for pattern in (_RANGE, _BRACKETS):
        match = pattern.match(text)
        if match:
            low, high = float(match.group(1)), float(match.group(2))
            return (low, high) if low <= high else None
    match = _BELOW.match(text)
    if match:
        return (-math.inf, float(match.group(1) or match.group(2)))
    match = _ABOVE.match(text)
    if match:
        return (float(match.group(1) or match.group(2)), math.inf)
    match = _SINGLE.match(text)
    if match:
        value = float(match.group(1))
        return (value, value)
    return None


def value_in_interior(label: str, value: float) -> bool | None:
    """Whether ``value`` lies strictly inside the interval ``label`` describes (``None``: no interval)."""
    interval = bin_interval(label)
    if interval is None:
        return None
    low, high = interval
    return low < value < high


# --- the class graph ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ClassGraph:
    """The bipartite graph between distinct candidate and distinct private records.

    Class ``i`` of the candidate (S) holds ``s_counts[i]`` identical records, class ``j`` of
    the private data (R) ``r_counts[j]``; edge ``e`` joins S-class ``edge_s[e]`` and R-class
    ``edge_r[e]`` when their records are within cost 1. Derived from the private data without
    DP: for research, tests and benchmarks only.
    """

    n: int
    s_counts: np.ndarray
    r_counts: np.ndarray
    edge_s: np.ndarray
    edge_r: np.ndarray

    @property
    def n_s_classes(self) -> int:
        return int(self.s_counts.size)

    @property
    def n_r_classes(self) -> int:
        return int(self.r_counts.size)

    @property
    def n_edges(self) -> int:
        return int(self.edge_s.size)

    def max_matching(self) -> int:
        """The size of a maximum row-level matching (``n·β_max``), by Dinic's maximum flow.

        Vertices: 0 the source, ``1 … C_S`` the S-classes (capacity ``s_counts`` from the
        source), then the R-classes (capacity ``r_counts`` to the sink), then the sink; each
        class edge has capacity ``min(s_count, r_count)``, which never binds below the
        vertex capacities. Integral capacities give an integral maximum flow, which is a
        row-level matching of the same size.
        """
        if self.n_edges == 0:
            return 0
        n_s, n_r = self.n_s_classes, self.n_r_classes
        sink = n_s + n_r + 1
        rows = np.concatenate([np.zeros(n_s, np.int64), 1 + self.edge_s, np.arange(n_r, dtype=np.int64) + 1 + n_s])
        cols = np.concatenate([np.arange(n_s, dtype=np.int64) + 1, 1 + n_s + self.edge_r, np.full(n_r, sink, np.int64)])
        capacity = np.concatenate(
            [self.s_counts, np.minimum(self.s_counts[self.edge_s], self.r_counts[self.edge_r]), self.r_counts]
        ).astype(np.int32)
        graph = sparse.csr_array((capacity, (rows, cols)), shape=(sink + 1, sink + 1))
        return int(maximum_flow(graph, 0, sink, method="dinic").flow_value)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class _Rule:
    """The cost rule resolved against a domain (column positions, sizes, pinned codes)."""

    exact: tuple[str, ...]
    fuzzy: tuple[str, ...]
    sizes: tuple[int, ...]  # of the fuzzy columns
    pinned: tuple[np.ndarray, ...]  # per fuzzy column: bool per code, True = must match exactly
    max_fuzzy: int

    def step_allowed(self, column: int, delta: int) -> np.ndarray:
        """Per code ``a``: may a record move from ``a`` to ``a + delta`` (``delta`` = ±1)?"""
        size, pinned = self.sizes[column], self.pinned[column]
        allowed = np.zeros(size, dtype=bool)
        if size > 1:
            if delta == 1:
                allowed[:-1] = ~pinned[:-1] & ~pinned[1:]
            else:
                allowed[1:] = ~pinned[1:] & ~pinned[:-1]
        return allowed

    def moves(self) -> Iterator[tuple[tuple[int, int], ...]]:
        """Every neighbour offset: at most ``max_fuzzy`` fuzzy columns, each moved by ±1."""
        for count in range(min(self.max_fuzzy, len(self.fuzzy)) + 1):
            for columns in itertools.combinations(range(len(self.fuzzy)), count):
                for signs in itertools.product((-1, 1), repeat=count):
                    yield tuple(zip(columns, signs, strict=True))


# --- the criterion --------------------------------------------------------------------------


@register_criterion
@dataclasses.dataclass(frozen=True, kw_only=True)
class FaithfulnessCriterion(AcceptanceCriterion):
    """Faithfulness ``E_ff(R, S) = 1 − β_max(R, S)`` against a threshold, released with Laplace.

    Args:
        name: Unique name of the criterion in the spec.
        threshold: ``T`` in (0, 1]; the candidate passes when the noisy error is below it
            (the paper uses 0.05: at most 5% of candidate records unmatched).
        epsilon: The criterion's privacy budget (> 0).
        exact: Columns whose codes must be equal.
        within_one_bin: Ordered numeric columns whose codes may differ by one (one bin up or
            down).
        max_fuzzy_columns: How many ``within_one_bin`` columns may differ in one pair
            (the paper: 1). 0 makes every column exact.
        exact_if_bin_contains: ``{column: [values]}``: in these ``within_one_bin`` columns, a
            bin whose label has one of the values strictly inside it matches only itself.
        exact_bins: ``{column: [labels]}``: bins named by label that match only themselves.
        ignore: Columns the cost does not look at.

    Raises:
        SpecError: A hyperparameter is invalid (on construction), or the rule does not fit the
            domain (on use): a column unknown or uncovered, a nominal ``within_one_bin``
            column, an unknown label, an unreadable label for ``exact_if_bin_contains``.

    Privacy:
        ε-DP under replace-one neighbouring of ``R`` with ``n`` and ``S`` public: the error has
        sensitivity ``1/n`` (Hod & Canetti 2024, Proposition 10) and is released once with the
        Laplace mechanism using the whole ε; no other private quantity leaves the mechanism
        in release mode.

    References:
        Hod & Canetti (2024), Definitions 4-5 (Section 3.5.1) and Section 4.5.5.
    """

    kind: ClassVar[str] = "faithfulness"
    description: ClassVar[str] = ("record-level faithfulness (share of records that cannot be matched to a close "
                                  "original record)")
    any_size: ClassVar[bool] = False  # a one-to-one matching of records: |R| = |S| needed

    exact: Sequence[str]
    within_one_bin: Sequence[str]
    max_fuzzy_columns: int = 1
    exact_if_bin_contains: Mapping[str, Sequence[float]] = dataclasses.field(default_factory=dict)
    exact_bins: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    ignore: Sequence[str] = ()

    _parameter_constraints: ClassVar = {
        **AcceptanceCriterion._parameter_constraints, "threshold": [Interval(numbers.Real, 0, 1, closed="right")],
        "exact": [Unconstrained()], "within_one_bin": [Unconstrained()],
        "max_fuzzy_columns": [Interval(numbers.Integral, 0, None, closed="left")],
        "exact_if_bin_contains": [Unconstrained()], "exact_bins": [Unconstrained()], "ignore": [Unconstrained()]}
    _parameter_hints: ClassVar = {**AcceptanceCriterion._parameter_hints,
                                  "threshold": "the error is the share of unmatched records"}

    def _check_together(self) -> None:
        super()._check_together()
        lists = {label: self._column_list(label) for label in ("exact", "within_one_bin", "ignore")}
        for first, second in itertools.combinations(lists, 2):
            both = sorted(set(lists[first]) & set(lists[second]))
            if both:
                raise SpecError(
                    f"criterion {self.name!r}: column(s) {', '.join(map(repr, both))} are listed in both {first} "
                    f"and {second}; list each column once"
                )
        if not lists["exact"] and not lists["within_one_bin"]:
            raise SpecError(
                f"criterion {self.name!r}: exact and within_one_bin are both empty; the cost must compare "
                "at least one column"
            )
        for label, names in lists.items():
            object.__setattr__(self, label, names)
        object.__setattr__(self, "max_fuzzy_columns", int(self.max_fuzzy_columns))
        values = self._pin_table("exact_if_bin_contains", _finite_number, "finite numbers")
        labels = self._pin_table("exact_bins", _label, "bin labels (strings)")
        object.__setattr__(self, "exact_if_bin_contains", values)
        object.__setattr__(self, "exact_bins", labels)

    def _column_list(self, label: str) -> tuple[str, ...]:
        value = getattr(self, label)
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise SpecError(f"criterion {self.name!r}: {label} ({value!r}) must be a list of column names")
        if not all(isinstance(v, str) and v for v in value):
            raise SpecError(f"criterion {self.name!r}: {label} ({value!r}) must hold non-empty column names")
        repeated = sorted({v for v in value if list(value).count(v) > 1})
        if repeated:
            raise SpecError(f"criterion {self.name!r}: {label} ({value!r}) repeats {', '.join(map(repr, repeated))}")
        return tuple(value)

    def _pin_table(self, label: str, check: Callable[[object], bool], what: str) -> dict[str, tuple[Any, ...]]:
        table = getattr(self, label)
        if not isinstance(table, Mapping):
            raise SpecError(
                f"criterion {self.name!r}: {label} ({table!r}) must be a table {{column = [...]}}"
            )
        out: dict[str, tuple[Any, ...]] = {}
        for column, entries in table.items():
            if column not in self.within_one_bin:
                where = "is exact already; drop it" if column in self.exact else "is not a within_one_bin column"
                raise SpecError(f"criterion {self.name!r}: {label} column {column!r} {where}")
            if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence) or not entries:
                raise SpecError(
                    f"criterion {self.name!r}: {label}.{column} ({entries!r}) must be a non-empty list of {what}"
                )
            if not all(check(e) for e in entries):
                raise SpecError(f"criterion {self.name!r}: {label}.{column} ({entries!r}) must hold {what}")
            out[str(column)] = tuple(entries)
        return out

    # --- the rule on a domain ------------------------------------------------------------

    def _rule(self, domain: Domain) -> _Rule:
        named = {*self.exact, *self.within_one_bin, *self.ignore}
        unknown = sorted(named - set(domain.names))
        if unknown:
            raise SpecError(
                f"criterion {self.name!r}: column(s) {', '.join(map(repr, unknown))} are not in the domain; "
                f"it has {', '.join(domain.names)}"
            )
        uncovered = [c for c in domain.names if c not in named]
        if uncovered:
            raise SpecError(
                f"criterion {self.name!r}: domain column(s) {', '.join(map(repr, uncovered))} are in none of "
                "exact, within_one_bin and ignore; list each one where it belongs"
            )
        pinned = []
        for name in self.within_one_bin:
            column = domain[name]
            if not column.numeric:
                raise SpecError(
                    f"criterion {self.name!r}: within_one_bin column {name!r} is nominal (its codes have no "
                    "order); list it in exact"
                )
            pinned.append(self._pinned_codes(column))
        return _Rule(
            exact=tuple(self.exact),
            fuzzy=tuple(self.within_one_bin),
            sizes=tuple(domain[c].size for c in self.within_one_bin),
            pinned=tuple(pinned),
            max_fuzzy=self.max_fuzzy_columns,
        )

    def _pinned_codes(self, column: ColumnDomain) -> np.ndarray:
        pinned = np.zeros(column.size, dtype=bool)
        for label in self.exact_bins.get(column.name, ()):
            if label not in column.labels:
                raise SpecError(
                    f"criterion {self.name!r}: exact_bins.{column.name} label {label!r} is not a bin of "
                    f"{column.name!r}; its labels are {', '.join(map(repr, column.labels))}"
                )
            pinned[column.labels.index(label)] = True
        values = self.exact_if_bin_contains.get(column.name, ())
        if values:
            for code, label in enumerate(column.labels):
                interval = bin_interval(label)
                if interval is None:
                    raise SpecError(
                        f"criterion {self.name!r}: exact_if_bin_contains.{column.name} needs interval labels, but "
                        f"{label!r} is not one ({LABEL_GRAMMAR}); pin the bins by label with exact_bins instead"
                    )
                pinned[code] |= any(interval[0] < v < interval[1] for v in values)
        return pinned

    def pinned_codes(self, *, domain: Domain) -> dict[str, tuple[int, ...]]:
        """The codes of each ``within_one_bin`` column that match only themselves on ``domain``."""
        rule = self._rule(domain)
        return {name: tuple(np.flatnonzero(p).tolist()) for name, p in zip(rule.fuzzy, rule.pinned, strict=True)}

    # --- the cost and the matching ---------------------------------------------------------

    def compatible(self, candidate: pd.DataFrame, transformed: pd.DataFrame, *, domain: Domain) -> np.ndarray:
        """Row ``i`` of the result: is ``c(candidate[i], transformed[i]) ≤ 1``? (aligned rows).

        Raises:
            SpecError: The rule does not fit ``domain``, or the frames differ in length.
            SchemaError: A frame does not hold the domain's codes.
        """
        rule = self._rule(domain)
        if len(candidate) != len(transformed):
            raise SpecError(
                f"criterion {self.name!r}: compatible() compares aligned rows; got {len(candidate)} and "
                f"{len(transformed)} rows"
            )
        s = domain.validate(candidate, what=f"criterion {self.name!r}: candidate")
        r = domain.validate(transformed, what=f"criterion {self.name!r}: transformed data")
        ok = np.ones(len(s), dtype=bool)
        for name in rule.exact:
            ok &= s[name].to_numpy() == r[name].to_numpy()
        differing = np.zeros(len(s), dtype=np.int64)
        for name, pinned in zip(rule.fuzzy, rule.pinned, strict=True):
            a, b = s[name].to_numpy(), r[name].to_numpy()
            differ = a != b
            ok &= np.abs(a - b) <= 1
            ok &= ~(differ & (pinned[a] | pinned[b]))
            differing += differ
        return ok & (differing <= rule.max_fuzzy)

    def class_graph(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> ClassGraph:
        """The class graph whose maximum flow is ``n·β_max`` (see the module docstring).

        Raises:
            SpecError: The rule does not fit ``domain``; the frames are empty or differ in
                length; the ``within_one_bin`` columns have too many joint bins for 62-bit keys.
            SchemaError: A frame does not hold the domain's codes.
        """
        rule = self._rule(domain)
        check_same_size(transformed, candidate, name=self.name)
        n = len(candidate)
        if n > _MAX_ROWS:
            raise SpecError(f"criterion {self.name!r}: n ({n}) must be below 2**31 for the int32 flow capacities")
        s = _columns(domain.validate(candidate, what=f"criterion {self.name!r}: candidate"))
        r = _columns(domain.validate(transformed, what=f"criterion {self.name!r}: transformed data"))
        s_key, r_key, strides = self._keys(rule, s, r, domain=domain)

        s_classes, s_first, s_counts = np.unique(s_key, return_index=True, return_counts=True)
        r_classes, r_counts = np.unique(r_key, return_counts=True)
        s_fuzzy = np.column_stack([s[c][s_first] for c in rule.fuzzy]) if rule.fuzzy else None
        allowed = {(j, d): rule.step_allowed(j, d) for j in range(len(rule.fuzzy)) for d in (-1, 1)}

        sources, targets = [], []
        for move in rule.moves():
            neighbour = s_classes.copy()
            valid = np.ones(s_classes.size, dtype=bool)
            for j, d in move:
                valid &= allowed[j, d][s_fuzzy[:, j]]  # type: ignore[index]
                neighbour += d * strides[j]
            which = np.flatnonzero(valid)
            neighbour = neighbour[which]
            position = np.minimum(np.searchsorted(r_classes, neighbour), r_classes.size - 1)
            hit = r_classes[position] == neighbour
            sources.append(which[hit])
            targets.append(position[hit])
        return ClassGraph(
            n=n,
            s_counts=s_counts.astype(np.int64),
            r_counts=r_counts.astype(np.int64),
            edge_s=np.concatenate(sources).astype(np.int64),
            edge_r=np.concatenate(targets).astype(np.int64),
        )

    def _keys(
        self, rule: _Rule, s: Mapping[str, np.ndarray], r: Mapping[str, np.ndarray], *, domain: Domain
    ) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        """One int64 key per record: dense id of the exact columns, then the fuzzy codes in radix.

        The exact id is built over both frames at once (so equal records get equal keys) in
        mixed radix, re-ranked densely whenever the next column would pass the key limit.
        """
        n = len(next(iter(s.values())))
        exact_id = np.zeros(2 * n, dtype=CODE_DTYPE)
        bound = 1
        for name in rule.exact:
            size = domain[name].size
            if bound * size >= _KEY_LIMIT:
                exact_id, bound = _dense(exact_id)
            exact_id = exact_id * size + np.concatenate([s[name], r[name]])
            bound *= size
        radix = math.prod(rule.sizes)
        if bound * radix >= _KEY_LIMIT:
            exact_id, bound = _dense(exact_id)
        if bound * radix >= _KEY_LIMIT:
            raise SpecError(
                f"criterion {self.name!r}: the within_one_bin columns have {radix} joint bins, too many for "
                "62-bit record keys; move some of them to exact"
            )
        strides = tuple(int(math.prod(rule.sizes[j + 1:])) for j in range(len(rule.sizes)))
        key = exact_id * radix
        for name, stride in zip(rule.fuzzy, strides, strict=True):
            key += stride * np.concatenate([s[name], r[name]])
        return key[:n], key[n:], strides

    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """``1 − β_max(R, S)``: the share of candidate records a maximum matching leaves unmatched.

        Raises:
            SpecError: The rule does not fit ``domain``, or the frames are empty or differ in length.
            SchemaError: A frame does not hold the domain's codes.
        """
        graph = self.class_graph(transformed, candidate, domain=domain)
        return (graph.n - graph.max_matching()) / graph.n

    def sensitivity(self, n: int) -> float:
        """``1/n`` (Hod & Canetti 2024, Proposition 10)."""
        return 1.0 / checked_record_count(n)


def _columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    return {str(name): frame[name].to_numpy() for name in frame.columns}


def _dense(key: np.ndarray) -> tuple[np.ndarray, int]:
    unique, inverse = np.unique(key, return_inverse=True)
    return inverse.astype(CODE_DTYPE), int(unique.size)


def _finite_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def _label(value: object) -> bool:
    return isinstance(value, str) and bool(value)


__all__ = [
    "LABEL_GRAMMAR",
    "ClassGraph",
    "FaithfulnessCriterion",
    "bin_interval",
    "value_in_interior",
]
