"""The one small interface every endpoint implements.

The bus owns filtering, buffering and ordering; an endpoint only turns a batch
of events into durable output. `write(batch)` returns once the batch is
acknowledged (written and flushed to the OS, confirmed by the broker,
committed by the database): only then may followers checkpoint past it. An
exception from `write` means the batch was not (fully) delivered; the bus
reports it and applies the run's failure policy.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence, TypeVar

from streamer.events import Event
from streamer.util.urls import EndpointURL
from streamer.endpoints.options import Option, parse_bool

log = logging.getLogger("streamer.endpoints")

T = TypeVar("T")

ENCODE_ERRORS = (ValueError, OverflowError, TypeError, OSError)
"""What encoding one event can raise (a time beyond the platform's, a value no codec writes)."""


class EndpointError(RuntimeError):
    """A failure of an endpoint, with a message fit for the user (no secrets)."""


@dataclass
class Pending:
    """What an endpoint took from the bus but its server has not acknowledged yet, and what it cost: read by
    the metrics (`streamer/run/metrics.py`), so that a spooled event is not counted as delivered."""

    spooled: int = 0
    """Events in its spool now (the server away)."""
    spooled_total: int = 0
    """Events this process appended to the spool (the bus counted them as delivered)."""
    drained: int = 0
    """Events replayed from the spool and acknowledged by the server."""
    since: float | None = None
    """`time.monotonic()` since when events have waited in the spool (None: it is empty)."""
    held: int = 0
    """Events held for another writer's rows (a database's `wait_parents`)."""
    failures: int = 0
    """Connections lost or refused, replays that failed (errors)."""
    owner: int = 0
    """`id` of the object that counts (an endpoint shared by several buses is counted once)."""


class Endpoint(abc.ABC):
    """Base of all endpoints: subclass, set `schemes`, implement `write`."""

    schemes: ClassVar[tuple[str, ...]] = ()
    declared_options: ClassVar[tuple[Option, ...] | None] = None
    """This endpoint's own options (`options.py`), beyond the bus's and the common ones."""
    default_events: ClassVar[str] = "*"
    """Filter used when neither `?events=` nor the config gives one."""
    spool_grace: ClassVar[float] = 5.0
    """Seconds a retriable fault may last before the spooling layer spools (unless `?spool_grace=`)."""

    def __init__(self, url: EndpointURL, options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.options: dict[str, Any] = {**url.options, **(options or {})}
        self.unencodable = 0
        """Events this endpoint could not encode and skipped (each logged once)."""

    @property
    def name(self) -> str:
        """Display name: the URL with any password masked."""
        return self.url.masked

    async def open(self) -> None:
        """Connect / open files. Called once before the first write."""

    def prepare(self, events: Sequence[Event]) -> None:
        """Called as events enter this endpoint's buffer (right after the source made them).

        An endpoint can compute here what `write` will need and events cache
        (their id, JSON and BP forms): it then runs while the events are still
        in the CPU's cache rather than thousands of events later.
        """

    @abc.abstractmethod
    async def write(self, batch: Sequence[Event]) -> None:
        """Deliver `batch` in order; return only once it is acknowledged."""

    # -- exactly-once resume (endpoints whose output can be cut back: files) ----------

    state_key: str | None = None
    """Set by an endpoint that can resume exactly: the key of its mark in the source's checkpoint."""

    def resume(self, mark: Any) -> None:
        """Called before `open` with the mark saved with the checkpoint the source resumes from:
        the endpoint undoes what it wrote after that checkpoint (a file is cut back to its length)."""

    def mark(self) -> Any:
        """Where the output stands now (JSON-serialisable), saved with the source's checkpoint."""
        return None

    async def write_marked(self, batch: Sequence[Event], ends: Sequence[int]) -> list[Any]:
        """`write`, returning `mark()` as it stood after each `batch[:end]` (one per source batch)."""
        await self.write(batch)
        return [self.mark() for _ in ends]

    def holding(self) -> bool:
        """True while events of an earlier `write` are held to be written later (a database waiting for
        another writer's parent rows): the bus then acknowledges nothing from that write on."""
        return False

    def pending(self) -> Pending:
        """What it holds unacknowledged (`Pending`); nothing unless a layer or the endpoint says otherwise."""
        return Pending(owner=id(self))

    def health(self) -> str | None:
        """None while the endpoint can deliver, else a reason (its broker or server is unreachable):
        `/healthz` answers 503 with it (`streamer/run/metrics.py`)."""
        return None

    def default_spool(self) -> Path | None:
        """Where the spooling layer spools when `?spool=` is not given (None: no spool unless asked)."""
        return None

    def leftover_spools(self) -> list[Path]:
        """Spools earlier runs left for this destination elsewhere than `default_spool` (another address of
        the same broker's exchange): the spooling layer delivers them first."""
        return []

    def give_up_after(self, seconds: float) -> None:
        """Raise `resilience.Unavailable` once a retriable fault has lasted `seconds` (instead of retrying for
        `retry_for`): the spooling layer (`spooling.py`) calls it, and spools what the endpoint cannot take.
        An endpoint that does not retry has nothing to shorten."""

    def undelivered(self) -> list[tuple[int, str]]:
        """(count, what became of them) for events written here that did not arrive where the URL says: the
        end summary subtracts them from the events delivered and names them (`pipeline.print_summary`), so
        `5 -> amqp://… ok` never stands for five events the broker dropped."""
        return [(self.unencodable, "skipped (cannot be encoded)")] if self.unencodable else []

    async def flush(self) -> None:
        """Make everything written so far durable (e.g. fsync). Called at checkpoints and exit."""

    async def close(self) -> None:
        """Release resources; everything written must be delivered by now."""

    def encode_each(self, batch: Sequence[Event], encode: Callable[[Sequence[Event]], T],
                    join: Callable[[list[T]], T]) -> T:
        """`encode(batch)`, or, when one event of it cannot be encoded, the batch without that event.

        An event no codec can write (a time beyond what the platform formats) is
        that event's error, never the endpoint's: it is logged with its name and
        skipped, and the rest of the batch is written.
        """
        try:
            return encode(batch)
        except ENCODE_ERRORS:
            pass
        parts = []
        for event in batch:
            try:
                parts.append(encode([event]))
            except ENCODE_ERRORS as exc:
                self.unencodable += 1
                log.warning("%s: event %s (%s) cannot be encoded, skipped: %s", self.name, event.name,
                            _subject(event), exc)
        return join(parts)

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.options.get(key)
        if value is None:
            return default
        return parse_bool(value)


def _subject(event: Event) -> str:
    """Who an event is about, for messages: its workflow, job and instance when it has them."""
    fields = event.fields
    parts = [f"{key}={fields[key]}" for key in ("xwf.id", "job.id", "job_inst.id", "inv.id") if key in fields]
    return ", ".join(parts) or "no workflow or job fields"
