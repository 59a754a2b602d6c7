"""DP-DF, the differentially private decision forest of Fletcher & Islam (2015), as the DiPriMe
paper runs it: on a public 5-bin discretisation of the numeric features.

What was recovered and from where: the DiPriMe paper (Sections 2.2 and 4.2) says DP-DF chooses
splits with the exponential mechanism on the Gini index, needs categorical features and was run
with numeric features cut into 5 bins without looking at the data. The budget accounting is the
authors' baseline code (``Baselines/DP_DF/DP_SysFor.py`` in ``shoryaconsul/DiPriMeFlip_Forest``,
read, not copied): every tree gets ε/T (all trees see all rows) and a tree of height h asks
``2h − 1`` queries of equal ε — per level a noisy count and an attribute choice, and the class
counts at the leaves. We build it level by level and vectorised:

* numeric feature j → ``bins`` equal-width bins of its public range; categorical → its codes;
* level ℓ (d split levels): Laplace counts of every node (Δ = 1); a node whose noisy count is
  below ``C·√2·Δ/ε_q`` (the standard deviation of the noise on C class counts, our reading of
  "too few records to split") stops splitting; then the exponential mechanism picks, for every
  other node, an attribute not yet used on its path, utility ``−Σ_children n_c·Gini_c``
  (the one-hot SSE), Δ = 2 (``‖e_a − e_b‖² = 2``, see :mod:`~.privacy`);
* leaves: Laplace(Δ/ε_q) class counts; trees vote with their leaves' class shares.

The original DP-DF also varies the root attribute across trees (SysFor) and prunes; we do not.

It is a keyword :class:`~privlab.platform.dp.estimator.PrivateEstimator` on the forests' contract
(:mod:`~.forest`): ``fit(X, y, ledger=None, scope="data", *, source=None)`` plans from public
inputs, goes through ``_charged_fit`` and draws from the run's source (``source.dp_generator``,
a seeded floating-point stream: research-only), or, as a plain scikit-learn estimator, from a
``SeededSource`` on ``random_state`` with a fresh add/remove-one ledger capped at ε.

Privacy:
    ε-DP under the ledger's relation: per tree (2d + 1) queries of ε_q = ε/(T(2d + 1)), each
    parallel over a level's disjoint nodes, sequential over levels and trees. The nodes of a
    level are cut by record values, so that parallel composition is argued inside each query's
    sensitivity, not declared to the ledger: under add/remove-one a record is in one node
    (Δ = 1 for the counts, 2 for the Gini choice); under replace-one the replaced record can
    leave one node and enter another (one removal and one addition), so every Δ doubles, as in
    :mod:`~.privacy`. All trees see all rows: no partition.

References:
    Fletcher & Islam, "A Differentially Private Decision Forest", AusDM 2015; Consul,
    Williamson & Dagli (2020), Sections 2.2 and 4.2.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets

from privlab.mechanisms.dipreme import inputs
from privlab.mechanisms.dipreme.fit_arguments import ForestNotFittedError, run_arguments, validate_X, validate_Xy
from privlab.mechanisms.dipreme.privacy import sensitivity_factor
from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import ConstraintSpec, check_text
from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["DPDFClassifier", "MAX_LEAVES"]

MAX_LEAVES = 2_000_000
"""Refuse settings whose forest would have more leaves than this in all (T · B^d): the leaves'
class counts and each level's per-node arrays are held in memory."""


class DPDFClassifier(ClassifierMixin, PrivateEstimator, BaseEstimator):
    """DP-DF: multiway trees on discretised features, Gini splits by the exponential mechanism.

    Args:
        epsilon: total ε (no default: ``None`` is refused at ``fit``).
        max_depth: split levels d (the authors' height h = d + 1).
        n_estimators: trees T, each on all rows with ε/T.
        bins: equal-width bins per numeric feature over its public bounds (paper: 5).
        feature_bounds: public (lower, upper) for all features or one pair per feature.
        classes: public labels (default: those in y, with a PrivacyLeakWarning).
        categories: ``{feature index: category codes}`` for categorical features.
        random_state: seed or generator of every draw when ``fit`` is given no source.

    Privacy:
        See the module docstring.
    """

    standalone_neighbouring: ClassVar[str] = "add_remove"
    """The relation of the ledger a plain scikit-learn fit charges: every tree sees every row (no
    partition), so the paper's add/remove-one sensitivities hold."""

    name: ClassVar[str] = "dpdf_classifier"
    Params: ClassVar[type | None] = None
    release_safe: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=True, private_splits=False, regression=False, candidates=False, partition=False, bins=True)

    def __init__(self, *, epsilon: float | None = None, max_depth: int = 4, n_estimators: int = 10, bins: int = 5,
                 feature_bounds: Any = None, classes: Any = None, categories: Any = None,
                 random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.bins = bins
        self.feature_bounds = feature_bounds
        self.classes = classes
        self.categories = categories
        self.random_state = random_state

    partition = "full"

    def _research_only_reason(self) -> str:
        return "its Laplace and exponential-mechanism draws come from a seeded floating-point generator"

    def planned_events(self, n_features: int | None = None, *, neighbouring: str, scope: str = "data",
                       n_classes: int | None = None) -> list[PrivacyEvent]:
        """The events of a fit (public inputs only): per tree counts, choices, leaf counts.

        Args:
            n_features: unused (every feature is a candidate; kept for the forests' signature).
            neighbouring: the ledger's relation (``"replace_one"`` doubles every Δ).
            scope: the fit's scope (all trees see all rows).
            n_classes: the number of classes (default: the declared ``classes``).

        Raises:
            TypeError, ValueError: bad settings, or no ``classes`` and no ``n_classes``.
        """
        self._validate_params()
        if n_classes is None:
            if self.classes is None:
                raise ValueError("classes (None) must be given to plan a fit from public inputs")
            n_classes = len(self.classes)
        d, T = int(self.max_depth), int(self.n_estimators)
        shares = split_epsilon(float(self.epsilon), [d, d, 1] * T)
        factor = sensitivity_factor(neighbouring)
        plan = []
        for t in range(T):
            counts, choice, leaves = shares[3 * t: 3 * t + 3]
            plan += [
                PrivacyEvent(name="node_counts", mechanism="laplace", epsilon=counts, sensitivity=factor,
                             noise_scale=factor / (counts / d), scope=scope, step="DPDFClassifier",
                             details=(("tree", t), ("levels", d), ("epsilon_per_level", counts / d))),
                PrivacyEvent(name="attribute_choice", mechanism="exponential", epsilon=choice,
                             sensitivity=2.0 * factor, noise_scale=2 * 2.0 * factor / (choice / d), scope=scope,
                             step="DPDFClassifier",
                             details=(("tree", t), ("levels", d), ("epsilon_per_level", choice / d),
                                      ("score", "-sum of n_c * Gini_c over children"))),
                PrivacyEvent(name="leaf_class_counts", mechanism="laplace", epsilon=leaves, sensitivity=factor,
                             noise_scale=factor / leaves, scope=scope, step="DPDFClassifier",
                             details=(("tree", t), ("classes", n_classes))),
            ]
        return plan

    def fit(self, X: Any, y: Any, ledger: Ledger | None = None, scope: str = "data", *,
            source: RandomSource | None = None) -> Self:
        """Fit through the budget protocol (module docstring; arguments as the forests' ``fit``).

        Raises:
            TypeError, ValueError: bad settings; TypeError: a wrong ledger or source, or a source
            without a ledger; ModeError: a release-mode source; SchemaError: bad data;
            BudgetExceededError: the plan does not fit. Nothing is charged or drawn when any is
            raised.
        """
        self._validate_params()
        ledger, source, created = run_arguments(self, ledger, source, epsilon=float(self.epsilon))
        scope = check_text("scope", scope)
        X, y = validate_Xy(self, X, y, regression=False)
        layout, cats = inputs.layout_for(self.feature_bounds, self.categories, X.shape[1], required=True)
        Xe = inputs.encode_features(X, layout, cats, training=True, bounds_known=True)
        codes, branching = self._discretise(Xe, layout)
        T = int(self.n_estimators)
        if T * branching ** int(self.max_depth) > MAX_LEAVES:
            raise ValueError(f"n_estimators × {branching}^max_depth ({T} × {branching}^{self.max_depth}) must be at "
                             f"most {MAX_LEAVES:,} leaves in all: every leaf of every tree is held in memory; lower "
                             "n_estimators, max_depth or bins")
        inputs.check_pairs(len(X), T)  # every tree holds every record
        classes = self._classes(y)
        target = np.searchsorted(classes, y).astype(np.int64)
        plan = self.planned_events(X.shape[1], neighbouring=ledger.neighbouring, scope=scope, n_classes=len(classes))

        def run() -> None:
            for event in plan:
                ledger.spend(event)
            self.classes_ = classes
            self.layout_, self.categories_ = layout, {j: v.copy() for j, v in cats.items()}
            self.branching_ = branching
            rng = source.dp_generator(purpose=f"{self.name}.noise")
            self.features_, self.leaf_values_ = self._grow(codes, target, len(classes), plan, rng)

        self._charged_fit(plan, ledger=ledger, source=source, run=run)
        if created:
            self.ledger_ = ledger
        return self

    def _classes(self, y: np.ndarray) -> np.ndarray:
        """The public classes, sorted (or, with a PrivacyLeakWarning, the labels in ``y``).

        Raises:
            ValueError: declared classes that are not distinct labels.
            SchemaError: a label outside the declared classes.
        """
        check_classification_targets(y)
        if self.classes is None:
            inputs.warn_classes_from_data()
            return np.unique(y)
        declared = np.asarray(self.classes)
        if declared.ndim != 1 or declared.size < 1 or np.unique(declared).size != declared.size:
            raise ValueError(f"classes ({self.classes!r}) must be a sequence of distinct labels")
        if not np.isin(y, declared).all():
            raise SchemaError("y has labels outside the declared classes", column="y", problem="categories")
        return np.sort(declared)

    def _discretise(self, Xe: np.ndarray, layout: Any) -> tuple[np.ndarray, int]:
        """Equal-width bins of the public range (values at the upper bound in the last bin)."""
        width = (layout.upper - layout.lower) / self.bins
        with np.errstate(divide="ignore", invalid="ignore"):
            binned = np.floor((Xe - layout.lower) / np.where(width > 0, width, 1.0))
        codes = np.where(layout.is_categorical, Xe, np.clip(binned, 0, self.bins - 1)).astype(np.int64)
        codes = np.where(layout.is_categorical & (codes == 63), 0, codes)
        return codes, int(max(self.bins, int(layout.n_codes.max(initial=0))))

    def _grow(self, codes: np.ndarray, target: np.ndarray, C: int, plan: list[PrivacyEvent],
              rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
        T, d, B = int(self.n_estimators), int(self.max_depth), self.branching_
        n, p = codes.shape
        per_tree = [plan[3 * t: 3 * t + 3] for t in range(T)]
        count_eps = np.array([dict(e[0].details)["epsilon_per_level"] for e in per_tree])
        choice_eps = np.array([dict(e[1].details)["epsilon_per_level"] for e in per_tree])
        count_delta, choice_delta = per_tree[0][0].sensitivity, per_tree[0][1].sensitivity
        rows = np.tile(np.arange(n), T)
        node = np.repeat(np.arange(T), n).astype(np.int64)  # global node id: tree * B^level + local
        used = np.zeros((T, p), bool)
        features: list[np.ndarray] = []
        y = target[rows]
        for level in range(d):
            width = B ** level
            n_nodes = T * width
            tree_of_node = np.arange(n_nodes) // width
            noisy = np.bincount(node, minlength=n_nodes) + rng.laplace(size=n_nodes) * (count_delta / count_eps)[tree_of_node]
            stop = noisy < C * math.sqrt(2.0) * count_delta / count_eps[tree_of_node]
            utility = np.full((n_nodes, p), -np.inf)
            for j in range(p):
                per = np.bincount((node * B + codes[rows, j]) * C + y, minlength=n_nodes * B * C)
                per = per.reshape(n_nodes * B, C).astype(float)
                size = per.sum(axis=1)
                sse = (size - (per ** 2).sum(axis=1) / np.maximum(size, 1)).reshape(n_nodes, B).sum(axis=1)
                utility[:, j] = np.where(used[:, j], -np.inf, -sse)
            scale = choice_eps[tree_of_node] / (2.0 * choice_delta)
            key = scale[:, None] * utility + rng.gumbel(size=utility.shape)
            chosen = np.argmax(key, axis=1)
            exhausted = ~np.isfinite(utility).any(axis=1)
            feature = np.where(stop | exhausted, -1, chosen)
            features.append(feature.reshape(T, width))
            f_row = feature[node]
            step = np.where(f_row >= 0, codes[rows, np.maximum(f_row, 0)], 0)
            used = np.repeat(used, B, axis=0)
            children = np.arange(n_nodes) * B
            split = feature >= 0
            for b in range(B):
                used[children[split] + b, feature[split]] = True
            node = node * B + step
        leaves = T * B ** d
        counts = np.bincount(node * C + y, minlength=leaves * C).reshape(T, B ** d, C).astype(float)
        leaf_scale = np.array([e[2].noise_scale for e in per_tree])
        counts += rng.laplace(size=counts.shape) * leaf_scale[:, None, None]
        return features, counts

    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean over trees of the leaf's class shares (noisy counts clipped at 0)."""
        if not hasattr(self, "leaf_values_"):
            raise ForestNotFittedError("DPDFClassifier is not fitted; call fit first")
        X = validate_X(self, X, reset=False)
        Xe = inputs.encode_features(X, self.layout_, self.categories_, training=False, bounds_known=False)
        codes, _ = self._discretise(Xe, self.layout_)
        B = self.branching_
        T = len(self.leaf_values_)
        node = np.zeros((T, len(codes)), np.int64)
        tix = np.arange(T)[:, None]
        for feature in self.features_:
            f = feature[tix, node]
            step = np.where(f >= 0, codes[np.arange(len(codes))[None, :], np.maximum(f, 0)], 0)
            node = node * B + step
        counts = np.clip(self.leaf_values_, 0.0, None)
        total = counts.sum(axis=2, keepdims=True)
        shares = np.where(total > 0, counts / np.where(total > 0, total, 1.0), 1.0 / counts.shape[2])
        return shares[tix, node].mean(axis=0)

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
