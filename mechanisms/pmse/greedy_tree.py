"""The greedy pMSE tree (``tree="greedy"``): scikit-learn's Gini tree with cp as a pre-pruning
threshold, grown on :mod:`.cart_layout`'s layout; the numba kernels and the node buffers.

**When a node is split (cp applied exactly).** Let ``N`` be the number of rows,
``G(t) = 1 − p_t² − (1 − p_t)²`` the Gini index of node ``t`` with ``N_t`` rows, and
``I(t) = N_t·G(t)`` its total impurity. Node ``t`` is split iff

(a) ``depth(t) < max_depth`` (root depth 0; ``None`` = unlimited),
(b) ``N_t ≥ 2`` and ``G(t) > ε_mach`` (impure), and some feature is not constant in ``t``,
(c) the best split lowers the tree's total impurity by at least cp times the root's:
    ``I(t) − I(t_L) − I(t_R) ≥ cp · I(root) = cp · N · G(root)``.

Dividing (c) by ``N`` gives scikit-learn's weighted impurity decrease,
``(N_t/N)·(G_t − (N_R/N_t)·G_R − (N_L/N_t)·G_L) ≥ cp · G(root)``, i.e.
``min_impurity_decrease = cp · G(root)`` (``cp/2`` for a balanced real/synthetic stack, whose
root Gini is exactly 0.5). In floating point (c) is evaluated exactly as scikit-learn does it:
``improvement = (N_t/N) * (G_t − (N_R/N_t) * G_R − (N_L/N_t) * G_L)`` with every Gini computed
as ``1 − (c₀² + c₁²)/(n·n)``, and the node is split iff ``improvement + ε_mach ≥ cp · G(root)``
(``ε_mach = 2⁻⁵²``, scikit-learn's ``EPSILON`` slack). Like scikit-learn this is *pre-pruning*:
a split that fails (c) is never made, even if splits below it would have paid off. It is cp in
rpart's sense (improvement relative to the root), but measured on the Gini impurity; rpart
measures cp on its node risk (misclassification count), prunes after growing and adds
``minsplit``/``minbucket``, so rpart trees differ: that is ``tree="rpart"``.

**All configurations from one fit.** The split chosen at a node depends only on that node's
rows, and conditions (a) and (c) only ever cut, so a ``(max_depth, cp)`` tree is the
truncation of the tree grown with the largest requested depth and the smallest requested cp:
node ``t`` is a leaf of configuration ``(d, c)`` iff it is a leaf of the big tree, or
``depth(t) == d``, or ``improvement(t) + ε_mach < c · G(root)``; nodes below a cut are dropped.
:func:`pmse_for_configurations` grows once and reads off every configuration; the results
are bit-identical to separate fits (tests/test_pmse_cart.py). All configurations share
common random numbers (the same synthetic data), so their differences carry no synthesis
noise.

**Neighbouring pairs.** ``X`` and ``X′`` differ in one row ``r`` and share ``Xˢ``.
:func:`pmse_pair` sorts the stacked data once, merges row ``r``'s new values into each sorted
order (one pass), and grows the ``X′`` tree against the ``X`` tree: a node whose rows equal
(as a set) those of an ``X``-tree node and contain ``r`` in neither tree holds identical data,
so its whole subtree is copied instead of re-grown. Only nodes on ``r``'s paths (and below any
split that changed) are scanned, so the second tree costs a fraction of the first; the
result is bit-identical to two independent fits.

**Tie-breaking and agreement with scikit-learn.** Among candidates with exactly equal (float)
proxies, this module keeps the first found: lowest feature index, then lowest threshold — as
rpart does, and depending only on the node's rows, which the truncation and pair reuse above
require. scikit-learn keeps the first in its own order: features in a random permutation drawn
per node from ``random_state`` (then thresholds ascending). Exact ties between different
features are not rare in small deep nodes, where two features can each isolate one point: on
the paper's data model with n = 50–400 the two implementations disagree on about 2% of fits
with unlimited depth and cp = 0.001, 0.4% at depth 5, none at depths 1–2 (0.3% over the eight
Table-1 configurations; tests/test_pmse_cart.py counts them and checks that every one is at
such a tie). With n = 5000 the cp threshold keeps nodes that small from splitting, and no
disagreement showed up in benchmarks/pmse_cart.py. Because
scikit-learn's permutation depends on how many nodes were split before, its tie-breaking is
not truncation-consistent: its depth-2 tree need not be the top of its depth-5 tree.
``tie_break="sklearn"`` (single fits only) replays that permutation and then agrees with
scikit-learn exactly. Two numerical differences remain: scikit-learn casts ``X`` to float32
and treats values closer than 1e-7 as equal, while this module splits between any two
distinct float64 values; float32-representable data with gaps above 1e-7 remove both.

References:
    Breiman, Friedman, Olshen & Stone (1984), *Classification and Regression Trees*;
    Snoke & Slavković (2018), "pMSE Mechanism", Sections 3.2 and 5 (Table 1).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privlab.mechanisms.pmse.cart_layout import partition

# scikit-learn's EPSILON slack in the pure-node and min_impurity_decrease tests.
_EPS = float(np.finfo(np.float64).eps)
# Filter margin: a candidate whose exact value K = (sq_L·n_R + sq_R·n_L)/(n_L·n_R) is below the
# maximum by more than 64·ε·N_t cannot win: scikit-learn's float proxy is within 3·ε·N_t of
# K − N_t, and the filter's own cross-multiplications err by a few ε·N_t more (K ≤ N_t).
_FILTER_MARGIN = 64.0 * _EPS
NO_DEPTH_LIMIT = np.iinfo(np.int64).max

# Integer node fields (columns of the (nodes, NI) int64 array) ...
PARENT, DEPTH, N, ONES, FEATURE, LEFT, RIGHT, START, HAS_R, NONR_LEFT, SIZE, TIED = range(12)
NI = 12
# ... and float fields (columns of the (nodes, NF) float64 array).
IMPURITY, IMPROVEMENT, THRESHOLD = range(3)
NF = 3


@njit(cache=True)
def _gini(n: float, ones: float) -> float:
    """scikit-learn's Gini of a node with ``n`` rows, ``ones`` of them labelled 1."""
    zeros = n - ones
    sq = zeros * zeros
    sq += ones * ones
    return 1.0 - sq / (n * n)


@njit(cache=True)
def _leaf_term(n: int, ones: int) -> float:
    """A leaf's share ``N_t·(p_t − ½)²`` of ``N·pMSE``."""
    p = ones / n
    return n * (p - 0.5) * (p - 0.5)


@njit(cache=True)
def _may_split(n_t: int, n_total: int, impurity: float, min_decrease: float) -> bool:
    # The computed improvement is at most (N_t/N)·G_t in floating point too (every subtracted
    # term is ≥ 0 and rounding is monotone), so a node failing this cannot pass test (c).
    return (n_t / n_total) * impurity + _EPS >= min_decrease


@njit(cache=True)
def _best_split(layout, s, e, ones, order, n_order, candidates, feature_ends):
    """Best split of segment ``[s, e)`` visiting features ``order[:n_order]``.

    Returns ``(feature, n_left, ones_left, tied)``: feature −1 if every feature is constant,
    and ``tied`` = 1 if another feature reached exactly the same best proxy.

    The scan tracks the exact value ``K = sq_L/n_L + sq_R/n_R`` (``= proxy + N_t``) as a
    fraction and stores every candidate within a margin of the running maximum
    (``candidates`` must hold ``q·N_t`` entries, packed ``n_left << 32 | ones_left``); the
    final pass evaluates scikit-learn's float proxy only for stored candidates still within
    the margin of the final maximum, in visiting order with strict ``>``, so the chosen split
    is the one scikit-learn's scan in the same feature order would choose.
    """
    n_t = e - s
    margin = _FILTER_MARGIN * n_t
    best_num = -1.0  # running maximum of K as best_num / best_den
    best_den = 1.0
    floor_num = -np.inf  # best_num − margin·best_den
    stored = 0
    for j in range(n_order):
        f = order[j]
        if (layout[f, s] >> 32) != (layout[f, e - 1] >> 32):  # else constant in this node
            ones_left = 0
            current = layout[f, s]
            for i in range(s, e - 1):
                ones_left += current & 1
                following = layout[f, i + 1]
                if (following >> 32) != (current >> 32):
                    n_left = float(i - s + 1)
                    n_right = float(n_t) - n_left
                    c1 = float(ones_left)
                    c0 = n_left - c1
                    d1 = float(ones - ones_left)
                    d0 = n_right - d1
                    numerator = (c0 * c0 + c1 * c1) * n_right + (d0 * d0 + d1 * d1) * n_left
                    denominator = n_left * n_right
                    if numerator * best_den >= floor_num * denominator:
                        candidates[stored] = (np.int64(i - s + 1) << 32) | ones_left
                        stored += 1
                        if numerator * best_den > best_num * denominator:
                            best_num = numerator
                            best_den = denominator
                            floor_num = best_num - margin * best_den
                current = following
        feature_ends[j] = stored

    best_proxy = -np.inf
    best_feature = -1
    best_left = 0
    best_ones_left = 0
    tied = 0
    k = 0
    for j in range(n_order):
        f = order[j]
        while k < feature_ends[j]:
            left = candidates[k] >> 32
            ones_left = candidates[k] & 0xFFFFFFFF
            k += 1
            n_left = float(left)
            n_right = float(n_t) - n_left
            c1 = float(ones_left)
            c0 = n_left - c1
            d1 = float(ones - ones_left)
            d0 = n_right - d1
            sq_left = c0 * c0 + c1 * c1
            sq_right = d0 * d0 + d1 * d1
            if (sq_left * n_right + sq_right * n_left) * best_den < floor_num * (n_left * n_right):
                continue
            # scikit-learn's Gini.children_impurity and proxy_impurity_improvement, verbatim.
            gini_left = 1.0 - sq_left / (n_left * n_left)
            gini_right = 1.0 - sq_right / (n_right * n_right)
            proxy = -n_right * gini_right - n_left * gini_left
            if proxy > best_proxy:
                best_proxy = proxy
                best_feature = f
                best_left = left
                best_ones_left = ones_left
                tied = 0
            elif proxy == best_proxy and f != best_feature:
                tied = 1
    return best_feature, best_left, best_ones_left, tied


@njit(cache=True)
def _next_random(state):
    """scikit-learn's ``our_rand_r`` (32-bit xorshift); ``state`` is a 1-element int64 array."""
    x = state[0]
    if x == 0:
        x = 1
    x = (x ^ (x << 13)) & 0xFFFFFFFF
    x = x ^ (x >> 17)
    x = (x ^ (x << 5)) & 0xFFFFFFFF
    state[0] = x
    return x % 2147483648


@njit(cache=True)
def _sklearn_feature_order(layout, s, e, features, constant_features, n_known, state, order):
    """Replay ``BestSplitter.node_split_best``'s feature draws (max_features = all features).

    Fills ``order`` with the non-constant features in the order scikit-learn visits them and
    returns ``(count, n_total_constants)``; ``features``/``constant_features``/``state`` are
    updated exactly as scikit-learn updates its splitter's arrays and ``rand_r_state``.
    """
    q = features.shape[0]
    f_i = q
    n_visited = 0
    n_found = 0
    n_drawn = 0
    n_total = n_known
    count = 0
    while f_i > n_total and (n_visited < q or n_visited <= n_found + n_drawn):
        n_visited += 1
        f_j = n_drawn + _next_random(state) % (f_i - n_found - n_drawn)
        if f_j < n_known:
            features[n_drawn], features[f_j] = features[f_j], features[n_drawn]
            n_drawn += 1
            continue
        f_j += n_found
        feature = features[f_j]
        if (layout[feature, s] >> 32) == (layout[feature, e - 1] >> 32):
            features[f_j], features[n_total] = features[n_total], features[f_j]
            n_found += 1
            n_total += 1
            continue
        f_i -= 1
        features[f_i], features[f_j] = features[f_j], features[f_i]
        order[count] = feature
        count += 1
    for i in range(n_known):
        features[i] = constant_features[i]
    for i in range(n_known, n_total):
        constant_features[i] = features[i]
    return count, n_total


@njit(cache=True)
def _copy_subtree(ints, floats, v, ref_ints, ref_floats, u, parent):
    size = ref_ints[u, SIZE]
    offset = v - u
    for w in range(size):
        for c in range(NI):
            ints[v + w, c] = ref_ints[u + w, c]
        for c in range(NF):
            floats[v + w, c] = ref_floats[u + w, c]
        ints[v + w, START] = -1
        if w > 0:
            ints[v + w, PARENT] += offset
        if ints[v + w, LEFT] >= 0:
            ints[v + w, LEFT] += offset
            ints[v + w, RIGHT] += offset
    ints[v, PARENT] = parent
    return size


@njit(cache=True)
def _grown_nodes(ints, floats, needed):
    if needed <= ints.shape[0]:
        return ints, floats
    capacity = max(needed, 2 * ints.shape[0])
    new_ints = np.empty((capacity, NI), np.int64)
    new_floats = np.empty((capacity, NF), np.float64)
    new_ints[: ints.shape[0]] = ints
    new_floats[: floats.shape[0]] = floats
    return new_ints, new_floats


@njit(cache=True)
def grow(
    layout, row_rank, rank_value, max_depth, cp, r, ref_ints, ref_floats, emulate, seed,
    ints, floats, stack_ints, stack_impurity, buffer, candidates,
):
    """Grow the tree depth-first into the node buffers ``ints``/``floats``.

    ``r`` (−1 for none) is the row tracked for :func:`pmse_pair`; with a non-empty reference
    tree (grown on the other version of row ``r``), subtrees whose rows match a reference
    node and contain ``r`` in neither tree are copied from it. ``emulate`` replays
    scikit-learn's per-node feature permutation from ``seed`` (its ``rand_r_state``) and
    visits every node scikit-learn visits, so it skips none of the shortcuts' work.
    The buffers grow when needed; returns ``(ints, floats, count, stack_ints,
    stack_impurity, candidates)`` with the (possibly reallocated) buffers.
    """
    q, n_total = layout.shape
    use_ref = ref_ints.shape[0] > 0
    order = np.arange(q)
    n_order = q
    features = np.arange(q)
    constant_features = np.empty(q, np.int64)
    feature_ends = np.empty(q, np.int64)
    state = np.array([seed], np.int64)

    ones_total = 0
    for i in range(n_total):
        ones_total += layout[0, i] & 1
    root_impurity = _gini(float(n_total), float(ones_total))
    min_decrease = cp * root_impurity

    # Stack columns: start end depth parent is_left ref has_r ones n_constant_features.
    stack_ints[0, 0] = 0
    stack_ints[0, 1] = n_total
    stack_ints[0, 2] = 0
    stack_ints[0, 3] = -1
    stack_ints[0, 4] = 0
    stack_ints[0, 5] = 0 if use_ref else -1
    stack_ints[0, 6] = 1 if r >= 0 else 0
    stack_ints[0, 7] = ones_total
    stack_ints[0, 8] = 0
    stack_impurity[0] = root_impurity
    top = 1
    count = 0
    while top > 0:
        top -= 1
        s = stack_ints[top, 0]
        e = stack_ints[top, 1]
        depth = stack_ints[top, 2]
        parent = stack_ints[top, 3]
        is_left = stack_ints[top, 4]
        ref = stack_ints[top, 5]
        has_r = stack_ints[top, 6]
        ones = stack_ints[top, 7]
        n_constant = stack_ints[top, 8]
        impurity = stack_impurity[top]
        v = count
        if parent >= 0:
            ints[parent, LEFT if is_left else RIGHT] = v
        if ref >= 0 and has_r == 0 and ref_ints[ref, HAS_R] == 0:
            ints, floats = _grown_nodes(ints, floats, v + ref_ints[ref, SIZE])
            count += _copy_subtree(ints, floats, v, ref_ints, ref_floats, ref, parent)
            continue
        ints, floats = _grown_nodes(ints, floats, v + 1)
        count += 1
        n_t = e - s
        ints[v, PARENT] = parent
        ints[v, DEPTH] = depth
        ints[v, N] = n_t
        ints[v, ONES] = ones
        ints[v, FEATURE] = -1
        ints[v, LEFT] = -1
        ints[v, RIGHT] = -1
        ints[v, START] = s
        ints[v, HAS_R] = has_r
        ints[v, NONR_LEFT] = 0
        ints[v, SIZE] = 1
        ints[v, TIED] = 0
        floats[v, IMPURITY] = impurity
        floats[v, IMPROVEMENT] = -np.inf
        floats[v, THRESHOLD] = np.nan
        if depth >= max_depth or n_t < 2 or impurity <= _EPS:
            continue
        if not emulate and not _may_split(n_t, n_total, impurity, min_decrease):
            continue
        if emulate:
            n_order, n_constant = _sklearn_feature_order(
                layout, s, e, features, constant_features, n_constant, state, order
            )
        if candidates.shape[0] < q * n_t:
            candidates = np.empty(q * n_t, np.int64)
        feature, n_left, ones_left, tied = _best_split(layout, s, e, ones, order, n_order, candidates, feature_ends)
        if feature < 0:
            continue
        ints[v, TIED] = tied
        n_right = n_t - n_left
        ones_right = ones - ones_left
        gini_left = _gini(float(n_left), float(ones_left))
        gini_right = _gini(float(n_right), float(ones_right))
        improvement = (n_t / n_total) * (
            impurity - (n_right / n_t * gini_right) - (n_left / n_t * gini_left)
        )
        floats[v, IMPROVEMENT] = improvement
        if improvement + _EPS < min_decrease:
            continue
        bound = layout[feature, s + n_left - 1] >> 32
        low = rank_value[feature, bound]
        high = rank_value[feature, layout[feature, s + n_left] >> 32]
        threshold = low / 2.0 + high / 2.0
        if threshold == high or math.isinf(threshold):
            threshold = low
        ints[v, FEATURE] = feature
        floats[v, THRESHOLD] = threshold
        r_left = 0
        if has_r == 1 and row_rank[feature, r] <= bound:
            r_left = 1
        ints[v, NONR_LEFT] = n_left - r_left
        left_ref = -1
        right_ref = -1
        if ref >= 0 and ref_ints[ref, FEATURE] == feature and ref_ints[ref, NONR_LEFT] == n_left - r_left:
            left_ref = ref_ints[ref, LEFT]
            right_ref = ref_ints[ref, RIGHT]
        left_has_r = 1 if (has_r == 1 and r_left == 1) else 0
        right_has_r = 1 if (has_r == 1 and r_left == 0) else 0

        # Partition only for children that will be scanned (same tests as when they are popped).
        need_left = (
            depth + 1 < max_depth and n_left >= 2 and gini_left > _EPS
            and (emulate or _may_split(n_left, n_total, gini_left, min_decrease))
            and not (left_ref >= 0 and left_has_r == 0 and ref_ints[left_ref, HAS_R] == 0)
        )
        need_right = (
            depth + 1 < max_depth and n_right >= 2 and gini_right > _EPS
            and (emulate or _may_split(n_right, n_total, gini_right, min_decrease))
            and not (right_ref >= 0 and right_has_r == 0 and ref_ints[right_ref, HAS_R] == 0)
        )
        if need_left or need_right:
            partition(layout, row_rank, feature, bound, s, e, n_left, need_left, need_right, buffer)

        if top + 2 > stack_ints.shape[0]:
            grown_ints = np.empty((2 * stack_ints.shape[0], 9), np.int64)
            grown_impurity = np.empty(2 * stack_ints.shape[0], np.float64)
            grown_ints[:top] = stack_ints[:top]
            grown_impurity[:top] = stack_impurity[:top]
            stack_ints = grown_ints
            stack_impurity = grown_impurity
        # Right pushed first so the left child is grown first (preorder ids, as scikit-learn).
        stack_ints[top, 0] = s + n_left
        stack_ints[top, 1] = e
        stack_ints[top, 2] = depth + 1
        stack_ints[top, 3] = v
        stack_ints[top, 4] = 0
        stack_ints[top, 5] = right_ref
        stack_ints[top, 6] = right_has_r
        stack_ints[top, 7] = ones_right
        stack_ints[top, 8] = n_constant
        stack_impurity[top] = gini_right
        top += 1
        stack_ints[top, 0] = s
        stack_ints[top, 1] = s + n_left
        stack_ints[top, 2] = depth + 1
        stack_ints[top, 3] = v
        stack_ints[top, 4] = 1
        stack_ints[top, 5] = left_ref
        stack_ints[top, 6] = left_has_r
        stack_ints[top, 7] = ones_left
        stack_ints[top, 8] = n_constant
        stack_impurity[top] = gini_left
        top += 1

    for v in range(count - 1, -1, -1):  # subtree sizes (preorder: children follow parents)
        if ints[v, FEATURE] >= 0:
            ints[v, SIZE] = 1 + ints[ints[v, LEFT], SIZE] + ints[ints[v, RIGHT], SIZE]
        else:
            ints[v, SIZE] = 1
    return ints, floats, count, stack_ints, stack_impurity, candidates


@njit(cache=True)
def configuration_pmse(ints, floats, count, depths, cps):
    """pMSE of every ``(depths[k], cps[k])`` truncation of a grown tree."""
    n_total = ints[0, N]
    root_impurity = floats[0, IMPURITY]
    out = np.empty(depths.shape[0], np.float64)
    alive = np.zeros(count, np.bool_)
    for k in range(depths.shape[0]):
        min_decrease = cps[k] * root_impurity
        alive[:] = False
        alive[0] = True
        total = 0.0
        for v in range(count):
            if not alive[v]:
                continue
            if (
                ints[v, FEATURE] >= 0
                and ints[v, DEPTH] < depths[k]
                and not (floats[v, IMPROVEMENT] + _EPS < min_decrease)
            ):
                alive[ints[v, LEFT]] = True
                alive[ints[v, RIGHT]] = True
            else:
                total += _leaf_term(ints[v, N], ints[v, ONES])
        out[k] = total / n_total
    return out


@njit(cache=True)
def leaf_probabilities(ints, count, layout):
    """In-sample ``p̂`` of every row (the tree must have been grown without a reference)."""
    probabilities = np.empty(layout.shape[1], np.float64)
    for v in range(count):
        if ints[v, FEATURE] >= 0:
            continue
        parent = ints[v, PARENT]
        # A leaf's rows are contiguous in its parent's split feature (any feature at the root).
        f = ints[parent, FEATURE] if parent >= 0 else 0
        p = ints[v, ONES] / ints[v, N]
        s = ints[v, START]
        for i in range(s, s + ints[v, N]):
            probabilities[(layout[f, i] >> 1) & 0x7FFFFFFF] = p
    return probabilities


class TreeBuffers:
    """Node and stack buffers of one tree (grown in place; replaced when they must grow)."""

    def __init__(self, n_rows: int, q: int) -> None:
        self.ints = np.empty((min(2 * n_rows, 1024), NI), np.int64)
        self.floats = np.empty((self.ints.shape[0], NF), np.float64)
        self.stack_ints = np.empty((min(n_rows + 2, 256), 9), np.int64)
        self.stack_impurity = np.empty(self.stack_ints.shape[0], np.float64)
        self.candidates = np.empty(q * n_rows, np.int64)
        self.count = 0

    def grow(self, layout, row_rank, rank_value, depth_limit, cp, r, ref_ints, ref_floats, emulate, seed, buffer):
        (self.ints, self.floats, self.count, self.stack_ints, self.stack_impurity, self.candidates) = grow(
            layout, row_rank, rank_value, depth_limit, cp, r, ref_ints, ref_floats, emulate, seed,
            self.ints, self.floats, self.stack_ints, self.stack_impurity, buffer, self.candidates,
        )

    def pmse(self, depths: np.ndarray, cps: np.ndarray) -> np.ndarray:
        return configuration_pmse(self.ints, self.floats, self.count, depths, cps)
