"""deploy/rabbitmq/definitions.json on the machine's real RabbitMQ.

The definitions are rendered by deploy/rabbitmq/render-definitions.sh (the
script the container runs), then imported into a vhost and users of their own,
named for this test run (the broker is shared: `/` and guest are never
touched), and deleted afterwards. Events are published as streamer publishes
them: routing key = event name, JSON body with `event_id`, `message_id` = the
stable id.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, AsyncIterator, Iterator
from urllib.parse import quote

import aio_pika
import aiormq
import pytest

from streamer.events import bp, jsonenc
from tests.conftest import AMQP_HOST, AMQP_PORT, unavailable

ROOT = Path(__file__).resolve().parents[2]
RABBIT = ROOT / "deploy" / "rabbitmq"
EXCHANGE = "workflows"
QUEUE = "workflows-es"
USERS = ("admin", "streamer", "logstash", "viewer", "collector")
PASSWORD_VARS = {"admin": "RABBITMQ_ADMIN_PASSWORD", "streamer": "STREAMER_AMQP_PASSWORD",
                 "logstash": "LOGSTASH_AMQP_PASSWORD", "viewer": "VIEWER_AMQP_PASSWORD",
                 "collector": "COLLECTOR_AMQP_PASSWORD"}

# What the Logstash queue must NOT receive: the static workflow description
# (kept in the Stampede DB, not in Elasticsearch). Everything else in the
# golden streams is indexed.
NOT_INDEXED = {
    "stampede.static.start", "stampede.static.end", "stampede.static.meta.start", "stampede.static.meta.end",
    "stampede.task.info", "stampede.task.edge", "stampede.job.info", "stampede.job.edge",
    "stampede.wf.map.task_job", "stampede.rc.meta", "stampede.rc.pfn",
}

pytestmark = [pytest.mark.rabbitmq, pytest.mark.corpus]


class Deployment:
    """The definitions imported under unique names, with their passwords."""

    def __init__(self, suffix: str) -> None:
        self.vhost = f"streamer-deploy-test-{suffix}"
        self.users = {name: f"{name}-{suffix}" for name in USERS}
        self.passwords = {name: secrets.token_urlsafe(12) + "&/" for name in USERS}

    def url(self, who: str) -> str:
        user = quote(self.users[who], safe="")
        password = quote(self.passwords[who], safe="")
        return f"amqp://{user}:{password}@{AMQP_HOST}:{AMQP_PORT}/{quote(self.vhost, safe='')}"

    def rename(self, defs: dict[str, Any]) -> dict[str, Any]:
        """The file's vhost and users under this run's names (nothing else changes)."""
        assert [v["name"] for v in defs["vhosts"]] == ["pegasus"]
        renamed = json.loads(json.dumps(defs))
        for section in ("permissions", "topic_permissions", "policies", "exchanges", "queues", "bindings"):
            for item in renamed.get(section, []):
                assert item["vhost"] == "pegasus"
                item["vhost"] = self.vhost
                if "user" in item:
                    item["user"] = self.users[item["user"]]
        renamed["vhosts"] = [{"name": self.vhost}]
        for user in renamed["users"]:
            user["name"] = self.users[user["name"]]
        return renamed


def _rabbitmqctl(*args: str) -> str:
    done = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"rabbitmqctl {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def _import(defs: dict[str, Any]) -> None:
    """Import through a file the broker's user can read (Debian's rabbitmqctl runs as
    `rabbitmq`, who cannot enter pytest's private tmp dirs); removed right after."""
    folder = Path(tempfile.mkdtemp(prefix="streamer-deploy-"))
    try:
        folder.chmod(0o755)
        path = folder / "definitions.json"
        path.write_text(json.dumps(defs))
        path.chmod(0o644)  # this run's throwaway passwords only
        _rabbitmqctl("import_definitions", str(path))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def render(tmp_path: Path, passwords: dict[str, str]) -> dict[str, Any]:
    target = tmp_path / "definitions.json"
    env = {"PATH": os.environ["PATH"], "DEFINITIONS_TEMPLATE": str(RABBIT / "definitions.json"),
           "DEFINITIONS_TARGET": str(target)}
    env.update({PASSWORD_VARS[who]: pw for who, pw in passwords.items()})
    subprocess.run(["bash", str(RABBIT / "render-definitions.sh")], env=env, check=True, timeout=30)
    assert target.stat().st_mode & 0o077 == 0  # rendered with passwords: owner-only
    return json.loads(target.read_text())


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    from tests.conftest import port_open

    if not port_open(AMQP_HOST, AMQP_PORT):
        unavailable(f"RabbitMQ not reachable at {AMQP_HOST}:{AMQP_PORT}")
    if shutil.which("rabbitmqctl") is None:
        unavailable("rabbitmqctl not found (needed to import definitions)")
    tmp = tmp_path_factory.mktemp("rabbit")
    dep = Deployment(secrets.token_hex(4))
    defs = dep.rename(render(tmp, dep.passwords))
    try:
        _import(defs)
        deadline = time.monotonic() + 30
        while QUEUE not in _rabbitmqctl("list_queues", "-q", "-p", dep.vhost, "name").split():
            assert time.monotonic() < deadline, "definitions import did not create the queue"
            time.sleep(0.2)
        yield dep
    finally:
        subprocess.run(["rabbitmqctl", "delete_vhost", dep.vhost], capture_output=True, timeout=60)
        for user in dep.users.values():
            subprocess.run(["rabbitmqctl", "delete_user", user], capture_output=True, timeout=60)


@pytest.fixture
async def purged(deployment: Deployment) -> AsyncIterator[Deployment]:
    """The deployment with an empty Logstash queue before and after the test."""
    _rabbitmqctl("purge_queue", "-p", deployment.vhost, QUEUE)
    yield deployment
    _rabbitmqctl("purge_queue", "-p", deployment.vhost, QUEUE)


def golden_events(golden: Path) -> list[Any]:
    return [bp.parse_line(line) for path in sorted(golden.glob("*.bp"))
            for line in path.read_text().splitlines() if line.strip()]


def expected(events: list[Any]) -> Counter[str]:
    return Counter(e.id for e in events if e.name not in NOT_INDEXED)


async def publish(url: str, events: list[Any], routing_key: Any = None) -> None:
    """Publish like streamer: persistent, confirmed, message_id = stable id."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.declare_exchange(EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True)
        for event in events:
            message = aio_pika.Message(jsonenc.dumps(event), message_id=event.id, content_type="application/json",
                                       delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            await exchange.publish(message, routing_key=routing_key or event.name)


async def drain(url: str) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """Everything in the Logstash queue, read as the logstash user (passive, as Logstash does)."""
    connection = await aio_pika.connect(url)
    messages = []
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(QUEUE, passive=True)
        while (message := await queue.get(no_ack=False, fail=False)) is not None:
            await message.ack()
            messages.append(message)
    return messages


def check_messages(messages: list[Any], events: list[Any]) -> None:
    assert Counter(m.message_id for m in messages) == expected(events)
    by_id = {e.id: e for e in events}
    for message in messages:
        body = json.loads(message.body)
        assert body["event_id"] == message.message_id
        assert body["event"] == message.routing_key
        assert body == json.loads(jsonenc.dumps(by_id[message.message_id]))


# ---------------------------------------------------------------- tests

def test_definitions_shape() -> None:
    """Least privilege as written in the file (the broker tests below prove it)."""
    defs = json.loads((RABBIT / "definitions.json").read_text())
    perms = {p["user"]: (p["configure"], p["write"], p["read"]) for p in defs["permissions"]}
    assert perms["streamer"] == ("^workflows$", "^workflows$", "^$")
    assert perms["logstash"] == ("^$", "^$", "^workflows-es$")
    assert all(u["password"].startswith("${") for u in defs["users"])  # no secret in the file
    assert [(e["name"], e["type"], e["durable"]) for e in defs["exchanges"]] == [(EXCHANGE, "topic", True)]
    assert perms["collector"] == ("^$", "^$", "^workflows-db$")
    assert [(q["name"], q["durable"], q["auto_delete"], q["arguments"]) for q in defs["queues"]] == [
        (QUEUE, True, False, {}), ("workflows-db", True, False, {"x-single-active-consumer": True})]


def test_render_refuses_missing_and_unsafe_passwords(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "DEFINITIONS_TEMPLATE": str(RABBIT / "definitions.json"),
           "DEFINITIONS_TARGET": str(tmp_path / "out.json")}
    for name in PASSWORD_VARS.values():
        env[name] = "fine"
    env["VIEWER_AMQP_PASSWORD"] = ""
    done = subprocess.run(["bash", str(RABBIT / "render-definitions.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "VIEWER_AMQP_PASSWORD is not set" in done.stderr
    env["VIEWER_AMQP_PASSWORD"] = 'a"b'
    done = subprocess.run(["bash", str(RABBIT / "render-definitions.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "must not contain" in done.stderr
    assert not (tmp_path / "out.json").exists()


async def test_queue_receives_exactly_the_indexed_events(purged: Deployment, golden: Path) -> None:
    events = golden_events(golden)
    await publish(purged.url("streamer"), events)
    messages = await drain(purged.url("logstash"))
    names = {m.routing_key for m in messages}
    assert names == {e.name for e in events} - NOT_INDEXED
    # 560 golden events less 197 static ones (job/task info and edges, rc.*, static.*)
    assert len(messages) == sum(expected(events).values()) == 363
    check_messages(messages, events)


async def test_publisher_cannot_read_or_stray(purged: Deployment, golden: Path) -> None:
    event = golden_events(golden)[0]
    # the publisher may not consume the Logstash queue
    connection = await aio_pika.connect(purged.url("streamer"))
    async with connection:
        channel = await connection.channel()
        with pytest.raises(aiormq.exceptions.ChannelAccessRefused):
            queue = await channel.declare_queue(QUEUE, passive=True)
            await queue.get(fail=False)
    # nor publish outside stampede.* (topic permission)
    with pytest.raises(aiormq.exceptions.AMQPError):
        await publish(purged.url("streamer"), [event], routing_key="other.event")
    assert await drain(purged.url("logstash")) == []


async def test_logstash_cannot_publish_or_declare(purged: Deployment, golden: Path) -> None:
    event = golden_events(golden)[0]
    connection = await aio_pika.connect(purged.url("logstash"))
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        with pytest.raises(aiormq.exceptions.AMQPError):
            exchange = await channel.get_exchange(EXCHANGE)
            await exchange.publish(aio_pika.Message(jsonenc.dumps(event)), routing_key=event.name)
    connection = await aio_pika.connect(purged.url("logstash"))
    async with connection:
        channel = await connection.channel()
        with pytest.raises(aiormq.exceptions.ChannelAccessRefused):
            await channel.declare_queue("logstash-own-queue", durable=True)


async def test_viewer_can_tail_through_a_private_queue(purged: Deployment, golden: Path) -> None:
    events = golden_events(golden)[:20]
    connection = await aio_pika.connect(purged.url("viewer"))
    async with connection:
        channel = await connection.channel()
        private = await channel.declare_queue(exclusive=True)  # server-named amq.gen-...
        await private.bind(EXCHANGE, routing_key="stampede.#")
        await publish(purged.url("streamer"), events)
        got = []
        for _ in range(200):
            message = await private.get(no_ack=True, fail=False)
            if message is None:
                if len(got) == len(events):
                    break
                await asyncio.sleep(0.05)
                continue
            got.append(message.message_id)
        assert got == [e.id for e in events]
        with pytest.raises(aiormq.exceptions.ChannelAccessRefused):
            await channel.declare_queue(QUEUE, passive=True)
            await (await channel.get_queue(QUEUE)).get(fail=False)


async def test_guest_has_no_access_to_the_vhost(deployment: Deployment) -> None:
    url = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{quote(deployment.vhost, safe='')}"
    with pytest.raises(aiormq.exceptions.AMQPError):
        connection = await aio_pika.connect(url)
        await connection.close()


def test_streamer_load_fills_the_queue(purged: Deployment, golden: Path, python: str) -> None:
    """`streamer load` through the AMQP endpoint, exactly as a user runs it."""
    files = [str(p) for p in sorted(golden.glob("*.bp"))]
    url = f"{purged.url('streamer')}/{EXCHANGE}?events=*"
    done = subprocess.run([python, "-m", "streamer", "load", *files, "--dest", url, "-q"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert purged.passwords["streamer"] not in done.stdout + done.stderr
    messages = asyncio.run(drain(purged.url("logstash")))
    check_messages(messages, golden_events(golden))
