"""Benchmark of the exact greedy CART behind the pMSE, every ratio measured in this one run.

The workload is the sensitivity trial of Snoke & Slavković, Section 5 (Table 1), n = 5000,
q = 2, with the second argument of N(·, ·) a *variance* (as in the paper's notation and
:mod:`privlab.mechanisms.pmse.synthesis`):

- real data ``X``: X₁ ~ N(2, 10), X₂ | X₁ ~ N(−2.5 + 0.5·x₁, 3);
- neighbour ``X′``: ``X`` with N(0, 25) noise added to both variables of one row chosen
  uniformly at random;
- synthetic data ``Xˢ``: θ₁ … θ₅ i.i.d. N(0, 10), then Xˢ₁ ~ N(θ₁, |θ₂|) and
  Xˢ₂ | Xˢ₁ ~ N(θ₃ + θ₄·xˢ₁, |θ₅|). θ₂ and θ₅ are variances and must be positive; taking the
  absolute value is the same as drawing them from N(0, 10) conditioned on being positive.
- configurations: max_depth ∈ {1, 2, 5, None} × cp ∈ {0.01, 0.001}; scikit-learn gets
  ``min_impurity_decrease = cp/2`` (``sklearn_pmse``).

Printed, all from this run:

1. ``single``: seconds per single-configuration pMSE, ours with ``tree="greedy"``
   (``propensity.pmse``) vs scikit-learn (``propensity.sklearn_pmse``, the same rule), per
   configuration on the same datasets, and overall. Target ≥ 10×.
2. ``trial``: seconds per full trial — ours ``pmse_neighbour_pair`` (all 8 configurations on
   ``X`` and ``X′`` from one sort and two tree growths; ``tree="rpart"``, the default, and
   ``tree="greedy"``) vs scikit-learn fitting 16 trees. Data generation is excluded.
3. ``rpart``: when ``Rscript`` with the rpart package is installed, R's rpart fits the same
   trials (16 fits per trial: 8 configurations × {X, X′}, ``rpart.control`` defaults except cp,
   maxdepth and xval = 0, each followed by ``predict`` and the pMSE;
   benchmarks/rpart_timing.R times only that loop) and the pMSE values are compared with ours.
4. ``projection``: wall time for 1,000,000 complete trials (seeded generator, data
   generation, pair fit with the default tree) measured on 2 worker processes. Target ≤ 30
   minutes.

The last two lines are ``ratio_vs_rpart: X`` (R's 16 rpart fits / our rpart trial, target ≥
20; ``n/a`` without R) and ``ratio_vs_sklearn: X`` (scikit-learn's 16 fits / our default-tree
trial, target ≥ 50).

It also prints how often ours and scikit-learn agree (to 1e-12) on the compared datasets and
the Table-1 violation rates (``|pMSE(X) − pMSE(X′)| > 1/n``) of the throughput trials.

    python benchmarks/pmse_cart.py --quick   # under a minute on 2 cores
    python benchmarks/pmse_cart.py           # more datasets and trials
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from privlab.mechanisms.pmse.propensity import pmse, pmse_neighbour_pair, sklearn_pmse

N_ROWS = 5000
CONFIGS: list[tuple[int | None, float]] = [(d, cp) for cp in (0.01, 0.001) for d in (1, 2, 5, None)]
MILLION = 1_000_000


def table1_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One Section-5 trial: ``(X, X′, Xˢ)`` as described in the module docstring."""
    noise = rng.standard_normal((4, n))
    x = np.empty((n, 2))
    x[:, 0] = 2.0 + math.sqrt(10.0) * noise[0]
    x[:, 1] = -2.5 + 0.5 * x[:, 0] + math.sqrt(3.0) * noise[1]
    theta = rng.normal(0.0, math.sqrt(10.0), 5)
    synthetic = np.empty((n, 2))
    synthetic[:, 0] = theta[0] + math.sqrt(abs(theta[1])) * noise[2]
    synthetic[:, 1] = theta[2] + theta[3] * synthetic[:, 0] + math.sqrt(abs(theta[4])) * noise[3]
    x_prime = x.copy()
    x_prime[rng.integers(n)] += rng.normal(0.0, 5.0, 2)
    return x, x_prime, synthetic


# Independent streams of the run's root seed, keyed by (purpose, index).
TRIALS, COMPARED, WARM_UP = 0, 1, 2


def trial_rng(root: int, purpose: int, index: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(root, spawn_key=(purpose, index))))


def label(config: tuple[int | None, float]) -> str:
    depth, cp = config
    return f"depth {'∞' if depth is None else depth:>2}, cp {cp:<5}"


def run_trials(root: int, first: int, count: int) -> tuple[float, np.ndarray]:
    """``count`` complete trials; returns (seconds, violations per configuration)."""
    violations = np.zeros(len(CONFIGS), np.int64)
    start = time.perf_counter()
    for index in range(first, first + count):
        x, x_prime, synthetic = table1_data(N_ROWS, trial_rng(root, TRIALS, index))
        values = pmse_neighbour_pair(x, x_prime, synthetic, CONFIGS)
        violations += np.abs(values[:, 0] - values[:, 1]) > 1.0 / N_ROWS
    return time.perf_counter() - start, violations


def worker(root: int, first: int, count: int, barrier: Any, results: Any) -> None:
    """A worker process: load the kernels, wait for the other worker, run, report."""
    run_trials(root, 3 * MILLION + first, 3)
    barrier.wait()
    started = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
    seconds, violations = run_trials(root, first, count)
    results.put((started, started + seconds, violations))


def compare_single(datasets: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> int:
    """Per configuration, ours over every dataset, then scikit-learn over the same datasets."""
    ours = np.zeros(len(CONFIGS))
    theirs = np.zeros(len(CONFIGS))
    disagreements = 0
    for k, (depth, cp) in enumerate(CONFIGS):
        start = time.perf_counter()
        values = [pmse(x, synthetic, max_depth=depth, cp=cp, tree="greedy") for x, _, synthetic in datasets]
        middle = time.perf_counter()
        references = [sklearn_pmse(x, synthetic, max_depth=depth, cp=cp) for x, _, synthetic in datasets]
        ours[k] = middle - start
        theirs[k] = time.perf_counter() - middle
        disagreements += int(np.sum(np.abs(np.subtract(values, references)) > 1e-12))
    m = len(datasets)
    print(f"single-configuration pMSE, n = {N_ROWS}, q = 2, {m} datasets (ours greedy vs scikit-learn, s/call):")
    for k, config in enumerate(CONFIGS):
        print(f"  {label(config)}  ours {ours[k] / m:.6f}  sklearn {theirs[k] / m:.6f}  ratio {theirs[k] / ours[k]:6.1f}x")
    print(
        f"single: ours {ours.sum() / (m * len(CONFIGS)):.6f} s, sklearn {theirs.sum() / (m * len(CONFIGS)):.6f} s "
        f"per single-configuration pMSE -> {theirs.sum() / ours.sum():.1f}x "
        f"(lowest configuration {np.min(theirs / ours):.1f}x; target >= 10x)"
    )
    return disagreements


def time_trials(datasets: list[tuple[np.ndarray, np.ndarray, np.ndarray]], tree: str) -> tuple[float, list]:
    """Seconds for our full trials with ``tree`` (best of two passes) and the pMSE values."""
    best = math.inf
    values: list = []
    for _ in range(2):
        start = time.perf_counter()
        values = [pmse_neighbour_pair(x, x_prime, s, CONFIGS, tree=tree) for x, x_prime, s in datasets]  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - start)
    return best, values


def compare_trials(datasets: list[tuple[np.ndarray, np.ndarray, np.ndarray]], ours_rpart: float) -> tuple[int, float]:
    """Ours (greedy) over every trial, then scikit-learn's 16 fits over the same trials."""
    ours, values = time_trials(datasets, "greedy")
    start = time.perf_counter()
    references = [
        np.array([
            [sklearn_pmse(x, synthetic, max_depth=d, cp=cp), sklearn_pmse(x_prime, synthetic, max_depth=d, cp=cp)]
            for d, cp in CONFIGS
        ])
        for x, x_prime, synthetic in datasets
    ]
    theirs = time.perf_counter() - start
    m = len(datasets)
    print(
        f"trial: ours rpart {ours_rpart / m:.6f} s, ours greedy {ours / m:.6f} s (pmse_neighbour_pair, "
        f"8 configurations x {{X, X'}}), sklearn {theirs / m:.6f} s (16 trees) per full trial -> "
        f"{theirs / ours_rpart:.1f}x rpart, {theirs / ours:.1f}x greedy (target >= 50x)"
    )
    return sum(int(np.sum(np.abs(v - r) > 1e-12)) for v, r in zip(values, references)), theirs / ours_rpart


def rpart_available() -> bool:
    if shutil.which("Rscript") is None:
        return False
    return subprocess.run(["Rscript", "-e", "library(rpart)"], capture_output=True, check=False).returncode == 0


def compare_rpart(
    datasets: list[tuple[np.ndarray, np.ndarray, np.ndarray]], ours_rpart: float, ours_values: list
) -> float | None:
    """R's rpart on the same trials (16 fits each); returns R's seconds / ours, or None without R."""
    if not rpart_available():
        print("rpart: Rscript with the rpart package not found; R's rpart not timed")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        np.concatenate([np.concatenate([a.ravel(order="F") for a in trial]) for trial in datasets]).astype(
            "<f8").tofile(directory / "trials.bin")
        (directory / "trials.csv").write_text(f"n,trials\n{N_ROWS},{len(datasets)}\n")
        (directory / "configs.csv").write_text(
            "maxdepth,cp\n" + "".join(f"{30 if d is None else d},{cp!r}\n" for d, cp in CONFIGS)
        )
        script = Path(__file__).resolve().parent / "rpart_timing.R"
        subprocess.run(["Rscript", str(script), str(directory)], check=True)
        seconds = float((directory / "seconds.txt").read_text())
        theirs = np.fromfile(directory / "pmse.bin", dtype="<f8").reshape(len(datasets), len(CONFIGS), 2)
    differ = sum(int(np.sum(np.abs(v - r) > 1e-12)) for v, r in zip(ours_values, theirs))
    m = len(datasets)
    print(
        f"rpart: R's rpart {seconds / m:.6f} s per full trial (16 fits), ours rpart {ours_rpart / m:.6f} s -> "
        f"{seconds / ours_rpart:.1f}x (target >= 20x); pMSE values differing from R's by > 1e-12: {differ} of "
        f"{m * 2 * len(CONFIGS)}"
    )
    return seconds / ours_rpart


def busy_cores(seconds: float = 1.0) -> float | None:
    """Cores kept busy by *other* processes while this one sleeps (Linux /proc/stat), or None."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    try:
        busy0, total0 = sample()
        time.sleep(seconds)
        busy1, total1 = sample()
    except OSError:
        return None
    return (busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1)


def projection(root: int, trials_per_worker: int) -> None:
    others = busy_cores()
    if others is not None and others > 0.2:
        print(f"  note: other processes kept {others:.1f} of the {os.cpu_count()} cores busy just before this run")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    workers = [
        context.Process(target=worker, args=(root, i * trials_per_worker, trials_per_worker, barrier, results))
        for i in range(2)
    ]
    for process in workers:
        process.start()
    reports = [results.get() for _ in workers]
    for process in workers:
        process.join()
    wall = max(end for _, end, _ in reports) - min(start for start, _, _ in reports)
    trials = 2 * trials_per_worker
    print(
        f"projection: {trials} complete trials (seeded generator, data, rpart pair fit) on 2 worker processes took "
        f"{wall:.2f} s wall ({2 * wall / trials * 1e3:.3f} ms per trial per worker) -> 1,000,000 trials: "
        f"{wall / trials * MILLION / 60:.1f} min (target <= 30 min)"
    )
    violations = sum(v for _, _, v in reports)
    print(f"Table-1 violation rates |pMSE(X) - pMSE(X')| > 1/n over these {trials} trials (paper: 1,000,000):")
    for config, count in zip(CONFIGS, violations):
        print(f"  {label(config)}  {count / trials:7.3%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer datasets and trials (< 1 minute)")
    parser.add_argument("--seed", type=int, default=20260523)
    args = parser.parse_args()
    compared, trials_per_worker = (8, 2_000) if args.quick else (60, 20_000)

    start = time.perf_counter()
    x, x_prime, synthetic = table1_data(N_ROWS, trial_rng(args.seed, WARM_UP, 0))
    pmse_neighbour_pair(x, x_prime, synthetic, CONFIGS)
    pmse_neighbour_pair(x, x_prime, synthetic, CONFIGS, tree="greedy")
    for depth, cp in CONFIGS:
        pmse(x, synthetic, max_depth=depth, cp=cp, tree="greedy")
        sklearn_pmse(x, synthetic, max_depth=depth, cp=cp)
    print(f"warm-up (numba kernels from cache, or compiled on first use): {time.perf_counter() - start:.2f} s")

    datasets = [table1_data(N_ROWS, trial_rng(args.seed, COMPARED, i)) for i in range(compared)]
    single_disagreements = compare_single(datasets)
    ours_rpart, rpart_values = time_trials(datasets, "rpart")
    trial_disagreements, ratio_sklearn = compare_trials(datasets, ours_rpart)
    print(
        f"agreement of tree='greedy' with scikit-learn (|diff| <= 1e-12): single {single_disagreements} of "
        f"{compared * len(CONFIGS)} differ, trials {trial_disagreements} of {compared * 2 * len(CONFIGS)} differ "
        "(default tie-breaking; only exactly tied splits can differ, see privlab.mechanisms.pmse.cart)"
    )
    ratio_rpart = compare_rpart(datasets, ours_rpart, rpart_values)
    projection(args.seed, trials_per_worker)
    print(f"ratio_vs_rpart: {'n/a (no Rscript with rpart)' if ratio_rpart is None else f'{ratio_rpart:.1f}'}")
    print(f"ratio_vs_sklearn: {ratio_sklearn:.1f}")


if __name__ == "__main__":
    main()
