"""Stopping a command cleanly: Ctrl-C and SIGTERM, and more of either while a stopped run saves.

The first Ctrl-C stops ``privlab run`` (a ``KeyboardInterrupt`` in the driver). Saving then
takes a moment — the checkpoint, pending tracking writes, stopping Ray — and a second
``KeyboardInterrupt`` landing in the middle of it would end the process with a traceback and
exit code 1, leaving the parent run RUNNING. Inside :func:`shielded_cleanup` the next press
only says what is happening; the one after calls ``abandon`` and exits at once with 130 (the
run stays resumable: it was checkpointed as it went, and its lease shows the driver as gone).

SIGTERM — ``kill``, ``timeout``, a batch scheduler or container runtime ending a job — gets the
same clean stop (:func:`sigterm_as_interrupt`): a run checkpoints and is marked resumable, a
release removes its staging folder. It matters most for a run started in the background by a
script, which ignores SIGINT and before could only be killed outright, losing the work since
its last checkpoint. A SIGTERM during the save is noted and otherwise ignored: the sender's
SIGKILL, if it comes, is what cuts a save short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

EXIT_INTERRUPTED = 130


@contextlib.contextmanager
def shielded_cleanup(abandon: Callable[[], None]) -> Iterator[None]:
    """Run the body with SIGINT counted and SIGTERM noted instead of raised (main thread only;
    elsewhere a no-op).

    Args:
        abandon: Called before exiting on the second press inside the body (print the run id
            and how to resume); the process then ends with :data:`EXIT_INTERRUPTED`.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    presses = 0

    def on_sigint(_signum: int, _frame: Any) -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            print("\nprivlab: saving finished work before stopping; press Ctrl-C again to abandon the save "
                  "(the run stays resumable from its last checkpoint)", file=sys.stderr, flush=True)
            return
        with contextlib.suppress(Exception):
            abandon()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)

    def on_sigterm(_signum: int, _frame: Any) -> None:
        print("\nprivlab: saving finished work before stopping", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    previous_term = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the body, SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does, so the same clean
    stop runs (main thread only; elsewhere a no-op). The previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_owns_sigint = False


@contextlib.contextmanager
def owned_interrupts(owned: bool) -> Iterator[None]:
    """While a command runs: whether the process is the command's own (the ``privlab`` command,
    not a test calling it in process), so :func:`ignore_further_interrupts` may take SIGINT over;
    when the command ends, further Ctrl-Cs are ignored until the process exits, so its exit code
    stays the command's (130 after an interruption)."""
    global _owns_sigint
    _owns_sigint = owned
    try:
        yield
    finally:
        ignore_further_interrupts()
        _owns_sigint = False


def ignore_further_interrupts() -> None:
    """Ignore further Ctrl-Cs in a process the command owns (:func:`owned_interrupts`): once an
    interrupted command has said what happened, a press landing after it would otherwise end
    Python with a second ``KeyboardInterrupt``. In-process callers keep their own handling."""
    if _owns_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
