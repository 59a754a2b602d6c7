"""Classifiers trained on synthetics vs reals (Section 6.3, Tables 3–4) and agreement rates.

The task is the paper's: predict one attribute (the income class) from the others, every
attribute one-hot encoded (:func:`~.evaluation_data.one_hot_dense`). A classifier of each kind is
trained on each training table — the reference reals, and candidates such as other reals,
marginals or synthetics — and evaluated on one held-out real test table:

* **accuracy**: the fraction of test records whose target it predicts correctly;
* **agreement rate** with the reference: "the percentage of records for which the two
  classifiers make the same prediction (regardless of whether the prediction is correct)",
  between the classifier of that kind trained on the candidate and the one trained on the
  reference reals (:func:`agreement_rate`).

The kinds (:data:`CLASSIFIER_KINDS`, scikit-learn stand-ins for the paper's Weka/Matlab ones):
``"Tree"`` a CART decision tree; ``"RF"`` a random forest of 100 trees; ``"Ada"`` AdaBoost
(SAMME, the multi-class AdaBoost.M1, over depth-1 stumps like Weka's AdaBoostM1 default,
50 rounds); ``"LR"`` L2-regularised logistic regression (C = 1); ``"SVM"`` a **linear** SVM
(``LinearSVC``, squared hinge loss, C = 1, primal solver), chosen over a kernel SVM for speed
on 10⁴–10⁵ records. Every kind gets one ``random_state`` drawn from ``rng`` and shared by all
training tables, so the tables are compared under the same classifier randomness.

Privacy:
    Not a DP step: non-private classifiers on released synthetics or on reals (evaluation).
    The DP baselines of Table 4 are :mod:`.dp_erm`.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 6.3, Tables 3 and 4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.evaluation_data import check_sizes, coded_table, one_hot_dense
from privlab.platform.core.errors import SchemaError

__all__ = ["CLASSIFIER_KINDS", "agreement_rate", "compare_classifiers", "make_classifier", "target_features"]

CLASSIFIER_KINDS = ("Tree", "RF", "Ada", "LR", "SVM")


def make_classifier(kind: str, *, random_state: int) -> Any:
    """A new, unfitted scikit-learn classifier of ``kind`` (module docstring).

    Raises:
        ValueError: an unknown ``kind``.
    """
    from sklearn.ensemble import AdaBoostClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    builders = {
        "Tree": lambda: DecisionTreeClassifier(random_state=random_state),
        "RF": lambda: RandomForestClassifier(n_estimators=100, n_jobs=1, random_state=random_state),
        "Ada": lambda: AdaBoostClassifier(n_estimators=50, random_state=random_state),
        "LR": lambda: LogisticRegression(C=1.0, max_iter=2000, random_state=random_state),
        "SVM": lambda: LinearSVC(C=1.0, dual=False, max_iter=5000, random_state=random_state),
    }
    if kind not in builders:
        raise ValueError(f"kind ({kind!r}) must be one of {list(builders)}")
    return builders[kind]()


def target_features(table: np.ndarray | pd.DataFrame, *, sizes: Sequence[int], target: int,
                    name: str = "table") -> tuple[np.ndarray, np.ndarray]:
    """One-hot features (dense float32) of every attribute but ``target``, and the target's codes.

    Raises:
        SchemaError: ``table`` empty or not over ``sizes``.
        ValueError: ``target`` is not an attribute index.
    """
    sizes = check_sizes(sizes)
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or not 0 <= target < len(sizes):
        raise ValueError(f"target ({target!r}) must be an attribute index in 0..{len(sizes) - 1}")
    codes = coded_table(table, sizes, name=name)
    if len(codes) == 0:
        raise SchemaError(f"{name} (0 records) must hold at least one record")
    others = [j for j in range(len(sizes)) if j != target]
    return one_hot_dense(codes[:, others], [sizes[j] for j in others]), codes[:, target].copy()


def agreement_rate(first: np.ndarray, second: np.ndarray) -> float:
    """The fraction of records on which two classifiers' predictions are equal.

    Raises:
        ValueError: the prediction arrays are empty or of different shapes.
    """
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"predictions (shapes {a.shape} and {b.shape}) must be non-empty 1-d arrays of equal length")
    return float(np.mean(a == b))


def compare_classifiers(reference: np.ndarray | pd.DataFrame, candidates: Mapping[str, np.ndarray | pd.DataFrame],
                        test: np.ndarray | pd.DataFrame, *, sizes: Sequence[int], target: int,
                        rng: np.random.Generator, kinds: Sequence[str] = CLASSIFIER_KINDS,
                        reference_name: str = "reals") -> pd.DataFrame:
    """Accuracy on ``test`` and agreement with the reference's classifier, per table and kind.

    Args:
        reference: Reals to train the reference classifiers on.
        candidates: Other training tables by name (e.g. ``"other reals"``, ``"marginals"``,
            ``"omega=11"``); none may be called ``reference_name``.
        test: Held-out reals (disjoint from every training table).
        sizes: The public number of categories of each attribute.
        target: Index of the attribute to predict (the income class on Adult).
        rng: Draws one ``random_state`` per kind, shared by every training table.
        kinds: Classifier kinds from :data:`CLASSIFIER_KINDS`.
        reference_name: The reference's name in the result.

    Returns:
        A DataFrame with columns ``training`` (table name, the reference first), ``classifier``,
        ``accuracy`` and ``agreement`` (``nan`` for the reference itself).

    Raises:
        SchemaError: a table empty or not over ``sizes``.
        ValueError: an unknown kind, a bad ``target``, or a candidate named ``reference_name``.
    """
    kinds = list(kinds)
    for kind in kinds:
        make_classifier(kind, random_state=0)
    if reference_name in candidates:
        raise ValueError(f"candidates ({list(candidates)!r}) must not use the reference's name {reference_name!r}")
    tables = {reference_name: reference, **candidates}
    data = {name: target_features(t, sizes=sizes, target=target, name=name) for name, t in tables.items()}
    x_test, y_test = target_features(test, sizes=sizes, target=target, name="test")
    seeds = {kind: int(rng.integers(0, 2**31 - 1)) for kind in kinds}
    rows = []
    for kind in kinds:
        reference_predictions = None
        for name, (x, y) in data.items():
            predictions = _fit_predict(kind, seeds[kind], x, y, x_test)
            if reference_predictions is None:
                reference_predictions = predictions
                agreement = float("nan")
            else:
                agreement = agreement_rate(reference_predictions, predictions)
            rows.append({"training": name, "classifier": kind, "accuracy": float(np.mean(predictions == y_test)),
                         "agreement": agreement})
    order = {name: i for i, name in enumerate(tables)}
    frame = pd.DataFrame(rows, columns=["training", "classifier", "accuracy", "agreement"])
    return frame.sort_values("training", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def _fit_predict(kind: str, seed: int, x: np.ndarray, y: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Predictions of a ``kind`` classifier fitted on (x, y); a training table whose target
    takes one value (possible for small or heavily noised synthetics) predicts that value,
    where scikit-learn's linear models would refuse to fit."""
    values = np.unique(y)
    if len(values) == 1:
        return np.full(len(x_test), values[0])
    return make_classifier(kind, random_state=seed).fit(x, y).predict(x_test)
