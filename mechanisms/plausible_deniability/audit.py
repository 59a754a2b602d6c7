"""Distinguishing game for the plausible-deniability model's DP part: ``privlab audit pd_model``.

The DP part of Bindschaedler et al.'s mechanism is the generative model: its structure (noisy
entropies on D_T) and its conditional tables (noisy counts on D_P), two parts of the data cut by
record position and composed in parallel. The pair puts the difference where the model releases
the most about one record: D_T holds ``n_structure`` copies of x₀ = (0, …, 0); D_P holds
``n_parameters`` copies of x₀ in D and, in D′, one of them is replaced by x* = (k−1, …, k−1),
which moves one count of every attribute's table (and no entropy).

Threat model (white-box): the adversary sees the fitted model, its structure and its tables
``p_i[c, l]`` (the ``posterior_mean`` estimator, so a table is a function of the noisy counts
alone), and scores ``Σ_i log(p_i[c_i(x*), x*_i] / p_i[c_i(x*), x₀_i])``: how much more likely
each attribute's conditional makes the target's value than x₀'s, in the target's parent
configuration. It is monotone in each table's noisy count of the target's cell, the statistic
the tables release about it. The thresholds are the pooled quantiles of that score in 400 fits
on D and 400 on D′ drawn from a fixed public seed: a function of public parameters only, fixed
before any trial (the audit's own trials use other seeds).

The claim: the model with the ``basic`` accountant, ε-DP under replace-one (each part's
releases compose to ε by basic composition, the parts in parallel), δ = 0.

Privacy:
    Audits the model's guarantee (``mechanisms/plausible_deniability/model.py``); each fit
    charges a ledger of its own; the trial's ledger is not charged.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Section 3; Annamalai, Ganev & De Cristofaro
    (2024) for worst-case pairs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.model import PlausibleDeniabilityModel, PlausibleDeniabilityModelParams
from privlab.mechanisms.plausible_deniability.parameters import configuration_index
from privlab.mechanisms.tabular.domain import CODE_DTYPE, ColumnDomain, Domain
from privlab.platform.audit.registration import EpsilonAuditable, register_auditable
from privlab.platform.core.errors import SequentialCompositionWarning, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource, SeededSource

__all__ = ["PDModelGame", "PDModelGameParams"]

THRESHOLD_COUNT = 25
CALIBRATION_FITS = 400
CALIBRATION_SEED = 20170801  # public: the thresholds depend on it and on the parameters only


@dataclasses.dataclass(frozen=True, kw_only=True)
class PDModelGameParams:
    """The claimed ε (required), the part sizes and the worst-case domain."""

    epsilon: float
    n_structure: int = 100
    n_parameters: int = 100
    columns: int = 3
    categories: int = 2
    alpha: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.epsilon, (int, float)) and not isinstance(self.epsilon, bool)
                and math.isfinite(self.epsilon) and self.epsilon > 0):
            raise SpecError(f"epsilon ({self.epsilon!r}) must be a finite number > 0")
        for label, value, low, high in (("n_structure", self.n_structure, 2, 10**6),
                                        ("n_parameters", self.n_parameters, 1, 10**6),
                                        ("columns", self.columns, 1, 8), ("categories", self.categories, 2, 8)):
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(f"{label} ({value!r}) must be an integer in [{low}, {high}]")
        if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and self.alpha > 0):
            raise SpecError(f"alpha ({self.alpha!r}) must be a finite number > 0")


def _domain(params: PDModelGameParams) -> Domain:
    return Domain.from_columns([ColumnDomain(name=f"a{j}", labels=tuple(str(c) for c in range(params.categories)))
                                for j in range(params.columns)])


def _frame(params: PDModelGameParams, rows: int, target: bool) -> pd.DataFrame:
    codes = np.zeros((rows, params.columns), dtype=CODE_DTYPE)
    if target:
        codes[0] = params.categories - 1
    return pd.DataFrame(codes, columns=[f"a{j}" for j in range(params.columns)])


def _fit_score(params: PDModelGameParams, parameter_data: pd.DataFrame, source: RandomSource) -> float:
    model = PlausibleDeniabilityModel(PlausibleDeniabilityModelParams(
        epsilon=params.epsilon, accountant="basic", alpha=params.alpha, estimator="posterior_mean"))
    # The game fixes D_T and puts the difference in D_P, the placement a drawn split gives the target
    # with probability n_P/n and the one that tells the tables' noise apart; it cuts the halves
    # itself, so the model composes them sequentially on its (throwaway) ledger and says so.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SequentialCompositionWarning)
        model.fit(_frame(params, params.n_structure, False), parameter_data=parameter_data, domain=_domain(params),
                  ledger=Ledger(epsilon_cap=None), source=source)
    target = np.full(params.columns, params.categories - 1)
    score = 0.0
    for i, (table, parents) in enumerate(zip(model.tables_, model.structure_.parents, strict=True)):
        row = int(configuration_index(target, parents, model.bucketing_))
        score += math.log(table[row, target[i]] / table[row, 0])
    return score


@functools.cache
def _calibrated_thresholds(params: PDModelGameParams) -> tuple[float, ...]:
    """Pooled quantiles of the score on D and D′ from a fixed public seed (module docstring)."""
    generator = np.random.default_rng(CALIBRATION_SEED)
    scores = []
    for target in (False, True):
        data = _frame(params, params.n_parameters, target)
        for _ in range(CALIBRATION_FITS):
            scores.append(_fit_score(params, data, SeededSource(np.random.default_rng(generator.integers(2**63)))))
    # Just below each quantile, so an atom at a quantile falls in its event whatever the rounding.
    return tuple(float(q) - 1e-9 for q in np.quantile(scores, np.linspace(0.02, 0.98, THRESHOLD_COUNT)))


@register_auditable
class PDModelGame(EpsilonAuditable):
    """ε audit of the plausible-deniability model's DP part on a worst-case pair (module docstring)."""

    name = "pd_model"
    Params = PDModelGameParams
    description = "distinguishing game, plausible-deniability model (structure on D_T, tables on D_P), outlier in D_P"
    neighbouring = "replace-one"
    claim = "ε = epsilon (basic accountant), δ = 0"
    default_trials = 5_000
    score = "log-ratio of the target's value in its conditionals"
    threshold_count = THRESHOLD_COUNT

    def neighbours(self, params: PDModelGameParams, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
        return _frame(params, params.n_parameters, False), _frame(params, params.n_parameters, True)

    def claimed_epsilon(self, params: PDModelGameParams) -> float:
        return float(params.epsilon)

    def plan(self, params: PDModelGameParams) -> list[PrivacyEvent]:
        return []  # each fit charges its own ledger (module docstring)

    def release(self, params: PDModelGameParams, data: pd.DataFrame, *, source: RandomSource, ledger: Ledger) -> float:
        return _fit_score(params, data, source)

    def thresholds(self, params: PDModelGameParams) -> Sequence[float]:
        return _calibrated_thresholds(params)

    def event_label(self, params: Any, threshold: float, complement: bool) -> str:
        return f"{self.score} {'<' if complement else '≥'} {threshold:.4g}"
