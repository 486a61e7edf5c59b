"""AMQP endpoint and source against the real RabbitMQ: golden messages, filters, routing keys,
properties, the spool (unit), a broker that is unreachable at start (behind a real TCP proxy),
a full spool, spooled events surviving a restart, and the live-tail source."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path

import aio_pika
import pytest
from pamqp import frame as pframe
from pamqp.commands import Basic
from pamqp.header import ContentHeader

from streamer.core.bus import Bus, make_route
from streamer.events.codec import JSON_LINES
from streamer.endpoints import EndpointError, create_endpoint
from streamer.endpoints.amqp.endpoint import MONITORD_EVENTS, AMQPEndpoint, parse_target, routing_key
from streamer.endpoints.amqp.channel import content_header_frame
from streamer.events import Event, bp, jsonenc
from streamer.sources.amqp.tail import AMQPSource, binding_keys
from streamer.sources.base import Batch, SourceError
from streamer.core.spool import Spool, SpoolError, SpoolFull
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import Capture, Forwarder, unique
from tests.support.eventcompare import WALL_CLOCK_EVENTS, differences

GOLDEN_NAMES = ["hierarchical_wf_success", "process_wf_failure", "process_wf_success", "sample_wf_held"]


def golden_events(golden: Path, name: str) -> list[Event]:
    return [bp.parse_line(line) for line in (golden / f"{name}.bp").read_text().splitlines() if line.strip()]


async def run_bus(endpoint, events: list[Event], batch: int = 500) -> Bus:
    bus = Bus([make_route(endpoint, codec=JSON_LINES)])
    await bus.start()
    for start in range(0, len(events), batch):
        await bus.publish(Batch(events=events[start:start + batch]))
    await bus.close()
    assert bus.error is None
    return bus


# ---------------------------------------------------------------- URL, frames, bindings (no broker)

def test_url_forms() -> None:
    t = parse_target(EndpointURL.parse("amqp://user:p%40ss@broker:5673/pegasus/workflows"))
    assert (t.tls, t.host, t.port, t.user, t.password, t.vhost, t.exchange) == (
        False, "broker", 5673, "user", "p@ss", "pegasus", "workflows")
    assert parse_target(EndpointURL.parse("amqp://u:p@h/%2F/x")).vhost == "/"
    assert parse_target(EndpointURL.parse("amqp://h/x")).vhost == "/" and parse_target(EndpointURL.parse("amqp://h/x")).user == "guest"
    assert parse_target(EndpointURL.parse("amqps://u:p@h/v/x")).port == 5671
    assert "p%40ss" not in t.display and "p@ss" not in t.display
    with pytest.raises(EndpointError, match="no exchange"):
        parse_target(EndpointURL.parse("amqp://u:secret@h/"))
    with pytest.raises(EndpointError) as info:
        create_endpoint(EndpointURL.parse("amqp://u:secret@h:5672/v/x?routing_key=dots"))
    assert "secret" not in str(info.value)


def test_routing_keys_and_default_filter() -> None:
    assert routing_key("stampede.inv.end", "event") == "stampede.inv.end"
    assert routing_key("stampede.inv.end", "underscore") == "stampede_inv_end"
    assert AMQPEndpoint.default_events == MONITORD_EVENTS + ",chimbuko.*"
    assert MONITORD_EVENTS == "stampede.job_inst.tag,stampede.job_inst.composite,stampede.inv.end,stampede.wf.plan"


def test_content_header_is_what_pamqp_encodes() -> None:
    ours = content_header_frame(3, 1234, "abc123", 1700000000)
    props = Basic.Properties(content_type="application/json", delivery_mode=2, message_id="abc123",
                             timestamp=datetime.fromtimestamp(1700000000, timezone.utc))
    assert ours == pframe.marshal(ContentHeader(0, 1234, props), 3)


def test_binding_keys() -> None:
    assert binding_keys(None) == ["#"]
    assert binding_keys("*") == ["#"]
    assert binding_keys("stampede.job_inst.*") == ["stampede.job_inst.#"]
    assert binding_keys("stampede.inv.end,stampede.xwf.*") == ["stampede.inv.end", "stampede.xwf.#"]
    assert binding_keys("stampede.*,!stampede.inv.start") == ["#"]
    assert binding_keys("stampede.job_inst.ma*") == ["#"]


# ---------------------------------------------------------------- spool (unit)

def test_spool_fifo_across_segments_and_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s", 1 << 20, segment_bytes=100)
    records = [f"record-{i}".encode() * (i % 5 + 1) for i in range(50)]
    for start in range(0, 50, 7):
        spool.append(records[start:start + 7])
    assert len(spool) == 50 and len(list((tmp_path / "s").glob("*.seg"))) > 3
    got, position = spool.peek(20)
    assert got == records[:20]
    spool.commit(position, 20)
    assert spool.pending() == records[20:]
    with pytest.raises(SpoolError, match="in use"):
        Spool(tmp_path / "s", 1 << 20)
    spool.close()
    again = Spool(tmp_path / "s", 1 << 20, segment_bytes=100)
    assert len(again) == 30 and again.pending() == records[20:]
    got, position = again.peek(100)
    again.commit(position, len(got))
    assert len(again) == 0 and again.size == 0 and not list((tmp_path / "s").glob("*.seg"))
    again.append([b"after"])
    assert again.pending() == [b"after"]
    again.close()


def test_spool_cuts_a_torn_tail(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.append([b"one", b"two"])
    spool.close()
    segment = next(tmp_path.glob("*.seg"))
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x09\x12\x34")  # a record header cut by a crash
    again = Spool(tmp_path, 1 << 20)
    assert again.pending() == [b"one", b"two"]
    again.append([b"three"])
    assert again.pending() == [b"one", b"two", b"three"]
    again.close()


def test_spool_full_writes_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 40)
    spool.append([b"0123456789"])  # 18 bytes with its header
    with pytest.raises(SpoolFull, match=f"spool {tmp_path} is full"):
        spool.append([b"0123456789", b"0123456789"])
    assert spool.pending() == [b"0123456789"] and spool.size == 18
    spool.close()


# ---------------------------------------------------------------- golden streams on the real broker

@pytest.mark.rabbitmq
@pytest.mark.corpus
@pytest.mark.parametrize("name", GOLDEN_NAMES)
async def test_golden_stream_gives_golden_messages(amqp_url: str, golden: Path, tmp_path: Path, name: str) -> None:
    events = golden_events(golden, name)
    expected = [json.loads(line) for line in (golden / f"{name}.json").read_text().splitlines() if line.strip()]
    exchange = unique("streamer-test-golden")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        endpoint = create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?events=*&spool={tmp_path / 'spool'}"))
        await run_bus(endpoint, events, batch=97)
        messages = await capture.wait_for(len(expected))
    assert len(messages) == len(expected)
    for index, (message, want) in enumerate(zip(messages, expected)):
        body = json.loads(message.body)
        assert message.routing_key == want["event"] == body["event"]
        assert message.content_type == "application/json"
        assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
        assert message.message_id == body["event_id"] == events[index].id
        assert message.timestamp is not None
        ignore = ("event_id", "ts") if want["event"] in WALL_CLOCK_EVENTS else ("event_id",)
        assert differences(body, want, ignore=ignore) == [], f"message {index} ({want['event']})"
    assert endpoint.published == len(expected) and endpoint.spooled == 0
    assert not list((tmp_path / "spool").glob("*.seg"))

@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_default_filter_is_monitords(amqp_url: str, golden: Path, tmp_path: Path) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    wanted = set(MONITORD_EVENTS.split(","))
    expected = [e for e in events if e.name in wanted]
    exchange = unique("streamer-test-default")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        await run_bus(create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?spool={tmp_path}")), events)
        messages = await capture.wait_for(len(expected))
    assert {m.routing_key for m in messages} == {e.name for e in expected} == wanted - {"stampede.job_inst.tag"}
    assert len(expected) < len(events) / 2  # the stream has plenty the filter must drop
    assert [m.message_id for m in messages] == [e.id for e in expected]


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_underscore_routing_keys(amqp_url: str, golden: Path, tmp_path: Path) -> None:
    events = golden_events(golden, "process_wf_success")
    exchange = unique("streamer-test-underscore")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        url = f"{amqp_url}/{exchange}?events=stampede.xwf.*&routing_key=underscore&spool={tmp_path}"
        await run_bus(create_endpoint(EndpointURL.parse(url)), events)
        expected = [e for e in events if e.name.startswith("stampede.xwf.")]
        messages = await capture.wait_for(len(expected))
    assert [m.routing_key for m in messages] == [e.name.replace(".", "_") for e in expected]
    assert [json.loads(m.body)["event"] for m in messages] == [e.name for e in expected]


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_unroutable_messages_are_counted(amqp_url: str, golden: Path, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    events = golden_events(golden, "process_wf_success")[:40]
    exchange = unique("streamer-test-unroutable")
    endpoint = create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?events=*&spool={tmp_path}"))
    await endpoint.open()
    try:
        await endpoint.write(events)
    finally:
        await endpoint.close()
        connection = await aio_pika.connect(amqp_url)
        await (await connection.channel()).exchange_delete(exchange)
        await connection.close()
    assert sum(endpoint.unroutable.values()) == 40 and endpoint.published == 40
    assert "unroutable (no queue bound" in caplog.text and "guest:guest" not in caplog.text


# ---------------------------------------------------------------- broker away: spool, other endpoints keep going

@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_unreachable_broker_spools_and_delivers_later(amqp_url: str, golden: Path, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    forwarder = Forwarder()
    port = await forwarder.start()
    exchange = unique("streamer-test-away")
    spool_dir = tmp_path / "spool"
    amqp = create_endpoint(EndpointURL.parse(f"amqp://guest:guest@127.0.0.1:{port}/%2F/{exchange}?events=*"
                           f"&spool={spool_dir}&retry_max=0.2&drain_timeout=60"))
    jsonl = tmp_path / "copy.jsonl"
    other = create_endpoint(EndpointURL.parse(f"file://{jsonl}?events=*"))
    bus = Bus([make_route(amqp, codec=JSON_LINES), make_route(other, codec=JSON_LINES)])
    try:
        async with Capture(amqp_url, exchange) as capture:
            await capture.start()
            await bus.start()
            for start in range(0, len(events), 100):
                await bus.publish(Batch(events=events[start:start + 100]))
            await bus.drain()
            # the broker is still away: the file endpoint has everything, AMQP holds it on disk
            assert [json.loads(line)["event_id"] for line in jsonl.read_text().splitlines()] == [e.id for e in events]
            assert len(amqp.spool) == len(events) and amqp.spooled == len(events)
            assert capture.messages == [] and forwarder.refused >= 1
            forwarder.up = True
            await bus.close()
            messages = await capture.wait_for(len(events))
        assert bus.error is None
        assert [m.message_id for m in messages] == [e.id for e in events]
        assert amqp.drained == len(events) and amqp.resent == 0
        assert f"127.0.0.1:{port}" in caplog.text and "guest:guest" not in caplog.text
    finally:
        await forwarder.close()


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_full_spool_is_a_clear_error(golden: Path, tmp_path: Path) -> None:
    events = golden_events(golden, "process_wf_success")
    forwarder = Forwarder()
    port = await forwarder.start()
    spool_dir = tmp_path / "spool"
    endpoint = create_endpoint(EndpointURL.parse(f"amqp://guest:s3cret@127.0.0.1:{port}/%2F/x?events=*&spool={spool_dir}"
                               f"&spool_size=20k&retry_max=0.2&drain_timeout=0.3"))
    try:
        await endpoint.open()
        await endpoint.write(events[:10])
        with pytest.raises(EndpointError) as info:
            for _ in range(100):
                await endpoint.write(events)
        message = str(info.value)
        assert f"spool {spool_dir} is full" in message and "spool_size=" in message and "20,480" in message
        assert "s3cret" not in message
        with pytest.raises(EndpointError, match=r"events remain spooled in .*spool.* next run"):
            await endpoint.close()
    finally:
        await forwarder.close()


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_spooled_events_survive_a_restart(amqp_url: str, golden: Path, tmp_path: Path) -> None:
    events = golden_events(golden, "sample_wf_held")
    forwarder = Forwarder()
    port = await forwarder.start()
    exchange = unique("streamer-test-restart")
    url = f"amqp://guest:guest@127.0.0.1:{port}/%2F/{exchange}?events=*&spool={tmp_path}&retry_max=0.2"
    try:
        first = create_endpoint(EndpointURL.parse(url + "&drain_timeout=0.2"))
        await first.open()
        await first.write(events[:60])
        with pytest.raises(EndpointError, match="60 events remain spooled"):
            await first.close()
        async with Capture(amqp_url, exchange) as capture:
            await capture.start()
            forwarder.up = True
            second = create_endpoint(EndpointURL.parse(url))
            await second.open()           # drains the earlier run's events first
            await second.write(events[60:])
            await second.close()
            messages = await capture.wait_for(len(events))
        assert [m.message_id for m in messages] == [e.id for e in events]
    finally:
        await forwarder.close()


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_connection_cut_mid_run_resends_unconfirmed(amqp_url: str, golden: Path, tmp_path: Path) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    forwarder = Forwarder()
    port = await forwarder.start()
    forwarder.up = True
    exchange = unique("streamer-test-cut")
    endpoint = create_endpoint(EndpointURL.parse(f"amqp://guest:guest@127.0.0.1:{port}/%2F/{exchange}?events=*"
                               f"&spool={tmp_path}&retry_max=0.2&window=50"))
    endpoint.unconfirmed_ids = set()
    try:
        async with Capture(amqp_url, exchange) as capture:
            await capture.start()
            await endpoint.open()
            half = len(events) // 2
            await endpoint.write(events[:half])
            forwarder.down()             # network cut: the next batch cannot be confirmed
            await endpoint.write(events[half:])
            assert len(endpoint.spool) > 0
            forwarder.up = True
            await endpoint.close()
            messages = await capture.wait_for(len(events))
        ids = [m.message_id for m in messages]
        assert set(ids) == {e.id for e in events}
        extra = [i for i in set(ids) if ids.count(i) > 1]
        assert set(extra) <= endpoint.unconfirmed_ids
        assert endpoint.connects == 2
    finally:
        await forwarder.close()


# ---------------------------------------------------------------- live tail source

@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_source_tails_an_exchange(amqp_url: str, golden: Path, tmp_path: Path) -> None:
    events = golden_events(golden, "process_wf_failure")
    exchange = unique("streamer-test-tail")
    connection = await aio_pika.connect(amqp_url)
    channel = await connection.channel()
    await channel.declare_exchange(exchange, "topic", durable=True)
    source = AMQPSource(EndpointURL.parse(f"{amqp_url}/{exchange}"), events="stampede.job_inst.*,stampede.inv.end")
    expected = [e for e in events if e.name.startswith("stampede.job_inst.") or e.name == "stampede.inv.end"]
    got: list[Event] = []

    async def consume() -> None:
        async for batch in source.batches():
            got.extend(batch.events)
            if len(got) >= len(expected):
                source.stop()

    task = asyncio.create_task(consume())
    try:
        for _ in range(100):  # until the source's queue is bound
            await asyncio.sleep(0.05)
            if source._connection is not None:
                break
        await asyncio.sleep(0.3)
        endpoint = create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?events=*&spool={tmp_path}&mandatory=false"))
        await endpoint.open()
        await endpoint.write(events)
        await endpoint.close()
        await asyncio.wait_for(task, 30)
    finally:
        task.cancel()
        await source.close()
        await channel.exchange_delete(exchange)
        await connection.close()
    assert [e.id for e in got] == [e.id for e in expected]
    assert [jsonenc.to_dict(e) for e in got] == [jsonenc.to_dict(e) for e in expected]


@pytest.mark.rabbitmq
async def test_source_missing_queue_is_a_clear_error(amqp_url: str) -> None:
    source = AMQPSource(EndpointURL.parse(f"{amqp_url}/x"), queue=unique("streamer-test-nope"))
    with pytest.raises(SourceError, match=r"amqp://guest@127\.0\.0\.1:\d+/%2F/x: NOT_FOUND - no queue"):
        async for _ in source.batches():
            pass
    await source.close()


@pytest.mark.rabbitmq
async def test_bad_credentials_fail_at_open(amqp_url: str, tmp_path: Path) -> None:
    url = amqp_url.replace("guest:guest", "guest:wrong-pw-123") + f"/x?spool={tmp_path}"
    endpoint = create_endpoint(EndpointURL.parse(url))
    with pytest.raises(EndpointError) as info:
        await endpoint.open()
    assert "ACCESS_REFUSED" in str(info.value) and "wrong-pw-123" not in str(info.value)
    await endpoint.close()


async def test_without_spool_an_unreachable_broker_fails_at_open(tmp_path: Path) -> None:
    forwarder = Forwarder()
    port = await forwarder.start()
    try:
        endpoint = create_endpoint(EndpointURL.parse(f"amqp://u:pw-456@127.0.0.1:{port}/%2F/x?spool=off"))
        with pytest.raises(EndpointError, match=rf"cannot connect to amqp://u@127\.0\.0\.1:{port}/%2F/x") as info:
            await endpoint.open()
        assert "pw-456" not in str(info.value)
    finally:
        await forwarder.close()


def test_tls_options(tmp_path: Path) -> None:
    import ssl

    from streamer.endpoints.amqp.endpoint import tls_context

    strict = tls_context({})
    assert strict.verify_mode == ssl.CERT_REQUIRED and strict.check_hostname
    loose = tls_context({"verify": "false"})
    assert loose.verify_mode == ssl.CERT_NONE and not loose.check_hostname
    with pytest.raises(FileNotFoundError):
        tls_context({"cafile": str(tmp_path / "missing-ca.pem")})
