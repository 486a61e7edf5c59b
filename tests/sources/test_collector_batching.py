"""The collector's batches: up to `batch` events or `linger` seconds, not whatever had arrived (issue 24 item 4)."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest

from streamer.events import bp, jsonenc
from streamer.sources.amqp.queue import QueueSource
from streamer.sources.base import SourceError
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import unique


def _body(i: int) -> bytes:
    return jsonenc.dumps(bp.parse_line(
        f"ts=2023-11-14T22:13:{i % 60:02d}.000000Z event=stampede.xwf.start level=Info "
        f"xwf.id=1e2a3b4c-0000-4000-8000-{i:012d} restart_count={i}"))


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


def test_batch_and_linger_are_checked() -> None:
    with pytest.raises(SourceError, match="bad option value"):
        QueueSource(EndpointURL.parse("amqp://guest:guest@127.0.0.1:5672/%2F/q?linger=soon"))
    source = QueueSource(EndpointURL.parse("amqp://guest:guest@127.0.0.1:5672/%2F/q?batch=500&prefetch=200"))
    assert (source.batch_max, source.prefetch) == (200, 200)  # a batch never waits for more than the window
    source = QueueSource(EndpointURL.parse("amqp://guest:guest@127.0.0.1:5672/%2F/q?batch=3000"))
    assert (source.batch_max, source.prefetch) == (3000, 6000)  # the window holds the next batch meanwhile
