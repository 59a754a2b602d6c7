"""The sorted, packed column layout both pMSE trees grow on (:mod:`.cart`).

Each feature is sorted once (numpy's SIMD sort on float keys that carry the row
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

References:
    Breiman, Friedman, Olshen & Stone (1984), *Classification and Regression Trees*;
    Snoke & Slavković (2018), "pMSE Mechanism", Sections 3.2 and 5 (Table 1).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

__all__ = ["MAX_ROWS", "balanced_labels", "changed_rows", "dense_layout", "pair_layouts", "partition", "rows_from_keys",
           "sort_keys"]

MAX_ROWS = 1 << 30  # rows and ranks are packed into one int64: rank << 32 | row << 1 | label


@njit(cache=True)
def sort_keys(bits, low, keys):
    """Sort keys of each column: the float64 with its low mantissa bits replaced by the row.

    ``bits`` is the data viewed as uint64 (finite values only), ``low = 2**b − 1 ≥ N − 1``,
    and ``keys`` (q, N) receives the patterns (read as float64 by the caller). Replacing bits
    below the kept ones moves a value only within the interval of floats sharing those bits,
    so sorting the keys with numpy's SIMD float sort orders the rows by value except inside
    such intervals; :func:`rows_from_keys` repairs those, so the final order is exact.
    """
    n_rows, q = bits.shape
    for f in range(q):
        for i in range(n_rows):
            keys[f, i] = (bits[i, f] & ~low) | np.uint64(i)


@njit(cache=True)
def rows_from_keys(z, keys, low, order, values):
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
def dense_layout(order, values, labels, layout, row_rank, rank_value):
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
def pair_layouts(order, values, labels, r, new_row, layout, row_rank, layout_new, row_rank_new, rank_value):
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
def partition(layout, row_rank, split_feature, bound, s, e, n_left, need_left, need_right, buffer):
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
def changed_rows(x, x_prime):
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


@functools.lru_cache(maxsize=8)
def balanced_labels(n: int) -> np.ndarray:
    labels = np.concatenate([np.zeros(n, np.uint8), np.ones(n, np.uint8)])
    labels.setflags(write=False)
    return labels
