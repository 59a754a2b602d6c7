"""DiPriMe beside the authors' implementation, on the same splits and settings (a fidelity check).

    python benchmarks/dipreme_authors.py --authors-code DIR              # 30 repetitions
    python benchmarks/dipreme_authors.py --authors-code DIR --quick      # 5 repetitions

``DIR`` is a checkout of the authors' public code (``shoryaconsul/DiPriMeFlip_Forest``, fetched
into a scratch folder outside this repository; nothing of it is copied here): the script imports
``DIR/Classes/DiPrime_Class.py`` and runs its ``DiPrimeCForest``. Needs the UCI banknote and
credit-card tables (``experiments/dipreme/table2_banknote.toml`` and ``table2_credit.toml`` name
them) and their public bounds and categories from the same specs.

Every repetition draws one 90/10 split (the ``private_forests`` workload's rule) from
``SeedSequence(ROOT, spawn_key=(dataset, repetition))`` and fits, on the same training rows,
with the same settings (10 trees on disjoint row subsets, depth 4, K candidate features per
node, split share 0.5, the specs' public bounds, add/remove-one neighbours — the paper's
relation — at each ε):

* ``ours``: :class:`~privlab.mechanisms.dipreme.DiPriMeClassifier` (ε-DP as charged: the K
  medians of a node share ε_level/2, the feature choice gets ε_level/2 with the SSE score,
  Δ = 2 for one-hot classes);
* ``authors``: the authors' ``DiPrimeCForest`` (each of the K medians gets ε_level/2 and the
  choice another ε_level/2: (K + 1)·ε_level/2 per level in all);
* ``ours_authors_medians`` — **not differentially private at the stated ε, a diagnostic**: our
  forest with each median given ε_level/2, as the authors' code spends;
* ``ours_authors_budget`` — **not differentially private at the stated ε, a diagnostic**: the
  same, and the feature choice scaled as the authors' is. Their score is the children's MSE,
  SSE/n, with sensitivity 4B²/n (n the node's private size, B = 1 for 0/1 labels), so the
  exponent ε_c·(−SSE/n)/(2·4B²/n) = −ε_c·SSE₀₁/8: the n cancels, and the rule is exactly the
  exponential mechanism on −SSE with Δ = 4B² — four times the bound B² of one 0/1 SSE, so
  their choice is ε-DP and flatter than ours (our one-hot SSE is 2·SSE₀₁ with Δ = 2, exponent
  −ε_c·SSE₀₁/2). The diagnostic multiplies our choice's Δ by 4.

The authors' code draws from numpy's and Python's global generators; they are seeded from the
repetition's SeedSequence before each of its fits (third-party code, run here only).

Output: mean test error [95% t-interval] per dataset, ε and method, the paired difference to the
authors' (same splits), and last the ``name: value`` lines (the gaps, ours − authors, at ε = 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import random
import sys
import time
import tomllib
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from privlab.mechanisms.dipreme import DiPriMeClassifier
from privlab.mechanisms.dipreme.datasets import TARGET, read_dataset
from privlab.mechanisms.dipreme.workloads import ForestStudyParams

ROOT = 20200624
SPECS = Path(__file__).resolve().parents[1] / "experiments" / "dipreme"
DATASETS = {"banknote": "table2_banknote.toml", "credit": "table2_credit.toml"}
METHODS = ("ours", "authors", "ours_authors_medians", "ours_authors_budget")
DEPTH, TREES, SPLIT_SHARE = 4, 10, 0.5


class _AuthorsBudget(DiPriMeClassifier):
    """Non-DP diagnostic: our forest with the authors' per-median ε and (optionally) their
    feature-choice scale. The ledger records our DP plan, not what this spends."""

    choice_factor: float = 1.0

    def _splitter(self, plan, K):  # noqa: ANN001, ANN202
        splitter = super()._splitter(plan, K)
        return dataclasses.replace(splitter, epsilon_median=splitter.epsilon_median * K,
                                   choice_sensitivity=splitter.choice_sensitivity * self.choice_factor)


class _AuthorsBudgetAndChoice(_AuthorsBudget):
    choice_factor = 4.0


def _authors_forest(code: Path):
    classes = code / "Classes"
    spec = importlib.util.spec_from_file_location("dipreme_authors_class", classes / "DiPrime_Class.py")
    if spec is None or spec.loader is None or not (classes / "DiPrime_Class.py").is_file():
        raise SystemExit(f"--authors-code ({str(code)!r}) must be a checkout of shoryaconsul/DiPriMeFlip_Forest "
                         "(it has no Classes/DiPrime_Class.py)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DiPrimeCForest


def _study(name: str) -> tuple[ForestStudyParams, np.ndarray, np.ndarray, list[str]]:
    spec = tomllib.loads((SPECS / DATASETS[name]).read_text())
    params = {k: v for k, v in spec["params"].items()}
    params.update(method="dipreme", epsilon=1.0, max_depth=DEPTH, n_estimators=TREES, split_fraction=SPLIT_SHARE,
                  partition="disjoint")
    study = ForestStudyParams(**params)
    frame = read_dataset(study.reader, study.data)
    columns = [c for c in frame.columns if c != TARGET]
    return study, frame[columns].to_numpy(float), frame[TARGET].to_numpy(), columns


def _fit_ours(cls, study: ForestStudyParams, columns, epsilon: float, X, y, seed: int):  # noqa: ANN001, ANN202
    """Our forest at the paper's relation: a plain fit charges replace-one, whose every Δ is twice
    add/remove-one's (disjoint trees compose in parallel under replace-one only), so 2ε on it draws
    exactly the noise of ε under add/remove-one, the authors' setting."""
    base = study.estimator(random_state=seed, columns=columns)
    est = cls(**(base.get_params() | {"epsilon": 2 * epsilon}))
    return est.fit(X, y)


def _fit_authors(forest_cls, study: ForestStudyParams, columns, epsilon: float, X, y, seed: int):  # noqa: ANN001, ANN202
    bounds, cats = study.features(columns)
    A = {j: (list(cats[j]) if j in cats else np.array(bounds[j], dtype=float)) for j in range(len(columns))}
    K = study.estimator(random_state=None, columns=columns).max_features
    np.random.seed(seed % 2**32)  # noqa: NPY002 - the authors' code draws from numpy's global generator
    random.seed(seed)
    forest = forest_cls(n_trees=TREES, max_depth=DEPTH, max_features=K or X.shape[1], partition=True)
    labels = np.searchsorted(np.sort(np.asarray(study.classes)), y).astype(float)
    forest.fit(X, labels, A, sorted(cats), np.array([0.0, 1.0]), epsilon, SPLIT_SHARE)
    return forest, sorted(cats)


def run(code: Path, repetitions: int, epsilons: tuple[float, ...]) -> dict[tuple[str, float, str], np.ndarray]:
    forest_cls = _authors_forest(code)
    errors: dict[tuple[str, float, str], np.ndarray] = {}
    for d, name in enumerate(DATASETS):
        study, X, y, columns = _study(name)
        classes = np.sort(np.asarray(study.classes))
        for epsilon in epsilons:
            for method in METHODS:
                errors[(name, epsilon, method)] = np.zeros(repetitions)
        started = time.perf_counter()
        for r in range(repetitions):
            sequence = np.random.SeedSequence(ROOT, spawn_key=(d, r))
            rng = np.random.default_rng(sequence)
            order = rng.permutation(len(X))
            n_test = max(1, round(0.1 * len(X)))
            test, train = order[:n_test], order[n_test:]
            seeds = rng.integers(2**63, size=len(epsilons) * len(METHODS))
            for e, epsilon in enumerate(epsilons):
                for m, method in enumerate(METHODS):
                    seed = int(seeds[e * len(METHODS) + m])
                    if method == "authors":
                        with warnings.catch_warnings(), np.errstate(all="ignore"):
                            warnings.simplefilter("ignore", RuntimeWarning)  # their log(0) and empty-leaf means
                            forest, cat_idx = _fit_authors(forest_cls, study, columns, epsilon, X[train], y[train],
                                                           seed)
                            predicted = classes[(forest.predict(X[test], cat_idx) >= 0.5).astype(int)]
                    else:
                        cls = {"ours": DiPriMeClassifier, "ours_authors_medians": _AuthorsBudget,
                               "ours_authors_budget": _AuthorsBudgetAndChoice}[method]
                        predicted = _fit_ours(cls, study, columns, epsilon, X[train], y[train], seed).predict(X[test])
                    errors[(name, epsilon, method)][r] = np.mean(predicted != y[test])
        print(f"{name}: {repetitions} repetitions in {time.perf_counter() - started:.0f} s", flush=True)
    return errors


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def report(errors: dict[tuple[str, float, str], np.ndarray], epsilons: tuple[float, ...]) -> None:
    print("\n| dataset | ε (add/remove-one) | method | test error [95% CI] | minus authors' (paired) [95% CI] |")
    print("| --- | --- | --- | --- | --- |")
    for name in DATASETS:
        for epsilon in epsilons:
            authors = errors[(name, epsilon, "authors")]
            for method in METHODS:
                values = errors[(name, epsilon, method)]
                m, lo, hi = _interval(values)
                gap = "—" if method == "authors" else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*_interval(values - authors))
                print(f"| {name} | {epsilon:g} | {method} | {m:.3f} [{lo:.3f}, {hi:.3f}] | {gap} |")
    load = os.getloadavg()[0]
    print()
    for name in DATASETS:
        for method in ("ours", "ours_authors_medians", "ours_authors_budget"):
            gap = float(np.mean(errors[(name, 1.0, method)] - errors[(name, 1.0, "authors")]))
            print(f"{name}_eps1_{method}_minus_authors: {gap:.4f}")
    print(f"load_average_1min: {load:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--authors-code", type=Path, required=True,
                        help="a checkout of shoryaconsul/DiPriMeFlip_Forest (outside this repository)")
    parser.add_argument("--repetitions", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="5 repetitions")
    parser.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 2.0, 5.0],
                        help="ε values, add/remove-one (default: 1 2 5)")
    args = parser.parse_args(argv)
    if 1.0 not in args.epsilon:
        parser.error("--epsilon must include 1 (the summary lines are at ε = 1)")
    repetitions = 5 if args.quick else args.repetitions
    epsilons = tuple(args.epsilon)
    report(run(args.authors_code, repetitions, epsilons), epsilons)


if __name__ == "__main__":
    sys.exit(main())
