"""Live tail from a broker: events published to an AMQP exchange, as a source.

`streamer tail amqp://host/vhost/exchange --events 'stampede.job_inst.*'` binds
an exclusive auto-delete queue (gone when we disconnect) or, with `--queue
NAME`, reads an existing durable queue (bound by whoever set it up). Reading a
queue consumes it, so `--queue` takes no filter that could leave anything out:
a tail never removes a message it does not show. Event
patterns become topic bindings: `*` -> `#`, and a glob's `*` (which matches
dots too) -> `#`; exclusions (`!pattern`) cannot be bindings, so then we bind
`#` and filter here. Messages are acknowledged after their batch was yielded,
i.e. once the consumer of the batch had it. An exchange written with
`routing_key=underscore` (pass that option) is bound with `#` and filtered here.

Given several brokers (`amqp://u:p@h1,h2,h3/vhost/exchange`), a lost
connection is followed by one to the next node (`amqp/connection.connect`), its queue
bound again there: a live view goes on (what was published while no queue was
bound is not shown). With one broker, a loss ends the tail with an error.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator

import orjson

from streamer.amqp.connection import BrokerUnavailable, closed_future, connect, node_of, parse_target
from streamer.core.options import is_true
from streamer.events import FieldError, constraints, jsonenc
from streamer.core.filters import EventFilter
from streamer.util.urls import EndpointURL, mask
from streamer.sources.base import Batch, Source, SourceError

log = logging.getLogger("streamer.amqp")

MAX_BATCH = 500


def binding_keys(events: str | None) -> list[str]:
    """Topic binding keys for event patterns (`#` when any pattern cannot be one)."""
    items = [p.strip() for p in (events or "*").split(",") if p.strip()]
    if not items or any(p.startswith("!") or "?" in p for p in items):
        return ["#"]
    keys: list[str] = []
    for pattern in items:
        key = "#" if pattern == "*" else pattern
        if "*" in key:
            # a glob `*` matches any characters (dots too); a topic `#` matches whole words only,
            # so a `*` that is not a whole word cannot be a binding: bind everything, filter here
            words = key.split(".")
            if any("*" in w and w != "*" for w in words):
                return ["#"]
            key = ".".join("#" if w == "*" else w for w in words)
        if key not in keys:
            keys.append(key)
    return ["#"] if "#" in keys else keys


def decode_message(body: bytes) -> Any:
    """The event of a message in monitord's JSON form (with or without `event_id`); ValueError if none."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    try:
        event = jsonenc.from_dict(obj)
        constraints.check(event)  # the schema's constraints: a message against them is not an event
    except (jsonenc.JSONError, FieldError) as exc:
        raise ValueError(str(exc)) from None
    return event


class AMQPSource(Source):
    """Events from an AMQP exchange (or a named queue), decoded from monitord JSON."""

    def __init__(self, url: EndpointURL, *, events: str | None = None, queue: str | None = None,
                 options: dict | None = None) -> None:
        self.options: dict[str, Any] = {**url.options, **(options or {})}
        self.target = parse_target(url)
        self.events = events or self.options.get("events")
        self.filter = EventFilter(self.events) if self.events else None
        self.queue_name = queue or self.options.get("queue")
        if self.queue_name and self.filter is not None and not self.filter.matches_all:
            # reading a queue consumes it: a message filtered out here would be deleted unseen
            raise SourceError(
                f"--queue {self.queue_name} with --events {self.events}: reading a queue consumes (removes) every "
                f"message it reads, so the events the filter leaves out would be lost to the queue's other "
                f"readers. Leave out --queue (a private queue bound to the exchange gets copies: filtering "
                f"them takes nothing from anyone), or read the whole queue without --events")
        self.warnings: list[str] = []
        self._stopped = asyncio.Event()
        self._connection: Any = None
        self.received = 0
        self.node = ""
        """`host:port` of the broker in use (or last used)."""
        self.reconnects = 0

    async def _open_queue(self) -> Any:
        try:
            self._connection = await connect(self.target, self.options, name="streamer tail",
                                             after=self.node or None)
            self.node = node_of(self._connection)
        except BrokerUnavailable as exc:
            raise SourceError(str(exc)) from None
        try:
            return await self._declare()
        except SourceError:
            raise
        except Exception as exc:  # refused, not found, connection lost: say so without a traceback
            raise SourceError(f"{self.target.display}: {mask(str(exc) or type(exc).__name__)}") from None

    async def _declare(self) -> Any:
        channel = await self._connection.channel()
        await channel.set_qos(prefetch_count=MAX_BATCH * 4)
        if self.queue_name:
            return await channel.declare_queue(self.queue_name, passive=True)
        try:
            await channel.get_exchange(self.target.exchange, ensure=True)
        except Exception:  # not there yet: create it as the publisher would (the tail may start first)
            channel = await self._connection.channel()
            await channel.set_qos(prefetch_count=MAX_BATCH * 4)
            await channel.declare_exchange(self.target.exchange, str(self.options.get("exchange_type", "topic")),
                                           durable=is_true(self.options.get("durable", True)))
        queue = await channel.declare_queue(exclusive=True, auto_delete=True)
        underscored = str(self.options.get("routing_key", "event")).lower() == "underscore"
        for key in ["#"] if underscored else binding_keys(self.events):
            await queue.bind(self.target.exchange, routing_key=key)
        return queue

    async def batches(self) -> AsyncIterator[Batch]:
        queue = await self._open_queue()
        inbox: asyncio.Queue[Any] = asyncio.Queue()

        async def on_message(message: Any) -> None:
            await inbox.put(message)

        tag = await queue.consume(on_message)
        stop = asyncio.ensure_future(self._stopped.wait())
        closed = closed_future(self._connection)
        try:
            while not self._stopped.is_set():
                get = asyncio.ensure_future(inbox.get())
                done, _ = await asyncio.wait({get, stop, closed}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    if closed in done and not self._stopped.is_set():
                        if not self.target.more:
                            raise SourceError(f"{self.target.display}: connection to the broker lost")
                        log.warning("%s: lost broker %s; going on with the next one", self.target.display,
                                    self.node)
                        self.reconnects += 1
                        queue = await self._open_queue()
                        tag = await queue.consume(on_message)
                        closed = closed_future(self._connection)
                        continue
                    break
                messages = [get.result()]
                while not inbox.empty() and len(messages) < MAX_BATCH:
                    messages.append(inbox.get_nowait())
                batch = Batch(events=self._decode(messages), position=None)
                self.received += len(messages)
                yield batch
                await messages[-1].ack(multiple=True)
        finally:
            stop.cancel()
            try:
                await queue.cancel(tag)
            except Exception:  # connection already gone
                pass

    def _decode(self, messages: list[Any]) -> list[Any]:
        events = []
        for message in messages:
            try:
                event = decode_message(message.body)
            except ValueError as exc:
                text = f"message {message.message_id or message.delivery_tag}: not an event: {exc}"
                log.warning("%s", text)
                self.warnings.append(text)
                continue
            if self.filter is None or self.filter.match(event.name):
                events.append(event)
        return events

    def stop(self) -> None:
        self._stopped.set()

    async def close(self) -> None:
        self._stopped.set()
        if self._connection is not None:
            connection, self._connection = self._connection, None
            try:
                await asyncio.wait_for(connection.close(), 5)
            except Exception:
                pass
