"""Fingerprints of seeded run summaries, to show that a refactoring changed no result.

Runs the quickstart, a slice of the births grid search (4 seeded grid points per study,
2 attempts each; needs ../shared/data/nvss), the pMSE regression study on small data (every
pMSE method, one simulation per configuration) and a small plausible-deniability pass-rate
study (needs ../shared/data/adult_uci) serially into a temporary tracking store, and
prints the SHA-256 of each summary's results (configurations, root seed, total ε) with the
checkout's path masked, e.g.::

    python benchmarks/summary_fingerprint.py            # before a change, and again after
    python benchmarks/summary_fingerprint.py --quick    # the two runs that need no public data (~1 min)

    quickstart_fingerprint: cc243c2a…
    births_slice_fingerprint: 48d8fe2a…
    pmse_regression_small_fingerprint: 0d1e2f3a…
    pd_pass_rates_small_fingerprint: 9a8b7c6d…

Equal lines before and after mean bit-identical results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIRTHS_SLICE = [f"study.{study}.{key}={value}" for study in ("privbayes_theta", "privbayes_degree")
                for key, value in (("grid_points", 4), ("repetitions", 2))]
# Every pMSE-paper method (the mechanism and the three baselines) on small data: cheap, and
# the only place the baselines' draws enter a fingerprint.
PMSE_SMALL = ["repetitions=1", "params.n=300", "params.burn_in=20", "params.thinning=2"]
# Plausible deniability's Bayesian-network model and seed-based synthesis, on UCI Adult: one
# fixed ω and one ω range, 200 candidates.
PD_SMALL = ["study.pass_rates.params.candidates=200", "study.pass_rates.params.batch=100",
            "study.pass_rates.grid.k=[25]", 'study.pass_rates.grid.omega=[11, "5-11"]']
RUNS = {
    "quickstart": (ROOT / "experiments" / "quickstart.toml", []),
    "births_slice": (ROOT / "experiments" / "births" / "grid.toml", BIRTHS_SLICE),
    "pmse_regression_small": (ROOT / "experiments" / "pmse" / "regression.toml", PMSE_SMALL),
    "pd_pass_rates_small": (ROOT / "experiments" / "plausible_deniability" / "pass_rates.toml", PD_SMALL),
}


def fingerprint(summary: dict) -> str:
    """The results, not the summary's format: per configuration its id, parameters, metrics and
    ledger events (a new bookkeeping field in the ledger's header does not count as a change)."""
    # An unset (None) parameter is no parameter: a workload may gain optional ones.
    configurations = [{"id": c["id"], "params": {k: v for k, v in c["params"].items() if v is not None},
                       "metrics": c["metrics"],
                       "ledger_events": c.get("ledger", {}).get("events")} for c in summary["configurations"]]
    results = {"configurations": configurations, "root_seed": summary["root_seed"],
               "epsilon_total": summary["epsilon_total"]}
    text = json.dumps(results, sort_keys=True, default=str).replace(str(ROOT), "<checkout>")
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(RUNS), help="run one of them")
    parser.add_argument("--quick", action="store_true",
                        help="leave out the runs that read ../shared/data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="privlab-fingerprint-") as folder:
        store = f"sqlite:///{Path(folder) / 'mlflow.db'}"
        for name, (spec, overrides) in RUNS.items():
            if (args.only and name != args.only) or (args.quick and name in NEEDS_PUBLIC_DATA):
                continue
            summary_path = Path(folder) / f"{name}.json"
            command = [sys.executable, "-m", "privlab.platform.cli", "run", str(spec), "--serial", "--no-progress",
                       "--tracking-uri", store, "--summary-json", str(summary_path)]
            for override in overrides:
                command += ["--set", override]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
            PRINTERS[name](fingerprint(json.loads(summary_path.read_text())))
    return 0


def _quickstart(digest: str) -> None:
    print(f"quickstart_fingerprint: {digest}", flush=True)


def _births_slice(digest: str) -> None:
    print(f"births_slice_fingerprint: {digest}", flush=True)


def _pmse_regression_small(digest: str) -> None:
    print(f"pmse_regression_small_fingerprint: {digest}", flush=True)


def _pd_pass_rates_small(digest: str) -> None:
    print(f"pd_pass_rates_small_fingerprint: {digest}", flush=True)


NEEDS_PUBLIC_DATA = ("births_slice", "pd_pass_rates_small")
#: One printer per run, so each fingerprint's ``name: value`` line is spelled out.
PRINTERS = {"quickstart": _quickstart, "births_slice": _births_slice, "pmse_regression_small": _pmse_regression_small,
            "pd_pass_rates_small": _pd_pass_rates_small}


if __name__ == "__main__":
    sys.exit(main())
