"""PrivBayes vs MST vs AIM on the ACS excerpt and the births NVSS 160K sample.

For each data set (its release space's first transformation), each ε of ``--epsilons`` and each
repetition, every synthesizer is fitted at ε on the transformed public data and samples as many
records as the data has (rejection-sampled against the space's record constraints, as the
release flow does). Each run reports:

* ``workload_error``: the all-3-way marginal error of the AIM paper, the mean over every 3-way
  marginal r of ‖M_r(D) − M_r(D̂)‖₁ / n (normalised counts, 0 to 2);
* ``pmse``: the pMSE of the synthetic records against the data (Snoke & Slavković; rpart CART
  on the codes, cp = 0.01), a utility score of any synthesizer's output;
* the acceptance criteria of the data set's flow settings (experiments/<data>/flow.toml):
  each one's decision, released with its own ε on a separate ledger (research mode), and
  ``accepted`` (all passed).

MST and AIM are (ε, δ = 1e-9)-DP through the zcdp accountant (the δ of the AIM paper's
experiments); PrivBayes is pure ε-DP. Every random stream derives from one root seed:
``SeedSequence(seed, spawn_key=(data, synthesizer, ε index, repetition))``. Rows are appended to
``results/<run id>.csv`` as they finish (``--resume RUN_ID`` skips the rows already there);
``report.py`` draws the page from the CSVs.

    nice -n 5 python experiments/synthesizers/study.py --data acs --repetitions 10
    nice -n 5 python experiments/synthesizers/study.py --data births --synthesizers privbayes mst
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import itertools
import math
import os
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

from privlab.mechanisms.pmse.propensity import pmse
from privlab.mechanisms.release.flow import load_settings, resolve_transformation
from privlab.mechanisms.release.workloads import _cleaned
from privlab.mechanisms.synthesizers.base import synthesizer_from_spec
from privlab.mechanisms.tabular.constraints import rejection_sample
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHARED = ROOT.parent / "shared" / "data"
DATA = {
    "acs": (ROOT / "experiments" / "acs", SHARED / "nist_acs_excerpts" / "national" / "national2019.csv"),
    "births": (ROOT / "experiments" / "births", SHARED / "nvss" / "birth_2019_nber_us_SINGLETON_SAMPLE160K.csv.gz"),
}
SYNTHESIZERS = {
    "privbayes": {"epsilon_split": 0.3, "degree": 2},
    "mst": {"iters": 1000},
    "aim": {"max_model_size": 80.0, "max_iters": 300},
}
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-9
SEED = 20261127
COLUMNS = ["run_id", "data", "synthesizer", "epsilon", "repetition", "n", "seconds", "workload_error", "pmse",
           "accepted", "criteria_passed", "criteria", "detail"]


def load(name: str) -> tuple[pd.DataFrame, object, object, object]:
    folder, data = DATA[name]
    space = load_release_space(folder / "space.toml")
    transformation = resolve_transformation(space, _first_transformation(folder))
    frame = transformation.apply(_cleaned(str(folder / "space.toml"), str(data)), source=f"{name} data")
    return frame, transformation, space, load_settings(folder / "flow.toml")


def _first_transformation(folder: Path) -> str:
    """The first transformation of the data set's grid (experiments/<data>/grid.toml)."""
    grid = tomllib.loads((folder / "grid.toml").read_text())
    return grid["study"][0]["grid"]["transformation"][0]


def workload_error(real: np.ndarray, synthetic: np.ndarray, sizes: list[int]) -> float:
    """Mean over all 3-way marginals of the ℓ1 distance of the normalised count vectors."""
    errors = []
    for cols in itertools.combinations(range(len(sizes)), 3):
        cells = math.prod(sizes[c] for c in cols)

        def counts(codes: np.ndarray) -> np.ndarray:
            index = np.zeros(codes.shape[0], dtype=np.int64)
            for c in cols:
                index = index * sizes[c] + codes[:, c]
            return np.bincount(index, minlength=cells) / codes.shape[0]

        errors.append(float(np.abs(counts(real) - counts(synthetic)).sum()))
    return float(np.mean(errors))


def run_one(name: str, frame: pd.DataFrame, transformation: object, space: object, settings: object, *,
            synthesizer: str, epsilon: float, repetition: int, seed: np.random.SeedSequence) -> dict[str, object]:
    domain = transformation.domain  # type: ignore[attr-defined]
    fit_seed, sample_seed, criteria_seed = seed.spawn(3)
    zcdp = synthesizer in ("mst", "aim")
    ledger = (Ledger(epsilon_cap=epsilon, delta_cap=DELTA, accountant="zcdp", delta_slack=DELTA) if zcdp
              else Ledger(epsilon_cap=epsilon))
    began = time.perf_counter()
    synth = synthesizer_from_spec(synthesizer, SYNTHESIZERS[synthesizer], where="study").fit(
        frame, domain=domain, epsilon=epsilon, ledger=ledger, source=SeededSource.from_seed_sequence(fit_seed))
    rng = np.random.default_rng(sample_seed)
    constraints = space.synthetic_filter(transformation)  # type: ignore[attr-defined]
    candidate = rejection_sample(lambda k: synth.sample(k, rng=rng), len(frame), constraints,
                                 max_rounds=settings.max_rounds)  # type: ignore[attr-defined]
    seconds = time.perf_counter() - began
    real = frame[list(domain.names)].to_numpy(dtype=np.int64)
    fake = candidate[list(domain.names)].to_numpy(dtype=np.int64)
    error = workload_error(real, fake, list(domain.sizes))
    score = pmse(real.astype(np.float64), fake.astype(np.float64), max_depth=None, cp=0.01)
    criteria_ledger = Ledger(epsilon_cap=None)
    source = SeededSource.from_seed_sequence(criteria_seed)
    results, fits = [], {}
    for criterion in settings.criteria:  # type: ignore[attr-defined]
        extra = {}
        provided, needed = criterion.shared_fit_provided(), criterion.shared_fit_needed()
        if provided is not None:
            fits[provided] = extra["fit"] = criterion.fit_shared(frame, domain=domain, source=source,
                                                                 ledger=criteria_ledger)
        elif needed is not None:
            extra["fit"] = fits[needed]
        results.append(criterion.release(frame, candidate, domain=domain, source=source, ledger=criteria_ledger,
                                         **extra))
    extra_info = ""
    if synthesizer == "aim":
        extra_info = f"rounds={len(synth.selected_)}"
    if synthesizer == "mst":
        extra_info = "tree=" + "|".join("+".join(e) for e in synth.tree_)
    return {"data": name, "synthesizer": synthesizer, "epsilon": epsilon, "repetition": repetition,
            "n": len(frame), "seconds": round(seconds, 2), "workload_error": error, "pmse": score,
            "accepted": all(r.passed for r in results), "criteria_passed": sum(r.passed for r in results),
            "criteria": ";".join(f"{r.name}={int(r.passed)}" for r in results), "detail": extra_info}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(DATA), action="append")
    parser.add_argument("--synthesizers", nargs="+", choices=sorted(SYNTHESIZERS), default=list(SYNTHESIZERS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--first-repetition", type=int, default=0,
                        help="start at this repetition (seeds are per repetition, so a second process "
                             "can run the last ones into a run of its own)")
    parser.add_argument("--resume", metavar="RUN_ID")
    args = parser.parse_args(argv)
    datasets = args.data or ["acs", "births"]
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    run_id = args.resume or (datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S") + "-"
                             + hashlib.sha256(repr(vars(args)).encode()).hexdigest()[:6])
    path = results / f"{run_id}.csv"
    done = set()
    if path.exists():
        done = {(r["data"], r["synthesizer"], float(r["epsilon"]), int(r["repetition"]))
                for r in csv.DictReader(path.open())}
    print(f"run id {run_id}; results in {path.relative_to(ROOT)}; load {os.getloadavg()[0]:.2f}", flush=True)
    for data_index, name in enumerate(datasets):
        frame, transformation, space, settings = load(name)
        print(f"{name}: {len(frame)} records x {len(transformation.domain)} columns", flush=True)
        # Repetitions outermost: a study cut short still covers every (synthesizer, ε).
        for repetition in range(args.first_repetition, args.repetitions):
            for e_index, epsilon in enumerate(args.epsilons):
                for synthesizer in args.synthesizers:
                    if (name, synthesizer, epsilon, repetition) in done:
                        continue
                    seed = np.random.SeedSequence(SEED, spawn_key=(list(DATA).index(name),
                                                                   list(SYNTHESIZERS).index(synthesizer),
                                                                   EPSILONS.index(epsilon) if epsilon in EPSILONS
                                                                   else 100 + e_index, repetition))
                    row = {"run_id": run_id, **run_one(name, frame, transformation, space, settings,
                                                       synthesizer=synthesizer, epsilon=epsilon,
                                                       repetition=repetition, seed=seed)}
                    new = not path.exists()
                    with path.open("a", newline="") as handle:
                        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
                        if new:
                            writer.writeheader()
                        writer.writerow(row)
                    print(f"{name} {synthesizer} eps={epsilon} rep={repetition}: {row['seconds']} s, "
                          f"error {row['workload_error']:.4f}, pMSE {row['pmse']:.5f}, accepted {row['accepted']}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
