"""No loss under connection faults: >= 50,000 events to the real RabbitMQ while `rabbitmqctl
close_all_connections` cuts the endpoint's connection (at least twice).

The test runs in a vhost of its own so that closing "all connections" of that
vhost touches nobody else on the shared broker, and reads back from a durable
queue (a consumer connection in the vhost would be cut too). Afterwards every
event id is there at least once, and every id seen more often than it was
sent belongs to a message the endpoint had sent without getting its confirm.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import aio_pika
import pytest

from streamer.endpoints import create_endpoint
from streamer.events import Event, bp
from tests.support.amqphelp import unique
from tests.conftest import AMQP_HOST, AMQP_PORT, unavailable

pytestmark = [pytest.mark.rabbitmq, pytest.mark.corpus]

TOTAL = 50_000
BATCH = 1_000


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def vhost(amqp_url: str) -> str:
    if shutil.which("rabbitmqctl") is None:
        unavailable("rabbitmqctl not found (needed to cut connections)")
    name = unique("streamer-test-fault")
    try:
        rabbitmqctl("add_vhost", name)
    except subprocess.CalledProcessError as exc:
        unavailable(f"rabbitmqctl cannot manage the broker: {exc.stderr.decode(errors='replace').strip()}")
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    yield name
    rabbitmqctl("delete_vhost", name)


def corpus_events(corpus: Path) -> list[Event]:
    """The corpus streams repeated until TOTAL, each copy made distinct by a `rep` field."""
    base: list[Event] = []
    for path in sorted((corpus / "bp").glob("*.bp")):
        for line in path.read_text(errors="replace").splitlines():
            if line.strip():
                try:
                    base.append(bp.parse_line(line))
                except ValueError:
                    continue
    out: list[Event] = []
    rep = 0
    while len(out) < TOTAL:
        out.extend(Event(e.name, {**e.fields, "rep": rep}) for e in base)
        rep += 1
    return out[:TOTAL]


async def cut_connections(vhost: str) -> None:
    process = await asyncio.create_subprocess_exec(
        "rabbitmqctl", "-q", "close_all_connections", "--vhost", vhost, "test",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await process.communicate()
    assert process.returncode == 0, err.decode(errors="replace")


async def test_no_loss_when_connections_are_cut(vhost: str, corpus: Path, tmp_path: Path) -> None:
    events = corpus_events(corpus)
    sent = Counter(e.id for e in events)
    base = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{quote(vhost, safe='')}"
    exchange, queue_name = "workflows", "fault-capture"
    connection = await aio_pika.connect(base)
    channel = await connection.channel()
    exchange_obj = await channel.declare_exchange(exchange, "topic", durable=True)
    queue = await channel.declare_queue(queue_name, durable=True)
    await queue.bind(exchange_obj, "#")
    await connection.close()

    endpoint = create_endpoint(f"{base}/{exchange}?events=*&spool={tmp_path}&retry_max=0.5&window=500")
    endpoint.unconfirmed_ids = set()
    await endpoint.open()
    cuts: list[asyncio.Task[None]] = []
    for start in range(0, TOTAL, BATCH):
        if start in (TOTAL // 5, TOTAL // 2):
            cuts.append(asyncio.create_task(cut_connections(vhost)))
        if start in (2 * TOTAL // 5, 4 * TOTAL // 5):
            await cuts[-1]  # the cut surely happened while events were still being written
            await asyncio.sleep(0.2)
        await endpoint.write(events[start:start + BATCH])
    await endpoint.close()
    assert len(cuts) == 2 and all(t.done() for t in cuts)
    assert endpoint.connects >= 3, "the connection was not cut twice"

    received: Counter[str] = Counter()
    connection = await aio_pika.connect(base)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=5000)
    queue = await channel.declare_queue(queue_name, durable=True, passive=True)
    waiting = queue.declaration_result.message_count
    assert waiting >= TOTAL
    async with queue.iterator(no_ack=True) as messages:
        async for message in messages:
            received[message.message_id] += 1
            waiting -= 1
            if waiting == 0:
                break
    await connection.close()
    print(f"connects={endpoint.connects} spooled={endpoint.spooled} resent={endpoint.resent} "
          f"received={sum(received.values())} unconfirmed={len(endpoint.unconfirmed_ids)}")

    missing = [i for i in sent if received[i] < sent[i]]
    assert missing == []
    duplicated = {i for i in received if received[i] > sent[i]}
    assert duplicated <= endpoint.unconfirmed_ids
    assert sum(received.values()) >= TOTAL
