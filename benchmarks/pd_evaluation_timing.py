"""How long each Section 6 evaluation piece takes on Adult-sized data (sizing issue 10's study).

Data: UCI Adult's training file (``../shared/data/adult_uci/adult-train.csv``), rows with a
missing value dropped (30,162), coded here **only for timing**: age in bins of 10 from 17, hours
per week in bins of 15, every other kept attribute by its sorted distinct values (workclass,
education, marital status, occupation, relationship, race, sex, native country, income), 11
attributes. This is not the study's bucketisation (that is the workload's), and the codes are
read from the public file. Split: 15,000 training reals, 10,000 test reals, 5,000 for the model
(D_T = D_P = 2,500). "Synthetics" are 15,000 records drawn from the ε = 1 model by ancestral
sampling — a stand-in with the right shape for timing, not the seed-based generator.

One core (BLAS/OpenMP threads pinned to 1, scikit-learn ``n_jobs=1``); the machine may be
shared, so the load average is printed. Ends with one ``name: seconds`` line per piece.

    python benchmarks/pd_evaluation_timing.py            # ~2–4 minutes
    python benchmarks/pd_evaluation_timing.py --quick    # RF accuracy for 2 attributes, 1 λ
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from privlab.mechanisms.plausible_deniability.distinguishing_game import distinguishing_game  # noqa: E402
from privlab.mechanisms.plausible_deniability.dp_erm import (  # noqa: E402
    DPLinearClassifier, DPLinearClassifierParams, erm_features, fit_erm)
from privlab.mechanisms.plausible_deniability.evaluation_classifiers import compare_classifiers  # noqa: E402
from privlab.mechanisms.plausible_deniability.evaluation_model_accuracy import (  # noqa: E402
    empirical_marginals, generative_model_accuracy, marginal_accuracy, random_forest_accuracy)
from privlab.mechanisms.plausible_deniability.evaluation_statistics import (  # noqa: E402
    attribute_tvd, pairwise_tvd, tvd_summary)
from privlab.mechanisms.plausible_deniability.model import (  # noqa: E402
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain  # noqa: E402
from privlab.platform.dp.ledger import Ledger  # noqa: E402
from privlab.platform.dp.positional_split import PositionalSplit  # noqa: E402
from privlab.platform.dp.randomness import SeededSource  # noqa: E402

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult_uci" / "adult-train.csv"
COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
           "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
           "income"]
KEPT = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
        "hours-per-week", "native-country", "income"]


def adult_codes() -> tuple[Domain, pd.DataFrame]:
    raw = pd.read_csv(ADULT, header=None, names=COLUMNS, skipinitialspace=True, na_values="?").dropna()
    out, columns = {}, []
    for name in KEPT:
        if name == "age":
            codes = np.minimum((raw[name].to_numpy() - 17) // 10, 7)
            labels = tuple(f"{17 + 10 * i}+" for i in range(8))
        elif name == "hours-per-week":
            codes = np.minimum(raw[name].to_numpy() // 15, 6)
            labels = tuple(f"{15 * i}+" for i in range(7))
        else:
            labels = tuple(sorted(raw[name].unique()))
            codes = raw[name].map({v: i for i, v in enumerate(labels)}).to_numpy()
        out[name] = codes.astype(np.int64)
        columns.append(ColumnDomain(name=name, labels=tuple(map(str, labels))))
    return Domain(tuple(columns)), pd.DataFrame(out)


def timed(label: str, timings: dict[str, float], run):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = run()
    timings[label] = time.perf_counter() - start
    print(f"  {label}: {timings[label]:.2f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    domain, data = adult_codes()
    sizes, target = domain.sizes, domain.names.index("income")
    rng = np.random.default_rng(20261125)
    data = data.iloc[rng.permutation(len(data))].reset_index(drop=True)
    train, test, model_part = data.iloc[:15000], data.iloc[15000:25000], data.iloc[25000:30000]
    print(f"records {len(data)}, attributes {len(sizes)}, sizes {sizes}, one-hot width {sum(sizes)}")
    timings: dict[str, float] = {}

    params = PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=64)
    model = PlausibleDeniabilityModel(params)
    halves = PositionalSplit.permuted(len(model_part), [2500, len(model_part) - 2500], rng=np.random.default_rng(3))
    timed("model_fit", timings, lambda: model.fit(
        model_part.reset_index(drop=True), split=halves, domain=domain,
        ledger=Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant=params.accountant, delta_slack=params.delta_slack),
        source=SeededSource(np.random.default_rng(1))))
    synthetics = model.sample(15000, rng=np.random.default_rng(2))

    single = timed("tvd_attributes", timings, lambda: attribute_tvd(train, synthetics, sizes))
    pairs = timed("tvd_pairs", timings, lambda: pairwise_tvd(train, synthetics, sizes))
    print(f"    attribute TVD median {tvd_summary(single)['median']:.3f}, pair TVD median "
          f"{tvd_summary(pairs.tvd)['median']:.3f} over {len(pairs.tvd)} pairs")

    accuracy = timed("model_accuracy_markov_blanket_10k", timings,
                     lambda: generative_model_accuracy(model, test))
    marginal = timed("marginal_accuracy_10k", timings, lambda: marginal_accuracy(
        test, sizes=sizes, marginals=empirical_marginals(train, sizes)))
    print(f"    mean accuracy: model {accuracy.mean():.3f}, marginals {marginal.mean():.3f}")
    attributes = [target, 0] if args.quick else None
    label = f"random_forest_accuracy_{'2' if args.quick else len(sizes)}_attributes"
    forest = timed(label, timings, lambda: random_forest_accuracy(train, test, sizes=sizes, rng=rng,
                                                                  attributes=attributes))
    print(f"    RF accuracy (income): {forest[target]:.3f}")

    table = timed("classifiers_5_kinds_2_training_sets", timings, lambda: compare_classifiers(
        train, {"synthetics": synthetics}, test, sizes=sizes, target=target, rng=rng))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))

    features, labels = erm_features(test.to_numpy(), sizes, target)
    lambdas = [1e-3] if args.quick else [1e-3, 1e-4, 1e-5, 1e-6]
    train_features, train_labels = erm_features(train.to_numpy(), sizes, target)
    for loss in ("logistic", "huber"):
        for lam in lambdas:
            coef, _ = timed(f"nonprivate_erm_{loss}_lambda_{lam:g}", timings, lambda: fit_erm(
                train_features, train_labels, loss=loss, regularization=lam))
            print(f"    accuracy {np.mean((features @ coef > 0) == (labels > 0)):.3f}")
            for perturbation in ("output", "objective"):
                estimator = DPLinearClassifier(DPLinearClassifierParams(
                    epsilon=1.0, regularization=lam, loss=loss, perturbation=perturbation))
                timed(f"dp_erm_{loss}_{perturbation}_lambda_{lam:g}", timings, lambda: estimator.fit(
                    train, domain=domain, target="income", ledger=Ledger(epsilon_cap=1.0),
                    source=SeededSource(np.random.default_rng(3))))
                print(f"    accuracy {np.mean(estimator.predict(test) == test['income'].to_numpy()):.3f}")

    game = timed("distinguishing_game_7500_train_5000_test_per_class", timings, lambda: distinguishing_game(
        train, synthetics, sizes=sizes, n_train=7500, n_test=5000, rng=rng))
    print(f"    distinguishing accuracy {game}")
    print(f"load average after: {os.getloadavg()}")
    for name, seconds in timings.items():
        print(f"{name}: {seconds:.3f}")
    print(f"seconds_evaluation_total: {sum(timings.values()):.3f}")


if __name__ == "__main__":
    main()
