"""In-process fan-out: every event to every endpoint, each with its own filter,
bounded buffer, task, batching and acknowledgements.

    source ──publish(Batch)──► Bus ─┬─► Route(filter, buffer) ─► task ─► endpoint.write(batch)
                                    ├─► Route(...)            ─► task ─► ...
                                    └─► checkpoint: min(acked seq) ─► source.commit(position)

- Each published source batch gets a sequence number. A route acknowledges a
  sequence number once its endpoint's `write` returned for every event up to
  it (events its filter dropped count as acknowledged).
- The source's checkpoint only advances to positions every route has
  acknowledged (Filebeat's registry idea): a restart neither loses nor repeats.
- Backpressure is per route: once a route's memory buffer is full, further
  batches for it are parked in its overflow file on disk (`core/overflow.py`) and
  read back in order when it catches up, so a slow endpoint slows only itself.
  Publishing waits only when that file reaches its cap too (or when overflow
  is off: `?overflow=off`). The file stores records with the codec the route
  is given (the pipeline gives `events.codec.JSON_LINES`): the bus sees
  records with a name (`record.Record`), endpoints as `sink.Sink`s and source
  batches as `record.Batch`es, and knows no Stampede.
- A failing endpoint is reported with its (masked) name. Policy `stop` (the
  default) ends the run with an error; `isolate` keeps the others running and
  freezes the checkpoint at what the failed endpoint acknowledged, so a rerun
  re-delivers what it missed (endpoints drop duplicates by stable id).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Generic, Sequence, TypeVar

from streamer.core.filters import EventFilter
from streamer.core.options import OptionError, size_or_off
from streamer.core.overflow import OverflowFile
from streamer.core.record import Batch, Codec, Record
from streamer.core.sink import Sink

log = logging.getLogger("streamer.bus")

DEFAULT_BUFFER = 50_000
DEFAULT_BATCH = 5_000
DEFAULT_OVERFLOW_BYTES = 1 << 30

R = TypeVar("R", bound=Record)


class BusError(RuntimeError):
    """An endpoint failed under the `stop` policy."""


@dataclass
class RouteStats:
    delivered: int = 0
    batches: int = 0
    busy_seconds: float = 0.0


class Route(Generic[R]):
    """One endpoint in the bus: its filter, buffer and delivery task.

    `codec` writes the records parked in the overflow file; None only with the overflow off."""

    def __init__(self, endpoint: Sink[R], events: EventFilter, *, buffer: int, batch: int, codec: Codec[R] | None,
                 overflow_bytes: int = DEFAULT_OVERFLOW_BYTES, overflow_dir: str | None = None) -> None:
        if overflow_bytes > 0 and codec is None:
            raise ValueError(f"endpoint {endpoint.name}: an overflow file needs a codec (or overflow=off)")
        self.endpoint = endpoint
        self.codec = codec
        self.filter = events
        self.capacity = max(1, buffer)
        self.batch_max = max(1, batch)
        self.pending: deque[tuple[int, Sequence[R]]] = deque()
        self.buffered = 0
        self.acked_seq = 0
        self.written_seq = 0
        self.hold_from: int | None = None
        """First source batch of a write whose events the endpoint still holds (`Sink.holding`)."""
        self.failed: BaseException | None = None
        self.stats = RouteStats()
        self.overflow_bytes = overflow_bytes
        self.overflow_dir = overflow_dir
        self.overflow: OverflowFile[R] | None = None
        self._has_data = asyncio.Event()
        self._has_room = asyncio.Event()
        self._has_room.set()
        self._closing = False
        self.task: asyncio.Task[None] | None = None
        self.marks: deque[tuple[int, Any]] = deque()
        """(seq, endpoint mark after it) for endpoints that resume exactly (files); see `Bus._marks_at`."""
        self.last_mark: Any = None

    @property
    def name(self) -> str:
        return self.endpoint.name

    async def put(self, seq: int, events: Sequence[R]) -> None:
        """Queue the events of source batch `seq` that pass the filter.

        Memory first; when that is full, the overflow file (order kept: once
        anything is parked, newer batches are parked behind it); wait only when
        both are full.
        """
        if self.failed is not None:
            return
        if not self.filter.matches_all:
            match = self.filter.match
            events = [e for e in events if match(e.name)]
        self.endpoint.prepare(events)
        while True:
            if self.failed is not None:
                return
            parked = self.overflow is not None and len(self.overflow) > 0
            if not parked and self.buffered < self.capacity:
                self.pending.append((seq, events))
                self.buffered += len(events)
                break
            if self.overflow_bytes > 0 and not (self.overflow is not None and self.overflow.full):
                if self.overflow is None:
                    assert self.codec is not None  # checked in __init__
                    self.overflow = OverflowFile(self.overflow_dir, "route", self.overflow_bytes, self.codec)
                    log.info("endpoint %s is behind: parking events in %s", self.name, self.overflow.path)
                self.overflow.append(seq, events)
                break
            self._has_room.clear()
            await self._has_room.wait()
        self._has_data.set()

    def _refill(self) -> None:
        """Move parked batches back into memory once it has room."""
        overflow = self.overflow
        while overflow is not None and len(overflow) and self.buffered < self.capacity:
            seq, events = overflow.pop()
            self.pending.append((seq, events))
            self.buffered += len(events)

    def _take(self) -> tuple[int, list[R], list[tuple[int, int]]]:
        """Whole source batches up to `batch_max` events: (last seq, events, [(seq, end index)])."""
        seq, events = self.pending.popleft()
        taken = list(events)
        groups = [(seq, len(taken))]
        while self.pending and len(taken) + len(self.pending[0][1]) <= self.batch_max:
            seq, more = self.pending.popleft()
            taken.extend(more)
            groups.append((seq, len(taken)))
        return seq, taken, groups

    async def run(self, on_ack: Callable[[], None],
                  on_delivered: Callable[[Route[R], list[tuple[int, int]]], None] | None = None) -> None:
        while True:
            self._refill()
            if not self.pending:
                if self._closing:
                    return
                self._has_data.clear()
                await self._has_data.wait()
                continue
            seq, events, groups = self._take()
            exact = self.endpoint.state_key is not None
            if events:
                started = time.perf_counter()
                if exact:
                    marks = await self.endpoint.write_marked(events, [end for _, end in groups])
                    self.marks.extend((s, m) for (s, _), m in zip(groups, marks))
                else:
                    await self.endpoint.write(events)
                self.stats.busy_seconds += time.perf_counter() - started
                self.stats.delivered += len(events)
                self.stats.batches += 1
                self.buffered -= len(events)
                if on_delivered is not None:
                    on_delivered(self, groups)
            elif exact:
                self.marks.append((seq, self.endpoint.mark()))
            self._acknowledge(groups[0][0] if groups else seq, seq)
            if self.buffered < self.capacity:
                self._has_room.set()
            on_ack()

    def _acknowledge(self, first: int, seq: int) -> None:
        """Batches up to `seq` written; while the endpoint holds events of a write (to write them later),
        nothing from that write on counts as acknowledged, so no checkpoint passes them."""
        self.written_seq = seq
        if self.endpoint.holding():
            if self.hold_from is None:
                self.hold_from = first
            self.acked_seq = self.hold_from - 1
        else:
            self.hold_from = None
            self.acked_seq = seq

    def release(self) -> None:
        """After a flush: what the endpoint no longer holds is acknowledged."""
        if self.hold_from is not None and not self.endpoint.holding():
            self.hold_from = None
            self.acked_seq = self.written_seq

    def close_when_drained(self) -> None:
        self._closing = True
        self._has_data.set()

    def discard(self) -> None:
        """After a failure: drop the buffer and release publishers waiting for room."""
        self.pending.clear()
        self.buffered = 0
        self.close_overflow()
        self._has_room.set()

    def close_overflow(self) -> None:
        if self.overflow is not None:
            self.overflow.close()
            self.overflow = None


@dataclass
class Bus:
    """Fan-out of source batches to routes, with checkpoints committed to the source."""

    routes: list[Route[Any]]
    on_error: str = "stop"
    commit: Callable[..., Awaitable[None]] | None = None
    """The source's commit: `commit(position)`, or `commit(position, marks)` with exact sinks' marks."""
    checkpoint_interval: float = 0.0
    """Seconds between checkpoints at least; 0: after every acknowledgement (a crash then repeats
    at most the batch each endpoint had in flight)."""
    published_events: int = 0
    published_batches: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    """Inputs the source left out, by reason, as its batches say (`dropped`, when they carry it)."""
    _seq: int = 0
    _positions: deque[tuple[int, Any]] = field(default_factory=deque)
    _committed_seq: int = 0
    _last_commit: float = 0.0
    _error: BusError | None = None
    _ack_event: asyncio.Event = field(default_factory=asyncio.Event)
    _committer: asyncio.Task[None] | None = None
    _closed: bool = False
    _commit_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    on_delivered: Callable[[Route[Any], list[tuple[float, int]]], None] | None = None
    """Observer (metrics): called after each write with (time published, events) per source batch."""
    _published_at: deque[tuple[int, float]] = field(default_factory=deque)

    async def start(self) -> None:
        """Open every endpoint (concurrently) and start their tasks."""
        results = await asyncio.gather(*(r.endpoint.open() for r in self.routes), return_exceptions=True)
        for route, result in zip(self.routes, results):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                self._fail(route, result)
        for route in self.routes:
            if route.failed is None:
                if route.endpoint.state_key is not None:
                    route.last_mark = route.endpoint.mark()
                route.task = asyncio.create_task(self._run_route(route), name=f"endpoint {route.name}")
        self._committer = asyncio.create_task(self._commit_loop(), name="checkpoint")
        self._raise_if_stopped()

    async def _run_route(self, route: Route[Any]) -> None:
        try:
            await route.run(self._ack_event.set, self._delivered if self.on_delivered is not None else None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # endpoint failure: report, apply policy
            self._fail(route, exc)

    def _delivered(self, route: Route[Any], groups: list[tuple[int, int]]) -> None:
        times, start, published = [], 0, self._published_at
        for seq, end in groups:
            index = seq - published[0][0] if published else -1  # seqs there are consecutive
            if 0 <= index < len(published):
                times.append((published[index][1], end - start))
            start = end
        if self.on_delivered is not None:
            self.on_delivered(route, times)

    def lag(self, route: Route[Any]) -> float:
        """Seconds since the oldest source batch `route` has not acknowledged was published (0: none)."""
        if route.acked_seq >= self._seq or route.failed is not None:
            return 0.0
        for seq, at in self._published_at:
            if seq > route.acked_seq:
                return max(0.0, time.monotonic() - at)
        return 0.0

    def _fail(self, route: Route[Any], exc: BaseException) -> None:
        route.failed = exc
        route.discard()
        message = f"endpoint {route.name} failed: {exc}"
        if self.on_error == "isolate":
            log.error("%s (isolated; the other endpoints continue)", message)
        else:
            log.error("%s", message)
            if self._error is None:
                self._error = BusError(message)
        self._ack_event.set()

    def _raise_if_stopped(self) -> None:
        if self._error is not None:
            raise self._error
        if self.routes and all(r.failed is not None for r in self.routes):
            raise BusError("every endpoint has failed")

    @property
    def error(self) -> BusError | None:
        return self._error

    async def publish(self, batch: Batch[Record]) -> None:
        """Hand one source batch to every route (waits while a route's buffer is full)."""
        self._raise_if_stopped()
        self._seq += 1
        seq = self._seq
        self._positions.append((seq, batch.position))
        self._published_at.append((seq, time.monotonic()))
        for route in self.routes:
            if route.failed is None:
                await route.put(seq, batch.events)
        self.published_events += len(batch.events)
        self.published_batches += 1
        for reason, count in (getattr(batch, "dropped", None) or {}).items():
            self.dropped[reason] = self.dropped.get(reason, 0) + count
        self._raise_if_stopped()

    def holding(self) -> bool:
        """An endpoint holds events of a batch back (`Sink.holding`): no checkpoint passes that batch."""
        return any(r.hold_from is not None for r in self.routes)

    def writing(self) -> bool:
        """`Downstream.writing`: an endpoint that has not failed has not written every published batch yet, or what
        they wrote is not committed to the source yet (a checkpoint flushing the endpoints — a database committing
        its transaction — or about to). Events an endpoint holds back, or a failed endpoint never writes, do not
        count: nothing is coming for them."""
        return (any(r.failed is None and r.written_seq < self._seq for r in self.routes)
                or self._commit_lock.locked() or self.acked_seq() > self._committed_seq)

    def acked_seq(self) -> int:
        """Highest sequence number every route (failed ones included) has acknowledged."""
        if not self.routes:
            return self._seq
        return min(r.acked_seq for r in self.routes)

    async def _commit_loop(self) -> None:
        while True:
            await self._ack_event.wait()
            self._ack_event.clear()
            wait = self.checkpoint_interval - (time.monotonic() - self._last_commit)
            if wait > 0:
                await asyncio.sleep(wait)
            await self.checkpoint()

    async def checkpoint(self, *, final: bool = False) -> None:
        """Flush the endpoints, then commit the furthest position all have acknowledged.

        One at a time: a source's commit may write its checkpoint file in a thread."""
        async with self._commit_lock:
            await self._checkpoint(final)

    async def _checkpoint(self, final: bool) -> None:
        self._last_commit = time.monotonic()
        target = self.acked_seq()
        if target <= self._committed_seq and not final and all(r.hold_from is None for r in self.routes):
            return
        for route in self.routes:
            if route.failed is None:
                try:
                    await route.endpoint.flush()
                except Exception as exc:
                    self._fail(route, exc)
                    return
                route.release()
        target = self.acked_seq()  # a flush may have written what an endpoint held
        position, found, at = None, False, 0
        while self._positions and self._positions[0][0] <= target:
            seq, popped = self._positions.popleft()
            if popped is not None:  # a batch may carry no position of its own
                position, found, at = popped, True, seq
        self._committed_seq = max(self._committed_seq, target)
        while self._published_at and self._published_at[0][0] <= target:
            self._published_at.popleft()
        if found and position is not None and self.commit is not None:
            marks = self._marks_at(at)
            if marks:  # saved with the position, in the same atomic write
                await self.commit(position, marks)
            else:
                await self.commit(position)

    def marks(self) -> dict[str, Any]:
        """The current mark of every endpoint that resumes exactly (before anything is published)."""
        return {r.endpoint.state_key: r.last_mark for r in self.routes
                if r.endpoint.state_key is not None and r.last_mark is not None}

    def _marks_at(self, seq: int) -> dict[str, Any]:
        """Each exact endpoint's mark as it stood right after source batch `seq` (the committed position).

        Not at the acknowledged target: batches after the position (they carry none) must not be
        kept in a file the source will send them to again."""
        for route in self.routes:
            while route.marks and route.marks[0][0] <= seq:
                route.last_mark = route.marks.popleft()[1]
        return self.marks()

    async def drain(self) -> None:
        """Wait until every live route delivered everything published so far."""
        while any(r.failed is None and r.acked_seq < self._seq for r in self.routes):
            self._ack_event.set()
            tasks = [r.task for r in self.routes if r.failed is None and r.task is not None]
            if tasks and all(t.done() for t in tasks):
                break
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        """Deliver everything buffered, commit the final checkpoint, close endpoints."""
        if self._closed:
            return
        self._closed = True
        for route in self.routes:
            route.close_when_drained()
        tasks = [r.task for r in self.routes if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._committer is not None:
            async with self._commit_lock:  # never cancel a commit half-way (its thread would go on)
                self._committer.cancel()
            await asyncio.gather(self._committer, return_exceptions=True)
        await self.checkpoint(final=True)
        for route in self.routes:
            route.close_overflow()
            try:
                await route.endpoint.close()
            except Exception as exc:
                if route.failed is None:
                    self._fail(route, exc)

    def summary(self) -> list[tuple[str, int, BaseException | None]]:
        return [(r.name, r.stats.delivered, r.failed) for r in self.routes]

    def route_stats(self) -> list[tuple[str, RouteStats]]:
        """Each endpoint's name and counters (events delivered, batches written, seconds spent writing)."""
        return [(r.name, r.stats) for r in self.routes]


def make_route(endpoint: Sink[R], events: str | None = None, *, codec: Codec[R] | None, buffer: int | None = None,
               batch: int | None = None) -> Route[R]:
    """A route for `endpoint`: filter from `events`, its `?events=` option, or its default; records parked
    in its overflow file written with `codec` (the caller's: the bus knows no record format).

    Options read here: `buffer` (events in memory), `batch` (events per write),
    `overflow` (`off`, or the byte cap of the overflow file; default 1 GiB),
    `overflow_dir` (default: the system's temporary directory).
    """
    patterns = events or endpoint.option("events") or endpoint.default_events
    try:
        overflow_bytes = size_or_off(endpoint.option("overflow", DEFAULT_OVERFLOW_BYTES))  # 1G, 512M, off
    except OptionError as exc:
        raise OptionError(f"{endpoint.name}: overflow: {exc}") from None
    return Route(
        endpoint,
        EventFilter(patterns),
        buffer=int(buffer or endpoint.option("buffer") or DEFAULT_BUFFER),
        batch=int(batch or endpoint.option("batch") or DEFAULT_BATCH),
        codec=codec,
        overflow_bytes=overflow_bytes,
        overflow_dir=endpoint.option("overflow_dir"),
    )
