"""Registered dataset generators (``[dataset] generator = "..."`` in a spec).

A generated dataset is drawn afresh for every trial from that trial's own stream, so its
randomness is part of the trial and reproducible like everything else. Its public bounds are
parameters, never read back from the draws.
"""

from __future__ import annotations

import dataclasses
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import pandas as pd

from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import MAX_RECORDS, ConstrainedParams, Interval
from privlab.platform.experiment.registry import register_dataset_generator


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoundedNormalParams(ConstrainedParams):
    """``n`` rows of ``columns`` independent N(mean, sd²) values clipped to [lower, upper]."""

    n: int
    columns: int = 1
    mean: float = 0.0
    sd: float = 1.0
    lower: float = -4.0
    upper: float = 4.0

    _parameter_constraints: ClassVar = {
        "n": [Interval(Integral, 1, MAX_RECORDS, closed="both")],
        "columns": [Interval(Integral, 1, MAX_RECORDS, closed="both")],
        "mean": [Interval(Real, None, None, closed="neither")], "sd": [Interval(Real, 0, None, closed="neither")],
        "lower": [Interval(Real, None, None, closed="neither")], "upper": [Interval(Real, None, None, closed="neither")],
    }

    def _check_together(self) -> None:
        if self.upper <= self.lower:
            raise SpecError(f"upper ({self.upper!r}) must be greater than lower ({self.lower!r})")
        if self.n * self.columns > MAX_RECORDS:
            raise SpecError(f"n × columns ({self.n:,} × {self.columns:,}) must be at most {MAX_RECORDS:,} values "
                            "(the most one generated dataset may hold)")


@register_dataset_generator("bounded_normal", BoundedNormalParams)
def bounded_normal(params: BoundedNormalParams, rng: np.random.Generator) -> pd.DataFrame:
    values = np.clip(rng.normal(params.mean, params.sd, size=(params.n, params.columns)), params.lower, params.upper)
    return pd.DataFrame(values, columns=[f"x{i + 1}" for i in range(params.columns)])
