"""What the runner is told while a run's configurations execute (one typed interface).

The trial scheduler and the actor pool report every merged result and every round of results
to one :class:`RunEvents` object, the way Ray Tune reports trial events to its ``Callback``s.
The driver of ``privlab run`` implements it: progress, per-configuration logging, ``--max-units``
and checkpoints all hang off these three events.
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
