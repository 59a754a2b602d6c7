"""Synthesis models g(θ) for the pMSE mechanism: parametric generators of synthetic data.

The mechanism samples θ privately and releases data drawn from g(θ) (post-processing), so a
model only needs to say which θ are valid and how to draw n rows. The built-in family is the
sequential linear-Gaussian model for q continuous columns:

    X₁ ~ N(β₁₀, σ₁²),   X_j | X_{<j} ~ N(β_j0 + Σ_{k<j} β_jk X_k, σ_j²),   j = 2..q,

with θ laid out column by column as (β_j0, β_j1, …, β_j,j−1, σ_j²). For q = 2 this is exactly
the paper's model θ = (θ₁, θ₂, θ₃, θ₄, θ₅): X₁ ~ N(θ₁, θ₂), X₂ ~ N(θ₃ + θ₄x₁, θ₅), where the
second argument of N is a variance.

The same model is the one every baseline of the paper's comparisons synthesises from (BPPD,
noisy BPPD, the functional-mechanism synthesizer): they fit θ by other means and keep it in
this layout (:meth:`SequentialLinearGaussian.pack`, :meth:`~SequentialLinearGaussian.from_scaled`).

A user model implements :class:`SynthesisModel` (``parameter_names``, ``is_valid``,
``sample``, ``default_start``) and is registered with :func:`register_synthesis_model`.

References: Snoke & Slavković, "pMSE Mechanism", Sections 3 and 5.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

import numpy as np

from privlab.platform.core.plugins import Registry


class SynthesisModel(abc.ABC):
    """A parametric generator g(θ) of n × q synthetic data matrices."""

    #: One name per entry of θ (logged with the released draws).
    parameter_names: tuple[str, ...]

    @abc.abstractmethod
    def is_valid(self, theta: np.ndarray) -> bool:
        """Whether θ is in the parameter space (e.g. variances > 0); invalid θ has density 0."""

    @abc.abstractmethod
    def sample(self, theta: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw an n × q matrix from g(θ)."""

    @abc.abstractmethod
    def default_start(self) -> np.ndarray:
        """A public, data-independent starting point for the Metropolis chains."""

    @property
    def dimension(self) -> int:
        return len(self.parameter_names)


class SequentialLinearGaussian(SynthesisModel):
    """Each column regressed on all previous ones with Gaussian noise (see module docstring)."""

    def __init__(self, columns: int) -> None:
        if not isinstance(columns, int) or isinstance(columns, bool) or columns < 1:
            raise ValueError(f"columns ({columns!r}) must be an integer ≥ 1")
        self.columns = columns
        names: list[str] = []
        self._slices: list[tuple[slice, int]] = []  # (coefficients, variance index) per column
        for j in range(columns):
            start = len(names)
            names += [f"beta{j + 1}_0"] + [f"beta{j + 1}_{k + 1}" for k in range(j)]
            self._slices.append((slice(start, start + j + 1), start + j + 1))
            names.append(f"var{j + 1}")
        self.parameter_names = tuple(names)

    def is_valid(self, theta: np.ndarray) -> bool:
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.dimension,) or not np.all(np.isfinite(theta)):
            return False
        return all(theta[variance] > 0 for _, variance in self._slices)

    def sample(self, theta: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        theta = np.asarray(theta, dtype=np.float64)
        if not self.is_valid(theta):
            raise ValueError(f"theta ({theta.tolist()!r}) must be finite with positive variances")
        data = np.empty((n, self.columns))
        for j, (coefficients, variance) in enumerate(self._slices):
            beta = theta[coefficients]
            mean = beta[0] + data[:, :j] @ beta[1:] if j else np.full(n, beta[0])
            data[:, j] = mean + np.sqrt(theta[variance]) * rng.standard_normal(n)
        return data

    def pack(self, coefficients: Sequence[np.ndarray], variances: Sequence[float]) -> np.ndarray:
        """θ from per-column ``(intercept, slopes on earlier columns…)`` and residual variances.

        Raises:
            ValueError: not one coefficient array of length j + 1 and one variance per column j.
        """
        if len(coefficients) != self.columns or len(variances) != self.columns:
            raise ValueError(
                f"coefficients and variances ({len(coefficients)}, {len(variances)} given) must have one "
                f"entry per column ({self.columns})"
            )
        theta = np.empty(self.dimension)
        for j, ((block, variance), beta, var) in enumerate(zip(self._slices, coefficients, variances, strict=True)):
            beta = np.asarray(beta, dtype=np.float64)
            if beta.shape != (j + 1,):
                raise ValueError(f"coefficients[{j}] (shape {beta.shape}) must hold {j + 1} numbers")
            theta[block] = beta
            theta[variance] = var
        return theta

    def unpack(self, theta: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The inverse of :meth:`pack`: ``(coefficients per column, residual variances)``."""
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.dimension,):
            raise ValueError(f"theta (shape {theta.shape}) must have shape ({self.dimension},)")
        return (tuple(theta[block].copy() for block, _ in self._slices),
                np.array([theta[variance] for _, variance in self._slices]))

    def from_scaled(self, coefficients: Sequence[np.ndarray], residual_sds: Sequence[float], *,
                    lower: Sequence[float], upper: Sequence[float]) -> np.ndarray:
        """θ in data units from a model fitted on ``x̃ = (x − c)/h`` with ``c = (lower + upper)/2``
        and ``h = (upper − lower)/2`` (as :func:`~.numeric_data.clip_and_scale` scales).

        With ``x_j = c_j + h_j x̃_j`` and ``x̃_j = b̃_0 + Σ_k b̃_k x̃_k + σ̃ e``:
        ``β_jk = h_j b̃_k / h_k``, ``β_j0 = c_j + h_j b̃_0 − Σ_k β_jk c_k``, ``σ_j² = (h_j σ̃)²``.
        """
        c = (np.asarray(lower, dtype=np.float64) + np.asarray(upper, dtype=np.float64)) / 2.0
        h = (np.asarray(upper, dtype=np.float64) - np.asarray(lower, dtype=np.float64)) / 2.0
        coefs, variances = [], []
        for j, (b, sd) in enumerate(zip(coefficients, residual_sds, strict=True)):
            b = np.asarray(b, dtype=np.float64)
            slopes = h[j] * b[1:] / h[:j]
            coefs.append(np.concatenate(([c[j] + h[j] * b[0] - float(slopes @ c[:j])], slopes)))
            variances.append(float(h[j] * sd) ** 2)
        return self.pack(coefs, variances)

    def default_start(self) -> np.ndarray:
        start = np.zeros(self.dimension)
        for _, variance in self._slices:
            start[variance] = 1.0
        return start


SYNTHESIS_MODELS: Registry[Callable[..., SynthesisModel]] = Registry(
    "synthesis model", groups=("privlab.synthesis_models",), listed_as="registered models")


def register_synthesis_model(name: str, factory: Callable[..., SynthesisModel]) -> None:
    """Make ``factory(**options)`` available to specs as ``model = "<name>"`` (list the module
    that calls this under the ``privlab.synthesis_models`` entry points)."""
    SYNTHESIS_MODELS.register(name, factory)


def _bivariate_normal() -> SynthesisModel:
    return SequentialLinearGaussian(2)


register_synthesis_model("sequential_linear_gaussian", SequentialLinearGaussian)
register_synthesis_model("bivariate_normal", _bivariate_normal)


def synthesis_model(name: str, **options: object) -> SynthesisModel:
    return SYNTHESIS_MODELS.get(name)(**options)
