"""What a forest's ``fit`` and ``predict`` accept: the data after our checks and scikit-learn's,
and the run's ledger and source (or the plain scikit-learn estimator's own)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils.validation import validate_data

from privlab.mechanisms.dipreme import inputs
from privlab.platform.core.errors import NotFittedError, SchemaError
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource, SeededSource

__all__ = ["ForestNotFittedError", "run_arguments", "validate_X", "validate_Xy"]

class ForestNotFittedError(NotFittedError, SklearnNotFittedError):
    """Predicting before ``fit``: privlab's and scikit-learn's not-fitted error at once."""


def _wrap_not_finite(error: ValueError) -> Exception:
    if "NaN" in str(error) or "infinity" in str(error):
        return SchemaError(f"{error} Features and targets must be finite (NaN or infinity refused)",
                           problem="missing")
    return error


def validate_X(est: BaseEstimator, X: Any, *, reset: bool) -> np.ndarray:
    """scikit-learn's validation of X after ours (:func:`.inputs.check_features`: shape, kind and
    finiteness in messages that never show a value)."""
    inputs.check_features(X)
    try:
        return validate_data(est, X, reset=reset, dtype=np.float64, ensure_min_samples=1)
    except ValueError as error:
        raise _wrap_not_finite(error) from error


def validate_Xy(est: BaseEstimator, X: Any, y: Any, *, regression: bool) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's validation of (X, y) (its error types and messages), with NaN and
    infinity reported as :class:`SchemaError` (a ValueError); our checks of X's shape and kind and
    of numeric targets come first, so no message shows a value of the data."""
    inputs.check_features(X)
    inputs.check_targets(y, regression=regression)
    try:
        return validate_data(est, X, y, reset=True, dtype=np.float64, y_numeric=regression, ensure_min_samples=1)
    except ValueError as error:
        raise _wrap_not_finite(error) from error


def run_arguments(est: PrivateEstimator, ledger: Ledger | None, source: RandomSource | None, *,
                  epsilon: float | None) -> tuple[Ledger, RandomSource, bool]:
    """The ledger and source of a fit, and whether the ledger was made here (module docstring).

    Without a source the fit draws from ``SeededSource(default_rng(random_state))`` (nothing is
    drawn from it before the plan is accepted) and, without a ledger too, charges a fresh one
    capped at ``epsilon`` with the estimator's ``standalone_neighbouring`` relation (replace-one
    for the forests whose disjoint trees are a permutation of positions, which composes in
    parallel under replace-one only: :mod:`privlab.platform.dp.positional_split`).

    Raises:
        TypeError: a wrong-typed ledger or source, or a source without a ledger.
        ModeError: a release-mode source for a research-only estimator.
    """
    created = False
    if source is None:
        source = SeededSource(np.random.default_rng(getattr(est, "random_state", None)))
        if ledger is None:
            ledger = Ledger(epsilon_cap=epsilon, neighbouring=getattr(est, "standalone_neighbouring", "replace_one"))
            created = True
    est._check_protocol_arguments(ledger, source)
    return ledger, source, created  # type: ignore[return-value]
