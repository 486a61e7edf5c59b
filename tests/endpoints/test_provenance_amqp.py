"""Chimbuko provenance records through the real RabbitMQ: published as JSON, read back unchanged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aio_pika
import pytest

from streamer.core.bus import Bus, make_route
from streamer.events.codec import JSON_LINES
from streamer.endpoints import create_endpoint
from streamer.events import Event, chimbuko, jsonenc
from streamer.sources.amqp.tail import AMQPSource
from streamer.sources.base import Batch
from streamer.synth.provenance import generate
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import Capture, unique

COLLECTIONS = generate(ranks=2, steps=3, per_step=5, seed=3)
ALL = [(c, r) for c, records in COLLECTIONS.items() for r in records]
EVENTS = [chimbuko.event_from_record(r, collection=c) for c, r in ALL]


async def run_bus(endpoint, events: list[Event], batch: int = 50) -> None:
    bus = Bus([make_route(endpoint, codec=JSON_LINES)])
    await bus.start()
    for start in range(0, len(events), batch):
        await bus.publish(Batch(events=events[start:start + batch]))
    await bus.close()
    assert bus.error is None


@pytest.mark.rabbitmq
async def test_every_record_type_is_published_and_reads_back_unchanged(amqp_url: str, tmp_path: Path) -> None:
    exchange = unique("streamer-test-chimbuko")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        await run_bus(create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?spool={tmp_path}")), EVENTS)  # default filter
        messages = await capture.wait_for(len(EVENTS))
    assert len(messages) == len(EVENTS)
    assert [m.routing_key for m in messages] == [e.name for e in EVENTS]
    assert [m.message_id for m in messages] == [e.id for e in EVENTS]
    back = [jsonenc.parse_line(m.body) for m in messages]
    assert back == EVENTS
    assert [chimbuko.record_of(e) for e in back] == [r for _, r in ALL]
    first = json.loads(messages[0].body)
    record = ALL[0][1]
    assert first["call_stack"] == record["call_stack"] and first["event_label"] == record["event_id"]
    assert first["event"] == "chimbuko.anomaly" and first["event_id"] == EVENTS[0].id


@pytest.mark.rabbitmq
async def test_filter_and_underscored_routing_keys(amqp_url: str, tmp_path: Path) -> None:
    exchange = unique("streamer-test-chimbuko")
    anomalies = [e for e in EVENTS if e.name == "chimbuko.anomaly"]
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        url = f"{amqp_url}/{exchange}?events=chimbuko.anomaly&routing_key=underscore&spool={tmp_path}"
        await run_bus(create_endpoint(EndpointURL.parse(url)), EVENTS)
        messages = await capture.wait_for(len(anomalies))
    assert {m.routing_key for m in messages} == {"chimbuko_anomaly"}
    assert [jsonenc.parse_line(m.body) for m in messages] == anomalies


@pytest.mark.rabbitmq
async def test_amqp_source_reads_records_back(amqp_url: str, tmp_path: Path) -> None:
    exchange = unique("streamer-test-chimbuko-tail")
    connection = await aio_pika.connect(amqp_url)
    channel = await connection.channel()
    await channel.declare_exchange(exchange, "topic", durable=True)
    source = AMQPSource(EndpointURL.parse(f"{amqp_url}/{exchange}"), events="chimbuko.*")
    got: list[Event] = []

    async def consume() -> None:
        async for batch in source.batches():
            got.extend(batch.events)
            if len(got) >= len(EVENTS):
                source.stop()

    task = asyncio.create_task(consume())
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            if source._connection is not None:
                break
        await asyncio.sleep(0.3)
        endpoint = create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?spool={tmp_path}&mandatory=false"))
        await endpoint.open()
        await endpoint.write(EVENTS)
        await endpoint.close()
        await asyncio.wait_for(task, 30)
    finally:
        task.cancel()
        await source.close()
        await channel.exchange_delete(exchange)
        await connection.close()
    assert got == EVENTS
