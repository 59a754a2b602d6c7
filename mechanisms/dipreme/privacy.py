"""The DiPriMe paper's privacy arithmetic: budget split, sensitivities and ledger plans.

What was recovered and from where (the paper's text extraction lost its formulas):

* Budget split (Algorithm 1 of the paper; ``fit`` of ``Classes/DiPrime.py`` in the authors'
  public code ``shoryaconsul/DiPriMeFlip_Forest``, read to understand, not copied): a tree of
  depth d with budget ε gives ``ε·b/d`` to the splits of each level (the nodes of a level hold
  disjoint data) and ``ε·(1 − b)`` to the leaves, ``b`` the share for splits
  (``split_fraction``; the authors' default 0.5). A forest on disjoint row subsets gives every
  tree the whole ε (parallel composition); a forest on the full data gives each tree ε/T.
* Inside one node the authors' ``split_count`` spends ``ε_level/2`` on *each* candidate
  feature's private median and ``ε_level/2`` on choosing among the K candidates. The K medians
  run on the same rows, so sequential composition makes that ``(K + 1)·ε_level/2``, not
  ``ε_level``. We charge what is spent: the K medians share ``ε_level/2`` (``ε_level/(2K)``
  each) and the choice gets ``ε_level/2``; with K = 1 there is nothing to choose and the
  median gets the whole ``ε_level``. Our medians are therefore noisier than the authors' code
  at the same nominal ε when K > 1 (see ``experiments/dipreme/RESULTS.md``).
* Leaves: Laplace(1/ε_leaf) on each class count (paper, Section 3). For regression the paper
  adds Laplace(B/(n·ε)) to a leaf's mean, n the leaf's row count; n is private (the splits
  depend on the data), so that scale is the local sensitivity and is not ε-DP in general. We
  release a noisy count and a noisy centred sum with ``ε_leaf/2`` each and divide them
  (post-processing). This is our correction, not the paper's method.

Sensitivities, derived here for add/remove-one neighbours (the relation under which the
paper's parallel composition holds; McSherry 2009). For replace-one every Δ doubles: a
replaced record leaves one node of a level and enters another, i.e. one removal and one
addition (group privacy of size 2); within one node the same factor 2 appears directly.

* Median over ranks, utility ``u(i) = −|i − m/2|`` for the interval with i of the node's m
  values below it: adding a record raises m by 1 (m/2 by 1/2) and i by 0 or 1, so
  ``|Δu| ≤ 1/2``. The exponential mechanism with base measure Lebesgue on the node's public
  range (weight ``width·exp(ε·u/(2Δ))`` per interval, value uniform inside it) is ε-DP (Smith
  2011); without the width weight the released value's density would depend on the data.
  The authors' code uses the same weights with Δ = 1/2.
* Categorical split by balance, utility ``−|N_S − m/2|`` for the subset S of the node's
  allowed categories sent left: ``|Δu| ≤ 1/2`` as above.
* Feature choice, utility ``u_j = −(SSE_L + SSE_R)`` of candidate j's split (SSE = sum of
  squared deviations from the child's mean). Adding x to a set S of size m changes SSE by
  ``m/(m+1)·‖x − mean_S‖² < diam²``: ``B²`` for targets in an interval of width B; 2 for
  classes coded one-hot (``‖e_a − e_b‖² = 2``; SSE is then the count-weighted Gini impurity,
  twice the SSE of 0/1 labels for two classes). One child changes, so Δ = B² (regression) or
  2 (classes). The authors' code scores the MSE, SSE/n with n the node's size, with
  sensitivity 4B²/n: the weight ``exp(ε·(−SSE/n)/(2·4B²/n))`` is ``exp(ε·(−SSE)/(2·4B²))``,
  the same exponential mechanism on −SSE with Δ = 4B² — a valid bound, four times ours, so
  their choice is ε-DP and flatter than ours at the same ε.
* Leaf class counts: adding a record changes one count of one leaf by 1: Δ₁ = 1.
* Leaf counts (regression): Δ₁ = 1. Leaf sums of ``y − (lo + hi)/2`` with y in [lo, hi]: Δ₁ = B/2.

References:
    Consul, Williamson & Dagli (2020), Section 3 and Algorithms 1–3 (arXiv:2006.08795; the later arXiv version is titled "Balance is key: Private median splits yield high-utility random trees");
    McSherry & Talwar (2007); McSherry (2009), Theorem 4; Smith (2011), Section 3.
"""

from __future__ import annotations

from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.privacy_event import PrivacyEvent

__all__ = ["forest_plan", "sensitivity_factor", "tree_budget"]


def sensitivity_factor(neighbouring: str) -> float:
    """2 for replace-one (one removal plus one addition), 1 for add/remove-one."""
    return 2.0 if neighbouring == "replace_one" else 1.0


def tree_budget(epsilon: float, *, split_fraction: float, max_depth: int, candidates: int,
                regression: bool, private_splits: bool = True) -> tuple[float, ...]:
    """Weights of one tree's events (median, choice, leaves...) summing to 1, zeros dropped."""
    leaf = (0.5, 0.5) if regression else (1.0,)
    leaf_share = 1.0 - split_fraction if private_splits else 1.0
    if not private_splits:
        return tuple(w * leaf_share for w in leaf)
    if candidates == 1:
        return (split_fraction, *(w * leaf_share for w in leaf))
    return (split_fraction / 2, split_fraction / 2, *(w * leaf_share for w in leaf))


def _events_for_tree(shares: tuple[float, ...], *, scope: str, step: str, tree: int, regression: bool,
                     private_splits: bool, candidates: int, max_depth: int, target_range: float,
                     factor: float, n_classes: int) -> list[PrivacyEvent]:
    names: list[str] = []
    if private_splits:
        names.append("median_splits")
        if candidates > 1:
            names.append("feature_choice")
    names += ["leaf_counts", "leaf_sums"] if regression else ["leaf_class_counts"]
    events = []
    for name, eps in zip(names, shares, strict=True):
        details: tuple[tuple[str, int | float | str], ...] = (("tree", tree), ("levels", max_depth))
        if name == "median_splits":
            per = eps / (max_depth * candidates)
            sensitivity = 0.5 * factor
            scale = 2 * sensitivity / per
            details += (("candidates_per_node", candidates), ("epsilon_per_median", per),
                        ("composition", "sequential over levels and candidates, parallel over a level's nodes"))
        elif name == "feature_choice":
            per = eps / max_depth
            sensitivity = factor * (target_range ** 2 if regression else 2.0)
            scale = 2 * sensitivity / per
            details += (("candidates_per_node", candidates), ("epsilon_per_level", per),
                        ("score", "-(SSE_left + SSE_right)"))
        elif name == "leaf_sums":
            sensitivity = factor * target_range / 2
            scale = sensitivity / eps
            details += (("query", "sum of y - (lo + hi)/2 per leaf"),)
        else:
            sensitivity = factor * 1.0
            scale = sensitivity / eps
            if name == "leaf_class_counts":
                details += (("classes", n_classes),)
        events.append(PrivacyEvent(
            name=name, mechanism="exponential" if name in ("median_splits", "feature_choice") else "laplace",
            epsilon=eps, sensitivity=sensitivity, noise_scale=scale, scope=scope, step=step, details=details))
    return events


def forest_plan(*, epsilon: float, n_estimators: int, partition: str, split_fraction: float, max_depth: int,
                candidates: int, regression: bool, private_splits: bool, target_range: float,
                neighbouring: str, n_classes: int, scopes: list[str], step: str) -> list[PrivacyEvent]:
    """Every event a forest's fit records, in order, from public inputs only.

    ``scopes`` holds one scope per tree: the parts of a declared partition ("disjoint") or the
    fit's scope repeated ("full"). Shares come from :func:`~privlab.platform.dp.budget.split_epsilon`,
    so the ledger's total is exactly ``epsilon``: each tree's events sum to ε ("disjoint",
    parallel composition) or all events sum to ε ("full", sequential composition).
    """
    weights = tree_budget(1.0, split_fraction=split_fraction, max_depth=max_depth, candidates=candidates,
                          regression=regression, private_splits=private_splits)
    factor = sensitivity_factor(neighbouring)
    if partition == "disjoint":
        per_tree = [split_epsilon(epsilon, weights)] * n_estimators
    else:
        flat = split_epsilon(epsilon, list(weights) * n_estimators)
        per_tree = [flat[t * len(weights):(t + 1) * len(weights)] for t in range(n_estimators)]
    plan: list[PrivacyEvent] = []
    for t in range(n_estimators):
        plan += _events_for_tree(per_tree[t], scope=scopes[t], step=step, tree=t, regression=regression,
                                 private_splits=private_splits, candidates=candidates, max_depth=max_depth,
                                 target_range=target_range, factor=factor, n_classes=n_classes)
    return plan
