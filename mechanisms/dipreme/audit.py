"""Distinguishing games for the DP regression forests: ``privlab audit forest_dipreme`` and ``forest_dp_ert``.

The pair: one feature and the target in public bounds ``[0, 1]``; D holds ``n`` records
``(x, y) = (0, 0)``; D′ replaces one by the outlier ``(1, 1)``, which moves the leaf statistics
of a tree by their full replace-one sensitivity (a count −1 in x₀'s leaf and +1 in x*'s, a
centred sum ``y − c`` by ``1 = B``). Each trial fits the forest once on D and once on D′.

Threat models:

* ``whitebox``: the adversary sees the released noisy leaf sums (``leaf_sums_``, the DP
  statistics the forest publishes beside its trees) and scores the sum over every leaf and
  tree, centred by its exact value on D (``n·(0 − c)`` with ``c`` the public centre 1/2): on D it
  is pure Laplace noise around 0, on D′ it is shifted by the target's ``+1``. A linear statistic,
  not the Laplace likelihood ratio: it gives a looser bound on a correct forest but does not
  saturate, so a leaf sum released off its claimed law (a data-dependent centre or clip) moves
  it far outside the claim's range.
* ``blackbox``: the adversary sees predictions and scores the prediction at x* = 1.

The claim is the forest's ε (replace-one), and its thresholds are fixed from the public noise
scales of its plan.

Privacy:
    The audited guarantee is the forests' (``mechanisms/dipreme/privacy.py``): ε-DP under
    replace-one neighbouring, the fit charging a ledger of its own (checked against its plan by
    the fit); the trial's ledger is not charged.

References:
    Annamalai, Ganev & De Cristofaro (2024), worst-case pairs; Jagielski, Ullman & Oprea (2020).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from privlab.platform.audit.registration import EpsilonAuditable, register_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["ForestGame", "ForestGameParams"]

THREATS = ("whitebox", "blackbox")
THRESHOLD_COUNT = 25


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForestGameParams:
    """The claimed ε (required), the threat model, ``n`` records and the forest's shape."""

    epsilon: float
    threat: str = "whitebox"
    n: int = 100
    n_estimators: int = 1
    max_depth: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.epsilon, (int, float)) and not isinstance(self.epsilon, bool)
                and math.isfinite(self.epsilon) and self.epsilon > 0):
            raise SpecError(f"epsilon ({self.epsilon!r}) must be a finite number > 0")
        if self.threat not in THREATS:
            raise SpecError(f"threat ({self.threat!r}) must be one of {list(THREATS)}")
        for label, value, low, high in (("n", self.n, 2, 10**6), ("n_estimators", self.n_estimators, 1, 64),
                                        ("max_depth", self.max_depth, 1, 8)):
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(f"{label} ({value!r}) must be an integer in [{low}, {high}]")


class ForestGame(EpsilonAuditable):
    """The distinguishing game for one DP regression forest (module docstring)."""

    estimator: ClassVar[str]  # a class of mechanisms/dipreme/forest.py, imported when a game runs (scikit-learn)
    Params = ForestGameParams
    neighbouring = "replace-one"
    claim = "ε = epsilon, δ = 0"
    default_trials = 5_000
    score = "centred sum of the noisy leaf sums (white-box) or the prediction at the target (black-box)"
    threshold_count = THRESHOLD_COUNT

    def _forest(self, params: ForestGameParams) -> Any:
        from privlab.mechanisms.dipreme import forest

        return getattr(forest, self.estimator)(epsilon=params.epsilon, max_depth=params.max_depth, n_estimators=params.n_estimators,
                              feature_bounds=(0.0, 1.0), target_bounds=(0.0, 1.0))

    def neighbours(self, params: ForestGameParams, rng: np.random.Generator) -> tuple[Any, Any]:
        x, y = np.zeros((params.n, 1)), np.zeros(params.n)
        x_prime, y_prime = x.copy(), y.copy()
        x_prime[0, 0], y_prime[0] = 1.0, 1.0
        return (x, y), (x_prime, y_prime)

    def claimed_epsilon(self, params: ForestGameParams) -> float:
        return float(params.epsilon)

    def plan(self, params: ForestGameParams) -> list[PrivacyEvent]:
        return []  # each fit charges its own ledger (module docstring)

    def release(self, params: ForestGameParams, data: Any, *, source: RandomSource, ledger: Ledger) -> float:
        x, y = data
        forest = self._forest(params).fit(x, y, Ledger(epsilon_cap=None), source=source)
        if params.threat == "blackbox":
            return float(forest.predict(np.ones((1, 1)))[0])
        return float(np.sum(forest.leaf_sums_) + 0.5 * params.n)

    def _sums_spread(self, params: ForestGameParams) -> float:
        """The standard deviation of the centred sum on D: √2·b for each leaf's Laplace noise
        (b the planned scale of ``leaf_sums``, public)."""
        events = self._forest(params).planned_events(1, neighbouring="replace_one")
        scale = max(e.noise_scale for e in events if e.name == "leaf_sums")
        return math.sqrt(2.0 * params.n_estimators * 2 ** params.max_depth) * scale

    def thresholds(self, params: ForestGameParams) -> Sequence[float]:
        if params.threat == "blackbox":
            return tuple(np.linspace(0.0, 1.0, THRESHOLD_COUNT))
        spread = self._sums_spread(params)
        return tuple(np.linspace(-2.0 * spread, 2.0 * spread + 1.0, THRESHOLD_COUNT))


@register_auditable
class DiPriMeGame(ForestGame):
    __doc__ = ForestGame.__doc__
    name = "forest_dipreme"
    estimator = "DiPriMeRegressor"
    description = "distinguishing game, DiPriMe regression forest, outlier (1, 1) among (0, 0) records"


@register_auditable
class DPERTGame(ForestGame):
    __doc__ = ForestGame.__doc__
    name = "forest_dp_ert"
    estimator = "DPERTRegressor"
    description = "distinguishing game, DP-ERT regression forest, outlier (1, 1) among (0, 0) records"
