"""The one timing rule the benchmarks share: the fastest of several runs of the same work."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(work: Callable[[], object], repeats: int) -> float:
    """The wall time of the fastest of ``repeats`` calls of ``work`` (the least disturbed by load)."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return min(times)
