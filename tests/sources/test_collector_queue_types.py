"""The collector on every RabbitMQ queue type (issue 24 item 1): a quorum queue (refuses a channel-wide
prefetch), a stream (wants a per-consumer one, read from an offset kept across runs), the arguments `declare`
takes, and a poison message that goes to the dead letters instead of round and round."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import aio_pika
import orjson
import pytest

from streamer.events import Event, bp, jsonenc
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import Holding, read_held, unique


def events(start: int, count: int) -> list[Event]:
    return [bp.parse_line(f"ts=2023-11-14T22:13:{i % 60:02d}.000000Z event=stampede.xwf.start level=Info "
                          f"xwf.id=1e2a3b4c-0000-4000-8000-{i:012d} restart_count=0")
            for i in range(start, start + count)]


def load(url: str, dest: Path, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**__import__("os").environ, "STREAMER_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "streamer", "load", url, "--dest", str(dest)],
                          capture_output=True, text=True, timeout=60, env=env)


def ids(path: Path) -> list[str]:
    return [orjson.loads(line)["event_id"] for line in path.read_bytes().splitlines()]


@pytest.fixture
async def channel(amqp_url: str) -> AsyncIterator[tuple[Any, list[str]]]:
    """A channel on the shared broker and the queues/exchanges to delete afterwards."""
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    made: list[str] = []
    yield await connection.channel(), made
    for name in made:
        for delete in ("queue_delete", "exchange_delete"):
            try:
                await getattr(await connection.channel(), delete)(name)
            except Exception:
                pass
    await connection.close()


async def publish(channel: Any, queue: str, batch: list[Event]) -> None:
    for event in batch:
        await channel.default_exchange.publish(aio_pika.Message(jsonenc.dumps(event), delivery_mode=2),
                                               routing_key=queue)


@pytest.mark.rabbitmq
async def test_a_quorum_queue_is_collected(channel: tuple[Any, list[str]], amqp_url: str, tmp_path: Path) -> None:
    ch, made = channel
    queue = unique("streamer-coll-quorum")
    made.append(queue)
    await ch.declare_queue(queue, durable=True, arguments={"x-queue-type": "quorum"})
    sent = events(0, 25)
    await publish(ch, queue, sent)
    done = await asyncio.to_thread(load, f"{amqp_url}/{queue}?idle=1&prefetch=10", tmp_path / "q.jsonl", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "global qos" not in done.stderr and "Traceback" not in done.stderr
    assert ids(tmp_path / "q.jsonl") == [e.id for e in sent]
    assert (await ch.declare_queue(queue, passive=True)).declaration_result.message_count == 0


@pytest.mark.rabbitmq
async def test_a_stream_is_read_from_first_and_resumed_from_the_stored_offset(
        channel: tuple[Any, list[str]], amqp_url: str, tmp_path: Path) -> None:
    ch, made = channel
    stream = unique("streamer-coll-stream")
    made.append(stream)
    await ch.declare_queue(stream, durable=True, arguments={"x-queue-type": "stream"})
    first, later = events(0, 30), events(30, 12)
    await publish(ch, stream, first)
    url = f"{amqp_url}/{stream}?idle=1&prefetch=7"
    done = await asyncio.to_thread(load, url, tmp_path / "a.jsonl", tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "prefetch count is not set" not in done.stderr
    assert ids(tmp_path / "a.jsonl") == [e.id for e in first]
    await publish(ch, stream, later)
    done = await asyncio.to_thread(load, url, tmp_path / "a.jsonl", tmp_path / "state")  # the same collector again
    assert done.returncode == 0, done.stderr
    assert ids(tmp_path / "a.jsonl") == [e.id for e in first + later]  # resumed exactly: nothing twice
    # another destination starts afresh: from `first` by default, or where ?offset= says
    done = await asyncio.to_thread(load, url, tmp_path / "b.jsonl", tmp_path / "state")
    assert ids(tmp_path / "b.jsonl") == [e.id for e in first + later], done.stderr
    done = await asyncio.to_thread(load, f"{url}&offset=35", tmp_path / "c.jsonl", tmp_path / "state")
    assert ids(tmp_path / "c.jsonl") == [e.id for e in later[5:]], done.stderr
    done = await asyncio.to_thread(load, f"{url}&offset=next", tmp_path / "d.jsonl", tmp_path / "state")
    assert done.returncode == 0 and not (tmp_path / "d.jsonl").exists() or ids(tmp_path / "d.jsonl") == []


@pytest.mark.rabbitmq
async def test_declare_a_quorum_queue_whose_poison_message_is_dead_lettered(
        channel: tuple[Any, list[str]], amqp_url: str, tmp_path: Path) -> None:
    ch, made = channel
    queue, dead = unique("streamer-coll-poison"), unique("streamer-coll-dead")
    made += [queue, dead]
    url = (f"{amqp_url}/{queue}?declare=true&queue_type=quorum&delivery_limit=2&dead_letter_exchange={dead}"
           f"&max_length=1000&idle=0.5")
    done = await asyncio.to_thread(load, url, tmp_path / "none.jsonl", tmp_path)
    assert done.returncode == 0, done.stderr
    other = await aio_pika.connect(amqp_url.replace("%2F", ""))
    try:
        with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed):  # it is a quorum queue with a limit
            await (await other.channel()).declare_queue(queue, durable=True)
    finally:
        await other.close()
    poison = events(0, 1)[0]
    await publish(ch, queue, [poison])
    declared = await ch.declare_queue(queue, passive=True)
    rejected = 0

    async def take_and_die() -> None:  # a collector that takes it and dies, again and again
        nonlocal rejected
        async with declared.iterator() as messages:
            async for message in messages:
                await message.reject(requeue=True)
                rejected += 1

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(take_and_die(), 3)
    assert rejected == 3  # delivered delivery_limit + 1 times, then no more
    assert (await ch.declare_queue(queue, passive=True)).declaration_result.message_count == 0
    kept = await (await ch.declare_queue(dead, passive=True)).get(timeout=5)
    assert orjson.loads(kept.body)["event_id"] == poison.id


@pytest.mark.parametrize("query, words", [
    ("queue_type=lazy", "queue_type must be one of classic, quorum, stream, not 'lazy'"),
    ("declare=true&delivery_limit=3", "delivery_limit needs queue_type=quorum"),
    ("offset=yesterday", "offset 'yesterday': expected first, last, next"),
    ("declare=true&queue_type=stream&max_age=forever", "max_age 'forever'"),
])
def test_queue_type_usage_errors(query: str, words: str, tmp_path: Path) -> None:
    done = load(f"amqp://u:secret@127.0.0.1:1/%2F/q?{query}", tmp_path / "x.jsonl", tmp_path)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "secret" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.rabbitmq
async def test_the_window_of_a_quorum_queue_widens_while_events_are_held(channel: tuple[Any, list[str]],
                                                                        amqp_url: str) -> None:
    """A quorum queue's prefetch is per consumer and applies only to consumers started after it: a new consumer
    takes over, so held events' parents behind them still arrive."""
    from streamer.sources.amqp.queue import QueueSource

    ch, made = channel
    queue = unique("streamer-coll-qwindow")
    made.append(queue)
    await ch.declare_queue(queue, durable=True, arguments={"x-queue-type": "quorum"})
    await publish(ch, queue, events(0, 10))
    source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?prefetch=2"))
    source.downstream = Holding()
    try:
        assert await asyncio.wait_for(read_held(source, 10), 20) == 10
    finally:
        await source.close()


@pytest.mark.rabbitmq
async def test_a_consumer_the_broker_cancels_is_consumed_again(channel: tuple[Any, list[str]],
                                                              amqp_url: str) -> None:
    """The broker cancels a consumer (Basic.Cancel) when its queue is deleted or, in a cluster, its leader is lost,
    while the connection and the channel live on: the collector consumes again (here the queue is declared anew
    by `declare`), and what is published afterwards is collected. It used to wait for ever, silent."""
    from streamer.sources.amqp.queue import QueueSource

    ch, made = channel
    queue = unique("streamer-coll-cancel")
    made.extend([queue, f"{queue}.dead"])
    source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?declare=true&queue_type=quorum&linger=0"))
    before, after = events(0, 5), events(5, 7)
    got: list[str] = []

    async def collect() -> None:
        async for batch in source.batches():
            got.extend(e.id for e in batch.events)
            await source.commit(batch.position)
            if len(got) == len(before):
                deleted.set()
            if len(got) >= len(before) + len(after):
                return

    async def declared(connection: Any) -> None:
        """Wait until the source declared the queue (a failed passive declare closes its channel)."""
        for _ in range(400):
            try:
                await (await connection.channel()).declare_queue(queue, passive=True)
                return
            except aio_pika.exceptions.ChannelClosed:
                await asyncio.sleep(0.05)
        raise AssertionError(f"{queue} was not declared")

    deleted = asyncio.Event()
    task = asyncio.ensure_future(collect())
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    try:
        await declared(connection)
        await publish(ch, queue, before)
        await asyncio.wait_for(deleted.wait(), 20)
        await (await connection.channel()).queue_delete(queue)
        await declared(connection)  # again, by the source once it noticed the cancel
        await publish(ch, queue, after)
        await asyncio.wait_for(task, 20)
    finally:
        task.cancel()
        await source.close()
        await connection.close()
    assert got == [e.id for e in before + after]
    assert source.reconnects == 1


@pytest.mark.rabbitmq
async def test_the_type_of_a_quorum_queue_with_a_dead_letter_exchange_is_found(channel: tuple[Any, list[str]],
                                                                               amqp_url: str) -> None:
    """The broker reports a quorum queue's other arguments (dead-letter exchange, max length, single active
    consumer) inequivalent before its type: the probe adds each and asks again, instead of guessing classic."""
    from streamer.sources.amqp.queue import queue_type_of

    ch, made = channel
    queue = unique("streamer-coll-probe")
    made.append(queue)
    await ch.declare_queue(queue, durable=True, arguments={
        "x-queue-type": "quorum", "x-delivery-limit": 20, "x-dead-letter-exchange": f"{queue}.dead",
        "x-single-active-consumer": True, "x-max-length": 100_000})
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    try:
        assert await queue_type_of(connection, queue) == "quorum"
    finally:
        await connection.close()
