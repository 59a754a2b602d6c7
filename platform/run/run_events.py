"""The two typed interfaces a run reports to, the way Ray Tune reports to its ``Callback``s.

The trial scheduler and the actor pool report every merged result and every round of results
to one :class:`RunEvents` object; the driver of ``privlab run`` implements it: progress,
per-configuration logging, ``--max-units`` and checkpoints all hang off these three events. The
caller of :func:`~privlab.platform.run.runner.run_experiment` may pass a :class:`RunLifecycle`
to hear when the parent run exists and when a Ctrl-C abandons its cleanup (the command line
prints the resume command then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from privlab.platform.execution.aggregation import ConfigAggregate
    from privlab.platform.run.configuration_state import ConfigState


class RunEvents(Protocol):
    def range_merged(self, state: ConfigState, result: ConfigAggregate, units: int) -> None:
        """A range of ``units`` trials of ``state``'s configuration was merged (``result`` is the range's)."""

    def item_merged(self, state: ConfigState, seconds: float) -> None:
        """One actor-pool item of ``state``'s configuration was merged; it took ``seconds`` to process."""

    def round_finished(self) -> None:
        """A round of results was merged (a moment to checkpoint)."""


class RunLifecycle(Protocol):
    def run_started(self, run_id: str) -> None:
        """The parent run ``run_id`` exists (it can be resumed from now on)."""

    def run_abandoned(self, run_id: str) -> None:
        """A second Ctrl-C abandoned the run's cleanup; work up to its last checkpoint is kept."""
