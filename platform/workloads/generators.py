"""Registered dataset generators (``[dataset] generator = "..."`` in a spec).

A generated dataset is drawn afresh for every trial from that trial's own stream, so its
randomness is part of the trial and reproducible like everything else. Its public bounds are
parameters, never read back from the draws.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from privlab.platform.registry import register_dataset_generator


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoundedNormalParams:
    """``n`` rows of ``columns`` independent N(mean, sd²) values clipped to [lower, upper]."""

    n: int
    columns: int = 1
    mean: float = 0.0
    sd: float = 1.0
    lower: float = -4.0
    upper: float = 4.0

    def __post_init__(self) -> None:
        for name in ("n", "columns"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} ({value!r}) must be an integer ≥ 1")
        for name in ("mean", "sd", "lower", "upper"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{name} ({value!r}) must be a finite number")
        if self.sd <= 0:
            raise ValueError(f"sd ({self.sd!r}) must be positive")
        if self.upper <= self.lower:
            raise ValueError(f"upper ({self.upper!r}) must be greater than lower ({self.lower!r})")


@register_dataset_generator("bounded_normal", BoundedNormalParams)
def bounded_normal(params: BoundedNormalParams, rng: np.random.Generator) -> pd.DataFrame:
    values = np.clip(rng.normal(params.mean, params.sd, size=(params.n, params.columns)), params.lower, params.upper)
    return pd.DataFrame(values, columns=[f"x{i + 1}" for i in range(params.columns)])
