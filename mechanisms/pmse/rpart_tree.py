"""Kernels of ``tree="rpart"``: R's rpart classification tree (Gini, cp, minsplit, minbucket).

The public entry points are in :mod:`.cart` (``tree="rpart"``); this module holds the numba
kernels and documents what they reproduce. It was written from a reading of rpart 4.1's
sources (``src/partition.c``, ``bsplit.c``, ``gini.c``, ``nodesplit.c``, ``insert_split.c``,
``rpart.c``, ``R/rpart.control.R``, ``R/rpart.class.R``) and of Therneau & Atkinson's *An
Introduction to Recursive Partitioning Using the RPART Routines*; no code was copied. The
defaults are rpart's for a two-class factor response with no weights, no missing values,
``xval = 0``, ``parms`` left at its default (priors = observed class frequencies, 0-1 loss,
Gini).

**Node quantities.** A node with ``n`` rows, ``n₀`` of label 0 and ``n₁`` of label 1 has
rpart's *risk* ``R = min(n₀, n₁)`` (misclassification count, ties predict label 0; with the
default priors rpart's altered priors cancel, so the risk is an exact integer) and its fitted
probability of label 1 is ``n₁ / n``.

**Splitting (rpart's gini()).** Each feature's rows are scanned in ascending order, moving one
row at a time from the right side to the left. rpart weights class ``j`` by its *altered
prior* ``a_j = π_j / (s·π_j)`` with ``π_j = n_j / N`` and ``s = π₀ + π₁`` (both rounded as R
and C round them); ``a_j`` is exactly 1.0 whenever ``s`` rounds to 1.0 (always for a balanced
real/synthetic stack). With left and right weights ``w_L = Σ a_j`` and class shares
``p_{j|L} = a_j·n_{jL} / w_L`` (likewise right), a cut between row positions ``i`` and
``i + 1`` is a candidate iff both sides hold at least ``minbucket`` rows and the two values
differ; its score is

    ``S = w_L·p₀L(1 − p₀L) + w_R·p₀R(1 − p₀R) + w_L·p₁L(1 − p₁L) + w_R·p₁R(1 − p₁R)``

accumulated in exactly that order, and the cut with the smallest ``S`` (first one on exact
float ties, scanning upwards) wins for that feature. Its improvement is ``I = S_node − S``
where ``S_node`` is the same sum for the unsplit node. The weights are accumulated row by row
in floating point as rpart does (with ``a_j = 1`` that is exact integer arithmetic).

**Choosing the feature (bsplit() and insert_split()).** Features are visited in column order;
constant features are skipped. A running maximum ``iscale`` of every improvement seen so far
in the fit (all features, all nodes, in the order nodes are visited) is kept, and a feature
is eligible only if ``I > 10⁻¹⁰·iscale`` (rpart's guard against rounding noise). Among
eligible features the first with the largest ``I`` wins: exact ties go to the lower column
index. A node with no eligible feature is a leaf.

**Split point and children (nodesplit()).** The threshold is ``(x_lo + x_hi)/2`` in float64,
the midpoint of the two adjacent distinct values, and rows with ``x < threshold`` form the
lower side (so a midpoint that rounds onto ``x_lo`` moves ``x_lo``'s rows up, as in rpart). The
child rpart calls *left* (explored first, node number ``2k``) is the side with the smaller
share ``p₁`` of label 1 (``p₁L < p₁R`` compared in floats decides; on equality the upper
side is the left child). The order matters: the cost-complexity bounds below are passed from
the left child to the right one.

**Stopping and cost-complexity (partition()).** With ``α = cp·R(root)``, rpart grows the
tree recursively and prunes while it grows. Every node carries a bound ``C`` (the root's is
``R(root)``); a node stops (becomes a leaf with complexity ``α``) if ``n < minsplit``, or its
depth is at least ``maxdepth`` (rpart numbers nodes ``1, 2k, 2k+1`` and stops above node
number ``2^maxdepth − 1``), or ``min(R, C) ≤ α``, or it has no split. Otherwise, with
``t = min(R, C)``, the left child gets bound ``t − α`` and is partitioned; the right child
gets bound ``max((R − R_Lsub)/(s_L + 1), R − R_L)`` (capped at ``C``) minus ``α``, where
``R_Lsub`` and ``s_L`` are the left subtree's leaf risk and split count. The node's
complexity is then ``(R − R_Lsub − R_Rsub)/(s_L + s_R + 1)``, recomputed after collapsing
first whichever child has the smaller complexity if that child's complexity is below it, and
the node is collapsed to a leaf (its subtree discarded) if its complexity is ``≤ α``. Every
comparison and division is done in float64 in rpart's order, so the decisions are
bit-for-bit rpart's.

**Where this module had to choose.**

- *One configuration* (:func:`grow_single`): rpart's recursion itself, searching a node's
  split only when rpart visits it, in rpart's order; ``iscale`` is then rpart's exactly.
- *One grown tree, many configurations* (:func:`grow` then :func:`prune`). The split chosen
  at a node depends only on its rows (and on ``iscale``, below), not on ``cp`` or
  ``maxdepth``; those only decide which nodes are visited and which are collapsed. So
  :func:`grow` splits every node that any requested configuration could visit
  (``n ≥ minsplit``, depth below the largest ``maxdepth``, ``R > α_min``: rpart never visits a
  node with ``R ≤ α`` since ``min(R, C) ≤ R``), in rpart's visiting order, and :func:`prune`
  replays partition()'s recursion over the stored nodes for each ``(maxdepth, α)``. The
  replay is needed: rpart's early-stopping bounds are not monotone in ``α``, and a
  ``maxdepth = d`` tree is often *not* the depth-``d`` truncation of the deeper tree (the
  complexity of a node depends on the subtree below it; measured in experiments/pmse/RESULTS.md).
  Snipping the small-cp tree at the nodes whose rpart complexity is ≤ the larger ``α``
  (prune.rpart's rule) did give the larger-cp tree in every case measured there, but the
  replay does not rely on it. minsplit and minbucket change the splits themselves and are
  fixed per fit.
- *iscale.* rpart's running maximum depends on which nodes it visited before, which differs
  between configurations; for several configurations it is the running maximum over the
  grown tree's visiting order. It can only matter at a node whose best improvement is
  positive but at most ``10⁻¹⁰`` times the largest improvement of the fit (a split that
  changes the Gini by ~1e-7 of a count). Such nodes are counted (``iscale_nodes``) so tests
  can show they do not occur in the compared fits; single fits are exact regardless.
- *Order within tied values.* rpart sorts each feature once with its own (unstable)
  quicksort; here ties are ordered by row index. This could only change results when
  ``a_j ≠ 1``, where the running float sums of ``a_j`` could round differently; ``a_j`` was
  exactly 1.0 for every class split ``n₀ + n₁ ≤ 4000`` we checked exhaustively (and in all
  7,200 oracle fits), so that general path is kept for safety but never exercised there;
  ``exact_priors`` reports it.
- *Degenerate midpoints.* If the midpoint rounds so that every row falls on one side (only
  possible when the two values are adjacent floats at a float boundary), the node is made a
  leaf; rpart would create an empty child. Not reachable with data that are not crafted.
- ``maxdepth`` is at most 30 (rpart's limit; ``None`` means 30), minsplit ≥ 2,
  ``minbucket`` ≥ 1 (default ``round(minsplit/3)``, rpart's).

**Why one module of this size.** It is one algorithm, rpart's ``partition()`` recursion, in three
numba kernels that must agree bit for bit: :func:`grow` splits every node any configuration
could visit (with the neighbour-pair reuse), :func:`prune` replays the recursion over that tree
for one ``(maxdepth, α)``, and :func:`grow_single` runs it once, splitting on visit. They share
the node layout, the split search and :func:`_collapse`; what differs is what each does on
entering and leaving a node. numba compiles neither closures nor callbacks into such a loop
without losing the speed the Table-1 trials need (millions of fits), so the walk is written out
in each kernel rather than parameterised, and the three stay side by side, where a change to one
is seen against the others (``tests/test_pmse_rpart.py`` holds all three to R's rpart).

References:
    Therneau & Atkinson, *An Introduction to Recursive Partitioning Using the RPART
    Routines* (rpart 4.1), Sections 3–4; Breiman, Friedman, Olshen & Stone (1984), Chapter 3
    (cost-complexity); Snoke & Slavković (2018), Section 5 (rpart as the pMSE's CART).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from privlab.mechanisms.pmse.cart_layout import partition

RPART_MAX_DEPTH = 30  # rpart.control: "Maximum depth is 30"

# Integer node fields (columns of the (nodes, NI) int64 array) ...
(PARENT, DEPTH, N, ONES, RISK, FEATURE, LEFT, RIGHT, START, TIED, ISCALE, UPPER_LEFT, HAS_R, LOW_NONR, SIZE,
 FRAGILE) = range(16)
NI = 16
# ... and float fields.
THRESHOLD, IMPROVE, SUBMAX = range(3)
NF = 3


@njit(cache=True)
def altered_priors(n0, n1):
    """rpart's altered priors ``a_j`` for default priors and 0-1 loss (exact float steps)."""
    total = float(n0 + n1)
    p0 = float(n0) / total  # R: counts / sum(counts); C: freq = count / total weight
    p1 = float(n1) / total
    s = 0.0
    s += 0.0 * p0
    s += 1.0 * p0
    s += 1.0 * p1
    s += 0.0 * p1
    a0 = (0.0 + 0.0 * p0 + 1.0 * p0) / (s * p0) if n0 > 0 else 0.0
    a1 = (0.0 + 1.0 * p1 + 0.0 * p1) / (s * p1) if n1 > 0 else 0.0
    return a0, a1


@njit(cache=True)
def _scan_feature(layout, f, s, e, ones, minbucket, a0, a1):
    """rpart's gini() on feature ``f`` of segment ``[s, e)``.

    Returns ``(improvement, position, upper_is_left)``: ``position`` is the offset of the last
    row of the lower side of the best cut (−1 if none) and ``upper_is_left`` is rpart's
    direction (1 if the upper side becomes the left child).
    """
    n_t = e - s
    exact = a0 == 1.0 and a1 == 1.0
    right0 = float(n_t - ones)
    right1 = float(ones)
    if exact:
        rwt = float(n_t)
    else:
        rwt = 0.0
        for i in range(s, e):
            rwt += a1 if (layout[f, i] & 1) else a0
    lwt = 0.0
    left0 = 0.0
    left1 = 0.0
    total = 0.0
    p = a0 * right0 / rwt
    total += rwt * (p * (1.0 - p))
    p = a1 * right1 / rwt
    total += rwt * (p * (1.0 - p))
    best = total
    where = -1
    upper_is_left = 0
    rtot = n_t
    ltot = 0
    i = 0
    while rtot > minbucket:
        packed = layout[f, s + i]
        if packed & 1:
            if exact:
                rwt -= 1.0
                lwt += 1.0
            else:
                rwt -= a1
                lwt += a1
            right1 -= 1.0
            left1 += 1.0
        else:
            if exact:
                rwt -= 1.0
                lwt += 1.0
            else:
                rwt -= a0
                lwt += a0
            right0 -= 1.0
            left0 += 1.0
        rtot -= 1
        ltot += 1
        if ltot >= minbucket and (layout[f, s + i + 1] >> 32) != (packed >> 32):
            temp = 0.0
            p = a0 * left0 / lwt
            temp += lwt * (p * (1.0 - p))
            p = a0 * right0 / rwt
            temp += rwt * (p * (1.0 - p))
            pl = a1 * left1 / lwt
            temp += lwt * (pl * (1.0 - pl))
            pr = a1 * right1 / rwt
            temp += rwt * (pr * (1.0 - pr))
            if temp < best:
                best = temp
                where = i
                upper_is_left = 0 if pl < pr else 1
        i += 1
    return total - best, where, upper_is_left


# A candidate whose exact score exceeds the running minimum by more than this relative margin
# cannot win: rpart's float score is within a few ε of the exact one (module docstring).
_FILTER_MARGIN = 64.0 * 2.0**-52


@njit(cache=True)
def _scan_feature_exact(layout, f, s, e, ones, minbucket, candidates):
    """:func:`_scan_feature` for altered priors of exactly 1.0 (every pMSE stack), faster.

    With ``a_j = 1`` rpart's score is, in exact arithmetic, ``2·(l₀l₁/L + r₀r₁/R)``. A first
    pass keeps the cuts whose exact value (cross-multiplied, no divisions) is within
    ``_FILTER_MARGIN`` of the running minimum, which always includes every cut that can reach
    rpart's minimal float score; a second pass evaluates only those with rpart's float
    formula, in scan order with strict ``<``, so the chosen cut is rpart's.
    """
    n_t = e - s
    total1 = float(ones)
    total0 = float(n_t - ones)
    best_num = total0 * total1  # the unsplit node's l₀l₁/L, as num / den
    best_den = float(n_t)
    stored = 0
    ones_left = 0
    rtot = n_t
    i = 0
    while rtot > minbucket:
        packed = layout[f, s + i]
        ones_left += packed & 1
        rtot -= 1
        left = i + 1
        if left >= minbucket and (layout[f, s + i + 1] >> 32) != (packed >> 32):
            l_n = float(left)
            r_n = float(rtot)
            l1 = float(ones_left)
            l0 = l_n - l1
            r1 = total1 - l1
            r0 = r_n - r1
            num = l0 * l1 * r_n + r0 * r1 * l_n
            den = l_n * r_n
            if num * best_den <= best_num * den * (1.0 + _FILTER_MARGIN):
                candidates[stored] = (np.int64(i) << 32) | ones_left
                stored += 1
                if num * best_den < best_num * den:
                    best_num = num
                    best_den = den
        i += 1

    rwt = float(n_t)
    total = 0.0
    p = total0 / rwt
    total += rwt * (p * (1.0 - p))
    p = total1 / rwt
    total += rwt * (p * (1.0 - p))
    best = total
    where = -1
    upper_is_left = 0
    for k in range(stored):
        i = candidates[k] >> 32
        left1 = float(candidates[k] & 0xFFFFFFFF)
        lwt = float(i + 1)
        rwt = float(n_t) - lwt
        left0 = lwt - left1
        right1 = total1 - left1
        right0 = rwt - right1
        temp = 0.0
        p = 1.0 * left0 / lwt
        temp += lwt * (p * (1.0 - p))
        p = 1.0 * right0 / rwt
        temp += rwt * (p * (1.0 - p))
        pl = 1.0 * left1 / lwt
        temp += lwt * (pl * (1.0 - pl))
        pr = 1.0 * right1 / rwt
        temp += rwt * (pr * (1.0 - pr))
        if temp < best:
            best = temp
            where = i
            upper_is_left = 0 if pl < pr else 1
    return total - best, where, upper_is_left


@njit(cache=True)
def _may_expand(n_t, risk, depth, minsplit, max_depth, alpha_min):
    return n_t >= minsplit and depth < max_depth and risk > alpha_min


@njit(cache=True)
def _grown(ints, floats, needed):
    if needed <= ints.shape[0]:
        return ints, floats
    capacity = max(needed, 2 * ints.shape[0])
    new_ints = np.empty((capacity, NI), np.int64)
    new_floats = np.empty((capacity, NF), np.float64)
    new_ints[: ints.shape[0]] = ints
    new_floats[: floats.shape[0]] = floats
    return new_ints, new_floats


@njit(cache=True)
def _copy_subtree(ints, floats, v, ref_ints, ref_floats, u, parent):
    size = ref_ints[u, SIZE]
    offset = v - u
    for w in range(size):
        for c in range(NI):
            ints[v + w, c] = ref_ints[u + w, c]
        for c in range(NF):
            floats[v + w, c] = ref_floats[u + w, c]
        if w > 0:
            ints[v + w, PARENT] += offset
        if ints[v + w, LEFT] >= 0:
            ints[v + w, LEFT] += offset
            ints[v + w, RIGHT] += offset
    ints[v, PARENT] = parent
    return size


@njit(cache=True)
def _best_split(layout, s, e, ones, minbucket, exact, a0, a1, iscale, candidates):
    """rpart's bsplit() for segment ``[s, e)``: ``(feature, where, upper_is_left, node_max, tied,
    iscale)``; feature −1 if no feature is eligible (``iscale`` is the updated running maximum)."""
    q = layout.shape[0]
    best_feature = -1
    best_improve = 0.0
    best_where = -1
    best_upper_left = 0
    node_max = 0.0
    tied = 0
    for f in range(q):
        if (layout[f, s] >> 32) == (layout[f, e - 1] >> 32):
            continue  # constant in this node
        if exact:
            improve, where, upper_left = _scan_feature_exact(layout, f, s, e, ones, minbucket, candidates)
        else:
            improve, where, upper_left = _scan_feature(layout, f, s, e, ones, minbucket, a0, a1)
        if improve > node_max:
            node_max = improve
        if improve > iscale:
            iscale = improve
        if improve > iscale * 1e-10:
            if best_feature < 0 or improve > best_improve:
                best_feature = f
                best_improve = improve
                best_where = where
                best_upper_left = upper_left
                tied = 0
            elif improve == best_improve:
                tied = 1
    return best_feature, best_where, best_upper_left, node_max, tied, iscale


@njit(cache=True)
def _cut(layout, rank_value, f, s, n_t, where):
    """rpart's split point (midpoint) and the rows below it: ``(threshold, n_low, ones_low)``."""
    low = rank_value[f, layout[f, s + where] >> 32]
    high = rank_value[f, layout[f, s + where + 1] >> 32]
    threshold = (low + high) / 2.0
    n_low = where + 1
    while n_low > 0 and rank_value[f, layout[f, s + n_low - 1] >> 32] >= threshold:
        n_low -= 1
    while n_low < n_t and rank_value[f, layout[f, s + n_low] >> 32] < threshold:
        n_low += 1
    ones_low = 0
    for i in range(s, s + n_low):
        ones_low += layout[f, i] & 1
    return threshold, n_low, ones_low


@njit(cache=True)
def _new_node(ints, floats, v, parent, depth, s, n_t, ones, has_r):
    ints[v, PARENT] = parent
    ints[v, DEPTH] = depth
    ints[v, N] = n_t
    ints[v, ONES] = ones
    ints[v, RISK] = min(n_t - ones, ones)
    ints[v, FEATURE] = -1
    ints[v, LEFT] = -1
    ints[v, RIGHT] = -1
    ints[v, START] = s
    ints[v, TIED] = 0
    ints[v, ISCALE] = 0
    ints[v, UPPER_LEFT] = 0
    ints[v, HAS_R] = has_r
    ints[v, LOW_NONR] = 0
    ints[v, SIZE] = 1
    ints[v, FRAGILE] = 0
    floats[v, THRESHOLD] = np.nan
    floats[v, IMPROVE] = 0.0
    floats[v, SUBMAX] = 0.0


@njit(cache=True)
def grow(layout, row_rank, rank_value, max_depth, minsplit, minbucket, alpha_min, r, ref_ints, ref_floats,
         ints, floats, stack, buffer, candidates):
    """Split, in rpart's visiting order, every node some configuration could visit.

    ``layout``/``row_rank``/``rank_value`` are :mod:`.cart`'s packed sorted columns (modified
    in place). Node ids are in visiting order (preorder, rpart's left child first).

    ``r`` (−1 for none) is the row a neighbouring dataset changes. With a non-empty reference
    tree (grown on the other version of row ``r``), a node whose rows equal those of a
    reference node and contain ``r`` in neither tree holds identical data, so the reference
    subtree is copied instead of re-grown, unless it holds a node whose decision could depend
    on ``iscale`` (best improvement in ``(0, 10⁻¹⁰·N]``; ``iscale`` never exceeds ``N``); the
    running ``iscale`` then absorbs the subtree's largest improvement, exactly as growing it
    would. The result is bit-identical to an independent fit.

    Returns ``(ints, floats, count, stack, exact_priors)``; ``ints[v, ISCALE]`` flags the nodes
    whose best improvement is at most ``10⁻¹⁰`` times the fit's largest (module docstring).
    """
    q, n_total = layout.shape
    use_ref = ref_ints.shape[0] > 0
    fragile_limit = 1e-10 * n_total
    ones_total = 0
    for i in range(n_total):
        ones_total += layout[0, i] & 1
    a0, a1 = altered_priors(n_total - ones_total, ones_total)
    exact = a0 == 1.0 and a1 == 1.0
    iscale = 0.0

    # Stack columns: start, end, depth, parent, is_left, ones, reference node, holds r.
    stack[0, 0] = 0
    stack[0, 1] = n_total
    stack[0, 2] = 0
    stack[0, 3] = -1
    stack[0, 4] = 0
    stack[0, 5] = ones_total
    stack[0, 6] = 0 if use_ref else -1
    stack[0, 7] = 1 if r >= 0 else 0
    top = 1
    count = 0
    while top > 0:
        top -= 1
        s = stack[top, 0]
        e = stack[top, 1]
        depth = stack[top, 2]
        parent = stack[top, 3]
        is_left = stack[top, 4]
        ones = stack[top, 5]
        ref = stack[top, 6]
        has_r = stack[top, 7]
        v = count
        if parent >= 0:
            ints[parent, LEFT if is_left else RIGHT] = v
        if ref >= 0 and has_r == 0 and ref_ints[ref, HAS_R] == 0 and ref_ints[ref, FRAGILE] == 0:
            ints, floats = _grown(ints, floats, v + ref_ints[ref, SIZE])
            count += _copy_subtree(ints, floats, v, ref_ints, ref_floats, ref, parent)
            if ref_floats[ref, SUBMAX] > iscale:
                iscale = ref_floats[ref, SUBMAX]
            continue
        ints, floats = _grown(ints, floats, v + 1)
        count += 1
        n_t = e - s
        _new_node(ints, floats, v, parent, depth, s, n_t, ones, has_r)
        if not _may_expand(n_t, ints[v, RISK], depth, minsplit, max_depth, alpha_min):
            continue
        f, where, best_upper_left, node_max, tied, iscale = _best_split(
            layout, s, e, ones, minbucket, exact, a0, a1, iscale, candidates)
        floats[v, IMPROVE] = node_max
        if node_max > 0.0 and node_max <= fragile_limit:
            ints[v, FRAGILE] = 1
        if f < 0:
            continue
        threshold, n_low, ones_low = _cut(layout, rank_value, f, s, n_t, where)
        if n_low == 0 or n_low == n_t:
            continue  # degenerate midpoint (module docstring)
        ones_high = ones - ones_low
        n_high = n_t - n_low
        bound = layout[f, s + n_low - 1] >> 32
        r_low = 1 if (has_r == 1 and row_rank[f, r] <= bound) else 0
        ints[v, FEATURE] = f
        ints[v, TIED] = tied
        ints[v, UPPER_LEFT] = best_upper_left
        ints[v, LOW_NONR] = n_low - r_low
        floats[v, THRESHOLD] = threshold
        low_ref = -1
        high_ref = -1
        if ref >= 0 and ref_ints[ref, FEATURE] == f and ref_ints[ref, LOW_NONR] == n_low - r_low:
            upper_left_ref = ref_ints[ref, UPPER_LEFT] == 1
            low_ref = ref_ints[ref, RIGHT] if upper_left_ref else ref_ints[ref, LEFT]
            high_ref = ref_ints[ref, LEFT] if upper_left_ref else ref_ints[ref, RIGHT]
        low_has_r = 1 if r_low == 1 else 0
        high_has_r = 1 if (has_r == 1 and r_low == 0) else 0
        copy_low = (low_ref >= 0 and low_has_r == 0 and ref_ints[low_ref, HAS_R] == 0
                    and ref_ints[low_ref, FRAGILE] == 0)
        copy_high = (high_ref >= 0 and high_has_r == 0 and ref_ints[high_ref, HAS_R] == 0
                     and ref_ints[high_ref, FRAGILE] == 0)
        need_low = not copy_low and _may_expand(
            n_low, min(n_low - ones_low, ones_low), depth + 1, minsplit, max_depth, alpha_min)
        need_high = not copy_high and _may_expand(
            n_high, min(n_high - ones_high, ones_high), depth + 1, minsplit, max_depth, alpha_min)
        if need_low or need_high:
            partition(layout, row_rank, f, bound, s, e, n_low, need_low, need_high, buffer)
        if top + 2 > stack.shape[0]:
            grown_stack = np.empty((2 * stack.shape[0], 8), np.int64)
            grown_stack[:top] = stack[:top]
            stack = grown_stack
        # The left child is explored first: push the right child, then the left one.
        for child in range(2):
            upper = (child == 0) == (best_upper_left == 0)  # child 0 = right: upper unless upper is left
            stack[top, 0] = s + n_low if upper else s
            stack[top, 1] = e if upper else s + n_low
            stack[top, 2] = depth + 1
            stack[top, 3] = v
            stack[top, 4] = child
            stack[top, 5] = ones_high if upper else ones_low
            stack[top, 6] = high_ref if upper else low_ref
            stack[top, 7] = high_has_r if upper else low_has_r
            top += 1

    for v in range(count - 1, -1, -1):  # subtree sizes, largest improvements, fragility (preorder ids)
        if ints[v, FEATURE] >= 0:
            left = ints[v, LEFT]
            right = ints[v, RIGHT]
            ints[v, SIZE] = 1 + ints[left, SIZE] + ints[right, SIZE]
            floats[v, SUBMAX] = max(floats[v, IMPROVE], floats[left, SUBMAX], floats[right, SUBMAX])
            ints[v, FRAGILE] = max(ints[v, FRAGILE], ints[left, FRAGILE], ints[right, FRAGILE])
        else:
            ints[v, SIZE] = 1
            floats[v, SUBMAX] = floats[v, IMPROVE]
    for v in range(count):  # nodes whose split could depend on the order nodes were visited in
        ints[v, ISCALE] = 1 if (floats[v, IMPROVE] > 0.0 and floats[v, IMPROVE] <= iscale * 1e-10) else 0
    return ints, floats, count, stack, exact


@njit(cache=True)
def _grown_all(ints, floats, kept, bound, needed):
    if needed <= ints.shape[0]:
        return ints, floats, kept, bound
    capacity = max(needed, 2 * ints.shape[0])
    new_kept = np.zeros(capacity, np.int64)
    new_bound = np.zeros(capacity, np.float64)
    new_kept[: kept.shape[0]] = kept
    new_bound[: bound.shape[0]] = bound
    ints, floats = _grown(ints, floats, capacity)
    return ints, floats, new_kept, new_bound


@njit(cache=True)
def grow_single(layout, row_rank, rank_value, max_depth, minsplit, minbucket, alpha, ints, floats, kept, bound,
                frames, frame_floats, buffer, candidates):
    """rpart's partition() recursion for one ``(maxdepth, α)``, splitting each node when visited.

    The same recursion as :func:`prune`, but a node's split is searched only when rpart visits
    it, in rpart's order, so nothing is grown that rpart does not grow and ``iscale`` is rpart's
    running maximum exactly. Returns ``(ints, floats, kept, bound, count, exact_priors)`` with
    ``kept``/``bound`` as :func:`prune` leaves them.
    """
    n_total = layout.shape[1]
    ones_total = 0
    for i in range(n_total):
        ones_total += layout[0, i] & 1
    a0, a1 = altered_priors(n_total - ones_total, ones_total)
    exact = a0 == 1.0 and a1 == 1.0
    iscale = 0.0
    ints, floats, kept, bound = _grown_all(ints, floats, kept, bound, 1)
    _new_node(ints, floats, 0, -1, 0, 0, n_total, ones_total, 0)
    count = 1
    bound[0] = float(ints[0, RISK])
    frames[0, 0] = 0
    frames[0, 1] = 0
    top = 1
    ret_split = 0
    ret_risk = 0.0
    while top > 0:
        k = top - 1
        v = frames[k, 0]
        stage = frames[k, 1]
        risk = float(ints[v, RISK])
        if stage == 0:
            t = risk
            if v != 0 and t > bound[v]:
                t = bound[v]
            f = -1
            s = ints[v, START]
            n_t = ints[v, N]
            ones = ints[v, ONES]
            threshold = np.nan
            n_low = 0
            ones_low = 0
            tied = 0
            upper_left = 0
            if not (n_t < minsplit or t <= alpha or ints[v, DEPTH] >= max_depth):
                f, where, upper_left, node_max, tied, iscale = _best_split(
                    layout, s, s + n_t, ones, minbucket, exact, a0, a1, iscale, candidates)
                floats[v, IMPROVE] = node_max
                if f >= 0:
                    threshold, n_low, ones_low = _cut(layout, rank_value, f, s, n_t, where)
                    if n_low == 0 or n_low == n_t:
                        f = -1  # degenerate midpoint (module docstring)
            if f < 0:
                bound[v] = alpha
                kept[v] = 0
                ret_split = 0
                ret_risk = risk
                top -= 1
                continue
            n_high = n_t - n_low
            ones_high = ones - ones_low
            depth = ints[v, DEPTH]
            need_low = _may_expand(n_low, min(n_low - ones_low, ones_low), depth + 1, minsplit, max_depth, alpha)
            need_high = _may_expand(n_high, min(n_high - ones_high, ones_high), depth + 1, minsplit, max_depth,
                                    alpha)
            if need_low or need_high:
                partition(layout, row_rank, f, layout[f, s + n_low - 1] >> 32, s, s + n_t, n_low, need_low,
                           need_high, buffer)
            ints, floats, kept, bound = _grown_all(ints, floats, kept, bound, count + 2)
            low, high = count, count + 1
            count += 2
            _new_node(ints, floats, low, v, depth + 1, s, n_low, ones_low, 0)
            _new_node(ints, floats, high, v, depth + 1, s + n_low, n_high, ones_high, 0)
            ints[v, FEATURE] = f
            ints[v, TIED] = tied
            ints[v, UPPER_LEFT] = upper_left
            floats[v, THRESHOLD] = threshold
            ints[v, LEFT] = high if upper_left == 1 else low
            ints[v, RIGHT] = low if upper_left == 1 else high
            left = ints[v, LEFT]
            bound[left] = t - alpha
            frames[k, 1] = 1
            frames[top, 0] = left
            frames[top, 1] = 0
            top += 1
        elif stage == 1:
            left = ints[v, LEFT]
            left_split = ret_split
            left_risk = ret_risk
            t = (risk - left_risk) / (left_split + 1)
            t2 = risk - float(ints[left, RISK])
            if t < t2:
                t = t2
            if t > bound[v]:
                t = bound[v]
            frames[k, 2] = left_split
            frame_floats[k, 1] = left_risk
            right = ints[v, RIGHT]
            bound[right] = t - alpha
            frames[k, 1] = 2
            frames[top, 0] = right
            frames[top, 1] = 0
            top += 1
        else:
            ret_split, ret_risk = _collapse(ints, v, frames[k, 2], frame_floats[k, 1], ret_split, ret_risk,
                                            alpha, kept, bound)
            top -= 1
    return ints, floats, kept, bound, count, exact


@njit(cache=True)
def _collapse(ints, v, left_split, left_risk, right_split, right_risk, alpha, kept, bound):
    """The end of partition(): node ``v``'s complexity, and whether it collapses to a leaf.

    Returns ``(splits, risk)`` of the subtree as it stands (``(0, R(v))`` if collapsed).
    """
    risk = float(ints[v, RISK])
    left = ints[v, LEFT]
    right = ints[v, RIGHT]
    t = (risk - (left_risk + right_risk)) / (left_split + right_split + 1)
    if bound[right] > bound[left]:
        if t > bound[left]:
            left_risk = float(ints[left, RISK])
            left_split = 0
            t = (risk - (left_risk + right_risk)) / (left_split + right_split + 1)
            if t > bound[right]:
                right_risk = float(ints[right, RISK])
                right_split = 0
    elif t > bound[right]:
        right_split = 0
        right_risk = float(ints[right, RISK])
        t = (risk - (left_risk + right_risk)) / (left_split + right_split + 1)
        if t > bound[left]:
            left_risk = float(ints[left, RISK])
            left_split = 0
    bound[v] = (risk - (left_risk + right_risk)) / (left_split + right_split + 1)
    if bound[v] <= alpha:
        kept[v] = 0
        return 0, risk
    kept[v] = 1
    return left_split + right_split + 1, left_risk + right_risk


@njit(cache=True)
def pruned_pmse(ints, kept, frames):
    """``Σ_leaves n_t (p_t − ½)² / N`` over the leaves of the tree ``kept`` describes."""
    total = 0.0
    visit = frames[:, 0]
    visit[0] = 0
    top = 1
    while top > 0:
        top -= 1
        v = visit[top]
        if kept[v] == 1 and ints[v, FEATURE] >= 0:
            visit[top] = ints[v, RIGHT]
            visit[top + 1] = ints[v, LEFT]
            top += 2
        else:
            p = ints[v, ONES] / ints[v, N]
            total += ints[v, N] * (p - 0.5) * (p - 0.5)
    return total / ints[0, N]


@njit(cache=True)
def prune(ints, count, max_depth, minsplit, alpha, kept, bound, frames, frame_floats):
    """Replay rpart's partition() recursion over a grown tree for one ``(maxdepth, α)``.

    Sets ``kept[v] = 1`` for the internal nodes of that configuration's tree (a node is in
    the tree iff its parent is kept; the root always is). ``bound`` (float, per node) receives
    rpart's node complexities; ``frames``/``frame_floats`` are scratch stacks of at least
    ``depth + 2`` rows. Returns the number of splits.
    """
    # frame columns: node, stage, left_split ; frame_floats: t, left_risk
    bound[0] = float(ints[0, RISK])
    frames[0, 0] = 0
    frames[0, 1] = 0
    top = 1
    ret_split = 0
    ret_risk = 0.0
    while top > 0:
        k = top - 1
        v = frames[k, 0]
        stage = frames[k, 1]
        risk = float(ints[v, RISK])
        if stage == 0:
            t = risk
            if v != 0 and t > bound[v]:
                t = bound[v]
            if ints[v, N] < minsplit or t <= alpha or ints[v, DEPTH] >= max_depth or ints[v, FEATURE] < 0:
                bound[v] = alpha
                kept[v] = 0
                ret_split = 0
                ret_risk = risk
                top -= 1
                continue
            left = ints[v, LEFT]
            bound[left] = t - alpha
            frames[k, 1] = 1
            frames[top, 0] = left
            frames[top, 1] = 0
            top += 1
        elif stage == 1:
            left = ints[v, LEFT]
            left_split = ret_split
            left_risk = ret_risk
            t = (risk - left_risk) / (left_split + 1)
            t2 = risk - float(ints[left, RISK])
            if t < t2:
                t = t2
            if t > bound[v]:
                t = bound[v]
            frames[k, 2] = left_split
            frame_floats[k, 1] = left_risk
            right = ints[v, RIGHT]
            bound[right] = t - alpha
            frames[k, 1] = 2
            frames[top, 0] = right
            frames[top, 1] = 0
            top += 1
        else:
            ret_split, ret_risk = _collapse(ints, v, frames[k, 2], frame_floats[k, 1], ret_split, ret_risk,
                                            alpha, kept, bound)
            top -= 1
    return ret_split


@njit(cache=True)
def configuration_pmse(ints, count, depths, alphas, minsplit, kept, bound, frames, frame_floats):
    """pMSE (``Σ_leaves n_t (p_t − ½)² / N``) of every ``(depths[k], alphas[k])`` tree."""
    out = np.empty(depths.shape[0], np.float64)
    for k in range(depths.shape[0]):
        prune(ints, count, depths[k], minsplit, alphas[k], kept, bound, frames, frame_floats)
        out[k] = pruned_pmse(ints, kept, frames)
    return out


@njit(cache=True)
def leaf_probabilities(ints, floats, z, kept, frames):
    """In-sample fraction of label 1 in each row's leaf of the pruned tree (after prune).

    Rows are routed by rpart's rule (``x < threshold`` goes to the lower side), on the data
    ``z`` the tree was grown on. Returns ``(probabilities, leaves, depth, tied_nodes,
    iscale_nodes)`` of the pruned tree.
    """
    n_rows = z.shape[0]
    probabilities = np.empty(n_rows, np.float64)
    for i in range(n_rows):
        v = 0
        while kept[v] == 1 and ints[v, FEATURE] >= 0:
            lower = z[i, ints[v, FEATURE]] < floats[v, THRESHOLD]
            v = ints[v, RIGHT] if lower == (ints[v, UPPER_LEFT] == 1) else ints[v, LEFT]
        probabilities[i] = ints[v, ONES] / ints[v, N]
    visit = frames[:, 0]
    visit[0] = 0
    top = 1
    leaves = 0
    depth = 0
    iscale_nodes = 0
    tied_nodes = 0
    while top > 0:
        top -= 1
        v = visit[top]
        iscale_nodes += ints[v, ISCALE]
        if kept[v] == 1 and ints[v, FEATURE] >= 0:
            tied_nodes += ints[v, TIED]
            visit[top] = ints[v, RIGHT]
            visit[top + 1] = ints[v, LEFT]
            top += 2
            continue
        leaves += 1
        depth = max(depth, ints[v, DEPTH])
    return probabilities, leaves, depth, tied_nodes, iscale_nodes
