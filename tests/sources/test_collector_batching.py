"""The collector's batches: up to `batch` events or `linger` seconds, not whatever had arrived (issue 24 item 4)."""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import aio_pika
import pytest

from streamer.endpoints.base import Endpoint
from streamer.events import Event, bp, jsonenc
from streamer.run.pipeline import Run, RunOptions
from streamer.run.wiring import unfiltered
from streamer.sources.amqp.queue import QueueSource
from streamer.sources.base import SourceError
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import unique


def _line(i: int) -> str:
    return (f"ts=2023-11-14T22:13:{i % 60:02d}.000000Z event=stampede.xwf.start level=Info "
            f"xwf.id=1e2a3b4c-0000-4000-8000-{i:012d} restart_count={i}")


def _body(i: int) -> bytes:
    return jsonenc.dumps(bp.parse_line(_line(i)))


async def _publish(channel: Any, queue: str, numbers: range) -> None:
    for i in numbers:
        await channel.default_exchange.publish(aio_pika.Message(_body(i)), routing_key=queue)


async def _sizes(source: QueueSource, total: int) -> list[int]:
    """Sizes of the batches the source yields until `total` events came; each acknowledged as it comes."""
    sizes: list[int] = []
    async for batch in source.batches():
        sizes.append(len(batch.events))
        await source.commit(batch.position)
        if sum(sizes) >= total:
            break
    return sizes


@pytest.fixture
async def channel(amqp_url: str) -> Any:
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    yield await connection.channel()
    await connection.close()


@pytest.mark.rabbitmq
async def test_a_batch_is_n_events_when_they_wait(amqp_url: str, channel: Any) -> None:
    """3,000 messages waiting, batch=1500: two batches of 1,500 (not ~800 as they arrive); a linger long enough
    that only the size ends a batch, however loaded the machine."""
    queue = unique("streamer-coll-batch")
    await channel.declare_queue(queue, durable=True)
    source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?batch=1500&prefetch=4000&linger=60"))
    try:
        await _publish(channel, queue, range(3000))
        assert await asyncio.wait_for(_sizes(source, 3000), 50) == [1500, 1500]
    finally:
        await source.close()
        await channel.queue_delete(queue)


@pytest.mark.rabbitmq
async def test_a_batch_waits_linger_for_more(amqp_url: str, channel: Any) -> None:
    """10 messages, then 10 more while the first are lingering: one batch of 20."""
    queue = unique("streamer-coll-linger")
    await channel.declare_queue(queue, durable=True)
    source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?linger=3"))
    try:
        await _publish(channel, queue, range(10))
        sizes = asyncio.create_task(_sizes(source, 20))
        while (await channel.declare_queue(queue, passive=True)).declaration_result.message_count:
            await asyncio.sleep(0.05)  # the first ten are with the collector
        await asyncio.sleep(0.3)
        await _publish(channel, queue, range(10, 20))
        assert await asyncio.wait_for(sizes, 30) == [20]
    finally:
        await source.close()
        await channel.queue_delete(queue)


class Slow(Endpoint):
    """An endpoint whose every write takes `delay` seconds and every flush `flush_delay` (a database at load 30,
    or committing its transaction): what it was given, in order."""

    def __init__(self, delay: float, flush_delay: float = 0.0) -> None:
        super().__init__(EndpointURL.parse("term:"))
        self.delay, self.flush_delay, self.got = delay, flush_delay, []  # type: list[str]

    async def write(self, batch: Sequence[Event]) -> None:
        await asyncio.sleep(self.delay)
        self.got.extend(event.id for event in batch)

    async def flush(self) -> None:
        await asyncio.sleep(self.flush_delay)


@pytest.mark.rabbitmq
@pytest.mark.parametrize("write, flush", [(1.0, 0.0), (0.0, 1.0)], ids=["slow-write", "slow-flush"])
async def test_idle_never_ends_a_collector_its_endpoint_keeps_waiting(amqp_url: str, channel: Any, write: float,
                                                                     flush: float) -> None:
    """`idle` is a queue with nothing more, not a collector whose own window is full while its endpoint writes:
    every write (or the flush that commits it, the checkpoint's) outlasts `idle`, and the broker delivers nothing
    more until a batch is acknowledged. The collector ended after the first batch (exit 0, 20 of 30 messages left
    in the queue: under load, a collected database that lacked rows in every table, issue 24's "missing host
    rows"); with the write done and its commit under way, after the second (CI at load 6)."""
    queue = unique("streamer-coll-idle")
    await channel.declare_queue(queue, durable=True)
    try:
        await _publish(channel, queue, range(30))
        slow = Slow(delay=write, flush_delay=flush)
        source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?batch=10&prefetch=10&linger=0&idle=0.3"))
        result = await asyncio.wait_for(Run(source, [unfiltered(slow)], RunOptions(progress=False, signals=False))
                                        .run(), 60)
        assert result.exit_code == 0
        assert slow.got == [bp.parse_line(line).id for line in map(_line, range(30))]
        assert (await channel.declare_queue(queue, passive=True)).declaration_result.message_count == 0
    finally:
        await channel.queue_delete(queue)


def test_batch_and_linger_are_checked() -> None:
    with pytest.raises(SourceError, match="bad option value"):
        QueueSource(EndpointURL.parse("amqp://guest:guest@127.0.0.1:5672/%2F/q?linger=soon"))
    source = QueueSource(EndpointURL.parse("amqp://guest:guest@127.0.0.1:5672/%2F/q?batch=500&prefetch=200"))
    assert (source.batch_max, source.prefetch) == (200, 200)  # a batch never waits for more than the window
    source = QueueSource(EndpointURL.parse("amqp://guest:guest@127.0.0.1:5672/%2F/q?batch=3000"))
    assert (source.batch_max, source.prefetch) == (3000, 6000)  # the window holds the next batch meanwhile
