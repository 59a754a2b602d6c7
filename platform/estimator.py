"""The one contract of everything that fits on private data with DP and releases something.

A :class:`PrivateEstimator` is built from a frozen keyword-only ``Params`` dataclass (scikit-learn
style: settings in ``__init__``, learned state in attributes ending in ``_``, never the data).
Its ``fit`` computes its plan, the ledger events it will record, from public inputs only (ε,
a public domain or bounds, the public record count ``n`` and column count), and hands the
work to :meth:`PrivateEstimator._charged_fit`, which enforces the budget protocol in one place:

1. the estimator's random source may be used in its mode (``release_safe`` is ``False`` for
   research-only estimators: a non-DP baseline, or DP draws from a seeded PRNG);
2. the whole plan fits the ledger's cap on top of what it already holds
   (:func:`~privlab.platform.budget.preflight`), or nothing is charged or drawn;
3. the previous fit's state is dropped, and the estimator's own ``run`` spends the plan;
4. what ``run`` recorded is exactly the plan (:func:`~privlab.platform.ledger.check_conforms`),
   and ``events_`` keeps it.

Two families implement it: the tabular synthesizers of the release scheme
(:class:`~privlab.mechanisms.synthesizers.base.Synthesizer`, integer codes over a public
domain) and the pMSE paper's continuous-data mechanism and baselines
(:class:`~privlab.mechanisms.pmse.continuous.ContinuousSynthesizer`). One contract suite,
``tests/test_estimator_contract.py``, runs over every concrete subclass.

Privacy:
    An estimator's ``fit`` is DP with the ε its plan declares when every step of the plan is
    DP with its share (basic composition) under the ledger's neighbouring relation; the
    protocol guarantees that the ledger holds exactly those steps and that nothing is drawn
    when they do not fit. ``sample`` is post-processing of the fitted, DP state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self

from privlab.platform.budget import preflight
from privlab.platform.errors import ModeError, NotFittedError
from privlab.platform.ledger import Ledger, PrivacyEvent, check_conforms
from privlab.platform.randomness import RandomSource

__all__ = ["PrivateEstimator"]


class PrivateEstimator:
    """Base class: hyperparameters, fitted state and the budget protocol (module docstring).

    Subclasses set ``name`` (a non-empty string), ``Params`` (a frozen keyword-only
    dataclass) and ``release_safe``, and call :meth:`_charged_fit` from their ``fit``.

    Args:
        params: The hyperparameters, an instance of ``Params``.

    Raises:
        TypeError: ``params`` is not an instance of ``Params``.
    """

    name: ClassVar[str]
    Params: ClassVar[type]
    release_safe: ClassVar[bool] = True
    """Whether ``fit`` may run on a release-mode source (the OS CSPRNG with a transcript)."""

    def __init__(self, params: Any) -> None:
        if not isinstance(params, self.Params):
            raise TypeError(f"params ({params!r}) must be a {self.Params.__qualname__}")
        self._params = params

    @property
    def params(self) -> Any:
        """The hyperparameters (frozen)."""
        return self._params

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters as a plain dict (every value loggable as an MLflow param)."""
        return dataclasses.asdict(self._params)

    @property
    def is_fitted(self) -> bool:
        """Whether a fit has completed (its ledger events are kept in ``events_``)."""
        return "events_" in vars(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._params!r}, {'fitted' if self.is_fitted else 'not fitted'})"

    def _require_fitted(self, how: str) -> None:
        """Raise :class:`NotFittedError` naming the call that fits (``how``)."""
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call {how} first")

    def _clear_fitted(self) -> None:
        for attribute in [a for a in vars(self) if a.endswith("_") and not a.startswith("__")]:
            delattr(self, attribute)

    def _charged_fit(
        self,
        plan: Sequence[PrivacyEvent],
        *,
        ledger: Ledger,
        source: RandomSource,
        run: Callable[[], None],
        exact_sensitivity: bool = True,
    ) -> Self:
        """Check, run and verify one fit (module docstring, steps 1–4).

        Args:
            plan: The events the fit will record, in order, from public inputs only.
            ledger: Charged by ``run``; the plan is checked against its cap first.
            source: The run's random source; its mode is checked against ``release_safe``.
            run: Learns the fitted state from data the caller has already validated,
                spending ``plan`` through DP mechanisms that charge ``ledger``.
            exact_sensitivity: Whether recorded sensitivities must equal the plan's exactly
                (``False`` lets a step record a smaller, data-independent actual value).

        Returns:
            ``self``, fitted.

        Raises:
            TypeError: ``ledger`` or ``source`` is of the wrong type.
            ModeError: a research-only estimator was given a release-mode source.
            BudgetExceededError: the plan does not fit the ledger's cap; nothing is charged.
            LedgerError: the recorded steps differ from the plan (a bug in the estimator).
        """
        self._check_protocol_arguments(ledger, source)
        plan = list(plan)
        preflight(ledger, plan)
        self._clear_fitted()
        start = len(ledger.events)
        run()
        spent = ledger.events[start:]
        check_conforms(spent, plan, who=f"{self.name}: fit", exact_sensitivity=exact_sensitivity)
        self.events_ = tuple(spent)
        return self

    def _check_protocol_arguments(self, ledger: object, source: object) -> None:
        """Refuse a wrong-typed ``ledger`` or ``source``, or a release-mode source for a
        research-only estimator; ``fit`` may call this before validating its data.

        Raises:
            TypeError: ``ledger`` or ``source`` is of the wrong type.
            ModeError: ``release_safe`` is ``False`` and ``source`` is in release mode.
        """
        if not isinstance(ledger, Ledger):
            raise TypeError(f"ledger ({ledger!r}) must be a privlab Ledger")
        if not isinstance(source, RandomSource):
            raise TypeError(f"source ({source!r}) must be a RandomSource (SeededSource or SecureSource)")
        if source.mode == "release" and not self.release_safe:
            raise ModeError(
                f"{self.name} is a research-only estimator and is refused in release mode "
                f"({self._research_only_reason()})"
            )

    def _research_only_reason(self) -> str:
        """Why ``release_safe`` is ``False`` (for the :class:`ModeError` message)."""
        return "it is not release-safe"
