"""Audit tightness and throughput: white-box distinguishing games on MST, AIM and PrivBayes.

Runs each audit as a user does (``privlab audit``'s functions: the runner on local Ray with 2
workers, a private MLflow store) on the worst-case pair, and prints:

* ``audit_mu_tightness_mst_whitebox`` and ``audit_mu_tightness_aim_whitebox``: μ_lb / μ at
  (ε, δ) = (1, 10⁻²), μ_lb the 95% lower confidence bound from the whole trade-off curve and μ =
  sqrt(2ρ) the claim's; with ``..._point`` the point estimate's ratio (not a bound);
* ``audit_epsilon_tightness_privbayes_whitebox``: ε_lb / ε at ε = 1 (one column: one table of
  all of ε; ``..._3_columns``: three columns, ε split between structure and tables);
* ``audit_trials_per_second_per_core_mst``: trials (a fit on D and one on D′) per second per
  worker, over the MST audit's wall time (Ray start and MLflow included);
* ``planted_bugs_found: K/5`` and ``violations_on_correct_code: V/5`` (tests/mutations/audit_check.py);
* ``load_average_1min`` before and after.

    python benchmarks/audit.py [--smoke] [--figures DIR] [--skip-planted]

``--smoke``: 200 trials per audit and the planted-bug check on one bug. ``--figures DIR``:
the trade-off curves as PNGs and the audits' findings as JSON (experiments/audits/ keeps them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from privlab.platform.audit import audit_run
from privlab.platform.audit.audit_plots import tradeoff_png
from privlab.platform.audit.audit_statistics import tradeoff_points
from privlab.platform.run.runner import RunOptions

ROOT = Path(__file__).resolve().parents[1]

AUDITS = {  # figure name -> (auditable, settings, trials at full scale)
    "mst_whitebox": ("synth_mst", ["epsilon=1.0", "delta=1e-2", "columns=2", "hyperparameters='{\"iters\": 1}'"], 4000),
    "aim_whitebox": ("synth_aim", ["epsilon=1.0", "delta=1e-2", "columns=2",
                                   "hyperparameters='{\"rounds\": 4, \"max_iters\": 1, \"workload_degree\": 2}'"], 600),
    "privbayes_whitebox": ("synth_privbayes", ["epsilon=1.0", "columns=1",
                                               "hyperparameters='{\"epsilon_split\": 0.1, \"degree\": 1}'"], 10000),
    "privbayes_whitebox_3_columns": ("synth_privbayes", ["epsilon=1.0", "columns=3",
                                                         "hyperparameters='{\"epsilon_split\": 0.1, \"degree\": 1}'"], 10000),
}


def load_average() -> float:
    return os.getloadavg()[0]


def run_one(name: str, auditable: str, settings: list[str], trials: int, store: Path, figures: Path | None) -> dict:
    request = audit_run.prepare_audit(auditable, settings=settings, trials=trials, seed=20261129)
    started = time.perf_counter()
    result, summary = audit_run.run_audit(request, RunOptions(tracking_uri=f"sqlite:///{store}", progress=False,
                                                              workers=2, address="local"))
    wall = time.perf_counter() - started
    metrics = summary["configurations"][0]["metrics"]
    thresholds = result.details["thresholds"]
    k_d = [int(round(metrics[f"event_d_{j:02d}_successes"])) for j in range(len(thresholds))]
    k_dp = [int(round(metrics[f"event_d_prime_{j:02d}_successes"])) for j in range(len(thresholds))]
    record = {"name": name, "auditable": auditable, "settings": settings, "trials": trials, "wall_seconds": wall,
              "workers": 2, "claimed_epsilon": result.claimed, "claimed_delta": result.details["claimed_delta"],
              "epsilon_lower": result.empirical, "epsilon_estimate": result.details["estimate"],
              "claimed_mu": result.details["claimed_mu"], "mu_lower": result.details["mu_lower"],
              "mu_estimate": result.details["mu_estimate"], "violation": result.violation,
              "thresholds": thresholds, "events_d": k_d, "events_d_prime": k_dp, "run_id": result.run_id}
    if figures is not None:
        figures.mkdir(parents=True, exist_ok=True)
        points = tradeoff_points(k_d, k_dp, trials, thresholds, confidence=0.95)
        (figures / f"tradeoff_{name}.png").write_bytes(tradeoff_png(
            points, title=f"{auditable} ({', '.join(s for s in settings if not s.startswith('hyper'))}), {trials:,} trials",
            claimed_mu=record["claimed_mu"], mu_lower=record["mu_lower"], epsilon=result.claimed,
            delta=record["claimed_delta"]))
        (figures / f"audit_{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def replot(folder: Path) -> None:
    """Re-render every ``audit_*.json`` of ``folder`` as its trade-off PNG (no audit runs)."""
    for path in sorted(folder.glob("audit_*.json")):
        record = json.loads(path.read_text())
        points = tradeoff_points(record["events_d"], record["events_d_prime"], record["trials"], record["thresholds"],
                                 confidence=0.95)
        settings = ", ".join(s for s in record["settings"] if not s.startswith("hyper"))
        (folder / f"tradeoff_{record['name']}.png").write_bytes(tradeoff_png(
            points, title=f"{record['auditable']} ({settings}), {record['trials']:,} trials",
            claimed_mu=record["claimed_mu"], mu_lower=record["mu_lower"], epsilon=record["claimed_epsilon"],
            delta=record["claimed_delta"]))


def planted(smoke: bool) -> tuple[int, int, int]:
    spec = importlib.util.spec_from_file_location("privlab_audit_check", ROOT / "tests" / "mutations" / "audit_check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = check
    spec.loader.exec_module(check)
    bugs = check.load_bugs()
    if smoke:
        bugs = [b for b in bugs if b.id == "domain-from-the-data"]
    findings = check.check_all(bugs, jobs=2)
    found = sum(f.verdict == "found" for f in findings if f.mutated)
    violations = sum(f.verdict != "clean" for f in findings if not f.mutated)
    return found, violations, len(bugs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="200 trials per audit, one planted bug")
    parser.add_argument("--figures", type=Path, help="write trade-off PNGs and findings JSON here")
    parser.add_argument("--skip-planted", action="store_true", help="skip the planted-bug check")
    parser.add_argument("--only", nargs="+", choices=sorted(AUDITS), help="run only these audits")
    parser.add_argument("--trials", type=int, help="trials per side for every audit run (default: each one's own)")
    parser.add_argument("--replot", type=Path, metavar="DIR", help="re-render DIR's trade-off PNGs from its JSON")
    args = parser.parse_args()
    if args.replot:
        replot(args.replot)
        return
    print(f"load_average_1min_before: {load_average():.2f}")
    records = {}
    with tempfile.TemporaryDirectory(prefix="privlab-audit-bench-") as folder:
        for name, (auditable, settings, trials) in AUDITS.items():
            if args.only and name not in args.only:
                continue
            records[name] = run_one(name, auditable, settings, 200 if args.smoke else args.trials or trials,
                                    Path(folder) / "mlflow.db", args.figures)
            record = records[name]
            print(f"audit_{name}_trials: {record['trials']}")
            print(f"audit_{name}_wall_seconds: {record['wall_seconds']:.1f}")
            print(f"audit_{name}_epsilon_lower: {record['epsilon_lower']:.4f}")
            print(f"audit_{name}_mu_lower: {record['mu_lower']:.4f}")
            print(f"audit_{name}_violation: {record['violation']}")
            print(f"load_average_1min: {load_average():.2f}")
    for name in ("mst_whitebox", "aim_whitebox"):
        if name in records:
            r = records[name]
            print(f"audit_mu_tightness_{name}: {r['mu_lower'] / r['claimed_mu']:.3f}")
            print(f"audit_mu_tightness_{name}_point: {r['mu_estimate'] / r['claimed_mu']:.3f}")
    for name in ("privbayes_whitebox", "privbayes_whitebox_3_columns"):
        if name in records:
            r = records[name]
            label = "audit_epsilon_tightness_privbayes_whitebox" + name.removeprefix("privbayes_whitebox")
            print(f"{label}: {r['epsilon_lower'] / r['claimed_epsilon']:.3f}")
    if "mst_whitebox" in records:
        r = records["mst_whitebox"]
        print(f"audit_trials_per_second_per_core_mst: {r['trials'] / (r['wall_seconds'] * r['workers']):.2f}")
    if not args.skip_planted:
        found, violations, total = planted(args.smoke)
        print(f"planted_bugs_found: {found}/{total}")
        print(f"violations_on_correct_code: {violations}/{total}")
    print(f"load_average_1min_after: {load_average():.2f}")


if __name__ == "__main__":
    main()
