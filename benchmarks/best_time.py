"""The one timing rule the benchmarks share: the fastest of several runs of the same work.

Imported by the benchmarks; run on its own it measures what the rule itself costs, so a figure
near it is known to be timer noise::

    python benchmarks/best_time.py
    best_of_5_empty_call_seconds: 0.000000070
    perf_counter_resolution_seconds: 0.000000001
"""

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


def main() -> int:
    print(f"best_of_5_empty_call_seconds: {best_seconds(lambda: None, 5):.9f}")
    print(f"perf_counter_resolution_seconds: {time.get_clock_info('perf_counter').resolution:.9f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
