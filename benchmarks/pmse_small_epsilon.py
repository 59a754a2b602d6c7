"""Why Table 2's ε = 0.25 cell measures the Metropolis chain rather than the pMSE mechanism.

Each of the l released θ targets f(θ) ∝ exp(−λ·u(θ)) · N(θ; 0, 10⁵ I), λ = (ε/l)·n/2. Since
u ≤ 1/4, with equality on the plateau of θ whose synthetic data separates completely from X,
the plateau weighs at least e^{−λ/4} times its prior mass (nearly 1). This script measures the
two sides of that comparison on the Section-5 model (n = 5000, the mechanism's cp = 0.01 rpart
tree of unlimited depth):

1. ``profiles``: u along each coordinate of θ from the true θ (one dataset, u averaged over 3
   synthetic draws), the widths where u stays below 0.05, 0.125 and 0.2, the prior mass of the
   box those widths span, and the bound they give on the share of f's mass on the plateau
   (an estimate: the region need not be a box);
2. ``chains``: long Metropolis chains (proposal 0.25) at ε = 0.25, 0.5 and 1 from the public
   start, and one at ε = 0.25 from a far start on the plateau, as block means of u.

    python benchmarks/pmse_small_epsilon.py                 # both parts, about 5 CPU-min
    python benchmarks/pmse_small_epsilon.py --iterations 3000   # shorter chains

Ends with ``plateau_share_lower_bound: X`` (ε = 0.25). Results are in experiments/pmse/RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from privlab.mechanisms.pmse.mechanism import PMSEMechanism, PMSEMechanismParams
from privlab.mechanisms.pmse.propensity import pmse
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian
from privlab.mechanisms.pmse.utility_studies import ComparisonParams
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

N = 5000
RELEASES = 10
PRIOR_SD = math.sqrt(100_000.0)
TRUE_THETA = np.array([2.0, 10.0, -2.5, 0.5, 3.0])  # mean₁, variance₁, intercept, slope, variance₂
NAMES = ("mean1", "variance1", "intercept", "slope", "variance2")
LEVELS = (0.05, 0.125, 0.2)
FAR_START = np.array([100.0, 1000.0, 50.0, 5.0, 1000.0])
BLOCK_EDGES = (0, 500, 1000, 2000, 5000, 10000, 20000, 30000, 50000, 100000)


def inverse_temperature(epsilon: float) -> float:
    """λ = (ε/l) / (2Δu) with Δu = 1/n."""
    return (epsilon / RELEASES) * N / 2


SECTION5_MODEL = ComparisonParams(method={"name": "non_dp"}, epsilon=1.0, n=N)  # draws the private X


def box_prior_mass(widths: np.ndarray) -> float:
    """Prior mass of a box with these side widths, at most: the N(0, 10⁵) density's peak × volume."""
    return float(np.prod(widths / (math.sqrt(2 * math.pi) * PRIOR_SD)))


def profile_widths(seed: int = 7) -> dict[float, np.ndarray]:
    """Per coordinate, the width of the interval around the true θ where u stays below each level."""
    rng = np.random.default_rng(seed)
    data = SECTION5_MODEL.draw_private(rng)
    model = SequentialLinearGaussian(2)

    def u(theta: np.ndarray) -> float:
        return float(np.mean([pmse(data, model.sample(theta, N, rng), max_depth=None, cp=0.01, tree="rpart")
                              for _ in range(3)]))

    offsets = np.concatenate([-np.geomspace(0.05, 2000, 60)[::-1], np.geomspace(0.05, 2000, 60)])
    widths: dict[float, list[float]] = {level: [] for level in LEVELS}
    for k, name in enumerate(NAMES):
        profile = []
        for offset in offsets:
            theta = TRUE_THETA.copy()
            theta[k] += offset
            if model.is_valid(theta):
                profile.append((offset, u(theta)))
        for level in LEVELS:
            low = max((d for d, v in profile if d < 0 and v >= level), default=profile[0][0])
            high = min((d for d, v in profile if d > 0 and v >= level), default=profile[-1][0])
            widths[level].append(high - low)
        print(f"  {name:<10} largest u on the profile {max(v for _, v in profile):.3f}")
    return {level: np.array(w) for level, w in widths.items()}


def plateau_share_bound(widths: dict[float, np.ndarray], epsilon: float) -> tuple[float, float, float]:
    """(weight of u < 0.2 at most, plateau weight at least, plateau share at least).

    Shell [a, b) of u weighs at most prior(u < b) · e^{−λa}; the plateau u ≥ 0.2 weighs at
    least prior(u ≥ 0.2) · e^{−λ/4} because u ≤ 1/4 everywhere."""
    lam = inverse_temperature(epsilon)
    edges = (0.0, *LEVELS)
    masses = [box_prior_mass(widths[level]) for level in LEVELS]
    near = sum(mass * math.exp(-lam * lower) for mass, lower in zip(masses, edges))
    plateau = (1 - masses[-1]) * math.exp(-lam / 4)
    return near, plateau, plateau / (plateau + near)


class _FarStart(SequentialLinearGaussian):
    def default_start(self) -> np.ndarray:
        return FAR_START.copy()


def chain_blocks(epsilon: float, seed: int, *, iterations: int, far: bool) -> tuple[dict[str, float], float]:
    """Block means of u along one chain of ``iterations`` (+ l kept draws), and its acceptance rate."""
    params = PMSEMechanismParams(epsilon=epsilon, releases=RELEASES, max_depth=None, cp=0.01, tree="rpart",
                                 proposal_scale=0.25, burn_in=iterations, thinning=1)
    mechanism = PMSEMechanism(params, model=_FarStart(2) if far else SequentialLinearGaussian(2))
    mechanism.fit(SECTION5_MODEL.draw_private(np.random.default_rng(seed)), ledger=Ledger(epsilon_cap=epsilon),
                  source=SeededSource(np.random.default_rng(seed + 1)))
    trace = mechanism.u_trace_
    blocks = {f"{a}-{b}": float(trace[a:b].mean()) for a, b in zip(BLOCK_EDGES, BLOCK_EDGES[1:]) if b <= len(trace)}
    return blocks, mechanism.acceptance_rate_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=30_000, help="iterations per chain (default 30,000)")
    args = parser.parse_args()

    print("u profiles along each coordinate of θ (cp 0.01 rpart, unlimited depth):")
    widths = profile_widths()
    for level in LEVELS:
        print(f"  u < {level}: widths {np.round(widths[level], 2).tolist()}, "
              f"box prior mass {box_prior_mass(widths[level]):.2e}")
    for epsilon in (0.25, 0.5, 1.0):
        near, plateau, share = plateau_share_bound(widths, epsilon)
        print(f"  ε = {epsilon}: λ = {inverse_temperature(epsilon):g}, u < 0.2 weighs ≤ {near:.2e}, "
              f"plateau in [{plateau:.2e}, {math.exp(-inverse_temperature(epsilon) * LEVELS[-1]):.2e}], "
              f"plateau share ≥ {share:.3f}")

    print(f"\nMetropolis chains of {args.iterations:,} iterations, block means of u:")
    for epsilon, seed, far in ((0.25, 1, False), (0.25, 2, False), (0.5, 1, False), (1.0, 1, False), (0.25, 3, True)):
        began = time.process_time()
        blocks, acceptance = chain_blocks(epsilon, seed, iterations=args.iterations, far=far)
        start = "far start" if far else "public start"
        shown = ", ".join(f"{k}: {v:.4f}" for k, v in blocks.items())
        print(f"  ε = {epsilon}, {start}, dataset {seed}: acceptance {acceptance:.3f}, "
              f"{time.process_time() - began:.0f} CPU-s; {shown}")

    print()
    print(f"plateau_share_lower_bound: {plateau_share_bound(widths, 0.25)[2]:.3f}")


if __name__ == "__main__":
    main()
