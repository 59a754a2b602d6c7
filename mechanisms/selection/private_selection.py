"""Private selection with a known threshold (Liu & Talwar 2019, Hod & Canetti Algorithm 1).

A *base mechanism* (one release flow: fit a model, sample a candidate dataset, evaluate the
acceptance criteria with DP) is ε₁-DP. :func:`private_selection` runs it repeatedly, each time
on a configuration drawn uniformly from a public shortlist, and stops at the first accepted
output; after each rejection it stops with ⊥ with probability γ, and it stops with ⊥ after T
iterations. The whole search is (2ε₁ + ε₀)-DP however many iterations run, and is charged to
the ledger once, before the first iteration, with
:meth:`~privlab.platform.dp.ledger.Ledger.record_private_selection`.

Base mechanisms that are not pure ε-DP (flows with Gaussian measurements, ρ-zCDP) are described
by a :class:`RenyiBase` instead of ε₁: the same loop with γ > 0 and T = ∞ is then random
stopping with a geometric number of runs, (λ, ε'(λ))-RDP by Papernot & Steinke (2022),
Theorem 2 (:mod:`privlab.platform.dp.selection_accounting` states it with its conditions), and
is charged once as a :class:`~privlab.platform.dp.dp_events.RandomStoppingEvent`, which only
the ledger's ``rdp`` accountant composes.

Privacy:
    Only the final output is covered: the accepted configuration and the flow's output, or ⊥.
    How many iterations ran, which configurations were tried and which were rejected depend on
    the data and are not protected; they stay inside the run (and its enclave) and must not be
    released, logged to a shared tracker or reported.

References:
    Liu & Talwar, "Private Selection from Private Candidates" (STOC 2019); Hod & Canetti,
    "Differentially Private Release of Israel's National Registry of Live Births", Section 3.7
    (Algorithm 1), Section 4.9 and Theorem 3.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

from privlab.platform.core.errors import LedgerError
from privlab.platform.core.validation import check_real
from privlab.platform.dp import composition
from privlab.platform.dp.dp_events import DpEvent, RandomStoppingEvent
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource
from privlab.platform.dp.selection_accounting import check_random_stopping

__all__ = [
    "STOP_REASONS",
    "BaseMechanism",
    "PrivateSelectionParams",
    "RANDOM_STOPPING",
    "RenyiBase",
    "SelectionIteration",
    "SelectionOutcome",
    "private_selection",
]

Candidate = TypeVar("Candidate")
Output = TypeVar("Output")
Candidate_contra = TypeVar("Candidate_contra", contravariant=True)
Output_co = TypeVar("Output_co", covariant=True)

STOP_REASONS = ("accepted", "gamma", "horizon")
"""Why a selection stopped: an accepted output, the γ-coin, or the last allowed iteration."""


def _probability(name: str, value: object) -> float:
    p = check_real(name, value)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} ({value!r}) must be in [0, 1]")
    return p


@dataclass(frozen=True, kw_only=True)
class PrivateSelectionParams:
    """The stopping rule of private selection with a known threshold: γ, T and ε₀.

    Validated by :func:`privlab.platform.dp.composition.validate_private_selection`, the same
    check the ledger applies when it records the selection: γ ∈ [0, 1], ε₀ ∈ [0, 1] and
    T ≥ max{ln(2/ε₀)/γ, 1 + 1/(eγ)}, or the infinite horizon γ = 0, T = ∞, ε₀ = 0. With γ > 0
    and ε₀ = 0 the bound is infinite, so T must be ∞ (the γ-coin alone ends the search).
    ``steps`` is stored as an ``int`` when finite and as :data:`math.inf` otherwise; every
    field logs as an MLflow param.

    Attributes:
        gamma: γ, the probability of stopping with ⊥ after each rejected iteration.
        steps: T, the most iterations that run (a positive integer or :data:`math.inf`).
        epsilon0: ε₀, the budget paid for stopping with ⊥ at T.

    Raises:
        TypeError: a field is not a real number.
        LedgerError: the fields violate Theorem 3; the message names the smallest valid T.

    Privacy:
        With an ε₁-DP base mechanism the selection is (2ε₁ + ε₀)-DP under the base
        mechanism's neighbouring relation (replace-one in Hod & Canetti).

    References:
        Liu & Talwar (STOC 2019); Hod & Canetti, Algorithm 1 and Theorem 3.
    """

    gamma: float
    steps: float
    epsilon0: float

    def __post_init__(self) -> None:
        composition.validate_private_selection(
            steps=self.steps, gamma=self.gamma, epsilon0=self.epsilon0
        )
        steps = float(self.steps)
        object.__setattr__(self, "steps", math.inf if steps == math.inf else int(steps))
        object.__setattr__(self, "gamma", float(self.gamma))
        object.__setattr__(self, "epsilon0", float(self.epsilon0))

    @classmethod
    def infinite_horizon(cls) -> PrivateSelectionParams:
        """γ = 0, T = ∞, ε₀ = 0: run until a flow is accepted (Hod & Canetti, Section 4.9).

        Privacy:
            2ε₁-DP. The search ends only if the acceptance probability is positive; whether
            it is (0 or not) is the same on neighbouring datasets, because an ε₁-DP base
            mechanism cannot accept with probability 0 on one and not on the other, so
            non-termination reveals nothing. No cap can be added (see
            :func:`private_selection`); use :meth:`capped` for a search that must end.
        """
        return cls(gamma=0.0, steps=math.inf, epsilon0=0.0)

    @classmethod
    def capped(cls, *, steps: int, epsilon0: float) -> PrivateSelectionParams:
        """The smallest γ for which Theorem 3 covers a cap of ``steps`` iterations.

        γ = max{ln(2/ε₀)/T, 1/(e(T − 1))}, raised by a few ulps if float rounding leaves T just
        below the bound. For example T = 10000, ε₀ = 0.01 gives γ ≈ 5.3e-4: the cap costs
        ε₀ = 0.01 on top of 2ε₁, and a flow accepted with probability 0.1 ends in ⊥ with
        probability about 0.005 (see :meth:`bottom_probability`).

        Args:
            steps: T, an integer ≥ 2 (T = 1 satisfies T ≥ 1 + 1/(eγ) for no γ).
            epsilon0: ε₀ in (0, 1].

        Returns:
            The parameters, with T = ``steps``.

        Raises:
            TypeError: an argument has the wrong kind of value.
            LedgerError: no γ ≤ 1 covers ``steps`` with this ε₀.

        Privacy:
            (2ε₁ + ε₀)-DP with an ε₁-DP base mechanism.

        References:
            Hod & Canetti, Theorem 3 (the bound on T, solved for γ).
        """
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
            raise TypeError(f"steps ({steps!r}) must be an int")
        eps0 = check_real("epsilon0", epsilon0)
        if steps < 2:
            raise LedgerError(f"steps ({steps!r}) must be >= 2: T = 1 satisfies T >= 1 + 1/(eγ) for no γ")
        if not 0.0 < eps0 <= 1.0:
            raise LedgerError(f"epsilon0 ({epsilon0!r}) must be in (0, 1] for a capped search")
        t = int(steps)
        gamma = max(math.log(2.0 / eps0) / t, 1.0 / (math.e * (t - 1)))
        for _ in range(8):
            if gamma > 1.0:
                break
            try:
                composition.validate_private_selection(steps=t, gamma=gamma, epsilon0=eps0)
            except LedgerError:
                gamma = math.nextafter(gamma, math.inf)
                continue
            return cls(gamma=gamma, steps=t, epsilon0=eps0)
        raise LedgerError(
            f"steps ({steps!r}) must be larger for epsilon0 ({epsilon0!r}): the smallest γ that "
            f"covers it ({gamma:.6g}) exceeds 1; raise steps or epsilon0"
        )

    @property
    def is_infinite_horizon(self) -> bool:
        """Whether these are the never-give-up parameters γ = 0, T = ∞, ε₀ = 0."""
        return self.gamma == 0.0

    def expected_iterations(self, acceptance_probability: float) -> float:
        """E[number of iterations] when each flow is accepted with probability p.

        With q = (1 − p)(1 − γ) the search reaches iteration j with probability q^(j−1), so
        E = Σ_{j=1..T} q^(j−1) = (1 − q^T)/(1 − q), and 1/(p(1 − γ) + γ) for T = ∞ (the
        bound of Theorem 3, item 3); 1/p for the infinite horizon, ∞ when p = γ = 0.

        Args:
            acceptance_probability: p, the probability that one flow (on a uniformly drawn
                configuration) is accepted, e.g. estimated on public data.

        Raises:
            TypeError: p is not a real number.
            ValueError: p is outside [0, 1].

        Privacy:
            Planning only; p of the private data is itself private.
        """
        p = _probability("acceptance_probability", acceptance_probability)
        s = p + self.gamma - p * self.gamma  # 1 − q, the chance that an iteration ends the search
        if s == 0.0:
            return math.inf
        return self._reach_horizon_complement(s) / s

    def bottom_probability(self, acceptance_probability: float) -> float:
        """Pr[the search ends with ⊥] when each flow is accepted with probability p.

        Pr[accepted] = Σ_{j=1..T} q^(j−1)·p = p(1 − q^T)/(1 − q) with q = (1 − p)(1 − γ), and
        Pr[⊥] is its complement. Theorem 3, item 4, bounds it by (1 − p)(1 + ε₀/2)γ/p.
        For the infinite horizon it is 0 (with p = 0 the search never ends).

        Args:
            acceptance_probability: p, as in :meth:`expected_iterations`.

        Raises:
            TypeError: p is not a real number.
            ValueError: p is outside [0, 1].

        Privacy:
            Planning only; p of the private data is itself private.
        """
        p = _probability("acceptance_probability", acceptance_probability)
        s = p + self.gamma - p * self.gamma
        if s == 0.0:
            return 0.0
        return 1.0 - p * self._reach_horizon_complement(s) / s

    def _reach_horizon_complement(self, s: float) -> float:
        """1 − q^T for q = 1 − s, computed without cancellation (s > 0)."""
        if self.steps == math.inf or s == 1.0:
            return 1.0
        return -math.expm1(self.steps * math.log1p(-s))


@dataclass(frozen=True, kw_only=True)
class SelectionIteration:
    """One iteration of a selection, for the run's internal trace.

    Attributes:
        iteration: 1-based iteration number.
        candidate_index: the index of the configuration drawn from the shortlist.
        accepted: whether the flow's DP acceptance test passed.
        epsilon_spent: the ε the flow charged to its scratch ledger (at most ε₁).

    Privacy:
        Not covered by the guarantee (see :class:`SelectionOutcome`); never release it.
    """

    iteration: int
    candidate_index: int
    accepted: bool
    epsilon_spent: float


@dataclass(frozen=True, kw_only=True)
class SelectionOutcome(Generic[Candidate, Output]):
    """The result of :func:`private_selection`.

    Attributes:
        candidate: the accepted configuration, or ``None`` for ⊥.
        candidate_index: its index in the shortlist, or ``None`` for ⊥.
        output: the accepted flow's output, or ``None`` for ⊥.
        iterations: how many flows ran.
        stop_reason: one of :data:`STOP_REASONS`.
        trace: one :class:`SelectionIteration` per flow that ran, in order.
        accepted_events: the accepted flow's ledger events (its split of ε₁), ``()`` for ⊥.
        event: the single event charged to the outer ledger for the whole search.

    Privacy:
        Released (2ε₁ + ε₀)-DP (with a :class:`RenyiBase`: the Rényi-DP bound of its event):
        ``candidate``/``candidate_index`` and ``output``, or the fact of ⊥. ``accepted_events``
        are public when, as budgets must be, the flow's charges depend only on its configuration.
        ``iterations``, ``stop_reason`` and ``trace`` depend on the data and are *not* covered by
        the guarantee: which iterations failed, and how many, must stay inside the run.

    References:
        Hod & Canetti, Theorem 3, item 1 (output distribution) and item 3 (iterations).
    """

    candidate: Candidate | None
    candidate_index: int | None
    output: Output | None
    iterations: int
    stop_reason: str
    trace: tuple[SelectionIteration, ...]
    accepted_events: tuple[PrivacyEvent, ...]
    event: PrivacyEvent

    @property
    def is_bottom(self) -> bool:
        """Whether the search ended with ⊥ (no configuration accepted)."""
        return self.candidate_index is None


RANDOM_STOPPING = "private_selection_random_stopping"
"""The ledger mechanism name of a search accounted by :class:`RenyiBase` (Papernot & Steinke)."""


@dataclass(frozen=True, kw_only=True)
class RenyiBase(Generic[Candidate]):
    """Base mechanisms accounted in Rényi DP: what each flow may spend, and its scratch ledger.

    Attributes:
        flow_events: every flow's guarantee as an event with an RDP curve (e.g.
            :func:`~privlab.platform.dp.selection_accounting.flow_event`); the base mechanism's
            curve is their pointwise largest.
        scratch_ledger: a fresh ledger for one flow on a configuration (a zCDP synthesizer
            needs the zcdp accountant; a pure-ε one may keep an ε₁ cap).
        check_spent: called with the configuration and its flow's scratch ledger once the flow
            has run; raises when the flow spent more than its event in ``flow_events`` allows.

    Privacy:
        The search is covered only if every flow stays within its event; ``check_spent`` and
        the scratch ledger's own checks are where that is enforced.
    """

    flow_events: tuple[DpEvent, ...]
    scratch_ledger: Callable[[Candidate], Ledger]
    check_spent: Callable[[Candidate, Ledger], None]


class BaseMechanism(Protocol[Candidate_contra, Output_co]):
    """One ε₁-DP flow: ``run_once(candidate, iteration, *, source, ledger) -> (output, accepted)``.

    It must draw all its randomness from ``source``, charge every DP step (generation and
    acceptance) to ``ledger`` — a scratch ledger capped at ε₁ — and return its output with
    the DP acceptance decision as a ``bool``.
    """

    def __call__(
        self, candidate: Candidate_contra, iteration: int, *, source: RandomSource, ledger: Ledger
    ) -> tuple[Output_co, bool]: ...


def _effective_steps(params: PrivateSelectionParams, max_iterations: int | None) -> float:
    """T of the search actually run: ``params.steps`` unless the guard cuts it shorter."""
    if max_iterations is None:
        return params.steps
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, numbers.Integral):
        raise TypeError(f"max_iterations ({max_iterations!r}) must be an int or None")
    if max_iterations < 1:
        raise LedgerError(f"max_iterations ({max_iterations!r}) must be >= 1")
    guard = int(max_iterations)
    if guard >= params.steps:
        return params.steps
    if params.is_infinite_horizon:
        raise LedgerError(
            f"max_iterations ({max_iterations!r}) must be None with the infinite-horizon "
            "parameters (γ = 0, T = ∞, ε₀ = 0): stopping at a cap is an outcome, and with γ = 0 "
            "Theorem 3 covers no finite cap (it could cost up to max_iterations·ε₁). Drop the "
            "guard, or cap the search within the theorem with "
            f"params=PrivateSelectionParams.capped(steps={max(guard, 2)}, epsilon0=...) "
            "(ε₀ = 0.01 costs 0.01 more ε and needs γ ≈ ln(200)/steps)"
        )
    try:
        composition.validate_private_selection(
            steps=guard, gamma=params.gamma, epsilon0=params.epsilon0
        )
    except LedgerError as error:
        raise LedgerError(
            f"max_iterations ({max_iterations!r}) must itself satisfy Theorem 3, because "
            f"stopping at it is an outcome like stopping at T: {error}"
        ) from error
    return guard


def _check_accepted(value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"accepted ({value!r}) must be a bool: run_once returns (output, accepted) with the "
        "flow's DP acceptance decision (compare a score with the threshold inside the flow)"
    )


def private_selection(
    run_once: BaseMechanism[Candidate, Output],
    *,
    candidates: Sequence[Candidate],
    params: PrivateSelectionParams,
    epsilon1: float | None = None,
    source: RandomSource,
    ledger: Ledger,
    renyi: RenyiBase[Candidate] | None = None,
    name: str = "private_selection",
    scope: str = "data",
    step: str = "private_selection",
    max_iterations: int | None = None,
    on_iteration: Callable[[SelectionIteration], None] | None = None,
) -> SelectionOutcome[Candidate, Output]:
    """Run flows on uniformly drawn configurations until one is accepted (Algorithm 1).

    The search is charged to ``ledger`` once, as 2ε₁ + ε₀, *before* the first iteration, so
    a search over budget never touches the data. Then for j = 1, 2, …: draw a configuration
    uniformly from ``candidates`` with ``source``; run ``run_once`` on it with a fresh
    scratch :class:`~privlab.platform.dp.ledger.Ledger` capped at ε₁ (pure DP), which is never
    added to ``ledger``; stop if accepted; stop with ⊥ if j = T; otherwise stop with ⊥ with
    probability γ (a ``source.bernoulli`` draw, skipped when γ = 0). At j = T the γ-coin of
    Algorithm 1 is not flipped: either way the result is ⊥.

    Termination: with the infinite horizon the loop ends only once a flow is accepted, so it
    needs an acceptance probability > 0 (estimate it on public data first, as Hod & Canetti
    did; see :meth:`PrivateSelectionParams.expected_iterations`).

    The ``max_iterations`` guard: the guard is public and data-independent, but halting on it
    is itself an outcome ("nothing was released"), and its probability, (1 − p)^M with
    γ = 0, can differ by a factor up to e^(M·ε₁) between neighbouring datasets. A guarded
    search therefore *is* Algorithm 1 with T = min(T, M) and is accounted that way:

    * M ≥ T: the guard never binds; nothing changes.
    * M < T with γ > 0: (γ, M, ε₀) must satisfy Theorem 3's bound (refused otherwise); the
      ledger records T = M, and reaching M ends with ⊥ like reaching T.
    * M < T = ∞ with the infinite horizon (γ = 0): refused with :class:`LedgerError` before
      anything is charged or run, because no finite cap is covered at γ = 0. A cap within
      the theorem costs little: :meth:`PrivateSelectionParams.capped` (e.g. T = 10000 for
      ε₀ = 0.01).

    Args:
        run_once: the ε₁-DP base mechanism (see :class:`BaseMechanism`). It receives the
            configuration, the 1-based iteration number, ``source`` and the scratch ledger.
        candidates: the public shortlist of configurations, non-empty.
        params: γ, T and ε₀.
        epsilon1: ε₁, the budget of one flow (generation ε + acceptance ε), finite and > 0.
        source: the run's random source; every draw (configuration, γ-coin, the flows' own)
            goes through it, so a release run is replayable from its transcript.
        ledger: charged once with :meth:`~privlab.platform.dp.ledger.Ledger.record_private_selection`.
        name: what is selected, recorded in the ledger.
        scope: the data the flows touch, recorded in the ledger.
        step: the pipeline step, recorded in the ledger.
        max_iterations: the guard M above, or ``None``.
        on_iteration: called with each :class:`SelectionIteration` (progress; internal only).
        renyi: instead of ``epsilon1``, base mechanisms accounted in Rényi DP (module docstring):
            ``params`` must be γ in (0, 1), T = ∞, ε₀ = 0 and ``max_iterations`` ``None``; the
            search is charged as one random-stopping event, each flow gets
            ``renyi.scratch_ledger(configuration)`` and is checked by ``renyi.check_spent``.

    Returns:
        A :class:`SelectionOutcome`.

    Raises:
        TypeError: an argument has the wrong kind of value, or ``run_once`` does not return
            ``(output, bool)``.
        LedgerError: invalid ε₁ or guard; or a flow charged nothing to its scratch ledger, or
            charged the outer ledger.
        BudgetExceededError: the search would exceed ``ledger``'s cap (nothing ran); or,
            raised inside ``run_once``, a flow tried to spend more than ε₁.

        An exception from ``run_once`` propagates; the charge stays recorded, since flows
        may already have read the data.

    Privacy:
        (2ε₁ + ε₀)-DP when every flow is ε₁-DP, for the neighbouring relation of the flows
        (replace-one in Hod & Canetti); the infinite horizon is 2ε₁-DP. Budget split:
        ε₁ = ε_generation + ε_acceptance inside each flow (enforced by the scratch ledger's
        cap), and the outer ledger holds a single event of 2ε₁ + ε₀. Only the outcome's
        configuration and output (or ⊥) are covered; the number of iterations and the trace
        are not (see :class:`SelectionOutcome`).

    References:
        Liu & Talwar (STOC 2019); Hod & Canetti, Algorithm 1, Section 4.9 and Theorem 3.
    """
    if not callable(run_once):
        raise TypeError(f"run_once ({run_once!r}) must be callable")
    if not isinstance(candidates, Sequence) or isinstance(candidates, (str, bytes)):
        raise TypeError(f"candidates ({candidates!r}) must be a sequence of configurations")
    if len(candidates) == 0:
        raise LedgerError(f"candidates ({candidates!r}) must be non-empty")
    if not isinstance(params, PrivateSelectionParams):
        raise TypeError(f"params ({params!r}) must be a PrivateSelectionParams")
    if not isinstance(source, RandomSource):
        raise TypeError(f"source ({source!r}) must be a RandomSource")
    if not isinstance(ledger, Ledger):
        raise TypeError(f"ledger ({ledger!r}) must be a Ledger")
    if on_iteration is not None and not callable(on_iteration):
        raise TypeError(f"on_iteration ({on_iteration!r}) must be callable or None")
    if renyi is None:
        if epsilon1 is None:
            raise TypeError("private_selection needs epsilon1 (pure ε-DP flows) or renyi (flows accounted in RDP)")
        horizon = _effective_steps(params, max_iterations)
        event = ledger.record_private_selection(
            name=name,
            epsilon1=epsilon1,
            epsilon0=params.epsilon0,
            gamma=params.gamma,
            steps=horizon,
            scope=scope,
            step=step,
        )
        epsilon1 = float(epsilon1)
    else:
        if epsilon1 is not None:
            raise TypeError("give private_selection either epsilon1 or renyi, not both")
        if not isinstance(renyi, RenyiBase):
            raise TypeError(f"renyi ({renyi!r}) must be a RenyiBase")
        check_random_stopping(gamma=params.gamma, steps=params.steps, epsilon0=params.epsilon0)
        if max_iterations is not None:
            raise LedgerError("max_iterations must be None with renyi: a cap on the number of flows is an outcome "
                              "the random-stopping bound does not cover; gamma bounds the expected number (1/gamma)")
        horizon = math.inf
        event = ledger.spend(PrivacyEvent.from_dp_event(
            RandomStoppingEvent(renyi.flow_events, params.gamma), name=name, mechanism=RANDOM_STOPPING,
            scope=scope, step=step, details=(("gamma", params.gamma), ("steps", "inf"))))
    recorded = len(ledger)
    trace: list[SelectionIteration] = []
    iteration = 0
    while True:
        iteration += 1
        index = int(source.integers(low=0, high=len(candidates)))
        if renyi is None:
            scratch = Ledger(epsilon_cap=epsilon1, delta_cap=0.0)
        else:
            scratch = renyi.scratch_ledger(candidates[index])
        result = run_once(candidates[index], iteration, source=source, ledger=scratch)
        if len(ledger) != recorded:
            raise LedgerError(
                f"run_once charged the outer ledger in iteration {iteration}; a flow must charge "
                "only the scratch ledger it is given (the selection is charged once)"
            )
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"run_once's result ({result!r}) must be a tuple (output, accepted)")
        output, accepted = result[0], _check_accepted(result[1])
        if len(scratch) == 0:
            raise LedgerError(
                f"run_once charged nothing to its scratch ledger in iteration {iteration}; a flow "
                "that reads the data must charge its DP steps (at most epsilon1 in total) there"
            )
        if renyi is not None:
            renyi.check_spent(candidates[index], scratch)
        record = SelectionIteration(
            iteration=iteration,
            candidate_index=index,
            accepted=accepted,
            epsilon_spent=scratch.total().epsilon,
        )
        trace.append(record)
        if on_iteration is not None:
            on_iteration(record)
        if accepted:
            return SelectionOutcome(
                candidate=candidates[index],
                candidate_index=index,
                output=output,
                iterations=iteration,
                stop_reason="accepted",
                trace=tuple(trace),
                accepted_events=scratch.events,
                event=event,
            )
        if iteration >= horizon:
            reason = "horizon"
        elif params.gamma > 0.0 and source.bernoulli(p=params.gamma):
            reason = "gamma"
        else:
            continue
        return SelectionOutcome(
            candidate=None,
            candidate_index=None,
            output=None,
            iterations=iteration,
            stop_reason=reason,
            trace=tuple(trace),
            accepted_events=(),
            event=event,
        )
