"""Budget arithmetic shared by mechanisms: exact ε splits and all-or-nothing preflight checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent


def split_epsilon(epsilon: float, weights: Sequence[float]) -> tuple[float, ...]:
    """Shares ``ε·w_i/Σw`` whose ``math.fsum`` (the ledger's basic total) is exactly ``ε``.

    Every share but the last is the rounded ``ε·w_i/Σw``; the last one absorbs the float
    rounding (it moves by a few ulps at most), so the ledger total equals the declared ε.
    When the exact sum sits on a rounding tie the last share cannot leave, one earlier
    share moves by one ulp first (a relative change of about 1e-16).

    Raises:
        ValueError: no weights, a weight that is not > 0, or a share that would not be > 0.
    """
    if not weights or any(not (math.isfinite(w) and w > 0) for w in weights):
        raise ValueError(f"weights ({list(weights)!r}) must be a non-empty list of numbers > 0")
    total = math.fsum(weights)
    shares = [epsilon * (w / total) for w in weights]
    shares[-1] = epsilon - math.fsum(shares[:-1])
    start = list(shares)
    if not _absorb_rounding_in_last(shares, epsilon):
        # The exact sum sits on a rounding tie that whole ulps of the last share cannot
        # leave (an earlier share carries a finer bit, and round-half-even never lands on
        # ε when its last mantissa bit is odd): move each earlier share by one of its own
        # ulps in turn until the last share can absorb the rest.
        for index in range(len(shares) - 1):
            for direction in (math.inf, -math.inf):
                trial = list(start)
                trial[index] = math.nextafter(trial[index], direction)
                if _absorb_rounding_in_last(trial, epsilon):
                    shares = trial
                    break
            else:
                continue
            break
        else:  # pragma: no cover - no input found that needs more than one nudge
            raise ValueError(f"epsilon ({epsilon!r}) cannot be split exactly into {len(weights)} shares")
    if not all(s > 0 for s in shares):
        raise ValueError(f"epsilon ({epsilon!r}) must be large enough that every share is > 0")
    return tuple(shares)


def _absorb_rounding_in_last(shares: list[float], epsilon: float) -> bool:
    """Step the last share by ulps until ``math.fsum(shares) == epsilon``; ``False`` if it cannot."""
    for _ in range(64):
        if math.fsum(shares) == epsilon:
            return True
        gap = math.fsum([*shares, -epsilon])
        shares[-1] = math.nextafter(shares[-1], -math.inf if gap > 0 else math.inf)
    return math.fsum(shares) == epsilon


def preflight(ledger: Ledger, planned: Sequence[PrivacyEvent]) -> None:
    """Raise :class:`BudgetExceededError` now if ``planned`` would not fit the ledger's cap.

    Replays the ledger's events and then ``planned`` on a fresh copy, so a mechanism that
    charges several steps is refused before its first release rather than part-way through.
    """
    if not isinstance(ledger, Ledger):
        raise TypeError(f"ledger ({ledger!r}) must be a privlab Ledger")
    ledger.preflight(planned)
