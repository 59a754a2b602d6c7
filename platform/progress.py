"""Progress for long runs: a one-line bar with rate and ETA on a terminal, periodic log lines
otherwise (CI logs, files). Written to stderr so stdout stays machine-readable."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _duration(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _count(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


class Progress:
    """Tracks units done out of a total; redraws at most every ``interval`` seconds."""

    def __init__(
        self,
        total: int,
        *,
        label: str = "units",
        stream: TextIO | None = None,
        enabled: bool = True,
        interval: float | None = None,
    ) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.2 if self.interactive else 10.0)
        self.done = 0
        self.start_done = 0
        self.configs_done = 0
        self.configs_total = 0
        self.started = time.perf_counter()
        self._last = 0.0

    def resume_from(self, done: int) -> None:
        """Count units finished before a resume without letting them inflate the rate."""
        self.done = self.start_done = done

    def update(self, units: int = 0, *, configs_done: int | None = None, force: bool = False) -> None:
        self.done += units
        if configs_done is not None:
            self.configs_done = configs_done
        now = time.perf_counter()
        if self.enabled and (force or now - self._last >= self.interval):
            self._last = now
            self._draw(now)

    def line(self, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = (self.done - self.start_done) / elapsed
        remaining = (self.total - self.done) / rate if rate > 0 else float("inf")
        fraction = min(self.done / self.total, 1.0)
        width = 24
        bar = "#" * int(fraction * width) + "." * (width - int(fraction * width))
        configs = f" · configs {self.configs_done}/{self.configs_total}" if self.configs_total else ""
        return (
            f"[{bar}] {fraction:6.1%} {_count(self.done)}/{_count(self.total)} {self.label}"
            f" · {_count(rate)}/s · elapsed {_duration(elapsed)} · ETA {_duration(remaining)}{configs}"
        )

    def _draw(self, now: float) -> None:
        text = self.line(now)
        if self.interactive:
            self.stream.write("\r" + text + "\x1b[K")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            if self.interactive:
                self.stream.write("\n")
            self.stream.flush()
