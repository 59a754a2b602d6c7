"""Fit time of a 100-tree DiPriMe forest against scikit-learn's random forest, one run.

Data: the UCI default-of-credit-card-clients table (30,000 rows, 23 features,
``../shared/data``). Both fit on all rows, single-threaded:

* ``sklearn_rf``: ``RandomForestClassifier(n_estimators=100, n_jobs=1)`` (defaults otherwise:
  unlimited depth, bootstrap, √p features per split);
* ``dipreme``: ``DiPriMeClassifier(epsilon=1, n_estimators=100)`` with its defaults (depth 5,
  all 23 features as candidates per node, split share 0.5, trees on disjoint row subsets, the
  paper's Algorithm 2) and public bounds from ``experiments/dipreme/table2_credit.toml``;
* ``dipreme_full_10`` (information, not a target): 10 trees each on all rows
  (``partition="full"``, ε/10 each), 10 × 30,000 rows sorted per candidate and level.

Each fit is timed ``--repeats`` times (best kept; the machine is shared). Last line:
``ratio_vs_sklearn_rf: X`` = sklearn's seconds / ours (≥ 1: ours is not slower).

    python benchmarks/dipreme_fit.py --quick   # one repeat each, under a minute
    python benchmarks/dipreme_fit.py           # three repeats each
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import numpy as np

from privlab.mechanisms.dipreme import DiPriMeClassifier
from privlab.mechanisms.dipreme.datasets import TARGET, read_dataset
from best_time import best_seconds  # benchmarks/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "dipreme" / "table2_credit.toml"
DATA = ROOT.parent / "shared" / "data" / "default_credit_card_clients" / "UCI_Credit_Card.csv"



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one repeat per fit")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    from sklearn.ensemble import RandomForestClassifier

    frame = read_dataset("credit_default", DATA)
    columns = [c for c in frame.columns if c != TARGET]
    X, y = frame[columns].to_numpy(float), frame[TARGET].to_numpy()
    params = tomllib.loads(SPEC.read_text())["params"]
    cats = {j: tuple(params["categories"][c]) for j, c in enumerate(columns) if c in params["categories"]}
    bounds = [tuple(params["feature_bounds"].get(c, (0.0, 1.0))) for c in columns]

    def ours(partition: str, trees: int = 100) -> DiPriMeClassifier:
        return DiPriMeClassifier(epsilon=1.0, n_estimators=trees, feature_bounds=bounds, categories=cats,
                                 classes=[0, 1], partition=partition, random_state=np.random.default_rng(1))

    sklearn_seconds = best_seconds(lambda: RandomForestClassifier(n_estimators=100, n_jobs=1, random_state=0).fit(X, y),
                            repeats)
    ours_seconds = best_seconds(lambda: ours("disjoint").fit(X, y), repeats)
    full_seconds = best_seconds(lambda: ours("full", 10).fit(X, y), 1)
    fitted = ours("disjoint").fit(X, y)
    print(f"data: {X.shape[0]} rows x {X.shape[1]} features; best of {repeats}")
    print(f"sklearn_rf (100 trees, n_jobs=1): {sklearn_seconds:.3f} s")
    print(f"dipreme (100 trees, depth 5, all features, disjoint): {ours_seconds:.3f} s "
          f"(ledger: {len(fitted.events_)} events, total ε = {fitted.ledger_.total().epsilon:g}; "
          f"training error {1 - fitted.score(X, y):.3f})")
    print(f"dipreme_full_10 (10 trees, each on all rows; information): {full_seconds:.3f} s")
    print(f"ratio_vs_sklearn_rf: {sklearn_seconds / ours_seconds:.2f}")


if __name__ == "__main__":
    main()
