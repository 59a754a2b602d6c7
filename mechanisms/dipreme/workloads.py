"""The DiPriMe paper's benchmarks as one grid workload: dataset × method × ε × depth × trees.

One repetition: a random train/test split of the dataset (``test_fraction``, the paper's 90/10),
one fit of the configuration's method on the training rows, and its test error
(misclassification rate for Table 2, MSE of the target scaled to [0, 1] for Table 1).

Public configuration, all in the spec: ``feature_bounds`` (``{column: [lower, upper]}``, every
numeric feature), ``categories`` (``{column: [codes]}``), ``target_bounds`` (regression: the
target is scaled to [0, 1] with them, not with its own minimum and maximum as the paper did) and
``classes``. Nothing is read from the data except what the methods privatise.

Accounting: a private method fits on its own ledger (add/remove-one neighbours, the relation
under which the paper's parallel composition over disjoint trees holds; the estimators' ledgers
hold every step with its sensitivity) and the trial's ledger is charged one event, ``forest_fit``.
The run's ledger is replace-one (and refuses parallel composition), so that event is the fit's
guarantee converted to it: an ε-DP mechanism under add/remove-one is 2ε-DP under replace-one
(a replacement is a removal and an addition; group privacy of size 2), and the event says so
in its details (``add_remove_epsilon`` = ε). The per-step record stays in the estimator's ledger.

Methods: ``dipreme``, ``dpert``, ``dpdf`` (classification), ``median`` (non-private median
forest), ``random_forest`` and ``extra_trees`` (scikit-learn, non-private references with the
same depth and number of trees).

References:
    Consul, Williamson & Dagli (2020), Section 4, Tables 1–2, Figures 3–4.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.dipreme.datasets import TARGET, TASKS, read_dataset
from privlab.mechanisms.dipreme.inputs import check_settings
from privlab.platform.ledger import Ledger, PrivacyEvent
from privlab.platform.randomness import SeededSource
from privlab.platform.registry import MetricKind, Pattern, Workload, register_workload
from privlab.platform.reports import StudyResults

__all__ = ["ForestStudy", "ForestStudyParams"]

METHODS = ("dipreme", "dpert", "dpdf", "median", "random_forest", "extra_trees")
PRIVATE = ("dipreme", "dpert", "dpdf")
METHOD_LABELS = {"dipreme": "DiPriMe", "dpert": "DP-ERT", "dpdf": "DP-DF", "median": "Median Trees",
                 "random_forest": "Random Forest", "extra_trees": "ERT"}


def _must(ok: bool, name: str, value: object, constraint: str) -> None:
    if not ok:
        raise ValueError(f"{name} ({value!r}) must be {constraint}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForestStudyParams:
    """One configuration (see the module docstring; settings as in the estimators)."""

    data: str = dataclasses.field(metadata={"path": True})
    reader: str
    method: str
    feature_bounds: Mapping[str, Sequence[float]]
    categories: Mapping[str, Sequence[float]] = dataclasses.field(default_factory=dict)
    target_bounds: Sequence[float] = ()
    classes: Sequence[Any] = ()
    epsilon: float
    max_depth: int = 5
    n_estimators: int = 10
    split_fraction: float = 0.5
    max_features: int | str = "all"
    partition: str = "disjoint"
    bins: int = 5
    test_fraction: float = 0.1

    def __post_init__(self) -> None:
        _must(self.reader in TASKS, "reader", self.reader, f"one of {sorted(TASKS)}")
        _must(self.method in METHODS, "method", self.method, f"one of {list(METHODS)}")
        _must(not (self.method == "dpdf" and self.task == "regression"), "method", self.method,
              "a regression method for a regression dataset (DP-DF is a classifier)")
        _must(isinstance(self.feature_bounds, Mapping) and all(
            isinstance(v, Sequence) and len(v) == 2 for v in self.feature_bounds.values()),
            "feature_bounds", self.feature_bounds, "a table {column: [lower, upper]}")
        if self.task == "regression":
            _must(len(self.target_bounds) == 2 and self.target_bounds[0] < self.target_bounds[1], "target_bounds",
                  self.target_bounds, "[lower, upper] with lower < upper (public bounds of the target)")
        else:
            _must(len(self.classes) >= 2, "classes", self.classes, "the list of public class labels")
        _must(isinstance(self.epsilon, (int, float)) and math.isfinite(self.epsilon) and self.epsilon > 0,
              "epsilon", self.epsilon, "a positive finite number")
        _must(self.max_features in ("all", "sqrt") or (isinstance(self.max_features, int) and self.max_features >= 1),
              "max_features", self.max_features, "'all', 'sqrt' or an int >= 1")
        _must(0 < self.test_fraction < 1, "test_fraction", self.test_fraction, "in (0, 1)")
        if self.method in PRIVATE:  # the estimators' own checks, so a bad spec fails when it is loaded
            settings = types.SimpleNamespace(
                epsilon=self.epsilon, max_depth=self.max_depth, n_estimators=self.n_estimators,
                partition=self.partition, split_fraction=self.split_fraction,
                max_features=None if self.max_features == "all" else self.max_features)
            check_settings(settings, private=True, private_splits=self.method == "dipreme", regression=False)

    @property
    def task(self) -> str:
        return TASKS[self.reader]

    def features(self, columns: Sequence[str]) -> tuple[list[tuple[float, float]], dict[int, tuple[float, ...]]]:
        """Per-feature bounds and categories in column order (every column must be covered)."""
        bounds, cats = [], {}
        for j, column in enumerate(columns):
            if column in self.categories:
                cats[j] = tuple(float(c) for c in self.categories[column])
                bounds.append((0.0, 1.0))  # unused for a categorical feature
            elif column in self.feature_bounds:
                lo, hi = self.feature_bounds[column]
                bounds.append((float(lo), float(hi)))
            else:
                raise ValueError(f"feature_bounds ({sorted(self.feature_bounds)!r}) must cover column {column!r} "
                                 "(or list it in categories)")
        return bounds, cats

    def estimator(self, *, random_state: Any, columns: Sequence[str] | None = None) -> Any:
        """The configuration's estimator (scikit-learn's for the non-private references).

        scikit-learn (and with it scipy.stats) is imported here, not with the module: the CLI
        loads every workload plug-in, and commands that run none must stay light."""
        from privlab.mechanisms.dipreme.dpdf import DPDFClassifier
        from privlab.mechanisms.dipreme.forest import (DiPriMeClassifier, DiPriMeRegressor, DPERTClassifier,
                                                       DPERTRegressor, MedianForestClassifier, MedianForestRegressor)

        K = None if self.max_features == "all" else self.max_features
        if columns is None:
            bounds, cats = None, None
        else:
            bounds, cats = self.features(columns)
        regression = self.task == "regression"
        common = {"max_depth": self.max_depth, "n_estimators": self.n_estimators, "random_state": random_state}
        if self.method in ("random_forest", "extra_trees"):
            from sklearn.ensemble import (ExtraTreesClassifier, ExtraTreesRegressor, RandomForestClassifier,
                                          RandomForestRegressor)
            cls = {("random_forest", True): RandomForestRegressor, ("random_forest", False): RandomForestClassifier,
                   ("extra_trees", True): ExtraTreesRegressor, ("extra_trees", False): ExtraTreesClassifier}
            return cls[(self.method, regression)](max_features=1.0 if K is None else K, n_jobs=1, **common)
        labels = {} if regression else {"classes": list(self.classes)}
        target = {"target_bounds": (0.0, 1.0)} if regression else {}
        if self.method == "median":
            cls = MedianForestRegressor if regression else MedianForestClassifier
            return cls(max_features=K, feature_bounds=bounds, categories=cats, partition=self.partition,
                       **labels, **common)
        if self.method == "dpdf":
            return DPDFClassifier(epsilon=self.epsilon, bins=self.bins, feature_bounds=bounds, categories=cats,
                                  **labels, **common)
        if self.method == "dpert":
            cls = DPERTRegressor if regression else DPERTClassifier
            return cls(epsilon=self.epsilon, feature_bounds=bounds, categories=cats, partition=self.partition,
                       **labels, **target, **common)
        cls = DiPriMeRegressor if regression else DiPriMeClassifier
        return cls(epsilon=self.epsilon, split_fraction=self.split_fraction, max_features=K, feature_bounds=bounds,
                   categories=cats, partition=self.partition, **labels, **target, **common)


REPLACE_ONE_FACTOR = 2.0
"""ε under replace-one of a fit that is ε-DP under add/remove-one (module docstring)."""


def planned_events(params: ForestStudyParams) -> list[PrivacyEvent]:
    if params.method not in PRIVATE:
        return []
    return [PrivacyEvent(
        name="forest_fit", mechanism=f"{params.method}_forest", epsilon=REPLACE_ONE_FACTOR * float(params.epsilon),
        scope="data", step=params.method,
        details=(("neighbouring", "replace_one"), ("add_remove_epsilon", float(params.epsilon)),
                 ("conversion", "group privacy of size 2: a replacement is a removal and an addition"),
                 ("partition", "full" if params.method == "dpdf" else params.partition),
                 ("record", "every step with its sensitivity is in the estimator's own ledger (ledger_)")))]


@register_workload
class ForestStudy(Workload):
    """Test error of a DP (or reference) forest on a public UCI dataset; one split per repetition."""

    name = "private_forests"
    pattern = Pattern.GRID
    Params = ForestStudyParams
    metrics = {"test_error": MetricKind.VALUE}

    def plan(self, params: ForestStudyParams) -> list[PrivacyEvent]:
        return planned_events(params)

    def data_key(self, params: ForestStudyParams) -> str:
        return f"{params.reader}|{params.data}"

    def load_data(self, params: ForestStudyParams) -> pd.DataFrame:
        frame = read_dataset(params.reader, params.data)
        params.features([c for c in frame.columns if c != TARGET])  # every column has public bounds
        return frame

    def run_trial(self, params: ForestStudyParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        if data is None:  # pragma: no cover - the runner always passes load_data's frame
            raise ValueError("data (None) must be the frame load_data read")
        columns = [c for c in data.columns if c != TARGET]
        X = data[columns].to_numpy(dtype=float)
        y = data[TARGET].to_numpy()
        if params.task == "regression":
            lo, hi = (float(b) for b in params.target_bounds)
            y = (y.astype(float) - lo) / (hi - lo)
        order = source.rng.permutation(len(X))
        n_test = max(1, round(params.test_fraction * len(X)))
        test, train = order[:n_test], order[n_test:]
        if params.method in PRIVATE:
            for event in planned_events(params):
                ledger.spend(event)
            est = params.estimator(random_state=source.dp_generator(purpose="forest"), columns=columns)
            est.fit(X[train], y[train], ledger=Ledger(epsilon_cap=float(params.epsilon), neighbouring="add_remove"))
        else:
            seed = int(source.rng.integers(2**31 - 1))
            est = params.estimator(random_state=seed, columns=columns)
            est.fit(X[train], y[train])
        predicted = est.predict(X[test])
        if params.task == "regression":
            return {"test_error": float(np.mean((predicted - y[test]) ** 2))}
        return {"test_error": float(np.mean(predicted != y[test]))}

    def report(self, results: StudyResults) -> dict[str, str | bytes]:
        from privlab.mechanisms.dipreme.report import forest_report

        return forest_report(results)
