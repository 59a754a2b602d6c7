"""privlab against a tuned Ray Tune on the same grids, each a whole process from start to exit.

Two grids, each run by both systems on 2 concurrent trials into a fresh local MLflow sqlite store:

* ``small``: 200 configurations of ``laplace_mean`` (300 repetitions each; ε × n), the issue's
  work A;
* ``births``: the births grid search's 10K slice, 24 configurations × 2 attempts (flows) of
  experiments/births/grid.toml on the NVSS 10K sample (needs ../shared/data/nvss).

privlab: ``privlab run SPEC --workers 2``. Ray Tune 2.60: one trial per configuration, the
function trainable calling privlab's own work for it (``run_trial_range`` over the
configuration's units, with privlab's seeding, so both compute the same numbers), its summary
reported once; ``TuneConfig(reuse_actors=True, max_concurrent_trials=2)`` (a Tune user who knows
to reuse actors), ``MLflowLoggerCallback`` logging each trial as an MLflow run. Ray Tune is a
benchmark dependency only (``pip install -e ".[bench]"``); privlab never imports it.

The systems alternate, ``--repeats`` times each (default 2); each figure is a process's wall
from its start to its exit. Ends with ``ratio_vs_tune_small`` and ``ratio_vs_tune_births``
(privlab's best wall / Tune's best wall), ``seconds_outside_run`` (the quickstart's first study
alone: process wall − the run's own reported wall, best of the repeats) and the load average.

    python benchmarks/vs_ray_tune.py                  # both grids, 2 repeats
    python benchmarks/vs_ray_tune.py --only small
    python benchmarks/vs_ray_tune.py --only outside   # seconds_outside_run alone (no Tune)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NVSS_10K = ROOT.parent / "shared" / "data" / "nvss" / "birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"
EPSILONS = [round(0.05 * i, 2) for i in range(1, 21)]
SMALL = ('name = "small"\nseed = 31\nworkload = "laplace_mean"\nrepetitions = 300\n'
         '[params]\nlower = 0.0\nupper = 1.0\n'
         f'[grid]\nepsilon = {EPSILONS}\nn = {[100 * (i + 1) for i in range(10)]}\n'
         '[budget]\nepsilon = 2.0\n[tracking]\nexperiment = "small"\n')
QUICKSTART_FIRST = ('name = "quickstart-first-study"\nseed = 20261122\n[budget]\nepsilon = 2.0\n'
                    '[tracking]\nexperiment = "quickstart-first-study"\n'
                    '[[study]]\nname = "laplace_mean"\nworkload = "laplace_mean"\nrepetitions = 300\n'
                    '[study.params]\nlower = 0.0\nupper = 1.0\n'
                    '[study.grid]\nepsilon = [0.1, 0.5, 1.0]\nn = [100, 1000]\n')
BIRTHS_SLICE = [f"study.{study}.{key}={value}" for study in ("privbayes_theta", "privbayes_degree")
                for key, value in (("grid_points", 12), ("repetitions", 2), ("params.data", str(NVSS_10K)))]


#: Each process runs with Python's bytecode cache on, as a user's does (this machine's shell may
#: turn it off; then every process would compile privlab's modules again).
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def spec_of(work: str, folder: Path) -> tuple[Path, list[str]]:
    """The spec file and ``--set`` values of a grid."""
    if work == "births":
        return ROOT / "experiments" / "births" / "grid.toml", BIRTHS_SLICE
    path = folder / f"{work}.toml"
    path.write_text(SMALL if work == "small" else QUICKSTART_FIRST)
    return path, []


def privlab_process(work: str, folder: Path) -> tuple[float, float]:
    """(process wall, the run's own reported wall) of ``privlab run`` on 2 workers."""
    spec, sets = spec_of(work, folder)
    summary = folder / "summary.json"
    command = [sys.executable, "-m", "privlab.platform.cli", "run", str(spec), "--workers", "2", "--no-progress",
               "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--summary-json", str(summary),
               *sum((["--set", s] for s in sets), [])]
    began = time.perf_counter()
    subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENVIRONMENT)
    wall = time.perf_counter() - began
    return wall, json.loads(summary.read_text())["timing"]["wall_seconds"]


def tune_process(work: str, folder: Path) -> float:
    """Process wall of the same grid through Ray Tune (this file with ``--tune-child``)."""
    began = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--tune-child", work, "--folder", str(folder)], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENVIRONMENT)
    return time.perf_counter() - began


def tune_child(work: str, folder: Path) -> int:
    """Run ``work`` through Ray Tune with actor reuse and its MLflow logger (a child process)."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on loopback (FACTS.md)
    import ray
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    from privlab.platform.run.configuration_state import StateBuilder, configurations_to_run, load_run_data
    from privlab.platform.experiment.spec import load_spec
    from privlab.platform.execution.worker_tasks import run_trial_range

    spec_path, sets = spec_of(work, folder)
    spec = load_spec(spec_path, sets)
    data = load_run_data(spec)
    configurations = configurations_to_run(spec, {})
    builder = StateBuilder(spec, root_seed=spec.seed, data=data, put=lambda frame: frame, checkpoint=None,
                           configurations=configurations)
    states = [builder.build(config) for config in configurations]
    contexts = {s.config.id: (s.context, s.config.units, s.data_ref) for s in states}

    def trainable(config: dict, contexts: dict) -> None:
        context, units, frame = contexts[config["config_id"]]
        aggregate = run_trial_range(context, 0, units, frame)
        summary = aggregate.summary()
        tune.report({f"{name}_{statistic}": float(value) for name, statistics in summary.items()
                     for statistic, value in statistics.items()})

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(trainable, contexts=contexts), {"cpu": 1}),
        param_space={"config_id": tune.grid_search(list(contexts))},
        tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(folder / "tune"), name=work, verbose=0,
                                  callbacks=[MLflowLoggerCallback(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}",
                                                                  experiment_name=work)]),
    )
    results = tuner.fit()
    ray.shutdown()
    return 0 if not results.errors else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("small", "births", "outside"))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tune-child", choices=("small", "births"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tune_child:
        return tune_child(args.tune_child, Path(args.folder))
    works = [] if args.only == "outside" else [args.only] if args.only else ["small", "births"]
    if "births" in works and not NVSS_10K.is_file():
        print(f"the births grid needs the NVSS 10K sample ({NVSS_10K.name}); left out", file=sys.stderr)
        works.remove("births")
    loads = [os.getloadavg()[0]]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    ratios: dict[str, float] = {}
    outside: list[float] = []
    with tempfile.TemporaryDirectory(prefix="privlab-vs-tune-") as tmp:
        root = Path(tmp)
        for work in works:
            walls: dict[str, list[float]] = {"privlab": [], "tune": []}
            for repeat in range(args.repeats):
                for system in ("privlab", "tune") if repeat % 2 == 0 else ("tune", "privlab"):
                    folder = root / f"{work}-{system}-{repeat}"
                    folder.mkdir()
                    if system == "privlab":
                        wall, own = privlab_process(work, folder)
                        detail = f" (the run's own wall {own:.1f} s)"
                    else:
                        wall, detail = tune_process(work, folder), ""
                    walls[system].append(wall)
                    loads.append(os.getloadavg()[0])
                    print(f"  {work:<7} {system:<8} {wall:7.1f} s{detail}  load {loads[-1]:.2f}", flush=True)
            ratios[work] = min(walls["privlab"]) / min(walls["tune"])
            print(f"  {work}: privlab {min(walls['privlab']):.1f} s, Tune {min(walls['tune']):.1f} s (best of "
                  f"{args.repeats}): ratio {ratios[work]:.3f}", flush=True)
        for repeat in range(args.repeats):
            folder = root / f"quickstart-first-{repeat}"
            folder.mkdir()
            wall, own = privlab_process("quickstart_first", folder)
            outside.append(wall - own)
            loads.append(os.getloadavg()[0])
            phases = json.loads((folder / "summary.json").read_text())["timing"].get("phases", {})
            print(f"  quickstart's first study: process {wall:.2f} s, the run's own wall {own:.2f} s, outside "
                  f"{wall - own:.2f} s  load {loads[-1]:.2f}\n    phases (s): "
                  + ", ".join(f"{name} {seconds:.2f}" for name, seconds in phases.items()), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for work, ratio in ratios.items():
        print(f"ratio_vs_tune_{work}: {ratio:.3f}")
    print(f"seconds_outside_run: {min(outside):.3f}")
    print(f"load_average_1min: {max(loads):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
