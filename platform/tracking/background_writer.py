"""Tracking calls run in order on one background thread, so the driver never waits on the store.

Items submitted with :meth:`BackgroundWriter.submit_batched` that follow one another are sent
together, in one call of their sender: the writer takes the first, then waits up to
``linger_s`` for more (any other call ends the wait), up to ``max_batch`` items. A local store
then writes a batch of configuration runs in one transaction, and their results in one part.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from privlab.platform.core.errors import TrackingError, TrackingOutage
from privlab.platform.tracking.tracking_outage import is_unreachable

log = logging.getLogger(__name__)

_Item = tuple[Callable[[], Any], Any]


def _nothing() -> None:
    return None


class _Batched:
    """A batchable item: ``send([item, ...])`` logs it with its neighbours."""

    __slots__ = ("send", "item")

    def __init__(self, send: Callable[[list[Any]], Any], item: Any) -> None:
        self.send = send
        self.item = item

    def __call__(self) -> Any:  # sent alone
        return self.send([self.item])


class BackgroundWriter:
    """Runs tracking calls in order on one background thread, so the driver never waits on
    the store while workers need new work. ``flush`` waits for everything submitted and
    re-raises the first error; ``blocked_seconds`` is the time the driver spent waiting.

    A call that fails because the tracking server is unreachable
    (:func:`~privlab.platform.tracking.tracking_outage.is_unreachable`) is tried again every
    ``retry_interval_s`` until ``outage_wait_s`` have passed since the outage began; calls
    submitted meanwhile wait their turn. Calls must therefore be safe to repeat (a result run
    is sent step by step, :meth:`privlab.platform.tracking.tracker.Tracker.send`). When the wait runs
    out, the writer stops with :class:`~privlab.platform.core.errors.TrackingOutage`, and the things
    submitted with ``keep=`` that never got through are in :attr:`unsent`, in order.
    """

    def __init__(self, *, outage_wait_s: float = 120.0, retry_interval_s: float = 5.0, linger_s: float = 0.5,
                 max_batch: int = 2000) -> None:
        self._queue: queue.Queue[_Item | None] = queue.Queue()
        self.linger_s = linger_s
        self.max_batch = max_batch
        self._held: _Item | None | bool = False  # an item taken while collecting a batch (False: none)
        self._error: BaseException | None = None
        self.outage_wait_s = outage_wait_s
        self.retry_interval_s = retry_interval_s
        self.outage_began: float | None = None  # time.monotonic() of the first failed call, while it lasts
        self.unsent: list[Any] = []
        self.blocked_seconds = 0.0
        self._abandoned = threading.Event()
        self._thread = threading.Thread(target=self._work, name="privlab-tracking", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._next(None)
            if item is None:
                self._queue.task_done()
                return
            task, keep = item
            batch = [(task, keep)]
            if isinstance(task, _Batched):
                batch += self._collect(task.send)
            try:
                if len(batch) > 1:
                    send = task.send  # type: ignore[union-attr]
                    items = [t.item for t, _ in batch]  # type: ignore[union-attr]
                    task = lambda: send(items)  # noqa: E731
                sent = self._error is None and self._run(task)
                if not sent:
                    self.unsent.extend(k for _, k in batch if k is not None)
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _next(self, timeout: float | None) -> _Item | None:
        """The next item (a held one first); raises ``queue.Empty`` after ``timeout`` seconds."""
        if self._held is not False:
            item, self._held = self._held, False
            return item  # type: ignore[return-value]
        return self._queue.get(timeout=timeout) if timeout is not None else self._queue.get()

    def _collect(self, send: Callable[[list[Any]], Any]) -> list[_Item]:
        """The batchable items of ``send`` that follow, waiting up to ``linger_s`` for them."""
        collected: list[_Item] = []
        deadline = time.monotonic() + self.linger_s
        while len(collected) + 1 < self.max_batch:
            try:
                item = self._next(max(deadline - time.monotonic(), 0.0) if self._queue.empty() else 0.0)
            except queue.Empty:
                break
            task = None if item is None else item[0]
            if not isinstance(task, _Batched) or task.send != send:
                self._held = item  # not of this batch: it goes next
                break
            collected.append(item)  # type: ignore[arg-type]
        return collected

    def _run(self, task: Callable[[], Any]) -> bool:
        """Run ``task``, through an outage if need be; whether it got through."""
        while True:
            try:
                task()
            except BaseException as error:  # reported to the driver by flush()
                if not is_unreachable(error):
                    self._error = error
                    return False
                if not self._wait_out(error):
                    return False
            else:
                if self.outage_began is not None:
                    log.warning("the tracking server answers again after %.0f s; logging goes on",
                                time.monotonic() - self.outage_began)
                    self.outage_began = None
                return True

    def _wait_out(self, error: BaseException) -> bool:
        """Sleep before the next try; False (and the writer stopped) when the wait has run out."""
        now = time.monotonic()
        if self.outage_began is None:
            self.outage_began = now
            log.warning("the tracking server cannot be reached; the run goes on and retries for up to %g s "
                        "([tracking] outage_wait_s)", self.outage_wait_s)
        waited = now - self.outage_began
        if waited >= self.outage_wait_s or self._abandoned.is_set():
            if self._error is None:
                self._error = TrackingOutage(
                    f"the tracking server could not be reached for {waited:.0f} s ([tracking] outage_wait_s = "
                    f"{self.outage_wait_s:g}): {error}"
                )
            return False
        self._abandoned.wait(min(self.retry_interval_s, self.outage_wait_s - waited))
        return True

    def submit(self, task: Callable[[], Any], *, keep: Any = None) -> None:
        """Run ``task`` after everything submitted before it; ``keep`` is what to keep for a
        resume (:attr:`unsent`) if the tracking server goes away before ``task`` gets through."""
        self._raise()
        self._queue.put((task, keep))

    def submit_batched(self, send: Callable[[list[Any]], Any], item: Any, *, keep: Any = None) -> None:
        """Have ``send`` log ``item`` after everything submitted before it, together with the
        batchable items of the same ``send`` that follow it (one call: ``send([item, ...])``)."""
        self._raise()
        self._queue.put((_Batched(send, item), keep))

    def call(self, task: Callable[[], Any], *, meanwhile: Callable[[], Any] | None = None) -> Any:
        """Run ``task`` after everything submitted, through an outage like the rest, and return
        its value; an error other than an unreachable server is raised as it was. ``meanwhile``
        runs on the calling thread while the writer's thread works (its error is raised first)."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = task()
            except BaseException as error:
                if is_unreachable(error):
                    raise  # the writer waits out the outage and tries again
                box["error"] = error

        self.submit(run)
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            self.flush()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def abandon(self, reason: str) -> None:
        """Give up on the tracking server now (the driver met an outage itself): a call being
        retried stops, and everything still queued goes to :attr:`unsent`."""
        if self._error is None:
            self._error = TrackingOutage(reason)
        self._abandoned.set()
        self._queue.join()

    def flush(self) -> None:
        """Wait for everything submitted (a batch being collected is sent at once, without its
        wait for more), then re-raise the first error."""
        began = time.perf_counter()
        self._queue.put((_nothing, None))  # not batchable: ends the collecting of a batch now
        self._queue.join()
        self.blocked_seconds += time.perf_counter() - began
        self._raise()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=60)

    @property
    def failed(self) -> bool:
        return self._error is not None

    def _raise(self) -> None:
        if self._error is not None:
            error = self._error
            if isinstance(error, TrackingOutage):
                raise error  # kept: unsent work is only safe while nothing else is logged
            self._error = None
            raise TrackingError(f"logging to MLflow failed: {type(error).__name__}: {error}") from error
