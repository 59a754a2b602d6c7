"""Distinguishing game for one flow of the release scheme: ``privlab audit release_flow``.

What a statistics office would publish is the flow's output: the raw data is transformed by the
release space's public transformation, a DP synthesizer is fitted, n records are sampled and
filtered by the synthetic constraints, and the DP acceptance criteria are released
(:func:`~privlab.mechanisms.release.flow.run_flow`, the code the release runs). The game runs
that whole flow, in research mode, on a small public space defined here (an integer ``age`` in
[0, 99] binned at 20, 40, 60, 80 and a categorical ``sex``): D holds ``n`` raw records
(30, 1); D′ replaces one of them by (95, 2), an outlier in every column of the raw data and of
the transformed data.

Threat model (black-box: what the release publishes): the score is the number of published
candidate records equal to the target's transformed record. (The criterion's released DP value
is published too; it is not scored.)

The claim is the flow's ε₁ = ε_generation + ε_acceptance under replace-one with n public (pure-ε
synthesizers; a zCDP synthesizer's flow is not audited here). The private selection among flows
(Liu & Talwar) is not part of this game.

Privacy:
    Audits ``mechanisms/release/flow.py``'s guarantee; each flow charges a ledger of its own
    (checked against its plan by ``run_flow``'s preflight); the trial's ledger is not charged.

References:
    Hod & Canetti (2024), Section 3.1 (the flow); Annamalai, Ganev & De Cristofaro (2024).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.acceptance.base import criterion_from_spec
from privlab.mechanisms.release.flow import FlowConfiguration, FlowSettings, run_flow
from privlab.mechanisms.synthesizers.base import synthesizer_class
from privlab.mechanisms.synthesizers.zcdp import ZcdpSynthesizer
from privlab.mechanisms.tabular.space import ReleaseSpace, release_space_from_spec
from privlab.platform.audit.registration import EpsilonAuditable, register_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["AUDIT_SPACE", "ReleaseFlowGame", "ReleaseFlowGameParams"]

THRESHOLD_COUNT = 25
AUDIT_SPACE = """
name = "audit"
description = "the release-flow game's public space: an integer and a categorical column"

[schema.age]
type = "integer"
lower = 0
upper = 99

[schema.sex]
type = "categorical"
categories = [1, 2]

[transformations.age.alternatives.bins]
kind = "bins"
clip = [0, 99]
edges = [20, 40, 60, 80]

[transformations.sex.alternatives.codes]
kind = "categorical"
"""
COMMON_RECORD = {"age": 30, "sex": 1}
TARGET_RECORD = {"age": 95, "sex": 2}


@functools.cache
def audit_space() -> ReleaseSpace:
    return release_space_from_spec(tomllib.loads(AUDIT_SPACE), where="audit space")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseFlowGameParams:
    """The flow's generation ε (required), the acceptance criterion's ε, the synthesizer, ``n``."""

    epsilon_generation: float
    epsilon_acceptance: float = 0.1
    synthesizer: str = "independent_marginals"
    n: int = 100

    def __post_init__(self) -> None:
        for label, value in (("epsilon_generation", self.epsilon_generation),
                             ("epsilon_acceptance", self.epsilon_acceptance)):
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    and value > 0):
                raise SpecError(f"{label} ({value!r}) must be a finite number > 0")
        if issubclass(synthesizer_class(self.synthesizer), ZcdpSynthesizer):
            raise SpecError(f"synthesizer ({self.synthesizer!r}) is budgeted in zCDP; the release-flow game audits "
                            "pure-ε flows (independent_marginals or privbayes)")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or not 2 <= self.n <= 10**6:
            raise SpecError(f"n ({self.n!r}) must be an integer in [2, 1000000]")


def _settings(params: ReleaseFlowGameParams) -> FlowSettings:
    criterion = criterion_from_spec({"kind": "marginals_absolute", "name": "marginals_absolute", "threshold": 0.5,
                                     "epsilon": params.epsilon_acceptance}, where="audit criterion")
    return FlowSettings(epsilon_generation=params.epsilon_generation, criteria=(criterion,))


def _configuration(params: ReleaseFlowGameParams) -> FlowConfiguration:
    hyper = (("epsilon_split", 0.3), ("degree", 1)) if params.synthesizer == "privbayes" else ()
    return FlowConfiguration(transformation="", synthesizer=params.synthesizer, synthesizer_params=hyper)


@register_auditable
class ReleaseFlowGame(EpsilonAuditable):
    """ε audit of one release flow end to end on a worst-case pair (module docstring)."""

    name = "release_flow"
    Params = ReleaseFlowGameParams
    description = "distinguishing game, one release flow (transform, synthesizer, sampling, criterion), outlier record"
    neighbouring = "replace-one"
    claim = "ε = epsilon_generation + epsilon_acceptance, δ = 0"
    default_trials = 2_000
    score = "published copies of the target"
    threshold_count = THRESHOLD_COUNT

    def neighbours(self, params: ReleaseFlowGameParams, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
        d = pd.DataFrame({column: [value] * params.n for column, value in COMMON_RECORD.items()})
        d_prime = d.copy()
        for column, value in TARGET_RECORD.items():
            d_prime.loc[0, column] = value
        return d, d_prime

    def claimed_epsilon(self, params: ReleaseFlowGameParams) -> float:
        return math.fsum([params.epsilon_generation, params.epsilon_acceptance])

    def plan(self, params: ReleaseFlowGameParams) -> list[PrivacyEvent]:
        return []  # each flow charges its own ledger (module docstring)

    def release(self, params: ReleaseFlowGameParams, data: pd.DataFrame, *, source: RandomSource,
                ledger: Ledger) -> float:
        space = audit_space()
        outcome = run_flow(space.clean_raw(data, source="audit data"), space=space,
                           configuration=_configuration(params), settings=_settings(params), source=source,
                           ledger=Ledger(epsilon_cap=None))
        target = outcome.transformation.apply(pd.DataFrame([TARGET_RECORD]), source="the target").to_numpy()[0]
        return float((outcome.candidate.to_numpy() == target).all(axis=1).sum())

    def thresholds(self, params: ReleaseFlowGameParams) -> Sequence[float]:
        return tuple(j - 0.5 for j in range(1, THRESHOLD_COUNT + 1))

    def event_label(self, params: Any, threshold: float, complement: bool) -> str:
        return f"{self.score} {'<' if complement else '≥'} {threshold:.4g}"
