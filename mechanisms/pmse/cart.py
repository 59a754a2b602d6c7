"""The pMSE's classification trees, built for millions of pMSE fits: rpart's, and a greedy rule.

The pMSE needs one thing from a classification tree: the in-sample fraction of label 1 in each
row's leaf. Two tree rules are offered, chosen with ``tree``:

- ``tree="rpart"`` (the default everywhere, because Snoke & Slavković fitted R's rpart): R's
  rpart classification tree — Gini splitting as rpart scores it, ``minsplit``, ``minbucket``
  (default ``round(minsplit/3)``), ``maxdepth`` and ``cp`` with rpart's cost-complexity
  semantics (grow, then collapse every subtree whose complexity is ≤ cp × the root's risk;
  ``xval = 0``), rpart's split points and tie order. :mod:`.rpart_tree` documents the
  algorithm and every choice; tests/test_pmse_rpart.py holds it to R's rpart on 7,200 fits.
- ``tree="greedy"``: the tree scikit-learn's
  ``DecisionTreeClassifier(criterion="gini", min_impurity_decrease=cp * G(root))`` grows (up to
  the tie-breaking and float32 notes below), which pre-prunes on the Gini decrease and has no
  minsplit/minbucket. It was this module's only rule before issue 12; the rest of this
  docstring describes it.

Both share the sorted, packed column layout below, the one-fit-many-configurations readout and
the neighbour-pair reuse; the two speed-ups the sensitivity trials of Snoke & Slavković
(Table 1) need.

**Growing.** Each feature is sorted once (numpy's SIMD sort on float keys that carry the row
index in their lowest mantissa bits, then an exact repair pass). Every node owns a contiguous
segment of each feature's sorted order (rows packed with their dense value rank and label into
one ``int64``), and a split stably partitions the other features' segments, only for children
that can still be split. At a node every feature's segment is scanned in ascending order and
each midpoint between *distinct* consecutive values is a candidate. The winner maximises
scikit-learn's proxy ``−N_R·G_R − N_L·G_L`` computed with scikit-learn's floating-point
formula, so near-ties resolve as in scikit-learn; a filter on the exact value
``K = sq_L/N_L + sq_R/N_R`` (``= proxy + N_t``) skips the candidates that provably cannot win.
Nodes are grown depth-first, left child first, so node ids are in preorder like
scikit-learn's. Buffers live in a per-thread workspace reused across fits of one shape.

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

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Literal

import numpy as np
from numba import njit

# scikit-learn's EPSILON slack in the pure-node and min_impurity_decrease tests.
_EPS = float(np.finfo(np.float64).eps)
# Filter margin: a candidate whose exact value K = (sq_L·n_R + sq_R·n_L)/(n_L·n_R) is below the
# maximum by more than 64·ε·N_t cannot win: scikit-learn's float proxy is within 3·ε·N_t of
# K − N_t, and the filter's own cross-multiplications err by a few ε·N_t more (K ≤ N_t).
_FILTER_MARGIN = 64.0 * _EPS
_NO_DEPTH_LIMIT = np.iinfo(np.int64).max
TieBreak = Literal["first", "sklearn"]
_MAX_ROWS = 1 << 30  # rows and ranks are packed into one int64: rank << 32 | row << 1 | label

# Integer node fields (columns of the (nodes, _NI) int64 array) ...
_PARENT, _DEPTH, _N, _ONES, _FEATURE, _LEFT, _RIGHT, _START, _HAS_R, _NONR_LEFT, _SIZE, _TIED = range(12)
_NI = 12
# ... and float fields (columns of the (nodes, _NF) float64 array).
_IMPURITY, _IMPROVEMENT, _THRESHOLD = range(3)
_NF = 3


# --------------------------------------------------------------------------- numba kernels


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
def _sort_keys(bits, low, keys):
    """Sort keys of each column: the float64 with its low mantissa bits replaced by the row.

    ``bits`` is the data viewed as uint64 (finite values only), ``low = 2**b − 1 ≥ N − 1``,
    and ``keys`` (q, N) receives the patterns (read as float64 by the caller). Replacing bits
    below the kept ones moves a value only within the interval of floats sharing those bits,
    so sorting the keys with numpy's SIMD float sort orders the rows by value except inside
    such intervals; :func:`_rows_from_keys` repairs those, so the final order is exact.
    """
    n_rows, q = bits.shape
    for f in range(q):
        for i in range(n_rows):
            keys[f, i] = (bits[i, f] & ~low) | np.uint64(i)


@njit(cache=True)
def _rows_from_keys(z, keys, low, order, values):
    """Rows (``order``) and values (``values``) of each column in ascending order.

    ``keys`` are the sorted keys as uint64. Rows whose values share all kept bits can be out
    of order; an insertion sort on the true values repairs them. Returns False if that needed
    more than ``4·N`` moves in a column (data crafted to collide in the dropped bits); the
    caller then argsorts instead.
    """
    q, n_rows = keys.shape
    for f in range(q):
        moves = 0
        previous = -np.inf
        for i in range(n_rows):
            row = np.int64(keys[f, i] & low)
            value = z[row, f]
            if value >= previous:
                order[f, i] = row
                values[f, i] = value
                previous = value
                continue
            j = i
            while j > 0 and values[f, j - 1] > value:
                order[f, j] = order[f, j - 1]
                values[f, j] = values[f, j - 1]
                j -= 1
            order[f, j] = row
            values[f, j] = value
            moves += i - j
            if moves > 4 * n_rows:
                return False
    return True


@njit(cache=True)
def _dense_layout(order, values, labels, layout, row_rank, rank_value):
    """Pack each feature's sorted order as ``rank << 32 | row << 1 | label`` (dense ranks)."""
    q, n_rows = order.shape
    for f in range(q):
        rank = -1
        previous = 0.0
        for i in range(n_rows):
            row = order[f, i]
            value = values[f, i]
            if i == 0 or value != previous:
                rank += 1
                rank_value[f, rank] = value
                previous = value
            layout[f, i] = (np.int64(rank) << 32) | (np.int64(row) << 1) | labels[row]
            row_rank[f, row] = rank


@njit(cache=True)
def _pair_layouts(order, values, labels, r, new_row, layout, row_rank, layout_new, row_rank_new, rank_value):
    """Layouts of ``z`` and of ``z`` with row ``r`` replaced by ``new_row``, from one sort.

    The new value of row ``r`` is merged into each sorted column in one pass. Dense ranks
    are taken over the union of both versions' values, so a rank bound means the same
    threshold in both trees.
    """
    q, n_rows = order.shape
    label_r = np.int64(labels[r])
    for f in range(q):
        new_value = new_row[f]
        rank = -1
        previous = 0.0
        inserted = False
        i = 0
        w = 0
        w_new = 0
        r_rank_new = 0
        for step in range(n_rows + 1):
            take_new = (not inserted) and (i == n_rows or values[f, i] > new_value)
            value = new_value if take_new else values[f, i]
            if step == 0 or value != previous:
                rank += 1
                rank_value[f, rank] = value
                previous = value
            if take_new:
                layout_new[f, w_new] = (np.int64(rank) << 32) | (np.int64(r) << 1) | label_r
                w_new += 1
                r_rank_new = rank
                inserted = True
            else:
                row = order[f, i]
                packed = (np.int64(rank) << 32) | (np.int64(row) << 1) | labels[row]
                layout[f, w] = packed
                w += 1
                row_rank[f, row] = rank
                if row != r:
                    layout_new[f, w_new] = packed
                    w_new += 1
                i += 1
        for row in range(n_rows):
            row_rank_new[f, row] = row_rank[f, row]
        row_rank_new[f, r] = r_rank_new


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
def _partition(layout, row_rank, split_feature, bound, s, e, n_left, need_left, need_right, buffer):
    """Stably partition every other feature's segment by ``rank[split_feature] <= bound``.

    Branch-free: each entry is written to both destinations and only the index on its side
    advances (writing at ``w ≤ i`` only overwrites entries already read).
    """
    q = layout.shape[0]
    ranks = row_rank[split_feature]
    for g in range(q):
        if g == split_feature:
            continue  # already ordered: the left rows are the first n_left of the segment
        if need_left and need_right:
            w = s
            spill = 0
            for i in range(s, e):
                packed = layout[g, i]
                goes_left = np.int64(ranks[(packed >> 1) & 0x7FFFFFFF] <= bound)
                layout[g, w] = packed
                buffer[spill] = packed
                w += goes_left
                spill += 1 - goes_left
            for i in range(spill):
                layout[g, w + i] = buffer[i]
        elif need_left:
            w = s
            limit = s + n_left
            i = s
            while w < limit:
                packed = layout[g, i]
                layout[g, w] = packed
                w += np.int64(ranks[(packed >> 1) & 0x7FFFFFFF] <= bound)
                i += 1
        elif need_right:
            w = e - 1
            limit = s + n_left
            i = e - 1
            while w >= limit:
                packed = layout[g, i]
                layout[g, w] = packed
                w -= np.int64(ranks[(packed >> 1) & 0x7FFFFFFF] > bound)
                i -= 1


@njit(cache=True)
def _copy_subtree(ints, floats, v, ref_ints, ref_floats, u, parent):
    size = ref_ints[u, _SIZE]
    offset = v - u
    for w in range(size):
        for c in range(_NI):
            ints[v + w, c] = ref_ints[u + w, c]
        for c in range(_NF):
            floats[v + w, c] = ref_floats[u + w, c]
        ints[v + w, _START] = -1
        if w > 0:
            ints[v + w, _PARENT] += offset
        if ints[v + w, _LEFT] >= 0:
            ints[v + w, _LEFT] += offset
            ints[v + w, _RIGHT] += offset
    ints[v, _PARENT] = parent
    return size


@njit(cache=True)
def _grown_nodes(ints, floats, needed):
    if needed <= ints.shape[0]:
        return ints, floats
    capacity = max(needed, 2 * ints.shape[0])
    new_ints = np.empty((capacity, _NI), np.int64)
    new_floats = np.empty((capacity, _NF), np.float64)
    new_ints[: ints.shape[0]] = ints
    new_floats[: floats.shape[0]] = floats
    return new_ints, new_floats


@njit(cache=True)
def _grow(
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
            ints[parent, _LEFT if is_left else _RIGHT] = v
        if ref >= 0 and has_r == 0 and ref_ints[ref, _HAS_R] == 0:
            ints, floats = _grown_nodes(ints, floats, v + ref_ints[ref, _SIZE])
            count += _copy_subtree(ints, floats, v, ref_ints, ref_floats, ref, parent)
            continue
        ints, floats = _grown_nodes(ints, floats, v + 1)
        count += 1
        n_t = e - s
        ints[v, _PARENT] = parent
        ints[v, _DEPTH] = depth
        ints[v, _N] = n_t
        ints[v, _ONES] = ones
        ints[v, _FEATURE] = -1
        ints[v, _LEFT] = -1
        ints[v, _RIGHT] = -1
        ints[v, _START] = s
        ints[v, _HAS_R] = has_r
        ints[v, _NONR_LEFT] = 0
        ints[v, _SIZE] = 1
        ints[v, _TIED] = 0
        floats[v, _IMPURITY] = impurity
        floats[v, _IMPROVEMENT] = -np.inf
        floats[v, _THRESHOLD] = np.nan
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
        ints[v, _TIED] = tied
        n_right = n_t - n_left
        ones_right = ones - ones_left
        gini_left = _gini(float(n_left), float(ones_left))
        gini_right = _gini(float(n_right), float(ones_right))
        improvement = (n_t / n_total) * (
            impurity - (n_right / n_t * gini_right) - (n_left / n_t * gini_left)
        )
        floats[v, _IMPROVEMENT] = improvement
        if improvement + _EPS < min_decrease:
            continue
        bound = layout[feature, s + n_left - 1] >> 32
        low = rank_value[feature, bound]
        high = rank_value[feature, layout[feature, s + n_left] >> 32]
        threshold = low / 2.0 + high / 2.0
        if threshold == high or math.isinf(threshold):
            threshold = low
        ints[v, _FEATURE] = feature
        floats[v, _THRESHOLD] = threshold
        r_left = 0
        if has_r == 1 and row_rank[feature, r] <= bound:
            r_left = 1
        ints[v, _NONR_LEFT] = n_left - r_left
        left_ref = -1
        right_ref = -1
        if ref >= 0 and ref_ints[ref, _FEATURE] == feature and ref_ints[ref, _NONR_LEFT] == n_left - r_left:
            left_ref = ref_ints[ref, _LEFT]
            right_ref = ref_ints[ref, _RIGHT]
        left_has_r = 1 if (has_r == 1 and r_left == 1) else 0
        right_has_r = 1 if (has_r == 1 and r_left == 0) else 0

        # Partition only for children that will be scanned (same tests as when they are popped).
        need_left = (
            depth + 1 < max_depth and n_left >= 2 and gini_left > _EPS
            and (emulate or _may_split(n_left, n_total, gini_left, min_decrease))
            and not (left_ref >= 0 and left_has_r == 0 and ref_ints[left_ref, _HAS_R] == 0)
        )
        need_right = (
            depth + 1 < max_depth and n_right >= 2 and gini_right > _EPS
            and (emulate or _may_split(n_right, n_total, gini_right, min_decrease))
            and not (right_ref >= 0 and right_has_r == 0 and ref_ints[right_ref, _HAS_R] == 0)
        )
        if need_left or need_right:
            _partition(layout, row_rank, feature, bound, s, e, n_left, need_left, need_right, buffer)

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
        if ints[v, _FEATURE] >= 0:
            ints[v, _SIZE] = 1 + ints[ints[v, _LEFT], _SIZE] + ints[ints[v, _RIGHT], _SIZE]
        else:
            ints[v, _SIZE] = 1
    return ints, floats, count, stack_ints, stack_impurity, candidates


@njit(cache=True)
def _changed_rows(x, x_prime):
    """``(number of rows where x and x_prime differ, first such row or −1)``."""
    count = 0
    first = -1
    for i in range(x.shape[0]):
        for f in range(x.shape[1]):
            if x[i, f] != x_prime[i, f]:
                count += 1
                if first < 0:
                    first = i
                break
    return count, first


@njit(cache=True)
def _configuration_pmse(ints, floats, count, depths, cps):
    """pMSE of every ``(depths[k], cps[k])`` truncation of a grown tree."""
    n_total = ints[0, _N]
    root_impurity = floats[0, _IMPURITY]
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
                ints[v, _FEATURE] >= 0
                and ints[v, _DEPTH] < depths[k]
                and not (floats[v, _IMPROVEMENT] + _EPS < min_decrease)
            ):
                alive[ints[v, _LEFT]] = True
                alive[ints[v, _RIGHT]] = True
            else:
                total += _leaf_term(ints[v, _N], ints[v, _ONES])
        out[k] = total / n_total
    return out


@njit(cache=True)
def _leaf_probabilities(ints, count, layout):
    """In-sample ``p̂`` of every row (the tree must have been grown without a reference)."""
    probabilities = np.empty(layout.shape[1], np.float64)
    for v in range(count):
        if ints[v, _FEATURE] >= 0:
            continue
        parent = ints[v, _PARENT]
        # A leaf's rows are contiguous in its parent's split feature (any feature at the root).
        f = ints[parent, _FEATURE] if parent >= 0 else 0
        p = ints[v, _ONES] / ints[v, _N]
        s = ints[v, _START]
        for i in range(s, s + ints[v, _N]):
            probabilities[(layout[f, i] >> 1) & 0x7FFFFFFF] = p
    return probabilities


# --------------------------------------------------------------------------- validation


def check_configuration(max_depth: int | None, cp: float) -> tuple[int, float]:
    """Validate one ``(max_depth, cp)`` and return it as ``(depth limit, cp)`` for the kernels.

    Raises:
        TypeError: ``max_depth`` is not an int or None, or ``cp`` is not a real number.
        ValueError: ``max_depth < 1`` or ``cp`` negative or not finite.
    """
    if max_depth is not None and (not isinstance(max_depth, Integral) or isinstance(max_depth, bool)):
        raise TypeError(f"max_depth ({max_depth!r}) must be a positive int or None (unlimited)")
    if max_depth is not None and max_depth < 1:
        raise ValueError(f"max_depth ({max_depth!r}) must be a positive int or None (unlimited)")
    if not isinstance(cp, Real) or isinstance(cp, bool):
        raise TypeError(f"cp ({cp!r}) must be a real number")
    if not math.isfinite(cp) or cp < 0:
        raise ValueError(f"cp ({cp!r}) must be a finite number ≥ 0")
    return (_NO_DEPTH_LIMIT if max_depth is None else min(int(max_depth), _NO_DEPTH_LIMIT)), float(cp)


def _configuration_arrays(configs: Sequence[tuple[int | None, float]]) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence):
        raise TypeError(f"configs ({configs!r}) must be a sequence of (max_depth, cp) pairs")
    if len(configs) == 0:
        raise ValueError(f"configs ({configs!r}) must hold at least one (max_depth, cp) pair")
    depths = np.empty(len(configs), np.int64)
    cps = np.empty(len(configs), np.float64)
    for k, config in enumerate(configs):
        if not isinstance(config, tuple) or len(config) != 2:
            raise TypeError(f"configs[{k}] ({config!r}) must be a (max_depth, cp) tuple")
        depths[k], cps[k] = check_configuration(*config)
    return depths, cps


def check_features(name: str, value: np.ndarray) -> np.ndarray:
    """Validate an ``(n, q)`` data matrix and return it as C-contiguous float64.

    Raises:
        TypeError: Non-numeric values.
        ValueError: Not 2-D, no rows or columns, too many rows, or NaN/inf values.
    """
    array = np.asarray(value)
    if array.ndim != 2:
        raise ValueError(
            f"{name} (shape {array.shape!r}) must be a 2-D array (rows × columns); "
            "reshape a single column with .reshape(-1, 1)"
        )
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} (dtype {array.dtype!r}) must hold real numbers; encode categories first")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"{name} (shape {array.shape!r}) must have at least one row and one column")
    if array.shape[0] > _MAX_ROWS // 2:
        raise ValueError(f"{name} rows ({array.shape[0]!r}) must be at most {_MAX_ROWS // 2}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite; drop or impute NaN/inf rows before computing the pMSE")
    return array


def _check_labels(labels: np.ndarray, n_rows: int) -> np.ndarray:
    array = np.asarray(labels)
    if array.shape != (n_rows,):
        raise ValueError(f"labels (shape {array.shape!r}) must have shape ({n_rows},), one per row of Z")
    if array.dtype.kind not in "biuf" or not np.all((array == 0) | (array == 1)):
        raise ValueError("labels must be 0 (real) or 1 (synthetic)")
    return array.astype(np.uint8)


class _TreeBuffers:
    """Node and stack buffers of one tree (grown in place; replaced when they must grow)."""

    def __init__(self, n_rows: int, q: int) -> None:
        self.ints = np.empty((min(2 * n_rows, 1024), _NI), np.int64)
        self.floats = np.empty((self.ints.shape[0], _NF), np.float64)
        self.stack_ints = np.empty((min(n_rows + 2, 256), 9), np.int64)
        self.stack_impurity = np.empty(self.stack_ints.shape[0], np.float64)
        self.candidates = np.empty(q * n_rows, np.int64)
        self.count = 0

    def grow(self, layout, row_rank, rank_value, depth_limit, cp, r, ref_ints, ref_floats, emulate, seed, buffer):
        (self.ints, self.floats, self.count, self.stack_ints, self.stack_impurity, self.candidates) = _grow(
            layout, row_rank, rank_value, depth_limit, cp, r, ref_ints, ref_floats, emulate, seed,
            self.ints, self.floats, self.stack_ints, self.stack_impurity, buffer, self.candidates,
        )

    def pmse(self, depths: np.ndarray, cps: np.ndarray) -> np.ndarray:
        return _configuration_pmse(self.ints, self.floats, self.count, depths, cps)


class _Workspace:
    """Every buffer a fit of an ``(N, q)`` stack needs, reused from fit to fit.

    A Table-1 run does millions of fits of one shape; allocating these megabytes afresh each
    time makes the allocator return them to the OS and page-fault them back in (≈30% of the
    run time on the project machine). One workspace per thread (see :func:`_workspace`).
    """

    def __init__(self, n_rows: int, q: int) -> None:
        self.shape = (n_rows, q)
        self.low = np.uint64((1 << max(1, (n_rows - 1).bit_length())) - 1)
        self.z = np.empty((n_rows, q), np.float64)
        self.keys = np.empty((q, n_rows), np.uint64)
        self.order = np.empty((q, n_rows), np.int64)
        self.values = np.empty((q, n_rows), np.float64)
        self.layout = np.empty((q, n_rows), np.int64)
        self.layout_new = np.empty((q, n_rows), np.int64)
        self.row_rank = np.empty((q, n_rows), np.int32)
        self.row_rank_new = np.empty((q, n_rows), np.int32)
        self.rank_value = np.empty((q, n_rows + 1), np.float64)
        self.buffer = np.empty(n_rows, np.int64)
        self.trees = (_TreeBuffers(n_rows, q), _TreeBuffers(n_rows, q))
        self.rpart_trees: tuple[_RpartBuffers, _RpartBuffers] | None = None

    def sort(self, z: np.ndarray) -> None:
        """Rows and values of each column of ``z`` in ascending order, into ``order``/``values``."""
        _sort_keys(z.view(np.uint64), self.low, self.keys)
        self.keys.view(np.float64).sort(axis=1)
        if not _rows_from_keys(z, self.keys, self.low, self.order, self.values):
            self.order[:] = np.argsort(z.T, axis=1)
            self.values[:] = np.take_along_axis(z.T, self.order, axis=1)

    def layout_of(self, z: np.ndarray, labels: np.ndarray) -> None:
        self.sort(z)
        _dense_layout(self.order, self.values, labels, self.layout, self.row_rank, self.rank_value)


_local = threading.local()


def _workspace(n_rows: int, q: int) -> _Workspace:
    """This thread's workspace for ``(n_rows, q)``; only the most recent shape is kept."""
    workspace = getattr(_local, "workspace", None)
    if workspace is None or workspace.shape != (n_rows, q):
        workspace = _Workspace(n_rows, q)
        _local.workspace = workspace
    return workspace


@functools.lru_cache(maxsize=8)
def _balanced_labels(n: int) -> np.ndarray:
    labels = np.concatenate([np.zeros(n, np.uint8), np.ones(n, np.uint8)])
    labels.setflags(write=False)
    return labels


def _stacked(x: np.ndarray, x_synth: np.ndarray) -> tuple[_Workspace, np.ndarray, np.ndarray]:
    """``[X; Xˢ]`` written into the workspace, with labels 0 then 1 (validated inputs)."""
    n, q = x.shape
    workspace = _workspace(2 * n, q)
    np.concatenate([x, x_synth], out=workspace.z)
    return workspace, workspace.z, _balanced_labels(n)


_NO_REFERENCE = (np.empty((0, _NI), np.int64), np.empty((0, _NF), np.float64))


# --------------------------------------------------------------------------- public API


Tree = Literal["rpart", "greedy"]
TREES: tuple[str, ...] = ("rpart", "greedy")
#: rpart.control's defaults: minsplit = 20, minbucket = round(minsplit / 3).
DEFAULT_MINSPLIT = 20


@dataclass(frozen=True)
class PropensityTree:
    """In-sample results of one tree fit.

    Attributes:
        propensities: ``p̂_i``, the fraction of label 1 in row ``i``'s leaf, in input row order.
        pmse: ``Σ_leaves N_t (p_t − ½)² / N`` (= ``mean((p̂ − ½)²)`` up to rounding).
        node_count: Number of nodes (internal and leaves).
        depth: Depth of the deepest leaf (root = 0).
        tied_nodes: Split nodes where a feature other than the chosen one reached exactly the
            same best score, i.e. where the tie-breaking rule decided the split.
        iscale_nodes: ``tree="rpart"`` only: nodes of the tree whose split decision could
            depend on rpart's running ``iscale`` (:mod:`.rpart_tree`); 0 for ``"greedy"``.
        exact_priors: ``tree="rpart"`` only: rpart's altered priors are exactly 1.0, so the
            order of rows within tied values cannot matter (:mod:`.rpart_tree`).
    """

    propensities: np.ndarray
    pmse: float
    node_count: int
    depth: int
    tied_nodes: int
    iscale_nodes: int = 0
    exact_priors: bool = True


@dataclass(frozen=True)
class _Rule:
    """A validated tree rule: which tree, and its fixed-per-fit settings."""

    tree: str
    emulate: bool = False  # greedy only: replay scikit-learn's feature order
    minsplit: int = DEFAULT_MINSPLIT  # rpart only
    minbucket: int = 7  # rpart only


_GREEDY = _Rule("greedy")


@functools.cache
def _sklearn_rand_r_state(random_state: int) -> int:
    # What DecisionTreeClassifier(random_state=…) seeds its splitter with (Splitter.init);
    # a local legacy generator, drawn exactly as scikit-learn draws it, not a global one.
    return int(np.random.RandomState(random_state).randint(0, 2147483647))


def _check_tie_break(tie_break: str) -> bool:
    if tie_break not in ("first", "sklearn"):
        raise ValueError(f"tie_break ({tie_break!r}) must be 'first' or 'sklearn'")
    return tie_break == "sklearn"


def check_tree(tree: str) -> str:
    """Validate a tree rule name (``"rpart"`` or ``"greedy"``)."""
    if not isinstance(tree, str) or tree not in TREES:
        raise ValueError(f"tree ({tree!r}) must be one of {', '.join(map(repr, TREES))}")
    return tree


def check_rule(
    tree: str = "rpart", *, tie_break: str = "first", minsplit: int = DEFAULT_MINSPLIT, minbucket: int | None = None
) -> _Rule:
    """Validate a tree rule and its settings.

    Args:
        tree: ``"rpart"`` (R's rpart, :mod:`.rpart_tree`) or ``"greedy"`` (pre-pruned Gini
            CART, this module's docstring).
        tie_break: ``"first"`` or ``"sklearn"`` (greedy only).
        minsplit: rpart's minsplit (rpart only), an int ≥ 2.
        minbucket: rpart's minbucket (rpart only), an int ≥ 1; None means
            ``round(minsplit / 3)`` (rpart's default; never a half, so rounding mode is moot),
            at least 1.

    Raises:
        TypeError, ValueError: A bad value, or an rpart setting given for the greedy rule.
    """
    check_tree(tree)
    emulate = _check_tie_break(tie_break)
    if not isinstance(minsplit, Integral) or isinstance(minsplit, bool):
        raise TypeError(f"minsplit ({minsplit!r}) must be an int ≥ 2")
    if minsplit < 2:
        raise ValueError(f"minsplit ({minsplit!r}) must be an int ≥ 2")
    if minbucket is not None and (not isinstance(minbucket, Integral) or isinstance(minbucket, bool)):
        raise TypeError(f"minbucket ({minbucket!r}) must be an int ≥ 1 or None (round(minsplit / 3))")
    if minbucket is not None and minbucket < 1:
        raise ValueError(f"minbucket ({minbucket!r}) must be an int ≥ 1 or None (round(minsplit / 3))")
    if tree == "greedy":
        if minsplit != DEFAULT_MINSPLIT or minbucket is not None:
            raise ValueError(
                f"minsplit ({minsplit!r}) and minbucket ({minbucket!r}) must be left at their defaults with "
                "tree='greedy' (they are rpart's settings)"
            )
        return _Rule("greedy", emulate=emulate)
    if emulate:
        raise ValueError("tie_break ('sklearn') must be 'first' with tree='rpart' (it replays scikit-learn's order)")
    bucket = max(1, round(int(minsplit) / 3)) if minbucket is None else int(minbucket)
    return _Rule("rpart", minsplit=int(minsplit), minbucket=bucket)


def _rpart_depths(depths: np.ndarray) -> np.ndarray:
    from privlab.mechanisms.pmse.rpart_tree import RPART_MAX_DEPTH

    limits = np.where(depths == _NO_DEPTH_LIMIT, RPART_MAX_DEPTH, depths)
    too_deep = limits > RPART_MAX_DEPTH
    if too_deep.any():
        raise ValueError(
            f"max_depth ({int(limits[too_deep][0])!r}) must be at most {RPART_MAX_DEPTH} with tree='rpart' "
            "(rpart's limit; None means 30)"
        )
    return limits.astype(np.int64)


# The *_checked functions take inputs already validated by the public functions here or in
# privlab.mechanisms.pmse.propensity: float64 C-contiguous finite arrays, uint8 0/1 labels.


class _RpartBuffers:
    """Node, stack and pruning buffers of one rpart tree (grown in place)."""

    def __init__(self, n_rows: int) -> None:
        from privlab.mechanisms.pmse import rpart_tree as rt

        self.ints = np.empty((min(2 * n_rows, 1024), rt.NI), np.int64)
        self.floats = np.empty((self.ints.shape[0], rt.NF), np.float64)
        self.stack = np.empty((64, 8), np.int64)
        self.frames = np.empty((rt.RPART_MAX_DEPTH + 4, 3), np.int64)
        self.frame_floats = np.empty((rt.RPART_MAX_DEPTH + 4, 2), np.float64)
        self.candidates = np.empty(n_rows, np.int64)
        self.count = 0
        self.exact_priors = True
        self._kept = np.zeros(self.ints.shape[0], np.int64)  # per node: internal in the pruned tree
        self._bound = np.zeros(self.ints.shape[0], np.float64)  # per node: rpart's complexity

    def _node_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._kept.shape[0] < self.count:
            self._kept = np.zeros(self.ints.shape[0], np.int64)
            self._bound = np.zeros(self.ints.shape[0], np.float64)
        return self._kept, self._bound

    def grow(self, layout, row_rank, rank_value, max_depth: int, rule: _Rule, alpha_min: float, buffer,
             r: int = -1, reference: _RpartBuffers | None = None) -> None:
        from privlab.mechanisms.pmse import rpart_tree as rt

        if reference is None:
            ref_ints, ref_floats = np.empty((0, rt.NI), np.int64), np.empty((0, rt.NF), np.float64)
        else:
            ref_ints, ref_floats = reference.ints[: reference.count], reference.floats[: reference.count]
        (self.ints, self.floats, self.count, self.stack, self.exact_priors) = rt.grow(
            layout, row_rank, rank_value, max_depth, rule.minsplit, rule.minbucket, alpha_min, r, ref_ints,
            ref_floats, self.ints, self.floats, self.stack, buffer, self.candidates,
        )

    def grow_single(self, layout, row_rank, rank_value, max_depth: int, rule: _Rule, alpha: float, buffer) -> float:
        """rpart's recursion for one configuration, growing on visit; returns its pMSE."""
        from privlab.mechanisms.pmse import rpart_tree as rt

        (self.ints, self.floats, self._kept, self._bound, self.count, self.exact_priors) = rt.grow_single(
            layout, row_rank, rank_value, max_depth, rule.minsplit, rule.minbucket, alpha, self.ints, self.floats,
            self._kept, self._bound, self.frames, self.frame_floats, buffer, self.candidates,
        )
        return float(rt.pruned_pmse(self.ints, self._kept, self.frames))

    def pmse(self, depths: np.ndarray, alphas: np.ndarray, rule: _Rule) -> np.ndarray:
        from privlab.mechanisms.pmse import rpart_tree as rt

        kept, bound = self._node_arrays()
        return rt.configuration_pmse(self.ints, self.count, depths, alphas, rule.minsplit, kept, bound,
                                     self.frames, self.frame_floats)


def _rpart_buffers(workspace: _Workspace, index: int) -> _RpartBuffers:
    if workspace.rpart_trees is None:  # made on first use: a greedy-only run never needs them
        workspace.rpart_trees = (_RpartBuffers(workspace.shape[0]), _RpartBuffers(workspace.shape[0]))
    return workspace.rpart_trees[index]


def _alphas(cps: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """rpart's ``α = cp × R(root)`` (``R(root) = min(n₀, n₁)``, an exact integer)."""
    ones = int(np.count_nonzero(labels))
    return cps * float(min(ones, labels.shape[0] - ones))


def _rpart_grow(
    workspace: _Workspace, layout, row_rank, labels, depths: np.ndarray, cps: np.ndarray, rule: _Rule, index: int,
    r: int = -1, reference: _RpartBuffers | None = None,
) -> tuple[_RpartBuffers, np.ndarray, np.ndarray]:
    depths = _rpart_depths(depths)
    alphas = _alphas(cps, labels)
    tree = _rpart_buffers(workspace, index)
    tree.grow(layout, row_rank, workspace.rank_value, int(depths.max()), rule, float(alphas.min()), workspace.buffer,
              r, reference)
    return tree, depths, alphas


def _rpart_single(
    workspace: _Workspace, labels: np.ndarray, depth_limit: int, cp: float, rule: _Rule
) -> tuple[_RpartBuffers, float]:
    """One configuration: rpart's own recursion, splitting only the nodes rpart visits."""
    depth = int(_rpart_depths(np.array([depth_limit], np.int64))[0])
    alpha = float(_alphas(np.array([cp], np.float64), labels)[0])
    tree = _rpart_buffers(workspace, 0)
    pmse_value = tree.grow_single(workspace.layout, workspace.row_rank, workspace.rank_value, depth, rule, alpha,
                                  workspace.buffer)
    return tree, pmse_value


def _grow_one(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depth_limit: int, cp: float, emulate: bool
) -> tuple[_TreeBuffers, float]:
    workspace.layout_of(z, labels)
    seed = _sklearn_rand_r_state(0) if emulate else 0
    tree = workspace.trees[0]
    tree.grow(workspace.layout, workspace.row_rank, workspace.rank_value, depth_limit, cp, -1,
              *_NO_REFERENCE, emulate, seed, workspace.buffer)
    return tree, float(tree.pmse(np.array([depth_limit], np.int64), np.array([cp], np.float64))[0])


def _pmse_checked(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depth_limit: int, cp: float, rule: _Rule
) -> float:
    if rule.tree == "rpart":
        depths, cps = np.array([depth_limit], np.int64), np.array([cp], np.float64)
        return float(_configurations_checked(workspace, z, labels, depths, cps, rule)[0])
    return _grow_one(workspace, z, labels, depth_limit, cp, rule.emulate)[1]


def _fit_tree_checked(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depth_limit: int, cp: float, rule: _Rule
) -> PropensityTree:
    if rule.tree == "rpart":
        from privlab.mechanisms.pmse import rpart_tree as rt

        workspace.layout_of(z, labels)
        rtree, pmse_value = _rpart_single(workspace, labels, depth_limit, cp, rule)
        kept, _ = rtree._node_arrays()
        probabilities, leaves, depth, tied, iscale_nodes = rt.leaf_probabilities(
            rtree.ints, rtree.floats, z, kept, rtree.frames
        )
        return PropensityTree(
            propensities=probabilities, pmse=pmse_value, node_count=int(2 * leaves - 1), depth=int(depth),
            tied_nodes=int(tied), iscale_nodes=int(iscale_nodes), exact_priors=bool(rtree.exact_priors),
        )
    tree, pmse = _grow_one(workspace, z, labels, depth_limit, cp, rule.emulate)
    nodes = tree.ints[: tree.count]
    return PropensityTree(
        propensities=_leaf_probabilities(tree.ints, tree.count, workspace.layout),
        pmse=pmse,
        node_count=int(tree.count),
        depth=int(nodes[:, _DEPTH].max()),
        tied_nodes=int(nodes[nodes[:, _FEATURE] >= 0, _TIED].sum()),
    )


def _configurations_checked(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depths: np.ndarray, cps: np.ndarray,
    rule: _Rule = _GREEDY,
) -> np.ndarray:
    workspace.layout_of(z, labels)
    if rule.tree == "rpart" and depths.shape[0] == 1:
        return np.array([_rpart_single(workspace, labels, int(depths[0]), float(cps[0]), rule)[1]])
    if rule.tree == "rpart":
        tree, depths, alphas = _rpart_grow(workspace, workspace.layout, workspace.row_rank, labels, depths, cps,
                                           rule, 0)
        return tree.pmse(depths, alphas, rule)
    tree = workspace.trees[0]
    tree.grow(workspace.layout, workspace.row_rank, workspace.rank_value, depths.max(), cps.min(), -1,
              *_NO_REFERENCE, False, 0, workspace.buffer)
    return tree.pmse(depths, cps)


def _pair_checked(
    x: np.ndarray, x_prime: np.ndarray, x_synth: np.ndarray, depths: np.ndarray, cps: np.ndarray,
    rule: _Rule = _GREEDY,
) -> np.ndarray:
    changed, r = _changed_rows(x, x_prime)
    if changed > 1:
        raise ValueError(
            f"the neighbouring dataset differs in {changed} rows; neighbours differ in at "
            "most one row (fit unrelated datasets separately)"
        )
    workspace, z, labels = _stacked(x, x_synth)
    if changed == 0:
        single = _configurations_checked(workspace, z, labels, depths, cps, rule)
        return np.column_stack([single, single])
    w = workspace
    w.sort(z)
    _pair_layouts(w.order, w.values, labels, r, x_prime[r], w.layout, w.row_rank, w.layout_new, w.row_rank_new,
                  w.rank_value)
    if rule.tree == "rpart":
        # One sort for both (the layouts share dense ranks over both versions' values, which
        # changes no split: ranks only order and compare values); the X′ tree copies every
        # subtree of the X tree that row r does not reach (rpart_tree.grow).
        first, rdepths, alphas = _rpart_grow(w, w.layout, w.row_rank, labels, depths, cps, rule, 0, r)
        second, _, _ = _rpart_grow(w, w.layout_new, w.row_rank_new, labels, depths, cps, rule, 1, r, first)
        return np.column_stack([first.pmse(rdepths, alphas, rule), second.pmse(rdepths, alphas, rule)])
    depth_limit, cp = depths.max(), cps.min()
    first, second = w.trees
    first.grow(w.layout, w.row_rank, w.rank_value, depth_limit, cp, r, *_NO_REFERENCE, False, 0, w.buffer)
    second.grow(w.layout_new, w.row_rank_new, w.rank_value, depth_limit, cp, r,
                first.ints[: first.count], first.floats[: first.count], False, 0, w.buffer)
    return np.column_stack([first.pmse(depths, cps), second.pmse(depths, cps)])


def fit_propensity_tree(
    Z: np.ndarray,
    labels: np.ndarray,
    *,
    max_depth: int | None,
    cp: float,
    tie_break: TieBreak = "first",
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> PropensityTree:
    """Fit one ``(max_depth, cp)`` tree and return in-sample propensities.

    Args:
        Z: ``(N, q)`` finite features (cast to float64).
        labels: ``(N,)`` 0/1 labels (1 = synthetic).
        max_depth: Depth limit (root depth 0), or None for unlimited (30, rpart's maximum,
            with ``tree="rpart"``).
        cp: Complexity parameter: rpart's cost-complexity with ``tree="rpart"``
            (:mod:`.rpart_tree`), the pre-pruning Gini rule of this module's docstring with
            ``tree="greedy"``.
        tie_break: ``"first"`` (default) keeps the first of exactly tied splits in
            (feature index, threshold) order, like rpart; it depends only on the node's rows,
            which is what makes truncation and :func:`pmse_pair` exact. ``"sklearn"``
            (``tree="greedy"`` only) replays ``DecisionTreeClassifier(random_state=0)``'s
            per-node random feature order (its ``our_rand_r`` generator and constant-feature
            bookkeeping, as in scikit-learn 1.9's ``BestSplitter``), so exact ties are broken
            as scikit-learn breaks them. That order depends on how many nodes were split
            before, so it is offered for single fits only, and it scans every node
            scikit-learn scans (slower).
        tree: ``"rpart"`` (default; R's rpart, the paper's tool) or ``"greedy"``.
        minsplit: rpart's minsplit (``tree="rpart"`` only).
        minbucket: rpart's minbucket (``tree="rpart"`` only; None = ``round(minsplit/3)``).

    Returns:
        A :class:`PropensityTree`.

    Raises:
        TypeError, ValueError: Malformed ``Z``, ``labels``, configuration, ``tie_break`` or
            tree settings.
    """
    depth_limit, cp = check_configuration(max_depth, cp)
    rule = check_rule(tree, tie_break=tie_break, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        _rpart_depths(np.array([depth_limit], np.int64))
    z = check_features("Z", Z)
    labels = _check_labels(labels, z.shape[0])
    return _fit_tree_checked(_workspace(*z.shape), z, labels, depth_limit, cp, rule)


def pmse_for_configurations(
    Z: np.ndarray,
    labels: np.ndarray,
    configs: Sequence[tuple[int | None, float]],
    *,
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> np.ndarray:
    """pMSE of every ``(max_depth, cp)`` configuration from one tree fit.

    Greedy: the tree is grown once with the largest requested depth and the smallest
    requested cp, and each configuration's tree is read off by truncation (module
    docstring). rpart: every node any configuration could visit is split once, and rpart's
    own grow-and-prune recursion is replayed per configuration (:mod:`.rpart_tree`). Either
    way the configurations share common random numbers: they are evaluated on the same real
    and synthetic rows, so differences between them carry no extra sampling noise.

    Args:
        Z: ``(N, q)`` finite features.
        labels: ``(N,)`` 0/1 labels.
        configs: ``(max_depth, cp)`` pairs; ``max_depth`` None means unlimited.
        tree, minsplit, minbucket: As :func:`fit_propensity_tree`.

    Returns:
        ``(len(configs),)`` pMSE values, bit-identical to one fit per configuration.

    Raises:
        TypeError, ValueError: Malformed ``Z``, ``labels``, ``configs`` or tree settings.
    """
    depths, cps = _configuration_arrays(configs)
    rule = check_rule(tree, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        _rpart_depths(depths)
    z = check_features("Z", Z)
    labels = _check_labels(labels, z.shape[0])
    return _configurations_checked(_workspace(*z.shape), z, labels, depths, cps, rule)


def pmse_pair(
    X: np.ndarray,
    X_prime: np.ndarray,
    X_synth: np.ndarray,
    configs: Sequence[tuple[int | None, float]],
    *,
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> np.ndarray:
    """pMSE of ``X`` and of its neighbour ``X′`` against the same ``Xˢ``, for every configuration.

    Stacks ``[X; Xˢ]`` (labels 0 then 1) and sorts it once, moving the one changed row to its
    new place in each sorted order. Greedy: grows the ``X′`` tree against the ``X`` tree,
    copying every subtree whose rows are unaffected (module docstring). rpart: two fits from
    the shared sort. One Table-1 trial.

    Args:
        X: ``(n, q)`` real data.
        X_prime: ``(n, q)``; equal to ``X`` except in at most one row (replace-one neighbour).
        X_synth: ``(n, q)`` synthetic data shared by both fits.
        configs: ``(max_depth, cp)`` pairs.
        tree, minsplit, minbucket: As :func:`fit_propensity_tree`.

    Returns:
        ``(len(configs), 2)`` array: column 0 is pMSE(X, Xˢ), column 1 is pMSE(X′, Xˢ), each
        bit-identical to an independent :func:`pmse_for_configurations` fit.

    Raises:
        TypeError, ValueError: Malformed arrays, ``configs`` or tree settings, shapes that
            differ, or ``X′`` differing from ``X`` in more than one row.
    """
    depths, cps = _configuration_arrays(configs)
    rule = check_rule(tree, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        _rpart_depths(depths)
    x = check_features("X", X)
    x_prime = check_features("X_prime", X_prime)
    x_synth = check_features("X_synth", X_synth)
    if x_prime.shape != x.shape or x_synth.shape != x.shape:
        raise ValueError(
            f"X, X_prime and X_synth (shapes {x.shape!r}, {x_prime.shape!r}, {x_synth.shape!r}) "
            "must have the same shape"
        )
    return _pair_checked(x, x_prime, x_synth, depths, cps, rule)
