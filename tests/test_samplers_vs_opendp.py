"""Our exact samplers (platform/dp/secure_sampling.py) held to OpenDP's in distribution (issue 15 item 10;
the discrete Gaussian of the Gaussian mechanism's release path too).

We keep our own samplers because every draw must go through the transcript and replay
bit-identically; OpenDP (a test-only dependency) is the reference implementation of the same
constructions (Canonne, Kamath & Steinke 2020 discrete Laplace; Laplace on the lattice 2**k Z
with the input snapped to it).

False alarms: our side is seeded (its ``secrets`` module is replaced by a seeded generator for
the test), OpenDP's side draws from its own CSPRNG and cannot be seeded, so each two-sample
chi-square test has false-alarm probability α = 1e-9 under the null (asymptotically; 300,000
simulated null runs put P(p < 1e-4) at 1.17e-4, so the test is calibrated); the six tests of this
file together ≤ 6e-9 per run. The tests have power: a scale off by 10% gave p ≈ 1e-11 here, and
the last test checks that one off by 20% is detected at α (in 2,000 simulations its p was at
most 6e-35).
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

dp = pytest.importorskip("opendp.prelude", reason="OpenDP is a test-only dependency (pip install -e '.[dev]')")
from scipy.stats import chi2_contingency  # noqa: E402

from privlab.platform.dp import secure_sampling  # noqa: E402

ALPHA = 1e-9
DRAWS = 20_000


class _SeededSecrets:
    """The two calls our samplers make on ``secrets``, from a seeded generator (test only)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self._rng.randrange(n)

    def randbits(self, k: int) -> int:
        return self._rng.getrandbits(k)


@pytest.fixture()
def seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secure_sampling, "secrets", _SeededSecrets(20261124))


@pytest.fixture(scope="module", autouse=True)
def _contrib() -> None:
    dp.enable_features("contrib")


def _homogeneity_p(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square two-sample test on the integer values, tails pooled so every expected count ≥ 10."""
    values, counts_a = np.unique(a, return_counts=True)
    table = {int(v): [int(c), 0] for v, c in zip(values, counts_a, strict=True)}
    for v, c in zip(*np.unique(b, return_counts=True), strict=True):
        table.setdefault(int(v), [0, 0])[1] = int(c)
    keys = sorted(table)
    rows, pending = [], [0, 0]
    for key in keys:  # pool from the left tail, then everything that stays small
        pending = [pending[0] + table[key][0], pending[1] + table[key][1]]
        if min(pending) >= 10:
            rows.append(pending)
            pending = [0, 0]
    if rows:
        rows[-1] = [rows[-1][0] + pending[0], rows[-1][1] + pending[1]]
    return float(chi2_contingency(np.array(rows).T)[1])


def _opendp_discrete_laplace(scale: float, size: int) -> np.ndarray:
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
    return np.asarray(dp.m.make_laplace(*space, scale=scale)([0] * size))


def _opendp_lattice_laplace(scale: float, k: int, values: list[float]) -> np.ndarray:
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=len(values)), dp.l1_distance(T=float)
    return np.asarray(dp.m.make_laplace(*space, scale=scale, k=k)(values))


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(15, 2)])
def test_discrete_laplace_matches_opendp(seeded: None, scale: Fraction) -> None:
    ours = np.array([secure_sampling.discrete_laplace(scale) for _ in range(DRAWS)])
    theirs = _opendp_discrete_laplace(float(scale), DRAWS)
    p = _homogeneity_p(ours, theirs)
    assert p > ALPHA, f"scale {scale}: our discrete Laplace differs from OpenDP's (chi-square p = {p:.3g})"


def _opendp_discrete_gaussian(scale: float, size: int) -> np.ndarray:
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
    return np.asarray(dp.m.make_gaussian(*space, scale=scale)([0] * size))


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [Fraction(3), Fraction(25, 2)])
def test_discrete_gaussian_matches_opendp(seeded: None, sigma: Fraction) -> None:
    ours = np.array([secure_sampling.discrete_gaussian(sigma * sigma) for _ in range(DRAWS)])
    theirs = _opendp_discrete_gaussian(float(sigma), DRAWS)
    p = _homogeneity_p(ours, theirs)
    assert p > ALPHA, f"sigma {sigma}: our discrete Gaussian differs from OpenDP's (chi-square p = {p:.3g})"


@pytest.mark.statistical
def test_lattice_laplace_matches_opendp_on_its_lattice(seeded: None) -> None:
    scale, k = 2.0, -1  # a coarse lattice (0.5) so the values can be binned exactly
    ours = np.array([secure_sampling.laplace_on_lattice(scale, k) for _ in range(DRAWS)])
    theirs = _opendp_lattice_laplace(scale, k, [0.0] * DRAWS)
    assert np.all(np.ldexp(theirs, -k) == np.round(np.ldexp(theirs, -k)))  # OpenDP's output is on 2**k Z too
    p = _homogeneity_p(np.ldexp(ours, -k).astype(np.int64), np.ldexp(theirs, -k).astype(np.int64))
    assert p > ALPHA, f"our lattice Laplace differs from OpenDP's (chi-square p = {p:.3g})"


def test_snapping_and_the_privacy_map_match_opendp() -> None:
    k = -1
    inputs = [0.3, 2.6, -1.1, 0.0, 7.49, 0.25, 0.75, -0.25, 1.25, -3.75]  # the last five are ties
    # With a scale far below the lattice step the noise is 0 with probability 1 − 2e^(−2**20):
    # OpenDP's output is then its snapped input.
    theirs = _opendp_lattice_laplace(2.0**-21, k, inputs).tolist()
    ours = [secure_sampling.snap_to_lattice(x, k) for x in inputs]
    step = 2.0**k
    for x, a, b in zip(inputs, ours, theirs, strict=True):
        assert abs(a - x) <= step / 2 and abs(b - x) <= step / 2  # both round to a nearest multiple
        if (x / step) % 1 != 0.5:
            assert a == b, f"snapping {x}: ours {a}, OpenDP {b}"
        else:
            # The one documented difference: at an exact tie we round half to even, OpenDP rounds
            # half up. Either keeps |snap(x) − x| ≤ 2**(k−1), hence the snapped sensitivity
            # Δ + 2**k that both privacy maps use.
            assert (a / step) % 2 == 0 and b == x + step / 2, f"tie {x}: ours {a}, OpenDP {b}"
    # OpenDP's privacy map for sensitivity Δ on the lattice 2**k is ε = (Δ + 2**k)/scale: the same
    # rule as our release_laplace_scale (scale = (Δ + 2**k)/ε).
    for delta, scale, k in [(1.0, 2.0, -20), (0.01, 0.37, -33), (5.0, 11.0, -27)]:
        space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
        epsilon = dp.m.make_laplace(*space, scale=scale, k=k).map(delta)
        assert secure_sampling.release_laplace_scale(delta, epsilon, k) == pytest.approx(scale, rel=1e-12)


@pytest.mark.statistical
def test_the_comparison_has_power_against_a_wrong_scale(seeded: None) -> None:
    ours = np.array([secure_sampling.discrete_laplace(Fraction(3)) for _ in range(DRAWS)])
    wrong = _opendp_discrete_laplace(3.6, DRAWS)  # 20% too large
    assert _homogeneity_p(ours, wrong) < ALPHA
