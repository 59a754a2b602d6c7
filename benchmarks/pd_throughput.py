"""Throughput of plausible-deniability generation + Privacy Test (issue 10's target).

Measures candidates generated **and** tested per second on one core, end to end through
``generate_candidates`` (draws, seed-based synthesis by eq. (3), exact Pr{y = M(d)} by prefix
length, γ-partitions, counting plausible seeds, Test 2's noisy threshold), for

* ``synthetics_per_second_per_core``: the batched numpy path (``method="batched"``);
* ``literal_synthetics_per_second_per_core``: the literal per-candidate reference
  (``method="literal"``: a Python loop over D_S computing each Pr{y = M(d_a)});

and their ratio ``fast_over_literal``, all measured in this one run. The batched result is
checked to equal the literal one on the candidates both generated.

Data: a synthetic table shaped like Adult's bucketised attributes (11 attributes of 2 to 16
levels with chained dependencies, 30,000 records), split as in the paper (≈ 19% D_T, 19% D_P,
49% D_S ≈ 14,700 seeds, the rest a test set); the model is fitted with ε = 1 (advanced
composition, maxcost 64). The test is the paper's Section 6 setting: k = 50, γ = 4, ε₀ = 1,
ω ∈R [5, 11], max_plausible = 100, max_check_plausible = 50,000 (≥ |D_S|, so no order is drawn).
BLAS/OpenMP are pinned to one thread, and the process runs on one core when the OS allows it.
The machine may be shared: the load average is printed before and after.

    python benchmarks/pd_throughput.py --quick     # ~20 s
    python benchmarks/pd_throughput.py             # more candidates
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from privlab.mechanisms.plausible_deniability.census_like import census_like  # noqa: E402
from privlab.mechanisms.plausible_deniability.model import (  # noqa: E402
    PlausibleDeniabilityModel, PlausibleDeniabilityModelParams)
from privlab.mechanisms.plausible_deniability.privacy_tests import (  # noqa: E402
    PrivacyTestParams, generate_candidates)
from privlab.mechanisms.plausible_deniability.split import SplitSizes, split_dataset  # noqa: E402
from privlab.mechanisms.plausible_deniability.synthesis import SynthesisParams  # noqa: E402
from privlab.platform.dp.ledger import Ledger  # noqa: E402
from privlab.platform.dp.randomness import SeededSource  # noqa: E402

def rate(n: int, method: str, **kwargs) -> tuple[float, object]:  # noqa: ANN003
    start = time.perf_counter()
    out = generate_candidates(n=n, method=method, **kwargs)
    return n / (time.perf_counter() - start), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer candidates (about 20 s)")
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=2017)
    args = parser.parse_args()
    n_fast, n_literal, repeats = (200_000, 30, 3) if args.quick else (1_000_000, 100, 5)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"load average before: {os.getloadavg()}")
    rng = np.random.default_rng(args.seed)
    data, domain = census_like(args.records, rng)
    sizes = SplitSizes.from_fractions(len(data), structure=0.19, parameters=0.19, seeds=0.49)
    split = split_dataset(data, sizes=sizes, domain=domain, rng=rng)
    params = PlausibleDeniabilityModelParams(epsilon=1.0, maxcost=64)
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-6, accountant=params.accountant, delta_slack=params.delta_slack)
    t0 = time.perf_counter()
    model = PlausibleDeniabilityModel(params).fit(
        data, split=split.positions, domain=domain, ledger=ledger,
        source=SeededSource(np.random.default_rng(args.seed)),
        buckets={"education": [0] * 9 + list(range(1, 8))})
    print(f"model fit: {time.perf_counter() - t0:.2f} s, |D_S| = {len(split.seeds)}, order = "
          f"{model.describe()['order']}")
    test = PrivacyTestParams(k=50, gamma=4.0, epsilon0=1.0, max_plausible=100, max_check_plausible=50_000)
    common = {"model": model, "seeds": split.seeds, "synthesis": SynthesisParams(omega_min=5, omega_max=11),
              "test": test}
    rate(2_000, "batched", source=SeededSource(np.random.default_rng(0)), **common)  # warm-up
    fast_rates = []
    for r in range(repeats):
        fast, out = rate(n_fast, "batched", source=SeededSource(np.random.default_rng(r)), **common)
        fast_rates.append(fast)
        print(f"batched run {r}: {n_fast} candidates, {fast:,.0f}/s, pass rate {out.pass_rate:.3f}")
    literal, ref = rate(n_literal, "literal", source=SeededSource(np.random.default_rng(0)), **common)
    check = generate_candidates(n=n_literal, method="batched", source=SeededSource(np.random.default_rng(0)),
                                **common)
    for field in ("candidates", "plausible", "thresholds", "passed"):
        if not np.array_equal(getattr(check, field), getattr(ref, field)):
            raise SystemExit(f"batched and literal disagree on {field}")
    print(f"literal: {n_literal} candidates, {literal:,.1f}/s (identical to the batched output)")
    print(f"load average after: {os.getloadavg()}")
    best = float(np.median(fast_rates))
    print(f"synthetics_per_second_per_core: {best:.0f}")
    print(f"literal_synthetics_per_second_per_core: {literal:.1f}")
    print(f"fast_over_literal: {best / literal:.0f}")


if __name__ == "__main__":
    main()
