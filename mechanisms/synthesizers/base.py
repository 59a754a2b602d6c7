"""The :class:`Synthesizer` interface shared by every DP synthesizer, and their registry.

A synthesizer learns a generative model of a frame of integer codes over a public
:class:`~privlab.mechanisms.tabular.domain.Domain` with ε-DP (:meth:`Synthesizer.fit`) and then
samples synthetic records from it as post-processing (:meth:`Synthesizer.sample`). Its
hyperparameters are a frozen keyword-only dataclass (``Params``) validated in
``__post_init__``; what :meth:`~Synthesizer.fit` learned lives in attributes ending in ``_``
(scikit-learn), never including the data.

Budget protocol: a synthesizer declares its DP steps up front, from public inputs only
(ε, the domain and the public record count ``n``), as :class:`BudgetStep` records
(:meth:`Synthesizer.budget_steps`). :meth:`Synthesizer.planned_events` turns them into the
:class:`~privlab.platform.dp.privacy_event.PrivacyEvent` list a research run records, so the platform
can check the plan against the budget before anything runs (``Workload.plan``,
``Ledger.check_plan``). :meth:`Synthesizer.fit` refuses to start when the plan does not fit the
ledger's cap, spends the steps in order through the basic Laplace and exponential mechanisms,
and checks afterwards that what it recorded is exactly the plan.

Privacy:
    The neighbouring relation is replace-one with ``n`` public (Hod & Canetti 2024, Section
    4.4.2): the number of records is public and neighbours differ in one record's values.
    Each synthesizer documents its sensitivities for that relation. The steps compose
    sequentially, and their ε shares are split with :func:`split_epsilon` so that the
    ledger's total is exactly the ε given to ``fit``.

References:
    Hod & Canetti (2024), "Differentially Private Release of Israel's National Registry of Live
    Births", Sections 3.3, 4.4 and 4.7.2; scikit-learn's estimator API (fitted attributes end
    in ``_``).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Self

import numpy as np
import pandas as pd

from privlab.mechanisms.basic.exponential import exponential_mechanism
from privlab.mechanisms.basic.gaussian import gaussian_mechanism
from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.platform.core.errors import LedgerError, NotFittedError, SchemaError, SpecError
from privlab.platform.core.plugins import Registry, build, require_frozen_kw_only
from privlab.platform.core.validation import check_count, check_positive_finite, check_text
from privlab.platform.dp.budget import split_epsilon
from privlab.platform.dp.dp_events import GaussianEvent
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = [
    "SYNTHESIZERS",
    "BudgetStep",
    "NotFittedError",
    "Synthesizer",
    "register_synthesizer",
    "split_epsilon",
    "hyperparameter_names",
    "synthesizer_class",
    "synthesizer_from_spec",
    "synthesizer_names",
]

MECHANISMS = ("laplace", "exponential", "gaussian")
"""The research-mode mechanism names a :class:`BudgetStep` can use (``"gaussian"``: zCDP
synthesizers, :mod:`privlab.mechanisms.synthesizers.zcdp`)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BudgetStep:
    """One DP step a synthesizer will take, known before the data is touched.

    Attributes:
        name: The ledger name of the step; it depends on public inputs only (a step index or
            a column name), never on what earlier DP steps selected.
        mechanism: ``"laplace"``, ``"exponential"`` or ``"gaussian"`` (research-mode names;
            release mode records ``"laplace_lattice"``, ``"permute_and_flip"`` and
            ``"discrete_gaussian"``).
        epsilon: The step's ε, > 0 (Laplace and exponential steps; ``None`` for Gaussian).
        sensitivity: The global sensitivity Δ of the statistic (Laplace: L1 sensitivity of the
            released vector; exponential: of every candidate's utility; Gaussian: L2
            sensitivity of the released vector), > 0.
        rho: The step's zCDP ρ, > 0 (Gaussian steps only): σ = Δ/sqrt(2ρ).

    Raises:
        TypeError: ``epsilon`` or ``sensitivity`` is not a real number.
        ValueError: a field has a wrong value.
    """

    name: str
    mechanism: str
    epsilon: float | None = None
    sensitivity: float
    rho: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name ({self.name!r}) must be a non-empty string")
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism ({self.mechanism!r}) must be one of {list(MECHANISMS)}")
        budget, unused = ("rho", "epsilon") if self.mechanism == "gaussian" else ("epsilon", "rho")
        if getattr(self, unused) is not None:
            raise ValueError(f"a {self.mechanism} step takes {budget}, not {unused} ({getattr(self, unused)!r})")
        for label in (budget, "sensitivity"):
            object.__setattr__(self, label, check_positive_finite(label, getattr(self, label)))

    @property
    def noise_scale(self) -> float:
        """The research-mode scale: ``Δ/ε`` (Laplace), ``2Δ/ε`` (exponential mechanism) or
        ``σ = Δ/sqrt(2ρ)`` (Gaussian)."""
        if self.mechanism == "gaussian":
            return self.sensitivity / math.sqrt(2.0 * self.rho)  # type: ignore[operator]
        if self.mechanism == "laplace":
            return self.sensitivity / self.epsilon  # type: ignore[operator]
        return 2 * self.sensitivity / self.epsilon  # type: ignore[operator]

    @property
    def zcdp_rho(self) -> float:
        """The step's ρ under zCDP: its own ρ (Gaussian) or ε²/2 (a pure ε-DP step, Bun &
        Steinke 2016, Proposition 1.4: the bound the ledger's zcdp accountant uses)."""
        if self.mechanism == "gaussian":
            return self.rho  # type: ignore[return-value]
        return self.epsilon * self.epsilon / 2.0  # type: ignore[operator]

    def event(self, *, scope: str, step: str) -> PrivacyEvent:
        """The event a research-mode run records for this step (bit-identical)."""
        if self.mechanism == "gaussian":
            sigma = self.noise_scale
            return PrivacyEvent.from_dp_event(
                GaussianEvent(self.sensitivity, sigma), name=self.name, mechanism="gaussian", scope=scope,
                step=step, sensitivity=self.sensitivity, noise_scale=sigma)
        return PrivacyEvent(
            name=self.name,
            mechanism=self.mechanism,
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
            noise_scale=self.noise_scale,
            scope=scope,
            step=step,
        )


class Synthesizer(PrivateEstimator, abc.ABC):
    """A DP generative model of a frame of integer codes over a public :class:`Domain`.

    Subclasses set ``name`` and ``Params`` (a frozen keyword-only dataclass of
    hyperparameters) and implement :meth:`budget_steps`, :meth:`_fit` and :meth:`_sample`.
    The public :meth:`fit` and :meth:`sample` validate their inputs, enforce the budget
    protocol (module docstring) and build the output frame.

    Args:
        params: The hyperparameters, an instance of ``Params``.

    Raises:
        TypeError: ``params`` is not an instance of ``Params``.

    Privacy:
        :meth:`fit` is ε-DP under replace-one neighbouring with ``n`` public when every step
        declared by :meth:`budget_steps` is DP with its ε (basic composition; the shares sum
        to ε exactly). :meth:`sample` is post-processing.

    References:
        Hod & Canetti (2024), Section 3.3 (the generative model is a black box of the scheme).
    """

    def __init__(self, params: Any) -> None:
        if not isinstance(params, self.Params):
            raise TypeError(
                f"params ({params!r}) must be a {self.Params.__qualname__}; build one from a spec "
                f"with synthesizer_from_spec({self.name!r}, ...)"
            )
        super().__init__(params)

    # --- the budget protocol -----------------------------------------------------------------

    @abc.abstractmethod
    def budget_steps(self, epsilon: float, domain: Domain, n: int) -> tuple[BudgetStep, ...]:
        """The DP steps :meth:`fit` takes, in order, from public inputs only.

        Their ε must :func:`math.fsum` to exactly ``epsilon`` (use :func:`split_epsilon`).

        Raises:
            SchemaError: the domain or ``n`` cannot be handled (the message says why).
        """

    def planned_events(
        self, epsilon: float, domain: Domain, n: int, *, scope: str = "data"
    ) -> list[PrivacyEvent]:
        """The events a research-mode :meth:`fit` on ``n`` records over ``domain`` records.

        The list equals ``ledger.events`` after such a fit, element for element; release mode
        records the same names, ε, sensitivities and scope with the mechanisms
        ``laplace_lattice`` / ``permute_and_flip`` and lattice-padded Laplace scales.

        Args:
            epsilon: The total ε of the fit.
            domain: The public domain.
            n: The public number of records.
            scope: The ledger scope of the data.

        Returns:
            One event per :class:`BudgetStep`, in order.

        Raises:
            TypeError, ValueError: a bad argument.
            SchemaError: the synthesizer cannot handle this domain or ``n``.
        """
        epsilon, n, scope = self._plan_arguments(epsilon, domain, n, scope)
        steps = self._validated_steps(epsilon, domain, n)
        return [step.event(scope=scope, step=self._ledger_step) for step in steps]

    @staticmethod
    def _plan_arguments(epsilon: float, domain: Domain, n: int, scope: str) -> tuple[float, int, str]:
        """``(epsilon, n, scope)`` of a plan, checked: ε positive and finite, a :class:`Domain`,
        ``n ≥ 0``, a non-empty scope."""
        epsilon = check_positive_finite("epsilon", epsilon)
        if not isinstance(domain, Domain):
            raise TypeError(f"domain ({domain!r}) must be a Domain")
        return epsilon, check_count("n", n, minimum=0), check_text("scope", scope)

    @property
    def _ledger_step(self) -> str:
        return f"{self.name}.fit"

    def _validated_steps(self, epsilon: float, domain: Domain, n: int) -> tuple[BudgetStep, ...]:
        steps = tuple(self.budget_steps(epsilon, domain, n))
        if not steps:
            raise LedgerError(f"{self.name}: budget_steps returned no DP step for epsilon {epsilon!r}")
        total = math.fsum(step.epsilon for step in steps)
        if total != epsilon:
            raise LedgerError(
                f"{self.name}: the declared steps spend {total!r}, not epsilon ({epsilon!r}); "
                "split budgets with split_epsilon"
            )
        return steps

    def _fit_steps(self, epsilon: float, domain: Domain, n: int, *, ledger: Ledger) -> tuple[BudgetStep, ...]:
        """The steps :meth:`fit` takes for ``epsilon`` on ``ledger`` (zCDP synthesizers read
        the ledger's δ'' here)."""
        return self._validated_steps(epsilon, domain, n)

    # --- fitting ---------------------------------------------------------------------------

    def fit(
        self,
        data: pd.DataFrame,
        *,
        domain: Domain,
        epsilon: float,
        ledger: Ledger,
        source: RandomSource,
        scope: str = "data",
    ) -> Self:
        """Learn the model from ``data`` with ε-DP, charging ``ledger`` exactly ``epsilon``.

        ``data`` is validated with ``domain.validate`` and copied to a private code array that
        is released when the fit returns; the fitted object keeps only DP outputs and public
        facts (the domain, ε, ``n``, the recorded events). A previous fit is discarded.

        Args:
            data: The transformed private frame: the domain's columns as integer codes.
            domain: The public domain (from the spec, never from the data).
            epsilon: The total ε of the fit, > 0.
            ledger: Charged step by step; checked against its cap before anything runs.
            source: The run's random source (seeded in research mode, CSPRNG in release).
            scope: The ledger scope of ``data``.

        Returns:
            ``self``, fitted.

        Raises:
            TypeError: an argument has the wrong kind of value.
            ValueError: ``epsilon`` is not positive and finite, or ``scope`` is empty.
            SchemaError: ``data`` does not match ``domain`` (the message names the column and
                row), or the synthesizer cannot handle the domain or ``n``.
            BudgetExceededError: the planned steps would exceed the ledger's cap; nothing is
                charged or drawn.
            LedgerError: the steps recorded differ from the plan (a bug in the synthesizer).

        Privacy:
            ε-DP under replace-one neighbouring with ``n = len(data)`` public; see the
            subclass for the steps and their sensitivities.
        """
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"data ({type(data).__name__}) must be a pandas DataFrame of codes")
        if not isinstance(domain, Domain):
            raise TypeError(f"domain ({domain!r}) must be a Domain")
        self._check_protocol_arguments(ledger, source)
        epsilon = check_positive_finite("epsilon", epsilon)
        scope = check_text("scope", scope)
        frame = domain.validate(data, what=f"{self.name} training data")
        n = len(frame)
        steps = self._fit_steps(epsilon, domain, n, ledger=ledger)
        plan = [step.event(scope=scope, step=self._ledger_step) for step in steps]
        # A (d, n) private copy, one contiguous row per column; dropped when fit returns.
        codes = np.array(frame.to_numpy(dtype=CODE_DTYPE).T, dtype=CODE_DTYPE, order="C")
        del frame

        def learn() -> None:
            self._fit(codes, domain=domain, steps=steps, ledger=ledger, source=source, scope=scope)

        self._charged_fit(plan, ledger=ledger, source=source, run=learn)
        self.domain_ = domain
        self.epsilon_ = epsilon
        self.n_records_ = n
        return self

    def _laplace(
        self,
        step: BudgetStep,
        value: np.ndarray,
        *,
        ledger: Ledger,
        source: RandomSource,
        scope: str,
    ) -> np.ndarray:
        """Release ``value + Lap(Δ/ε)`` for a declared Laplace step (charges the ledger)."""
        if step.mechanism != "laplace":
            raise LedgerError(f"{self.name}: step {step.name!r} is declared as {step.mechanism}, not laplace")
        noisy = laplace_mechanism(
            np.asarray(value, dtype=np.float64), sensitivity=step.sensitivity, epsilon=step.epsilon,
            source=source, ledger=ledger, name=step.name, scope=scope, step=self._ledger_step,
        )
        return np.asarray(noisy, dtype=np.float64)

    def _exponential(
        self,
        step: BudgetStep,
        utilities: np.ndarray,
        *,
        ledger: Ledger,
        source: RandomSource,
        scope: str,
    ) -> int:
        """Select a candidate for a declared exponential-mechanism step (charges the ledger)."""
        if step.mechanism != "exponential":
            raise LedgerError(f"{self.name}: step {step.name!r} is declared as {step.mechanism}, not exponential")
        return exponential_mechanism(
            utilities, sensitivity=step.sensitivity, epsilon=step.epsilon, source=source,
            ledger=ledger, name=step.name, scope=scope, step=self._ledger_step,
        )

    def _gaussian(
        self,
        step: BudgetStep,
        counts: np.ndarray,
        *,
        ledger: Ledger,
        source: RandomSource,
        scope: str,
    ) -> np.ndarray:
        """Release ``counts + N(0, σ²)`` per cell for a declared Gaussian step (charges the
        ledger first); :func:`gaussian_mechanism` has the argument."""
        if step.mechanism != "gaussian":
            raise LedgerError(f"{self.name}: step {step.name!r} is declared as {step.mechanism}, not gaussian")
        return gaussian_mechanism(
            counts, sensitivity=step.sensitivity, rho=step.rho, source=source, ledger=ledger,  # type: ignore[arg-type]
            name=step.name, scope=scope, step=self._ledger_step,
        )

    @abc.abstractmethod
    def _fit(
        self,
        codes: np.ndarray,
        *,
        domain: Domain,
        steps: tuple[BudgetStep, ...],
        ledger: Ledger,
        source: RandomSource,
        scope: str,
    ) -> None:
        """Learn the model from ``codes`` (shape ``(d, n)``, int64, validated), spending
        ``steps`` in order through :meth:`_laplace` / :meth:`_exponential`. Must not keep a
        reference to ``codes`` or anything computed from it without DP."""

    # --- sampling --------------------------------------------------------------------------

    def sample(self, n: int, *, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` synthetic records from the fitted model.

        Args:
            n: The number of records, >= 0.
            rng: Post-processing randomness (in a flow, ``source.generator(purpose=...)``).

        Returns:
            A frame with the domain's columns in domain order, int64 codes, index ``0..n-1``.

        Raises:
            NotFittedError: :meth:`fit` has not completed.
            TypeError: ``n`` is not an int or ``rng`` not a ``numpy.random.Generator``.
            ValueError: ``n`` is negative.

        Privacy:
            Post-processing of the ε-DP model; it never touches the private data.
        """
        self._require_fitted("fit(data, domain=..., epsilon=..., ledger=..., source=...)")
        n = check_count("n", n, minimum=0)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
        columns = self._sample(n, rng)
        domain: Domain = self.domain_
        if columns.shape != (len(domain), n):
            raise SchemaError(f"{self.name}: sampled array has shape {columns.shape}, not {(len(domain), n)}")
        return pd.DataFrame(
            {name: np.asarray(columns[j], dtype=CODE_DTYPE) for j, name in enumerate(domain.names)},
            index=pd.RangeIndex(n),
        )

    @abc.abstractmethod
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` records as a ``(d, n)`` int64 array of codes, columns in domain order."""


# --- registry --------------------------------------------------------------------------------

def _check_synthesizer(name: str, cls: type[Synthesizer]) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Synthesizer)):
        raise TypeError(f"{cls!r} must be a Synthesizer subclass")
    if getattr(cls, "name", None) != name:
        raise TypeError(f"{cls.__qualname__}.name ({getattr(cls, 'name', None)!r}) must be a non-empty string")
    require_frozen_kw_only(cls.__qualname__, getattr(cls, "Params", None))


SYNTHESIZERS: Registry[type[Synthesizer]] = Registry(
    "synthesizer", groups=("privlab.synthesizers",), check=_check_synthesizer)


def register_synthesizer(cls: type[Synthesizer]) -> type[Synthesizer]:
    """Class decorator: register a :class:`Synthesizer` subclass under ``cls.name``
    (list its module under the ``privlab.synthesizers`` entry points).

    Raises:
        TypeError: ``cls`` is not a Synthesizer, or its ``Params`` is not a frozen
            keyword-only dataclass.
        RegistryError: another class is already registered under the name.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{getattr(cls, '__qualname__', cls)!r}.name ({name!r}) must be a non-empty string")
    return SYNTHESIZERS.register(name, cls)


def hyperparameter_names(name: str | None = None) -> tuple[str, ...]:
    """The hyperparameter keys of synthesizer ``name`` (its ``Params`` fields), or of every
    registered synthesizer when ``name`` is None: what a grid, a shortlist or ``evaluate`` may
    name beside ``synthesizer``, so a new synthesizer's settings reach them with no other change.

    Raises:
        RegistryError: ``name`` is not a registered synthesizer.
    """
    classes = [SYNTHESIZERS.get(name)] if name is not None else [cls for _, cls in SYNTHESIZERS.items()]
    return tuple(dict.fromkeys(f.name for cls in classes for f in dataclasses.fields(cls.Params)))


def synthesizer_names() -> tuple[str, ...]:
    """The registered synthesizer names, sorted."""
    return tuple(SYNTHESIZERS.names())


def synthesizer_class(name: str) -> type[Synthesizer]:
    """The class registered as ``name``.

    Raises:
        RegistryError: no synthesizer has that name (the message lists the registered ones).
    """
    return SYNTHESIZERS.get(name)


def synthesizer_from_spec(name: str, params: Mapping[str, Any], *, where: str) -> Synthesizer:
    """Build an unfitted synthesizer from a spec's name and hyperparameter table.

    Args:
        name: A registered synthesizer name.
        params: Its hyperparameters; every required key present, no unknown key.
        where: The spec location, for messages (e.g. ``"configuration 'pb-0.5'"``).

    Returns:
        The synthesizer.

    Raises:
        SpecError: unknown name (lists the registered names), ``params`` not a mapping,
            unknown or missing keys (lists the allowed ones) or an invalid value.
    """
    if not isinstance(name, str) or name not in SYNTHESIZERS:
        raise SpecError(
            f"{where}: synthesizer ({name!r}) must be one of {', '.join(SYNTHESIZERS.names())}"
        )
    if not isinstance(params, Mapping):
        raise SpecError(f"{where}: synthesizer params ({params!r}) must be a table of hyperparameters")
    cls = SYNTHESIZERS.get(name)
    where = f"{where} (synthesizer {name!r})"
    allowed = sorted(f.name for f in dataclasses.fields(cls.Params))
    unknown = sorted(set(params) - set(allowed), key=str)
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: "
            f"{', '.join(allowed) if allowed else f'none ({name} takes no hyperparameters)'}"
        )
    return cls(build(cls.Params, params, where=where))
