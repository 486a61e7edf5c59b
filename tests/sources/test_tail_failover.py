"""`streamer tail` / `status` given several brokers move to the next node when theirs is lost (issue 24 item 2)."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import pytest

from streamer.events import Event, bp, jsonenc
from streamer.sources.amqp.tail import AMQPSource
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import Forwarder, unique


def event(i: int) -> Event:
    return bp.parse_line(f"ts=2023-11-14T22:13:{i:02d}.000000Z event=stampede.xwf.start level=Info "
                         f"xwf.id=1e2a3b4c-0000-4000-8000-0000000000{i:02d} restart_count=0")


@pytest.mark.rabbitmq
async def test_tail_moves_to_the_next_broker(amqp_url: str) -> None:
    first, second = Forwarder(), Forwarder()
    ports = [await first.start(), await second.start()]
    first.up = second.up = True
    exchange = unique("streamer-test-tail-failover")
    source = AMQPSource(EndpointURL.parse(f"amqp://guest:guest@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/%2F/{exchange}"))
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    ex = await channel.declare_exchange(exchange, "topic", durable=True)
    seen: list[str] = []

    async def read() -> None:
        async for batch in source.batches():
            seen.extend(e.id for e in batch.events)

    reading = asyncio.create_task(read())
    try:
        deadline = time.monotonic() + 20
        while source.node != f"127.0.0.1:{ports[0]}":
            assert time.monotonic() < deadline and not reading.done()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # its queue bound
        await ex.publish(aio_pika.Message(jsonenc.dumps(event(1))), routing_key="stampede.xwf.start")
        while len(seen) < 1:
            assert time.monotonic() < deadline and not reading.done()
            await asyncio.sleep(0.05)
        first.down()
        while source.node != f"127.0.0.1:{ports[1]}" or source.reconnects < 1:
            assert time.monotonic() < deadline and not reading.done(), "the tail did not move to the next broker"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # its queue bound again
        await ex.publish(aio_pika.Message(jsonenc.dumps(event(2))), routing_key="stampede.xwf.start")
        while len(seen) < 2:
            assert time.monotonic() < deadline and not reading.done()
            await asyncio.sleep(0.05)
        assert seen == [event(1).id, event(2).id]
    finally:
        source.stop()
        await asyncio.wait_for(reading, 10)
        await source.close()
        await channel.exchange_delete(exchange)
        await connection.close()
        await first.close()
        await second.close()
