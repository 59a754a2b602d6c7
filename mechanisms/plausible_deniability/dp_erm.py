"""DP logistic regression and linear SVM by output and objective perturbation (Table 4 baselines).

Chaudhuri, Monteleoni & Sarwate's regularised empirical risk minimisation over n records
(x_i, y_i), ‖x_i‖₂ ≤ 1, y_i ∈ {−1, +1}:

    J(f) = (1/n) Σ_i ℓ(y_i fᵀx_i) + (λ/2) ‖f‖²,

with ℓ the logistic loss log(1 + e^{−z}) ("LR") or their Huber loss ("SVM", Section 3.4.2):
ℓ(z) = 0 for z > 1 + h, (1 + h − z)²/(4h) for |1 − z| ≤ h, 1 − z for z < 1 − h. Both are convex
with |ℓ'| ≤ 1 and |ℓ''| ≤ c: c = 1/4 (logistic), c = 1/(2h) (Huber).

**Features from public bounds.** The record's attributes other than the target are one-hot
encoded (:func:`~.evaluation_data.one_hot`: (m − 1) blocks, each with one 1), a constant 1 is
appended for the intercept, and the vector is divided by √m, so ‖x‖₂ = 1 exactly for every
possible record — a bound from the public domain, never from the data (the paper: binary
attributes, features in [0, 1], "normalize each training example such that its norm is at
most 1"). The target must have two categories: code 1 is y = +1, code 0 is y = −1.

**Noise.** b ∈ ℝ^d with density ∝ exp(−β‖b‖₂), drawn as a direction uniform on the sphere
(a normalised standard Gaussian) times a norm ~ Gamma(shape d, scale 1/β): in polar
coordinates the density of r = ‖b‖ is ∝ r^{d−1} e^{−βr} (:func:`sample_l2_laplace_noise`).

* **Output perturbation** (their Algorithm 1): f_priv = argmin J + b with β = nλε/2.
* **Objective perturbation** (their Algorithm 2): ε' = ε − log(1 + 2c/(nλ) + c²/(n²λ²));
  if ε' > 0 then Δ = 0, else Δ = c/(n(e^{ε/4} − 1)) − λ and ε' = ε/2; β = ε'/2 and
  f_priv = argmin J(f) + (1/n) bᵀf + (Δ/2)‖f‖².

Privacy:
    ε-DP for **replace-one** neighbours (datasets differing in one record's value, n public),
    the relation of Chaudhuri et al.'s proofs. One ledger event per fit, with the full ε.

    *Output perturbation* — sensitivity 2/(nλ): J is λ-strongly convex, and replacing
    record n by n' changes its gradient by g(f) = (1/n)(ℓ'(y'_n fᵀx'_n) y'_n x'_n −
    ℓ'(y_n fᵀx_n) y_n x_n), with ‖g‖ ≤ 2/n because |ℓ'| ≤ 1 and ‖x‖ ≤ 1; the minimisers of two
    λ-strongly convex functions whose difference has gradient norm ≤ G differ by at most G/λ
    (their sensitivity lemma for Algorithm 1), so ‖f*(D) − f*(D')‖ ≤ 2/(nλ). The K-norm (here ℓ₂) mechanism with density
    ∝ exp(−ε‖b‖/Δ₂) is then ε-DP by the triangle inequality: the event records sensitivity
    Δ₂ = 2/(nλ) and noise scale 1/β = Δ₂/ε.

    *Objective perturbation* — the noise vector b is the only randomness, and the map from b
    to f_priv is a bijection (the first-order condition b = −n∇(J + (Δ/2)‖·‖²)(f_priv)). For
    neighbours, the b that produces a given f differs by the difference of one record's loss
    gradients, of norm ≤ 2 (sensitivity **2**, recorded, with noise scale 1/β = 2/ε'), which
    costs ε' through the density ratio; the Jacobian ratio of the bijection costs at most
    log(1 + 2c/(n(λ + Δ)) + c²/(n²(λ + Δ)²)) ≤ ε − ε' because ℓ'' ≤ c (their privacy theorem for Algorithm 2,
    which the paper applies to the Huber loss: ℓ'' ≤ 1/(2h) wherever it exists, all but z = 1 ± h);
    the Δ branch makes that term ≤ ε/2 when λ alone cannot. ``details`` record ε', Δ, c, β,
    d and λ.

    Exactness: the minimiser is computed by L-BFGS-B asked for a gradient tolerance of 1e-10;
    the gradient norm reached is kept in ``optimality_`` (about 1e-10 to 1e-8 in practice).
    By (λ + Δ)-strong convexity the computed f is within ``optimality_ / (λ + Δ)`` of the exact
    minimiser, far below the noise scale at any λ of the paper's grid — but, as for every
    floating-point implementation of these algorithms, the guarantee is the exact minimiser's.
    Research-only: the noise comes from a seeded floating-point generator
    (``source.dp_generator``), so release mode refuses the fit before anything is charged.

References:
    Chaudhuri, Monteleoni & Sarwate, "Differentially Private Empirical Risk Minimization",
    JMLR 12 (2011): Algorithms 1 and 2 and their privacy theorems, Section 3.4.2 (Huber
    loss); Bindschaedler, Shokri & Gunter (VLDB 2017), Section 6.3,
    Table 4 (ε = 1, λ ∈ {10⁻³, …, 10⁻⁶}).
"""

from __future__ import annotations

import dataclasses
import math
from numbers import Real
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd
from scipy import optimize
from scipy.special import expit

from privlab.mechanisms.plausible_deniability.evaluation_data import one_hot
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import LedgerError, SchemaError, SpecError
from privlab.platform.core.validation import ConstraintSpec, Interval, Options, validate_parameters
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["DPLinearClassifier", "DPLinearClassifierParams", "LOSSES", "PERTURBATIONS", "erm_features",
           "fit_erm", "loss_curvature", "nonprivate_erm_accuracies", "objective_perturbation_parameters", "output_perturbation_sensitivity",
           "sample_l2_laplace_noise"]

LOSSES = ("logistic", "huber")
PERTURBATIONS = ("output", "objective")
GRADIENT_TOLERANCE = 1e-10


def _positive_finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or \
            not (math.isfinite(float(value)) and float(value) > 0):
        raise SpecError(f"{name} ({value!r}) must be finite and > 0")
    return float(value)


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SpecError(f"{name} ({value!r}) must be an int >= 1")
    return int(value)


# --- the mathematics -----------------------------------------------------------------------------


def loss_curvature(loss: str, huber_h: float = 0.5) -> float:
    """c, the bound on |ℓ''|: 1/4 for the logistic loss, 1/(2h) for the Huber loss.

    Raises:
        SpecError: an unknown loss or h ≤ 0.
    """
    if loss not in LOSSES:
        raise SpecError(f"loss ({loss!r}) must be one of {list(LOSSES)}")
    return 0.25 if loss == "logistic" else 1.0 / (2.0 * _positive_finite("huber_h", huber_h))


def output_perturbation_sensitivity(n: int, regularization: float) -> float:
    """ℓ₂ sensitivity 2/(nλ) of the regularised ERM minimiser (module docstring).

    Raises:
        SpecError: n < 1 or λ ≤ 0.
    """
    return 2.0 / (_count("n", n) * _positive_finite("regularization", regularization))


def objective_perturbation_parameters(epsilon: float, n: int, regularization: float,
                                      curvature: float) -> tuple[float, float]:
    """(ε', Δ) of Algorithm 2 (module docstring).

    Raises:
        SpecError: ε, λ or c not finite and > 0, or n < 1.
    """
    epsilon = _positive_finite("epsilon", epsilon)
    n = _count("n", n)
    lam = _positive_finite("regularization", regularization)
    c = _positive_finite("curvature", curvature)
    epsilon_prime = epsilon - math.log1p(2.0 * c / (n * lam) + c * c / (n * n * lam * lam))
    if epsilon_prime > 0:
        return epsilon_prime, 0.0
    return epsilon / 2.0, c / (n * math.expm1(epsilon / 4.0)) - lam


def sample_l2_laplace_noise(dimension: int, beta: float, rng: np.random.Generator,
                            size: int | None = None) -> np.ndarray:
    """b ∈ ℝ^d with density ∝ exp(−β‖b‖₂): a uniform direction times a Gamma(d, 1/β) norm.

    Args:
        dimension: d ≥ 1.
        beta: β > 0.
        rng: The generator of the draws (a DP stream: ``source.dp_generator``).
        size: ``None`` for one vector of shape ``(d,)``, else ``(size, d)``.

    Raises:
        SpecError: d < 1 or β not finite and > 0.
    """
    d = _count("dimension", dimension)
    beta = _positive_finite("beta", beta)
    shape = (1 if size is None else _count("size", size), d)
    direction = rng.standard_normal(shape)
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    norm = rng.gamma(shape=d, scale=1.0 / beta, size=(shape[0], 1))
    out = direction * norm
    return out[0] if size is None else out


def _loss_terms(loss: str, z: np.ndarray, huber_h: float) -> tuple[np.ndarray, np.ndarray]:
    """ℓ(z) and ℓ'(z)."""
    if loss == "logistic":
        return np.logaddexp(0.0, -z), -expit(-z)
    h = huber_h
    value = np.where(z > 1 + h, 0.0, np.where(z < 1 - h, 1.0 - z, (1 + h - z) ** 2 / (4 * h)))
    slope = np.where(z > 1 + h, 0.0, np.where(z < 1 - h, -1.0, -(1 + h - z) / (2 * h)))
    return value, slope


def fit_erm(features: np.ndarray, labels: np.ndarray, *, loss: str, regularization: float,
            huber_h: float = 0.5, linear: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """argmin_f (1/n) Σ ℓ(y_i fᵀx_i) + (λ/2)‖f‖² + linearᵀf (non-private unless ``linear`` is noise).

    Args:
        features: ``(n, d)`` rows with ‖x‖ ≤ 1 (:func:`erm_features`).
        labels: ``(n,)`` values in {−1, +1}.
        loss: ``"logistic"`` or ``"huber"``.
        regularization: λ > 0 (the total strong convexity, e.g. λ + Δ).
        huber_h: h of the Huber loss.
        linear: An optional linear term (objective perturbation passes b/n).

    Returns:
        ``(f, gradient norm at f)``.

    Raises:
        SpecError: a bad loss, λ or h; ValueError: features and labels disagree.
    """
    loss_curvature(loss, huber_h)
    lam = _positive_finite("regularization", regularization)
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or y.shape != (len(x),) or not np.isin(y, (-1.0, 1.0)).all():
        raise ValueError(f"features (shape {x.shape}) and labels (shape {y.shape}) must be (n, d) and (n,) "
                         "with labels in {-1, +1}")
    n = len(x)
    c = np.zeros(x.shape[1]) if linear is None else np.asarray(linear, dtype=np.float64)

    def objective(f: np.ndarray) -> tuple[float, np.ndarray]:
        value, slope = _loss_terms(loss, y * (x @ f), huber_h)
        return (float(value.mean() + 0.5 * lam * f @ f + c @ f),
                x.T @ (slope * y) / n + lam * f + c)

    result = optimize.minimize(objective, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B",
                               options={"maxiter": 20000, "maxcor": 30, "ftol": 0.0, "gtol": GRADIENT_TOLERANCE})
    f = result.x
    return f, float(np.linalg.norm(objective(f)[1]))


def erm_features(codes: np.ndarray, sizes: tuple[int, ...], target: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm features (one-hot of the other attributes and a constant, over √m) and ±1 labels.

    Args:
        codes: ``(n, m)`` int codes already checked against ``sizes``.
        sizes: The public number of categories; ``sizes[target]`` must be 2.
        target: The target attribute's index.

    Returns:
        ``(features (n, d), labels (n,))`` with d = Σ_{j≠target} sizes[j] + 1 and every
        feature row of norm exactly 1.
    """
    others = [j for j in range(len(sizes)) if j != target]
    encoded = one_hot(codes[:, others], [sizes[j] for j in others]).toarray()
    features = np.hstack([encoded, np.ones((len(codes), 1))]) / math.sqrt(len(sizes))
    return features, np.where(codes[:, target] == 1, 1.0, -1.0)


def nonprivate_erm_accuracies(train: np.ndarray | pd.DataFrame, test: np.ndarray | pd.DataFrame, *,
                              sizes: tuple[int, ...], target: int, loss: str,
                              regularizations: tuple[float, ...] = (1e-3, 1e-4, 1e-5, 1e-6),
                              huber_h: float = 0.5) -> dict[float, float]:
    """Test accuracy of the non-private ERM fit for each λ (Table 4's "Non Private" row).

    The paper picks, for the DP baselines, "whichever value maximizes the accuracy of the
    non-private classification model" — an optimistic, non-private choice made on reals; the
    ε of the DP baselines does not pay for it (as in the paper).

    Args:
        train, test: ``(n, m)`` integer codes over ``sizes``; ``sizes[target]`` must be 2.
        sizes: The public number of categories of each attribute.
        target: The target attribute's index (code 1 is the positive class).
        loss: ``"logistic"`` or ``"huber"``.
        regularizations: The λ grid (the paper's by default).
        huber_h: h of the Huber loss.

    Returns:
        ``{λ: accuracy on test}``.

    Raises:
        SchemaError: a table not over ``sizes`` or a target without exactly 2 categories.
        SpecError: a bad loss, λ or h.
    """
    from privlab.mechanisms.plausible_deniability.evaluation_data import check_sizes, coded_table

    sizes = check_sizes(sizes)
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or not 0 <= target < len(sizes) \
            or sizes[target] != 2:
        raise SchemaError(f"target ({target!r}) must be the index of an attribute with exactly 2 categories")
    x_train, y_train = erm_features(coded_table(train, sizes, name="train"), sizes, int(target))
    x_test, y_test = erm_features(coded_table(test, sizes, name="test"), sizes, int(target))
    out = {}
    for lam in regularizations:
        coef, _ = fit_erm(x_train, y_train, loss=loss, regularization=lam, huber_h=huber_h)
        out[float(lam)] = float(np.mean(np.where(x_test @ coef > 0, 1.0, -1.0) == y_test))
    return out


# --- the estimator -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPLinearClassifierParams:
    """Hyperparameters of a DP linear classifier (module docstring).

    Attributes:
        epsilon: ε, finite and > 0.
        regularization: λ, finite and > 0 (the paper's grid: 10⁻³ … 10⁻⁶).
        loss: ``"logistic"`` (LR) or ``"huber"`` (SVM).
        perturbation: ``"output"`` (Algorithm 1) or ``"objective"`` (Algorithm 2).
        huber_h: h of the Huber loss, finite and > 0 (Chaudhuri et al.'s experiments: 0.5).
    """

    epsilon: float
    regularization: float
    loss: str = "logistic"
    perturbation: str = "objective"
    huber_h: float = 0.5

    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "regularization": [Interval(Real, 0, None, closed="neither")],
        "loss": [Options(str, LOSSES)],
        "perturbation": [Options(str, PERTURBATIONS)],
        "huber_h": [Interval(Real, 0, None, closed="neither")],
    }

    def __post_init__(self) -> None:
        validate_parameters(self._parameter_constraints, dataclasses.asdict(self), value_error=SpecError)


class DPLinearClassifier(PrivateEstimator):
    """ε-DP logistic regression or linear (Huber) SVM on integer codes (module docstring).

    Fitted attributes: ``coef_`` (d weights, the last the intercept's), ``domain_``,
    ``target_`` (its name), ``epsilon_prime_``, ``delta_regularization_`` (Δ, objective
    perturbation), ``optimality_`` (gradient norm of the solved objective), ``events_``.
    """

    name: ClassVar[str] = "dp_erm_classifier"
    Params: ClassVar[type] = DPLinearClassifierParams
    release_safe: ClassVar[bool] = False

    def _research_only_reason(self) -> str:
        return "its noise vector comes from a seeded floating-point generator (Gamma norm, Gaussian direction)"

    @staticmethod
    def _target_index(domain: Domain, target: str) -> int:
        if not isinstance(domain, Domain):
            raise TypeError(f"domain ({domain!r}) must be a Domain")
        if target not in domain.names:
            raise SchemaError(f"target ({target!r}) must be an attribute of the domain ({list(domain.names)})")
        index = domain.names.index(target)
        if domain.sizes[index] != 2:
            raise SchemaError(f"target ({target!r}, {domain.sizes[index]} categories) must have exactly 2 categories")
        if len(domain) < 2:
            raise SchemaError(f"domain ({list(domain.names)}) must have at least one attribute besides the target")
        return index

    def planned_events(self, domain: Domain, n: int, *, target: str, scope: str = "data") -> list[PrivacyEvent]:
        """The one event a fit on ``n`` records records, from public inputs only.

        Raises:
            TypeError: ``domain`` is not a Domain.
            SchemaError: ``target`` is not a two-category attribute of ``domain``.
            SpecError: n < 1.
        """
        self._target_index(domain, target)
        n = _count("n", n)
        p = self.params
        d = sum(domain.sizes) - 2 + 1
        c = loss_curvature(p.loss, p.huber_h)
        common: tuple[tuple[str, Any], ...] = (("loss", p.loss), ("dimension", d), ("regularization", p.regularization),
                                               ("norm", "l2"), ("neighbouring", "replace_one"))
        if p.perturbation == "output":
            sensitivity = output_perturbation_sensitivity(n, p.regularization)
            beta = 1.0 / (sensitivity / p.epsilon)
            return [PrivacyEvent(name=f"dp_erm {p.loss} output perturbation", mechanism="erm_output_perturbation",
                                 epsilon=p.epsilon, sensitivity=sensitivity, noise_scale=sensitivity / p.epsilon,
                                 scope=scope, step="dp_erm", details=(*common, ("beta", beta)))]
        epsilon_prime, delta_reg = objective_perturbation_parameters(p.epsilon, n, p.regularization, c)
        return [PrivacyEvent(name=f"dp_erm {p.loss} objective perturbation", mechanism="erm_objective_perturbation",
                             epsilon=p.epsilon, sensitivity=2.0, noise_scale=2.0 / epsilon_prime, scope=scope,
                             step="dp_erm",
                             details=(*common, ("beta", epsilon_prime / 2.0), ("epsilon_prime", epsilon_prime),
                                      ("delta_regularization", delta_reg), ("curvature", c)))]

    def fit(self, data: pd.DataFrame, *, domain: Domain, target: str, ledger: Ledger, source: RandomSource,
            scope: str = "data") -> Self:
        """Fit on ``data`` (integer codes over ``domain``) to predict ``target``.

        Raises:
            TypeError: a wrong-typed ledger, source or domain.
            ModeError: a release-mode source (research-only).
            SchemaError: data not over ``domain``; a target that is not a two-category attribute.
            BudgetExceededError: the plan does not fit the ledger (nothing drawn).
        """
        self._check_protocol_arguments(ledger, source)
        index = self._target_index(domain, target)
        if not isinstance(data, pd.DataFrame):
            raise SchemaError(f"data ({type(data).__name__}) must be a DataFrame of integer codes")
        codes = domain.validate(data, what="data").to_numpy(dtype=np.int64)
        plan = self.planned_events(domain, len(codes), target=target, scope=scope)
        p = self.params

        def run() -> None:
            event = ledger.spend(plan[0])
            features, labels = erm_features(codes, domain.sizes, index)
            n, d = features.shape
            details = dict(event.details)
            if int(details["dimension"]) != d:
                raise LedgerError(f"dimension ({d}) must be the planned one ({details['dimension']})")
            noise = sample_l2_laplace_noise(d, float(details["beta"]), source.dp_generator(purpose="dp_erm.noise"))
            if p.perturbation == "output":
                coef, optimality = fit_erm(features, labels, loss=p.loss, regularization=p.regularization,
                                           huber_h=p.huber_h)
                coef = coef + noise
                self.epsilon_prime_, self.delta_regularization_ = p.epsilon, 0.0
            else:
                delta_reg = float(details["delta_regularization"])
                coef, optimality = fit_erm(features, labels, loss=p.loss, regularization=p.regularization + delta_reg,
                                           huber_h=p.huber_h, linear=noise / n)
                self.epsilon_prime_, self.delta_regularization_ = float(details["epsilon_prime"]), delta_reg
            self.coef_ = coef
            self.optimality_ = optimality
            self.domain_ = domain
            self.target_ = target

        return self._charged_fit(plan, ledger=ledger, source=source, run=run)

    def decision_function(self, data: pd.DataFrame) -> np.ndarray:
        """fᵀx for each record of ``data`` (codes over the fitted domain; the target is ignored).

        Raises:
            NotFittedError: before ``fit``.
            SchemaError: data not over the fitted domain.
        """
        self._require_fitted("fit(data, domain=..., target=..., ledger=..., source=...)")
        codes = self.domain_.validate(data, what="data").to_numpy(dtype=np.int64)
        features, _ = erm_features(codes, self.domain_.sizes, self.domain_.names.index(self.target_))
        return features @ self.coef_

    def predict(self, data: pd.DataFrame) -> np.ndarray:
        """The predicted target code (1 where fᵀx > 0, else 0) of each record."""
        return (self.decision_function(data) > 0).astype(np.int64)
