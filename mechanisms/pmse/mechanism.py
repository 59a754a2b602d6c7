"""The pMSE mechanism: the exponential mechanism over synthesis-model parameters θ with the
pMSE as quality function, sampled by Metropolis random walks (Algorithm 2).

For data X with n rows, a synthesis model g(θ) and m synthetic draws per evaluation,

    u(X, θ) = (1/m) Σ_{j=1..m} pMSE(X, Xˢ_j),   Xˢ_j ~ g(θ),            (equation 3)

and each of the l released parameter vectors is a draw from

    f(θ) ∝ exp(−(ε/l) · u(X, θ) / (2Δu)) · Π_k N(θ_k; 0, prior_variance),   Δu = 1/n,

the exponential mechanism with quality −u (equation 2) times the paper's very flat prior
N(0, 100000) per parameter (Section 6), which makes f integrable. One synthetic dataset is
generated from each draw (post-processing), so releasing the l datasets is ε-DP by sequential
composition of l steps of ε/l.

Sampling: ``chains`` independent Metropolis chains with Gaussian random-walk proposals of
per-parameter scale ``proposal_scale`` start from the model's public default θ (never from
the data), discard ``burn_in`` iterations, then keep every ``thinning``-th state until l draws
are collected (round-robin over chains). θ outside the model's parameter space (e.g. a
non-positive variance) has density 0 and is rejected. The acceptance rate and the effective
sample size of the u trace (Geyer's initial positive sequence) are reported.

Privacy: ε-DP (replace-one neighbours) for the l draws **if** (i) they are exact draws from f,
and (ii) Δu = 1/n holds. Neither is exactly true in practice, and the docstring says so
rather than hiding it: (i) a finite Metropolis chain only approximates f (the paper does the
same), and with ``chains < releases`` the draws taken from one chain are correlated, while
sequential composition assumes l independent draws (``chains = releases`` with ``thinning = 1``
gives independent chains, one draw each). The approximation is worst at small ε/l: u ≤ 1/4
everywhere and u = 1/4 on the plateau of θ whose synthetic data separates completely from X,
so that plateau keeps weight ≥ e^{−(ε/l)n/8} times its prior mass, nearly 1 under the flat prior,
while the θ that fit X hold a tiny prior mass. At n = 5000, l = 10, ε = 0.25 the plateau then
holds most of f's mass, and a chain started at the public θ does not reach it in any feasible
length: its draws are far better than f's (experiments/pmse/RESULTS.md, Table 2 at ε = 0.25);
(ii) Theorem 2 proves Δu ≤ 1/n for *optimal*
trees, and the top-down CARTs used here (rpart's by default, ``tree``) violate it on a small
fraction of datasets (Table 1 measures how often). The ledger records the nominal guarantee: l steps of ε/l (shares whose
``math.fsum`` is exactly ε) with sensitivity 1/n and "noise scale" 2Δu/(ε/l) (the
temperature of the exponential mechanism). All randomness (the chains and u's synthetic
draws) comes from the run's random source.

References: Snoke & Slavković, "pMSE Mechanism", equations (2)–(3), Algorithm 2, Theorem 2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from privlab.mechanisms.pmse.continuous import ContinuousSynthesizer
from privlab.mechanisms.pmse.numeric_data import data_matrix
from privlab.mechanisms.pmse.synthesis import SynthesisModel
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import ConstrainedParams, Interval, Options, check_count
from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

QualityFunction = Callable[[np.ndarray, np.ndarray], float]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PMSEMechanismParams(ConstrainedParams):
    """Hyperparameters of the pMSE mechanism (all loggable as MLflow params)."""

    epsilon: float  # total ε for the l releases
    releases: int = 10  # l: parameter draws, one synthetic dataset each, ε/l each
    synthetic_per_evaluation: int = 1  # m in equation (3)
    max_depth: int | None = None  # CART depth (None = unlimited; 30, rpart's maximum, with tree="rpart")
    cp: float = 0.01  # CART complexity parameter (rpart's cost-complexity with tree="rpart")
    tree: str = "rpart"  # the pMSE's CART: "rpart" (R's rpart, the paper's tool) or "greedy"
    proposal_scale: float = 0.1
    burn_in: int = 500
    thinning: int = 10
    chains: int = 1
    prior_variance: float = 100_000.0

    _parameter_constraints: ClassVar = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "releases": [Interval(Integral, 1, None, closed="left")],
        "synthetic_per_evaluation": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [None, Interval(Integral, 1, None, closed="left")],
        "cp": [Interval(Real, 0, 1, closed="left")],
        "tree": [Options(str, ("rpart", "greedy"))],
        "proposal_scale": [Interval(Real, 0, None, closed="neither")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "thinning": [Interval(Integral, 1, None, closed="left")],
        "chains": [Interval(Integral, 1, None, closed="left")],
        "prior_variance": [Interval(Real, 0, None, closed="neither")],
    }

    def _check_together(self) -> None:
        if self.tree == "rpart" and self.max_depth is not None and self.max_depth > 30:
            raise SpecError(f"max_depth ({self.max_depth!r}) must be at most 30 with tree='rpart' (rpart's limit) "
                            "or None")


def effective_sample_size(trace: np.ndarray) -> float:
    """Geyer's initial-positive-sequence ESS of a 1-d chain (n when it is constant)."""
    x = np.asarray(trace, dtype=np.float64)
    n = x.size
    if n < 4 or np.var(x) == 0:
        return float(n)
    centred = x - x.mean()
    spectrum = np.fft.rfft(centred, n=2 * n)
    acov = np.fft.irfft(spectrum * np.conj(spectrum))[:n] / n
    rho = acov / acov[0]
    total = 0.0
    for k in range(0, n - 1, 2):
        pair = rho[k] + rho[k + 1]
        if pair <= 0:
            break
        total += pair
    return float(n / max(2 * total - 1, 1.0))


class PMSEMechanism(ContinuousSynthesizer):
    """Algorithm 2: l private θ draws by Metropolis sampling, one synthetic dataset per draw.

    Usage::

        mechanism = PMSEMechanism(params, model=SequentialLinearGaussian(2))
        mechanism.fit(X, ledger=ledger, source=source)
        datasets = mechanism.sample_datasets(len(X), rng=source.generator(purpose="pmse-synthesis"))

    Args:
        params: a :class:`PMSEMechanismParams`.
        model: the synthesis model g(θ) (public).
        quality: u's per-dataset score ``(real, synthetic) -> float``; the pMSE by default.

    Learned state: ``thetas_`` (l × dim), ``acceptance_rate_``, ``effective_sample_size_``,
    ``u_trace_`` (the quality along the first chain). No reference to X is kept.

    Research only: the chain's draws *are* the exponential mechanism's output, and they come
    from a seeded PRNG with floating-point densities (module docstring), so release mode
    refuses it before anything is charged.
    """

    name = "pmse_mechanism"
    Params = PMSEMechanismParams
    release_safe = False

    def __init__(self, params: PMSEMechanismParams, *, model: SynthesisModel,
                 quality: QualityFunction | None = None) -> None:
        super().__init__(params)
        self.model = model
        self._quality = quality

    def _research_only_reason(self) -> str:
        return "its Metropolis chain draws the exponential mechanism's output from a seeded PRNG"

    def _pmse(self, real: np.ndarray, synthetic: np.ndarray) -> float:
        if self._quality is not None:
            return self._quality(real, synthetic)
        from privlab.mechanisms.pmse.propensity import pmse

        return pmse(real, synthetic, max_depth=self.params.max_depth, cp=self.params.cp,
                    tree=self.params.tree)  # type: ignore[arg-type]

    def quality(self, data: np.ndarray, theta: np.ndarray, rng: np.random.Generator) -> float:
        """u(X, θ): the mean pMSE of m synthetic datasets drawn from g(θ) (equation 3)."""
        n = len(data)
        return float(np.mean([self._pmse(data, self.model.sample(theta, n, rng))
                              for _ in range(self.params.synthetic_per_evaluation)]))

    def _read(self, data: object) -> tuple[np.ndarray, tuple[str, ...]]:
        return data_matrix(data, min_rows=2)

    def planned_events(self, records: int, columns: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """The l ledger steps :meth:`fit` charges for data with ``records`` rows, in order.

        Step i is the exponential mechanism for draw i with share ε_i of ε, sensitivity
        Δu = 1/n and "noise scale" 2Δu/ε_i (the temperature); the shares are ε/l up to float
        rounding, and their ``math.fsum`` is exactly ε (:func:`~privlab.platform.dp.budget.split_epsilon`).
        """
        n = check_count("records", records, minimum=2)
        check_count("columns", columns)
        sensitivity = 1.0 / n
        shares = split_epsilon(self.params.epsilon, [1.0] * self.params.releases)
        return [
            PrivacyEvent(name=f"theta_draw_{i + 1}", mechanism="exponential_pmse_metropolis", epsilon=share,
                         sensitivity=sensitivity, noise_scale=2 * sensitivity / share, scope=scope,
                         step="pmse_mechanism")
            for i, share in enumerate(shares)
        ]

    def _fit(
        self, data: np.ndarray, *, plan: list[PrivacyEvent], ledger: Ledger, source: RandomSource, scope: str
    ) -> None:
        """Charge the l steps, then draw the l private parameter vectors."""
        p = self.params
        for event in plan:
            ledger.spend(event)
        # One chain serves every draw, so it targets the smallest share (the shares differ by
        # a few ulps at most; the smallest makes every draw at least as private as charged).
        per_draw = min(event.epsilon for event in plan)
        sensitivity = 1.0 / len(data)
        rng = source.dp_generator(purpose="pmse-metropolis")  # DP draws from a PRNG: research only
        inverse_temperature = per_draw / (2 * sensitivity)

        def log_target(theta: np.ndarray) -> tuple[float, float]:
            if not self.model.is_valid(theta):
                return -math.inf, math.nan
            u = self.quality(data, theta, rng)
            log_prior = -0.5 * float(np.sum(theta * theta)) / p.prior_variance
            return -inverse_temperature * u + log_prior, u

        draws_per_chain = math.ceil(p.releases / p.chains)
        iterations = p.burn_in + p.thinning * draws_per_chain
        kept: list[list[np.ndarray]] = []
        accepted = 0
        proposals = 0
        u_trace: list[float] = []
        for chain in range(p.chains):
            theta = self.model.default_start().astype(np.float64)
            current, current_u = log_target(theta)
            chain_draws: list[np.ndarray] = []
            for iteration in range(1, iterations + 1):
                proposal = theta + p.proposal_scale * rng.standard_normal(theta.size)
                candidate, candidate_u = log_target(proposal)
                proposals += 1
                if math.log(rng.random()) < candidate - current:
                    theta, current, current_u = proposal, candidate, candidate_u
                    accepted += 1
                if chain == 0:
                    u_trace.append(current_u)
                if iteration > p.burn_in and (iteration - p.burn_in) % p.thinning == 0:
                    chain_draws.append(theta.copy())
            kept.append(chain_draws)
        ordered = [kept[c][i] for i in range(draws_per_chain) for c in range(p.chains)]
        self.thetas_ = np.array(ordered[: p.releases])
        self.acceptance_rate_ = accepted / proposals
        self.u_trace_ = np.array(u_trace)
        self.effective_sample_size_ = effective_sample_size(self.u_trace_[p.burn_in:])

    def _sample_arrays(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """One synthetic n-row dataset per released θ (post-processing of the DP draws)."""
        return [self.model.sample(theta, n, rng) for theta in self.thetas_]
