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
  minsplit/minbucket. :mod:`.greedy_tree` documents it.

Both share the sorted, packed column layout of :mod:`.cart_layout`, the one-fit-many-configurations
readout and the neighbour-pair reuse: the two speed-ups the sensitivity trials of Snoke & Slavković
(Table 1) need. This module validates the inputs, keeps each thread's reusable buffers and
dispatches to the rule's kernels.

References:
    Breiman, Friedman, Olshen & Stone (1984), *Classification and Regression Trees*;
    Snoke & Slavković (2018), "pMSE Mechanism", Sections 3.2 and 5 (Table 1).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privlab.mechanisms.pmse import cart_layout, greedy_tree, rpart_tree
from privlab.mechanisms.pmse.cart_checks import (
    DEFAULT_MINSPLIT,
    GREEDY,
    Rule,
    TieBreak,
    Tree,
    check_configuration,
    check_features,
    check_labels,
    check_rule,
    configuration_arrays,
)


# --------------------------------------------------------------------------- validation


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
        self.trees = (greedy_tree.TreeBuffers(n_rows, q), greedy_tree.TreeBuffers(n_rows, q))
        self.rpart_trees: tuple[_RpartBuffers, _RpartBuffers] | None = None

    def sort(self, z: np.ndarray) -> None:
        """Rows and values of each column of ``z`` in ascending order, into ``order``/``values``."""
        cart_layout.sort_keys(z.view(np.uint64), self.low, self.keys)
        self.keys.view(np.float64).sort(axis=1)
        if not cart_layout.rows_from_keys(z, self.keys, self.low, self.order, self.values):
            self.order[:] = np.argsort(z.T, axis=1)
            self.values[:] = np.take_along_axis(z.T, self.order, axis=1)

    def layout_of(self, z: np.ndarray, labels: np.ndarray) -> None:
        self.sort(z)
        cart_layout.dense_layout(self.order, self.values, labels, self.layout, self.row_rank, self.rank_value)


_local = threading.local()


def _workspace(n_rows: int, q: int) -> _Workspace:
    """This thread's workspace for ``(n_rows, q)``; only the most recent shape is kept."""
    workspace = getattr(_local, "workspace", None)
    if workspace is None or workspace.shape != (n_rows, q):
        workspace = _Workspace(n_rows, q)
        _local.workspace = workspace
    return workspace


def _stacked(x: np.ndarray, x_synth: np.ndarray) -> tuple[_Workspace, np.ndarray, np.ndarray]:
    """``[X; Xˢ]`` written into the workspace, with labels 0 then 1 (validated inputs)."""
    n, q = x.shape
    workspace = _workspace(2 * n, q)
    np.concatenate([x, x_synth], out=workspace.z)
    return workspace, workspace.z, cart_layout.balanced_labels(n)


_NO_REFERENCE = (np.empty((0, greedy_tree.NI), np.int64), np.empty((0, greedy_tree.NF), np.float64))


# --------------------------------------------------------------------------- public API


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


@functools.cache
def _sklearn_rand_r_state(random_state: int) -> int:
    # What DecisionTreeClassifier(random_state=…) seeds its splitter with (Splitter.init);
    # a local legacy generator, drawn exactly as scikit-learn draws it, not a global one.
    return int(np.random.RandomState(random_state).randint(0, 2147483647))


def _rpart_depths(depths: np.ndarray) -> np.ndarray:
    limits = np.where(depths == greedy_tree.NO_DEPTH_LIMIT, rpart_tree.RPART_MAX_DEPTH, depths)
    too_deep = limits > rpart_tree.RPART_MAX_DEPTH
    if too_deep.any():
        raise ValueError(
            f"max_depth ({int(limits[too_deep][0])!r}) must be at most {rpart_tree.RPART_MAX_DEPTH} with tree='rpart' "
            "(rpart's limit; None means 30)"
        )
    return limits.astype(np.int64)


# The *_checked functions take inputs already validated by the public functions here or in
# privlab.mechanisms.pmse.propensity: float64 C-contiguous finite arrays, uint8 0/1 labels.


class _RpartBuffers:
    """Node, stack and pruning buffers of one rpart tree (grown in place)."""

    def __init__(self, n_rows: int) -> None:
        self.ints = np.empty((min(2 * n_rows, 1024), rpart_tree.NI), np.int64)
        self.floats = np.empty((self.ints.shape[0], rpart_tree.NF), np.float64)
        self.stack = np.empty((64, 8), np.int64)
        self.frames = np.empty((rpart_tree.RPART_MAX_DEPTH + 4, 3), np.int64)
        self.frame_floats = np.empty((rpart_tree.RPART_MAX_DEPTH + 4, 2), np.float64)
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

    def grow(self, layout, row_rank, rank_value, max_depth: int, rule: Rule, alpha_min: float, buffer,
             r: int = -1, reference: _RpartBuffers | None = None) -> None:
        if reference is None:
            ref_ints, ref_floats = np.empty((0, rpart_tree.NI), np.int64), np.empty((0, rpart_tree.NF), np.float64)
        else:
            ref_ints, ref_floats = reference.ints[: reference.count], reference.floats[: reference.count]
        (self.ints, self.floats, self.count, self.stack, self.exact_priors) = rpart_tree.grow(
            layout, row_rank, rank_value, max_depth, rule.minsplit, rule.minbucket, alpha_min, r, ref_ints,
            ref_floats, self.ints, self.floats, self.stack, buffer, self.candidates,
        )

    def grow_single(self, layout, row_rank, rank_value, max_depth: int, rule: Rule, alpha: float, buffer) -> float:
        """rpart's recursion for one configuration, growing on visit; returns its pMSE."""
        (self.ints, self.floats, self._kept, self._bound, self.count, self.exact_priors) = rpart_tree.grow_single(
            layout, row_rank, rank_value, max_depth, rule.minsplit, rule.minbucket, alpha, self.ints, self.floats,
            self._kept, self._bound, self.frames, self.frame_floats, buffer, self.candidates,
        )
        return float(rpart_tree.pruned_pmse(self.ints, self._kept, self.frames))

    def pmse(self, depths: np.ndarray, alphas: np.ndarray, rule: Rule) -> np.ndarray:
        kept, bound = self._node_arrays()
        return rpart_tree.configuration_pmse(self.ints, self.count, depths, alphas, rule.minsplit, kept, bound,
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
    workspace: _Workspace, layout, row_rank, labels, depths: np.ndarray, cps: np.ndarray, rule: Rule, index: int,
    r: int = -1, reference: _RpartBuffers | None = None,
) -> tuple[_RpartBuffers, np.ndarray, np.ndarray]:
    depths = _rpart_depths(depths)
    alphas = _alphas(cps, labels)
    tree = _rpart_buffers(workspace, index)
    tree.grow(layout, row_rank, workspace.rank_value, int(depths.max()), rule, float(alphas.min()), workspace.buffer,
              r, reference)
    return tree, depths, alphas


def _rpart_single(
    workspace: _Workspace, labels: np.ndarray, depth_limit: int, cp: float, rule: Rule
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
) -> tuple[greedy_tree.TreeBuffers, float]:
    workspace.layout_of(z, labels)
    seed = _sklearn_rand_r_state(0) if emulate else 0
    tree = workspace.trees[0]
    tree.grow(workspace.layout, workspace.row_rank, workspace.rank_value, depth_limit, cp, -1,
              *_NO_REFERENCE, emulate, seed, workspace.buffer)
    return tree, float(tree.pmse(np.array([depth_limit], np.int64), np.array([cp], np.float64))[0])


def _pmse_checked(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depth_limit: int, cp: float, rule: Rule
) -> float:
    if rule.tree == "rpart":
        depths, cps = np.array([depth_limit], np.int64), np.array([cp], np.float64)
        return float(_configurations_checked(workspace, z, labels, depths, cps, rule)[0])
    return _grow_one(workspace, z, labels, depth_limit, cp, rule.emulate)[1]


def _fit_tree_checked(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depth_limit: int, cp: float, rule: Rule
) -> PropensityTree:
    if rule.tree == "rpart":
        workspace.layout_of(z, labels)
        rtree, pmse_value = _rpart_single(workspace, labels, depth_limit, cp, rule)
        kept, _ = rtree._node_arrays()
        probabilities, leaves, depth, tied, iscale_nodes = rpart_tree.leaf_probabilities(
            rtree.ints, rtree.floats, z, kept, rtree.frames
        )
        return PropensityTree(
            propensities=probabilities, pmse=pmse_value, node_count=int(2 * leaves - 1), depth=int(depth),
            tied_nodes=int(tied), iscale_nodes=int(iscale_nodes), exact_priors=bool(rtree.exact_priors),
        )
    tree, pmse = _grow_one(workspace, z, labels, depth_limit, cp, rule.emulate)
    nodes = tree.ints[: tree.count]
    return PropensityTree(
        propensities=greedy_tree.leaf_probabilities(tree.ints, tree.count, workspace.layout),
        pmse=pmse,
        node_count=int(tree.count),
        depth=int(nodes[:, greedy_tree.DEPTH].max()),
        tied_nodes=int(nodes[nodes[:, greedy_tree.FEATURE] >= 0, greedy_tree.TIED].sum()),
    )


def _configurations_checked(
    workspace: _Workspace, z: np.ndarray, labels: np.ndarray, depths: np.ndarray, cps: np.ndarray,
    rule: Rule = GREEDY,
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
    rule: Rule = GREEDY,
) -> np.ndarray:
    changed, r = cart_layout.changed_rows(x, x_prime)
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
    cart_layout.pair_layouts(w.order, w.values, labels, r, x_prime[r], w.layout, w.row_rank, w.layout_new, w.row_rank_new,
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
    labels = check_labels(labels, z.shape[0])
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
    depths, cps = configuration_arrays(configs)
    rule = check_rule(tree, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        _rpart_depths(depths)
    z = check_features("Z", Z)
    labels = check_labels(labels, z.shape[0])
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
    depths, cps = configuration_arrays(configs)
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
