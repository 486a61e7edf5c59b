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
- **Prefetch window** (`?prefetch=N`, default 1000): messages in flight per collector.
- **Reconnect**: a lost connection is retried with backoff (up to `retry_max`
  seconds between attempts); what was in flight is redelivered by the broker.
- `?declare=true` declares the queue (durable) if it is missing; `?bind=EXCHANGE`
  binds it to that exchange (declared as a durable topic exchange when missing)
  with `?routing=PATTERNS` (event globs as topic keys; default every event).
  Without `declare`, the queue must exist.
- `?idle=SECONDS`: end once no message came for that long (batch collection,
  cron); without it the collector runs until SIGINT/SIGTERM.

Messages are monitord's JSON form (with or without `event_id`), typed as file
input is (`jsonenc.from_dict`); a message that is not an event is reported,
counted and acknowledged (keeping it would block the queue for ever).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, AsyncIterator

from streamer.amqp.connection import BrokerUnavailable, closed_future, connect, parse_target
from streamer.core.options import parse_bool
from streamer.util.urls import mask
from streamer.sources.amqp.tail import binding_keys, decode_message
from streamer.sources.base import Batch, Source, SourceError

log = logging.getLogger("streamer.collector")

OPTIONS = ("declare", "single_active", "bind", "routing", "prefetch", "idle", "retry_max", "heartbeat",
           "connect_timeout", "exchange_type", "cafile", "certfile", "keyfile", "verify")
MAX_BATCH = 1000
WINDOW_CHECK = 0.25
"""Seconds without a message after which the prefetch window is looked at (`_widen_window`)."""
MAX_WINDOW = 50_000
"""The widest prefetch window (a route's default memory buffer)."""


class QueueSource(Source):
    """Events consumed from a durable queue, each message acknowledged once every endpoint has it."""

    follow = True  # like `load --follow`: a signal ends it with exit 0

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        base, _, query = url.partition("?")
        from urllib.parse import parse_qsl

        self.options: dict[str, Any] = {**dict(parse_qsl(query, keep_blank_values=True)), **(options or {})}
        unknown = sorted(set(self.options) - set(OPTIONS))
        if unknown:
            raise SourceError(f"{mask(base)}: unknown option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
        self.target = parse_target(base)
        self.queue_name = self.target.exchange  # the last path segment names the queue here
        try:
            self.prefetch = max(1, int(self.options.get("prefetch", 1000)))
            self.idle = float(self.options["idle"]) if self.options.get("idle") not in (None, "") else None
            self.retry_max = float(self.options.get("retry_max", 30.0))
            self.single_active = parse_bool(self.options.get("single_active", True))
        except ValueError as exc:
            raise SourceError(f"{self.target.display}: bad option value: {exc}") from None
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
        """Connect, declare/bind as asked, start consuming; the queue's consumer inbox."""
        delay = 0.2
        while True:
            try:
                self._connection = await connect(self.target, self.options, name="streamer collector")
                break
            except BrokerUnavailable as exc:
                if exc.permanent or self._generation == 0:
                    raise SourceError(str(exc)) from None  # bad credentials, vhost; or down at start
                log.warning("%s; retrying in %.1f s", exc, delay)
                await self._sleep(delay)
                if self._stopped.is_set():
                    return None
                delay = min(self.retry_max, delay * 2) * random.uniform(0.8, 1.0)
        self._generation += 1
        try:
            channel = await self._connection.channel()
            # Channel-wide (global) on a channel with one consumer: RabbitMQ applies a per-consumer limit only
            # to consumers started after it, so `_widen_window` could not widen one.
            await channel.set_qos(prefetch_count=self.prefetch, global_=True)
            self._channel, self._window, self._taken, self._gen_acked = channel, self.prefetch, 0, 0
            if parse_bool(self.options.get("declare", False)):
                arguments = {"x-single-active-consumer": True} if self.single_active else None
                queue = await channel.declare_queue(self.queue_name, durable=True, arguments=arguments)
            else:
                queue = await channel.declare_queue(self.queue_name, passive=True)
            exchange = self.options.get("bind")
            if exchange:
                await channel.declare_exchange(exchange, str(self.options.get("exchange_type", "topic")),
                                               durable=True)
                for key in binding_keys(self.options.get("routing")):
                    await queue.bind(exchange, routing_key=key)
        except Exception as exc:  # not found, refused, precondition: say so, no traceback
            raise SourceError(f"{self.target.display}: {mask(str(exc) or type(exc).__name__)}") from None
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        await queue.consume(inbox.put)
        closed = closed_future(self._connection)
        return inbox, closed

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopped.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    # ------------------------------------------------------------ reading

    async def batches(self) -> AsyncIterator[Batch]:
        opened = await self._open()
        stop = asyncio.ensure_future(self._stopped.wait())
        quiet_since = time.monotonic()
        try:
            while opened is not None and not self._stopped.is_set():
                inbox, closed = opened
                get = asyncio.ensure_future(inbox.get())
                done, _ = await asyncio.wait({get, stop, closed}, timeout=WINDOW_CHECK,
                                             return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    if not done:
                        if await self._widen_window():
                            quiet_since = time.monotonic()
                        elif (self.idle is not None
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
                messages = [get.result()]
                while not inbox.empty() and len(messages) < MAX_BATCH:
                    messages.append(inbox.get_nowait())
                self.received += len(messages)
                self._taken += len(messages)
                yield Batch(events=self._decode(messages), position=(self._generation, messages[-1]),
                            done=self.received)
        finally:
            stop.cancel()

    async def _widen_window(self) -> bool:
        """Keep messages coming while the endpoints hold some back (`held_downstream`: a database waiting for
        a parent row that is still in the queue): a full prefetch window that no acknowledgement frees is widened by
        `prefetch` (up to MAX_WINDOW), and narrowed again once acknowledgements caught up."""
        in_flight = self._taken - self._gen_acked
        try:
            if in_flight >= self._window and self._window < MAX_WINDOW and self.held_downstream():
                self._window = min(MAX_WINDOW, self._window + self.prefetch)
                await self._channel.set_qos(prefetch_count=self._window, global_=True)
                log.debug("%s: %d messages in flight: prefetch window now %d", self.name, in_flight, self._window)
                return True
            if in_flight < self.prefetch and self._window > self.prefetch:
                self._window = self.prefetch
                await self._channel.set_qos(prefetch_count=self._window, global_=True)
        except Exception as exc:  # a channel closing under us: the reconnect path takes over
            log.debug("%s: prefetch window not changed: %s", self.name, exc)
        return False

    def _decode(self, messages: list[Any]) -> list[Any]:
        events = []
        for message in messages:
            try:
                events.append(decode_message(message.body))
            except ValueError as exc:
                self.stats_bad += 1
                log.warning("%s: message %s: not an event, acknowledged and dropped: %s", self.name,
                            message.message_id or message.delivery_tag, exc)
        return events

    async def commit(self, position: Any, endpoints: dict[str, Any] | None = None) -> None:
        """Every endpoint has the events up to this message: acknowledge it and all before it."""
        generation, message = position
        if generation != self._generation:
            return  # its channel is gone: the broker redelivers those messages
        try:
            await message.ack(multiple=True)
            self.acked = max(self.acked, message.delivery_tag)
            self._gen_acked = max(self._gen_acked, message.delivery_tag)
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
