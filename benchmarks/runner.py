"""Benchmark of the execution platform, every ratio measured in this one run.

1. ``efficiency_1_worker`` = plain-Python loop time / trials-pattern time on one Ray worker,
   for the same CPU-bound trials of a few milliseconds (each with its own seeded generator,
   as the pattern does). Target ≥ 0.97.
2. ``speedup_2_workers`` = one-worker time / two-worker time for the same trials. Target ≥ 1.8.
3. ``tracking_share`` = time the driver spent blocked on MLflow / wall time of a
   100-configuration grid on two workers (child runs are written by a background thread
   while work continues; the driver blocks only to flush and to log the parent's tables and
   plots). The raw time spent inside MLflow calls is printed too. Target ≤ 0.05.

Pattern times are the execution phase (first task submitted to last result merged and
logged); Ray's start-up (~5 s here, paid once per run) is reported separately.

    python benchmarks/runner.py --quick     # under two minutes on 2 cores
    python benchmarks/runner.py             # larger trial counts
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback
os.environ.setdefault("PRIVLAB_PLUGINS", "privlab.mechanisms.basic.diagnostic_workloads")  # cpu_burn: a diagnostic plug-in

from privlab.mechanisms.basic.diagnostic_workloads import BurnParams, burn  # noqa: E402
from privlab.platform.dp.seeding import trial_generator  # noqa: E402
from privlab.platform.experiment.registry import build_params, get_workload  # noqa: E402
from privlab.platform.experiment.spec import load_spec  # noqa: E402
from privlab.platform.run.runner import RunOptions, run_experiment  # noqa: E402

TRIALS_SPEC = """
name = "bench-trials"
seed = 11
workload = "cpu_burn"
trials = {trials}
[params]
size = {size}
sorts = 6
[tracking]
experiment = "bench-trials"
plots = false
"""

GRID_SPEC = """
name = "bench-grid"
seed = 12
workload = "cpu_burn"
trials = {trials}
[grid]
size = [{sizes}]
sorts = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # 0.5–5 ms per trial
[tracking]
experiment = "bench-grid"
"""


def plain_loop(spec_path: Path) -> float:
    """The obvious baseline: the same trials, one after another, in this process."""
    spec = load_spec(spec_path)
    config = spec.configurations[0]
    params = build_params(BurnParams, config.params, where="bench")
    get_workload(config.workload)  # same registry lookup cost as a worker pays once
    began = time.perf_counter()
    for index in range(config.units):
        burn(params, trial_generator(spec.seed or 0, config.study_key, config.config_key, index))
    return time.perf_counter() - began


def run(spec_path: Path, uri: str, workers: int) -> dict:
    spec = load_spec(spec_path)
    return run_experiment(spec, RunOptions(workers=workers, tracking_uri=uri, progress=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller trial counts (under two minutes)")
    args = parser.parse_args()
    trials = 3000 if args.quick else 20000
    grid_trials = 60 if args.quick else 200
    size = 40_000  # six sorts of 40,000 uniforms: ≈3 ms per trial here, on one core

    with tempfile.TemporaryDirectory(prefix="privlab-bench-") as tmp:
        folder = Path(tmp)
        uri = f"sqlite:///{folder / 'mlflow.db'}"
        trials_spec = folder / "trials.toml"
        trials_spec.write_text(textwrap.dedent(TRIALS_SPEC.format(trials=trials, size=size)))
        grid_spec = folder / "grid.toml"
        sizes = ", ".join(str(size + i) for i in range(10))
        grid_spec.write_text(textwrap.dedent(GRID_SPEC.format(trials=grid_trials, sizes=sizes)))

        print(f"trials pattern: {trials} trials of cpu_burn(size={size}, sorts=6)", flush=True)
        loop_seconds = plain_loop(trials_spec)
        print(f"  plain loop            {loop_seconds:8.2f} s  ({1000 * loop_seconds / trials:.2f} ms/trial)", flush=True)
        one = run(trials_spec, uri, workers=1)
        one_seconds = one["timing"]["execution_seconds"]
        print(f"  pattern, 1 worker     {one_seconds:8.2f} s  (Ray start-up {one['timing']['startup_seconds']:.1f} s)", flush=True)
        two = run(trials_spec, uri, workers=2)
        two_seconds = two["timing"]["execution_seconds"]
        print(f"  pattern, 2 workers    {two_seconds:8.2f} s  (Ray start-up {two['timing']['startup_seconds']:.1f} s)", flush=True)
        if one["configurations"] != two["configurations"]:
            print("ERROR: 1- and 2-worker results differ", file=sys.stderr)
            return 1

        print(f"grid: 100 configurations × {grid_trials} trials on 2 workers", flush=True)
        grid = run(grid_spec, uri, workers=2)
        timing = grid["timing"]
        wall = timing["wall_seconds"] - timing["startup_seconds"]
        print(f"  wall (after start-up) {wall:8.2f} s", flush=True)
        print(f"  MLflow calls, total   {timing['tracking_seconds']:8.2f} s  "
              f"(share {timing['tracking_seconds'] / wall:.3f}, mostly overlapped with work)", flush=True)
        print(f"  driver blocked on it  {timing['tracking_blocked_seconds']:8.2f} s", flush=True)

    print(f"efficiency_1_worker: {loop_seconds / one_seconds:.3f}")
    print(f"speedup_2_workers: {one_seconds / two_seconds:.3f}")
    print(f"tracking_share: {timing['tracking_blocked_seconds'] / wall:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
