"""The spooling layer: batches an endpoint cannot take now wait on disk, and are replayed in order.

`--dest 'postgresql://…/db?spool=/var/lib/streamer/pg.spool'` (also `mysql://`,
`file://`) wraps the endpoint in `Spooling` (`create_endpoint` does). The AMQP
endpoint is wrapped by default, in a spool directory per destination
(`Endpoint.default_spool`, removed at exit when empty), with no grace: what
the broker did not confirm is spooled at once (`spool=off`: not wrapped).

- A batch goes to the endpoint as usual while nothing is spooled. When the
  endpoint cannot take it — a retriable fault (a lost connection, a server
  restarting, a deadlock that keeps coming back) lasting longer than
  `spool_grace` (the endpoint is told to give up after that long,
  `Endpoint.give_up_after`, and raises `resilience.Unavailable`) — the batch
  (or the part of it the endpoint says it did not deliver, `Unavailable.rest`)
  is appended to the spool (`streamer/core/spool.py`: one record per event, the
  event as one JSON line of the injected codec, fsync'd per append, bounded by
  `spool_size`) and `write` returns: the bus acknowledges the batch once it is
  durably spooled, so the source goes on reading and checkpointing.
- While anything is spooled, new batches join the spool behind it, and a
  background task replays the spool, oldest first, `batch` events at a time,
  through the one retry loop (`resilience.retrying`, forever); a chunk is
  consumed from the spool only once the endpoint acknowledged it (committed).
  Once the spool is empty, batches go to the endpoint directly again.
- A spool left by an earlier run (a crash, SIGKILL, or an exit while the server
  was still away) is found at `open` and replayed before anything new. The
  endpoint may be away at `open` too: the run starts spooling.
- Exactly once where the endpoint is idempotent: a crash between the endpoint's
  commit and the spool's consumption replays that chunk, which the database
  endpoints ignore (natural keys). A file endpoint with a spool is at least
  once (its exact resume by cutting back is off: spooled events are written
  after the checkpoint that acknowledged them).
- `close()` waits up to `drain_timeout` for the spool to drain, then fails
  naming how many events remain and where; the next run delivers them first.
- Permanent errors (a bad schema, access refused, a full spool) fail the
  endpoint as before; refused content (`resilience.Rejected`) goes to the dead
  letters when so set up (that layer sits inside this one, replay included).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from streamer.core.options import is_off
from streamer.core.record import Codec
from streamer.events import Event
from streamer.events.codec import JSON_LINES
from streamer.core.spool import Spool, SpoolError, SpoolFull
from streamer.endpoints.base import Endpoint, EndpointError, Pending
from streamer.endpoints.layers.base import Layer
from streamer.endpoints.layers.resilience import RetryPolicy, RetryStats, TransientError, Unavailable, retrying

log = logging.getLogger("streamer.spooling")

DEFAULT_SPOOL_BYTES = 1 << 30
DEFAULT_GRACE = 5.0
DEFAULT_DRAIN_TIMEOUT = 300.0


class Spooling(Layer):
    """A layer around `inner`: what it cannot take now waits in the spool at `path`, replayed in order."""

    def __init__(self, inner: Endpoint, path: str | Path, *, max_bytes: int = DEFAULT_SPOOL_BYTES,
                 grace: float = DEFAULT_GRACE, drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
                 codec: Codec[Event] = JSON_LINES, max_delay: float = 5.0, remove_if_empty: bool = False,
                 patient: bool = True) -> None:
        super().__init__(inner)
        self.state_key = None  # spooled events reach the output after their checkpoint: no exact cut-back
        self.spool_dir = Path(path).expanduser()
        self.max_bytes = max_bytes
        self.grace = grace
        self.drain_timeout = drain_timeout
        self.codec = codec
        self.max_delay = max_delay
        """Cap of the replay's back-off (seconds)."""
        self.remove_if_empty = remove_if_empty
        """Remove the spool directory at close when nothing is left (a default one, not given by the user)."""
        self.patient = patient
        """True when `drain_timeout` was given: wait that long at close whatever happens. False (the default):
        a server never reached in this run is not waited for (a mistyped host or port must not keep the
        command 300 s), nor one that is away when a signal asks the run to end; the spool stays for the next
        run, which delivers it first."""
        self._reached = False
        self._interrupted = False
        self._refused = False  # the endpoint refused a batch for good: an empty spool is not left behind
        self.chunk = max(1, int(inner.option("batch") or 5000))
        self.spool: Spool | None = None
        self.spooled = 0
        """Events appended to the spool."""
        self.drained = 0
        """Events replayed from the spool and acknowledged by the endpoint."""
        self.replay_stats = RetryStats()
        self.outages = 0
        """Times the endpoint went away (a refused or lost connection, a fault outlasting the grace)."""
        self._since: float | None = None
        """`time.monotonic()` since when events wait in the spool (None: it is empty)."""
        self._inner_open = False
        self._down: str | None = None
        self._drainer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._lock = asyncio.Lock()
        """Held around every call into `inner`: the replay and the bus's flush never overlap."""
        inner.give_up_after(grace)

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        try:
            self.spool = Spool(self.spool_dir, self.max_bytes)
        except (SpoolError, OSError) as exc:
            raise EndpointError(f"{self.name}: cannot use spool {self.spool_dir}: {exc}") from None
        if self.remove_if_empty:  # the default spool: take in what runs to another address of it left
            for path in self.inner.leftover_spools():
                self._adopt(path)
        try:
            await self.inner.open()
            self._inner_open = self._reached = True
        except Unavailable as exc:
            self._note_down(exc)
        except BaseException:  # a permanent refusal: this run will not use the spool (nor leave it empty behind)
            self.spool.close(remove_if_empty=True)
            self.spool = None
            raise
        if len(self.spool):
            log.warning("%s: %d events spooled by an earlier run in %s; delivering them first",
                        self.name, len(self.spool), self.spool_dir)
            self._since = time.monotonic()
            self._start_drainer()

    def _adopt(self, path: Path) -> None:
        """Move the events of a spool an earlier run left at another address of this destination into ours,
        in order, ahead of this run's (announced: the user changed the URL, the events were meant for here)."""
        assert self.spool is not None
        try:
            other = Spool(path, self.max_bytes)
        except (SpoolError, OSError) as exc:  # another process uses it: that one delivers it
            log.warning("%s: an earlier run's spool %s is not taken in: %s", self.name, path, exc)
            return
        try:
            records, position = other.peek(len(other))
            if records:
                self.spool.append(records)
                other.commit(position, len(records))
                log.warning("%s: %d events an earlier run spooled for this exchange at another broker address (%s) "
                            "are delivered first", self.name, len(records), path)
        except (SpoolError, OSError) as exc:
            log.warning("%s: an earlier run's spool %s is not taken in: %s", self.name, path, exc)
        finally:
            other.close(remove_if_empty=True)

    def interrupt(self) -> None:
        """A signal asked the run to end: unless `patient`, `close` does not wait for a server that is away
        (the spool keeps the events for the next run)."""
        self._interrupted = not self.patient

    async def write(self, batch: Sequence[Event]) -> None:
        if not batch:
            return
        self._raise_failure()
        spool = self.spool
        assert spool is not None, "write before open"
        pending = batch
        if not len(spool) and self._inner_open and self._down is None:
            try:
                async with self._lock:
                    await self.inner.write(batch)
                return
            except Unavailable as exc:
                self._note_down(exc)
                pending = batch if exc.rest is None else exc.rest
            except EndpointError:  # refused for good (a permission): the spool is not this run's to keep
                self._refused = True
                raise
        try:
            spool.append([self.codec.encode(event) for event in pending])
        except SpoolFull as exc:
            raise EndpointError(f"{self.name}: endpoint unavailable ({self._down}) and {exc}; raise spool_size= "
                                f"(now {self.max_bytes:,} bytes) or bring the server back") from None
        except OSError as exc:
            raise EndpointError(f"{self.name}: cannot write spool {self.spool_dir}: {exc}") from None
        self.spooled += len(pending)
        if self._since is None:
            self._since = time.monotonic()
        self._start_drainer()

    async def flush(self) -> None:
        """Spooled events are already durable; the endpoint's own flush only while it is reachable."""
        self._raise_failure()
        if self._inner_open and self._down is None:
            try:
                async with self._lock:
                    await self.inner.flush()
            except Unavailable as exc:
                self._note_down(exc)

    async def close(self) -> None:
        try:
            if self.spool is not None and len(self.spool):
                await self.drain(self.drain_timeout)
            self._raise_failure()
            if self._inner_open:
                await self.inner.flush()
        finally:
            if self._drainer is not None:
                self._drainer.cancel()
                await asyncio.gather(self._drainer, return_exceptions=True)
                self._drainer = None
            if self._inner_open:
                self._inner_open = False
                await self.inner.close()
            if self.spool is not None:
                self.spool.close(remove_if_empty=self.remove_if_empty or self._refused)
                self.spool = None

    async def drain(self, timeout: float) -> None:
        """Wait until the spool is empty, at most `timeout` seconds (EndpointError after)."""
        spool = self.spool
        if spool is None or not len(spool):
            return
        self._start_drainer()
        if not self._reached and not self.patient and self._down is not None:
            raise EndpointError(
                f"{self.name}: never reached ({self._down}); {len(spool):,} events stay spooled in "
                f"{self.spool_dir} and are delivered first by the next run to this exchange (check the host and "
                f"port; drain_timeout=SECONDS waits for a server that is coming)")
        log.info("%s: waiting up to %g s for %d spooled events to be delivered", self.name, timeout, len(spool))
        started = time.monotonic()
        deadline, next_note = started + timeout, started + 10
        while len(spool):
            self._raise_failure()
            now = time.monotonic()
            if self._interrupted and self._down is not None:
                raise EndpointError(
                    f"{self.name}: interrupted while unavailable ({self._down}); {len(spool):,} events stay "
                    f"spooled in {self.spool_dir} (the next run with this spool delivers them first)")
            if now >= deadline:
                raise EndpointError(
                    f"{self.name}: still unavailable after {timeout:g}s ({self._down}); {len(spool):,} events "
                    f"remain spooled in {self.spool_dir} and will be delivered by the next run with the same "
                    f"spool (raise drain_timeout= to wait longer)")
            if now >= next_note:  # counts down where the user sees it
                next_note = now + 10
                log.warning("%s: %d events still spooled; waiting %.0f s more for the server (%s); Ctrl-C leaves "
                            "them in %s for the next run", self.name, len(spool), deadline - now,
                            self._down or "delivering", self.spool_dir)
            await asyncio.sleep(0.05)

    def pending(self) -> Pending:
        return Pending(spooled=len(self.spool) if self.spool is not None else 0, spooled_total=self.spooled,
                       drained=self.drained, since=self._since, held=self.inner.pending().held,
                       failures=self.outages + self.replay_stats.total, owner=id(self))

    def health(self) -> str | None:
        reason = self.inner.health() or (f"unavailable ({self._down})" if self._down is not None else None)
        if reason is None:
            return None
        count = len(self.spool) if self.spool is not None else 0
        return f"{reason}; {count:,} events spooled in {self.spool_dir}"

    # ------------------------------------------------------------ replay

    def _note_down(self, exc: Unavailable) -> None:
        if self._down is None:
            self.outages += 1
            log.warning("%s: %s; spooling events to %s until it is back", self.name, exc, self.spool_dir)
        self._down = str(exc)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _start_drainer(self) -> None:
        if self._failure is None and (self._drainer is None or self._drainer.done()):
            self._drainer = asyncio.create_task(self._drain_loop(), name=f"spool {self.spool_dir}")

    async def _drain_loop(self) -> None:
        """Replay the spool, oldest first, until it is empty; a chunk is consumed once acknowledged."""
        spool = self.spool
        assert spool is not None
        policy = RetryPolicy(retry_for=math.inf, first_delay=0.2, max_delay=self.max_delay, quiet_for=math.inf)
        try:
            while len(spool):
                records, position = spool.peek(self.chunk)
                events = [self.codec.decode(record) for record in records]
                await retrying(self.name, f"replay of {len(events)} spooled events", self._replaying(events),
                               policy, self.replay_stats)
                spool.commit(position, len(records))
                self.drained += len(records)
                if not len(spool):
                    self._since = None
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a permanent error: the next write, flush or close reports it
            log.error("%s: replaying the spool %s failed: %s", self.name, self.spool_dir, exc)
            self._failure = exc
            return
        if self._down is not None:
            log.warning("%s: back; spool %s delivered", self.name, self.spool_dir)
        self._down = None

    def _replaying(self, events: list[Event]) -> Callable[[], Awaitable[None]]:
        """One attempt at delivering a chunk of the spool; after a failure only what was not delivered."""
        pending: Sequence[Event] = events

        async def attempt() -> None:
            nonlocal pending
            try:
                async with self._lock:
                    if not self._inner_open:
                        await self.inner.open()
                        self._inner_open = self._reached = True
                    self.inner.prepare(pending)
                    await self.inner.write(pending)
            except Unavailable as exc:
                self._note_down(exc)
                if exc.rest is not None:
                    pending = exc.rest
                raise TransientError(exc.kind, str(exc)) from None
        return attempt


def with_spool(endpoint: Endpoint) -> Endpoint:
    """`endpoint` wrapped in `Spooling` when it has a `spool=DIR` option (or spools by default: AMQP, unless
    `spool=off`), else itself."""
    given = endpoint.option("spool")
    if given is not None and (is_off(given) or not str(given).strip()):
        return endpoint
    path = Path(str(given)) if given is not None else endpoint.default_spool()
    if path is None:
        return endpoint
    return Spooling(endpoint, path, max_bytes=int(endpoint.option("spool_size") or DEFAULT_SPOOL_BYTES),
                    grace=float(_given(endpoint.option("spool_grace"), endpoint.spool_grace)),
                    drain_timeout=float(_given(endpoint.option("drain_timeout"), DEFAULT_DRAIN_TIMEOUT)),
                    max_delay=float(_given(endpoint.option("retry_max"), 5.0)),
                    codec=getattr(endpoint, "spool_codec", JSON_LINES), remove_if_empty=given is None,
                    patient=endpoint.option("drain_timeout") is not None)


def _given(value: Any, default: float) -> Any:
    return default if value is None else value
