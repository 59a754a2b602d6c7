"""The pMSE sensitivity study (Table 1) on the trials pattern: 1 worker vs 2, measured in one run.

Runs ``experiments/pmse/sensitivity.toml`` (n = 5000, all eight configurations per trial) with
the same trial count on one and on two local Ray workers, checks that both give identical
results, and prints the execution-phase times (Ray's start-up is reported apart), the
throughput and the projection to the paper's 10⁶ trials. Target: ``speedup_2_workers ≥ 1.8``.

    python benchmarks/pmse_trials.py --quick     # 10,000 trials, about a minute on 2 cores
    python benchmarks/pmse_trials.py             # 20,000 trials
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback

from privlab.platform.experiment.spec import load_spec  # noqa: E402
from privlab.platform.run.runner import RunOptions, run_experiment  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "experiments" / "pmse" / "sensitivity.toml"


def run(trials: int, uri: str, workers: int) -> dict:
    spec = load_spec(SPEC, [f"trials={trials}", "tracking.plots=false"])
    return run_experiment(spec, RunOptions(workers=workers, tracking_uri=uri, progress=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10,000 trials instead of 20,000")
    args = parser.parse_args()
    trials = 10_000 if args.quick else 20_000
    with tempfile.TemporaryDirectory(prefix="privlab-bench-") as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        print(f"pmse_sensitivity: {trials:,} trials (n = 5000, 8 configurations per trial)", flush=True)
        results = {}
        for workers in (1, 2):
            summary = run(trials, uri, workers)
            seconds = summary["timing"]["execution_seconds"]
            results[workers] = (summary, seconds)
            print(f"  {workers} worker(s)  {seconds:8.2f} s  ({trials / seconds:7.1f} trials/s, "
                  f"{1000 * seconds * workers / trials:.2f} ms per trial per worker; "
                  f"Ray start-up {summary['timing']['startup_seconds']:.1f} s)", flush=True)
        if results[1][0]["configurations"] != results[2][0]["configurations"]:
            print("ERROR: 1- and 2-worker results differ", file=sys.stderr)
            return 1
        two = results[2][1]
        print(f"  projected 10⁶ trials on 2 workers: {1e6 / trials * two / 60:.1f} min (target ≤ 30)")
    print(f"speedup_2_workers: {results[1][1] / results[2][1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
