"""Plausible-deniability generation on Ray's actor pool: 1 worker against 2 (issue 10's target).

Runs the ``pd_generation`` study (``privlab run``'s runner, real local Ray) on an Adult-shaped
table (``census_like``, written as a CSV with a space that codes it back) with 1 and 2 workers, each at two candidate counts N₁ < N₂. A configuration's wall time includes fixed costs
that do not scale with the workers (the driver's split and model fit, the state's trip to the
object store, starting the actors), so the streaming rate is measured as the slope
(N₂ − N₁) / (wall(N₂) − wall(N₁)), which cancels them; Ray's own start-up is outside the
configuration's wall time. That results do not depend on the workers or the batch size is
checked by ``tests/test_plausible_deniability_workloads.py``, not here.

Prints each run's wall time and the rates, then ends with

    rate_1_worker: X          candidates per second, 1 worker
    rate_2_workers: X         candidates per second, 2 workers
    speedup_2_workers: X      rate_2_workers / rate_1_worker (target ≥ 1.8)

    python benchmarks/pd_actor_pool.py --quick     # about 1.5 minutes on 2 idle cores
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from privlab.mechanisms.plausible_deniability.census_like import LEVELS, census_like  # noqa: E402
from privlab.platform.experiment.spec import load_spec  # noqa: E402
from privlab.platform.run.runner import RunOptions, run_experiment  # noqa: E402


def write_inputs(folder: Path, records: int, seed: int) -> None:
    """The Adult-shaped table as a labelled CSV and a space that codes it back."""
    data, _ = census_like(records, np.random.default_rng(seed))
    labelled = data.apply(lambda column: column.map(lambda code, name=column.name: f"{name}{code}"))
    labelled.to_csv(folder / "table.csv", index=False)
    lines = ['name = "adult-shaped"']
    for name, size in LEVELS.items():
        categories = ", ".join(f'"{name}{i}"' for i in range(size))
        lines += [f"[schema.{name}]", 'type = "categorical"', f"categories = [{categories}]",
                  f"[transformations.{name}]", f'source = "{name}"', f"[transformations.{name}.alternatives.all]",
                  'kind = "categorical"']
    (folder / "space.toml").write_text("\n".join(lines) + "\n")


def spec_text(candidates: int, batch: int) -> str:
    return textwrap.dedent(f"""
        name = "pd-actor-pool-benchmark"
        seed = 11
        workload = "pd_generation"
        [params]
        space = "space.toml"
        data = "table.csv"
        model_epsilon = 1.0
        k = 50
        gamma = 4.0
        epsilon0 = 1.0
        t = 10
        omega = "5-11"
        max_plausible = 100
        max_check_plausible = 50_000
        candidates = {candidates}
        batch = {batch}
        [budget]
        epsilon = 1e12
        delta = 0.5
        accountant = "advanced"
        delta_slack = 9.313225746154785e-10
        [tracking]
        experiment = "pd-actor-pool-benchmark"
        artifacts = false
        """)


def config_wall(folder: Path, candidates: int, batch: int, workers: int) -> tuple[float, float]:
    spec = folder / "spec.toml"
    spec.write_text(spec_text(candidates, batch))
    summary = run_experiment(load_spec(spec), RunOptions(workers=workers, progress=False,
                                                         tracking_uri=f"sqlite:///{folder / 'mlflow.db'}"))
    (entry,) = summary["configurations"]
    wall = float(next(iter(summary["timing"]["configurations"].values()))["wall_seconds"])
    return wall, float(entry["metrics"]["passed_rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer candidates (about 1.5 minutes)")
    parser.add_argument("--records", type=int, default=30_000)
    args = parser.parse_args()
    small, large, batch = (400_000, 2_400_000, 50_000) if args.quick else (1_000_000, 8_000_000, 100_000)
    print(f"load average before: {os.getloadavg()}")
    rates = {}
    with tempfile.TemporaryDirectory(prefix="pd-actor-pool-") as tmp:
        folder = Path(tmp)
        write_inputs(folder, args.records, 2017)
        for workers in (1, 2):
            (w1, p1), (w2, p2) = (config_wall(folder, n, batch, workers) for n in (small, large))
            rates[workers] = (large - small) / (w2 - w1)
            print(f"{workers} worker(s): {small:,} candidates in {w1:.1f} s, {large:,} in {w2:.1f} s "
                  f"(pass rates {p1:.4f}, {p2:.4f}); slope {rates[workers]:,.0f} candidates/s")
    print(f"load average after: {os.getloadavg()}")
    print(f"rate_1_worker: {rates[1]:.0f}")
    print(f"rate_2_workers: {rates[2]:.0f}")
    print(f"speedup_2_workers: {rates[2] / rates[1]:.2f}")


if __name__ == "__main__":
    main()
