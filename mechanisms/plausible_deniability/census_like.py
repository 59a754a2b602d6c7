"""A generated, census-shaped table for examples, tests and benchmarks (no data to download).

Eleven categorical attributes with the level counts of Adult's after the paper's Section 4
bucketisation (ages by 10, hours by 15), each depending on the one or two before it, drawn
from a fixed public seed. It has no privacy meaning: it lets the quickstart, the tests and the
benchmarks run Mechanism 1 on something shaped like the paper's data.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Table 1 and Section 4 (the shape imitated).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privlab.mechanisms.tabular.domain import CODE_DTYPE, ColumnDomain, Domain

__all__ = ["LEVELS", "census_like"]

LEVELS = {"age": 8, "workclass": 7, "education": 16, "marital": 7, "occupation": 14, "relationship": 6,
          "race": 5, "sex": 2, "hours": 7, "country": 10, "income": 2}
"""Adult's attributes after the paper's Section 4 bucketisation (ages by 10, hours by 15)."""


def census_like(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, Domain]:
    """``n`` records of codes over :data:`LEVELS` and their domain.

    Each attribute keeps, with probability 0.6, a value determined by the sum of the previous
    two attributes' codes (a chain of dependencies for the model to find), and is otherwise a
    draw from a skewed (Dirichlet(0.7)) marginal.
    """
    domain = Domain(tuple(ColumnDomain(name=k, labels=tuple(f"{k}{i}" for i in range(v))) for k, v in LEVELS.items()))
    columns: dict[str, np.ndarray] = {}
    previous: list[np.ndarray] = []
    for name, size in LEVELS.items():
        skew = rng.dirichlet(np.full(size, 0.7))
        base = rng.choice(size, size=n, p=skew)
        if previous:
            shift = sum(previous[-2:]) % size
            keep = rng.random(n) < 0.6
            base = np.where(keep, (shift + base // 3) % size, base)
        columns[name] = base.astype(CODE_DTYPE)
        previous.append(columns[name])
    return pd.DataFrame(columns), domain
