"""Tracking calls run in order on one background thread, so the driver never waits on the store."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from privlab.platform.errors import TrackingError


class BackgroundWriter:
    """Runs tracking calls in order on one background thread, so the driver never waits on
    the store while workers need new work. ``flush`` waits for everything submitted and
    re-raises the first error; ``blocked_seconds`` is the time the driver spent waiting.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._error: BaseException | None = None
        self.blocked_seconds = 0.0
        self._thread = threading.Thread(target=self._work, name="privlab-tracking", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            try:
                if task is None:
                    return
                if self._error is None:
                    task()
            except BaseException as error:  # reported to the driver by flush()
                self._error = error
            finally:
                self._queue.task_done()

    def submit(self, task: Callable[[], Any]) -> None:
        self._raise()
        self._queue.put(task)

    def flush(self) -> None:
        began = time.perf_counter()
        self._queue.join()
        self.blocked_seconds += time.perf_counter() - began
        self._raise()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=60)

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise TrackingError(f"logging to MLflow failed: {type(error).__name__}: {error}") from error
