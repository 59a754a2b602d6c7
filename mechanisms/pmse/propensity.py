"""The pMSE of synthetic data (Algorithm 1), via the CARTs of :mod:`.cart` (rpart's by default).

Stack the ``n`` real rows ``X`` (label 0) on the ``n`` synthetic rows ``Xˢ`` (label 1),
``N = 2n``; fit a classification tree predicting the label; take the in-sample predicted
probabilities ``p̂_i`` (the share of synthetic rows in row ``i``'s leaf); then

    pMSE = (1/N) Σᵢ (p̂ᵢ − ½)²  ∈ [0, ¼].

0 means the tree cannot tell the datasets apart (every leaf half real, half synthetic); ¼
means every leaf is pure. For a tree with leaves ``t`` holding ``N_t`` rows of which a
fraction ``p_t`` are synthetic this is ``Σ_t N_t (p_t − ½)² / N``, and since
``(p − ½)² = ¼ − ½·G(p)`` with the Gini index ``G(p) = 2p(1 − p)``,
``pMSE = ¼ − (1/2N) Σ_t N_t G_t``: the pMSE falls as the tree's total Gini impurity rises.
That identity is how Theorem 2 bounds the sensitivity.

The tree is chosen with ``tree``. ``"rpart"`` (default; the paper fitted R's rpart) is R's
rpart classification tree with ``minsplit`` (default 20), ``minbucket`` (default
``round(minsplit/3)``), ``maxdepth`` and rpart's cost-complexity ``cp``: it grows, then
collapses every subtree whose misclassification-risk reduction per split is ≤ ``cp`` times
the root's risk (:mod:`.rpart_tree`). ``"greedy"`` splits a node only if the split lowers the
tree's total Gini impurity ``Σ_t N_t G_t`` by at least ``cp · N · G(root)`` (with a balanced
stack ``G(root) = ½``, scikit-learn's ``min_impurity_decrease = cp / 2``; :mod:`.cart`).

Privacy:
    The pMSE is the quality function of the pMSE mechanism (the exponential mechanism over
    synthesis parameters θ, with ``u(X, θ) = E[pMSE(X, Xˢ_θ)]``). Theorem 2 bounds its
    sensitivity under the replace-one relation (``X`` and ``X′`` of the same size ``n``
    differing in one row) by ``Δu ≤ 1/n``, but only for trees whose splits are *globally
    optimal* for the Gini index. The trees here, like rpart's and scikit-learn's, are grown
    greedily, and a greedy tree can violate the bound: one changed row can redirect an early
    split and change the whole subtree. Snoke & Slavković (Section 5, Table 1) measure how
    often (0% at depth 1, where greedy is optimal, up to 2.5% for unlimited depth with
    cp = 0.001); :func:`pmse_neighbour_pair` computes one such trial. Using ``1/n`` with
    greedy trees is therefore an empirical, not a proven, ε-DP calibration.

References:
    Snoke & Slavković (2018), "pMSE Mechanism: Differentially Private Synthetic Data with
    Maximal Distributional Similarity", Algorithm 1, Theorem 2, Section 5; Woo et al. (2009);
    Snoke, Raab, Nowok, Dibben & Slavković (2018) for the pMSE.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from privlab.mechanisms.pmse import cart, cart_checks
from privlab.mechanisms.pmse.cart_checks import DEFAULT_MINSPLIT, TieBreak, Tree


def _check_pair(real: np.ndarray, synthetic: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = cart_checks.check_features("real", real)
    s = cart_checks.check_features("synthetic", synthetic)
    if s.shape != x.shape:
        raise ValueError(
            f"synthetic (shape {s.shape!r}) must have the shape of real ({x.shape!r}): "
            "the pMSE compares n real with n synthetic rows over the same columns"
        )
    return x, s


def _prepare(
    real: np.ndarray, synthetic: np.ndarray, max_depth: int | None, cp: float, tie_break: TieBreak, tree: Tree,
    minsplit: int, minbucket: int | None,
) -> tuple[cart._Workspace, np.ndarray, np.ndarray, int, float, cart_checks.Rule]:
    depth_limit, cp = cart_checks.check_configuration(max_depth, cp)
    rule = cart_checks.check_rule(tree, tie_break=tie_break, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        cart._rpart_depths(np.array([depth_limit], np.int64))
    # Algorithm 1, steps 1–2: Z = [X; Xˢ] with the indicator I = 1 on the synthetic rows.
    workspace, z, labels = cart._stacked(*_check_pair(real, synthetic))
    return workspace, z, labels, depth_limit, cp, rule


def pmse(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    max_depth: int | None,
    cp: float,
    tie_break: TieBreak = "first",
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> float:
    """The pMSE of ``synthetic`` against ``real`` (Algorithm 1) with rpart's tree or the greedy one.

    Args:
        real: ``(n, q)`` finite real data ``X``.
        synthetic: ``(n, q)`` finite synthetic data ``Xˢ`` (same shape).
        max_depth: Tree depth limit (root depth 0), or None for unlimited (30, rpart's
            maximum, with ``tree="rpart"``).
        cp: Complexity parameter ≥ 0: rpart's cost-complexity with ``tree="rpart"``; with
            ``tree="greedy"`` a split must lower the total Gini impurity by at least
            ``cp · N · G(root)`` (scikit-learn's ``min_impurity_decrease = cp/2``).
        tie_break: ``"first"`` (default; rpart-like, depends only on the data) or
            ``"sklearn"`` (replays ``DecisionTreeClassifier(random_state=0)``'s random feature
            order, so exact ties go the way :func:`sklearn_pmse` sends them); see
            :func:`privlab.mechanisms.pmse.cart.fit_propensity_tree`. ``"sklearn"`` needs
            ``tree="greedy"``.
        tree: ``"rpart"`` (default) or ``"greedy"``.
        minsplit, minbucket: rpart's settings (``tree="rpart"`` only; defaults 20 and
            ``round(minsplit/3)``).

    Returns:
        ``(1/2n) Σᵢ (p̂ᵢ − ½)²`` over all ``2n`` stacked rows, in ``[0, 0.25]``.

    Raises:
        TypeError: Non-numeric data, or a ``max_depth``/``cp`` of the wrong type.
        ValueError: Data not 2-D, empty, non-finite or of different shapes; ``max_depth < 1``;
            ``cp`` negative or not finite; unknown ``tie_break``.

    Privacy:
        Computes a statistic of the private ``real``; releases nothing by itself. Its
        replace-one sensitivity is ``≤ 1/n`` for globally optimal trees (Theorem 2), which
        greedy trees can exceed (module docstring; Table 1).

    References:
        Snoke & Slavković (2018), Algorithm 1 and Section 3.2.
    """
    return cart._pmse_checked(*_prepare(real, synthetic, max_depth, cp, tie_break, tree, minsplit, minbucket))


def propensity_scores(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    max_depth: int | None,
    cp: float,
    tie_break: TieBreak = "first",
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> np.ndarray:
    """Algorithm 1, step 4: in-sample ``p̂`` for the ``2n`` stacked rows (real rows first).

    Arguments, errors and privacy as in :func:`pmse`; ``pmse == mean((p̂ − 0.5)**2)`` up to
    rounding.
    """
    return cart._fit_tree_checked(
        *_prepare(real, synthetic, max_depth, cp, tie_break, tree, minsplit, minbucket)
    ).propensities


def pmse_configurations(
    real: np.ndarray,
    synthetic: np.ndarray,
    configs: Sequence[tuple[int | None, float]],
    *,
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> np.ndarray:
    """The pMSE for several ``(max_depth, cp)`` configurations from one tree fit.

    The split at a node depends only on that node's rows, so one grown tree serves every
    configuration, bit-identically to separate fits: a depth- or cp-limited greedy tree is a
    truncation of the tree grown with the largest depth and smallest cp, and rpart's
    grow-and-prune recursion is replayed per configuration over one tree split as far as any
    configuration could go (:mod:`.rpart_tree`).
    All configurations see the same synthetic rows (common random numbers), so their
    differences are free of synthesis noise.

    Args:
        real: ``(n, q)`` real data.
        synthetic: ``(n, q)`` synthetic data.
        configs: ``(max_depth, cp)`` pairs (``max_depth`` None = unlimited).
        tree, minsplit, minbucket: As :func:`pmse`.

    Returns:
        ``(len(configs),)`` pMSE values, in the order of ``configs``.

    Raises:
        TypeError, ValueError: As :func:`pmse`, for the data and for each configuration.

    Privacy:
        As :func:`pmse`.

    References:
        Snoke & Slavković (2018), Algorithm 1; Breiman et al. (1984) for greedy CART.
    """
    depths, cps = cart_checks.configuration_arrays(configs)
    rule = cart_checks.check_rule(tree, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        cart._rpart_depths(depths)
    workspace, z, labels = cart._stacked(*_check_pair(real, synthetic))
    return cart._configurations_checked(workspace, z, labels, depths, cps, rule)


def pmse_neighbour_pair(
    real: np.ndarray,
    real_neighbour: np.ndarray,
    synthetic: np.ndarray,
    configs: Sequence[tuple[int | None, float]],
    *,
    tree: Tree = "rpart",
    minsplit: int = DEFAULT_MINSPLIT,
    minbucket: int | None = None,
) -> np.ndarray:
    """pMSE of ``X`` and of its replace-one neighbour ``X′`` against one ``Xˢ`` (a Table-1 trial).

    ``|result[:, 0] − result[:, 1]|`` is the empirical sensitivity of the pMSE for this
    ``(X, X′, Xˢ)``; values above ``1/n`` violate Theorem 2's bound. The data are sorted once
    and the ``X′`` tree reuses every subtree of the ``X`` tree that the changed row does not
    reach (:func:`privlab.mechanisms.pmse.cart.pmse_pair`).

    Args:
        real: ``(n, q)`` real data ``X``.
        real_neighbour: ``(n, q)`` data ``X′`` equal to ``X`` except in at most one row.
        synthetic: ``(n, q)`` synthetic data ``Xˢ`` shared by both fits.
        configs: ``(max_depth, cp)`` pairs.
        tree, minsplit, minbucket: As :func:`pmse`.

    Returns:
        ``(len(configs), 2)`` array ``[[pMSE(X, Xˢ), pMSE(X′, Xˢ)], …]``, bit-identical to
        separate :func:`pmse_configurations` calls.

    Raises:
        TypeError, ValueError: As :func:`pmse`; also if ``X′`` differs from ``X`` in more
            than one row.

    Privacy:
        A diagnostic of the sensitivity bound; it computes on (simulated) private data and
        releases nothing.

    References:
        Snoke & Slavković (2018), Theorem 2 and Section 5 (Table 1).
    """
    depths, cps = cart_checks.configuration_arrays(configs)
    rule = cart_checks.check_rule(tree, minsplit=minsplit, minbucket=minbucket)
    if rule.tree == "rpart":
        cart._rpart_depths(depths)
    x = cart_checks.check_features("real", real)
    x_prime = cart_checks.check_features("real_neighbour", real_neighbour)
    s = cart_checks.check_features("synthetic", synthetic)
    if x_prime.shape != x.shape or s.shape != x.shape:
        raise ValueError(
            f"real, real_neighbour and synthetic (shapes {x.shape!r}, {x_prime.shape!r}, {s.shape!r}) "
            "must have the same shape"
        )
    return cart._pair_checked(x, x_prime, s, depths, cps, rule)


@functools.cache
def warm_up(tree: Tree = "rpart") -> None:
    """Compile ``tree``'s numba kernels (or load them from numba's on-disk cache) in this process.

    The first tree fit of a process otherwise pays for it inside a timed unit of work: 20 s or
    more for rpart's kernels on a cold cache (then written next to the modules, or under
    ``NUMBA_CACHE_DIR``), about a second to load them from the cache. Runs every public
    entry point once on a tiny input, with the dtypes a real fit uses; once per process and
    tree (later calls return at once).
    """
    rng = np.random.default_rng(0)
    real, synthetic = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    neighbour = real.copy()
    neighbour[3] += 1.0
    configs = [(1, 0.01), (None, 0.001)]
    pmse(real, synthetic, max_depth=None, cp=0.001, tree=tree)
    propensity_scores(real, synthetic, max_depth=None, cp=0.001, tree=tree)
    pmse_configurations(real, synthetic, configs, tree=tree)
    pmse_neighbour_pair(real, neighbour, synthetic, configs, tree=tree)


def sklearn_pmse(real: np.ndarray, synthetic: np.ndarray, *, max_depth: int | None, cp: float) -> float:
    """Reference pMSE with scikit-learn's ``DecisionTreeClassifier`` (slow; for checks).

    Fits ``DecisionTreeClassifier(criterion="gini", max_depth=max_depth,
    min_impurity_decrease=cp * 0.5, random_state=0)`` on the stacked data (0.5 is the root
    Gini of a balanced stack, so this is the same cp rule as :func:`pmse`) and averages
    ``(predict_proba − ½)²`` over the ``2n`` training rows.

    scikit-learn casts the data to float32 and treats values closer than 1e-7 as equal, and
    breaks exact ties between features by a random per-node feature order: :func:`pmse`
    matches it exactly with ``tie_break="sklearn"`` on float32-representable data, and with
    the default tie-breaking except where a node has two exactly tied splits on different
    features (tests/test_pmse_cart.py measures both).

    Args, Returns, Raises: As :func:`pmse` (without ``tie_break``).

    Privacy:
        As :func:`pmse`.

    References:
        Pedregosa et al. (2011), scikit-learn; Snoke & Slavković (2018), Algorithm 1.
    """
    from sklearn.tree import DecisionTreeClassifier

    cart_checks.check_configuration(max_depth, cp)
    x, s = _check_pair(real, synthetic)
    z = np.concatenate([x, s])
    labels = np.concatenate([np.zeros(len(x), np.int64), np.ones(len(s), np.int64)])
    model = DecisionTreeClassifier(
        criterion="gini", max_depth=max_depth, min_impurity_decrease=cp * 0.5, random_state=0
    ).fit(z, labels)
    p_hat = model.predict_proba(z)[:, 1]
    return float(np.mean((p_hat - 0.5) ** 2))
