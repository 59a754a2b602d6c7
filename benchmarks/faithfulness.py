"""Benchmark of the faithfulness criterion (maximum matching via class-level maximum flow).

Times one full research-mode ``release`` (validation, class graph, Dinic maximum flow, Laplace
release and ledger record) of the paper's cost rule (Hod & Canetti 2024, Section 4.5.5) with
the 35-39 mother_age binning, so the "37 inside a bin" exception is active, on:

1. ``synthetic``: 166,000 vs 166,000 births-like records drawn independently from one model
   (skewed marginals, birth weight tied to gestation): what a good synthesizer produces;
2. ``uniform``: 166,000 vs 166,000 records uniform over the whole joint domain (230,400
   cells): the most distinct classes, the hardest case for the class graph;
3. ``nvss-perturbed``: the NVSS 2019 160K sample vs a copy of it in which 15% of the records
   moved one bin in one fuzzy column and 3% got a new birth month, rows shuffled;
4. ``nvss-vs-200k``: the NVSS 160K sample vs the first 160,000 rows of the 200K sample (two
   independent real samples).

Cases 3-4 run only if ``../shared/data/nvss`` (or ``--nvss DIR``) holds the files. Printed
per case: seconds for the whole release (median and min of ``--repeats`` runs) and, from the
last run, the split between building the class graph and the flow, with the number of
classes, edges and the exact error ``1 − β_max``. Target: the whole release well under 10 s.

    python benchmarks/faithfulness.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import criterion_from_spec
from privlab.mechanisms.acceptance.faithfulness import FaithfulnessCriterion
from privlab.mechanisms.tabular.domain import ColumnDomain, Domain
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

N_SYNTHETIC = 166_000
NVSS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "nvss"

# Section 4.7 binnings: (labels, right-open edges applied with searchsorted(side="right")).
AGE = (("<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<"),
       (18, 20, 25, 30, 35, 40, 43, 45))
PARITY = (("1", "2-3", "4-6", "7-10", "10<"), (2, 4, 7, 11))
GESTATION = (("<29", "29-31", "32-33", "34-36", "37-41", "41<"), (29, 32, 34, 37, 42))
WEIGHT = (("<1500", *(f"{w}-{w + 99}" for w in range(1500, 4500, 100)), "4499<"), tuple(range(1500, 4600, 100)))
FUZZY = ("mother_age", "gestation_week", "birth_weight")

SPEC = {
    "kind": "faithfulness",
    "name": "faithfulness",
    "threshold": 0.05,
    "epsilon": 0.01,
    "exact": ["date_of_birth", "parity", "is_female"],
    "within_one_bin": list(FUZZY),
    "max_fuzzy_columns": 1,
    "exact_if_bin_contains": {"mother_age": [37]},
}


def births_domain() -> Domain:
    def ordered(name: str, labels: tuple[str, ...]) -> ColumnDomain:
        return ColumnDomain(name=name, labels=labels, values=tuple(float(i) for i in range(len(labels))))

    return Domain.from_columns([
        ordered("mother_age", AGE[0]),
        ordered("parity", PARITY[0]),
        ordered("gestation_week", GESTATION[0]),
        ColumnDomain(name="is_female", labels=("M", "F")),
        ordered("birth_weight", WEIGHT[0]),
        ColumnDomain(name="date_of_birth", labels=tuple(str(m) for m in range(1, 13))),
    ])


def synthetic_births(n: int, rng: np.random.Generator) -> pd.DataFrame:
    gestation = rng.choice(6, n, p=[0.01, 0.01, 0.02, 0.06, 0.85, 0.05])
    weight = np.clip(np.round(rng.normal(18 + 3 * (gestation - 4), 5, n)), 0, len(WEIGHT[0]) - 1)
    age_p = np.array([0.02, 0.05, 0.15, 0.25, 0.25, 0.17, 0.07, 0.03, 0.01])
    return pd.DataFrame({
        "mother_age": rng.choice(9, n, p=age_p),
        "parity": rng.choice(5, n, p=[0.4, 0.35, 0.17, 0.06, 0.02]),
        "gestation_week": gestation,
        "is_female": rng.integers(0, 2, n),
        "birth_weight": weight.astype(np.int64),
        "date_of_birth": rng.integers(0, 12, n),
    })


def uniform_births(domain: Domain, n: int, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame({c.name: rng.integers(0, c.size, n) for c in domain})


def bin_nvss(raw: pd.DataFrame) -> pd.DataFrame:
    def cut(values: pd.Series, edges: tuple[int, ...]) -> np.ndarray:
        return np.searchsorted(np.asarray(edges), values.to_numpy(), side="right").astype(np.int64)

    return pd.DataFrame({
        "mother_age": cut(raw["mother_age"], AGE[1]),
        "parity": cut(raw["parity"], PARITY[1]),
        "gestation_week": cut(raw["gestation_week"], GESTATION[1]),
        "is_female": raw["is_female"].astype(bool).to_numpy().astype(np.int64),
        "birth_weight": cut(raw["birth_weight"], WEIGHT[1]),
        "date_of_birth": pd.to_datetime(raw["date_of_birth"]).dt.month.to_numpy().astype(np.int64) - 1,
    })


def perturbed(data: pd.DataFrame, domain: Domain, rng: np.random.Generator) -> pd.DataFrame:
    codes = {c: data[c].to_numpy().copy() for c in data.columns}
    moved = np.flatnonzero(rng.random(len(data)) < 0.15)
    column = rng.integers(0, len(FUZZY), moved.size)
    step = rng.choice([-1, 1], moved.size)
    for j, name in enumerate(FUZZY):
        rows = moved[column == j]
        codes[name][rows] = np.clip(codes[name][rows] + step[column == j], 0, domain[name].size - 1)
    months = np.flatnonzero(rng.random(len(data)) < 0.03)
    codes["date_of_birth"][months] = rng.integers(0, 12, months.size)
    return pd.DataFrame(codes).iloc[rng.permutation(len(data))].reset_index(drop=True)


def bench(label: str, criterion: FaithfulnessCriterion, transformed: pd.DataFrame, candidate: pd.DataFrame,
          domain: Domain, repeats: int, rng: np.random.Generator) -> None:
    seconds = []
    for _ in range(repeats):
        source, ledger = SeededSource(rng), Ledger(epsilon_cap=None)
        start = time.perf_counter()
        result = criterion.release(transformed, candidate, domain=domain, source=source, ledger=ledger)
        seconds.append(time.perf_counter() - start)
    start = time.perf_counter()
    graph = criterion.class_graph(transformed, candidate, domain=domain)
    built = time.perf_counter()
    matched = graph.max_matching()
    flowed = time.perf_counter()
    print(
        f"{label:15s} n={len(candidate):7,d}  release {statistics.median(seconds):6.3f} s (min {min(seconds):.3f})  "
        f"graph {built - start:.3f} s  flow {flowed - built:.3f} s  "
        f"classes S {graph.n_s_classes:,} R {graph.n_r_classes:,}  edges {graph.n_edges:,}  "
        f"error {1 - matched / graph.n:.4f}  (dp {result.dp_value:.4f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--nvss", type=Path, default=NVSS_DIR)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    domain = births_domain()
    criterion = criterion_from_spec(SPEC, where="benchmark")
    assert isinstance(criterion, FaithfulnessCriterion)

    bench("synthetic", criterion, synthetic_births(N_SYNTHETIC, rng), synthetic_births(N_SYNTHETIC, rng),
          domain, args.repeats, rng)
    bench("uniform", criterion, uniform_births(domain, N_SYNTHETIC, rng), uniform_births(domain, N_SYNTHETIC, rng),
          domain, args.repeats, rng)

    sample_160k = args.nvss / "birth_2019_nber_us_SINGLETON_SAMPLE160K.csv.gz"
    sample_200k = args.nvss / "birth_2019_nber_us_SINGLETON_SAMPLE200K.csv.gz"
    if not sample_160k.exists():
        print(f"nvss: {sample_160k} not found; skipped")
        return
    nvss = bin_nvss(pd.read_csv(sample_160k))
    bench("nvss-perturbed", criterion, nvss, perturbed(nvss, domain, rng), domain, args.repeats, rng)
    if sample_200k.exists():
        other = bin_nvss(pd.read_csv(sample_200k).iloc[: len(nvss)])
        bench("nvss-vs-200k", criterion, nvss, other, domain, args.repeats, rng)


if __name__ == "__main__":
    main()
