"""The distinguishing game of Section 6.4 (Table 5): can a classifier tell reals from synthetics?

Protocol (the paper: 50,000 records of each kind to train, a held-out 50 % mix to test):

1. draw ``n_train + n_test`` records without replacement from the reals and as many from the
   other table (synthetics, marginals, or other reals for the 50 % baseline);
2. label reals 1 and the others 0; the first ``n_train`` of each form a balanced training set,
   the remaining ``n_test`` of each a balanced test set no record of which was trained on;
3. train each classifier (``"RF"`` and ``"Tree"``, :func:`~.evaluation_classifiers.make_classifier`)
   on every attribute one-hot encoded and report its accuracy on the test set.

0.5 means indistinguishable; a record that occurs in both tables is a coin flip at best, so
duplicates are kept (they are part of what the adversary sees).

Privacy:
    Not a DP step (an evaluation of released data against reals).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 6.4, Table 5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.evaluation_classifiers import make_classifier
from privlab.mechanisms.plausible_deniability.evaluation_data import check_sizes, coded_table, one_hot_dense
from privlab.platform.core.errors import SchemaError

__all__ = ["DISTINGUISHERS", "distinguishing_game"]

DISTINGUISHERS = ("RF", "Tree")


def distinguishing_game(reals: np.ndarray | pd.DataFrame, others: np.ndarray | pd.DataFrame, *,
                        sizes: Sequence[int], n_train: int, n_test: int, rng: np.random.Generator,
                        kinds: Sequence[str] = DISTINGUISHERS) -> dict[str, float]:
    """Accuracy of each classifier at telling ``reals`` (label 1) from ``others`` (label 0).

    Args:
        reals: ``(n₁, m)`` codes of real records (ideally not used to fit the generator).
        others: ``(n₂, m)`` codes of the table to distinguish (synthetics, marginals, reals).
        sizes: The public number of categories of each attribute.
        n_train: Training records drawn from each table (the paper: 50,000).
        n_test: Held-out test records drawn from each table (a 50 % mix).
        rng: Draws the subsamples and each classifier's ``random_state``.
        kinds: Classifier kinds (default ``("RF", "Tree")``, the paper's).

    Returns:
        ``{kind: accuracy on the balanced held-out set}``.

    Raises:
        SchemaError: a table not over ``sizes`` or smaller than ``n_train + n_test``.
        ValueError: ``n_train`` or ``n_test`` < 1, or an unknown kind.
    """
    sizes = check_sizes(sizes)
    for name, value in (("n_train", n_train), ("n_test", n_test)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} ({value!r}) must be an int >= 1")
    for kind in kinds:
        make_classifier(kind, random_state=0)
    needed = int(n_train) + int(n_test)
    tables = []
    for name, table in (("reals", reals), ("others", others)):
        codes = coded_table(table, sizes, name=name)
        if len(codes) < needed:
            raise SchemaError(f"{name} ({len(codes)} records) must hold at least n_train + n_test = {needed} records")
        tables.append(codes[rng.choice(len(codes), size=needed, replace=False)])
    real, other = tables
    x_train = np.vstack([one_hot_dense(real[:n_train], sizes), one_hot_dense(other[:n_train], sizes)])
    x_test = np.vstack([one_hot_dense(real[n_train:], sizes), one_hot_dense(other[n_train:], sizes)])
    y_train = np.r_[np.ones(n_train, dtype=np.int64), np.zeros(n_train, dtype=np.int64)]
    y_test = np.r_[np.ones(n_test, dtype=np.int64), np.zeros(n_test, dtype=np.int64)]
    out = {}
    for kind in kinds:
        classifier = make_classifier(kind, random_state=int(rng.integers(0, 2**31 - 1)))
        out[kind] = float(np.mean(classifier.fit(x_train, y_train).predict(x_test) == y_test))
    return out
