"""The estimator contract for the pMSE paper's mechanisms on numeric tables.

A :class:`ContinuousSynthesizer` fits on a table of ``q`` numeric columns in model order (each
column is modelled given the ones before it) and releases one or more synthetic datasets: the
pMSE mechanism (:mod:`.mechanism`) and the baselines it is compared with (:mod:`.bppd`,
:mod:`.smooth_histogram`, :mod:`.functional_mechanism`). It is a
:class:`~privlab.platform.dp.estimator.PrivateEstimator`, so the budget protocol is the same as the
tabular synthesizers': :meth:`ContinuousSynthesizer.fit` validates the data, computes the plan
from public inputs only (the record count ``n``, the column count ``q`` and the
hyperparameters), refuses a plan that does not fit the ledger before anything is drawn, and
checks that the fit recorded exactly that plan.

Privacy:
    Each subclass documents its steps and their sensitivities under replace-one neighbouring
    with ``n`` public; :meth:`planned_events` lists them. Sampling is post-processing of the
    fitted, DP state (the non-DP BPPD, a research reference, plans no step and is refused in
    release mode).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Self

import numpy as np
import pandas as pd

from privlab.mechanisms.pmse.numeric_data import data_matrix
from privlab.platform.core.validation import check_count, check_text
from privlab.platform.dp.estimator import PrivateEstimator
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["ContinuousSynthesizer", "stack_datasets"]


def stack_datasets(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Synthetic datasets stacked into one frame indexed by ``(dataset, row)``."""
    return pd.concat(list(frames), keys=range(len(frames)), names=["dataset", "row"])


class ContinuousSynthesizer(PrivateEstimator, abc.ABC):
    """A DP (or, for the reference, non-DP) synthesizer of a numeric table.

    Subclasses set ``name``, ``Params`` and ``release_safe`` and implement
    :meth:`planned_events`, :meth:`_fit` and :meth:`_sample_arrays`; they may narrow
    :meth:`_read` (the columns the public bounds declare, the fewest rows they can use).

    Attributes:
        columns_: the data's column names, after a fit.
        events_: the ledger events the fit recorded (equal to the plan).
    """

    def fit(self, data: object, *, ledger: Ledger, source: RandomSource, scope: str = "data") -> Self:
        """Learn the model from the private ``data``, charging ``ledger`` the planned steps.

        Args:
            data: a DataFrame of numeric columns in model order, or a 2-D array.
            ledger: charged the steps of :meth:`planned_events`; checked against its cap first.
            source: the run's random source (seeded in research mode, CSPRNG in release).
            scope: the ledger scope of ``data``.

        Returns:
            ``self``, fitted; a previous fit is discarded.

        Raises:
            TypeError: ``data``, ``ledger`` or ``source`` is of the wrong type.
            ModeError: a research-only synthesizer was given a release-mode source.
            SchemaError: bad data (wrong column count, too few rows, NaN, a non-numeric column).
            BudgetExceededError: the plan does not fit the ledger's cap; nothing is charged.
        """
        self._check_protocol_arguments(ledger, source)
        scope = check_text("scope", scope)
        matrix, columns = self._read(data)
        plan = self.planned_events(matrix.shape[0], matrix.shape[1], scope=scope)

        def learn() -> None:
            self._fit(matrix, plan=plan, ledger=ledger, source=source, scope=scope)

        self._charged_fit(plan, ledger=ledger, source=source, run=learn)
        self.columns_ = columns
        return self

    def _read(self, data: object) -> tuple[np.ndarray, tuple[str, ...]]:
        """A validated float64 copy of ``data`` and its column names (:func:`data_matrix`)."""
        return data_matrix(data)

    @abc.abstractmethod
    def planned_events(self, records: int, columns: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """The ledger steps :meth:`fit` records for ``records`` rows of ``columns`` columns, in
        order, from public inputs only (empty for a non-DP reference)."""

    @abc.abstractmethod
    def _fit(
        self, matrix: np.ndarray, *, plan: list[PrivacyEvent], ledger: Ledger, source: RandomSource, scope: str
    ) -> None:
        """Learn the model from ``matrix`` (validated, ``n × q`` float64), spending ``plan`` in
        order. Must not keep a reference to ``matrix`` or anything computed from it without DP."""

    @abc.abstractmethod
    def _sample_arrays(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """One ``n × q`` array per released dataset, drawn from the fitted model."""

    def sample_datasets(self, n: int, *, rng: np.random.Generator) -> list[pd.DataFrame]:
        """One synthetic DataFrame of ``n`` rows per released dataset (post-processing).

        Args:
            n: rows per dataset, ≥ 1.
            rng: post-processing randomness (in a run, ``source.generator(purpose=...)``).

        Raises:
            NotFittedError: :meth:`fit` has not completed.
            TypeError: ``n`` is not an int or ``rng`` not a ``numpy.random.Generator``.
            ValueError: ``n`` < 1.
        """
        self._require_fitted("fit(data, ledger=..., source=...)")
        n = check_count("n", n)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
        return [pd.DataFrame(values, columns=list(self.columns_)) for values in self._sample_arrays(n, rng)]

    def sample(self, n: int, *, rng: np.random.Generator) -> pd.DataFrame:
        """The synthetic datasets stacked, indexed by ``(dataset, row)``.

        ``frame.loc[k]`` is dataset ``k``; a synthesizer that releases one dataset gives
        ``frame.loc[0]``.
        """
        return stack_datasets(self.sample_datasets(n, rng=rng))
