"""What the bus needs from a source of events.

A source yields batches of events, each with the position reached after it
(an opaque, JSON-serialisable value, or None when the source cannot resume).
The bus calls `commit(position)` once every endpoint has acknowledged every
event up to that batch; the source persists it (checkpoint file, state
file) so a restart resumes there: nothing lost, nothing repeated.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, ClassVar, Protocol

from streamer.events import Event


@dataclass
class Batch:
    """Events read together, and where the source stands once they are delivered."""

    events: list[Event]
    position: Any = None
    done: int = 0
    """Units of work done so far (lines, jobs, ...) for progress lines."""
    total: int | None = None
    """Units of work in all, when known."""
    warnings: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    """Inputs that gave fewer events than they should, by reason (each named in a warning): the run
    counts them in its summary and in `streamer_input_dropped_total`."""


class SourceError(Exception):
    """The source cannot go on (e.g. a bad line under --strict): the run ends with exit 1
    once what came before has been delivered."""


class Downstream(Protocol):
    """What a source may ask of where its batches go (the run's bus)."""

    def holding(self) -> bool:
        """True while an endpoint holds events of a published batch back (nothing from it on is committed)."""

    def writing(self) -> bool:
        """True while an endpoint that has not failed has events of a published batch still to write (buffered,
        parked or being written), or written but not yet committed to the source (being flushed)."""


class Source(abc.ABC):
    """Base of event sources (event-file follower, workflow monitor, broker tail): what each offers a run.

    A run reads `batches()` into its endpoints and hands each acknowledged position to `commit`; it resumes
    exactly-once endpoints from `endpoint_marks()`; `follow`, `workflows` and `reachable` say what kind of
    source it is (how a signal ends the run, what the metrics count)."""

    follow: bool = False
    """The source follows growing input until stopped (a signal then ends the run normally)."""
    workflows: ClassVar[int] = 0
    """Workflows the source follows (the workflow monitor: one, with its sub-workflows): `streamer_workflows_active`
    while it runs."""
    reachable: ClassVar[bool] = False
    """The source reads from a server whose reachability `health()` says (`/healthz`, `streamer_source_up`)."""
    node: str = ""
    """The server node (`host:port`) the source reads from now, of the several its URL may name
    (`streamer_amqp_node`); empty: none (yet)."""
    downstream: Downstream | None = None
    """Where the batches go, given by the run (`Run` sets it to its bus before the first batch)."""

    @property
    def name(self) -> str:
        """What the source is called in metrics (`streamer_amqp_node`'s client) and messages."""
        return type(self).__name__

    def held_downstream(self) -> bool:
        """True while an endpoint holds events of a published batch back (nothing from it on is committed):
        the run's bus says (`Bus.holding`). A broker source widens its prefetch window then."""
        return self.downstream is not None and self.downstream.holding()

    def health(self) -> str | None:
        """None while the source can read (a broker source: connected to it), else why not (`reachable`)."""
        return None

    @abc.abstractmethod
    def batches(self) -> AsyncIterator[Batch]:
        """Batches of events in order; ends when the source is exhausted (replay) or stopped."""

    async def commit(self, position: Any, endpoints: dict[str, Any] | None = None) -> None:
        """Everything up to `position` is acknowledged by all endpoints: persist it.

        `endpoints`: the marks of endpoints that resume exactly (file lengths), to be saved in
        the same atomic write and handed back by `endpoint_marks()` after a restart."""

    def endpoint_marks(self) -> dict[str, Any]:
        """Marks saved with the checkpoint this run resumes from (empty when starting afresh)."""
        return {}

    async def commit_start(self, endpoints: dict[str, Any]) -> None:
        """Before the first event: when starting afresh, record the endpoints' marks as a checkpoint
        "from the beginning", so a crash before the first real checkpoint is undone too."""

    def stop(self) -> None:
        """Ask the source to end after the batch under way (signals, shutdown)."""

    async def close(self) -> None:
        """Release files and tasks."""
