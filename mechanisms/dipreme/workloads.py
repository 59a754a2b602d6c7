"""The DiPriMe paper's benchmarks as one grid workload: dataset × method × ε × depth × trees.

One repetition: a random train/test split of the dataset (``test_fraction``, the paper's 90/10),
one fit of the configuration's method on the training rows, and its test error
(misclassification rate for Table 2, MSE of the target scaled to [0, 1] for Table 1).

Public configuration, all in the spec: ``feature_bounds`` (``{column: [lower, upper]}``, every
numeric feature), ``categories`` (``{column: [codes]}``), ``target_bounds`` (regression: the
target is scaled to [0, 1] with them, not with its own minimum and maximum as the paper did) and
``classes``. Nothing is read from the data except what the methods privatise.

Accounting: nothing is charged by hand. A private method's estimator is fitted on the training
rows with the trial's own ledger and random source, and the ledger receives exactly the
estimator's events (every step with its sensitivity and scale); :meth:`ForestStudy.plan` is the
same estimator's ``planned_events`` for the declared columns, so the runner's check of each
trial against the plan checks the estimator's spend. The run's ledgers are replace-one: every
sensitivity is the replace-one one (twice the add/remove-one Δ,
:func:`~privlab.mechanisms.dipreme.privacy.sensitivity_factor`), and a disjoint forest's trees
are parts of a positional split of the training rows (a seeded permutation of record positions,
independent of the data), declared on the trial's ledger (:meth:`ForestStudy.partitions`: the
runner declares it before the trial, the fit uses it), so they compose in parallel under
replace-one too. A fit is then ε-DP under replace-one with the configuration's ε, and the
ledger's total is ε.

Methods: ``dipreme``, ``dpert``, ``dpdf`` (classification), ``median`` (non-private median
forest), ``random_forest`` and ``extra_trees`` (scikit-learn, non-private references with the
same depth and number of trees).

References:
    Consul, Williamson & Dagli (2020), Section 4, Tables 1–2, Figures 3–4.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.dipreme.datasets import TARGET, TASKS, read_dataset
from privlab.mechanisms.dipreme.inputs import check_forest_size, forest_constraints
from privlab.mechanisms.dipreme.methods import METHODS, PRIVATE
from privlab.mechanisms.dipreme.report import forest_report
from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import ConstrainedParams, Interval, Options, Unconstrained, validate_parameters
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import SplitPlan
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload, register_workload
from privlab.platform.results.reports import StudyResults

__all__ = ["ForestStudy", "ForestStudyParams"]

NEIGHBOURING = "replace_one"
"""The relation of a run's ledgers (:meth:`privlab.platform.experiment.spec.BudgetSpec.ledger`)."""


def _must(ok: bool, name: str, value: object, constraint: str) -> None:
    if not ok:
        raise ValueError(f"{name} ({value!r}) must be {constraint}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForestStudyParams(ConstrainedParams):
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

    _parameter_constraints: ClassVar = {
        "data": [Unconstrained()], "reader": [Options(str, sorted(TASKS))], "method": [Options(str, METHODS)],
        "feature_bounds": [Unconstrained()], "categories": [Unconstrained()],  # tables: _check_together
        "target_bounds": [Unconstrained()], "classes": [Unconstrained()],  # needed by the reader's task
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        # the estimators' own constraints when the method is private (_check_together)
        "max_depth": [Unconstrained()], "n_estimators": [Unconstrained()], "split_fraction": [Unconstrained()],
        "partition": [Unconstrained()], "bins": [Unconstrained()],
        "max_features": [Options(str, ("all", "sqrt")), Interval(numbers.Integral, 1, None, closed="left")],
        "test_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
    }

    def _check_together(self) -> None:
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
        if self.method in PRIVATE:  # the estimators' own constraints, so a bad spec fails when it is loaded
            settings = {"epsilon": self.epsilon, "max_depth": self.max_depth, "n_estimators": self.n_estimators,
                        "partition": self.partition, "split_fraction": self.split_fraction,
                        "max_features": None if self.max_features == "all" else self.max_features}
            constraints = forest_constraints(private=True, private_splits=True, regression=False)
            validate_parameters(constraints, settings)
            if self.method != "dpdf":  # DP-DF's trees are multiway: its fit checks B^d leaves
                check_forest_size(self.n_estimators, 2 ** self.max_depth)

    @property
    def task(self) -> str:
        return TASKS[self.reader]

    @property
    def columns(self) -> tuple[str, ...]:
        """The declared feature columns (public): ``feature_bounds``' then ``categories``' names.
        The dataset's feature columns must be exactly these (:meth:`ForestStudy.load_data`)."""
        return tuple(dict.fromkeys([*self.feature_bounds, *self.categories]))

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


def planned_events(params: ForestStudyParams) -> list[PrivacyEvent]:
    """What one trial's fit charges: the estimator's own plan for the declared columns on a
    fresh replace-one ledger, scope ``"data"`` (empty for the non-private methods)."""
    if params.method not in PRIVATE:
        return []
    n_classes = None if params.task == "regression" else len(params.classes)
    return params.estimator(random_state=None).planned_events(
        len(params.columns), neighbouring=NEIGHBOURING, scope="data", n_classes=n_classes)


def planned_partitions(params: ForestStudyParams) -> list[tuple[str, tuple[str, ...], SplitPlan]]:
    """The partition of a disjoint private forest: its trees' parts of ``"data"``, cut by a
    seeded permutation of the training rows' positions that the trial's fit draws and declares."""
    if params.method not in ("dipreme", "dpert") or params.partition != "disjoint" or params.n_estimators < 2:
        return []
    from privlab.mechanisms.dipreme.tree_rows import forest_part_names

    return [("data", tuple(forest_part_names("data", params.n_estimators)), SplitPlan("permuted"))]


@register_workload
class ForestStudy(Workload):
    """Test error of a DP (or reference) forest on a public UCI dataset; one split per repetition."""

    name = "private_forests"
    pattern = Pattern.GRID
    Params = ForestStudyParams
    metrics = {"test_error": MetricKind.VALUE}

    def plan(self, params: ForestStudyParams) -> list[PrivacyEvent]:
        return planned_events(params)

    def partitions(self, params: ForestStudyParams) -> list[tuple[str, tuple[str, ...], SplitPlan]]:
        return planned_partitions(params)

    def data_key(self, params: ForestStudyParams) -> str:
        return f"{params.reader}|{params.data}"

    def data_files(self, params: ForestStudyParams) -> tuple[str, ...]:
        return (params.data,)

    def load_data(self, params: ForestStudyParams) -> pd.DataFrame:
        frame = read_dataset(params.reader, params.data)
        columns = [c for c in frame.columns if c != TARGET]
        params.features(columns)  # every column has public bounds
        if set(columns) != set(params.columns):
            raise SchemaError(f"feature_bounds and categories ({sorted(params.columns)!r}) must declare exactly the "
                              f"dataset's feature columns ({sorted(columns)!r}): the plan's candidates per node "
                              "depend on the public column count", column=",".join(sorted(set(params.columns) - set(columns))),
                              problem="missing_column")
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
        if params.method in PRIVATE or params.method == "median":
            est = params.estimator(random_state=None, columns=columns)
            est.fit(X[train], y[train], ledger=ledger, scope="data", source=source)
        else:
            seed = int(source.rng.integers(2**31 - 1))
            est = params.estimator(random_state=seed, columns=columns)
            est.fit(X[train], y[train])
        predicted = est.predict(X[test])
        if params.task == "regression":
            return {"test_error": float(np.mean((predicted - y[test]) ** 2))}
        return {"test_error": float(np.mean(predicted != y[test]))}

    def report(self, results: StudyResults) -> dict[str, str | bytes]:
        return forest_report(results)
