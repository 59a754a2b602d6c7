"""A DP record count, and the private data resized to it, so that the release's size is DP.

The release scheme (Hod & Canetti 2024, Section 4.4.2) treats the number of records ``n`` as
public: every criterion's sensitivity is derived for replace-one neighbours of size ``n``, and
the synthetic data has ``n`` rows. But ``n`` here is the size *after cleaning*, and cleaning
drops records by rules, so two raw datasets that differ in one person's record can clean to
sizes ``n`` and ``n ± 1``. Publishing ``n`` (in the datasheet, ``config.toml``, the criteria's
``1/n`` sensitivities and the number of released rows) then distinguishes them with certainty.

The design:

1. ``ñ = n + Lap(1/ε_count)`` (:func:`dp_record_count`): the count has sensitivity 1 under
   add/remove and replace of one raw record (a replaced record may be kept on one side and
   dropped on the other), so ``ñ`` is ε_count-DP; it is charged to the ledger.
2. ``m = max(round(ñ) − t, 1)`` with the public margin ``t = ⌈ln(1/(2β))/ε_count⌉``
   (:func:`count_margin`, β = 10⁻⁶): ``m ≤ n`` except with probability at most β, so the
   data almost never needs padding. ``m`` is public (post-processing of ``ñ``).
3. The cleaned data is resized to exactly ``m`` records (:func:`resize`): a uniformly random
   ``m``-subset when ``m ≤ n``, otherwise all ``n`` records plus ``m − n`` padding records
   drawn uniformly from the public raw schema (and its raw constraints), in a uniformly random
   order either way. Everything downstream — the synthesizer, the ``m`` synthetic records, each
   criterion's sensitivity at size ``m`` — runs on this resized table with ``m`` public, exactly
   as the paper's analysis assumes.

Privacy argument. Fix ``m``. Let raw neighbours clean to ``C`` and ``C'``, which are equal,
differ by replacing one record, or (say) ``C' = C ∪ {x}``. There is a coupling of the resized
tables ``R = resize(C)`` and ``R' = resize(C')`` under which they are equal or replace-one
neighbours of size ``m``: for ``m ≤ |C|``, a uniform ``m``-subset ``T'`` of ``C'`` either avoids
``x`` (and is then a uniform ``m``-subset of ``C``) or is ``x`` plus a uniform ``(m−1)``-subset
of ``C``, which we pair with that subset plus one uniformly chosen further record of ``C`` — a
uniform ``m``-subset of ``C`` overall; for ``m > |C|`` the extra record of ``C'`` takes the place
of one padding record (padding is independent of the data); and a uniformly random order lets
the two sequences differ in one position only. For any mechanism ``M`` that is ε-DP for
replace-one neighbours of size ``m``, ``P[M(R') ∈ S] = E[P[M(R') ∈ S | coupling]] ≤
e^ε·E[P[M(R) ∈ S | coupling]] = e^ε·P[M(R) ∈ S]``. With step 1 (adaptive sequential
composition: ``m`` is chosen from ``ñ``) the release is ``(ε_count + 2ε₁ + ε₀)``-DP for adding,
removing or replacing one raw record, and its size reveals only ``ñ``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.tabular.space import ReleaseSpace
from privlab.platform.core.errors import ExecutionError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

#: The probability that the margin is too small and padding records are needed.
PADDING_PROBABILITY = 1e-6
_PADDING_ROUNDS = 200


def count_margin(epsilon: float, *, beta: float = PADDING_PROBABILITY) -> int:
    """The public margin ``t`` with ``P[Lap(1/ε) > t] = ½·exp(−tε) ≤ β``: ``⌈ln(1/(2β))/ε⌉``.

    (A release source's lattice noise has a slightly larger scale, ``(1 + 2**k)/ε``, so its tail
    probability is a little above β; β only bounds how often padding is needed, not privacy.)
    """
    return math.ceil(math.log(1.0 / (2.0 * beta)) / epsilon)


def planned_event(epsilon: float) -> PrivacyEvent:
    """The ledger step of :func:`dp_record_count` (for budget checks before any data is read)."""
    return PrivacyEvent(name="record_count", mechanism="laplace", epsilon=float(epsilon), sensitivity=1.0,
                        noise_scale=1.0 / epsilon, scope="data", step="release")


def dp_record_count(n: int, *, epsilon: float, source: RandomSource, ledger: Ledger) -> int:
    """The public size ``m = max(round(n + Lap(1/ε)) − t, 1)`` of the release (module docstring).

    Privacy:
        ε-DP: the number of cleaned records has sensitivity 1 for adding, removing or replacing
        one raw record (cleaning is a fixed record-level rule), and the Laplace mechanism
        (lattice Laplace with a release source) releases it; rounding, the margin and the floor
        are post-processing.
    """
    noisy = laplace_mechanism(float(n), sensitivity=1.0, epsilon=epsilon, source=source, ledger=ledger,
                              name="record_count", step="release")
    return max(int(round(noisy)) - count_margin(epsilon), 1)


def resize(cleaned: pd.DataFrame, m: int, *, space: ReleaseSpace, rng: np.random.Generator) -> pd.DataFrame:
    """``cleaned`` resized to exactly ``m`` records in a uniformly random order (module docstring).

    Raises:
        ExecutionError: Padding was needed and the raw constraints rejected nearly every
            uniformly drawn record (the message holds no data-dependent value).
    """
    n = len(cleaned)
    if m <= n:
        chosen = rng.permutation(n)[:m]
        return cleaned.iloc[chosen].reset_index(drop=True)
    padded = pd.concat([cleaned, padding_records(space, m - n, rng=rng)], ignore_index=True)
    return padded.iloc[rng.permutation(m)].reset_index(drop=True)


def padding_records(space: ReleaseSpace, count: int, *, rng: np.random.Generator) -> pd.DataFrame:
    """``count`` records drawn uniformly from the public raw schema that pass the raw constraints.

    Built from public declarations only (bounds, categories, formats); they stand in for
    records the data does not have and carry no information about it.
    """
    kept: list[pd.DataFrame] = []
    have = 0
    for _ in range(_PADDING_ROUNDS):
        draw = max(4 * (count - have), 64)
        frame = pd.DataFrame({column.name: _uniform_values(column, draw, rng) for column in space.schema})
        try:
            frame = space.clean_raw(frame, source="padding records")
        except Exception:  # a schema the uniform draw cannot satisfy; try again, then give up below
            continue
        kept.append(frame)
        have += len(frame)
        if have >= count:
            return pd.concat(kept, ignore_index=True).iloc[:count]
    raise ExecutionError(
        "the DP record count exceeded the data's size beyond its margin (probability about 1e-6) and the raw "
        "constraints reject nearly every record drawn uniformly from the schema, so no padding could be made; "
        "no bundle was written. Raise [epsilon] record_count, or loosen the raw constraints")


def _uniform_values(column: object, size: int, rng: np.random.Generator) -> list[object] | np.ndarray:
    kind = column.type  # type: ignore[attr-defined]
    if kind == "integer":
        return rng.integers(int(column.lower), int(column.upper), size=size, endpoint=True)  # type: ignore[attr-defined]
    if kind == "float":
        return rng.uniform(float(column.lower), float(column.upper), size=size)  # type: ignore[attr-defined]
    if kind == "categorical":
        categories = list(column.categories)  # type: ignore[attr-defined]
        return [categories[i] for i in rng.integers(0, len(categories), size=size)]
    if kind == "boolean":
        return rng.integers(0, 2, size=size).astype(bool)
    lower, upper = column.date_bounds  # type: ignore[attr-defined]
    days = rng.integers(0, (upper - lower).days, size=size, endpoint=True)
    return [(lower + pd.Timedelta(days=int(d))).strftime(column.format) for d in days]  # type: ignore[attr-defined]
