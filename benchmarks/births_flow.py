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
   same configurations, same attempts, a per-attempt table each): execution-phase seconds of
   each (Ray start-up reported apart), the speed-up, and a check that both give identical
   results (the run summaries' configurations). 2b: the 24 x 2 slice of issue 16 on 2 workers,
   ``grid_efficiency_2_workers`` = (flows x seconds_per_flow / 2 + Ray start-up) / measured wall.
3. ``seconds_per_flow_wide``: a wide table, as in issue 13: a synthetic census-like table of
   30,000 records and 13 columns (nine categoricals of 2 to 40 levels, four binned numeric
   columns; hyphenated names), whose space and settings are written to a temporary folder;
   flows of PrivBayes (θ flavour, ε = 4) with the all-k-way absolute marginals criterion
   (8,191 marginals) and the relative 1-way one, on one core, 1 warm-up + ``--repeats``
   timed. Then the all-k-way maximum of one flow's data and candidate, by
   ``max_abs_marginal_difference`` (``seconds_marginals_wide``) and by the per-subset
   reference it replaced (``seconds_marginals_wide_per_subset``, once; the two must agree),
   and by the fast path against a perfect synthesizer's candidate (a fresh draw from the
   generator: small differences, the least pruning; ``seconds_marginals_wide_fresh_sample``).

The machine is shared: the load average is printed before and after, and every ratio compares
numbers measured in this one run.

    python benchmarks/births_flow.py --quick       # under two minutes on 2 cores (half a minute: part 3's reference)
    python benchmarks/births_flow.py               # more configurations and repeats
    python benchmarks/births_flow.py --wide-only   # part 3 alone
"""

from __future__ import annotations

import os

# One thread per process for BLAS/OpenMP: part 1 measures one core, Ray workers inherit this.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from privlab.mechanisms.acceptance.base import codes_of  # noqa: E402
from privlab.mechanisms.acceptance.marginal_differences import (  # noqa: E402
    max_abs_marginal_difference,
    max_abs_marginal_difference_per_subset,
)
from privlab.mechanisms.release.flow import FlowConfiguration, load_settings, run_flow  # noqa: E402
from privlab.mechanisms.release.workloads import ReleaseFlowParams, flow_inputs  # noqa: E402
from privlab.mechanisms.tabular.space import load_release_space  # noqa: E402
from privlab.platform.dp.ledger import Ledger  # noqa: E402
from privlab.platform.dp.randomness import SeededSource  # noqa: E402
from privlab.platform.experiment.registry import build_params  # noqa: E402
from privlab.platform.experiment.spec import Configuration, load_spec  # noqa: E402
from privlab.platform.run.runner import RunOptions, run_experiment  # noqa: E402
from privlab.platform.tracking.tracker import Tracker  # noqa: E402

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


# --- 3. a wide table ----------------------------------------------------------------------------------------------

WIDE_RECORDS = 30_000
# Categorical columns: levels and the Zipf exponent of their skew (occupation and industry are
# derived from education below, so their skew comes out of that).
WIDE_CATEGORIES = {"sex": (2, 0.1), "race-ethnicity": (9, 1.6), "marital-status": (6, 0.0),
                   "education-level": (16, 0.0), "occupation-code": (40, 0.9), "industry-code": (25, 0.0),
                   "state-of-residence": (40, 0.8), "citizenship-status": (5, 2.5), "language-at-home": (12, 2.0)}
# Numeric columns: public bounds and bin edges (15, 10, 7 and 20 bins).
WIDE_NUMERIC = {"age-years": ((16, 90), list(range(20, 90, 5))),
                "hours-per-week": ((0, 99), [10, 20, 30, 35, 40, 45, 50, 60, 70]),
                "household-size": ((1, 12), [2, 3, 4, 5, 6, 7]),
                "annual-income": ((0, 999_999), [5_000, 10_000, 15_000, 20_000, 25_000, 30_000, 35_000, 40_000,
                                                 50_000, 60_000, 70_000, 80_000, 100_000, 125_000, 150_000,
                                                 200_000, 250_000, 300_000, 500_000])}
WIDE_COLUMNS = ("age-years", "sex", "race-ethnicity", "marital-status", "education-level", "occupation-code",
                "industry-code", "state-of-residence", "hours-per-week", "household-size", "annual-income",
                "citizenship-status", "language-at-home")
WIDE_SETTINGS = """description = "wide-table benchmark: all-k-way absolute marginals and 1-way relative marginals"
epsilon_generation = 4.0

[[criterion]]
kind = "marginals_absolute"
name = "marginals_absolute"
threshold = 0.01
epsilon = 0.01

[[criterion]]
kind = "marginals_relative"
name = "marginals_relative"
threshold = 1.4
epsilon = 0.30
ratio_clip = 2.0
"""
WIDE_CONFIGURATION = FlowConfiguration(transformation="", synthesizer="privbayes",
                                       synthesizer_params=(("epsilon_split", 0.3), ("theta", 4.0)))


def _zipf(levels: int, exponent: float) -> np.ndarray:
    p = 1.0 / np.arange(1, levels + 1) ** exponent
    return p / p.sum()


def _label(column: str, code: int) -> str:
    return f"{column.split('-')[0]}-{code:02d}"


def wide_raw(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """``n`` census-like records: age drives marital status and education, education drives
    occupation (and it industry) and income; the rest are skewed and independent."""
    age = np.clip(rng.gamma(6.0, 7.0, n) + 10, 16, 90).astype(np.int64)
    education = np.clip((rng.normal(9, 3, n) + 2 * (age > 22)).astype(np.int64), 0, 15)
    occupation = (rng.choice(40, n, p=_zipf(40, 0.9)) + education) % 40
    young = age < 25
    codes = {
        "sex": rng.choice(2, n, p=_zipf(2, 0.1)),
        "race-ethnicity": rng.choice(9, n, p=_zipf(9, 1.6)),
        "marital-status": np.where(young, rng.choice(6, n, p=[.8, .15, .02, .01, .01, .01]),
                                   rng.choice(6, n, p=[.25, .5, .12, .05, .05, .03])),
        "education-level": education,
        "occupation-code": occupation,
        "industry-code": (occupation * 7 // 11 + rng.choice(5, n, p=[.6, .2, .1, .05, .05])) % 25,
        "state-of-residence": rng.choice(40, n, p=_zipf(40, 0.8)),
        "citizenship-status": rng.choice(5, n, p=_zipf(5, 2.5)),
        "language-at-home": rng.choice(12, n, p=_zipf(12, 2.0)),
    }
    numeric = {
        "age-years": age,
        "hours-per-week": np.clip(rng.normal(38, 12, n), 0, 99).astype(np.int64),
        "household-size": np.clip(rng.poisson(1.6, n) + 1, 1, 12),
        "annual-income": np.clip(np.exp(rng.normal(10.3 + 0.08 * education, 0.8, n)), 0, 999_999).astype(np.int64),
    }
    return pd.DataFrame({c: numeric[c] if c in numeric else [_label(c, v) for v in codes[c]] for c in WIDE_COLUMNS})


def wide_space_toml() -> str:
    """The release space of the wide table: its public schema, one transformation (categories
    as codes, numeric columns binned), no constraints."""
    lines = ['name = "wide-census"', 'description = "synthetic census-like table, 13 columns (benchmark)"', ""]
    for c in WIDE_COLUMNS:
        lines.append(f'[schema."{c}"]')
        if c in WIDE_NUMERIC:
            (lower, upper), _ = WIDE_NUMERIC[c]
            lines += ['type = "integer"', f"lower = {lower}", f"upper = {upper}"]
        else:
            labels = ", ".join(f'"{_label(c, v)}"' for v in range(WIDE_CATEGORIES[c][0]))
            lines += ['type = "categorical"', f"categories = [{labels}]"]
        lines.append("")
    for c in WIDE_COLUMNS:
        lines.append(f'[transformations."{c}".alternatives.default]')
        if c in WIDE_NUMERIC:
            (lower, upper), edges = WIDE_NUMERIC[c]
            lines += ['kind = "bins"', f"clip = [{lower}, {upper}]", f"edges = {edges}"]
        else:
            lines.append('kind = "categorical"')
        lines.append("")
    return "\n".join(lines)


def wide_case(repeats: int) -> dict[str, float]:
    """Part 3: wide-table flows on one core, then the all-k-way maximum, fast path vs per-subset."""
    with tempfile.TemporaryDirectory(prefix="privlab-bench-wide-") as tmp:
        Path(tmp, "space.toml").write_text(wide_space_toml())
        Path(tmp, "flow.toml").write_text(WIDE_SETTINGS)
        space = load_release_space(Path(tmp, "space.toml"))
        settings = load_settings(Path(tmp, "flow.toml"))
    raw = wide_raw(WIDE_RECORDS, np.random.default_rng(20240113))
    cleaned = space.clean_raw(raw, source="wide table")
    print(f"\n3. a wide table: {len(cleaned):,} records x {len(WIDE_COLUMNS)} columns, "
          f"{2 ** len(WIDE_COLUMNS) - 1:,} marginals; PrivBayes "
          f"{', '.join(f'{k}={v}' for k, v in WIDE_CONFIGURATION.synthesizer_params)}; one core, "
          f"1 warm-up + {repeats} timed flows", flush=True)
    steps: dict[str, list[float]] = {}
    totals: list[float] = []
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})
    try:
        for rep in range(repeats + 1):
            source = SeededSource(np.random.default_rng([20240113, rep]))
            began = time.perf_counter()
            outcome = run_flow(cleaned, space=space, configuration=WIDE_CONFIGURATION, settings=settings,
                               source=source, ledger=Ledger(epsilon_cap=settings.epsilon_flow))
            seconds = time.perf_counter() - began
            if rep == 0:
                print(f"  warm-up flow (per-domain criteria check, first calls): {seconds:.3f} s", flush=True)
                continue
            totals.append(seconds)
            for step, value in outcome.seconds.items():
                steps.setdefault(step, []).append(value)
        domain = outcome.transformation.domain
        print(f"  domain sizes {domain.sizes} ({math.prod(domain.sizes):.2e} cells)")
        print(f"  median seconds per step over {len(totals)} timed flows:")
        for step, values in steps.items():
            print(f"    {step:<36} {statistics.median(values):7.4f}")

        names = domain.names
        r = codes_of(outcome.transformation.apply(cleaned, source="wide table"), domain, names, what="wide data")
        s = codes_of(outcome.candidate, domain, names, what="wide candidate")
        fresh = codes_of(outcome.transformation.apply(
            space.clean_raw(wide_raw(WIDE_RECORDS, np.random.default_rng(20240114)), source="fresh draw"),
            source="fresh draw"), domain, names, what="fresh draw")
        sizes, d = list(domain.sizes), len(names)
        fast, fast_values = _best_of(3, lambda: max_abs_marginal_difference(r, s, sizes, k_max=d))
        fresh_seconds, fresh_value = _best_of(3, lambda: max_abs_marginal_difference(r, fresh, sizes, k_max=d))
        slow, slow_value = _best_of(1, lambda: max_abs_marginal_difference_per_subset(r, s, sizes, k_max=d))
    finally:
        os.sched_setaffinity(0, affinity)
    print(f"  all-k-way maximum |q(R) - q(S)| of the last flow's candidate: {fast_values} "
          f"(per-subset reference: {slow_value}; {'equal' if fast_values == slow_value else 'DIFFERENT'})")
    print(f"    fast path {fast:.3f} s (best of 3), per-subset reference {slow:.3f} s: {slow / fast:.0f}x")
    print(f"  against a fresh draw from the generator (a perfect synthesizer): maximum {fresh_value}, "
          f"fast path {fresh_seconds:.3f} s (best of 3)")
    if fast_values != slow_value:
        raise SystemExit("ERROR: the fast all-k-way maximum differs from the per-subset reference")
    return {"seconds_marginals_wide_per_subset": slow, "seconds_marginals_wide": fast,
            "seconds_marginals_wide_fresh_sample": fresh_seconds,
            "seconds_per_flow_wide": statistics.median(totals)}


def _best_of(times: int, call: Callable[[], int]) -> tuple[float, int]:
    """The fastest of ``times`` calls (seconds) and the call's value."""
    seconds, value = math.inf, 0
    for _ in range(times):
        began = time.perf_counter()
        value = call()
        seconds = min(seconds, time.perf_counter() - began)
    return seconds, value


def platform_run(overrides: list[str], uri: str, workers: int) -> dict:
    spec = load_spec(GRID, overrides)
    return run_experiment(spec, RunOptions(workers=workers, tracking_uri=uri, progress=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer configurations and repeats")
    parser.add_argument("--wide-only", action="store_true", help="only part 3, the wide table")
    args = parser.parse_args()
    flow_points, repeats = (2, 2) if args.quick else (4, 4)
    ray_points, ray_repetitions = (2, 2) if args.quick else (4, 3)

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    if args.wide_only:
        wide = wide_case(repeats)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for name, value in wide.items():
            print(f"{name}: {value:.3f}")
        return 0
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
          "(a row of a per-attempt table each)", flush=True)
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

    # --- 2b. the 24 x 2 slice on 2 workers against the compute limit (issue 16) ---------------------------------
    efficiency, efficiency_in_run = grid_efficiency(seconds_per_flow)

    # --- 3. a wide table (issue 13): 13 columns, 8,191 marginals ----------------------------------------------
    wide = wide_case(repeats)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not identical:
        print("ERROR: 1- and 2-worker results differ", file=sys.stderr)
        return 1
    print(f"seconds_per_flow: {seconds_per_flow:.3f}")
    for name, value in wide.items():
        print(f"{name}: {value:.3f}")
    print(f"grid_efficiency_2_workers_in_run: {efficiency_in_run:.3f}")
    print(f"grid_efficiency_2_workers: {efficiency:.3f}")
    return 0


EFFICIENCY_POINTS, EFFICIENCY_ATTEMPTS = 12, 2  # per study: 24 configurations x 2 attempts


def grid_efficiency(seconds_per_flow: float) -> tuple[float, float]:
    """Ideal / measured wall seconds of the 24 x 2 births slice on 2 Ray workers, where ideal =
    flows x ``seconds_per_flow`` (part 1, one core) / 2 + the start-up of a private 2-worker Ray
    instance (measured here, alone, just before) and measured = the whole ``run_experiment`` call
    (data, Ray, execution, logging, reports, shutdown) on an existing store. Where the rest went
    is printed."""
    from privlab.platform.execution.backends import make_backend

    flows = 2 * EFFICIENCY_POINTS * EFFICIENCY_ATTEMPTS
    began = time.perf_counter()
    make_backend(serial=False, address=None, workers=2, max_retries=0).shutdown()
    ray_seconds = time.perf_counter() - began
    with tempfile.TemporaryDirectory(prefix="privlab-bench-") as tmp:
        here = Path.cwd()
        os.chdir(tmp)
        try:
            uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
            Tracker(uri)  # a grid search logs to a store that exists: its one-time creation is not timed
            began = time.perf_counter()
            summary = platform_run(grid_slice(EFFICIENCY_POINTS, EFFICIENCY_ATTEMPTS), uri, workers=2)
            measured = time.perf_counter() - began
            flow_seconds = attempt_seconds(uri, summary["run_id"])
        finally:
            os.chdir(here)
    timing = summary["timing"]
    compute = sum(c["compute_seconds"] for c in timing["configurations"].values())
    ideal = flows * seconds_per_flow / 2 + ray_seconds
    print(f"\n2b. {GRID.name}: {flows // EFFICIENCY_ATTEMPTS} configurations x {EFFICIENCY_ATTEMPTS} attempts = {flows} "
          f"flows on 2 Ray workers (a per-attempt table each)")
    print(f"  measured {measured:6.2f} s: start-up {timing['startup_seconds']:.2f} s (Ray alone: {ray_seconds:.2f} s), "
          f"execution {timing['execution_seconds']:.2f} s, the rest (summary, reports, shutdown) "
          f"{measured - timing['startup_seconds'] - timing['execution_seconds']:.2f} s")
    print(f"  workers' compute {compute:.2f} s = {compute / flows:.3f} s per flow against {seconds_per_flow:.3f} "
          f"on one core; compute / 2 = {compute / 2:.2f} s of the execution's {timing['execution_seconds']:.2f} s")
    print(f"  ideal {ideal:.2f} s = {flows} x {seconds_per_flow:.3f} / 2 + {ray_seconds:.2f}")
    # On a shared machine the workers' flows run slower than part 1's (other processes take the
    # cores), so the same ideal is also computed from the flows' own seconds in this run (each
    # attempt's timing_flow_seconds, from the per-attempt tables): the platform's share alone.
    in_run = sum(flow_seconds) / 2 + ray_seconds
    print(f"  the flows' own seconds in this run: {sum(flow_seconds):.2f} s ({statistics.median(flow_seconds):.3f} "
          f"per flow, median); ideal from them {in_run:.2f} s, {in_run / measured:.3f} of the measured")
    return ideal / measured, in_run / measured


def attempt_seconds(uri: str, run_id: str) -> list[float]:
    """Every attempt's ``timing_flow_seconds`` of a run, from its configurations' per-attempt tables."""
    from privlab.platform.tracking.unit_table import read_unit_tables

    tables = read_unit_tables(Tracker(uri), run_id)
    return [seconds for table in tables.values() for seconds in table["timing_flow_seconds"].tolist()]


if __name__ == "__main__":
    sys.exit(main())
