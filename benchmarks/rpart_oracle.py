"""R's rpart as the oracle for ``tree="rpart"``: random datasets, rpart's fitted probabilities.

    python benchmarks/rpart_oracle.py            # writes tests/fixtures/rpart_oracle.npz
    python benchmarks/rpart_oracle.py --check    # fits ours on the fixture and counts agreement

Needs ``Rscript`` with the rpart package to write fixtures (Debian: ``apt-get install
r-base-core r-cran-rpart``); tests read the committed fixture and need no R.

**Datasets** (:func:`make_datasets`, one seeded generator). Each has ``q`` ∈ {1, …, 5}
features and a 0/1 label (1 = synthetic):

- real rows from the Section-5 model of Snoke & Slavković, extended to ``q`` columns
  (X₁ ~ N(2, 10), X₂ | X₁ ~ N(−2.5 + 0.5·x₁, 3), then X_j | X_<j ~ N(1 + 0.3·x₁ − 0.5·x_{j−1},
  2); second argument a variance); synthetic rows from the sequential linear-Gaussian
  synthesis model with every θ ~ N(0, 10) and variances |θ|, or (a quarter of datasets) from
  the real model itself, the null case where splits are weak and near-ties common;
- sizes: 40% with 8–60 rows in all, 45% with 60–300, 15% with 300–1000; 40% have unbalanced
  classes (the minority a random 5–45%);
- ties: each feature is kept continuous (rounded to float32), rounded to one decimal, to
  integers, or cut to 2–6 levels; 30% of datasets also get duplicated rows (copies of other
  rows, across labels);
- every value is float32-representable, so the fixture stores float32 losslessly and R reads
  the exact doubles from a binary file.

**Configurations** (:func:`make_configs`): the eight Table-1 ones (maxdepth 1, 2, 5, 30 ×
cp 0.01, 0.001, minsplit 20, minbucket 7) and four random ones (minsplit 2–40, minbucket
rpart's default or random, cp 0–0.1, maxdepth 1–30).

**Fixture** (compressed npz): the datasets, the configurations, and per fit the distinct
probabilities with a uint16 code per row (exact float64 values as R computed them).
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "rpart_oracle.npz"
R_SCRIPT = ROOT / "benchmarks" / "rpart_oracle.R"
SEED = 20240612
TABLE1 = [(depth, cp) for cp in (0.01, 0.001) for depth in (1, 2, 5, 30)]


@dataclass(frozen=True)
class Dataset:
    x: np.ndarray  # (n, q) float64, float32-representable
    labels: np.ndarray  # (n,) uint8


@dataclass(frozen=True)
class Config:
    minsplit: int
    minbucket: int
    cp: float
    maxdepth: int


def _real(n: int, q: int, rng: np.random.Generator) -> np.ndarray:
    x = np.empty((n, q))
    x[:, 0] = rng.normal(2.0, math.sqrt(10.0), n)
    if q > 1:
        x[:, 1] = rng.normal(-2.5 + 0.5 * x[:, 0], math.sqrt(3.0))
    for j in range(2, q):
        x[:, j] = rng.normal(1.0 + 0.3 * x[:, 0] - 0.5 * x[:, j - 1], math.sqrt(2.0))
    return x


def _synthetic(n: int, q: int, rng: np.random.Generator) -> np.ndarray:
    s = np.empty((n, q))
    for j in range(q):
        theta = rng.normal(0.0, math.sqrt(10.0), j + 2)  # intercept, j slopes, variance
        s[:, j] = rng.normal(theta[0] + s[:, :j] @ theta[1 : j + 1], math.sqrt(abs(theta[-1])))
    return s


def _with_ties(column: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    kind = rng.integers(4)
    if kind == 1:
        return np.round(column, 1)
    if kind == 2:
        return np.round(column)
    if kind == 3:
        levels = int(rng.integers(2, 7))
        edges = np.quantile(column, np.linspace(0, 1, levels + 1)[1:-1])
        return np.searchsorted(edges, column).astype(np.float64) * 1.5 - 2.0
    return column


def make_datasets(count: int, rng: np.random.Generator) -> list[Dataset]:
    datasets = []
    for _ in range(count):
        q = int(rng.integers(1, 6))
        size = rng.random()
        total = int(rng.integers(8, 61) if size < 0.4 else rng.integers(60, 301) if size < 0.85 else rng.integers(300, 1001))
        if rng.random() < 0.4:
            minority = max(1, round(total * rng.uniform(0.05, 0.45)))
            n_real, n_synth = (minority, total - minority) if rng.random() < 0.5 else (total - minority, minority)
        else:
            n_real = total // 2
            n_synth = total - n_real
        synthetic = _real(n_synth, q, rng) if rng.random() < 0.25 else _synthetic(n_synth, q, rng)
        x = np.concatenate([_real(n_real, q, rng), synthetic])
        labels = np.concatenate([np.zeros(n_real, np.uint8), np.ones(n_synth, np.uint8)])
        for j in range(q):
            x[:, j] = _with_ties(x[:, j], rng)
        if rng.random() < 0.3:
            copies = rng.integers(0, total, size=max(1, total // 5))
            x[rng.integers(0, total, size=copies.size)] = x[copies]
        x = x.astype(np.float32).astype(np.float64)
        datasets.append(Dataset(x=x, labels=labels))
    return datasets


def make_configs(rng: np.random.Generator) -> list[Config]:
    configs = [Config(20, 7, cp, depth) for depth, cp in TABLE1]
    for _ in range(4):
        minsplit = int(rng.choice([2, 3, 5, 7, 10, 20, 40]))
        minbucket = max(1, round(minsplit / 3)) if rng.random() < 0.5 else int(rng.integers(1, minsplit + 1))
        cp = float(rng.choice([0.0, 1e-4, 0.001, 0.005, 0.01, 0.03, 0.1]))
        depth = int(rng.choice([1, 2, 3, 4, 5, 8, 30]))
        configs.append(Config(minsplit, minbucket, cp, depth))
    return configs


def rpart_available() -> bool:
    """Whether ``Rscript`` runs and has the rpart package."""
    if shutil.which("Rscript") is None:
        return False
    done = subprocess.run(["Rscript", "-e", "library(rpart)"], capture_output=True, check=False)
    return done.returncode == 0


def rpart_versions() -> str:
    done = subprocess.run(
        ["Rscript", "-e", 'cat(R.version.string, "rpart", as.character(packageVersion("rpart")))'],
        capture_output=True, text=True, check=True,
    )
    return done.stdout.strip()


def run_rpart(datasets: list[Dataset], fits: list[tuple[int, Config]]) -> tuple[list[np.ndarray], np.ndarray]:
    """rpart's in-sample probability of label 1 for every ``(dataset index, config)`` fit."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        offsets, chunks, offset = [], [], 0
        for data in datasets:
            offsets.append(offset)
            chunk = np.concatenate([data.labels.astype(np.float64), data.x.ravel(order="F")])
            chunks.append(chunk)
            offset += chunk.size
        np.concatenate(chunks).astype("<f8").tofile(directory / "data.bin")
        with open(directory / "datasets.csv", "w") as out:
            out.write("id,n,q,offset\n")
            for i, (data, start) in enumerate(zip(datasets, offsets, strict=True)):
                out.write(f"{i},{data.x.shape[0]},{data.x.shape[1]},{start}\n")
        with open(directory / "configs.csv", "w") as out:
            out.write("dataset,minsplit,minbucket,cp,maxdepth\n")
            for index, config in fits:
                out.write(f"{index},{config.minsplit},{config.minbucket},{config.cp!r},{config.maxdepth}\n")
        subprocess.run(["Rscript", str(R_SCRIPT), str(directory)], check=True)
        flat = np.fromfile(directory / "probs.bin", dtype="<f8")
        nsplit = np.loadtxt(directory / "nsplit.csv", skiprows=1, dtype=np.int64, ndmin=1)
    probabilities, start = [], 0
    for index, _ in fits:
        n = datasets[index].x.shape[0]
        probabilities.append(flat[start : start + n])
        start += n
    if start != flat.size:
        raise RuntimeError(f"rpart wrote {flat.size} probabilities, expected {start}")
    return probabilities, nsplit


def generate(count: int, seed: int) -> tuple[list[Dataset], list[tuple[int, Config]]]:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    datasets = make_datasets(count, rng)
    fits = [(i, config) for i in range(count) for config in make_configs(rng)]
    return datasets, fits


def write_fixture(path: Path, count: int, seed: int) -> None:
    datasets, fits = generate(count, seed)
    probabilities, nsplit = run_rpart(datasets, fits)
    values, codes, value_offsets = [], [], [0]
    for prob in probabilities:
        unique, inverse = np.unique(prob, return_inverse=True)
        values.append(unique)
        codes.append(inverse.astype(np.uint16))
        value_offsets.append(value_offsets[-1] + unique.size)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        versions=np.array(rpart_versions()),
        seed=np.array(seed),
        n=np.array([d.x.shape[0] for d in datasets], np.int32),
        q=np.array([d.x.shape[1] for d in datasets], np.int8),
        x=np.concatenate([d.x.astype(np.float32).ravel() for d in datasets]),
        labels=np.concatenate([d.labels for d in datasets]),
        fit_dataset=np.array([i for i, _ in fits], np.int32),
        fit_minsplit=np.array([c.minsplit for _, c in fits], np.int16),
        fit_minbucket=np.array([c.minbucket for _, c in fits], np.int16),
        fit_cp=np.array([c.cp for _, c in fits], np.float64),
        fit_maxdepth=np.array([c.maxdepth for _, c in fits], np.int8),
        fit_nsplit=nsplit.astype(np.int16),
        prob_values=np.concatenate(values),
        prob_value_offsets=np.array(value_offsets, np.int64),
        prob_codes=np.concatenate(codes),
    )


def load_fixture(path: Path = FIXTURE) -> tuple[list[Dataset], list[tuple[int, Config]], list[np.ndarray], dict]:
    """Datasets, fits and rpart's probabilities from a fixture written by :func:`write_fixture`."""
    with np.load(path) as f:
        n, q = f["n"], f["q"]
        x_flat, labels_flat = f["x"].astype(np.float64), f["labels"]
        datasets, xo, lo = [], 0, 0
        for rows, cols in zip(n, q, strict=True):
            size = int(rows) * int(cols)
            datasets.append(Dataset(x=x_flat[xo : xo + size].reshape(int(rows), int(cols)),
                                    labels=labels_flat[lo : lo + int(rows)]))
            xo += size
            lo += int(rows)
        fits = [
            (int(i), Config(int(ms), int(mb), float(cp), int(d)))
            for i, ms, mb, cp, d in zip(f["fit_dataset"], f["fit_minsplit"], f["fit_minbucket"], f["fit_cp"],
                                        f["fit_maxdepth"], strict=True)
        ]
        values, offsets, codes = f["prob_values"], f["prob_value_offsets"], f["prob_codes"]
        probabilities, co = [], 0
        for k, (i, _) in enumerate(fits):
            rows = datasets[i].x.shape[0]
            probabilities.append(values[offsets[k] : offsets[k + 1]][codes[co : co + rows]])
            co += rows
        meta = {"versions": str(f["versions"]), "seed": int(f["seed"]), "nsplit": f["fit_nsplit"]}
    return datasets, fits, probabilities, meta


def compare(datasets: list[Dataset], fits: list[tuple[int, Config]], probabilities: list[np.ndarray]) -> dict:
    """Fit ours on every fit; count agreements (max |Δp| ≤ 1e-12) and list disagreements."""
    from privlab.mechanisms.pmse.cart import fit_propensity_tree

    disagreements = []
    for k, ((i, config), theirs) in enumerate(zip(fits, probabilities, strict=True)):
        data = datasets[i]
        ours = fit_propensity_tree(data.x, data.labels, max_depth=config.maxdepth, cp=config.cp, tree="rpart",
                                   minsplit=config.minsplit, minbucket=config.minbucket)
        if not np.max(np.abs(ours.propensities - theirs)) <= 1e-12:
            disagreements.append({"fit": k, "dataset": i, "config": config, "tied_nodes": ours.tied_nodes,
                                  "iscale_nodes": ours.iscale_nodes, "exact_priors": ours.exact_priors})
    return {"fits": len(fits), "agree": len(fits) - len(disagreements), "disagreements": disagreements}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=600)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=FIXTURE)
    parser.add_argument("--check", action="store_true", help="compare ours with the fixture instead of writing it")
    args = parser.parse_args()
    if not args.check:
        if not rpart_available():
            raise SystemExit("Rscript with the rpart package is needed to write fixtures (apt-get install r-cran-rpart)")
        write_fixture(args.out, args.datasets, args.seed)
        print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")
    datasets, fits, probabilities, meta = load_fixture(args.out)
    result = compare(datasets, fits, probabilities)
    print(f"oracle: {meta['versions']}; datasets {len(datasets)}; fits {result['fits']}; "
          f"agree within 1e-12: {result['agree']}")
    for item in result["disagreements"]:
        print("  disagreement:", item)


if __name__ == "__main__":
    main()
