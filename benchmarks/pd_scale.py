"""Plausible deniability at the paper's scale: a 1.5 M-record population, 10⁶ candidates in one run.

The paper's cleaned ACS13 has 1,494,974 records (Table 2); it is not available offline. As a
public stand-in, the generative model is fitted on all of UCI Adult (45,222 clean records,
``experiments/plausible_deniability/adult_space.toml``) with ε = 10⁶ — Laplace noise of scale
about 10⁻⁴ on counts in the thousands, i.e. effectively the non-private model — and 1.5 M
records are drawn from it by ancestral sampling, decoded to Adult's raw columns and written as
parquet. Then ``privlab run`` (the ``pd_generation`` actor pool, local Ray) splits that
population as the paper does (19% / 19% / 49%: |D_S| ≈ 735,000 seeds), fits the ε = 1 DP model
and tests 10⁶ candidates with the paper's Section 6 parameters (k = 50, γ = 4, ε₀ = 1,
ω ∈R [5, 11], max_plausible = 100). ``max_check_plausible`` is left unset: the seed index counts
every plausible seed exactly, which is cheaper than drawing a random examination order of
50,000 seeds per candidate, and the paper notes that the bound affects speed, not privacy.

With ``--evaluate`` it then runs the Section 6 evaluation (``pd_evaluation``) on the same
population, at the paper's data sizes (D_T, D_P ≈ 285,000): ω ∈R [5, 11], ω = 11 and ω = 9,
2 repetitions, 100,000 candidates each, classifiers and the distinguishing game on samples of
50,000 records (the paper: "at least 100,000"), and prints where its results page went. The
population is drawn from a model of the same family as the generator's, so it is kinder to the
generator than real data: read it as "what the ε = 1 model does with the paper's amount of
data", not as a reproduction on real records.

Ends with

    population_records: N
    scale_candidates: N
    scale_run_seconds: X            the configuration's wall time (split, fit, index, 10⁶ candidates)
    scale_candidates_per_second: X

    python benchmarks/pd_scale.py [--workers 2] [--records 1500000] [--candidates 1000000]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import logging  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from privlab.mechanisms.plausible_deniability.dataset import load_coded_table  # noqa: E402
from privlab.mechanisms.plausible_deniability.model import (  # noqa: E402
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.tabular.space import resolve_transformation  # noqa: E402
from privlab.mechanisms.tabular.space import load_release_space  # noqa: E402
from privlab.platform.dp.ledger import Ledger  # noqa: E402
from privlab.platform.dp.randomness import SeededSource  # noqa: E402
from privlab.platform.experiment.spec import load_spec  # noqa: E402
from privlab.platform.run.runner import RunOptions, run_experiment  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "experiments" / "plausible_deniability" / "adult_space.toml"
ADULT = [ROOT.parent / "shared" / "data" / "adult_uci" / name for name in ("adult-train.csv", "adult-test.csv")]
BUCKETS = ('{ age = { width = 10 }, hours-per-week = { width = 15 }, education = { groups = [["Preschool", '
           '"1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"], ["HS-grad", "Some-college"]] } }')

# The paper's Section 6 settings and a budget that only records (the ledger's ε is reported, not
# capped), shared by both specs; one TOML line each, so they survive textwrap.dedent.
PAPER_SETTINGS = "\n".join(["model_epsilon = 1.0", "k = 50", "gamma = 4.0", "epsilon0 = 1.0", "t = 10",
                            "max_plausible = 100", f"buckets = {BUCKETS}"])
BUDGET = "\n".join(["[budget]", "epsilon = 1e12", "delta = 0.5", 'accountant = "best"',
                    "delta_slack = 9.313225746154785e-10"])


def write_population(path: Path, records: int, seed: int) -> float:
    """Fit the (effectively non-private) model on Adult, draw ``records`` records, write parquet."""
    began = time.perf_counter()
    table = load_coded_table(str(SPACE), tuple(map(str, ADULT)))
    params = PlausibleDeniabilityModelParams(epsilon=1e6, maxcost=64)
    # D_T and D_P are the same records here, so the positional split the fit declares does not hold:
    # this ledger is no privacy claim (the population is a public stand-in from a model at ε = 10⁶).
    ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="best", delta_slack=params.delta_slack)
    rng = np.random.default_rng(seed)
    model = PlausibleDeniabilityModel(params).fit(table.codes, parameter_data=table.codes, domain=table.domain,
                                                  ledger=ledger, source=SeededSource(rng))
    codes = model.sample(records, rng=rng)
    transformation = resolve_transformation(load_release_space(SPACE), "")
    raw = transformation.decode(codes)
    raw.to_parquet(path, index=False)
    print(f"population: {records:,} records from the model fitted on {len(table.codes):,} Adult records "
          f"(order {model.describe()['order']}), written in {time.perf_counter() - began:.1f} s")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_500_000)
    parser.add_argument("--candidates", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=2013)
    parser.add_argument("--evaluate", action="store_true", help="then run the Section 6 evaluation on the population")
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the MLflow store here (default: a temporary folder, removed at the end)")
    args = parser.parse_args()
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="pd-scale-") as tmp:
        folder = Path(tmp)
        store = args.store.resolve() if args.store else folder
        store.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{store / 'mlflow.db'}"
        population = folder / "population.parquet"
        write_population(population, args.records, args.seed)
        spec = folder / "scale.toml"
        spec.write_text(textwrap.dedent(f"""
            name = "pd-scale"
            seed = {args.seed}
            workload = "pd_generation"
            [params]
            space = "{SPACE}"
            data = "{population}"
            {PAPER_SETTINGS}
            omega = "5-11"
            candidates = {args.candidates}
            batch = {args.batch}
            {BUDGET}
            [tracking]
            experiment = "pd-scale"
            """))
        began = time.perf_counter()
        summary = run_experiment(load_spec(spec), RunOptions(workers=args.workers, progress=True, tracking_uri=uri))
        total = time.perf_counter() - began
        if args.evaluate:
            evaluation = folder / "evaluation.toml"
            evaluation.write_text(textwrap.dedent(f"""
                name = "pd-scale-evaluation"
                seed = {args.seed}
                workload = "pd_evaluation"
                repetitions = 2
                [params]
                space = "{SPACE}"
                data = "{population}"
                {PAPER_SETTINGS}
                candidates = 100_000
                batch = 20_000
                target = "income"
                evaluation_records = 50_000
                [grid]
                omega = ["5-11", 11, 9]
                {BUDGET}
                [tracking]
                experiment = "pd-scale-evaluation"
                """))
            report = store / "evaluation-report"
            evaluated = run_experiment(load_spec(evaluation), RunOptions(
                workers=args.workers, progress=True, tracking_uri=uri, report_dir=report))
            print(f"evaluation: run {evaluated['run_id']}, {evaluated['timing']['wall_seconds']:.0f} s; "
                  f"results page in {report}")
    (entry,) = summary["configurations"]
    wall = float(next(iter(summary["timing"]["configurations"].values()))["wall_seconds"])
    print(f"run: {total:.1f} s in all ({summary['timing']['startup_seconds']:.1f} s starting Ray), "
          f"pass rate {entry['metrics']['passed_rate']:.4f}, ledger ε = {entry['metrics']['eps_total']:.6g}")
    print(f"load average after: {os.getloadavg()}")
    print(f"population_records: {args.records}")
    print(f"scale_candidates: {args.candidates}")
    print(f"scale_run_seconds: {wall:.1f}")
    print(f"scale_candidates_per_second: {args.candidates / wall:.0f}")


if __name__ == "__main__":
    main()
