"""DiPriMe forests, DP-ERT and the non-private median forest as scikit-learn estimators.

Every estimator takes its settings in ``__init__`` only and keeps what it learns in attributes
ending in ``_``; ``fit(X, y, ledger=None, scope="data")`` charges the ledger it is given, or a
fresh one exposed as ``ledger_`` (capped at ``epsilon``, add/remove-one neighbours), before it
draws anything. Fitted state: ``trees_`` (the splits), ``leaf_values_`` (the noisy leaf
statistics; a private regressor also keeps the noisy leaf counts and centred sums it divided,
``leaf_counts_`` and ``leaf_sums_``), ``events_`` (what was charged), ``tree_sizes_`` (rows per tree: public, a function
of n, ``n_estimators`` and ``partition``), never the data.

These are not :class:`~privlab.platform.estimator.PrivateEstimator` subclasses: that contract
builds estimators from a ``Params`` dataclass and releases data through ``sample``, while these
follow scikit-learn's (settings as ``__init__`` keywords, ``get_params(deep=...)``, ``predict``).
They keep its budget protocol: a plan from public inputs, preflighted before anything is drawn,
charged, and checked against what was recorded (:func:`~privlab.platform.ledger.check_conforms`);
``tests/test_dipreme_contract.py`` holds them to it. They are research-only: their noise comes
from a seeded numpy generator (``random_state``), not from a release source.

Privacy:
    A DiPriMe or DP-ERT forest is ``epsilon``-DP under the ledger's neighbouring relation, with
    the budget split and sensitivities of :mod:`privlab.mechanisms.dipreme.privacy`.
    ``partition="disjoint"``: each tree sees its own rows (a random partition of row positions,
    independent of the data) and gets all of ε; parallel composition (McSherry 2009, Theorem 4)
    holds for add/remove-one neighbours, so the ledger records the partition and refuses it under
    replace-one. ``partition="full"``: every tree sees every row and gets ε/T (sequential).

References:
    Consul, Williamson & Dagli, "Differentially Private Median Forests for Regression and
    Classification" (2020), Algorithms 1–3; Bojarski et al. (2014) (DP-ERT); Breiman (2004).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from privlab.mechanisms.dipreme import inputs
from privlab.mechanisms.dipreme.growth import Splitter, Trees, grow, route
from privlab.mechanisms.dipreme.privacy import forest_plan, sensitivity_factor
from privlab.platform.errors import LedgerError, NotFittedError, SchemaError
from privlab.platform.ledger import Ledger, PrivacyEvent, check_conforms

__all__ = ["DPERTClassifier", "DPERTRegressor", "DiPriMeClassifier", "DiPriMeRegressor", "ForestNotFittedError",
           "MedianForestClassifier", "MedianForestRegressor"]


class ForestNotFittedError(NotFittedError, SklearnNotFittedError):
    """Predicting before ``fit``: privlab's and scikit-learn's not-fitted error at once."""


def _wrap_not_finite(error: ValueError) -> Exception:
    if "NaN" in str(error) or "infinity" in str(error):
        return SchemaError(f"{error} Features and targets must be finite (NaN or infinity refused)",
                           problem="missing")
    return error


def _validate_X(est: BaseEstimator, X: Any, *, reset: bool) -> np.ndarray:
    try:
        return validate_data(est, X, reset=reset, dtype=np.float64, ensure_min_samples=1)
    except ValueError as error:
        raise _wrap_not_finite(error) from error


def _validate_Xy(est: BaseEstimator, X: Any, y: Any, *, regression: bool) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's validation of (X, y) (its error types and messages), with NaN and
    infinity reported as :class:`SchemaError` (a ValueError)."""
    try:
        return validate_data(est, X, y, reset=True, dtype=np.float64, y_numeric=regression, ensure_min_samples=1)
    except ValueError as error:
        raise _wrap_not_finite(error) from error


def assign_rows(n: int, n_estimators: int, partition: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(row, tree) pairs: a random split of the row positions into T near-equal parts (drawn
    without looking at the data), or every row for every tree."""
    if partition == "disjoint":
        parts = np.array_split(rng.permutation(n), n_estimators)
        rows = np.concatenate(parts).astype(np.int64)
        trees = np.repeat(np.arange(n_estimators), [len(p) for p in parts])
        return rows, trees
    return np.tile(np.arange(n), n_estimators), np.repeat(np.arange(n_estimators), n)


def rows_are_disjoint(rows: np.ndarray, n: int) -> bool:
    """Whether no row is assigned to two trees (the condition for parallel composition)."""
    return bool(np.bincount(rows, minlength=n).max(initial=0) <= 1)


def tree_sizes(n: int, n_estimators: int, partition: str) -> np.ndarray:
    """Rows per tree: public, a function of n, T and the partition rule only."""
    if partition == "disjoint":
        return np.array([len(p) for p in np.array_split(np.arange(n), n_estimators)])
    return np.full(n_estimators, n)


class _Forest(BaseEstimator):
    """Shared fitting: validation, plan, ledger, growth, leaves. Subclasses set the flags."""

    _private = True  # charges a ledger
    _splitter_kind = "private_median"
    _regression = False

    # --- settings ---------------------------------------------------------------------------

    def _private_splits(self) -> bool:
        return self._private and self._splitter_kind == "private_median"

    def _candidates(self, n_features: int) -> int:
        if self._splitter_kind == "random":
            return 1
        return inputs.n_candidates(getattr(self, "max_features", None), n_features)

    def _split_fraction(self) -> float:
        return float(getattr(self, "split_fraction", 0.0))

    # --- fitting ----------------------------------------------------------------------------

    def fit(self, X: Any, y: Any, ledger: Ledger | None = None, scope: str = "data") -> _Forest:
        """Fit the forest; a private one charges ``ledger`` (or a fresh ``ledger_``) first.

        Args:
            X: (n, p) features inside the public ``feature_bounds`` / ``categories``.
            y: targets inside ``target_bounds`` (regression) or class labels.
            ledger: charged with the plan; default a fresh ledger capped at ``epsilon`` with
                add/remove-one neighbours (exposed as ``ledger_``).
            scope: the ledger scope of the data (a declared partition's parent when disjoint).

        Raises:
            TypeError, ValueError: bad settings (message names the setting).
            SchemaError: NaN/infinite features, values outside the public bounds or categories,
                targets outside ``target_bounds``.
            LedgerError: ``partition="disjoint"`` on a replace-one ledger (parallel composition
                does not hold for it; use ``partition="full"`` or an add/remove ledger).
            BudgetExceededError: the plan does not fit the ledger's cap.
            Nothing is charged or drawn when any of these is raised.
        """
        inputs.check_settings(self, private=self._private, private_splits=self._private_splits(),
                              regression=self._regression)
        if ledger is not None and not isinstance(ledger, Ledger):
            raise TypeError(f"ledger ({ledger!r}) must be a privlab Ledger or None")
        if not isinstance(scope, str) or not scope.strip():
            raise TypeError(f"scope ({scope!r}) must be a non-empty str")
        X, y = _validate_Xy(self, X, y, regression=self._regression)
        layout, cats = inputs.layout_for(getattr(self, "feature_bounds", None), getattr(self, "categories", None),
                                         X.shape[1], required=self._private)
        bounds_known = getattr(self, "feature_bounds", None) is not None
        if not bounds_known:  # only the non-private forest may go without public bounds
            numeric = ~layout.is_categorical
            layout = type(layout)(lower=np.where(numeric, X.min(axis=0), layout.lower),
                                  upper=np.where(numeric, X.max(axis=0) + 1e-12, layout.upper),
                                  n_codes=layout.n_codes)
        Xe = inputs.encode_features(X, layout, cats, training=True, bounds_known=bounds_known)
        target, n_classes, target_range, centre, classes = self._encode_target(y, len(X))
        n = len(Xe)
        T = int(self.n_estimators)
        K = self._candidates(Xe.shape[1])
        if self._private:
            ledger = ledger if ledger is not None else Ledger(epsilon_cap=float(self.epsilon), neighbouring="add_remove")
            disjoint = self.partition == "disjoint" and T > 1
            if disjoint and ledger.neighbouring != "add_remove":
                raise LedgerError(
                    f"partition ('disjoint') charges the trees by parallel composition, which the ledger refuses for "
                    f"{ledger.neighbouring} neighbours; pass a Ledger(neighbouring='add_remove') or use "
                    "partition='full'")
            parent_count = sum(1 for parent, _ in ledger.partitions if parent == scope)
            parts = [f"{scope}/forest{parent_count}/tree{t}" for t in range(T)] if disjoint else [scope] * T
            plan = forest_plan(epsilon=float(self.epsilon), n_estimators=T, partition=self.partition,
                               split_fraction=self._split_fraction(), max_depth=int(self.max_depth), candidates=K,
                               regression=self._regression, private_splits=self._private_splits(),
                               target_range=target_range, neighbouring=ledger.neighbouring,
                               n_classes=n_classes, scopes=parts, step=type(self).__name__)
            self._preflight(ledger, plan, scope, parts if disjoint else None)
        rng = np.random.default_rng(self.random_state)
        rows, tree_of_row = assign_rows(n, T, self.partition, rng)
        if self._private:
            if disjoint:
                if not rows_are_disjoint(rows, n):  # pragma: no cover - assign_rows guarantees it
                    raise LedgerError("partition ('disjoint'): the trees' rows overlap; refusing parallel composition")
                ledger.declare_partition(scope, parts)
            start = len(ledger.events)
            for event in plan:
                ledger.spend(event)
            spent = ledger.events[start:]
            check_conforms(spent, plan, who=f"{type(self).__name__}: fit", exact_sensitivity=True)
        splitter = self._splitter(plan if self._private else [], T, K, n_classes, target_range,
                                  ledger.neighbouring if self._private else "add_remove")
        trees, leaf = grow(Xe, rows, tree_of_row, T, target[rows], n_classes, layout, splitter,
                           int(self.max_depth), rng)
        self.trees_ = trees
        self.leaf_values_ = self._leaves(leaf, target[rows], T, n_classes, centre, plan if self._private else [],
                                         ledger.neighbouring if self._private else "add_remove", rng)
        self.layout_ = layout
        self.categories_ = {j: v.copy() for j, v in cats.items()}
        self.tree_sizes_ = tree_sizes(n, T, self.partition)
        if classes is not None:
            self.classes_ = classes
        if self._private:
            self.ledger_ = ledger
            self.events_ = tuple(spent)
        return self

    @staticmethod
    def _preflight(ledger: Ledger, plan: list[PrivacyEvent], scope: str, parts: list[str] | None) -> None:
        """The plan fits on top of what the ledger holds (with the partition), or raise; the ledger
        itself is not changed."""
        trial = ledger.fresh()
        for event in ledger.events:
            trial.spend(event)
        if parts is not None:
            trial.declare_partition(scope, parts)
        for event in plan:
            trial.spend(event)

    def _splitter(self, plan: list[PrivacyEvent], T: int, K: int, n_classes: int, target_range: float,
                  neighbouring: str) -> Splitter:
        if self._splitter_kind != "private_median" or not self._private:
            return Splitter(kind=self._splitter_kind if self._splitter_kind != "private_median" else "exact_median",
                            candidates=K)
        factor = sensitivity_factor(neighbouring)
        median = np.array([dict(e.details)["epsilon_per_median"] for e in _named(plan, "median_splits")])
        choice = [dict(e.details)["epsilon_per_level"] for e in _named(plan, "feature_choice")]
        return Splitter(kind="private_median", candidates=K, epsilon_median=median, median_sensitivity=0.5 * factor,
                        epsilon_choice=np.array(choice) if choice else None,
                        choice_sensitivity=factor * (target_range ** 2 if self._regression else 2.0))

    def _leaves(self, leaf: np.ndarray, target: np.ndarray, T: int, n_classes: int, centre: float,
                plan: list[PrivacyEvent], neighbouring: str, rng: np.random.Generator) -> np.ndarray:
        n_leaves = T * 2 ** int(self.max_depth)
        if n_classes:
            counts = np.bincount(leaf * n_classes + target, minlength=n_leaves * n_classes).astype(float)
            counts = counts.reshape(T, -1, n_classes)
            if self._private:
                scale = np.array([e.noise_scale for e in _named(plan, "leaf_class_counts")])
                counts = counts + rng.laplace(size=counts.shape) * scale[:, None, None]
            return counts
        count = np.bincount(leaf, minlength=n_leaves).astype(float).reshape(T, -1)
        total = np.bincount(leaf, weights=target - centre, minlength=n_leaves).reshape(T, -1)
        if self._private:
            count_scale = np.array([e.noise_scale for e in _named(plan, "leaf_counts")])
            sum_scale = np.array([e.noise_scale for e in _named(plan, "leaf_sums")])
            count = count + rng.laplace(size=count.shape) * count_scale[:, None]
            total = total + rng.laplace(size=total.shape) * sum_scale[:, None]
            self.leaf_counts_, self.leaf_sums_ = count, total  # the released statistics (DP)
            half = self.target_bounds[1] - centre
            return centre + np.clip(total / np.maximum(count, 1.0), -half, half)
        fallback = float(np.mean(target)) if len(target) else centre
        return np.where(count > 0, centre + total / np.maximum(count, 1.0), fallback)

    # --- predicting -------------------------------------------------------------------------

    def _leaf_of(self, X: Any) -> np.ndarray:
        if not hasattr(self, "leaf_values_"):
            raise ForestNotFittedError(f"{type(self).__name__} is not fitted; call fit first")
        X = _validate_X(self, X, reset=False)
        Xe = inputs.encode_features(X, self.layout_, self.categories_, training=False, bounds_known=False)
        return route(self.trees_, Xe, self.layout_.is_categorical)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def _named(plan: list[PrivacyEvent], name: str) -> list[PrivacyEvent]:
    return [e for e in plan if e.name == name]


class _RegressorForest(RegressorMixin, _Forest):
    _regression = True

    def _encode_target(self, y: Any, n: int) -> tuple[np.ndarray, int, float, float, None]:
        """Targets as floats, with (0 classes, the target's range B, its centre, no classes)."""
        y = np.asarray(y, dtype=np.float64)
        if self._private:
            lo, hi = (float(b) for b in self.target_bounds)
            y = inputs.check_target_in_bounds(y, (lo, hi))
            return y, 0, hi - lo, (lo + hi) / 2, None
        y = np.asarray(y, dtype=float)
        if not np.all(np.isfinite(y)):
            raise SchemaError("y has NaN or infinity; targets must be finite", column="y", problem="missing")
        return y, 0, float(np.ptp(y)) if len(y) else 0.0, 0.0, None

    def predict(self, X: Any) -> np.ndarray:
        """The mean over trees of each tree's (noisy) leaf mean."""
        leaves = self._leaf_of(X)
        return np.take_along_axis(self.leaf_values_, leaves, axis=1).mean(axis=0)


class _ClassifierForest(ClassifierMixin, _Forest):
    def _encode_target(self, y: Any, n: int) -> tuple[np.ndarray, int, float, float, np.ndarray]:
        """Class codes, with (C classes, range 1, centre 0, the sorted classes); ``classes_`` is
        set only when the fit succeeds."""
        check_classification_targets(y)
        classes = getattr(self, "classes", None)
        if classes is None:
            if self._private:
                inputs.warn_classes_from_data()
            classes = np.unique(y)
        else:
            declared = np.asarray(classes)
            if declared.ndim != 1 or declared.size < 1 or np.unique(declared).size != declared.size:
                raise ValueError(f"classes ({classes!r}) must be a sequence of distinct labels")
            if not np.isin(y, declared).all():
                raise SchemaError("y has labels outside the declared classes; declare every class in `classes`",
                                  column="y", problem="categories")
            classes = np.sort(declared)
        return np.searchsorted(classes, y).astype(np.int64), len(classes), 1.0, 0.0, classes

    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean over trees of each tree's leaf class shares (noisy counts clipped at 0; a leaf
        whose clipped counts sum to 0 votes uniformly)."""
        leaves = self._leaf_of(X)
        counts = np.clip(self.leaf_values_, 0.0, None)
        total = counts.sum(axis=2, keepdims=True)
        shares = np.where(total > 0, counts / np.where(total > 0, total, 1.0), 1.0 / counts.shape[2])
        tix = np.arange(shares.shape[0])[:, None]
        return shares[tix, leaves].mean(axis=0)

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class DiPriMeRegressor(_RegressorForest):
    """DiPriMe regression forest: private-median splits, noisy leaf means.

    Args:
        epsilon: total ε of the fit (no default: ``None`` is refused at ``fit``).
        max_depth: depth d of every tree (complete trees, 2^d leaves).
        n_estimators: number of trees T.
        split_fraction: share b of each tree's ε for splits, ``b/d`` per level (paper: β).
        max_features: candidate features K per node: ``None`` (all), ``"sqrt"`` or an int.
        feature_bounds: public (lower, upper) for all features, or one pair per feature.
        target_bounds: public (lower, upper) of y; targets outside are refused, not clipped.
        categories: ``{feature index: category codes}`` for categorical features (public).
        partition: ``"disjoint"`` (trees on disjoint row subsets, parallel composition) or
            ``"full"`` (every tree on all rows, ε/T each).
        random_state: seed or ``numpy.random.Generator`` of every draw (research only).

    Privacy:
        ε-DP; split and sensitivities as in :mod:`privlab.mechanisms.dipreme.privacy`. Leaves
        release a noisy count and a noisy centred sum (ε_leaf/2 each) and predict their ratio
        clipped to the target bounds — not the paper's Laplace(B/(n·ε)) on the mean, whose
        scale depends on the private leaf size n.

    References:
        Consul, Williamson & Dagli (2020), Algorithms 1–3, Section 3.
    """

    def __init__(self, *, epsilon: float | None = None, max_depth: int = 5, n_estimators: int = 10,
                 split_fraction: float = 0.5, max_features: int | str | None = None, feature_bounds: Any = None,
                 target_bounds: Any = None, categories: Any = None, partition: str = "disjoint",
                 random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.split_fraction = split_fraction
        self.max_features = max_features
        self.feature_bounds = feature_bounds
        self.target_bounds = target_bounds
        self.categories = categories
        self.partition = partition
        self.random_state = random_state


class DiPriMeClassifier(_ClassifierForest):
    """DiPriMe classification forest: private-median splits, Laplace class counts at leaves.

    Args are :class:`DiPriMeRegressor`'s with ``classes`` (the public labels) instead of
    ``target_bounds``; without ``classes`` the labels in y are used with a
    :class:`~privlab.mechanisms.dipreme.inputs.PrivacyLeakWarning`.

    Privacy:
        ε-DP; leaves: Laplace(Δ/ε_leaf) on every class count, Δ = 1 (add/remove-one), 2
        (replace-one). Feature choice scores classes one-hot (count-weighted Gini), Δ = 2 (×2).

    References:
        Consul, Williamson & Dagli (2020), Algorithms 1–3, Section 3.
    """

    def __init__(self, *, epsilon: float | None = None, max_depth: int = 5, n_estimators: int = 10,
                 split_fraction: float = 0.5, max_features: int | str | None = None, feature_bounds: Any = None,
                 classes: Any = None, categories: Any = None, partition: str = "disjoint",
                 random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.split_fraction = split_fraction
        self.max_features = max_features
        self.feature_bounds = feature_bounds
        self.classes = classes
        self.categories = categories
        self.partition = partition
        self.random_state = random_state


class DPERTRegressor(_RegressorForest):
    """DP extremely random trees for regression (the paper's DP-ERT baseline, Section 4.1).

    Splits use no data: a feature uniformly at random and a threshold uniform in the node's
    public range (a random category subset for a categorical feature). All of a tree's ε goes
    to the leaves (noisy count and centred sum, ε/2 each, as in :class:`DiPriMeRegressor`).

    Privacy:
        ε-DP: the splits are independent of the data; the leaves are parallel over the disjoint
        leaves of a tree; trees compose as ``partition`` says.

    References:
        Bojarski et al. (2014), "Differentially- and non-differentially-private random decision
        trees"; Geurts, Ernst & Wehenkel (2006).
    """

    _splitter_kind = "random"

    def __init__(self, *, epsilon: float | None = None, max_depth: int = 5, n_estimators: int = 10,
                 feature_bounds: Any = None, target_bounds: Any = None, categories: Any = None,
                 partition: str = "disjoint", random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.feature_bounds = feature_bounds
        self.target_bounds = target_bounds
        self.categories = categories
        self.partition = partition
        self.random_state = random_state


class DPERTClassifier(_ClassifierForest):
    """DP extremely random trees for classification (Bojarski et al. 2014): random splits,
    Laplace(Δ/ε) class counts at the leaves.

    Privacy:
        ε-DP, as :class:`DPERTRegressor`; Δ = 1 (add/remove-one) or 2 (replace-one).

    References:
        Bojarski et al. (2014), Section 3.
    """

    _splitter_kind = "random"

    def __init__(self, *, epsilon: float | None = None, max_depth: int = 5, n_estimators: int = 10,
                 feature_bounds: Any = None, classes: Any = None, categories: Any = None,
                 partition: str = "disjoint", random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.feature_bounds = feature_bounds
        self.classes = classes
        self.categories = categories
        self.partition = partition
        self.random_state = random_state


class MedianForestRegressor(_RegressorForest):
    """The non-private median forest (the paper's "Median Trees"): exact medians of K candidate
    features, the candidate with the smallest SSE, exact leaf means. No ledger: not private.

    References:
        Breiman (2004); Consul, Williamson & Dagli (2020), Section 4.
    """

    _private = False
    _splitter_kind = "exact_median"

    def __init__(self, *, max_depth: int = 5, n_estimators: int = 10, max_features: int | str | None = None,
                 feature_bounds: Any = None, categories: Any = None, partition: str = "disjoint",
                 random_state: Any = None) -> None:
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.feature_bounds = feature_bounds
        self.categories = categories
        self.partition = partition
        self.random_state = random_state


class MedianForestClassifier(_ClassifierForest):
    """The non-private median forest for classification (exact class counts at leaves)."""

    _private = False
    _splitter_kind = "exact_median"

    def __init__(self, *, max_depth: int = 5, n_estimators: int = 10, max_features: int | str | None = None,
                 feature_bounds: Any = None, classes: Any = None, categories: Any = None,
                 partition: str = "disjoint", random_state: Any = None) -> None:
        self.max_depth = max_depth
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.feature_bounds = feature_bounds
        self.classes = classes
        self.categories = categories
        self.partition = partition
        self.random_state = random_state
