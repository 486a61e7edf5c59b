"""`amqp://` / `amqps://` endpoint: events to a RabbitMQ exchange, confirmed, spooled while the broker is away.

URL (monitord's form): `amqp://[user:pass@]host[:port]/[vhost/]exchange`, the
vhost URL-encoded (`%2F` for `/`; without a vhost segment, `/`).

Messages are what monitord publishes, made reliable: routing key = event name
(`routing_key=underscore` gives `stampede_inv_end`), body = the monitord JSON
object (`jsonenc.dumps`), content type `application/json`, persistent,
`message_id` = the event's stable id, `timestamp` = when streamer accepted it,
headers `wf_uuid` and `root_wf_uuid` (`headers.py`). Several brokers
(`amqp://u:p@h1,h2,h3/vhost/x`): the next node when one is lost, spooled only
when none answers (`amqp/connection.connect`); `node` is the one in use.

No loss, without stalling the run:
- `write(batch)` publishes the batch with publisher confirms in flight (one
  socket write per window, no await per message) and returns once the broker
  confirmed every message.
- If the broker is unreachable, the connection drops, or confirms do not come
  (`connection.blocked`, a wedged broker) within `confirm_timeout`, `write`
  raises `resilience.Unavailable` naming the unconfirmed rest of the batch;
  the spooling layer around this endpoint (`spooling.py`, on by default with
  a spool directory per destination) appends that rest to its on-disk spool
  (fsync'd) and returns: the spool holds it durably. It replays the spool in
  order through `write` once the broker is back (reconnecting with back-off
  capped at `retry_max`); while the spool is not empty new batches join it,
  so the broker sees events in order. Re-sent messages keep their
  `message_id`: consumers drop duplicates by it. At exit the layer waits up
  to `drain_timeout` for the spool to drain; the next run with the same spool
  directory delivers what is left first.
- `spool=off`: no spool; `write` then retries (the one retry loop,
  `resilience.retrying`) until the broker confirms.

The hot path writes AMQP frames itself into aio-pika's (aiormq's) channel and
registers the confirmations there (`amqp_channel`, the one module touching
aiormq's internals), because aiormq's per-message `basic_publish` manages
~6,000 messages/s where this manages several times more.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from streamer.amqp import connection as amqpconn
from streamer.amqp.connection import (  # noqa: F401
    _PERMANENT,
    AMQPTarget,
    BrokerUnavailable,
    _reason,
    connect,
    node_of,
    tls_context,
)
from streamer.core.options import OptionError
from streamer.core.options import parse_size as _parse_size
from streamer.endpoints import options as option_specs
from streamer.endpoints.amqp.channel import Item, is_ack
from streamer.endpoints.amqp.headers import WorkflowHeaders
from streamer.endpoints.amqp.publisher import Publisher
from streamer.endpoints.amqp.spooldir import default_spool_dir, leftover_spools
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.endpoints.layers.resilience import (
    CONNECTION,
    RetryPolicy,
    TransientError,
    Unavailable,
    retrying,
)
from streamer.events import Event, jsonenc
from streamer.util import safenames
from streamer.util.urls import EndpointURL

log = logging.getLogger("streamer.amqp")


MONITORD_EVENTS = "stampede.job_inst.tag,stampede.job_inst.composite,stampede.inv.end,stampede.wf.plan"
DEFAULT_SPOOL_BYTES = 1 << 30
DEFAULT_WINDOW = 2000

# (name, default) of every option this endpoint reads (query string or config)
OPTIONS: dict[str, Any] = {
    "exchange_type": "topic", "durable": True, "declare": "true", "routing_key": "event",
    "mandatory": True, "heartbeat": 60, "connect_timeout": 10.0, "confirm_timeout": 30.0,
    "drain_timeout": 300.0, "retry_max": 30.0, "window": DEFAULT_WINDOW,
    "spool": None, "spool_size": DEFAULT_SPOOL_BYTES,
    "cafile": None, "certfile": None, "keyfile": None, "verify": True,
}


def parse_target(url: EndpointURL, *, need_exchange: bool = True) -> AMQPTarget:
    """`amqpconn.parse_target`, its usage errors as this endpoint's."""
    try:
        return amqpconn.parse_target(url, need_exchange=need_exchange)
    except amqpconn.AMQPURLError as exc:
        raise EndpointError(str(exc)) from None


def routing_key(name: str, mode: str) -> str:
    return name.replace(".", "_") if mode == "underscore" else name


def parse_size(value: Any) -> int:
    """`1073741824`, `512M`, `2G`, `100k` -> bytes (`core.options.parse_size`, as an EndpointError)."""
    try:
        return _parse_size(value)
    except OptionError as exc:
        raise EndpointError(str(exc)) from None


# ---------------------------------------------------------------- endpoint

class AMQPEndpoint(Endpoint):
    """Publishes events to a RabbitMQ exchange with confirms; spooled by the spooling layer while the broker is
    away (`spooling.py`; its spool is on unless `spool=off`)."""

    schemes = ("amqp", "amqps")
    declared_options = option_specs.AMQP
    default_events = MONITORD_EVENTS + ",chimbuko.*"  # monitord's events, and every provenance record
    spool_grace = 0.0  # a batch the broker did not confirm (within confirm_timeout) goes to the spool at once

    def __init__(self, url: EndpointURL, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        self.target = parse_target(url)
        self.key_mode = str(self.option("routing_key", "event")).lower()
        if self.key_mode not in ("event", "underscore"):
            raise EndpointError(f"{self.name}: routing_key must be event or underscore, not {self.key_mode!r}")
        self.window = max(1, int(self.option("window", DEFAULT_WINDOW)))
        self.confirm_timeout = float(self.option("confirm_timeout", 30.0))
        self.retry_max = float(self.option("retry_max", 30.0))
        self.give_up = math.inf
        """Seconds the broker may stay away before `write` raises `Unavailable` (the spooling layer sets it;
        without a spool, `write` waits until the broker confirms)."""
        self.publisher: Publisher | None = None
        self.published = 0
        """Messages the broker confirmed."""
        self.resent = 0
        """Messages published again after a connection loss (same message_id)."""
        self.unroutable: Counter[str] = Counter()
        self.returned: list[tuple[bytes, str]] | None = None
        """Set to a list (the dead-letter layer does) to collect (message body, reason) of every message the
        broker returned as unroutable (`mandatory`)."""
        self.connects = 0
        """Connections opened (1 + reconnections)."""
        self.node = ""
        """`host:port` of the broker in use (or last used)."""
        self.headers = WorkflowHeaders()
        self.unconfirmed_ids: set[str] | None = None
        """Set it to a set to record the ids of messages sent but not confirmed (tests, diagnostics)."""
        self.spool_codec = SPOOL_CODEC
        self._opened = False
        self._last_error = ""
        self._connect_lock = asyncio.Lock()

    def default_spool(self) -> Path | None:
        return default_spool_dir(self.target)

    def leftover_spools(self) -> list[Path]:
        return leftover_spools(self.target)

    def give_up_after(self, seconds: float) -> None:
        self.give_up = seconds

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        self._opened = True
        try:
            await self._connect()
        except BrokerUnavailable as exc:
            if exc.permanent or math.isinf(self.give_up):
                self._opened = False
                raise EndpointError(f"{self.name}: {exc}") from None
            self._note_down(exc)
            raise Unavailable(CONNECTION, f"broker unavailable ({_reason(exc)})") from None

    async def flush(self) -> None:
        """Nothing to do: confirmed events are at the broker (spooled ones are fsync'd by the spooling layer)."""

    async def close(self) -> None:
        if self.publisher is not None:
            await self.publisher.close()
            self.publisher = None
        if self.unroutable and self.returned is None:  # else the dead-letter layer reports each one
            total = sum(self.unroutable.values())
            log.warning("%s: %d events were unroutable (no queue bound): %s", self.name, total,
                        ", ".join(f"{k} x{n}" for k, n in self.unroutable.most_common(10)))

    def undelivered(self) -> list[tuple[int, str]]:
        dropped = sum(self.unroutable.values()) if self.returned is None else 0  # else: dead letters
        mine = [(dropped, "unroutable (no queue bound: the broker dropped them)")] if dropped else []
        return super().undelivered() + mine
    # ------------------------------------------------------------ writing

    def prepare(self, events: Sequence[Event]) -> None:
        jsonenc.prepare(list(events))  # bodies and ids (message_id), cached on the events

    def items(self, batch: Sequence[Event]) -> list[Item]:
        now = int(time.time())
        mode = self.key_mode
        dumps = jsonenc.dumps
        headers = self.headers.of
        out = [(e.name if mode == "event" else routing_key(e.name, mode), e.id, now, dumps(e), headers(e))
               for e in batch]
        for item in (out if any(len(item[0]) > 63 for item in out) else ()):  # a name from the input: over
            safenames.amqp_short(item[0], "routing key")  # 255 bytes it is no routing key (ValueError: skipped)
        return out

    async def write(self, batch: Sequence[Event]) -> None:
        """Publish `batch` until the broker confirmed all of it; past `give_up` seconds of outage,
        `Unavailable` with the events not confirmed as its `rest` (the spooling layer spools those)."""
        if not batch:
            return
        items = self.encode_each(batch, self.items, lambda parts: [i for part in parts for i in part])  # one skipped
        try:
            await self._publish_until_confirmed(items)
        except Unavailable as exc:
            by_id = {event.id: event for event in batch}
            exc.rest = [by_id[item[1]] for item in exc.rest] if exc.rest is not None else None
            raise

    async def _publish(self, items: Sequence[Item]) -> None:
        """Publish in windows with confirms in flight; raise _Unconfirmed with what is left on failure."""
        try:
            await self._publish_windows(items)
        except _Unconfirmed as exc:
            if self.unconfirmed_ids is not None:
                self.unconfirmed_ids.update(item[1] for item in exc.rest)
            raise

    async def _publish_windows(self, items: Sequence[Item]) -> None:
        """Every window is written at once (confirms in flight for all), then the confirms are awaited."""
        publisher = self.publisher
        if publisher is None:
            raise _Unconfirmed(BrokerUnavailable("not connected"), list(items))
        in_flight: list[tuple[Sequence[Item], list[asyncio.Future]]] = []
        cause: BrokerUnavailable | None = None
        not_sent: list[Item] = []
        for start in range(0, len(items), self.window):
            window = items[start:start + self.window]
            try:
                in_flight.append((window, await publisher.send(window)))
            except Exception as exc:
                cause = exc if isinstance(exc, BrokerUnavailable) else BrokerUnavailable(_reason(exc))
                not_sent = list(items[start:])
                break
        deadline = time.monotonic() + self.confirm_timeout
        rest: list[Item] = []
        for window, futures in in_flight:
            failed = await self._await_confirms(publisher, window, futures, max(0.0, deadline - time.monotonic()))
            if failed is not None:
                cause = cause or failed[0]
                rest.extend(window[i] for i in failed[1])
        if cause is not None:
            await self._drop_connection()
            raise _Unconfirmed(cause, rest + not_sent)

    async def _await_confirms(self, publisher: Publisher, window: Sequence[Item], futures: list[asyncio.Future],
                              timeout: float) -> tuple[BrokerUnavailable, list[int]] | None:
        """None if all confirmed; else the cause and the indices of unconfirmed messages."""
        try:
            async with asyncio.timeout(timeout or 0.001):
                for future in futures:
                    if not future.done():
                        await asyncio.wait((future,))
        except TimeoutError:
            pass
        publisher.settled(futures, window)
        pending = {f for f in futures if not f.done()}
        bad: list[int] = []
        new_keys: list[str] = []
        cause: BrokerUnavailable | None = None
        for index, future in enumerate(futures):
            if future in pending:
                future.cancel()
                bad.append(index)
                cause = cause or BrokerUnavailable(f"no confirm within {self.confirm_timeout:g}s (blocked?)")
                continue
            if future.cancelled():
                bad.append(index)
                cause = cause or BrokerUnavailable("publish cancelled")
                continue
            exc = future.exception()
            if exc is not None:  # nack or connection/channel closed
                bad.append(index)
                cause = cause or (exc if isinstance(exc, BrokerUnavailable) else BrokerUnavailable(_reason(exc)))
                continue
            if not is_ack(future.result()):  # the message came back: unroutable
                key = window[index][0]
                if key not in self.unroutable:
                    new_keys.append(key)
                self.unroutable[key] += 1
                if self.returned is not None:
                    self.returned.append((window[index][3], f"unroutable: no queue bound for routing key {key}"))
        if new_keys and self.returned is None:
            log.warning("%s: unroutable (no queue bound, dropped by the broker): %s; "
                        "further ones are counted and summarised at close", self.name, ", ".join(new_keys))
        self.published += len(futures) - len(bad)
        return None if cause is None else (cause, bad)  # a cause comes with the first bad index

    async def _publish_until_confirmed(self, items: list[Item]) -> None:
        """Publish until every message is confirmed, reconnecting with back-off (the one retry loop,
        `resilience.retrying`) for `give_up` seconds; after a failure only the unconfirmed ones are sent
        again. Past `give_up`: `Unavailable`, its `rest` the messages not confirmed."""
        rest = items
        again = 0

        async def attempt() -> None:
            nonlocal rest, again
            # with several brokers, a node lost is followed at once by the others (`_connect` starts after it):
            # the batch waits (or spools) only when none of them takes it
            for tries_left in range(len(self.target.nodes) - 1, -1, -1):
                self.resent += again
                again = 0
                if self.publisher is None or not self.publisher.alive:
                    try:
                        await self._connect()
                    except BrokerUnavailable as exc:
                        self._note_down(exc)
                        raise TransientError(CONNECTION, _reason(exc)) from None
                try:
                    await self._publish(rest)
                    return
                except _Unconfirmed as exc:
                    rest, again = exc.rest, len(exc.rest)
                    if not tries_left:
                        self._note_down(exc.cause)
                        raise TransientError(CONNECTION, _reason(exc.cause)) from None
                    log.warning("%s: lost broker %s (%s); failing over to the next one", self.name, self.node,
                                _reason(exc.cause))

        policy = RetryPolicy(retry_for=self.give_up, first_delay=0.2, max_delay=self.retry_max, quiet_for=math.inf)
        try:
            await retrying(self.name, "publishing", attempt, policy)
        except Unavailable as exc:
            failed = Unavailable(exc.kind, f"broker unavailable ({self._last_error or exc})")
            failed.rest = rest
            raise failed from None

    # ------------------------------------------------------------ connection

    async def _connect(self) -> None:
        async with self._connect_lock:
            if self.publisher is not None and self.publisher.alive:
                return
            if self.publisher is not None:
                await self.publisher.close()
                self.publisher = None
            # after a loss, the next node first: a dead node is tried last, not waited for
            self.publisher = await Publisher.open(self.target, self.options, after=self.node or None)
            self.connects += 1
            self.node = node_of(self.publisher.connection)
            log.info("%s: connected to %s", self.name, self.node)

    async def _drop_connection(self) -> None:
        if self.publisher is not None:
            publisher, self.publisher = self.publisher, None
            await publisher.close()

    def health(self) -> str | None:
        """None while the broker takes messages, else why not (`/healthz`, streamer/run/metrics.py)."""
        if not self._opened or (self.publisher is not None and self.publisher.alive):
            return None
        return f"broker unreachable ({self._last_error or 'connection lost'})"

    def _note_down(self, exc: BaseException) -> None:
        """The broker did not take messages: spool (or wait) and retry; a refusal retrying cannot fix (a
        permission) is final at once (EndpointError), nothing spooled for it."""
        if isinstance(exc, BrokerUnavailable) and exc.permanent:
            raise EndpointError(f"{self.name}: {exc}") from None
        text = _reason(exc)
        if text != self._last_error:
            log.warning("%s: broker unavailable (%s)%s", self.name, text,
                        "; retrying until it is back" if math.isinf(self.give_up) else "")
        self._last_error = text


class _Unconfirmed(Exception):
    """Publishing stopped: `rest` are the messages (in order) the broker did not confirm."""

    def __init__(self, cause: BrokerUnavailable, rest: list[Item]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.rest = rest


class SpoolCodec:
    """An event in the AMQP endpoint's spool: its monitord JSON, which is also the message body
    (`JSON_LINES`); records of earlier versions (`routing key\\nmessage id\\ntime\\nbody`) read as their body."""

    def encode(self, record: Event) -> bytes:
        return jsonenc.dumps(record)

    def decode(self, data: bytes) -> Event:
        if not data.startswith(b"{"):
            data = data.split(b"\n", 3)[3]
        return jsonenc.parse_line(data)


SPOOL_CODEC = SpoolCodec()


__all__ = ["AMQPEndpoint", "AMQPTarget", "MONITORD_EVENTS", "parse_target", "routing_key", "connect",
           "BrokerUnavailable", "default_spool_dir", "leftover_spools"]
