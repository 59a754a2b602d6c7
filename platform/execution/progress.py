"""Progress for long runs: a one-line bar with rate and ETA on a terminal, periodic log lines
otherwise (CI logs, files). Written to stderr so stdout stays machine-readable.

Units differ in cost by orders of magnitude (a Laplace trial takes microseconds, a pMSE trial
milliseconds, a simulation of the pMSE mechanism seconds), so the bar and the ETA weigh each cost
class's units (a study, or a kind of configuration within it: ``Workload.cost_class``) by its
measured compute seconds per unit. Counting units alone showed 96.8% with "ETA 00:00" while the
expensive 3% of the units still needed most of the time; one cost per study put Section 6's ETA
at 56 h when its Metropolis chains needed 6 h and its closed-form methods minutes. A resumed run
starts from the costs its earlier sessions measured; a class nobody has timed yet is named in
the line rather than guessed into the ETA. The bar shows 100% only when every configuration is
complete.

A class's first measured batch pays what only the first pays (JIT compilation, imports, caches
loaded): the first quickstart spent 27 s of a 72 s run compiling the pMSE trees inside its first
batch, and the ETA jumped to 5:59:40. So that batch prices the class for the bar only; the
class is "not yet timed" for the ETA until its second batch, whose cost replaces the first's
rather than being averaged with it. The rate of work is the compute seconds measured per
second of wall time (how many workers are busy), which a slow batch does not distort: its
seconds count as the work they were.

The line is also redrawn on a timer (:meth:`Progress.start_ticking`), not only when results come
back: a bar redrawn only then sat at ``75.0% 24/32 units · ETA 00:01`` for 16 minutes while
``grid_pgm``'s last units ran. The elapsed time keeps moving, and once no result has come back
for a while the line says how long ago the last one did.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
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


#: After this long without a result the line says when the last one came (long units at work).
QUIET_SECONDS = 30.0


class UnitCosts(dict[str, float]):
    """Compute seconds per unit of each cost class, learnt from results as they come back: each
    measurement moves the estimate halfway to it, so a class's cost follows a changing load."""

    def measure(self, cost_class: str, seconds_per_unit: float) -> None:
        known = self.get(cost_class)
        self[cost_class] = seconds_per_unit if known is None else 0.5 * (known + seconds_per_unit)


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
        classes: Mapping[str, int] | None = None,
    ) -> None:
        self.total = max(total, 1)
        self.class_totals = dict(classes) if classes else {"": total}
        self.class_done = {name: 0 for name in self.class_totals}
        self.start_class_done = dict(self.class_done)
        self.seconds_per_unit = UnitCosts()
        self.provisional: set[str] = set()  # classes priced by their first batch only (not in the ETA yet)
        self.measured_seconds = 0.0  # compute seconds of the units done in this session
        self.unmeasured_done: dict[str, int] = {}  # units done in this session without a time
        self._shown_fraction = 0.0
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
        self._last_result = self.started  # when units were last counted
        self._lock = threading.Lock()  # update() on the driver's thread, redraws also on the ticker's
        self._ticking: threading.Event | None = None
        self._ticker: threading.Thread | None = None

    def resume_from(self, done: int, *, classes: Mapping[str, int] | None = None,
                    seconds_per_unit: Mapping[str, float] | None = None) -> None:
        """Count units finished before a resume without letting them inflate the rate, and start
        from the cost per unit of each class that earlier sessions measured."""
        self.done = self.start_done = done
        if classes:
            self.class_done.update(classes)
            self.start_class_done = dict(self.class_done)
        self.seconds_per_unit.update({k: v for k, v in (seconds_per_unit or {}).items() if v > 0})

    def update(self, units: int = 0, *, cost_class: str = "", seconds: float | None = None,
               configs_done: int | None = None, force: bool = False) -> None:
        """Count ``units`` of ``cost_class`` done; ``seconds`` is their compute time (updates the class's cost)."""
        with self._lock:
            self._update(units, cost_class=cost_class, seconds=seconds, configs_done=configs_done, force=force)

    def _update(self, units: int, *, cost_class: str, seconds: float | None, configs_done: int | None,
                force: bool) -> None:
        if units:
            self._last_result = time.perf_counter()
        self.done += units
        if units:
            self.class_done[cost_class] = self.class_done.get(cost_class, 0) + units
            if seconds is not None and seconds > 0:
                self.measured_seconds += seconds
                if cost_class in self.provisional:  # the second batch: replaces the first's price
                    self.provisional.discard(cost_class)
                    self.seconds_per_unit[cost_class] = seconds / units
                else:
                    if cost_class not in self.seconds_per_unit:
                        self.provisional.add(cost_class)
                    self.seconds_per_unit.measure(cost_class, seconds / units)
            else:
                self.unmeasured_done[cost_class] = self.unmeasured_done.get(cost_class, 0) + units
        if configs_done is not None:
            self.configs_done = configs_done
        now = time.perf_counter()
        if self.enabled and (force or now - self._last >= self.interval):
            self._last = now
            self._draw(now)

    def _work(self, counts: Mapping[str, int]) -> float:
        """Units weighted by each class's seconds per unit (unmeasured classes: the dearest measured)."""
        if not self.seconds_per_unit:
            return float(sum(counts.values()))
        fallback = max(self.seconds_per_unit.values())
        return sum(n * self.seconds_per_unit.get(name, fallback) for name, n in counts.items())

    def untimed(self) -> list[str]:
        """The classes with units left whose cost per unit nobody has measured yet, beyond a
        first batch (module docstring)."""
        if not self.seconds_per_unit:  # nothing timed at all: the bar counts units
            return []
        return [name for name, units in self.class_totals.items()
                if units > self.class_done.get(name, 0)
                and (name not in self.seconds_per_unit or name in self.provisional)]

    def fraction_and_remaining(self, now: float | None = None) -> tuple[float, float]:
        """(share of the work done, estimated seconds left); below 100% until every configuration is done.

        The share prices an untimed class like the dearest timed one; the time left counts the
        timed classes only (the line adds how many are untimed), because a guess at a cost
        nobody has measured can be wrong by orders of magnitude either way, and so can a
        first batch's (module docstring).
        """
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        total, done = self._work(self.class_totals), self._work(self.class_done)
        if self.measured_seconds > 0:  # compute seconds per wall second: the busy workers
            rate = (self.measured_seconds + self._work(self.unmeasured_done)) / elapsed
        else:
            rate = (done - self._work(self.start_class_done)) / elapsed
        fraction = min(done / total, 1.0) if total > 0 else 1.0
        untimed = set(self.untimed())
        left = {name: max(units - self.class_done.get(name, 0), 0)
                for name, units in self.class_totals.items() if name not in untimed}
        remaining = self._work(left) / rate if rate > 0 else float("inf")
        if self.configs_total and self.configs_done < self.configs_total:
            fraction = min(fraction, 0.999)
            remaining = max(remaining, 1.0) if rate > 0 else remaining
        return fraction, remaining

    def line(self, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = (self.done - self.start_done) / elapsed
        fraction, remaining = self.fraction_and_remaining(now)
        # A class's cost is learnt from its first results, which can move the weighted share
        # backwards; the bar never does.
        fraction = self._shown_fraction = max(self._shown_fraction, fraction)
        width = 24
        bar = "#" * int(fraction * width) + "." * (width - int(fraction * width))
        untimed = len(self.untimed())
        eta = _duration(remaining) + (f" + {untimed} kind(s) of configuration not yet timed" if untimed else "")
        configs = f" · configs {self.configs_done}/{self.configs_total}" if self.configs_total else ""
        quiet = now - self._last_result
        waiting = f" · last result {_duration(quiet)} ago" if quiet >= QUIET_SECONDS and self.done < self.total else ""
        return (
            f"[{bar}] {fraction:6.1%} {_count(self.done)}/{_count(self.total)} {self.label}"
            f" · {_count(rate)}/s · elapsed {_duration(elapsed)} · ETA {eta}{configs}{waiting}"
        )

    def start_ticking(self, every: float | None = None) -> None:
        """Redraw every ``every`` seconds (default: 1 s on a terminal, 60 s in a log) until
        :meth:`close` or :meth:`stop`, results or not (module docstring)."""
        if not self.enabled or self._ticker is not None:
            return
        period = every if every is not None else (1.0 if self.interactive else 60.0)
        stop = self._ticking = threading.Event()

        def tick() -> None:
            while not stop.wait(period):
                with self._lock:
                    now = time.perf_counter()
                    if now - self._last >= min(period, self.interval) and not stop.is_set():
                        self._last = now
                        self._draw(now)

        self._ticker = threading.Thread(target=tick, name="privlab-progress", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        """Stop the timer's redraws (a run that ends without :meth:`close`: interrupted, failed)."""
        if self._ticking is not None:
            self._ticking.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        self._ticker = None

    def _draw(self, now: float) -> None:
        text = self.line(now)
        if self.interactive:
            self.stream.write("\r" + text + "\x1b[K")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.stop()
        if self.enabled:
            self._draw(time.perf_counter())
            if self.interactive:
                self.stream.write("\n")
            self.stream.flush()
