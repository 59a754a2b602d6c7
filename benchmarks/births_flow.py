"""Benchmark of one flow of the births release scheme, and of the grid search on Ray.

1. ``seconds_per_flow``: wall seconds of one full flow (transform, PrivBayes fit, sampling with
   constraint rejection, face-privacy projection, the paper's eight DP criteria from
   experiments/births/flow.toml, faithfulness included) on the NVSS 160K sample, in research
   mode, in this process pinned to one core with single-threaded BLAS. Configurations are a
   seeded sample of experiments/births/grid.toml (both studies); each gets one untimed warm-up
   flow (reported: it also pays the per-domain criteria check and first-call costs) and then
   ``--repeats`` timed flows. Printed: the median per step over all timed flows, the median per
   configuration, and the median of all timed flows (the last line).
2. Two Ray workers vs one on a slice of the same grid through the platform (``run_experiment``:
   same configurations, same attempts, one MLflow run per attempt): execution-phase seconds of
   each (Ray start-up reported apart), the speed-up, and a check that both give identical
   results (the run summaries' configurations).

The machine is shared: the load average is printed before and after, and every ratio compares
numbers measured in this one run.

    python benchmarks/births_flow.py --quick    # under two minutes on 2 cores
    python benchmarks/births_flow.py            # more configurations and repeats
"""

from __future__ import annotations

import os

# One thread per process for BLAS/OpenMP: part 1 measures one core, Ray workers inherit this.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from privlab.mechanisms.release.flow import FlowConfiguration, run_flow  # noqa: E402
from privlab.mechanisms.release.workloads import ReleaseFlowParams, flow_inputs  # noqa: E402
from privlab.platform.ledger import Ledger  # noqa: E402
from privlab.platform.randomness import SeededSource  # noqa: E402
from privlab.platform.registry import build_params  # noqa: E402
from privlab.platform.runner import RunOptions, run_experiment  # noqa: E402
from privlab.platform.spec import Configuration, load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "experiments" / "births" / "grid.toml"
STUDIES = ("privbayes_theta", "privbayes_degree")


def grid_slice(points: int, repetitions: int) -> list[str]:
    """``--set`` overrides: ``points`` seeded grid points per study, ``repetitions`` attempts each."""
    return [f"study.{s}.{key}={value}" for s in STUDIES
            for key, value in (("grid_points", points), ("repetitions", repetitions))]


def load(params: ReleaseFlowParams) -> pd.DataFrame:
    space, _, _ = flow_inputs(vars(params))
    path = Path(params.data)
    return space.clean_raw(pd.read_csv(path), source=path.name)


def flow_timings(
    configs: Sequence[Configuration], repeats: int
) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Per-step seconds of every timed flow, the total of each timed flow, and each warm-up flow."""
    steps: dict[str, list[float]] = {}
    totals: list[float] = []
    warmups: list[float] = []
    data: dict[str, pd.DataFrame] = {}
    for index, config in enumerate(configs):
        params = build_params(ReleaseFlowParams, config.params, where=config.id)
        space, settings, _ = flow_inputs(config.params)
        frame = data.setdefault(params.data, load(params))
        configuration: FlowConfiguration = params.configuration()
        own: list[float] = []
        for rep in range(repeats + 1):
            source = SeededSource(np.random.default_rng([20240101, index, rep]))
            began = time.perf_counter()
            outcome = run_flow(frame, space=space, configuration=configuration, settings=settings, source=source,
                               ledger=Ledger(epsilon_cap=settings.epsilon_flow))
            seconds = time.perf_counter() - began
            if rep == 0:
                warmups.append(seconds)
                continue
            own.append(seconds)
            for step, value in outcome.seconds.items():
                steps.setdefault(step, []).append(value)
        totals.extend(own)
        hyper = ", ".join(f"{k}={v}" for k, v in configuration.synthesizer_params)
        print(f"  {config.id:<20} {configuration.transformation:<56} {hyper}, min_count={configuration.min_count}"
              f"\n  {'':<20} warm-up {warmups[-1]:6.3f} s   median of {repeats} {statistics.median(own):6.3f} s"
              f"   (accepted: {'yes' if outcome.accepted else 'no'})", flush=True)
    return steps, totals, warmups


def platform_run(overrides: list[str], uri: str, workers: int) -> dict:
    spec = load_spec(GRID, overrides)
    return run_experiment(spec, RunOptions(workers=workers, tracking_uri=uri, progress=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer configurations and repeats (under two minutes)")
    args = parser.parse_args()
    flow_points, repeats = (2, 2) if args.quick else (4, 4)
    ray_points, ray_repetitions = (2, 2) if args.quick else (4, 3)

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    spec = load_spec(GRID, grid_slice(flow_points, 1))
    configs = list(spec.configurations)

    # --- 1. one flow, one core --------------------------------------------------------------------------------
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})
    try:
        print(f"\n1. one flow on the NVSS 160K sample, one core: {len(configs)} configurations of {GRID.name}, "
              f"1 warm-up + {repeats} timed flows each", flush=True)
        steps, totals, warmups = flow_timings(configs, repeats)
    finally:
        os.sched_setaffinity(0, affinity)  # Ray workers must not inherit the pin
    print(f"\n  median seconds per step over {len(totals)} timed flows:")
    for step, values in steps.items():
        print(f"    {step:<36} {statistics.median(values):7.4f}")
    print(f"    {'sum of step medians':<36} {sum(statistics.median(v) for v in steps.values()):7.4f}")
    print(f"  warm-up flows (per-domain criteria check, first calls): median {statistics.median(warmups):.3f} s")
    seconds_per_flow = statistics.median(totals)

    # --- 2. the grid through the platform: two Ray workers vs one ----------------------------------------------
    overrides = grid_slice(ray_points, ray_repetitions)
    flows = 2 * ray_points * ray_repetitions
    print(f"\n2. {GRID.name} on Ray: {2 * ray_points} configurations x {ray_repetitions} attempts = {flows} flows "
          "(one MLflow run each)", flush=True)
    with tempfile.TemporaryDirectory(prefix="privlab-bench-") as tmp:
        here = Path.cwd()
        os.chdir(tmp)  # MLflow writes artifacts under the working directory
        try:
            uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
            one = platform_run(overrides, uri, workers=1)
            print(f"  1 worker   execution {one['timing']['execution_seconds']:7.2f} s  "
                  f"(start-up {one['timing']['startup_seconds']:.1f} s)", flush=True)
            two = platform_run(overrides, uri, workers=2)
            print(f"  2 workers  execution {two['timing']['execution_seconds']:7.2f} s  "
                  f"(start-up {two['timing']['startup_seconds']:.1f} s)", flush=True)
        finally:
            os.chdir(here)
    identical = one["configurations"] == two["configurations"]
    one_seconds, two_seconds = one["timing"]["execution_seconds"], two["timing"]["execution_seconds"]
    print(f"  results identical (1 vs 2 workers): {'yes' if identical else 'NO'}")
    print(f"  seconds per flow in the platform: 1 worker {one_seconds / flows:.3f}, "
          f"2 workers {two_seconds / flows:.3f}")
    print(f"  speedup_2_workers: {one_seconds / two_seconds:.3f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not identical:
        print("ERROR: 1- and 2-worker results differ", file=sys.stderr)
        return 1
    print(f"seconds_per_flow: {seconds_per_flow:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
