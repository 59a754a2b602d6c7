"""DP structure learning: noisy entropies, CFS merit and greedy parent selection (Section 3.3).

The structure is a DAG over the m attributes. Attribute i's parents enter its conditional
distribution through their bucketised values bkt(x_j) (eq. 7); bucketisations are public
(Section 4: they follow the data format, not the data).

Steps:

1. **Noisy entropies** (eq. 8): H̃(z) = H(z) + Lap(Δ_H/ε_step) for every query z of
   :func:`entropy_queries` — H(x_i) for every i, H(bkt(x_j)) for every j whose bucketisation is
   not the identity (otherwise it is the same query as H(x_j) and is not asked twice), and
   H(x_i, bkt(x_j)) for every ordered pair i ≠ j: at most m(m+1) queries, the paper's count.
   Δ_H = h(1/n_T) nats (:func:`.entropy.entropy_sensitivity`, replace-one, n_T public).
2. **Correlations** (eq. 5), symmetrical uncertainty from noisy entropies, clipped to [0, 1]
   (the paper: "make sure the correlation metric remains in the [0, 1] range"):
   r(i, j) = 2 − 2·H̃(x_i, bkt x_j)/(H̃(x_i) + H̃(bkt x_j)); 0 when the denominator is ≤ 0.
   Between two candidate parents j, l we use the mean of r(j, l) and r(l, j), which needs
   no further query (the paper does not say which entropies it uses there).
3. **CFS merit** (eq. 4, Hall's form): score(P) = Σ_{j∈P} r(i, j) / sqrt(|P| + Σ_{j≠l∈P} r(j, l))
   over ordered pairs; score(∅) = 0.
4. **Greedy selection** under acyclicity and cost(P) = ∏_{j∈P} |bkt(x_j)| ≤ maxcost (eq. 6):
   starting from empty parent sets, repeatedly add the single edge j → i, over all targets i
   and candidates j, that most increases its target's score while keeping the graph acyclic
   and within maxcost; stop when no edge increases a score. Ties go to the lowest (i, j).
   (The paper's greedy is per target; taking the best improvement over all targets makes the
   result independent of the order in which targets are visited.)
5. **Dependency order σ**: a topological order (Kahn), the lowest attribute index first among
   those ready, so σ is a deterministic function of the DAG.

Privacy:
    Each entropy query is one Laplace release recorded in the ledger (ε_step, Δ_H, scale
    Δ_H/ε_step); steps 2–5 are post-processing of the noisy entropies and public inputs
    (domain, bucketisation, maxcost), so the structure is DP with the entropies' composed ε.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3.3, eqs. (4)–(8); Hall, "Correlation-
    based Feature Selection for Machine Learning" (1999).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.plausible_deniability.entropy import empirical_entropy
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SchemaError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource

__all__ = [
    "Bucketing",
    "EntropyQuery",
    "Structure",
    "correlations",
    "dependency_order",
    "entropy_queries",
    "greedy_parents",
    "merit",
    "noisy_entropies",
]


@dataclasses.dataclass(frozen=True)
class Bucketing:
    """Public bucketisations bkt(): for each attribute, the bucket of each code (eq. 7).

    Attributes:
        maps: One int64 array per attribute (domain order), ``maps[j][code] = bucket``, with
            buckets 0..B_j−1 all used.
    """

    maps: tuple[np.ndarray, ...]

    @classmethod
    def build(cls, domain: Domain, buckets: Mapping[str, Sequence[int]] | None = None) -> Bucketing:
        """Identity for every attribute not in ``buckets``.

        Raises:
            SchemaError: an unknown attribute, a map of the wrong length, or buckets that are
                not exactly 0..B−1.
        """
        buckets = dict(buckets or {})
        unknown = sorted(set(buckets) - set(domain.names))
        if unknown:
            raise SchemaError(f"buckets ({unknown!r}) must name attributes of the domain ({list(domain.names)})")
        maps = []
        for column in domain:
            if column.name not in buckets:
                maps.append(np.arange(column.size, dtype=np.int64))
                continue
            m = np.asarray(buckets[column.name], dtype=np.int64)
            if m.shape != (column.size,):
                raise SchemaError(f"buckets[{column.name!r}] ({list(buckets[column.name])!r}) must have one "
                                  f"bucket per code ({column.size})")
            if m.min() != 0 or set(m.tolist()) != set(range(int(m.max()) + 1)):
                raise SchemaError(f"buckets[{column.name!r}] ({m.tolist()!r}) must use every bucket 0..B-1")
            maps.append(m)
        return cls(tuple(maps))

    def size(self, j: int) -> int:
        """|bkt(x_j)|, the number of buckets of attribute j."""
        return int(self.maps[j].max()) + 1

    def is_identity(self, j: int) -> bool:
        return bool(np.array_equal(self.maps[j], np.arange(len(self.maps[j]))))


@dataclasses.dataclass(frozen=True)
class EntropyQuery:
    """One entropy asked of D_T: H(x_target) (``parent`` None), H(bkt x_parent) (``target``
    None) or H(x_target, bkt x_parent)."""

    target: int | None
    parent: int | None

    def label(self, names: Sequence[str]) -> str:
        if self.parent is None:
            return f"H({names[self.target]})"
        if self.target is None:
            return f"H(bkt {names[self.parent]})"
        return f"H({names[self.target]},bkt {names[self.parent]})"


def entropy_queries(m: int, bucketing: Bucketing) -> tuple[EntropyQuery, ...]:
    """The queries of step 1, in a fixed public order (module docstring)."""
    out = [EntropyQuery(i, None) for i in range(m)]
    out += [EntropyQuery(None, j) for j in range(m) if not bucketing.is_identity(j)]
    out += [EntropyQuery(i, j) for i in range(m) for j in range(m) if i != j]
    return tuple(out)


def _exact_entropy(codes: np.ndarray, query: EntropyQuery, domain: Domain, bucketing: Bucketing) -> float:
    if query.parent is None:
        return empirical_entropy(np.bincount(codes[:, query.target], minlength=domain.sizes[query.target]))
    parent = bucketing.maps[query.parent][codes[:, query.parent]]
    if query.target is None:
        return empirical_entropy(np.bincount(parent, minlength=bucketing.size(query.parent)))
    joint = codes[:, query.target] * bucketing.size(query.parent) + parent
    return empirical_entropy(np.bincount(joint))


def noisy_entropies(
    codes: np.ndarray, *, domain: Domain, bucketing: Bucketing, queries: Sequence[EntropyQuery],
    epsilons: Sequence[float], sensitivity: float, source: RandomSource, ledger: Ledger, scope: str,
) -> dict[EntropyQuery, float]:
    """H̃ for each query (eq. 8), each one Laplace release recorded in ``ledger``.

    Args:
        codes: D_T as an (n_T, m) int64 array of codes in domain order.
        queries, epsilons: The queries and their ε, in order.
        sensitivity: Δ_H for n_T (public).

    Returns:
        ``{query: H̃}`` in nats.
    """
    names = domain.names
    return {
        q: float(laplace_mechanism(_exact_entropy(codes, q, domain, bucketing), sensitivity=sensitivity,
                                   epsilon=eps, source=source, ledger=ledger, name=f"pd.entropy {q.label(names)}",
                                   scope=scope, step="pd.structure"))
        for q, eps in zip(queries, epsilons, strict=True)
    }


def _su(joint: float, a: float, b: float) -> float:
    denominator = a + b
    if not denominator > 0.0:
        return 0.0
    return min(1.0, max(0.0, 2.0 - 2.0 * joint / denominator))


def correlations(entropies: Mapping[EntropyQuery, float], m: int, bucketing: Bucketing) -> np.ndarray:
    """r[i, j] = SU(x_i, bkt x_j) from noisy entropies (eq. 5), clipped to [0, 1]; r[i, i] = 0."""
    def single(j: int) -> float:
        key = EntropyQuery(j, None) if bucketing.is_identity(j) else EntropyQuery(None, j)
        return entropies[key]

    r = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i != j:
                r[i, j] = _su(entropies[EntropyQuery(i, j)], entropies[EntropyQuery(i, None)], single(j))
    return r


def merit(target: int, parents: Sequence[int], r: np.ndarray) -> float:
    """CFS score of eq. (4) (module docstring, step 3)."""
    if not parents:
        return 0.0
    numerator = sum(r[target, j] for j in parents)
    inner = sum((r[j, l] + r[l, j]) / 2.0 for j in parents for l in parents if j != l)
    return numerator / math.sqrt(len(parents) + inner)


def _reaches(parents: Sequence[Sequence[int]], start: int, goal: int) -> bool:
    """Whether ``goal`` is an ancestor-or-self of ``start`` along parent edges."""
    stack, seen = [start], set()
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(parents[node])
    return False


def greedy_parents(r: np.ndarray, bucketing: Bucketing, maxcost: int) -> tuple[tuple[int, ...], ...]:
    """Parent sets by the global greedy of step 4: acyclic, each of cost ≤ ``maxcost``."""
    m = r.shape[0]
    parents: list[list[int]] = [[] for _ in range(m)]
    scores = [0.0] * m
    while True:
        best: tuple[float, int, int] | None = None
        for i in range(m):
            cost = math.prod(bucketing.size(j) for j in parents[i])
            for j in range(m):
                if j == i or j in parents[i] or cost * bucketing.size(j) > maxcost:
                    continue
                if _reaches(parents, j, i):  # i is an ancestor of j: j -> i would close a cycle
                    continue
                gain = merit(i, [*parents[i], j], r) - scores[i]
                if gain > 0.0 and (best is None or gain > best[0]):
                    best = (gain, i, j)
        if best is None:
            return tuple(tuple(sorted(p)) for p in parents)
        _, i, j = best
        parents[i].append(j)
        scores[i] = merit(i, parents[i], r)


def dependency_order(parents: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """σ: a topological order, lowest index first among ready attributes (step 5)."""
    m = len(parents)
    remaining = [set(p) for p in parents]
    order: list[int] = []
    while len(order) < m:
        ready = [i for i in range(m) if i not in order and not remaining[i]]
        if not ready:
            raise SchemaError(f"parents ({parents!r}) must form an acyclic graph")
        order.append(ready[0])
        for rest in remaining:
            rest.discard(ready[0])
    return tuple(order)


@dataclasses.dataclass(frozen=True)
class Structure:
    """The learned DAG: parent sets (sorted indices) and the dependency order σ."""

    parents: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
