"""Budget arithmetic shared by mechanisms: exact ε splits and all-or-nothing preflight checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

from privlab.platform.ledger import Ledger, PrivacyEvent


def split_epsilon(epsilon: float, weights: Sequence[float]) -> tuple[float, ...]:
    """Shares ``ε·w_i/Σw`` whose ``math.fsum`` (the ledger's basic total) is exactly ``ε``.

    Every share but the last is the rounded ``ε·w_i/Σw``; the last one absorbs the float
    rounding (it moves by a few ulps at most), so the ledger total equals the declared ε.

    Raises:
        ValueError: no weights, a weight that is not > 0, or a share that would not be > 0.
    """
    if not weights or any(not (math.isfinite(w) and w > 0) for w in weights):
        raise ValueError(f"weights ({list(weights)!r}) must be a non-empty list of numbers > 0")
    total = math.fsum(weights)
    shares = [epsilon * (w / total) for w in weights]
    shares[-1] = epsilon - math.fsum(shares[:-1])
    for _ in range(64):
        if math.fsum(shares) == epsilon:
            break
        gap = math.fsum([*shares, -epsilon])
        shares[-1] = math.nextafter(shares[-1], -math.inf if gap > 0 else math.inf)
    else:  # pragma: no cover - fsum of k floats converges within a few ulps
        raise ValueError(f"epsilon ({epsilon!r}) cannot be split exactly into {len(weights)} shares")
    if not all(s > 0 for s in shares):
        raise ValueError(f"epsilon ({epsilon!r}) must be large enough that every share is > 0")
    return tuple(shares)


def preflight(ledger: Ledger, planned: Sequence[PrivacyEvent]) -> None:
    """Raise :class:`BudgetExceededError` now if ``planned`` would not fit the ledger's cap.

    Replays the ledger's events and then ``planned`` on a fresh copy, so a mechanism that
    charges several steps is refused before its first release rather than part-way through.
    """
    if not isinstance(ledger, Ledger):
        raise TypeError(f"ledger ({ledger!r}) must be a privlab Ledger")
    trial = ledger.fresh()
    for event in (*ledger.events, *planned):
        trial.spend(event)
