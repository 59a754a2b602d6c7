"""One repetition of the paper's Section 6 evaluation: fit, generate, test, then measure.

:func:`evaluate` splits the table (D_T, D_P, D_S, test), fits the DP model on D_T and D_P
(charging the given ledger), runs Mechanism 1 on ``candidates`` candidates and keeps those
that pass (the *synthetics*), fits the *marginals* baseline, and measures, against held-out
reals, the parts named in ``parts``:

* ``"tvd"`` (Figures 3–4): mean total variation distance to the test set over single
  attributes and over pairs, for other reals (a sample of D_S of the synthetics' size),
  marginals and synthetics;
* ``"classifiers"`` (Table 3): Tree, RF, Ada, LR and SVM trained on reals (D_S), marginals and
  synthetics to predict ``target``, accuracy on the test set and agreement with the reals'
  classifier;
* ``"dp_baselines"`` (Table 4): Chaudhuri et al.'s output- and objective-perturbation LR and
  (Huber) SVM trained on the reals at ``baseline_epsilon``, λ chosen (optimistically, as the
  paper does) to maximise the non-private fit's accuracy;
* ``"distinguishing"`` (Table 5): RF and Tree telling reals from synthetics and from marginals;
* ``"model_accuracy"`` (Figures 1–2): per attribute, the most likely value given the other
  attributes under the model, against the DP marginals' mode and random guessing (and a
  random forest trained on D_T when ``forest_accuracy`` is set: 11 forests, slow).

Privacy:
    The synthetics' ledger (the given one) gets the model's steps and Theorem 1 over every
    candidate (:func:`.generation_params.run_plan`). The baselines are separate DP releases
    compared at equal ε, each charged to a ledger of its own (so the synthetics' statement is
    not inflated by them): the marginals (m Laplace count releases, sensitivity 2 each under
    replace-one, sequential composition to ``model_epsilon``) and each DP classifier
    (:mod:`.dp_erm`). Everything else is evaluation on public research data.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 6; Chaudhuri, Monteleoni & Sarwate
    (JMLR 2011).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.dataset import CodedTable
from privlab.mechanisms.plausible_deniability.distinguishing_game import distinguishing_game
from privlab.mechanisms.plausible_deniability.dp_erm import (
    DPLinearClassifier, DPLinearClassifierParams, nonprivate_erm_accuracies)
from privlab.mechanisms.plausible_deniability.evaluation_classifiers import CLASSIFIER_KINDS, compare_classifiers
from privlab.mechanisms.plausible_deniability.evaluation_model_accuracy import (
    generative_model_accuracy, marginal_accuracy, random_forest_accuracy, random_guess_accuracy)
from privlab.mechanisms.plausible_deniability.evaluation_statistics import attribute_tvd, pairwise_tvd
from privlab.mechanisms.plausible_deniability.generation_params import GenerationParams, fit_split_model
from privlab.mechanisms.plausible_deniability.parameters import conditional_tables
from privlab.mechanisms.plausible_deniability.privacy_tests import generate_candidates, record_generation
from privlab.mechanisms.plausible_deniability.structure import Bucketing
from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

__all__ = ["PARTS", "evaluate", "metric_names", "marginals_baseline"]

PARTS = ("tvd", "classifiers", "dp_baselines", "distinguishing", "model_accuracy")
TABLES = ("reals", "marginals", "synthetics")
REGULARIZATIONS = (1e-3, 1e-4, 1e-5, 1e-6)


def metric_names(parts: Sequence[str], attributes: Sequence[str]) -> list[str]:
    """Every metric one repetition returns for ``parts`` (all values, none rates)."""
    names = ["pass_rate", "released", "records_structure", "records_parameters", "records_seeds", "records_test",
             "timing_model_fit_seconds", "timing_synthesis_seconds_per_1000"]
    if "tvd" in parts:
        names += [f"tvd_{kind}_{table}" for kind in ("single", "pairs") for table in TABLES]
    if "classifiers" in parts:
        names += [f"accuracy_{k.lower()}_{table}" for k in CLASSIFIER_KINDS for table in TABLES]
        names += [f"agreement_{k.lower()}_{table}" for k in CLASSIFIER_KINDS for table in TABLES[1:]]
    if "dp_baselines" in parts:
        names += [f"accuracy_{loss}_{how}" for loss in ("lr", "svm") for how in ("nonprivate", "output", "objective")]
    if "distinguishing" in parts:
        names += [f"distinguish_{k}_{table}" for k in ("rf", "tree") for table in TABLES[1:]]
    if "model_accuracy" in parts:
        names += [f"model_accuracy_{source}_{name}" for source in ("model", "marginals", "random")
                  for name in attributes]
        names += ["model_accuracy_model_mean", "model_accuracy_marginals_mean"]
    return names


def check_parts(parts: Sequence[str]) -> None:
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts or len(set(parts)) != len(parts):
        raise SpecError(f"parts ({list(parts)!r}) must be distinct names among {list(PARTS)}")


def marginals_baseline(codes: np.ndarray, domain: Domain, *, epsilon: float, source: SeededSource,
                       ledger: Ledger) -> tuple[np.ndarray, ...]:
    """The paper's privacy-preserving marginals: each attribute's noisy count table on D_P.

    Privacy:
        m Laplace releases of a count vector (sensitivity 2 under replace-one: a replaced
        record leaves one cell and enters another), ε/m each (sequential composition to ε),
        posterior mean of Dirichlet(1) on the clipped counts (post-processing).
    """
    m = len(domain)
    return conditional_tables(codes, sizes=domain.sizes, parents=[()] * m, bucketing=Bucketing.build(domain),
                              epsilons=split_epsilon(epsilon, [1.0] * m), alpha=1.0, estimator="posterior_mean",
                              source=source, ledger=ledger, scope="marginals", names=domain.names)


def _sample_independent(tables: Sequence[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    return np.column_stack([rng.choice(len(t[0]), size=n, p=t[0]) for t in tables]).astype(CODE_DTYPE)


def _at_most(codes: np.ndarray, limit: int | None, rng: np.random.Generator) -> np.ndarray:
    """A uniform sample of ``limit`` rows (all of them when there are fewer, or no limit)."""
    if limit is None or len(codes) <= limit:
        return codes
    return codes[np.sort(rng.choice(len(codes), size=limit, replace=False))]


def evaluate(params: GenerationParams, table: CodedTable, *, parts: Sequence[str], target: str,
             baseline_epsilon: float, forest_accuracy: bool, rng: np.random.Generator,
             ledger: Ledger, evaluation_records: int | None = None) -> dict[str, float]:
    """One repetition (module docstring); returns the metrics of :func:`metric_names`.

    ``evaluation_records`` caps the tables the classifiers, the DP baselines, the distinguishing
    game and the model-accuracy measures use (uniform samples; the paper trains on "at least
    100,000 records"); the TVDs always use every record.

    Raises:
        SchemaError: ``target`` is not a two-category attribute.
        SpecError: fewer than 20 synthetics passed (nothing meaningful to evaluate).
    """
    check_parts(parts)
    domain = table.domain
    if target not in domain.names or domain[target].size != 2:
        raise SchemaError(f"target ({target!r}) must be a two-category attribute of {list(domain.names)}")
    sizes, names = domain.sizes, domain.names
    target_index = names.index(target)
    began = time.perf_counter()
    split, model, _ = fit_split_model(params, table, rng, ledger=ledger)
    fitted = time.perf_counter()
    results = generate_candidates(model, split.seeds, synthesis=params.synthesis(), test=params.test(),
                                  n=params.candidates, source=SeededSource(rng), batch_size=params.batch)
    synthesized = time.perf_counter()
    if params.test().epsilon0 is not None:
        record_generation(ledger, params.test(), t=params.t, invocations=params.candidates)
    synthetics = results.candidates[results.passed]
    if len(synthetics) < 20:
        raise SpecError(f"only {len(synthetics)} of {params.candidates} candidates passed; raise candidates or "
                        "lower k to evaluate")
    seeds = split.seeds.to_numpy(dtype=CODE_DTYPE)
    test = split.test.to_numpy(dtype=CODE_DTYPE)
    n = len(synthetics)
    reals = seeds[rng.choice(len(seeds), size=min(n, len(seeds)), replace=False)]
    marginal_tables = marginals_baseline(split.parameters.to_numpy(dtype=CODE_DTYPE), domain,
                                         epsilon=params.model_epsilon, source=SeededSource(rng),
                                         ledger=Ledger(epsilon_cap=None))
    marginals = _sample_independent(marginal_tables, n, rng)
    tables = {"reals": reals, "marginals": marginals, "synthetics": synthetics}
    out: dict[str, float] = {"pass_rate": results.pass_rate, "released": float(n),
                             **{f"records_{part}": float(size) for part, size in split.sizes.items()},
                             "timing_model_fit_seconds": fitted - began,
                             "timing_synthesis_seconds_per_1000": 1000 * (synthesized - fitted) / params.candidates}
    if "tvd" in parts:
        for name, codes in tables.items():
            out[f"tvd_single_{name}"] = float(np.mean(attribute_tvd(test, codes, sizes)))
            out[f"tvd_pairs_{name}"] = float(np.mean(pairwise_tvd(test, codes, sizes).tvd))
    seeds, test = _at_most(seeds, evaluation_records, rng), _at_most(test, evaluation_records, rng)
    synthetics_sample = _at_most(synthetics, evaluation_records, rng)
    marginals_sample = _at_most(marginals, evaluation_records, rng)
    if "classifiers" in parts:
        frame = compare_classifiers(seeds, {"marginals": marginals_sample, "synthetics": synthetics_sample}, test,
                                    sizes=sizes,
                                    target=target_index, rng=rng)
        for row in frame.itertuples():
            out[f"accuracy_{row.classifier.lower()}_{row.training}"] = float(row.accuracy)
            if row.training != "reals":
                out[f"agreement_{row.classifier.lower()}_{row.training}"] = float(row.agreement)
    if "dp_baselines" in parts:
        out |= _dp_baselines(seeds, test, table, target, target_index, baseline_epsilon, rng)
    if "distinguishing" in parts:
        held_out = np.vstack([test, seeds])  # reals not used to fit the model
        samples = {"marginals": marginals_sample, "synthetics": synthetics_sample}
        available = min(len(synthetics_sample), len(held_out))
        n_train = available // 2
        n_test = available - n_train
        for name in ("marginals", "synthetics"):
            game = distinguishing_game(held_out, samples[name], sizes=sizes, n_train=n_train, n_test=n_test, rng=rng)
            out[f"distinguish_rf_{name}"], out[f"distinguish_tree_{name}"] = game["RF"], game["Tree"]
    if "model_accuracy" in parts:
        model_acc = generative_model_accuracy(model, test)
        marginal_acc = marginal_accuracy(test, sizes=sizes, marginals=tuple(t[0] for t in marginal_tables))
        random_acc = random_guess_accuracy(sizes)
        for i, name in enumerate(names):
            out[f"model_accuracy_model_{name}"] = float(model_acc[i])
            out[f"model_accuracy_marginals_{name}"] = float(marginal_acc[i])
            out[f"model_accuracy_random_{name}"] = float(random_acc[i])
        out["model_accuracy_model_mean"] = float(np.mean(model_acc))
        out["model_accuracy_marginals_mean"] = float(np.mean(marginal_acc))
        if forest_accuracy:
            forest = random_forest_accuracy(_at_most(split.structure.to_numpy(dtype=CODE_DTYPE), evaluation_records, rng),
                                            test, sizes=sizes, rng=rng)
            for i, name in enumerate(names):
                out[f"model_accuracy_forest_{name}"] = float(forest[i])
    return out


def _dp_baselines(train: np.ndarray, test: np.ndarray, table: CodedTable, target: str, target_index: int,
                  epsilon: float, rng: np.random.Generator) -> dict[str, float]:
    out: dict[str, float] = {}
    domain = table.domain
    train_frame = pd.DataFrame(train, columns=list(domain.names))
    test_frame = pd.DataFrame(test, columns=list(domain.names))
    for loss, label in (("logistic", "lr"), ("huber", "svm")):
        accuracies = nonprivate_erm_accuracies(train, test, sizes=domain.sizes, target=target_index, loss=loss,
                                               regularizations=REGULARIZATIONS)
        best = max(accuracies, key=lambda lam: (accuracies[lam], lam))
        out[f"accuracy_{label}_nonprivate"] = float(accuracies[best])
        for how in ("output", "objective"):
            classifier = DPLinearClassifier(DPLinearClassifierParams(
                epsilon=epsilon, regularization=best, loss=loss, perturbation=how))
            classifier.fit(train_frame, domain=domain, target=target, ledger=Ledger(epsilon_cap=None),
                           source=SeededSource(rng))
            predictions = classifier.predict(test_frame)
            out[f"accuracy_{label}_{how}"] = float(np.mean(predictions == test[:, target_index]))
    if not all(math.isfinite(v) for v in out.values()):
        raise SpecError("a DP baseline's accuracy is not finite")
    return out
