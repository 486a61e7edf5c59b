"""The buffered frame reader (`amqp/frames.py`) is the collector's alone: a connection opened with
`raw_deliveries` reads with it, every other one (publishers, tail, status) with aiormq's own reader, even
when both connect at the same moment in one process."""

from __future__ import annotations

import asyncio
from typing import Any

import aiormq.connection
import pytest

from streamer.amqp import frames
from streamer.amqp.connection import connect, parse_target
from streamer.util.urls import EndpointURL


def reader_of(connection: Any) -> Any:
    """The frame reader aiormq's reader task of `connection` iterates (a local of that task's coroutine)."""
    task = connection.transport.connection._reader_task
    return task.get_coro().cr_frame.f_locals["frame_receiver"]


@pytest.mark.rabbitmq
async def test_only_a_raw_deliveries_connection_reads_with_the_buffered_reader(amqp_url: str) -> None:
    target = parse_target(EndpointURL.parse(f"{amqp_url}/unused"))
    collector, publisher, tail = await asyncio.gather(
        connect(target, {}, name="collector", raw_deliveries=True), connect(target, {}, name="publisher"),
        connect(target, {}, name="tail"))
    try:
        assert type(reader_of(collector)) is frames.FrameReceiver
        assert getattr(collector, "receiver") is reader_of(collector)
        for plain in (publisher, tail):
            assert type(reader_of(plain)) is frames._AIORMQ_RECEIVER
            assert frames._AIORMQ_RECEIVER.__module__ == "aiormq.connection"
            assert getattr(plain, "receiver") is None
        # each still works: a channel opens and a declare round-trips on every connection
        for connection in (collector, publisher, tail):
            channel = await connection.channel()
            await channel.declare_exchange("amq.topic", passive=True)
            await channel.close()
    finally:
        for connection in (collector, publisher, tail):
            await connection.close()


async def test_a_connection_opened_outside_capture_gets_aiormq_s_reader() -> None:
    reader = asyncio.StreamReader()
    frames._install()
    assert aiormq.connection.FrameReceiver is frames._reader_for
    assert type(frames._reader_for(reader)) is frames._AIORMQ_RECEIVER
    with frames.capture() as found:
        inside = frames._reader_for(reader)
    assert type(inside) is frames.FrameReceiver and found == [inside]
