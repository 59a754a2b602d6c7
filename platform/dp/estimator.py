"""The one contract of everything that fits on private data with DP and releases something.

A :class:`PrivateEstimator` keeps its settings apart from what it learns (scikit-learn's
convention): hyperparameters are set at construction and returned by ``get_params``, learned
state lives in attributes ending in ``_``, and nothing holds the data. Its ``fit`` computes its
plan, the ledger events it will record, from public inputs only (ε, a public domain or bounds,
the public record count ``n`` and column count), and hands the work to
:meth:`PrivateEstimator._charged_fit`, which enforces the budget protocol in one place:

1. the estimator's random source may be used in its mode (``release_safe`` is ``False`` for
   research-only estimators: a non-DP baseline, or DP draws from a seeded PRNG);
2. the whole plan fits the ledger's cap on top of what it already holds
   (:meth:`~privlab.platform.dp.ledger.Ledger.preflight`, with the positional partitions the fit
   will declare), or nothing is declared, charged or drawn;
3. the previous fit's state is dropped, and the estimator's own ``run`` spends the plan;
4. what ``run`` recorded is exactly the plan (:func:`~privlab.platform.dp.plan_conformance.check_conforms`),
   and ``events_`` keeps it.

Two ways to hold hyperparameters share this base, and the same ``get_params``/``set_params``:

* **a ``Params`` dataclass** (frozen, keyword-only, validated in ``__post_init__``): the tabular
  synthesizers (:class:`~privlab.mechanisms.synthesizers.base.Synthesizer`), the pMSE paper's
  mechanism and baselines (:class:`~privlab.mechanisms.pmse.continuous.ContinuousSynthesizer`),
  the plausible-deniability model and the DP-ERM classifiers. The estimator is built as
  ``Cls(params)``; ``get_params()`` is the dataclass's fields, ``set_params(**fields)`` builds a
  new ``Params`` (validated again) in its place. These are what specs and MLflow see.
* **keyword arguments** (``Params = None``): the scikit-learn-style DiPriMe, DP-ERT, median and
  DP-DF forests (:mod:`privlab.mechanisms.dipreme`). ``__init__`` stores each keyword as an
  attribute of the same name and does nothing else; ``get_params(deep=True)`` and
  ``set_params(**params)`` follow scikit-learn's semantics exactly (the parameter names are
  ``__init__``'s, nested ``a__b`` names reach a parameter that is itself an estimator), so
  ``sklearn.base.clone`` and its estimator checks work. Settings are checked when ``fit``
  starts (as scikit-learn does) by :meth:`PrivateEstimator._validate_params` against the
  class's declarative ``_parameter_constraints`` (:func:`~privlab.platform.core.validation.validate_parameters`).

Both kinds declare constraints the same way: a keyword estimator in ``_parameter_constraints``,
a ``Params`` dataclass may call :func:`~privlab.platform.core.validation.validate_parameters` from its
``__post_init__`` with its own dict.

A keyword estimator used as a plain scikit-learn estimator (no ledger or source) gets a fresh
ledger and a :class:`~privlab.platform.dp.randomness.SeededSource` on its ``random_state``; in a run
it is given the run's ledger and source like every other estimator. One contract suite,
``tests/test_estimator_contract.py``, runs over every concrete subclass.

Privacy:
    An estimator's ``fit`` is DP with the ε its plan declares when every step of the plan is
    DP with its share under the ledger's neighbouring relation and the ledger composes the steps
    validly (sequentially within a scope, in parallel over the parts of a declared partition);
    the protocol guarantees that the ledger holds exactly those steps and partitions and that
    nothing is drawn when they do not fit. ``sample``/``predict`` are post-processing of the
    fitted, DP state.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, Self

from privlab.platform.core.errors import LedgerError, ModeError, NotFittedError
from privlab.platform.core.validation import ConstraintSpec, validate_parameters
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.plan_conformance import check_conforms
from privlab.platform.dp.positional_split import PositionalSplit, SplitPlan
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["PrivateEstimator", "SplitDraw"]


class SplitDraw(Protocol):
    """Draws a fit's split when called (after the preflight); ``plan`` names its kind."""

    @property
    def plan(self) -> SplitPlan: ...

    def __call__(self) -> PositionalSplit: ...


INPUT_DESCRIPTION = ("n_features_in_", "feature_names_in_")
"""scikit-learn's description of the input of the current fit, set by its data validation before
anything is charged; a new fit does not drop them with the rest of the fitted state."""


class PrivateEstimator:
    """Base class: hyperparameters, fitted state and the budget protocol (module docstring).

    Subclasses set ``name`` (a non-empty string), ``release_safe`` and either ``Params`` (a
    frozen keyword-only dataclass; construct with ``Cls(params)``) or, for a scikit-learn-style
    estimator, ``Params = None``, an ``__init__`` of keyword arguments stored as attributes and
    ``_parameter_constraints``; ``fit`` calls :meth:`_charged_fit`.

    Args:
        params: The hyperparameters, an instance of ``Params``.

    Raises:
        TypeError: ``params`` is not an instance of ``Params``.
    """

    name: ClassVar[str]
    Params: ClassVar[type | None] = None
    release_safe: ClassVar[bool] = True
    """Whether ``fit`` may run on a release-mode source (the OS CSPRNG with a transcript)."""
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = {}
    """A keyword estimator's constraints, ``{parameter: [constraint, ...]}`` (sklearn's style)."""

    def __init__(self, params: Any) -> None:
        if self.Params is None:
            raise TypeError(f"{type(self).__name__} takes keyword arguments; it has no Params dataclass")
        if not isinstance(params, self.Params):
            raise TypeError(f"params ({params!r}) must be a {self.Params.__qualname__}")
        self._params = params

    # --- hyperparameters --------------------------------------------------------------------

    @property
    def params(self) -> Any:
        """The hyperparameters: the frozen ``Params``, or a keyword estimator's ``get_params(deep=False)``."""
        return self._params if self.Params is not None else self.get_params(deep=False)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """A keyword estimator's parameter names, from its ``__init__`` signature (sorted, as
        scikit-learn's); ``*args`` and ``**kwargs`` are refused, since they swallow typos."""
        init = cls.__init__
        if init is object.__init__ or init is PrivateEstimator.__init__:
            return []
        names = []
        for parameter in inspect.signature(init).parameters.values():
            if parameter.name == "self":
                continue
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"{cls.__name__}.__init__ ({parameter}) must not take *args or **kwargs")
            names.append(parameter.name)
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The hyperparameters as a plain dict (every value loggable as an MLflow param).

        A ``Params`` estimator returns its dataclass's fields. A keyword estimator returns its
        ``__init__`` arguments and, with ``deep``, ``name__key`` entries for a parameter that is
        itself an estimator (scikit-learn's semantics).
        """
        if self.Params is not None:
            return dataclasses.asdict(self._params)
        out: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{key}", inner) for key, inner in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Self:
        """Change hyperparameters; returns ``self``. Fitted state is kept until the next ``fit``.

        A ``Params`` estimator gets a new ``Params`` with the given fields replaced (validated
        by its ``__post_init__``); a keyword estimator sets the attributes, and ``name__key``
        forwards ``key`` to the estimator held in parameter ``name`` (scikit-learn's semantics;
        values are validated when ``fit`` starts).

        Raises:
            ValueError: a name that is not a parameter (the message lists the valid ones).
        """
        if not params:
            return self
        valid = self.get_params(deep=True) if self.Params is None else self.get_params()
        nested: dict[str, dict[str, Any]] = {}
        direct: dict[str, Any] = {}
        for key, value in params.items():
            name, _, inner = key.partition("__")
            if name not in valid or (inner and self.Params is not None):
                raise ValueError(f"Invalid parameter {name!r} for estimator {type(self).__name__}. "
                                 f"Valid parameters are: {sorted(k for k in valid if '__' not in k)!r}.")
            if inner:
                nested.setdefault(name, {})[inner] = value
            else:
                direct[name] = value
        if self.Params is not None:
            self._params = dataclasses.replace(self._params, **direct)
            return self
        for name, value in direct.items():
            setattr(self, name, value)
        for name, inner_params in nested.items():
            getattr(self, name).set_params(**inner_params)
        return self

    def _validate_params(self) -> None:
        """Check a keyword estimator's parameters against ``_parameter_constraints`` (a
        ``Params`` estimator was checked when its ``Params`` was built).

        Raises:
            TypeError: a parameter of the wrong kind.
            ValueError: a parameter with a wrong value.
        """
        if self.Params is None:
            validate_parameters(self._parameter_constraints, self.get_params(deep=False))

    def __sklearn_clone__(self) -> Self:
        """scikit-learn's ``clone``: the same hyperparameters, unfitted. A keyword estimator is
        rebuilt from ``get_params(deep=False)`` (scikit-learn's own way); a ``Params`` estimator
        is copied (its ``Params`` is frozen, and ``__init__`` may take more than it, e.g. the pMSE
        mechanism's model) and its fitted state dropped."""
        if self.Params is None:
            return type(self)(**{k: _clone_value(v) for k, v in self.get_params(deep=False).items()})
        clone = copy.copy(self)
        clone._clear_fitted()
        return clone

    # --- fitted state -----------------------------------------------------------------------

    @property
    def is_fitted(self) -> bool:
        """Whether a fit has completed (its ledger events are kept in ``events_``)."""
        return "events_" in vars(self)

    def __sklearn_is_fitted__(self) -> bool:
        return self.is_fitted

    def __repr__(self) -> str:
        state = "fitted" if self.is_fitted else "not fitted"
        if self.Params is not None:
            return f"{type(self).__name__}({self._params!r}, {state})"
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._changed_params().items())}; {state})"

    def _changed_params(self) -> dict[str, Any]:
        """A keyword estimator's parameters that differ from their defaults (for ``repr``)."""
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        out = {}
        for name, value in self.get_params(deep=False).items():
            default = defaults.get(name, inspect.Parameter.empty)
            try:
                same = bool(value is default or value == default)
            except (TypeError, ValueError):  # arrays compare elementwise
                same = False
            if not same:
                out[name] = value
        return out

    def _require_fitted(self, how: str) -> None:
        """Raise :class:`NotFittedError` naming the call that fits (``how``)."""
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call {how} first")

    def _clear_fitted(self) -> None:
        for attribute in [a for a in vars(self) if a.endswith("_") and not a.startswith("__")
                          and a not in INPUT_DESCRIPTION]:
            delattr(self, attribute)

    def _charged_fit(
        self,
        plan: Sequence[PrivacyEvent],
        *,
        ledger: Ledger,
        source: RandomSource,
        run: Callable[[], None],
        exact_sensitivity: bool = True,
        partitions: Sequence[tuple[str, Sequence[str], PositionalSplit | SplitDraw]] = (),
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
            partitions: ``(parent, parts, split)`` for each partition of the data the fit
                composes in parallel: the
                :class:`~privlab.platform.dp.positional_split.PositionalSplit` that cut the parts,
                drawn without looking at the data, or a :class:`SplitDraw` that draws one. They
                are part of the preflight (a split still to be drawn by its ``plan``: the
                ledger's accounting depends only on the parts and the kind of split); after it
                the splits are drawn and declared on ``ledger``, before ``run``, so a refused fit
                declares and draws nothing, and the preflight's clearance holds only for the
                partitions it composed.

        Returns:
            ``self``, fitted.

        Raises:
            TypeError: ``ledger`` or ``source`` is of the wrong type.
            ModeError: a research-only estimator was given a release-mode source.
            BudgetExceededError: the plan does not fit the ledger's cap; nothing is charged.
            LedgerError: a partition the ledger refuses (nothing is declared or charged), or the
                recorded steps differ from the plan (a bug in the estimator).
        """
        self._check_protocol_arguments(ledger, source)
        plan = list(plan)
        partitions = list(partitions)
        ledger.preflight(plan, partitions=[(parent, parts, split if isinstance(split, PositionalSplit) else split.plan)
                                           for parent, parts, split in partitions])
        self._clear_fitted()
        for parent, parts, split in partitions:
            ledger.declare_partition(parent, parts, split=split if isinstance(split, PositionalSplit) else split())
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
        if ledger.is_plan:
            raise LedgerError(f"{self.name}: the ledger is a plan (a partition only planned, not drawn); fit on a "
                              "trial's ledger (plan.for_trial()) and declare the split the trial draws")
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


def _clone_value(value: Any) -> Any:
    """scikit-learn's ``clone`` of one parameter value: an estimator is cloned, anything else
    is passed on as it is (scikit-learn checks that ``clone`` keeps parameters identical)."""
    if hasattr(value, "get_params") and not isinstance(value, type):
        from sklearn.base import clone  # only a nested estimator needs scikit-learn

        return clone(value)
    return value
