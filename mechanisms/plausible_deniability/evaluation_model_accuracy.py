"""Model accuracy of Section 6.2 (Figures 1–2): predicting each attribute from the others.

For each attribute i and each evaluated record r, a predictor guesses r_i from the other
attributes of r; the accuracy is the fraction of correct guesses (the paper's "model error"
is one minus it). The predictors of Figures 1–2:

* **the generative model** (:func:`generative_model_accuracy`): "the most likely attribute
  value (of that attribute) given the other attributes". In the Bayesian network of eq. (2)
  that posterior is proportional to the factors that mention x_i, i.e. its Markov blanket:

      Pr{x_i = v | x_{−i}} ∝ Pr{x_i = v | pa(i)} · ∏_{c : i ∈ pa(c)} Pr{x_c | pa(c) with x_i = v},

  evaluated exactly for every value v (ties go to the smallest code). ``conditioning=
  "parents"`` drops the children's factors (Pr{x_i | pa(i)} alone), a weaker predictor kept
  for comparison with the brief's reading of the figure;
* **marginals** (:func:`marginal_accuracy`): always the most probable value under given
  per-attribute distributions — the empirical marginals of training reals
  (:func:`empirical_marginals`, Figure 2's "un-noised marginals") or a DP marginals model
  (Figure 1's baseline);
* **random guessing** (:func:`random_guess_accuracy`): a uniform guess, right with
  probability exactly 1/|x_i| (the expectation, not a simulation);
* **random forest** (:func:`random_forest_accuracy`): one scikit-learn forest per attribute
  trained on reals with the other attributes one-hot encoded ("trained on as many records
  as the generative model").

The paper draws records uniformly from the input dataset "millions of times"; evaluating every
record of a table once gives that Monte Carlo average's expectation. Which records to evaluate
(the input data, as in the paper, or a held-out test set) is the caller's choice.
:func:`relative_error_reduction` is Figure 1's y-axis.

Privacy:
    Not a DP step. The accuracies are computed on real records and are evaluation output for
    the researcher, not part of a release; the random forest is non-private (as in the paper).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 6.2, Figures 1 and 2; eq. (2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.evaluation_data import check_sizes, coded_table, one_hot_dense
from privlab.platform.core.errors import NotFittedError, SchemaError

if TYPE_CHECKING:
    from privlab.mechanisms.plausible_deniability.model import PlausibleDeniabilityModel

__all__ = ["CONDITIONINGS", "empirical_marginals", "generative_model_accuracy", "marginal_accuracy", "model_accuracy_table",
           "random_forest_accuracy", "random_guess_accuracy", "relative_error_reduction"]

CONDITIONINGS = ("others", "parents")


def generative_model_accuracy(model: PlausibleDeniabilityModel, records: np.ndarray | pd.DataFrame, *,
                              conditioning: str = "others") -> np.ndarray:
    """Accuracy of the fitted model's most likely value of each attribute (module docstring).

    Args:
        model: A fitted :class:`~.model.PlausibleDeniabilityModel` (anything with ``domain_``,
            ``structure_.parents`` and ``conditional(i, records)``).
        records: ``(n, m)`` codes over the model's domain to evaluate on.
        conditioning: ``"others"`` (the Markov-blanket posterior, the paper's measure) or
            ``"parents"`` (Pr{x_i | pa(i)} only).

    Returns:
        ``(m,)`` accuracies in [0, 1], in domain order.

    Raises:
        NotFittedError: the model is not fitted.
        SchemaError: ``records`` are not codes over the model's domain or are empty.
        ValueError: an unknown ``conditioning``.
    """
    if conditioning not in CONDITIONINGS:
        raise ValueError(f"conditioning ({conditioning!r}) must be one of {list(CONDITIONINGS)}")
    if not model.is_fitted:
        raise NotFittedError(f"{type(model).__name__} is not fitted; call fit(data, split=..., ...) "
                             "before measuring its accuracy")
    sizes = model.domain_.sizes
    codes = _nonempty(coded_table(records, sizes, name="records"))
    parents = model.structure_.parents
    children = [[c for c in range(len(sizes)) if i in parents[c]] for i in range(len(sizes))]
    accuracy = np.empty(len(sizes))
    with np.errstate(divide="ignore"):
        for i, size in enumerate(sizes):
            score = np.log(model.conditional(i, codes))
            if conditioning == "others" and children[i]:
                changed = codes.copy()
                for v in range(size):
                    changed[:, i] = v
                    for c in children[i]:
                        score[:, v] += np.log(model.conditional(c, changed)[np.arange(len(codes)), codes[:, c]])
            accuracy[i] = float(np.mean(np.argmax(score, axis=1) == codes[:, i]))
    return accuracy


def empirical_marginals(table: np.ndarray | pd.DataFrame, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Each attribute's empirical distribution in ``table`` (non-private).

    Raises:
        SchemaError: ``table`` is empty or not over ``sizes``.
    """
    sizes = check_sizes(sizes)
    codes = _nonempty(coded_table(table, sizes))
    return tuple(np.bincount(codes[:, j], minlength=size) / len(codes) for j, size in enumerate(sizes))


def marginal_accuracy(records: np.ndarray | pd.DataFrame, *, sizes: Sequence[int],
                      marginals: Sequence[np.ndarray]) -> np.ndarray:
    """Accuracy of always guessing each attribute's most probable value under ``marginals``.

    Args:
        records: ``(n, m)`` codes to evaluate on.
        sizes: The public number of categories of each attribute.
        marginals: One probability vector of length ``sizes[j]`` per attribute (ties go to
            the smallest code).

    Returns:
        ``(m,)`` accuracies.

    Raises:
        SchemaError: ``records`` empty or not over ``sizes``; ``marginals`` of the wrong shape.
    """
    sizes = check_sizes(sizes)
    codes = _nonempty(coded_table(records, sizes, name="records"))
    if len(marginals) != len(sizes):
        raise SchemaError(f"marginals ({len(marginals)} vectors) must have one vector per attribute ({len(sizes)})")
    accuracy = np.empty(len(sizes))
    for j, (size, p) in enumerate(zip(sizes, marginals)):
        p = np.asarray(p, dtype=np.float64)
        if p.shape != (size,) or not np.isfinite(p).all():
            raise SchemaError(f"marginals[{j}] (shape {p.shape}) must be {size} finite probabilities")
        accuracy[j] = float(np.mean(codes[:, j] == int(np.argmax(p))))
    return accuracy


def random_guess_accuracy(sizes: Sequence[int]) -> np.ndarray:
    """1/|x_j| for each attribute: the expected accuracy of a uniform guess."""
    return 1.0 / np.asarray(check_sizes(sizes), dtype=np.float64)


def random_forest_accuracy(train: np.ndarray | pd.DataFrame, records: np.ndarray | pd.DataFrame, *,
                           sizes: Sequence[int], rng: np.random.Generator, n_estimators: int = 100,
                           attributes: Sequence[int] | None = None) -> np.ndarray:
    """Accuracy of a random forest predicting each attribute from the others (non-private).

    Args:
        train: ``(n, m)`` codes of reals to train on.
        records: ``(n', m)`` codes to evaluate on (disjoint from ``train`` for an honest figure).
        sizes: The public number of categories of each attribute.
        rng: Draws one scikit-learn ``random_state`` per forest.
        n_estimators: Trees per forest (scikit-learn's default, 100).
        attributes: Which attributes to predict (default: all); the others get ``nan``.

    Returns:
        ``(m,)`` accuracies (``nan`` for attributes not predicted).

    Raises:
        SchemaError: a table empty or not over ``sizes``; fewer than two attributes.
        ValueError: ``n_estimators`` < 1 or an attribute index out of range.
    """
    from sklearn.ensemble import RandomForestClassifier

    sizes = check_sizes(sizes)
    fit_codes = _nonempty(coded_table(train, sizes, name="train"))
    test_codes = _nonempty(coded_table(records, sizes, name="records"))
    m = len(sizes)
    if m < 2:
        raise SchemaError(f"sizes ({sizes!r}) must have at least two attributes (one to predict from the others)")
    if isinstance(n_estimators, bool) or not isinstance(n_estimators, int) or n_estimators < 1:
        raise ValueError(f"n_estimators ({n_estimators!r}) must be an int >= 1")
    targets = list(range(m)) if attributes is None else [int(a) for a in attributes]
    if any(not 0 <= a < m for a in targets):
        raise ValueError(f"attributes ({attributes!r}) must be indices in 0..{m - 1}")
    accuracy = np.full(m, np.nan)
    for i in targets:
        others = [j for j in range(m) if j != i]
        other_sizes = [sizes[j] for j in others]
        forest = RandomForestClassifier(n_estimators=n_estimators, n_jobs=1,
                                        random_state=int(rng.integers(0, 2**31 - 1)))
        forest.fit(one_hot_dense(fit_codes[:, others], other_sizes), fit_codes[:, i])
        predicted = forest.predict(one_hot_dense(test_codes[:, others], other_sizes))
        accuracy[i] = float(np.mean(predicted == test_codes[:, i]))
    return accuracy


def relative_error_reduction(accuracy: np.ndarray, baseline_accuracy: np.ndarray) -> np.ndarray:
    """Figure 1's relative improvement: (error_baseline − error) / error_baseline.

    ``nan`` where the baseline makes no error (nothing to improve).
    """
    accuracy = np.asarray(accuracy, dtype=np.float64)
    baseline_error = 1.0 - np.asarray(baseline_accuracy, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(baseline_error > 0, (baseline_error - (1.0 - accuracy)) / baseline_error, np.nan)


def model_accuracy_table(model: PlausibleDeniabilityModel, records: np.ndarray | pd.DataFrame, *,
                         train: np.ndarray | pd.DataFrame, marginals: Sequence[np.ndarray] | None = None,
                         rng: np.random.Generator | None = None, n_estimators: int = 100) -> pd.DataFrame:
    """Figures 1–2 for one model: every predictor's accuracy per attribute.

    Args:
        model: The fitted generative model (its domain gives the attributes and sizes).
        records: The records to evaluate on.
        train: Reals for the marginals (when ``marginals`` is None) and the random forest.
        marginals: Per-attribute distributions of the marginals baseline (e.g. a DP marginals
            model's, Figure 1); default the empirical marginals of ``train`` (Figure 2).
        rng: For the random forests; ``None`` leaves the forest out.
        n_estimators: Trees per forest.

    Returns:
        A DataFrame indexed by attribute name with columns ``model`` (Markov blanket),
        ``model_parents``, ``marginals``, ``random``, ``random_forest`` (when ``rng`` is given)
        and ``model_error_reduction`` (Figure 1's relative improvement over the marginals).

    Raises:
        As the functions it calls.
    """
    accuracy = generative_model_accuracy(model, records)
    sizes = model.domain_.sizes
    columns = {"model": accuracy,
               "model_parents": generative_model_accuracy(model, records, conditioning="parents"),
               "marginals": marginal_accuracy(records, sizes=sizes, marginals=(
                   empirical_marginals(train, sizes) if marginals is None else marginals)),
               "random": random_guess_accuracy(sizes)}
    if rng is not None:
        columns["random_forest"] = random_forest_accuracy(train, records, sizes=sizes, rng=rng,
                                                          n_estimators=n_estimators)
    columns["model_error_reduction"] = relative_error_reduction(accuracy, columns["marginals"])
    return pd.DataFrame(columns, index=pd.Index(model.domain_.names, name="attribute"))


def _nonempty(codes: np.ndarray) -> np.ndarray:
    if len(codes) == 0:
        raise SchemaError("records (0 rows) must hold at least one record")
    return codes
