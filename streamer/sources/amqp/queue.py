"""The collector: a durable RabbitMQ queue as a source (`streamer load amqp://user:pass@host/vhost/QUEUE`).

Publishers (`streamer follow/serve ... --dest amqp://.../EXCHANGE`, or monitord
itself) send events to a topic exchange; a queue bound to it holds them until a
collector has delivered them to its endpoints (the central PostgreSQL, files).

- **Acknowledged after delivery**: a message is acknowledged to the broker only
  once every endpoint acknowledged its events (the bus's `commit`, the same
  machinery that advances a file's checkpoint). A collector that dies (even
  SIGKILL) leaves its unacknowledged messages to the broker, which gives them to
  another collector or to the next run: nothing is lost; what was written but
  not yet acknowledged is written again, which the database endpoints absorb
  (idempotent on natural keys, ids stable).
- **Several collectors on one queue**: a queue the collector declares is by
  default a *single active consumer* queue (RabbitMQ's `x-single-active-consumer`):
  one collector consumes, the others are hot standbys the broker hands the queue
  to, in order, when it dies. `?single_active=false` declares a plain queue the
  collectors share (competing consumers); their database endpoints then hold an
  event whose parent row the other collector is still writing (`wait_parents`,
  30 s here, `endpoints/dbcommon.py`), and this source widens its prefetch window
  while held events fill it (`_widen_window`), so the parents a killed
  collector's requeued messages bring, behind the held events, still arrive.
  See docs/guide/collect.md for what each mode guarantees.
- **Batches by size and time** (`?batch=N`, default 5000 events; `?linger=SECONDS`, default 0.25): once a
  message came, the collector waits for more until it has `batch` of them or `linger` has passed, and hands
  them to the endpoints as one batch (one database transaction), whatever the rate messages arrive at. A batch
  never exceeds the prefetch window (nothing more would come before it is acknowledged).
- **Prefetch window** (`?prefetch=N`, default twice `batch`): messages in flight per collector (the next batch
  fills while one is written).
- **Reconnect**: a lost connection is retried with backoff (up to `retry_max`
  seconds between attempts); what was in flight is redelivered by the broker.
- `?declare=true` declares the queue (durable) if it is missing; `?bind=EXCHANGE`
  binds it to that exchange (declared as a durable topic exchange when missing)
  with `?routing=PATTERNS` (event globs as topic keys; default every event).
  Without `declare`, the queue must exist.
- `?idle=SECONDS`: end once no message came for that long and every message taken is acknowledged (batch
  collection, cron): a collector whose endpoints are still writing is not idle, however long they take (its
  full prefetch window is why nothing comes); without it the collector runs until SIGINT/SIGTERM.

Messages are monitord's JSON form (with or without `event_id`), typed and
checked as file input is (`jsonenc.from_dict`, the schema's constraints); a
message that is not an event is reported, counted and rejected without
requeueing (keeping it would block the queue for ever): a queue with a
dead-letter exchange (`x-dead-letter-exchange`) keeps it there, any other
drops it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any, AsyncIterator

from pathlib import Path

from streamer.amqp.frames import properties
from streamer.amqp.errors import connection_lost
from streamer.amqp.connection import BrokerUnavailable, closed_future, connect, node_of, parse_target
from streamer.amqp.topology import DECLARE_OPTIONS, QUEUE_TYPES, TopologyError, declare_queue, queue_spec
from streamer.core.options import parse_bool
from streamer.core.retry import Backoff
from streamer.util import checkpoint
from streamer.util.urls import EndpointURL, mask
from streamer.sources.amqp.consumer import Deliveries, Delivery
from streamer.sources.amqp.tail import binding_keys, decode_message
from streamer.sources.amqp.stream import StreamOffset, default_state_path, message_offset, parse_offset
from streamer.sources.base import Batch, Source, SourceError

log = logging.getLogger("streamer.collector")

OPTIONS = ("declare", "single_active", "bind", "routing", "prefetch", "batch", "linger", "idle", "retry_max",
           "heartbeat", "connect_timeout", "exchange_type", "cafile", "certfile", "keyfile", "verify", "offset",
           "offset_state", *DECLARE_OPTIONS)
BATCH = 5000
"""Events per batch handed to the endpoints, by default (`?batch=`)."""
LINGER = 0.25
"""Seconds a batch waits for more messages once one came, by default (`?linger=`)."""
WINDOW_CHECK = 0.25
"""Seconds without a message after which the prefetch window is looked at (`_widen_window`)."""
MAX_WINDOW = 50_000
"""The widest prefetch window (a route's default memory buffer)."""


class QueueSource(Source):
    """Events consumed from a durable queue, each message acknowledged once every endpoint has it."""

    follow = True  # like `load --follow`: a signal ends it with exit 0

    def __init__(self, url: EndpointURL, options: dict[str, Any] | None = None, *,
                 destinations: list[str] | None = None, state_dir: Path | None = None) -> None:
        self.options: dict[str, Any] = {**url.options, **(options or {})}
        unknown = sorted(set(self.options) - set(OPTIONS))
        if unknown:
            raise SourceError(f"{url.masked_base}: unknown option(s) {', '.join(unknown)} "
                              f"(known: {', '.join(OPTIONS)})")
        self.target = parse_target(url)
        self.queue_name = self.target.exchange  # the last path segment names the queue here
        try:
            batch = max(1, int(self.options.get("batch", BATCH)))
            self.prefetch = max(1, int(self.options.get("prefetch", 2 * batch)))
            self.batch_max = min(batch, self.prefetch)
            self.linger = max(0.0, float(self.options.get("linger", LINGER)))
            self.idle = float(self.options["idle"]) if self.options.get("idle") not in (None, "") else None
            self.retry_max = float(self.options.get("retry_max", 30.0))
            self.single_active = parse_bool(self.options.get("single_active", True))
            self._typed = bool(self.options.get("queue_type"))
            """The queue's type is known (given, or asked of the broker once)."""
            self.queue_type = str(self.options.get("queue_type") or "classic").lower()
            if self.queue_type not in QUEUE_TYPES:
                raise TopologyError(f"queue_type must be one of {', '.join(QUEUE_TYPES)}, not {self.queue_type!r}")
            self.declare = (queue_spec(self.queue_name, self.options, single_active=self.single_active)
                            if parse_bool(self.options.get("declare", False)) else None)
            self.start_at = parse_offset(self.options.get("offset"))
        except ValueError as exc:
            raise SourceError(f"{self.target.display}: bad option value: {exc}") from None
        self.destinations = destinations or []
        """The run's destinations (masked): a stream's stored offset is theirs (`stream.default_state_path`)."""
        self.state_dir = state_dir
        """Where a stream's offset is kept (`$STREAMER_STATE_DIR`, given by the command); None: not kept unless
        `?offset_state=PATH`."""
        self.offsets: StreamOffset | None = None
        self._skip_below: int | None = None
        self.node = ""
        """`host:port` of the broker in use (or last used)."""
        self._deliveries: Deliveries | None = None
        self.stats_bad = 0
        self.received = 0
        self.acked = 0
        self._last_ack = 0.0
        self.reconnects = 0
        self._generation = 0
        self._connection: Any = None
        self._stopped = asyncio.Event()

    @property
    def name(self) -> str:
        return self.target.display

    # ------------------------------------------------------------ connection

    async def _open(self) -> Any:
        """Connect (to the first broker that answers; after a loss, from the next one), declare/bind as asked,
        start consuming; the consumer's deliveries and the future of their loss. At start, a queue that cannot
        be consumed is an error; after a loss it is retried with backoff (a quorum queue electing a new leader,
        a queue being declared again)."""
        waits, switched = Backoff(first=0.2, cap=self.retry_max, jitter=0.2).waits(stop=self._stopped), 0
        while True:
            if not await self._connect():
                return None
            try:
                deliveries = await self._consume()
            except Exception as exc:  # not found, refused, precondition: say so, no traceback
                refused = per_consumer_only(exc)
                if refused is not None and refused != self.queue_type and switched < 2:
                    # a quorum queue refuses a channel-wide prefetch (closing the connection), a stream wants a
                    # per-consumer one: the same again with that
                    log.info("%s: a %s queue: per-consumer prefetch", self.name, refused)
                    self.queue_type, switched = refused, switched + 1
                    await self._drop_connection()
                    continue
                reason = mask(str(exc) or type(exc).__name__)
                if refused is None and connection_lost(exc):
                    # the node went away between connecting and consuming (a cluster node killed as the
                    # collector starts): a loss like any other, mended on the next node
                    self.reconnects += 1
                    await self._drop_connection()
                    if not await waits.wait(log.warning, "%s: connection to the broker lost while starting to "
                                            "consume (%s); reconnecting in %.1f s", self.name, reason):
                        return None
                    continue
                if not self.reconnects:
                    raise SourceError(f"{self.target.display}: {reason}") from None
                await self._drop_connection()
                if not await waits.wait(log.warning, "%s: cannot consume the queue (%s); retrying in %.1f s",
                                        self.name, reason):
                    return None
                continue
            return deliveries, self._lost(deliveries)

    def _lost(self, deliveries: Deliveries) -> asyncio.Future[None]:
        """A future the connection's closing, the consuming channel's, or the broker cancelling the consumer
        completes: a channel the broker closed (an error on it) or a cancelled consumer delivers nothing more
        while the connection lives on, so it is a loss too."""
        closed = closed_future(self._connection)
        deliveries.lost.add_done_callback(lambda _: None if closed.done() else closed.set_result(None))

        def channel_closed(_: Any, exc: BaseException | None = None, *rest: Any) -> None:
            if not closed.done():
                if exc is not None and not self._stopped.is_set():
                    log.warning("%s: the broker closed the channel: %s", self.name, mask(str(exc) or repr(exc)))
                closed.set_result(None)

        self._channel.close_callbacks.add(channel_closed)
        return closed

    async def _connect(self) -> bool:
        waits = Backoff(first=0.2, cap=self.retry_max, jitter=0.2).waits(stop=self._stopped)
        while True:
            try:
                self._connection = await connect(self.target, self.options, name="streamer collector",
                                                 after=self.node or None, raw_deliveries=True)
                self.node = node_of(self._connection)
                self._generation += 1
                return True
            except BrokerUnavailable as exc:
                if exc.permanent or self._generation == 0:
                    raise SourceError(str(exc)) from None  # bad credentials, vhost; or down at start
                if not await waits.wait(log.warning, "%s; retrying in %.1f s", exc):
                    return False

    async def _consume(self) -> Deliveries:
        """A channel with its prefetch, the queue declared/bound as asked, a consumer filling `Deliveries`."""
        if self.declare is None and not self._typed:
            self.queue_type = await queue_type_of(self._connection, self.queue_name) or self.queue_type
            self._typed = True
        channel = await self._connection.channel()
        # classic: channel-wide (global) on a channel with one consumer, since RabbitMQ applies a per-consumer
        # limit only to consumers started after it (`_widen_window` widens a global one in place); quorum
        # queues and streams take only a per-consumer limit (`_widen_window` starts a new consumer then)
        await channel.set_qos(prefetch_count=self.prefetch, global_=self.queue_type == "classic")
        self._channel, self._window, self._taken, self._gen_acked, self._yielded = channel, self.prefetch, 0, 0, 0
        if self.declare is not None:
            queue = await declare_queue(channel, self.declare)
        else:
            queue = await channel.declare_queue(self.queue_name, passive=True)
        exchange = self.options.get("bind")
        if exchange:
            await channel.declare_exchange(exchange, str(self.options.get("exchange_type", "topic")),
                                           durable=True)
            for key in binding_keys(self.options.get("routing")):
                await queue.bind(exchange, routing_key=key)
        deliveries = Deliveries(await channel.get_underlay_channel(), self.name,
                                getattr(self._connection, "receiver", None))  # connected with raw_deliveries
        await deliveries.consume(queue.name, self._consume_arguments())
        self._deliveries = deliveries
        return deliveries

    def _consume_arguments(self) -> dict[str, Any] | None:
        if self.queue_type != "stream":
            return None
        if self.offsets is None:
            path = self.options.get("offset_state")
            if path:
                self.offsets = StreamOffset(Path(path), refuse=checkpoint.writes_files(self.destinations))
            elif self.state_dir is not None:
                self.offsets = StreamOffset(default_state_path(self.state_dir, self.name, self.destinations),
                                            refuse=checkpoint.writes_files(self.destinations))
            else:
                log.warning("%s: no state directory: the offset reached is not kept", self.name)
        # after a reconnection too: from what every endpoint acknowledged (a stream redelivers nothing by itself)
        start = self.offsets.start(self.start_at) if self.offsets is not None else self.start_at
        self._skip_below = start if isinstance(start, int) else None
        log.info("%s: reading the stream from %s", self.name,
                 f"offset {start}" if isinstance(start, int) else start)
        return {"x-stream-offset": start}

    # ------------------------------------------------------------ reading

    async def batches(self) -> AsyncIterator[Batch]:
        opened = await self._open()
        stop = asyncio.ensure_future(self._stopped.wait())
        quiet_since = time.monotonic()
        try:
            while opened is not None and not self._stopped.is_set():
                deliveries, closed = opened
                get = asyncio.ensure_future(deliveries.ready.wait())
                done, _ = await asyncio.wait({get, stop, closed}, timeout=WINDOW_CHECK,
                                             return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    if not done:
                        if await self._widen_window():
                            quiet_since = time.monotonic()
                        elif (self.idle is not None and not self._waiting_for_endpoints()
                              and time.monotonic() - max(quiet_since, self._last_ack) >= self.idle):
                            log.info("%s: no message for %g s: done", self.name, self.idle)
                            break
                        continue
                    if closed in done and not self._stopped.is_set():
                        log.warning("%s: connection to the broker lost; reconnecting "
                                    "(unacknowledged messages are redelivered)", self.name)
                        self.reconnects += 1
                        await self._drop_connection()
                        opened = await self._open()
                    continue
                quiet_since = time.monotonic()
                messages = await self._gather(deliveries, stop, closed)
                self.received += len(messages)
                self._taken += len(messages)
                events, kept, refused = self._decode(messages)
                for tag in refused:  # the queue's dead-letter exchange keeps it, where one is configured
                    await self._reject(deliveries, tag)
                if kept:
                    self._yielded = max(self._yielded, kept[0])
                yield Batch(events=events, position=(self._generation, *kept) if kept else None,
                            done=self.received)
        finally:
            stop.cancel()

    def _waiting_for_endpoints(self) -> bool:
        """Messages of this connection handed to the endpoints are not acknowledged yet, and an endpoint is still
        writing them: the collector waits for its endpoints (a full prefetch window delivers nothing more until
        they commit), not for the queue, so `idle` does not count (it ended collectors whose database took longer
        than `idle` to write a batch, their queue still full: exit 0 and rows missing). An endpoint that failed
        writes nothing more: idle counts then, as before."""
        if self._yielded <= self._gen_acked:
            return False
        return self.downstream is None or self.downstream.writing()

    async def _gather(self, deliveries: Deliveries, stop: Any, closed: Any) -> list[Delivery]:
        """The deliveries waiting and those after them: up to `batch_max`, or what came within `linger` seconds
        (a stop or a lost connection ends the wait: what came is written, the rest is redelivered). One wake-up
        per batch: `Deliveries.ready` is set once `batch_max` wait."""
        deliveries.expect(self.batch_max)
        if not deliveries.ready.is_set() and self.linger > 0 and not (stop.done() or closed.done()):
            full = asyncio.ensure_future(deliveries.ready.wait())
            await asyncio.wait({full, stop, closed}, timeout=self.linger, return_when=asyncio.FIRST_COMPLETED)
            full.cancel()
        return deliveries.take(self.batch_max)

    async def _widen_window(self) -> bool:
        """Keep messages coming while the endpoints hold some back (`held_downstream`: a database waiting for
        a parent row that is still in the queue): a full prefetch window that no acknowledgement frees is widened by
        `prefetch` (up to MAX_WINDOW), and narrowed again once acknowledgements caught up. A quorum queue's
        window is per consumer and RabbitMQ applies a new one only to consumers started after it: a new consumer
        takes over (what the old one delivered stays unacknowledged on the channel); not on a single-active-consumer
        queue (a second consumer would wait behind the other collectors) nor on a stream (read in order)."""
        in_flight = self._taken - self._gen_acked
        try:
            if in_flight >= self._window and self._window < MAX_WINDOW and self.held_downstream():
                if not await self._set_window(min(MAX_WINDOW, self._window + self.prefetch)):
                    return False
                log.debug("%s: %d messages in flight: prefetch window now %d", self.name, in_flight, self._window)
                return True
            if in_flight < self.prefetch and self._window > self.prefetch and self.queue_type == "classic":
                await self._set_window(self.prefetch)
        except Exception as exc:  # a channel closing under us: the reconnect path takes over
            log.debug("%s: prefetch window not changed: %s", self.name, exc)
        return False

    async def _set_window(self, size: int) -> bool:
        if self.queue_type == "classic":
            await self._channel.set_qos(prefetch_count=size, global_=True)
        elif self.queue_type == "quorum" and not (self.declare is not None and self.single_active):
            await self._channel.set_qos(prefetch_count=size, global_=False)
            deliveries = self._deliveries
            assert deliveries is not None
            old = deliveries.tag
            await deliveries.consume(self.queue_name)
            await deliveries.cancel(old)
        else:
            return False
        self._window = size
        return True

    def _decode(self, messages: list[Delivery]) -> tuple[list[Any], tuple[int, int | None] | None, list[int]]:
        """(the events; the last message acknowledged once delivered: its tag and stream offset, or None; the
        tags of the messages to reject). A message that is no event is rejected, so a queue's dead-letter
        exchange keeps it; a stream cannot dead-letter, and its offset moves on: there it is acknowledged with
        the rest. A stream's messages before the offset asked for (it starts at the chunk holding it) are
        neither."""
        events: list[Any] = []
        append = events.append
        last: Delivery | None = None
        refused: list[int] = []
        skip = self._skip_below
        for message in messages:
            tag, body, header = message
            if skip is not None:
                offset = message_offset(properties(header).headers)
                if offset is not None and offset < skip:
                    continue
            try:
                append(decode_message(body))
            except ValueError as exc:
                self.stats_bad += 1
                stream = self.queue_type == "stream"
                log.warning("%s: message %s: not an event, %s: %s", self.name, properties(header).message_id or tag,
                            "skipped" if stream else
                            "rejected (dead-lettered where the queue has a dead-letter exchange)", exc)
                if not stream:
                    refused.append(tag)
                    continue
            last = message
        if last is None:
            return events, None, refused
        offset = message_offset(properties(last[2]).headers) if self.queue_type == "stream" else None
        return events, (last[0], offset), refused

    async def _reject(self, deliveries: Deliveries, tag: int) -> None:
        try:
            await deliveries.reject(tag)
        except Exception as exc:  # noqa: BLE001 - a channel closing under us: the broker redelivers it
            log.debug("%s: message %s not rejected: %s", self.name, tag, exc)

    async def commit(self, position: Any, endpoints: dict[str, Any] | None = None) -> None:
        """Every endpoint has the events up to this message: acknowledge it and all before it (a stream's
        offset is kept then: the next run starts after it)."""
        generation, tag, offset = position
        if self.offsets is not None and offset is not None:
            self.offsets.save(offset)
        if generation != self._generation or self._deliveries is None:
            return  # its channel is gone: the broker redelivers those messages
        try:
            await self._deliveries.ack(tag)
            self.acked = max(self.acked, tag)
            self._gen_acked = max(self._gen_acked, tag)
            self._last_ack = time.monotonic()  # idle counts from the last message or acknowledgement
        except Exception as exc:  # channel closed under us: they will be redelivered
            log.debug("%s: ack lost (%s); the broker redelivers", self.name, exc)

    reachable = True  # `health()` below says whether its broker is

    def health(self) -> str | None:
        """None while connected to the broker (`/healthz`), else why not."""
        if self._generation and (self._connection is None or self._connection.is_closed):
            return f"{self.name}: broker unreachable (reconnecting; unacknowledged messages stay in the queue)"
        return None

    def stop(self) -> None:
        self._stopped.set()

    async def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                await asyncio.wait_for(connection.close(), 5)
            except Exception:
                pass

    async def close(self) -> None:
        self._stopped.set()
        await self._drop_connection()


def per_consumer_only(exc: BaseException) -> str | None:
    """The queue type when the broker refused consuming with a channel-wide prefetch: `quorum` (NOT_IMPLEMENTED
    - queue ... does not support global qos) or `stream` (PRECONDITION_FAILED - consumer prefetch count is not
    set); else None."""
    text = str(exc)
    if "does not support global qos" in text:
        return "quorum"
    if "consumer prefetch count is not set" in text:
        return "stream"
    return None


async def queue_type_of(connection: Any, name: str) -> str | None:
    """The type of existing queue `name`, asked without harm: declaring it a classic queue is a no-op on a classic
    one and, on another type, a channel error (406, on a channel of its own) naming the current type. The broker
    checks the queue's other arguments first (a quorum queue's dead-letter exchange, max length, single active
    consumer): each one it names as missing is added to the next try with the value it reports. None when the
    broker does not say (no configure permission, a durability that differs): then a quorum queue's refusal of
    a channel-wide prefetch tells (`per_consumer_only`)."""
    arguments: dict[str, Any] = {"x-queue-type": "classic"}
    for _ in range(12):
        channel = await connection.channel()
        try:
            await channel.declare_queue(name, passive=True)  # it must exist: never create it here
            await channel.declare_queue(name, durable=True, arguments=arguments)
            return "classic"
        except Exception as exc:  # the probe's channel is closed by the broker; the connection lives on
            text = str(exc)
            if "inequivalent arg 'x-queue-type'" in text:
                found = text.partition("current is '")[2].partition("'")[0]
                return found if found in QUEUE_TYPES else None
            missing = _MISSING_ARG.search(text)
            if missing is None or missing[1] in arguments:
                return None
            arguments[missing[1]] = _typed_arg(missing[2], missing[3])
        finally:
            if not channel.is_closed:
                await channel.close()
    return None


_MISSING_ARG = re.compile(r"inequivalent arg '([^']{1,255})' for queue .{0,600}?: received none but current is "
                          r"the value '([^']{0,1000})' of type '(\w{1,20})'")


def _typed_arg(value: str, kind: str) -> Any:
    """An argument's value as the broker reported it (`... the value '20' of type 'signedint'`)."""
    if kind == "bool":
        return value == "true"
    if kind in ("byte", "short", "signedint", "long", "unsignedbyte", "unsignedshort", "unsignedint") and \
            value.lstrip("-").isdigit():
        return int(value)
    return value
