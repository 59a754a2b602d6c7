"""Complete binary trees grown level by level: all nodes of a level, of all trees, at once.

A forest's rows are a list of (row index, tree) pairs: each row once for trees on disjoint
subsets, every row once per tree for trees on the full data. A node is a group of pairs, so
one pass of ``numpy`` sorting and ``bincount`` serves every node of a level of every tree;
nothing loops over nodes except categorical splits (one small enumeration per such node).

Three ways to propose a node's split on a candidate feature (:class:`Splitter`):

* ``"private_median"`` — DiPriMe: the exponential mechanism over the m + 1 intervals between
  the node's sorted values and its public range [lo, hi], weight
  ``width · exp(ε·(−|i − m/2|)/(2Δ))``, then a value uniform in the chosen interval; for a
  categorical feature, the exponential mechanism over the ways of sending a subset S of the
  node's allowed categories left, utility ``−|N_S − m/2|``. Among K candidate features one is
  chosen with the exponential mechanism on ``−(SSE_left + SSE_right)``.
* ``"exact_median"`` — the non-private median tree (Breiman 2004): the median of the node's
  values (the midpoint of the range when empty), the most balanced category subset, and the
  candidate with the smallest SSE.
* ``"random"`` — DP-ERT / extremely random trees without data: a feature uniformly at random,
  a threshold uniform in the node's public range, a uniformly random category subset.

Sensitivities and budgets are :mod:`privlab.mechanisms.dipreme.privacy`'s; this module only
draws. Sampling the exponential mechanism uses the Gumbel-max trick (exact in law).

References:
    Consul, Williamson & Dagli (2020), Algorithms 1 and 3; Breiman (2004); Geurts, Ernst &
    Wehenkel (2006); Bojarski et al. (2014); Smith (2011).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = ["FeatureLayout", "Splitter", "Trees", "grow", "route"]

MAX_CATEGORIES = 62
"""Categories of one feature are bits of an int64 mask; bit 63 stays free for unknown codes."""


@dataclasses.dataclass(frozen=True)
class FeatureLayout:
    """Public description of the (encoded) features: bounds and categorical code counts."""

    lower: np.ndarray  # (p,) float; for a categorical feature 0
    upper: np.ndarray  # (p,) float; for a categorical feature n_codes - 1
    n_codes: np.ndarray  # (p,) int; 0 for a numeric feature

    @property
    def is_categorical(self) -> np.ndarray:
        return self.n_codes > 0

    @property
    def all_codes(self) -> np.ndarray:
        """Bitmask of every code of each categorical feature (0 for numeric features)."""
        return np.where(self.n_codes > 0, (np.int64(1) << self.n_codes.astype(np.int64)) - 1, 0).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class Splitter:
    """How nodes split. ε arrays hold one value per tree (ε as calibrated, see privacy.py)."""

    kind: str  # "private_median" | "exact_median" | "random"
    candidates: int = 1
    epsilon_median: np.ndarray | None = None  # per tree: one candidate's median at one node
    median_sensitivity: float = 0.5
    epsilon_choice: np.ndarray | None = None  # per tree: one level's feature choice
    choice_sensitivity: float = 1.0


@dataclasses.dataclass(frozen=True)
class Trees:
    """Complete binary trees of depth ``depth`` in heap order (node h has children 2h+1, 2h+2)."""

    feature: np.ndarray  # (T, 2^d - 1) int64
    threshold: np.ndarray  # (T, 2^d - 1) float64: numeric rows with x < threshold go left
    left_codes: np.ndarray  # (T, 2^d - 1) int64: categorical codes (bits) that go left
    depth: int


def grow(X: np.ndarray, rows: np.ndarray, tree_of_row: np.ndarray, n_trees: int, target: np.ndarray,
         n_classes: int, layout: FeatureLayout, splitter: Splitter, max_depth: int,
         rng: np.random.Generator) -> tuple[Trees, np.ndarray]:
    """Grow ``n_trees`` trees of depth ``max_depth``.

    Args:
        X: (n, p) encoded features, inside ``layout``'s bounds (the caller validated them).
        rows: row index of each (row, tree) pair.
        tree_of_row: tree of each pair.
        target: per pair, the regression target (float) or class code (int).
        n_classes: 0 for regression.

    Returns:
        The trees and, per pair (in the given order), its leaf as ``tree · 2^d + leaf``.
    """
    n_internal = 2 ** max_depth - 1
    feature = np.zeros((n_trees, n_internal), np.int64)
    threshold = np.zeros((n_trees, n_internal))
    left_codes = np.zeros((n_trees, n_internal), np.int64)
    position = np.arange(len(rows))
    node = tree_of_row.astype(np.int64)
    lower = np.tile(layout.lower.astype(float), (n_trees, 1))
    upper = np.tile(layout.upper.astype(float), (n_trees, 1))
    allowed = np.tile(layout.all_codes, (n_trees, 1))
    is_cat = layout.is_categorical
    p = X.shape[1]
    # Each feature is sorted once: a node's values in order are then one integer sort away.
    ranks = np.argsort(np.argsort(X, axis=0, kind="stable"), axis=0, kind="stable") if splitter.kind != "random" else None
    for level in range(max_depth):
        width = 2 ** level
        n_nodes = n_trees * width
        order = np.argsort(node, kind="stable")
        rows, node, target, position = rows[order], node[order], target[order], position[order]
        counts = np.bincount(node, minlength=n_nodes)
        starts = np.concatenate(([0], np.cumsum(counts)))
        tree_of_node = np.arange(n_nodes) // width
        k_count = min(splitter.candidates, p) if splitter.kind != "random" else 1
        candidates = np.argsort(rng.random((n_nodes, p)), axis=1)[:, :k_count]
        proposed_t = np.zeros((n_nodes, k_count))
        proposed_m = np.zeros((n_nodes, k_count), np.int64)
        utility = np.zeros((n_nodes, k_count))
        for k in range(k_count):
            f = candidates[:, k]
            values = X[rows, f[node]]
            node_lo, node_hi = lower[np.arange(n_nodes), f], upper[np.arange(n_nodes), f]
            sort_key = None if ranks is None else node * len(X) + ranks[rows, f[node]]
            t = _numeric_split(splitter, values, node, counts, starts, node_lo, node_hi, tree_of_node, rng,
                               sort_key=sort_key)
            m = _categorical_split(splitter, values, node, counts, f, is_cat, allowed, tree_of_node, rng)
            proposed_t[:, k], proposed_m[:, k] = t, m
            if k_count > 1:
                right = _goes_right(values, is_cat[f][node], t[node], m[node])
                utility[:, k] = -_split_sse(right, node, target, n_classes, n_nodes)
        choice = _choose(splitter, utility, tree_of_node, rng) if k_count > 1 else np.zeros(n_nodes, np.int64)
        chosen_f = candidates[np.arange(n_nodes), choice]
        chosen_t = proposed_t[np.arange(n_nodes), choice]
        chosen_m = proposed_m[np.arange(n_nodes), choice]
        heap = width - 1 + np.arange(n_nodes) % width
        feature[tree_of_node, heap] = chosen_f
        threshold[tree_of_node, heap] = chosen_t
        left_codes[tree_of_node, heap] = chosen_m
        values = X[rows, chosen_f[node]]
        right = _goes_right(values, is_cat[chosen_f][node], chosen_t[node], chosen_m[node])
        lower, upper, allowed = (np.repeat(a, 2, axis=0) for a in (lower, upper, allowed))
        numeric = ~is_cat[chosen_f]
        idx = np.arange(n_nodes)
        upper[2 * idx[numeric], chosen_f[numeric]] = chosen_t[numeric]
        lower[2 * idx[numeric] + 1, chosen_f[numeric]] = chosen_t[numeric]
        cat = ~numeric
        parent_codes = allowed[2 * idx[cat], chosen_f[cat]]
        allowed[2 * idx[cat], chosen_f[cat]] = chosen_m[cat]
        allowed[2 * idx[cat] + 1, chosen_f[cat]] = parent_codes & ~chosen_m[cat]
        node = 2 * node + right
    leaf = np.empty(len(rows), np.int64)
    leaf[position] = node
    return Trees(feature=feature, threshold=threshold, left_codes=left_codes, depth=max_depth), leaf


def route(trees: Trees, X: np.ndarray, is_categorical: np.ndarray) -> np.ndarray:
    """Leaf index (T, n) in [0, 2^d) of every row of ``X`` in every tree."""
    n_trees = trees.feature.shape[0]
    n = X.shape[0]
    node = np.zeros((n_trees, n), np.int64)
    tix = np.arange(n_trees)[:, None]
    cols = np.arange(n)[None, :]
    for _ in range(trees.depth):
        f = trees.feature[tix, node]
        values = X[cols, f]
        right = _goes_right(values, is_categorical[f], trees.threshold[tix, node], trees.left_codes[tix, node])
        node = 2 * node + 1 + right
    return node - (2 ** trees.depth - 1)


def _goes_right(values: np.ndarray, categorical: np.ndarray, threshold: np.ndarray, codes: np.ndarray) -> np.ndarray:
    code = np.where(categorical, values, 0).astype(np.int64)
    in_left = ((codes >> code) & 1).astype(bool)
    return np.where(categorical, ~in_left, values >= threshold).astype(np.int64)


def _gumbel_scale(epsilon: np.ndarray | None, sensitivity: float, tree_of_node: np.ndarray) -> np.ndarray:
    if epsilon is None:  # pragma: no cover - the estimators always pass ε to a private splitter
        raise ValueError("a private splitter needs epsilon")
    return np.asarray(epsilon, dtype=float)[tree_of_node] / (2.0 * sensitivity)


def _numeric_split(splitter: Splitter, values: np.ndarray, node: np.ndarray, counts: np.ndarray,
                   starts: np.ndarray, lo: np.ndarray, hi: np.ndarray, tree_of_node: np.ndarray,
                   rng: np.random.Generator, sort_key: np.ndarray | None = None) -> np.ndarray:
    """One threshold per node (used where the candidate feature is numeric).

    ``sort_key`` (node · n + the value's rank in its column) orders the rows by node, then value,
    with one integer sort; without it the two keys are sorted directly."""
    n_nodes = len(counts)
    if splitter.kind == "random":
        return lo + rng.random(n_nodes) * (hi - lo)
    order = np.lexsort((values, node)) if sort_key is None else np.argsort(sort_key)
    ordered = values[order]
    if splitter.kind == "exact_median":
        mid = starts[:-1] + counts // 2
        upper_mid = ordered[np.minimum(mid, len(ordered) - 1)] if len(ordered) else np.zeros(n_nodes)
        lower_mid = ordered[np.clip(mid - 1, 0, None)] if len(ordered) else np.zeros(n_nodes)
        median = np.where(counts % 2 == 1, upper_mid, (upper_mid + lower_mid) / 2)
        return np.where(counts > 0, median, (lo + hi) / 2)
    # Exponential mechanism over the m + 1 intervals of each node, base measure Lebesgue.
    n = len(ordered)
    node_of_row = node  # rows are grouped by node, and lexsort keeps the groups in place
    rank = np.arange(n) - starts[node_of_row]
    at_row = np.arange(n) + node_of_row
    at_last = starts[1:] + np.arange(n_nodes)
    size = n + n_nodes
    left_end, right_end = np.empty(size), np.empty(size)
    below = np.empty(size)
    owner = np.empty(size, np.int64)
    previous = np.empty(n)
    if n:
        previous[1:] = ordered[:-1]
        first = rank == 0
        previous[first] = lo[node_of_row[first]]
    right_end[at_row], left_end[at_row], below[at_row], owner[at_row] = ordered, previous, rank, node_of_row
    last_value = ordered[np.maximum(starts[1:] - 1, 0)] if n else lo
    right_end[at_last] = hi
    left_end[at_last] = np.where(counts > 0, last_value, lo)
    below[at_last] = counts
    owner[at_last] = np.arange(n_nodes)
    scale = _gumbel_scale(splitter.epsilon_median, splitter.median_sensitivity, tree_of_node)
    with np.errstate(divide="ignore"):
        key = np.log(np.maximum(right_end - left_end, 0.0))
    key += scale[owner] * -np.abs(below - counts[owner] / 2) + rng.gumbel(size=size)
    pick = _first_argmax_per_block(key, owner, starts[:-1] + np.arange(n_nodes), n_nodes)
    return left_end[pick] + rng.random(n_nodes) * (right_end[pick] - left_end[pick])


def _first_argmax_per_block(key: np.ndarray, owner: np.ndarray, block_start: np.ndarray, n_blocks: int) -> np.ndarray:
    best = np.maximum.reduceat(key, block_start)
    hit = np.flatnonzero(key == best[owner])
    _, first = np.unique(owner[hit], return_index=True)
    return hit[first]


@functools.cache
def _subset_bits(n_free: int) -> np.ndarray:
    """(2^n_free, n_free) 0/1 matrix of every subset of ``n_free`` items."""
    codes = np.arange(2 ** n_free)[:, None]
    return ((codes >> np.arange(n_free)[None, :]) & 1).astype(np.int64)


def _categorical_split(splitter: Splitter, values: np.ndarray, node: np.ndarray, counts: np.ndarray,
                       f: np.ndarray, is_cat: np.ndarray, allowed: np.ndarray, tree_of_node: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
    """One left-code mask per node (0 where the candidate feature is numeric).

    The node's allowed codes A (a public function of the splits above) are split into S ∋ min A
    and A ∖ S, S ≠ A (each partition once); a node with one allowed code sends it left.
    """
    masks = np.zeros(len(counts), np.int64)
    cat_nodes = np.flatnonzero(is_cat[f])
    if not cat_nodes.size:
        return masks
    in_cat = is_cat[f][node]
    width = MAX_CATEGORIES + 1
    per_code = np.bincount(node[in_cat] * width + values[in_cat].astype(np.int64),
                           minlength=len(counts) * width).reshape(len(counts), width)
    scale = None
    if splitter.kind == "private_median":
        scale = _gumbel_scale(splitter.epsilon_median, splitter.median_sensitivity, tree_of_node)
    for j in cat_nodes:
        mask = int(allowed[j, f[j]])
        codes = [c for c in range(MAX_CATEGORIES) if mask >> c & 1]
        if len(codes) <= 1:
            masks[j] = mask
            continue
        bits = _subset_bits(len(codes) - 1)[:-1]  # drop S = A
        n_left = per_code[j, codes[0]] + bits @ per_code[j, codes[1:]]
        if splitter.kind == "random":
            pick = int(rng.integers(len(bits)))
        elif splitter.kind == "exact_median":
            pick = int(np.argmin(np.abs(n_left - counts[j] / 2)))
        else:
            key = scale[j] * -np.abs(n_left - counts[j] / 2) + rng.gumbel(size=len(bits))
            pick = int(np.argmax(key))
        chosen = [codes[0]] + [c for c, b in zip(codes[1:], bits[pick], strict=True) if b]
        masks[j] = sum(1 << c for c in chosen)
    return masks


def _split_sse(right: np.ndarray, node: np.ndarray, target: np.ndarray, n_classes: int, n_nodes: int) -> np.ndarray:
    """SSE_left + SSE_right per node: squared deviations from each child's mean (one-hot classes)."""
    child = 2 * node + right
    if n_classes == 0:
        count = np.bincount(child, minlength=2 * n_nodes)
        total = np.bincount(child, weights=target, minlength=2 * n_nodes)
        squares = np.bincount(child, weights=target * target, minlength=2 * n_nodes)
        sse = squares - total * total / np.maximum(count, 1)
    else:
        per_class = np.bincount(child * n_classes + target, minlength=2 * n_nodes * n_classes)
        per_class = per_class.reshape(2 * n_nodes, n_classes).astype(float)
        count = per_class.sum(axis=1)
        sse = count - (per_class ** 2).sum(axis=1) / np.maximum(count, 1)
    return np.maximum(sse, 0.0).reshape(n_nodes, 2).sum(axis=1)


def _choose(splitter: Splitter, utility: np.ndarray, tree_of_node: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if splitter.kind == "exact_median":
        return np.argmax(utility, axis=1)
    scale = _gumbel_scale(splitter.epsilon_choice, splitter.choice_sensitivity, tree_of_node)
    return np.argmax(scale[:, None] * utility + rng.gumbel(size=utility.shape), axis=1)
