"""Checks of the forests' settings and data, before any budget is spent or anything drawn.

Public configuration (never read from the data): per-feature bounds, categorical features'
categories, the target's bounds (regression) or the classes (classification). Data outside it
is refused with a :class:`~privlab.platform.core.errors.SchemaError` naming the column, never its
values: refusing is a choice made on the data owner's side before anything is released, while
clipping silently would hide a wrong configuration (and a recorded warning would release
whether clipping happened). NaN or infinite features are refused the same way; the message
says "NaN or infinity" as scikit-learn's own checks expect.

The features' shape and kind are checked here too (:func:`check_features`, :func:`check_targets`),
before scikit-learn's ``validate_data``: its messages print a 1-D ``X`` whole and quote a string
that does not convert, and a forest's ``X`` is private data. Ours name the problem and, at most,
a column index.

Sizes are bounded (:data:`MAX_ESTIMATORS`, :data:`MAX_DEPTH`, :data:`MAX_NODES`,
:data:`MAX_PAIRS`) so that a typo in a setting is refused at once instead of exhausting the
machine's memory after minutes: every array of a fit has one entry per (record, tree) pair or
per node of every tree.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from privlab.mechanisms.dipreme.growth import MAX_CATEGORIES, FeatureLayout
from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import ConstraintSpec, InstanceOf, Interval, Options, RealPair

__all__ = ["MAX_DEPTH", "MAX_ESTIMATORS", "MAX_NODES", "MAX_PAIRS", "PrivacyLeakWarning", "check_features",
           "check_forest_size", "check_pairs", "check_target_in_bounds", "check_targets", "encode_features",
           "forest_constraints", "layout_for", "n_candidates"]

MAX_ESTIMATORS = 10_000
"""At most this many trees. The papers fit 1 to 100 (DiPriMe's Figure 3: up to 50) and a forest's
accuracy stops improving long before; memory and time grow linearly in T (T = 10**7 ran out of
memory after 154 s), so a larger T is a mistake, refused before anything is allocated."""

MAX_DEPTH = 20
"""At most this depth: a complete tree of depth d has 2**d leaves, a million at 20, far beyond
what data under DP supports (the papers use depths 2 to 8: each level halves a node's records
and the noise does not shrink)."""

MAX_NODES = 2 ** 20
"""At most this many leaves over the whole forest, ``n_estimators * 2**max_depth`` (one tree of
:data:`MAX_DEPTH`): the splits, the leaf statistics (times the classes) and each level's
candidate draws (times the features) are arrays of one row per node, tens of MB at this cap."""

MAX_PAIRS = 2 ** 25
"""At most this many (record, tree) pairs when every tree holds every record
(``partition="full"``: n · T pairs; DP-DF always). A fit keeps about ten 8-byte arrays of one
entry per pair (record, node, target, orders, sort keys), about 2.7 GB at this cap."""


class PrivacyLeakWarning(UserWarning):
    """Something public was taken from the private data because the configuration lacked it."""


def _must(ok: bool, name: str, value: object, constraint: str, error: type[Exception] = ValueError) -> None:
    if not ok:
        raise error(f"{name} ({value!r}) must be {constraint}")


def _is_real(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(float(value))


def _is_int(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def forest_constraints(*, private: bool, private_splits: bool, regression: bool, candidates: bool = True,
                       partition: bool = True, bins: bool = False) -> dict[str, list[ConstraintSpec]]:
    """The declarative constraints (scikit-learn's ``_parameter_constraints`` style, checked by
    :func:`~privlab.platform.core.validation.validate_parameters`) of a forest's settings.

    Args:
        private: the forest takes ``epsilon`` (no default ε: ``None`` is refused).
        private_splits: it takes ``split_fraction`` (DiPriMe's share of ε for the splits).
        regression: it takes ``target_bounds`` (when private) instead of ``classes``.
        candidates: it takes ``max_features``.
        partition: it takes ``partition``.
        bins: it takes ``bins`` (DP-DF).

    Bounds and categories are checked against the data's column count when ``fit`` starts
    (:func:`layout_for`).
    """
    constraints: dict[str, list[ConstraintSpec]] = {
        "max_depth": [Interval(Integral, 1, MAX_DEPTH, closed="both")],
        "n_estimators": [Interval(Integral, 1, MAX_ESTIMATORS, closed="both")],
        "feature_bounds": [None, InstanceOf((Sequence, np.ndarray), "a (lower, upper) pair or one pair per feature")],
        "categories": [None, InstanceOf(Mapping, "a mapping {feature index: category codes}")],
        "random_state": RANDOM_STATE,
    }
    if private:
        constraints["epsilon"] = [Interval(Real, 0, None, closed="neither")]
    if private_splits:
        constraints["split_fraction"] = [Interval(Real, 0, 1, closed="neither")]
    if candidates:
        constraints["max_features"] = [None, Options(str, {"sqrt"}), Interval(Integral, 1, None, closed="left")]
    if partition:
        constraints["partition"] = [Options(str, {"disjoint", "full"})]
    if bins:
        constraints["bins"] = [Interval(Integral, 2, None, closed="left")]
    if regression:
        if private:  # the non-private forest takes the targets as they are
            constraints["target_bounds"] = [RealPair()]
    else:
        constraints["classes"] = [None, InstanceOf((Sequence, np.ndarray), "a sequence of the public class labels")]
    return constraints


RANDOM_STATE: list[ConstraintSpec] = [
    None, Interval(Integral, 0, None, closed="left"),
    InstanceOf((np.random.Generator, np.random.BitGenerator, np.random.SeedSequence),
               "a numpy Generator, BitGenerator or SeedSequence")]
"""``random_state``: the seed of a fit that is not given the run's random source."""


def check_forest_size(n_estimators: int, leaves_per_tree: int, *, what: str = "2**max_depth") -> None:
    """Refuse a forest with more than :data:`MAX_NODES` leaves in all (settings only, no data).

    Raises:
        ValueError: ``n_estimators * leaves_per_tree > MAX_NODES``.
    """
    if n_estimators * leaves_per_tree > MAX_NODES:
        raise ValueError(f"n_estimators × {what} ({n_estimators} × {leaves_per_tree:,} = "
                         f"{n_estimators * leaves_per_tree:,} leaves) must be at most {MAX_NODES:,}: every node of "
                         "every tree is held in memory; lower n_estimators or max_depth")


def check_pairs(n_records: int, n_estimators: int) -> None:
    """Refuse trees that would each hold every record when that makes more than
    :data:`MAX_PAIRS` (record, tree) pairs. The message does not state the number of records.

    Raises:
        ValueError: ``n_records * n_estimators > MAX_PAIRS``.
    """
    if n_records * n_estimators > MAX_PAIRS:
        raise ValueError(f"n_estimators ({n_estimators}) × the number of records must be at most {MAX_PAIRS:,} when "
                         "every tree holds every record (partition='full'): each (record, tree) pair is held in "
                         "memory; lower n_estimators, or use partition='disjoint' where the forest offers it")


def check_features(X: Any, *, name: str = "X") -> None:
    """Refuse features that are not a finite 2-D array of real numbers, without showing a value.

    Sparse input is left to scikit-learn (its message names sparsity, not values). The words
    "Reshape your data", "Complex data not supported", "argument must be a string or a real
    number" and "NaN or infinity" are those scikit-learn's estimator checks look for.

    Raises:
        SchemaError: not 2-D (``problem="kind"``), text that is not a number (``"kind"``), NaN
            or infinity (``"missing"``, naming the first such column's index).
        TypeError: values that are neither numbers nor text.
        ValueError: complex numbers.
    """
    if _is_sparse(X):
        return
    try:
        array = np.asarray(X)
    except ValueError:  # nested sequences of different lengths
        raise SchemaError(f"{name} must be a 2-D array (n_samples, n_features); its rows have different lengths",
                          column=None, problem="kind") from None
    if array.ndim != 2:
        hint = (" Reshape your data with X.reshape(-1, 1) if it has a single feature or X.reshape(1, -1) if it is "
                "a single sample" if array.ndim == 1 else "")
        raise SchemaError(f"{name} must be a 2-D array (n_samples, n_features), got a {array.ndim}-D array.{hint}",
                          column=None, problem="kind")
    if array.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} must hold real numbers")
    if array.dtype.kind not in "biuf":
        try:
            array = array.astype(np.float64)
        except ValueError:
            raise SchemaError(f"{name} holds text that is not a number; encode categorical features as numeric codes "
                              "(declared in `categories`)", column=None, problem="kind") from None
        except TypeError:
            raise TypeError(f"{name} must hold numbers: a float() argument must be a string or a real number, and "
                            f"{name} holds other objects") from None
    if array.dtype.kind == "f":
        finite = np.isfinite(array).all(axis=0)
        if not finite.all():
            j = int(np.flatnonzero(~finite)[0])
            raise SchemaError(f"{name} column {j} holds NaN or infinity; features must be finite: drop or impute "
                              "those records before the fit", column=str(j), problem="missing")


def check_targets(y: Any, *, regression: bool) -> None:
    """Refuse regression targets that are not numbers, without showing a value (class labels
    may be of any kind; scikit-learn's checks of them print no value).

    Raises:
        SchemaError: text that is not a number (``problem="kind"``).
        TypeError: values that are neither numbers nor text.
    """
    if not regression or _is_sparse(y):
        return
    array = np.asarray(y)
    if array.dtype.kind in "biufc":
        return
    try:
        array.astype(np.float64)
    except ValueError:
        raise SchemaError("y holds text that is not a number; regression targets must be numbers", column="y",
                          problem="kind") from None
    except TypeError:
        raise TypeError("y must hold numbers: a float() argument must be a string or a real number, and y holds "
                        "other objects") from None


def n_candidates(max_features: int | str | None, n_features: int) -> int:
    if max_features is None:
        return n_features
    if max_features == "sqrt":
        return max(1, int(math.sqrt(n_features)))
    return min(int(max_features), n_features)


def layout_for(feature_bounds: Any, categories: Any, n_features: int, *, required: bool) -> tuple[FeatureLayout, dict[int, np.ndarray]]:
    """The public feature layout from the settings (``required``: bounds must be given)."""
    cats: dict[int, np.ndarray] = {}
    if categories is not None:
        _must(isinstance(categories, Mapping), "categories", categories,
              "a mapping {feature index: sequence of category values}", TypeError)
        for key, values in categories.items():
            _must(_is_int(key) and 0 <= key < n_features, "categories key", key, f"a feature index in [0, {n_features})")
            arr = np.asarray(values, dtype=float)
            _must(arr.ndim == 1 and 1 <= arr.size <= MAX_CATEGORIES and np.all(np.isfinite(arr))
                  and np.unique(arr).size == arr.size, f"categories[{key}]", values,
                  f"1 to {MAX_CATEGORIES} distinct finite numbers (category codes)")
            cats[int(key)] = arr
    lower = np.zeros(n_features)
    upper = np.zeros(n_features)
    numeric = [j for j in range(n_features) if j not in cats]
    if numeric:
        if feature_bounds is None:
            _must(not required, "feature_bounds", feature_bounds,
                  "given: one (lower, upper) pair for all features or one per feature; public bounds, "
                  "never read from the data")
        else:
            pairs = _bound_pairs(feature_bounds, n_features)
            for j in numeric:
                lower[j], upper[j] = pairs[j]
    n_codes = np.zeros(n_features, np.int64)
    for j, arr in cats.items():
        n_codes[j] = arr.size
        upper[j] = arr.size - 1
    return FeatureLayout(lower=lower, upper=upper, n_codes=n_codes), cats


def _bound_pairs(feature_bounds: Any, n_features: int) -> list[tuple[float, float]]:
    fb = feature_bounds
    ok_pair = lambda b: (isinstance(b, Sequence) and len(b) == 2 and all(_is_real(x) for x in b)  # noqa: E731
                         and b[0] < b[1])
    if isinstance(fb, Sequence) and len(fb) == 2 and all(_is_real(x) for x in fb):
        _must(ok_pair(fb), "feature_bounds", fb, "(lower, upper) with lower < upper")
        return [(float(fb[0]), float(fb[1]))] * n_features
    _must(isinstance(fb, Sequence) and len(fb) == n_features, "feature_bounds", fb,
          f"one (lower, upper) pair for all features or {n_features} pairs (one per feature)")
    for j, b in enumerate(fb):
        _must(ok_pair(b), f"feature_bounds[{j}]", b, "(lower, upper) of finite numbers with lower < upper")
    return [(float(b[0]), float(b[1])) for b in fb]


def encode_features(X: np.ndarray, layout: FeatureLayout, cats: Mapping[int, np.ndarray], *,
                    training: bool, bounds_known: bool) -> np.ndarray:
    """Encode categorical columns to codes; on training data, refuse values outside the public
    configuration (``SchemaError`` naming the column). At prediction time unknown categories get
    a code no split sends left, and numeric values need no bounds."""
    out = np.array(X, dtype=float, copy=True)
    for j, values in cats.items():
        col = out[:, j]
        by_value = np.argsort(values)  # code = position in the declared order
        index = np.minimum(np.searchsorted(values[by_value], col), values.size - 1)
        known = values[by_value][index] == col
        if training and not known.all():
            raise SchemaError(f"X column {j} has values outside its declared categories; declare every category "
                              "in `categories`", column=str(j), problem="categories")
        out[:, j] = np.where(known, by_value[index], 63)
    if training and bounds_known:
        numeric = ~layout.is_categorical
        below = (out[:, numeric] < layout.lower[numeric]).any(axis=0)
        above = (out[:, numeric] > layout.upper[numeric]).any(axis=0)
        bad = np.flatnonzero(numeric)[below | above]
        if bad.size:
            j = int(bad[0])
            raise SchemaError(
                f"X column {j} has values outside its public bounds ({float(layout.lower[j])!r}, {float(layout.upper[j])!r}); "
                "fix feature_bounds (public configuration) or the data — values are not clipped",
                column=str(j), problem="bounds")
    return out


def check_target_in_bounds(y: np.ndarray, bounds: Sequence[float]) -> np.ndarray:
    """Regression targets as floats, refused (not clipped) when outside the public bounds."""
    y = np.asarray(y, dtype=float)
    if not np.all(np.isfinite(y)):
        raise SchemaError("y has NaN or infinity; targets must be finite", column="y", problem="missing")
    if np.any(y < bounds[0]) or np.any(y > bounds[1]):
        raise SchemaError(f"y has values outside target_bounds ({bounds[0]!r}, {bounds[1]!r}); fix target_bounds "
                          "(public configuration) or the data — targets are not clipped", column="y", problem="bounds")
    return y


def warn_classes_from_data() -> None:
    warnings.warn("classes were not given, so the labels present in y were used: the set of labels is then "
                  "not protected; pass classes=[...] (public configuration)", PrivacyLeakWarning, stacklevel=3)


def _is_sparse(value: Any) -> bool:
    """Whether ``value`` is a SciPy sparse matrix or array (only possible once scipy.sparse is
    imported, so a run that never meets one does not import it)."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(value)
