"""The pMSE mechanism's sampler and accounting (the CART itself is tested in test_pmse_cart)."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.mechanisms.pmse.mechanism import PMSEMechanism, PMSEMechanismParams, effective_sample_size
from privlab.mechanisms.pmse.synthesis import SequentialLinearGaussian, SynthesisModel, synthesis_model
from privlab.platform.core.errors import BudgetExceededError, RegistryError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource


class _PointModel(SynthesisModel):
    """g(θ) returns θ itself (n copies): lets a test fix u(θ) exactly."""

    parameter_names = ("t",)

    def is_valid(self, theta: np.ndarray) -> bool:
        return bool(np.all(np.isfinite(theta)))

    def sample(self, theta: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full((n, 1), float(theta[0]))

    def default_start(self) -> np.ndarray:
        return np.zeros(1)


def test_the_chain_samples_the_exponential_mechanism_density() -> None:
    # u(θ) = (t − 2)² with n = 100 rows and ε/l = 0.02 per draw: the target is
    # exp(−(0.02 / (2 · 1/100)) · (t − 2)²) × prior = exp(−(t − 2)²) × (a prior with 1/(2·10⁵)
    # curvature), i.e. N(2, 0.5). One long chain (seeded, so the result is deterministic).
    releases = 800  # (each release is a ledger step; the chain is 200 + 800 × 10 iterations long)
    params = PMSEMechanismParams(epsilon=0.02 * releases, releases=releases, proposal_scale=1.0,
                                 burn_in=200, thinning=10)
    mechanism = PMSEMechanism(params, model=_PointModel(),
                              quality=lambda real, synthetic: float((synthetic[0, 0] - 2.0) ** 2))
    mechanism.fit(np.zeros((100, 1)), ledger=Ledger(epsilon_cap=None), source=SeededSource(np.random.default_rng(1)))
    draws = mechanism.thetas_[:, 0]
    assert abs(draws.mean() - 2.0) < 0.06
    assert draws.var() == pytest.approx(0.5, rel=0.12)
    assert 0.3 < mechanism.acceptance_rate_ < 0.8
    assert mechanism.effective_sample_size_ > 1000


def test_ledger_shows_l_steps_of_epsilon_over_l_and_overruns_charge_nothing() -> None:
    params = PMSEMechanismParams(epsilon=1.0, releases=4, burn_in=2, thinning=1)
    data = np.random.default_rng(0).normal(size=(50, 1))
    quality = lambda real, synthetic: float(abs(real.mean() - synthetic.mean()))  # noqa: E731
    mechanism = PMSEMechanism(params, model=SequentialLinearGaussian(1), quality=quality)
    ledger = Ledger(epsilon_cap=1.0)
    mechanism.fit(data, ledger=ledger, source=SeededSource(np.random.default_rng(1)))
    assert [e.epsilon for e in ledger.events] == [0.25] * 4
    assert ledger.total().epsilon == 1.0
    assert all(e.sensitivity == 1 / 50 and e.noise_scale == 2 * (1 / 50) / 0.25 for e in ledger.events)
    assert mechanism.thetas_.shape == (4, 2)
    datasets = mechanism.sample_datasets(50, rng=np.random.default_rng(2))
    assert len(datasets) == 4 and all(d.shape == (50, 1) for d in datasets)
    assert not any(v is data for v in vars(mechanism).values())

    full = Ledger(epsilon_cap=1.5)
    with pytest.raises(BudgetExceededError):
        mechanism.fit(data, ledger=full, source=SeededSource(np.random.default_rng(1)))
        mechanism.fit(data, ledger=full, source=SeededSource(np.random.default_rng(1)))
    assert full.total().epsilon == 1.0  # the second fit charged none of its 4 steps


def test_same_seed_same_draws_different_seed_different_draws() -> None:
    params = PMSEMechanismParams(epsilon=1.0, releases=3, burn_in=5, thinning=2)
    data = np.random.default_rng(0).normal(size=(40, 2))
    quality = lambda real, synthetic: float(np.mean((real.mean(0) - synthetic.mean(0)) ** 2))  # noqa: E731
    def draws(seed: int) -> np.ndarray:
        mechanism = PMSEMechanism(params, model=SequentialLinearGaussian(2), quality=quality)
        return mechanism.fit(data, ledger=Ledger(epsilon_cap=None), source=SeededSource(np.random.default_rng(seed))).thetas_
    assert np.array_equal(draws(3), draws(3))
    assert not np.array_equal(draws(3), draws(4))


def test_sequential_linear_gaussian_matches_the_paper_model() -> None:
    model = synthesis_model("bivariate_normal")
    assert model.parameter_names == ("beta1_0", "var1", "beta2_0", "beta2_1", "var2")
    theta = np.array([2.0, 10.0, -2.5, 0.5, 3.0])  # X1 ~ N(2, 10), X2 ~ N(-2.5 + 0.5 x1, 3)
    x = model.sample(theta, 200_000, np.random.default_rng(5))
    assert x[:, 0].mean() == pytest.approx(2.0, abs=0.03) and x[:, 0].var() == pytest.approx(10.0, rel=0.02)
    slope, intercept = np.polyfit(x[:, 0], x[:, 1], 1)
    assert slope == pytest.approx(0.5, abs=0.01) and intercept == pytest.approx(-2.5, abs=0.03)
    residual = x[:, 1] - (intercept + slope * x[:, 0])
    assert residual.var() == pytest.approx(3.0, rel=0.02)
    assert not model.is_valid(np.array([0.0, -1.0, 0.0, 0.0, 1.0]))
    with pytest.raises(RegistryError, match="bivariate_normal"):
        synthesis_model("nope")


def test_params_validation_and_ess() -> None:
    for bad in ({"epsilon": 0.0}, {"epsilon": 1.0, "releases": 0}, {"epsilon": 1.0, "cp": 1.5},
                {"epsilon": 1.0, "max_depth": 0}, {"epsilon": 1.0, "max_depth": 31}):
        with pytest.raises(ValueError, match="must be"):
            PMSEMechanismParams(**bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^epsilon \(True\) must be a finite real number > 0$"):
        PMSEMechanismParams(epsilon=True)  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    assert effective_sample_size(rng.normal(size=4000)) == pytest.approx(4000, rel=0.15)
    ar = np.zeros(4000)
    for i in range(1, 4000):
        ar[i] = 0.9 * ar[i - 1] + rng.normal()
    assert effective_sample_size(ar) == pytest.approx(4000 * 0.1 / 1.9, rel=0.35)  # (1-ρ)/(1+ρ)


def test_pack_unpack_and_change_of_units_of_the_one_sequential_model() -> None:
    # The baselines (BPPD, noisy BPPD, functional mechanism) keep θ in this model's layout.
    model = SequentialLinearGaussian(3)
    coefficients = (np.array([1.0]), np.array([-2.0, 0.5]), np.array([0.3, 1.0, -1.5]))
    theta = model.pack(coefficients, [4.0, 1.0, 0.25])
    assert theta.tolist() == [1.0, 4.0, -2.0, 0.5, 1.0, 0.3, 1.0, -1.5, 0.25]
    unpacked, variances = model.unpack(theta)
    assert [c.tolist() for c in unpacked] == [c.tolist() for c in coefficients] and variances.tolist() == [4.0, 1.0, 0.25]
    with pytest.raises(ValueError, match="one entry per column"):
        model.pack(coefficients[:2], [1.0, 1.0])
    # A model fitted in [−1, 1]-scaled units and mapped back draws the same data as the scaled
    # model's draws mapped back (up to float rounding): x = c + h·x̃ column by column.
    lower, upper = np.array([-4.0, 0.0, 10.0]), np.array([6.0, 2.0, 30.0])
    c, h = (lower + upper) / 2, (upper - lower) / 2
    scaled_theta = model.pack((np.array([0.1]), np.array([0.2, -0.4]), np.array([-0.1, 0.3, 0.5])), [0.09, 0.04, 0.01])
    data_theta = model.from_scaled(model.unpack(scaled_theta)[0], np.sqrt(model.unpack(scaled_theta)[1]),
                                   lower=lower, upper=upper)
    scaled = model.sample(scaled_theta, 1000, np.random.default_rng(4))
    direct = model.sample(data_theta, 1000, np.random.default_rng(4))
    np.testing.assert_allclose(direct, c + h * scaled, rtol=1e-9, atol=1e-9)
