"""DiPriMe forests, DP-ERT and the non-private median forest: scikit-learn estimators on privlab's
one estimator contract.

Every estimator is a keyword-argument :class:`~privlab.platform.dp.estimator.PrivateEstimator`
(settings in ``__init__`` only, checked against ``_parameter_constraints`` when ``fit`` starts;
learned state in attributes ending in ``_``) and a scikit-learn estimator (``BaseEstimator``,
``predict``, ``score``, ``clone``). ``fit(X, y, ledger=None, scope="data", *, source=None)``:

* in a run, pass the run's ``ledger`` and ``source`` (a :class:`~privlab.platform.dp.randomness.RandomSource`):
  the fit's plan (from public inputs: ε, the public bounds, classes, the column count and the
  ledger's neighbouring relation) goes through :meth:`~privlab.platform.dp.estimator.PrivateEstimator._charged_fit`
  — preflighted with its partition, charged, and checked against what was recorded — and every
  draw comes from ``source``;
* as a plain scikit-learn estimator, pass neither: the fit draws from
  ``SeededSource(numpy.random.default_rng(random_state))`` and charges a fresh ledger capped at
  ``epsilon`` with replace-one neighbours, exposed as ``ledger_`` (the paper states add/remove-one,
  but its disjoint trees, a permutation cut at ``n``-dependent sizes, compose in parallel under
  replace-one only: :mod:`privlab.platform.dp.positional_split`; every Δ is doubled for it). A
  ledger alone is charged the same way. A source without a ledger is refused: a run's draws
  are charged to the run's ledger.

Fitted state: ``trees_`` (the splits), ``leaf_values_`` (the noisy leaf statistics; a private
regressor also keeps the noisy leaf counts and centred sums it divided, ``leaf_counts_`` and
``leaf_sums_``), ``events_`` (what was charged), ``tree_sizes_`` (rows per tree: public, a
function of n, ``n_estimators`` and ``partition``), never the data.

Randomness: the trees' rows come from ``source.generator(purpose="<name>.rows")`` (a
permutation of record positions that never sees the data). DiPriMe draws everything else — the
exponential mechanisms' Gumbel draws, the candidates, the Laplace leaf noise — from
``source.dp_generator(purpose="<name>.noise")``, a seeded floating-point stream, so it is
research-only (``release_safe = False``: release mode refuses it before anything is charged or
drawn). DP-ERT's splits use no data, so they come from ``source.generator``, and its only DP
draws are the leaves' Laplace noise, from the source's own sampler: in release mode the leaf
statistics are snapped to a lattice and get the exact lattice Laplace noise of the
:class:`~privlab.platform.dp.randomness.SecureSource` (a ``laplace_lattice`` step with the padded
scale of :func:`~privlab.mechanisms.basic.laplace.release_parameters`), so DP-ERT is
release-safe (and refuses ``classes=None`` there, which would read the labels from the data).
The non-private median forests plan no step and are research-only baselines, refused in release
mode like any non-DP reference.

Privacy:
    A DiPriMe or DP-ERT forest is ``epsilon``-DP under the ledger's neighbouring relation, with
    the budget split and sensitivities of :mod:`privlab.mechanisms.dipreme.privacy` (under
    replace-one every Δ is twice its add/remove-one value). ``partition="disjoint"``: tree t
    sees the record positions of part t of a uniformly random permutation of ``0 … n−1`` cut
    at public sizes (:class:`~privlab.platform.dp.positional_split.PositionalSplit`, drawn without
    looking at the data), and gets all of ε. A replace-one neighbour changes the record at one
    position, which lies in exactly one part: only that tree's output distribution changes,
    and it is ε-DP for that change, so the forest is ε-DP (parallel composition, McSherry 2009,
    Theorem 4). The fit declares that partition on the ledger
    (``ledger.declare_partition(scope, parts, split=...)``), which accepts it under replace-one
    only: under add/remove-one the sizes move with ``n`` and every tree can change
    (:mod:`privlab.platform.dp.positional_split`), so a disjoint private forest on an add/remove
    ledger is refused before anything is drawn. Without a ledger the fit charges a fresh
    replace-one ledger. ``partition="full"``: every tree sees every row and gets ε/T
    (sequential), under either relation.

References:
    Consul, Williamson & Dagli, "Differentially Private Median Forests for Regression and
    Classification" (2020), Algorithms 1–3; Bojarski et al. (2014) (DP-ERT); Breiman (2004);
    McSherry, "Privacy Integrated Queries" (SIGMOD 2009), Theorem 4.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

from privlab.mechanisms.basic.laplace import release_parameters
from privlab.mechanisms.dipreme import inputs
from privlab.mechanisms.dipreme.fit_arguments import ForestNotFittedError, run_arguments, validate_X, validate_Xy
from privlab.mechanisms.dipreme.growth import FeatureLayout, Splitter, grow, route
from privlab.mechanisms.dipreme.leaf_noise import events_named, generator_laplace, source_laplace
from privlab.mechanisms.dipreme.privacy import forest_plan
from privlab.mechanisms.dipreme.tree_rows import RowDraw, all_rows, forest_part_names, forest_slot, rows_of, tree_sizes
from privlab.platform.core.errors import ModeError, SchemaError
from privlab.platform.core.validation import ConstraintSpec, check_text
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["DPERTClassifier", "DPERTRegressor", "DiPriMeClassifier", "DiPriMeRegressor", "MedianForestClassifier",
           "MedianForestRegressor"]


class _Forest(PrivateEstimator, BaseEstimator, abc.ABC):
    """Shared fitting: validation, plan, protocol, growth, leaves. Subclasses set the flags."""

    standalone_neighbouring: ClassVar[str] = "replace_one"
    """The relation of the ledger a plain scikit-learn fit charges: a disjoint forest's trees are a
    permutation of positions, which composes in parallel under replace-one only."""

    Params: ClassVar[type | None] = None
    release_safe: ClassVar[bool] = False
    _private = True  # plans DP steps
    _splitter_kind = "private_median"
    _regression = False

    def _research_only_reason(self) -> str:
        if not self._private:
            return "it is a non-private baseline"
        return "its exponential-mechanism and Laplace draws come from a seeded floating-point generator"

    @abc.abstractmethod
    def __init__(self) -> None:
        """Store every keyword setting as an attribute of the same name, and nothing else
        (scikit-learn's convention; each concrete forest lists its settings)."""

    # --- settings ---------------------------------------------------------------------------

    def _validate_params(self) -> None:
        """The declared constraints, then the forest's size in all (:func:`.inputs.check_forest_size`)."""
        super()._validate_params()
        inputs.check_forest_size(int(self.n_estimators), 2 ** int(self.max_depth))

    def _private_splits(self) -> bool:
        return self._private and self._splitter_kind == "private_median"

    def _candidates(self, n_features: int) -> int:
        if self._splitter_kind == "random":
            return 1
        return inputs.n_candidates(getattr(self, "max_features", None), n_features)

    def _split_fraction(self) -> float:
        return float(getattr(self, "split_fraction", 0.0))

    def _disjoint(self) -> bool:
        """Whether the trees are charged as parts of a positional partition."""
        return self.partition == "disjoint" and int(self.n_estimators) > 1

    # --- the plan ---------------------------------------------------------------------------

    def planned_events(self, n_features: int, *, neighbouring: str, scope: str = "data",
                       n_classes: int | None = None, forest_index: int = 0) -> list[PrivacyEvent]:
        """Every event a fit records, in order, from public inputs only (empty when not private).

        Args:
            n_features: the data's (public) column count, which fixes the candidates K.
            neighbouring: the ledger's relation (``"replace_one"`` doubles every Δ).
            scope: the fit's scope; a disjoint forest's events are on the parts of
                :func:`forest_part_names`.
            n_classes: the number of classes (default: the declared ``classes``).
            forest_index: how many partitions of ``scope`` the ledger already holds.

        Raises:
            TypeError, ValueError: bad settings (the message names the setting).
        """
        self._validate_params()
        if not self._private:
            return []
        T = int(self.n_estimators)
        target_range = 0.0
        if self._regression:
            lo, hi = (float(b) for b in self.target_bounds)
            target_range = hi - lo
        elif n_classes is None:
            if self.classes is None:
                raise ValueError("classes (None) must be given to plan a fit from public inputs")
            n_classes = len(self.classes)
        scopes = forest_part_names(scope, T, forest_index) if self._disjoint() else [scope] * T
        return forest_plan(epsilon=float(self.epsilon), n_estimators=T, partition=self.partition,
                           split_fraction=self._split_fraction(), max_depth=int(self.max_depth),
                           candidates=self._candidates(n_features), regression=self._regression,
                           private_splits=self._private_splits(), target_range=target_range,
                           neighbouring=neighbouring, n_classes=int(n_classes or 0), scopes=scopes,
                           step=type(self).__name__)

    # --- fitting ----------------------------------------------------------------------------

    def fit(self, X: Any, y: Any, ledger: Ledger | None = None, scope: str = "data", *,
            source: RandomSource | None = None) -> Self:
        """Fit the forest through the budget protocol (module docstring).

        Args:
            X: (n, p) features inside the public ``feature_bounds`` / ``categories``.
            y: targets inside ``target_bounds`` (regression) or class labels.
            ledger: charged with the plan (and the disjoint forest's partition of ``scope``);
                default a fresh ledger capped at ``epsilon`` with replace-one neighbours
                (exposed as ``ledger_``), allowed only without ``source``.
            scope: the ledger scope of the data.
            source: the run's random source; default ``SeededSource`` on ``random_state``.

        Raises:
            TypeError, ValueError: bad settings (message names the setting; sizes are bounded,
                :mod:`.inputs`), a disjoint forest of several trees on fewer than 2 records, or
                trees that each hold every record beyond :data:`.inputs.MAX_PAIRS` pairs.
            TypeError: a wrong-typed ledger or source, or a source without a ledger.
            ModeError: a release-mode source (research-only).
            SchemaError: X not 2-D or not numbers, NaN/infinite features, values outside the
                public bounds or categories, targets outside ``target_bounds`` (messages name a
                column at most, never a value).
            BudgetExceededError: the plan does not fit the ledger's cap.
            Nothing is declared, charged or drawn when any of these is raised.
        """
        self._validate_params()
        ledger, source, created = run_arguments(self, ledger, source,
                                                epsilon=float(self.epsilon) if self._private else None)
        scope = check_text("scope", scope)
        X, y = validate_Xy(self, X, y, regression=self._regression)
        layout, cats = self._layout(X)
        Xe = inputs.encode_features(X, layout, cats, training=True, bounds_known=self.feature_bounds is not None)
        if source.mode == "release" and not self._regression and self.classes is None:
            raise ModeError(f"classes (None) must be declared in release mode: {self.name} would read the set of "
                            "labels from the private data")
        target, n_classes, _, centre, classes = self._encode_target(y, len(X))
        n, p = Xe.shape
        T = int(self.n_estimators)
        if self._disjoint() and n < 2:
            raise ValueError(f"X has n_samples={n}; partition='disjoint' with {T} trees needs at least 2 records "
                             "(or use partition='full')")
        if not self._disjoint():
            inputs.check_pairs(n, T)
        partitioned = self._disjoint() and self._private
        forest_index, predeclared = forest_slot(ledger, scope, T) if partitioned else (0, False)
        plan = self.planned_events(p, neighbouring=ledger.neighbouring, scope=scope, n_classes=n_classes,
                                   forest_index=forest_index)
        names = forest_part_names(scope, T, forest_index)
        rows = RowDraw(n, T, source, purpose=f"{self.name}.rows", held=ledger.split_of(scope, names) if predeclared else None)
        declared = [(scope, names, rows)] if partitioned and not predeclared else []

        def run() -> None:
            pairs = rows_of(rows()) if self._disjoint() else all_rows(n, T)
            spent = [ledger.spend(self._as_charged(event, source)) for event in plan]
            self._grow(Xe, target, pairs, layout, cats, n_classes, centre, spent, source)
            self.tree_sizes_ = tree_sizes(n, T, self.partition)
            if classes is not None:
                self.classes_ = classes

        self._charged_fit(plan, ledger=ledger, source=source, run=run, partitions=declared)
        if created and self._private:
            self.ledger_ = ledger
        return self

    def _layout(self, X: np.ndarray) -> tuple[FeatureLayout, dict[int, np.ndarray]]:
        """The public feature layout; only the non-private forest may go without public bounds
        (it then takes the data's range: a research baseline, never released)."""
        layout, cats = inputs.layout_for(self.feature_bounds, self.categories, X.shape[1], required=self._private)
        if self.feature_bounds is None:
            numeric = ~layout.is_categorical
            layout = FeatureLayout(lower=np.where(numeric, X.min(axis=0), layout.lower),
                                   upper=np.where(numeric, X.max(axis=0) + 1e-12, layout.upper),
                                   n_codes=layout.n_codes)
        return layout, cats

    def _grow(self, Xe: np.ndarray, target: np.ndarray, pairs: tuple[np.ndarray, np.ndarray], layout: FeatureLayout,
              cats: dict[int, np.ndarray], n_classes: int, centre: float, spent: list[PrivacyEvent],
              source: RandomSource) -> None:
        """Grow the trees and their leaves with the source's draws (``spent``: the plan as charged).

        A release-safe forest (DP-ERT) draws its data-independent splits from
        ``source.generator`` and its leaf noise from the source's Laplace sampler (exact, on a
        lattice, in release mode); the others draw everything from one seeded stream,
        ``source.dp_generator`` (``source.generator`` for the non-private forest).
        """
        rows, tree_of_row = pairs
        T = int(self.n_estimators)
        K = self._candidates(Xe.shape[1])
        if self.release_safe:
            rng = source.generator(purpose=f"{self.name}.splits")
            add_noise = functools.partial(source_laplace, source=source)
        else:
            rng = (source.dp_generator if self._private else source.generator)(purpose=f"{self.name}.noise")
            add_noise = functools.partial(generator_laplace, rng=rng)
        trees, leaf = grow(Xe, rows, tree_of_row, T, target[rows], n_classes, layout, self._splitter(spent, K),
                           int(self.max_depth), rng)
        self.trees_ = trees
        self.leaf_values_ = self._leaves(leaf, target[rows], T, n_classes, centre, spent, add_noise)
        self.layout_ = layout
        self.categories_ = {j: v.copy() for j, v in cats.items()}

    def _as_charged(self, event: PrivacyEvent, source: RandomSource) -> PrivacyEvent:
        """The planned ``event`` as this fit charges it: in release mode a Laplace step becomes
        its lattice counterpart, with the scale padded for snapping the tree's leaf values."""
        if source.mode != "release" or event.mechanism != "laplace":
            return event
        dimension = 2 ** int(self.max_depth) * int(dict(event.details).get("classes", 1))
        scale, k = release_parameters(float(event.sensitivity), event.epsilon, dimension)  # type: ignore[arg-type]
        return dataclasses.replace(event, mechanism="laplace_lattice", noise_scale=scale,
                                   details=(*event.details, ("lattice_exponent", float(k))))

    def _splitter(self, plan: list[PrivacyEvent], K: int) -> Splitter:
        """How nodes split; a private splitter's ε and Δ are the plan's."""
        if self._splitter_kind != "private_median" or not self._private:
            return Splitter(kind=self._splitter_kind if self._splitter_kind != "private_median" else "exact_median",
                            candidates=K)
        median = events_named(plan, "median_splits")
        choice = events_named(plan, "feature_choice")
        return Splitter(kind="private_median", candidates=K,
                        epsilon_median=np.array([dict(e.details)["epsilon_per_median"] for e in median]),
                        median_sensitivity=float(median[0].sensitivity),  # type: ignore[arg-type]
                        epsilon_choice=np.array([dict(e.details)["epsilon_per_level"] for e in choice]) if choice else None,
                        choice_sensitivity=float(choice[0].sensitivity) if choice else 1.0)  # type: ignore[arg-type]

    def _leaves(self, leaf: np.ndarray, target: np.ndarray, T: int, n_classes: int, centre: float,
                spent: list[PrivacyEvent], add_noise: Callable[[np.ndarray, list[PrivacyEvent]], np.ndarray]) -> np.ndarray:
        """Leaf statistics: Laplace noise of the charged scales on class counts, or on counts and
        centred sums whose clipped ratio is the prediction (private); exact ones otherwise."""
        n_leaves = T * 2 ** int(self.max_depth)
        if n_classes:
            counts = np.bincount(leaf * n_classes + target, minlength=n_leaves * n_classes).astype(float)
            counts = counts.reshape(T, -1, n_classes)
            return add_noise(counts, events_named(spent, "leaf_class_counts")) if self._private else counts
        count = np.bincount(leaf, minlength=n_leaves).astype(float).reshape(T, -1)
        total = np.bincount(leaf, weights=target - centre, minlength=n_leaves).reshape(T, -1)
        if self._private:
            count = add_noise(count, events_named(spent, "leaf_counts"))
            total = add_noise(total, events_named(spent, "leaf_sums"))
            self.leaf_counts_, self.leaf_sums_ = count, total  # the released statistics (DP)
            half = self.target_bounds[1] - centre
            return centre + np.clip(total / np.maximum(count, 1.0), -half, half)
        fallback = float(np.mean(target)) if len(target) else centre
        return np.where(count > 0, centre + total / np.maximum(count, 1.0), fallback)

    # --- predicting -------------------------------------------------------------------------

    def _leaf_of(self, X: Any) -> np.ndarray:
        if not hasattr(self, "leaf_values_"):
            raise ForestNotFittedError(f"{type(self).__name__} is not fitted; call fit first")
        X = validate_X(self, X, reset=False)
        Xe = inputs.encode_features(X, self.layout_, self.categories_, training=False, bounds_known=False)
        return route(self.trees_, Xe, self.layout_.is_categorical)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


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
        random_state: seed or ``numpy.random.Generator`` of every draw when ``fit`` is given no
            source (scikit-learn use); a run's fit draws from the run's source instead.

    Privacy:
        ε-DP; split and sensitivities as in :mod:`privlab.mechanisms.dipreme.privacy`. Leaves
        release a noisy count and a noisy centred sum (ε_leaf/2 each) and predict their ratio
        clipped to the target bounds — not the paper's Laplace(B/(n·ε)) on the mean, whose
        scale depends on the private leaf size n.

    References:
        Consul, Williamson & Dagli (2020), Algorithms 1–3, Section 3.
    """

    name: ClassVar[str] = "dipreme_regressor"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=True, private_splits=True, regression=True)

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
        ε-DP under the ledger's relation (module docstring); leaves: Laplace(Δ/ε_leaf) on every
        class count, Δ = 1 (add/remove-one), 2 (replace-one). Feature choice scores classes
        one-hot (count-weighted Gini), Δ = 2 (×2 under replace-one).

    References:
        Consul, Williamson & Dagli (2020), Algorithms 1–3, Section 3.
    """

    name: ClassVar[str] = "dipreme_classifier"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=True, private_splits=True, regression=False)

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
        ε-DP under the ledger's relation: the splits are independent of the data; the leaves
        are parallel over the disjoint leaves of a tree (a replaced record can leave one leaf
        and enter another: Δ doubles under replace-one); trees compose as ``partition`` says.
        Release-safe: the leaf noise comes from the source's Laplace sampler (module docstring).

    References:
        Bojarski et al. (2014), "Differentially- and non-differentially-private random decision
        trees"; Geurts, Ernst & Wehenkel (2006).
    """

    _splitter_kind = "random"
    release_safe: ClassVar[bool] = True

    name: ClassVar[str] = "dpert_regressor"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=True, private_splits=False, regression=True, candidates=False)

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
        ε-DP, as :class:`DPERTRegressor`; Δ = 1 (add/remove-one) or 2 (replace-one). Release-safe.

    References:
        Bojarski et al. (2014), Section 3.
    """

    _splitter_kind = "random"
    release_safe: ClassVar[bool] = True

    name: ClassVar[str] = "dpert_classifier"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=True, private_splits=False, regression=False, candidates=False)

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

    name: ClassVar[str] = "median_forest_regressor"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=False, private_splits=False, regression=True)

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

    name: ClassVar[str] = "median_forest_classifier"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = inputs.forest_constraints(
        private=False, private_splits=False, regression=False)

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
