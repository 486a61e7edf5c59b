"""Helpers for the AMQP tests: a consumer queue, a TCP forwarder that can 'lose' the broker."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import Counter
from typing import Any, Callable

import aio_pika

from tests.conftest import AMQP_HOST, AMQP_PORT


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


class Capture:
    """A queue bound with `#` to a test exchange (declared like the endpoint does), collecting messages."""

    def __init__(self, url: str, exchange: str, *, durable_queue: str | None = None) -> None:
        self.url = url
        self.exchange_name = exchange
        self.durable_queue = durable_queue
        self.messages: list[Any] = []
        self._arrived = asyncio.Event()

    async def __aenter__(self) -> "Capture":
        self.connection = await aio_pika.connect(self.url)
        self.channel = await self.connection.channel()
        self.exchange = await self.channel.declare_exchange(self.exchange_name, "topic", durable=True)
        if self.durable_queue:
            self.queue = await self.channel.declare_queue(self.durable_queue, durable=True)
        else:
            self.queue = await self.channel.declare_queue(exclusive=True)
        await self.queue.bind(self.exchange, "#")
        return self

    async def start(self) -> None:
        await self.channel.set_qos(prefetch_count=2000)
        await self.queue.consume(self._on_message)

    async def _on_message(self, message: Any) -> None:
        self.messages.append(message)
        self._arrived.set()
        await message.ack()

    async def wait_for(self, count: int, timeout: float = 60.0) -> list[Any]:
        """Messages once `count` arrived (or whatever arrived when `timeout` ran out), plus a short settle."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.messages) < count and loop.time() < deadline:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), max(0.01, deadline - loop.time()))
            except asyncio.TimeoutError:
                break
        await asyncio.sleep(0.3)  # anything beyond `count` (duplicates) would show up here
        return list(self.messages)

    async def __aexit__(self, *exc: Any) -> None:
        try:
            if self.durable_queue:
                await self.queue.delete(if_unused=False, if_empty=False)
            await self.exchange.delete()
        finally:
            await self.connection.close()


class ReadBackCut(AssertionError):
    """The read-back consumer's connection ended before it had read what the queue held: no loss (the queue
    had the messages), but no verdict either."""


async def read_back(url: str, queue_name: str, *, prefetch: int = 5000,
                    during: Callable[[int], None] | None = None) -> tuple[Counter[str], int]:
    """(message_id counts, queue depth) of every message the durable queue `queue_name` held when declared,
    consumed and acknowledged. `ReadBackCut` if the consumer stops short: aio-pika's queue iterator just
    ends when its channel closes (a cut connection, or pytest-timeout's alarm raised inside aiormq's reader
    task, which swallows it), so a loop that stops at the iterator's end would report the unread rest as
    lost. `during(read)` runs after each message (tests cut the connection there)."""
    received: Counter[str] = Counter()
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=prefetch)
        queue = await channel.declare_queue(queue_name, durable=True, passive=True)
        depth = waiting = queue.declaration_result.message_count or 0
        ack_every = max(1, prefetch // 5)
        if waiting:
            async with queue.iterator() as messages:
                async for message in messages:
                    received[message.message_id or ""] += 1
                    waiting -= 1
                    if waiting == 0 or (depth - waiting) % ack_every == 0:
                        try:
                            await message.ack(multiple=True)
                        except Exception:  # the channel is gone: the rest stays unread (ReadBackCut below)
                            waiting = max(waiting, 1)
                            break
                    if during is not None:
                        during(depth - waiting)
                    if waiting == 0:
                        break
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(connection.close(), 10)
    if waiting:
        raise ReadBackCut(f"the read-back of {queue_name} ended after {depth - waiting:,} of the {depth:,} "
                          f"messages the queue held (its connection closed): unread, not lost")
    return received, depth


class Forwarder:
    """A real TCP proxy (to RabbitMQ unless told another server) that refuses connections while 'down' and
    cuts live ones on `down()`."""

    def __init__(self, host: str = AMQP_HOST, port: int = AMQP_PORT) -> None:
        self.host, self.port = host, port
        self.up = False
        self.accepted = 0
        self.refused = 0
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            self.refused += 1
            writer.transport.abort()
            return
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.transport.abort()
            return
        self._pipes.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            self._pipes.discard(writer)
            writer.transport.abort()

    def down(self) -> None:
        self.up = False
        for writer in list(self._pipes):
            writer.transport.abort()
        self._pipes.clear()

    async def close(self) -> None:
        self.down()
        self.server.close()
        await self.server.wait_closed()


class Holding:
    """A source's downstream whose endpoints hold events back for ever (nothing is acknowledged)."""

    def holding(self) -> bool:
        return True

    def writing(self) -> bool:
        return False  # held, not being written


async def read_held(source: Any, count: int) -> int:
    """Events read from `source` until `count` came, committing none (as while its endpoints hold every one of
    them): a broker whose window stays at the prefetch stops short, so await it under a timeout."""
    received = 0
    async for batch in source.batches():
        received += len(batch.events)
        if received >= count:
            break
    return received
